//! Issue #47, the other direction: the Streamable HTTP servers of the official SDKs, each
//! serving the small agent written with that SDK (`src/bin/sdk-agent.rs`, `ts/agent.mjs`,
//! `py/agent.py`, started with `--listen 127.0.0.1:PORT`):
//!
//! - Rust: `AcpHttpServer` (`agent-client-protocol-http` 5, on axum);
//! - TypeScript: `AcpServer` of `@agentclientprotocol/sdk/experimental/server` 2.4.0 behind
//!   `node:http` (`experimental/node`'s `createNodeHttpHandler`);
//! - Python: `acp.http.asgi.create_asgi_app` of PyPI `agent-client-protocol` 0.12.1 under
//!   `uvicorn` 0.54.0.
//!
//! Our client (`agentacp::client::Client::connect_http`, `our_client_*`) has one conversation
//! with each: `initialize` (the agent's name), `session/new`, an echo streamed as chunks in
//! order then `end_turn`, `/permission` (a `tool_call`, the permission request approved by a
//! handler and answered over a POST carrying the session's `Acp-Session-Id`, then `completed`
//! and `approved`), `/wait` cancelled once its `waiting` chunk arrived (`cancelled`, nothing
//! after), an echo on the same session, and `close` (`DELETE`).
//!
//! The official Rust `HttpClient` runs a like conversation against each server first
//! (`official_client_*`): the harness's known-good client, so that a failure of ours is about
//! ours.
//!
//! The TypeScript tests skip, saying so, without `node` or `interop/ts/node_modules`; the
//! Python ones without a Python that can `import acp, uvicorn`.

use std::ffi::OsString;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol_http::HttpClient;
use agentacp::client::{Client, ClientOptions, PermissionDecision, PromptEvent, Update};
use agentacp::websocket::Dial;
use agentacp::wire::default as wire;
use interop::AgentDirs;
use interop::websocket::WsServer;

#[path = "common/official_http.rs"]
mod official_http;
use official_http::{Script, WAIT, check, converse};
#[path = "common/turns.rs"]
mod turns;
use turns::{chunks, finish_turn, prompt};

/// The bound on each conversation of our client (Node and Python are slow to start on a
/// loaded machine).
const TEST_TIMEOUT: Duration = Duration::from_secs(90);

/// What the SDK agents are asked (see `src/bin/sdk-agent.rs`).
const SDK_AGENT: Script<'static> = Script {
    echo: "hello over http",
    echoed: "echo: hello over http",
    permission: Some("/permission"),
    forever: "/wait",
    started: "waiting",
};

/// One of the SDKs' HTTP servers.
#[derive(Debug, Clone, Copy)]
enum Peer {
    Rust,
    TypeScript,
    Python,
}

impl Peer {
    /// The `agentInfo.name` its agent announces.
    fn agent_name(self) -> &'static str {
        match self {
            Peer::Rust => "sdk-agent-rust",
            Peer::TypeScript => "sdk-agent-ts",
            Peer::Python => "sdk-agent-py",
        }
    }
}

/// The program and arguments that start `peer`'s server (before `--listen`), or why it
/// cannot run here.
fn server_command(peer: Peer) -> Result<(PathBuf, Vec<OsString>), String> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    match peer {
        Peer::Rust => Ok((PathBuf::from(env!("CARGO_BIN_EXE_sdk-agent")), Vec::new())),
        Peer::TypeScript => {
            match Command::new("node").arg("--version").output() {
                Ok(out) if out.status.success() => {}
                _ => return Err("`node` is not on PATH".to_owned()),
            }
            let sdk = here.join("ts/node_modules/@agentclientprotocol/sdk");
            if !sdk.is_dir() {
                return Err(format!(
                    "{} is absent (run `npm ci --prefix interop/ts`)",
                    sdk.display()
                ));
            }
            Ok((PathBuf::from("node"), vec![here.join("ts/agent.mjs").into()]))
        }
        Peer::Python => {
            let python = interop::python_with_acp()?;
            let imports = Command::new(&python)
                .args(["-c", "import uvicorn, acp.http.asgi"])
                .output()
                .is_ok_and(|out| out.status.success());
            if !imports {
                return Err(format!(
                    "{} cannot `import uvicorn` (pip install -r interop/py/requirements.txt)",
                    python.display()
                ));
            }
            Ok((python, vec![here.join("py/agent.py").into()]))
        }
    }
}

/// `peer`'s server listening on a loopback port, or `None` having said why the test skips.
fn start(peer: Peer) -> Option<WsServer> {
    match server_command(peer) {
        Ok((program, args)) => Some(WsServer::start_program(&program, &args, &[], Ipv4Addr::LOCALHOST)),
        Err(why) => {
            interop::skip_without_peer(&why);
            None
        }
    }
}

/// `http://127.0.0.1:PORT`: the official client adds `/acp`.
fn base_url(server: &WsServer) -> String {
    server
        .url()
        .replacen("ws://", "http://", 1)
        .trim_end_matches("/acp")
        .to_string()
}

