//! Our client, `agentacp::client::Client`, drives real agents written with each official ACP
//! SDK over their stdio: the Rust crate `agent-client-protocol` 5 (`src/bin/sdk-agent.rs`),
//! the TypeScript package `@agentclientprotocol/sdk` 2.4.0 (`ts/agent.mjs`) and the Python
//! package `agent-client-protocol` 0.12.1 (`py/agent.py`). The three agents behave alike (see
//! `src/bin/sdk-agent.rs`), so each scenario below runs unchanged against each of them:
//! `rust::*`, `typescript::*`, `python::*`.
//!
//! The TypeScript tests skip (saying so, and passing) without `node` or without
//! `npm ci --prefix interop/ts`; the Python ones without a Python that can `import acp`:
//! `$AGENTACP_PYTHON`, else `interop/py/.venv/bin/python` (`python3 -m venv interop/py/.venv &&
//! interop/py/.venv/bin/pip install -r interop/py/requirements.txt`).
//!
//! Every test runs in its own temporary folders, waits on events (never sleeps), is bounded
//! by [`TEST_TIMEOUT`], closes its client, and checks that the agent was reaped.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use agentacp::client::{AgentCommand, Builtin, Client, ClientOptions, PermissionDecision, PromptEvent, Update};
use agentacp::wire::default as wire;

#[path = "common/turns.rs"]
mod turns;
use turns::{chunks, finish_turn, prompt};

/// The bound on each test's body (the agent's start included: Node and Python are slow to
/// start on a loaded machine).
const TEST_TIMEOUT: Duration = Duration::from_secs(60);

/// One of the SDK agents, ready to start.
#[derive(Debug, Clone)]
struct Sdk {
    /// The `agentInfo.name` it announces.
    agent_name: &'static str,
    command: AgentCommand,
}

/// `src/bin/sdk-agent.rs`, built by cargo with this test.
fn rust_sdk() -> Result<Sdk, String> {
    Ok(Sdk {
        agent_name: "sdk-agent-rust",
        command: AgentCommand::new(env!("CARGO_BIN_EXE_sdk-agent")),
    })
}

/// `ts/agent.mjs` under `node` (checked once per test process).
fn typescript_sdk() -> Result<Sdk, String> {
    static SDK: OnceLock<Result<Sdk, String>> = OnceLock::new();
    SDK.get_or_init(find_typescript_sdk).clone()
}

fn find_typescript_sdk() -> Result<Sdk, String> {
    let ts = Path::new(env!("CARGO_MANIFEST_DIR")).join("ts");
    match std::process::Command::new("node").arg("--version").output() {
        Ok(out) if out.status.success() => {}
        _ => return Err("`node` is not on PATH".into()),
    }
    let sdk = ts.join("node_modules/@agentclientprotocol/sdk");
    if !sdk.is_dir() {
        return Err(format!(
            "{} is absent (run `npm ci --prefix interop/ts`)",
            sdk.display()
        ));
    }
    Ok(Sdk {
        agent_name: "sdk-agent-ts",
        command: AgentCommand::new("node").arg(ts.join("agent.mjs")),
    })
}

/// `py/agent.py` under `$AGENTACP_PYTHON` or the venv's Python (checked once per test
/// process: importing `acp` takes a second or more).
fn python_sdk() -> Result<Sdk, String> {
    static SDK: OnceLock<Result<Sdk, String>> = OnceLock::new();
    SDK.get_or_init(find_python_sdk).clone()
}

fn find_python_sdk() -> Result<Sdk, String> {
    let python = interop::python_with_acp()?;
    let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("py/agent.py");
    Ok(Sdk {
        agent_name: "sdk-agent-py",
        command: AgentCommand::new(python).arg(agent),
    })
}

/// Runs `scenario` against the agent `sdk` within [`TEST_TIMEOUT`], or says why it is skipped.
async fn run<F, Fut>(sdk: Result<Sdk, String>, scenario: F)
where
    F: FnOnce(Sdk) -> Fut,
    Fut: Future<Output = ()>,
{
    let sdk = match sdk {
        Ok(sdk) => sdk,
        Err(why) => {
            interop::skip_without_peer(&why);
            return;
        }
    };
    let name = sdk.agent_name;
    tokio::time::timeout(TEST_TIMEOUT, scenario(sdk))
        .await
        .unwrap_or_else(|_| panic!("the scenario against {name} did not finish within {TEST_TIMEOUT:?}"));
}

/// A fresh temporary folder (canonical), removed on drop: a workspace root, or a place
/// outside it.
struct Folder {
    _tmp: tempfile::TempDir,
    path: PathBuf,
}

impl Folder {
    fn new() -> Self {
        let tmp = tempfile::Builder::new()
            .prefix("agentacp-sdk-agents-")
            .tempdir()
            .expect("a temporary folder");
        let path = tmp.path().canonicalize().expect("the temporary folder canonicalises");
        Folder { _tmp: tmp, path }
    }
}

