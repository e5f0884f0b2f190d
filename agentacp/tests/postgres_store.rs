//! Sessions in PostgreSQL (feature `postgres`, issue #49): servers configured with one database
//! see the same sessions, as replicas of a fleet do, and a database that cannot be reached
//! stops the start-up, naming it. Skipped (saying so) without PostgreSQL's programs; failed
//! under `AGENTACP_REQUIRE_PEERS=1`.
#![cfg(feature = "postgres")]

use agentacp::audit::{AuditLog, MemorySink};
use agentacp::prelude::*;
use serde_json::Value;

mod common;

use common::{Pipe, WAIT, texts};

/// An operator whose manifest offers `session/load` and every optional session method.
#[acp_operator(manifest = "tests/operators/test-sessions/ACP.md")]
struct Archivist;

ok_server!(ArchivistServer for Archivist, GovernanceAware);

/// A server of its own (its own pool, state folder and audit) on database `url`, initialized.
async fn replica(url: &str, root: &std::path::Path, state: &std::path::Path) -> Pipe {
    let options = ServerOptions {
        workspace_root: Some(root.to_path_buf()),
        state_dir: Some(state.to_path_buf()),
        audit: Some(AuditLog::with_sink(Box::new(MemorySink::new()))),
        permission_timeout: WAIT,
        ..ServerOptions::default()
    }
    .database(url);
    let mut pipe = Pipe::serve(Archivist, options);
    let params =
        json!({"protocolVersion": 1, "clientInfo": {"name": "test", "version": "1"}, "clientCapabilities": {}});
    let (_, answer) = pipe.call("initialize", params).await;
    assert_eq!(answer["result"]["agentCapabilities"]["loadSession"], true, "{answer}");
    pipe
}

fn ids(answer: &Value) -> Vec<String> {
    answer["result"]["sessions"]
        .as_array()
        .unwrap_or_else(|| panic!("a list of sessions: {answer}"))
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap().to_string())
        .collect()
}

/// A session made and prompted through one server is listed, loaded (its history replayed)
/// and prompted through another, which shares nothing with the first but the database.
#[tokio::test]
async fn a_session_made_on_one_server_is_listed_loaded_and_prompted_on_another() {
    let Some(cluster) = test_support::postgres::cluster() else {
        return;
    };
    let url = cluster.database("two_servers");
    let root = tempfile::tempdir().unwrap();
    let (state_a, state_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());

    let mut a = replica(&url, root.path(), state_a.path()).await;
    let (_, made) = a
        .call("session/new", json!({"cwd": root.path(), "mcpServers": []}))
        .await;
    let session = made["result"]["sessionId"].as_str().expect("a session id").to_string();
    let id = a.prompt(&session, "hello from a").await;
    let (_, answer) = a.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    a.finish().await;
    assert!(
        !state_a.path().join("sessions").exists(),
        "the sessions are in the database, not in the state folder"
    );

    let mut b = replica(&url, root.path(), state_b.path()).await;
    let (_, listed) = b.call("session/list", json!({})).await;
    assert_eq!(ids(&listed), [session.as_str()], "{listed}");
    let (replayed, loaded) = b
        .call(
            "session/load",
            json!({"sessionId": session, "cwd": root.path(), "mcpServers": []}),
        )
        .await;
    assert!(loaded.get("result").is_some(), "{loaded}");
    assert_eq!(texts(&replayed), ["hello from a", "ok"], "{replayed:?}");
    let id = b.prompt(&session, "and from b").await;
    let (_, answer) = b.until_answer(id).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    b.finish().await;

    // A third server replays both turns.
    let mut c = replica(&url, root.path(), state_a.path()).await;
    let (replayed, _) = c
        .call(
            "session/load",
            json!({"sessionId": session, "cwd": root.path(), "mcpServers": []}),
        )
        .await;
    assert_eq!(texts(&replayed), ["hello from a", "ok", "and from b", "ok"]);
    let (_, deleted) = c.call("session/delete", json!({"sessionId": session})).await;
    assert_eq!(deleted["result"], json!({}), "{deleted}");
    let (_, listed) = c.call("session/list", json!({})).await;
    assert!(ids(&listed).is_empty(), "{listed}");
    c.finish().await;
}

/// A database that cannot be reached stops the start-up with a sentence naming it, without
/// its password; nothing is served.
#[tokio::test]
async fn a_database_that_cannot_be_reached_stops_the_start_naming_it() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let root = tempfile::tempdir().unwrap();
    let options = ServerOptions {
        workspace_root: Some(root.path().to_path_buf()),
        state_dir: Some(root.path().join("state")),
        ..ServerOptions::default()
    }
    .database(format!("postgres://agent:s3cret@127.0.0.1:{port}/agents"));
    let (_keep, input) = tokio::io::duplex(64);
    let serving = agentacp::server::serve(Archivist, options, input, tokio::io::sink());
    let error = tokio::time::timeout(WAIT, serving)
        .await
        .expect("the start-up ends")
        .expect_err("the server does not start");
    let said = error.to_string();
    assert!(
        said.contains(&format!(
            "cannot reach the database at postgres://agent@127.0.0.1:{port}/agents"
        )),
        "{said}"
    );
    assert!(!said.contains("s3cret"), "{said}");
}
