//! Issue #17: an example server run as a process with `--listen` (as a supervisor runs it),
//! driven by our client over WebSocket: SIGTERM while a turn runs answers the turn
//! `cancelled`, closes the connection and exits 0 promptly, and the audit log verifies with
//! the connection's identity on every record.

use std::time::Duration;

use agentacp::client::{Client, ClientOptions, PromptEvent};
use agentacp::websocket::Dial;
use agentacp::wire::default as wire;
use interop::websocket::{WsServer, test_token};
use interop::{AgentDirs, example_binary};

/// The bound on every wait.
const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_answers_the_running_turn_cancelled_and_the_server_exits_0() {
    const IDENTITY: &str = "ci-runner";
    let dirs = AgentDirs::new();
    let project = dirs.project("p");
    let token = test_token();
    let mut env = dirs.env();
    env.push(("AGENTACP_TOKEN", token.clone().into()));
    env.push(("AGENTACP_TOKEN_IDENTITY", IDENTITY.into()));
    let mut server = WsServer::start(&example_binary("governed-server"), &env);

    let options = ClientOptions::default().with_workspace_root(dirs.workspace_root.clone());
    let client = tokio::time::timeout(
        WAIT,
        Client::connect_websocket(Dial::new(server.url()).token(token), options),
    )
    .await
    .expect("connected in time")
    .expect("connected");
    let session = tokio::time::timeout(WAIT, client.new_session(&project))
        .await
        .unwrap()
        .unwrap();
    let mut turn = tokio::time::timeout(WAIT, client.prompt_text(&session, "/forever"))
        .await
        .unwrap()
        .unwrap();
    // The turn runs: its first tick arrived.
    loop {
        match tokio::time::timeout(WAIT, turn.next()).await.expect("a tick in time") {
            Some(Ok(PromptEvent::Update(update))) if update.text().is_some_and(|t| t.starts_with("tick")) => break,
            Some(Ok(_)) => {}
            other => panic!("the turn ended before its first tick: {other:?}"),
        }
    }

    server.terminate();
    let stop = loop {
        match tokio::time::timeout(WAIT, turn.next())
            .await
            .expect("the turn was answered in time")
        {
            Some(Ok(PromptEvent::Stop(reason))) => break reason,
            Some(Ok(_)) => {}
            other => panic!(
                "the turn ended without a stop reason: {other:?}\n{}",
                server.stderr_text()
            ),
        }
    };
    assert_eq!(stop, wire::StopReason::Cancelled);
    let status = server
        .wait_exit(WAIT)
        .unwrap_or_else(|| panic!("still running after SIGTERM:\n{}", server.stderr_text()));
    assert!(status.success(), "exit {status:?}:\n{}", server.stderr_text());
    assert!(!server.stderr_text().contains("panicked"), "{}", server.stderr_text());
    // The connection is gone with the server.
    assert!(
        tokio::time::timeout(WAIT, client.new_session(&project))
            .await
            .expect("answered in time")
            .is_err()
    );
    tokio::time::timeout(WAIT, client.close())
        .await
        .expect("closed in time");
    interop::audit::check_identity_in_audit_log(&dirs.audit_log, IDENTITY);
}

/// Issue #45.10, then #47: what an SDK's Streamable HTTP client sends first (a JSON-RPC
/// `initialize` POSTed to `/acp`) is served on the WebSocket listener's endpoint: `200`, the
/// answer as JSON, and the connection's id in `Acp-Connection-Id` (as `docs/remote.md` says).
#[test]
fn a_streamable_http_initialize_posted_to_acp_is_answered_with_a_connection_id() {
    use std::io::{Read, Write};
    let dirs = AgentDirs::new();
    let mut env = dirs.env();
    env.push(("AGENTACP_TOKEN", test_token().into()));
    let server = WsServer::start(&example_binary("governed-server"), &env);
    let authority = server
        .url()
        .trim_start_matches("ws://")
        .trim_end_matches("/acp")
        .to_string();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#;
    let request = format!(
        "POST /acp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = std::net::TcpStream::connect(&authority).expect("the server accepts");
    stream.set_read_timeout(Some(WAIT)).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    // The server closes the connection after its answer (or the read times out: a failure).
    let _ = stream.read_to_string(&mut answer);
    let status = answer.lines().next().unwrap_or_default();
    assert_eq!(status, "HTTP/1.1 200 OK", "{answer}");
    assert!(
        answer
            .lines()
            .any(|line| line.to_ascii_lowercase().starts_with("acp-connection-id: ")),
        "the connection is named: {answer}"
    );
    assert!(
        answer.contains(r#""protocolVersion":1"#) && answer.contains(r#""id":1"#),
        "the answer to initialize is the body: {answer}"
    );
}