/// How long [`close`] lets an agent take to exit on its own once its stdin closed. The
/// client's default (1 s) is too short for the Python agent on a loaded machine: idle, its
/// interpreter takes about 0.4 s to exit after EOF; with the test process's other agents and a
/// parallel build it took over 1 s, and was SIGTERMed.
const EXIT_GRACE: Duration = Duration::from_secs(10);

/// Starts the agent in `root`, with `options` confined to `root`.
async fn connect(sdk: &Sdk, root: &Path, mut options: ClientOptions) -> Client {
    options.exit_grace = EXIT_GRACE;
    Client::connect(sdk.command.clone().current_dir(root), options.with_workspace_root(root))
        .await
        .unwrap_or_else(|e| panic!("connecting to {} failed: {e}", sdk.agent_name))
}

/// Closes the client; the agent must have exited on its own once its stdin closed (status 0,
/// within [`EXIT_GRACE`]) and been reaped (no zombie left).
async fn close(client: Client) {
    let pid = client.pid().expect("the agent has a pid");
    let status = client.close().await;
    let status = status.unwrap_or_else(|| panic!("agent {pid} was not reaped"));
    assert!(
        status.success(),
        "agent {pid} exited with {status} after its stdin closed"
    );
    assert!(not_a_zombie(pid), "agent {pid} is a zombie");
}

/// Whether `pid` is gone or at least not a zombie.
fn not_a_zombie(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // "pid (comm) S ...": the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().as_bytes().first() != Some(&b'Z')),
    }
}

// ---- the scenarios ---------------------------------------------------------------------------

/// `initialize`: protocol version 1 and the agent's name; then `session/new` answers.
async fn handshake(sdk: Sdk) {
    let root = Folder::new();
    let client = connect(&sdk, &root.path, ClientOptions::default()).await;
    let initialized = client.initialize_response();
    assert_eq!(initialized.protocol_version, 1);
    let info = initialized.agent_info.as_ref().expect("agentInfo");
    assert_eq!(info.name, sdk.agent_name);
    assert!(!info.version.is_empty());
    let session = client.new_session(&root.path).await.expect("session/new");
    assert!(!session.as_str().is_empty());
    close(client).await;
}

/// A prompt streams its chunks in order, then `end_turn`; the session takes a second prompt.
async fn prompt_streams_chunks_then_end_turn(sdk: Sdk) {
    let root = Folder::new();
    let client = connect(&sdk, &root.path, ClientOptions::default()).await;
    let session = client.new_session(&root.path).await.expect("session/new");

    let (updates, stop) = prompt(&client, &session, "hello from our client").await;
    assert_eq!(
        chunks(&updates),
        ["echo:", " hello", " from", " our", " client"],
        "{updates:#?}"
    );
    assert_eq!(updates.len(), 5, "only message chunks: {updates:#?}");
    assert_eq!(stop, wire::StopReason::EndTurn);

    let (updates, stop) = prompt(&client, &session, "again").await;
    assert_eq!(chunks(&updates), ["echo:", " again"], "{updates:#?}");
    assert_eq!(stop, wire::StopReason::EndTurn);
    close(client).await;
}

/// `/permission`: `tool_call` (pending), the permission request, then the outcome.
/// `approve`: a handler that approves (and records what it was asked); else the default,
/// `RejectAll`.
async fn permission(sdk: Sdk, approve: bool) {
    let root = Folder::new();
    let asked: Arc<Mutex<Vec<wire::RequestPermissionRequest>>> = Arc::default();
    let mut options = ClientOptions::default();
    if approve {
        let record = Arc::clone(&asked);
        options = options.with_permission(move |request: wire::RequestPermissionRequest| {
            record.lock().expect("lock").push(request);
            async { PermissionDecision::Approve }
        });
    }
    let client = connect(&sdk, &root.path, options).await;
    let session = client.new_session(&root.path).await.expect("session/new");
    let (updates, stop) = prompt(&client, &session, "/permission").await;

    let [
        Update::ToolCall(call),
        Update::ToolCallUpdate(outcome),
        Update::MessageChunk(_),
    ] = updates.as_slice()
    else {
        panic!("expected tool_call, tool_call_update, a chunk; got {updates:#?}");
    };
    assert_eq!(call.title, "write-file");
    assert_eq!(call.kind, Some(wire::ToolKind::Edit));
    // `pending` is the default status: an agent may leave it out.
    assert_eq!(
        call.status.unwrap_or(wire::ToolCallStatus::Pending),
        wire::ToolCallStatus::Pending
    );
    assert_eq!(outcome.tool_call_id, call.tool_call_id);
    let (status, said) = if approve {
        (wire::ToolCallStatus::Completed, "approved")
    } else {
        (wire::ToolCallStatus::Failed, "rejected")
    };
    assert_eq!(outcome.status, Some(status), "{updates:#?}");
    assert_eq!(chunks(&updates), [said]);
    assert_eq!(stop, wire::StopReason::EndTurn);

    if approve {
        let asked = asked.lock().expect("lock");
        let [request] = asked.as_slice() else {
            panic!("expected one permission request, got {asked:#?}");
        };
        assert_eq!(request.session_id, session);
        assert_eq!(request.tool_call.tool_call_id, call.tool_call_id);
        let options: Vec<(&str, wire::PermissionOptionKind)> =
            request.options.iter().map(|o| (o.option_id.as_str(), o.kind)).collect();
        assert_eq!(
            options,
            [
                ("allow", wire::PermissionOptionKind::AllowOnce),
                ("reject", wire::PermissionOptionKind::RejectOnce)
            ]
        );
    }
    close(client).await;
}