/// The official Rust `HttpClient` runs `script` against `peer`'s server.
async fn official_client(peer: Peer, script: &Script<'_>) {
    let Some(server) = start(peer) else { return };
    let dirs = AgentDirs::new();
    let http = HttpClient::new(base_url(&server)).expect("a valid URL");
    let (outcome, seen) = converse(http, dirs.project("p"), script).await;
    let context = format!("{peer:?} SDK server\n--- server stderr\n{}", server.stderr_text());
    check(outcome, &seen, script, &context);
    let chunks: Vec<&str> = seen.updates.iter().map(|(_, text)| text.as_str()).collect();
    let said = script.permission.is_some().then_some("approved");
    assert_eq!(chunks.contains(&"approved"), said.is_some(), "{context}\n{chunks:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_client_drives_the_rust_acp_http_server() {
    official_client(Peer::Rust, &SDK_AGENT).await;
}

/// Without the permission turn: the official Rust client (5.0.0) POSTs its answer to the
/// agent's `session/request_permission` without `Acp-Session-Id`, and this server (2.4.0)
/// refuses that `400 Missing Acp-Session-Id` (it wants the session whose stream carried the
/// request): the two official SDKs disagree there. Our client sends it (`our_client_*`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_client_drives_the_typescript_sdk_server() {
    let script = Script {
        permission: None,
        ..SDK_AGENT
    };
    official_client(Peer::TypeScript, &script).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_client_drives_the_python_sdk_server() {
    official_client(Peer::Python, &SDK_AGENT).await;
}

/// Our client's conversation with `peer`'s server (see the module's doc).
async fn our_client(peer: Peer) {
    let Some(server) = start(peer) else { return };
    let context = || format!("{peer:?} SDK server\n--- server stderr\n{}", server.stderr_text());
    tokio::time::timeout(TEST_TIMEOUT, converse_with_ours(peer, &server))
        .await
        .unwrap_or_else(|_| panic!("the conversation did not end within {TEST_TIMEOUT:?}\n{}", context()));
}

async fn converse_with_ours(peer: Peer, server: &WsServer) {
    let context = || format!("{peer:?} SDK server\n--- server stderr\n{}", server.stderr_text());
    let dirs = AgentDirs::new();
    let asked: Arc<Mutex<Vec<wire::RequestPermissionRequest>>> = Arc::default();
    let record = Arc::clone(&asked);
    let options = ClientOptions::default()
        .with_workspace_root(dirs.workspace_root.clone())
        .with_permission(move |request: wire::RequestPermissionRequest| {
            record.lock().expect("lock").push(request);
            async { PermissionDecision::Approve }
        });
    let dial = Dial::new(server.url().replacen("ws://", "http://", 1));
    let client = Client::connect_http(dial, options)
        .await
        .unwrap_or_else(|e| panic!("connecting failed: {e}\n{}", context()));
    let info = client
        .initialize_response()
        .agent_info
        .as_ref()
        .map(|info| info.name.clone());
    assert_eq!(info.as_deref(), Some(peer.agent_name()), "{}", context());
    let session = client
        .new_session(&dirs.project("p"))
        .await
        .unwrap_or_else(|e| panic!("session/new failed: {e}\n{}", context()));

    let (updates, stop) = prompt(&client, &session, "hello over http").await;
    assert_eq!(chunks(&updates), ["echo:", " hello", " over", " http"], "{}", context());
    assert_eq!(stop, wire::StopReason::EndTurn);

    // The permission request comes on the session's stream; its answer is a POST.
    let (updates, stop) = prompt(&client, &session, "/permission").await;
    let [
        Update::ToolCall(call),
        Update::ToolCallUpdate(outcome),
        Update::MessageChunk(_),
    ] = updates.as_slice()
    else {
        panic!(
            "expected tool_call, tool_call_update, a chunk; got {updates:#?}\n{}",
            context()
        );
    };
    assert_eq!(outcome.tool_call_id, call.tool_call_id);
    assert_eq!(
        outcome.status,
        Some(wire::ToolCallStatus::Completed),
        "{updates:#?}\n{}",
        context()
    );
    assert_eq!(chunks(&updates), ["approved"]);
    assert_eq!(stop, wire::StopReason::EndTurn);
    assert_eq!(asked.lock().expect("lock").len(), 1, "one permission request");

    let mut turn = client.prompt_text(&session, "/wait").await.expect("session/prompt");
    match tokio::time::timeout(WAIT, turn.next()).await {
        Ok(Some(Ok(PromptEvent::Update(update)))) if update.text() == Some("waiting") => {}
        other => panic!("expected the chunk `waiting`, got {other:?}\n{}", context()),
    }
    turn.cancel().await.expect("session/cancel");
    let (updates, stop) = finish_turn(turn).await;
    assert!(updates.is_empty(), "no update after `waiting`: {updates:#?}");
    assert_eq!(stop, wire::StopReason::Cancelled, "{}", context());

    let (updates, stop) = prompt(&client, &session, "after").await;
    assert_eq!(chunks(&updates), ["echo:", " after"], "{}", context());
    assert_eq!(stop, wire::StopReason::EndTurn);
    tokio::time::timeout(WAIT, client.close())
        .await
        .unwrap_or_else(|_| panic!("the client did not close in time\n{}", context()));
}

/// Issue #47: our client drives an agent served by the official `AcpHttpServer`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_drives_the_rust_acp_http_server() {
    our_client(Peer::Rust).await;
}

/// Our client drives the TypeScript SDK's server; that server wants `Acp-Session-Id` on the
/// answer to a request that came on a session's stream (the permission request).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_drives_the_typescript_sdk_server() {
    our_client(Peer::TypeScript).await;
}

/// Our client drives the Python SDK's server (ASGI, under uvicorn).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_client_drives_the_python_sdk_server() {
    our_client(Peer::Python).await;
}
