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

/// Issue #45.10: the remote profile served is WebSocket at `/acp`; Streamable HTTP is not
/// served yet. What an SDK's HTTP client sends (a JSON-RPC `initialize` POSTed to `/acp`,
/// asking for JSON or an event stream) gets `426 Upgrade Required`, as `docs/remote.md`
/// says: this test keeps the page true until the HTTP profile lands.
#[test]
fn a_streamable_http_post_to_acp_gets_426_upgrade_required() {
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
    assert_eq!(status, "HTTP/1.1 426 Upgrade Required", "{answer}");
    assert!(
        answer
            .lines()
            .any(|line| line.eq_ignore_ascii_case("upgrade: websocket")),
        "a 426 names the protocol to upgrade to: {answer}"
    );
    assert!(
        answer.contains("WebSocket"),
        "the body says what to use instead: {answer}"
    );
}
