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
