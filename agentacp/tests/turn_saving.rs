//! A turn ends as `end_turn` only once its history is saved: a session store that cannot make
//! the turn's updates durable (a database's batch given up on, a disk full) turns the prompt's
//! answer into an error saying so; a mode the client sets is saved before it is answered
//! (issue #49: nothing lost before an acknowledged end of turn or an answered request).

use std::path::Path;
use std::sync::Arc;

use agentacp::prelude::*;
use agentacp::server::{MemoryStore, SessionStore, StoredSession};

mod common;

use common::{Pipe, WAIT};

/// An operator whose manifest stores sessions.
#[acp_operator(manifest = "tests/operators/test-sessions/ACP.md")]
struct Archivist;

ok_server!(ArchivistServer for Archivist, GovernanceAware);

// `Keeper`: an operator whose manifest declares modes, which it lets the client set
// (tests/common).
keeper_operator!();

/// Sessions in memory, whose saving (the end of a turn) fails.
#[derive(Default)]
struct Unsaved(MemoryStore);

impl SessionStore for Unsaved {
    fn create(&self, id: &str, cwd: &Path) -> std::io::Result<()> {
        self.0.create(id, cwd)
    }

    fn append(&self, id: &str, update: &str) -> std::io::Result<()> {
        self.0.append(id, update)
    }

    fn load(&self, id: &str) -> std::io::Result<Option<StoredSession>> {
        self.0.load(id)
    }

    fn flush(&self) -> std::io::Result<()> {
        self.0.flush()
    }

    fn flush_session(&self, _id: &str) -> std::io::Result<()> {
        Err(std::io::Error::other("the disk is full"))
    }
}

/// `operator` over a store that cannot save, initialized, with a session in `root`.
async fn session_on_unsaved(operator: impl agentacp::server::Operator, root: &Path) -> (Pipe, String) {
    let options = ServerOptions {
        workspace_root: Some(root.to_path_buf()),
        store: Some(Arc::new(Unsaved::default())),
        permission_timeout: WAIT,
        ..ServerOptions::default()
    };
    let mut pipe = Pipe::serve(operator, options);
    let params =
        json!({"protocolVersion": 1, "clientInfo": {"name": "test", "version": "1"}, "clientCapabilities": {}});
    pipe.call("initialize", params).await;
    let (_, created) = pipe.call("session/new", json!({"cwd": root, "mcpServers": []})).await;
    let session = created["result"]["sessionId"]
        .as_str()
        .expect("a session id")
        .to_string();
    (pipe, session)
}

#[tokio::test]
async fn a_turn_whose_history_cannot_be_saved_is_answered_with_an_error() {
    let root = tempfile::tempdir().unwrap();
    let (mut pipe, session) = session_on_unsaved(Archivist, root.path()).await;
    let id = pipe.prompt(&session, "hi").await;
    let (_, answer) = pipe.until_answer(id).await;
    assert_eq!(
        answer["error"]["message"], "the turn's updates could not be saved: the disk is full",
        "{answer}"
    );
    pipe.finish().await;
}

/// A mode the client sets is saved before it is answered: when it cannot be, the answer is
/// an error.
#[tokio::test]
async fn a_mode_change_that_cannot_be_saved_is_answered_with_an_error() {
    let root = tempfile::tempdir().unwrap();
    let (mut pipe, session) = session_on_unsaved(Keeper, root.path()).await;
    let (_, answer) = pipe
        .call("session/set_mode", json!({"sessionId": session, "modeId": "code"}))
        .await;
    let said = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(said.contains("the disk is full"), "{answer}");
    pipe.finish().await;
}