async fn permission_approved(sdk: Sdk) {
    permission(sdk, true).await;
}

async fn permission_rejected_by_default(sdk: Sdk) {
    permission(sdk, false).await;
}

/// `/wait` waits for `session/cancel`: cancelling the stream ends it with `cancelled`, and
/// the session then takes another prompt.
async fn cancel_ends_the_turn_cancelled(sdk: Sdk) {
    let root = Folder::new();
    let client = connect(&sdk, &root.path, ClientOptions::default()).await;
    let session = client.new_session(&root.path).await.expect("session/new");
    let mut turn = client.prompt_text(&session, "/wait").await.expect("session/prompt");
    match turn.next().await {
        Some(Ok(PromptEvent::Update(update))) if update.text() == Some("waiting") => {}
        other => panic!("expected the chunk `waiting`, got {other:?}"),
    }
    turn.cancel().await.expect("session/cancel");
    let (updates, stop) = finish_turn(turn).await;
    assert!(updates.is_empty(), "no update after `waiting`: {updates:#?}");
    assert_eq!(stop, wire::StopReason::Cancelled);

    let (updates, stop) = prompt(&client, &session, "after").await;
    assert_eq!(chunks(&updates), ["echo:", " after"]);
    assert_eq!(stop, wire::StopReason::EndTurn);
    close(client).await;
}

/// A client that offers `fs/read_text_file` (read-only built-ins), confined to a workspace
/// root, and a session in it.
async fn reading_client(sdk: &Sdk, root: &Path) -> (Client, wire::SessionId) {
    let options = ClientOptions::default().with_handlers(Builtin::read_only());
    let client = connect(sdk, root, options).await;
    let session = client.new_session(root).await.expect("session/new");
    (client, session)
}

/// `/read` of a file inside the workspace root: the agent gets its content.
async fn fs_read_inside_the_root(sdk: Sdk) {
    let root = Folder::new();
    let file = root.path.join("notes.txt");
    std::fs::write(&file, "line one\nline two\n").expect("write the file");
    let (client, session) = reading_client(&sdk, &root.path).await;
    let (updates, stop) = prompt(&client, &session, &format!("/read {}", file.display())).await;
    assert_eq!(chunks(&updates), ["read: line one\nline two\n"], "{updates:#?}");
    assert_eq!(stop, wire::StopReason::EndTurn);
    close(client).await;
}

/// `/read` of a file outside the workspace root: the agent gets `-32602`, not the content.
async fn fs_read_outside_the_root_is_invalid_params(sdk: Sdk) {
    let root = Folder::new();
    let elsewhere = Folder::new();
    let file = elsewhere.path.join("secret.txt");
    std::fs::write(&file, "not for agents").expect("write the file");
    let (client, session) = reading_client(&sdk, &root.path).await;
    let (updates, stop) = prompt(&client, &session, &format!("/read {}", file.display())).await;
    let said = chunks(&updates);
    let [said] = said.as_slice() else {
        panic!("expected one chunk, got {updates:#?}");
    };
    assert!(said.starts_with("error: -32602 "), "{said:?}");
    assert!(!said.contains("not for agents"), "{said:?}");
    assert_eq!(stop, wire::StopReason::EndTurn);
    close(client).await;
}

/// Every scenario against one SDK agent, as a module of tests.
macro_rules! scenarios {
    ($($module:ident => $sdk:expr;)*) => {$(
        mod $module {
            use super::*;

            #[tokio::test]
            async fn handshake() {
                run($sdk, super::handshake).await;
            }

            #[tokio::test]
            async fn prompt_streams_chunks_then_end_turn() {
                run($sdk, super::prompt_streams_chunks_then_end_turn).await;
            }

            #[tokio::test]
            async fn permission_approved() {
                run($sdk, super::permission_approved).await;
            }

            #[tokio::test]
            async fn permission_rejected_by_default() {
                run($sdk, super::permission_rejected_by_default).await;
            }

            #[tokio::test]
            async fn cancel_ends_the_turn_cancelled() {
                run($sdk, super::cancel_ends_the_turn_cancelled).await;
            }

            #[tokio::test]
            async fn fs_read_inside_the_root() {
                run($sdk, super::fs_read_inside_the_root).await;
            }

            #[tokio::test]
            async fn fs_read_outside_the_root_is_invalid_params() {
                run($sdk, super::fs_read_outside_the_root_is_invalid_params).await;
            }
        }
    )*};
}

scenarios! {
    rust => rust_sdk();
    typescript => typescript_sdk();
    python => python_sdk();
}
