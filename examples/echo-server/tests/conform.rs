//! `scaffold-aip conform` judges this example conformant with its manifest (issue #19).

use std::path::Path;

use acp_conform::{Config, failed};

#[test]
fn the_example_passes_the_conformance_suite_with_its_manifest() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("ACP.md");
    let config = Config {
        // The default `audit.kind: governance`: `audit.jsonl` in the state folder the kit gives.
        audit_log: Some(acp_conform::manifest_audit(&manifest).expect("the manifest resolves")),
        expected_initialize: Some(acp_conform::manifest_initialize(&manifest).expect("the manifest explains")),
        ..Config::new(vec![env!("CARGO_BIN_EXE_echo-server").into()])
    };
    let verdicts = acp_conform::run(config).expect("the suite runs");
    assert_eq!(failed(&verdicts), Vec::<&str>::new(), "{verdicts:#?}");
    // Tier basic has no tool calls: the chain of its lifecycle records is checked, the tool
    // call checks have no --tool-prompt and do not apply.
    assert_eq!(
        acp_conform::skipped(&verdicts),
        vec![
            "audit.tool-calls",
            "audit.denied-not-on-wire",
            "audit.rejected-not-run",
            "audit.unanswered-not-run"
        ],
        "{verdicts:#?}"
    );
}

#[path = "../../test-support/ws_server.rs"]
mod ws_server;

use std::time::{Duration, Instant};

use acp_conform::Connect;
use ws_server::WsServer;

const TOKEN: &str = "conform-test-token";

/// The example served over WebSocket with a token, in a temporary workspace root.
fn served(root: &Path) -> WsServer {
    WsServer::start(
        Path::new(env!("CARGO_BIN_EXE_echo-server")),
        &[
            ("AGENTACP_TOKEN", TOKEN.into()),
            ("AGENTACP_WORKSPACE_ROOT", root.into()),
            ("AGENTACP_STATE_DIR", root.join(".state").into()),
        ],
    )
}

fn connecting(url: String, token: Option<&str>, root: &Path) -> Config {
    Config {
        connect: Some(Connect {
            url,
            token: token.map(str::to_string),
            workspace_root: root.to_path_buf(),
        }),
        ..Config::new(Vec::new())
    }
}

#[test]
fn the_example_passes_the_conformance_suite_over_websocket() {
    let root = tempfile::tempdir().expect("a temporary workspace root");
    let server = served(root.path());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("ACP.md");
    let config = Config {
        expected_initialize: Some(acp_conform::manifest_initialize(&manifest).expect("the manifest explains")),
        ..connecting(server.url(), Some(TOKEN), root.path())
    };
    let verdicts = acp_conform::run(config).expect("the suite runs");
    assert_eq!(failed(&verdicts), Vec::<&str>::new(), "{verdicts:#?}");
    // The three checks that need the agent's process, and the `audit.*` checks (no audit log).
    assert_eq!(
        acp_conform::skipped(&verdicts),
        vec![
            "jsonrpc.oversized-frame",
            "turn.sigterm",
            "turn.eof-exit",
            "audit.chain",
            "audit.tool-calls",
            "audit.denied-not-on-wire",
            "audit.rejected-not-run",
            "audit.unanswered-not-run"
        ],
        "{verdicts:#?}"
    );
    // The symlink check made its link in the server's root, and removed it.
    assert!(!root.path().join("conform-link-out").exists());
}

#[test]
fn a_refused_token_or_an_unreachable_server_is_a_start_up_error() {
    let root = tempfile::tempdir().expect("a temporary workspace root");
    let server = served(root.path());

    let error = acp_conform::run(connecting(server.url(), Some("not-the-token"), root.path()))
        .expect_err("a wrong token is refused");
    assert!(error.0.contains("401") && error.0.contains("--token"), "{error}");
    assert!(
        !error.0.contains("not-the-token"),
        "the token is never printed: {error}"
    );

    // Without a token on the upgrade the server admits the connection but serves only
    // `authenticate`: the preflight says a token is wanted.
    let error = acp_conform::run(connecting(server.url(), None, root.path())).expect_err("no token");
    assert!(
        error.0.contains("wants a token") && error.0.contains("--token"),
        "{error}"
    );

    // A port nothing listens on (bound, then released): refused at once.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let port = closed.local_addr().expect("its address").port();
    drop(closed);
    let error = acp_conform::run(connecting(
        format!("ws://127.0.0.1:{port}/acp"),
        Some(TOKEN),
        root.path(),
    ))
    .expect_err("nothing listens");
    assert!(error.0.contains("cannot connect"), "{error}");

    // A port that accepts TCP (the kernel's backlog) but never answers the upgrade: the
    // deadline, not a hang.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let url = format!(
        "ws://127.0.0.1:{}/acp",
        silent.local_addr().expect("its address").port()
    );
    let config = Config {
        timeout: Duration::from_millis(300),
        ..connecting(url, Some(TOKEN), root.path())
    };
    let started = Instant::now();
    let error = acp_conform::run(config).expect_err("no answer to the upgrade");
    assert!(error.0.contains("no answer to the WebSocket upgrade"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());

    let error = acp_conform::run(connecting("wss://127.0.0.1:1/acp".into(), None, root.path())).expect_err("no TLS");
    assert!(error.0.contains("wss:// is not supported"), "{error}");
}
