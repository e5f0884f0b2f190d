//! An operator served in process by a [`Listener`] (WebSocket and Streamable HTTP on `/acp`)
//! on a loopback port, auditing into memory, with tokens for alice and bob: the server side
//! of the remote tests (`websocket.rs`, `http.rs`).

use std::net::SocketAddr;
use std::time::Duration;

use agentacp::audit::{AuditLog, MemorySink};
use agentacp::auth::TokenStore;
use agentacp::server::ServerOptions;
use agentacp::server::websocket::{ListenOptions, Listener};

/// Alice's bearer token in [`tokens`].
pub const ALICE: &str = "alice-token-0123456789";
/// Bob's bearer token in [`tokens`].
pub const BOB: &str = "bob-token-9876543210";

/// How long the listener may take to drain at [`Listening::shut_down`].
const DRAIN: Duration = Duration::from_secs(20);

/// Tokens for alice and bob.
pub fn tokens() -> TokenStore {
    let file = tempfile::NamedTempFile::new().unwrap();
    let line = |id: &str, token: &str| format!("{id} {}\n", agentacp::auth::hash_token(token));
    std::fs::write(file.path(), line("alice", ALICE) + &line("bob", BOB)).unwrap();
    TokenStore::from_file(file.path()).unwrap()
}

/// A token file of these identities and tokens (in a folder of its own), and a store reading
/// it; [`write_tokens`] changes it (revokes, rotates).
pub fn token_file(entries: &[(&str, &str)]) -> (tempfile::TempDir, TokenStore, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens");
    write_tokens(&file, entries);
    let store = TokenStore::from_file(&file).unwrap();
    (dir, store, file)
}

/// Writes the token file anew (the store reads it again at its next check).
pub fn write_tokens(file: &std::path::Path, entries: &[(&str, &str)]) {
    let lines: String = entries
        .iter()
        .map(|(id, token)| format!("{id} {}\n", agentacp::auth::hash_token(token)))
        .collect();
    std::fs::write(file, lines).unwrap();
}

/// A listener serving an operator until [`shut_down`](Listening::shut_down).
pub struct Listening {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its audit log's records.
    pub sink: MemorySink,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<agentacp::Result<()>>,
    /// The workspace root and the state folder.
    dirs: (tempfile::TempDir, tempfile::TempDir),
}

impl Listening {
    /// Serves `operator` on `127.0.0.1:0` with the listen options `listen` makes.
    pub async fn start<O>(operator: O, listen: impl FnOnce(ListenOptions) -> ListenOptions) -> Listening
    where
        O: agentacp::server::Operator + agentacp::server::OffersWebSocket,
    {
        Listening::start_with_options(operator, listen, |options| options).await
    }

    /// [`start`](Self::start), with the server options `configure` makes of the harness's.
    pub async fn start_with_options<O>(
        operator: O,
        listen: impl FnOnce(ListenOptions) -> ListenOptions,
        configure: impl FnOnce(ServerOptions) -> ServerOptions,
    ) -> Listening
    where
        O: agentacp::server::Operator + agentacp::server::OffersWebSocket,
    {
        let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let sink = MemorySink::new();
        let options = configure(ServerOptions {
            audit: Some(AuditLog::with_sink(Box::new(sink.clone()))),
            ..ServerOptions::default()
                .workspace_root(dirs.0.path())
                .state_dir(dirs.1.path())
        });
        let listener = Listener::bind(listen(ListenOptions::new("127.0.0.1:0".parse().unwrap())))
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(listener.serve(operator, options, async move {
            let _ = stopped.await;
        }));
        Listening {
            addr,
            sink,
            stop: Some(stop),
            task,
            dirs,
        }
    }

    /// The workspace root, as a session's `cwd`.
    pub fn cwd(&self) -> String {
        self.dirs.0.path().canonicalize().unwrap().display().to_string()
    }

    /// The audit records so far; the chain verifies.
    pub fn audited(&self) -> Vec<serde_json::Value> {
        agentacp::audit::verify(self.sink.contents().as_bytes()).expect("the chain verifies");
        self.sink
            .lines()
            .iter()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    /// Whether a record of `action` is written within [`WAIT`](super::WAIT) (polled: the
    /// audit log is a sink, not a channel).
    pub async fn recorded(&self, action: &str) -> bool {
        tokio::time::timeout(super::WAIT, async {
            while !self.audited().iter().any(|r| r["action"] == action) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .is_ok()
    }

    /// Stops the listener and waits for it to drain.
    pub async fn shut_down(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(DRAIN, &mut self.task)
            .await
            .expect("the listener drained in time")
            .unwrap()
            .unwrap();
    }
}

/// What the `test-remote` operators of the remote tests do with a prompt: `/flood` streams
/// until cancelled, `/wait` says `waiting` and waits to be cancelled, `/write` runs an edit
/// tool call (asking the client), anything else is answered `hello <identity>`.
pub async fn scripted_prompt(
    turn: &mut agentacp::prelude::Turn<'_, agentacp::prelude::GovernanceAware>,
    request: agentacp::prelude::wire::PromptRequest,
) -> agentacp::Result<agentacp::prelude::wire::StopReason> {
    use agentacp::prelude::{ToolKind, wire::StopReason};
    let text = serde_json::to_value(&request.prompt).unwrap_or_default().to_string();
    if text.contains("/flood") {
        // Streams until cancelled (or its connection is given up).
        let chunk = "x".repeat(1024);
        while !turn.is_cancelled() {
            if turn.message(&chunk).await.is_err() {
                break;
            }
        }
        return Ok(StopReason::Cancelled);
    }
    if text.contains("/wait") {
        // Runs until cancelled (by the client, its connection ending, or a revocation).
        turn.message("waiting").await?;
        turn.cancelled().await;
        return Ok(StopReason::Cancelled);
    }
    if text.contains("/write") {
        let outcome = turn
            .tool_call("write", serde_json::json!({}))
            .kind(ToolKind::Edit)
            .run(|_| async move { Ok::<_, String>(serde_json::json!({"written": true})) })
            .await?;
        turn.message(&format!("{outcome:?}")).await?;
        return Ok(StopReason::EndTurn);
    }
    let who = turn.session().identity().map(|id| id.to_string()).unwrap_or_default();
    turn.message(&format!("hello {who}")).await?;
    Ok(StopReason::EndTurn)
}
