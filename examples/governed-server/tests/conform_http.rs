//! `scaffold-aip conform --connect http://…` (issue #47): the suite runs against this example
//! over Streamable HTTP as over WebSocket, on the same listener (`--listen`), with the same
//! verdicts; a refused token and a server that is not there are start-up errors in sentences,
//! within the timeout.

use std::path::Path;
use std::time::Duration;

use acp_conform::{AuditSource, Config, Connect, Outcome, Verdict, failed};

#[path = "../../test-support/ws_server.rs"]
mod ws_server;

const TOKEN: &str = "conform-http-token";

/// The suite's configuration for the server at `url`, with `token`, in `root`.
fn connecting(url: String, token: &str, root: &Path) -> Config {
    Config {
        connect: Some(Connect {
            url,
            token: Some(token.into()),
            workspace_root: root.to_path_buf(),
        }),
        ..Config::new(Vec::new())
    }
}

/// Each check's id and whether it passed, failed or was skipped.
fn outcomes(verdicts: &[Verdict]) -> Vec<(&'static str, &'static str)> {
    let kind = |outcome: &Outcome| match outcome {
        Outcome::Pass => "pass",
        Outcome::Fail(_) => "fail",
        Outcome::Skip(_) => "skip",
    };
    verdicts.iter().map(|v| (v.id, kind(&v.outcome))).collect()
}

#[test]
fn the_example_passes_the_conformance_suite_over_streamable_http_as_over_websocket() {
    let root = tempfile::tempdir().expect("a temporary workspace root");
    let scratch = tempfile::tempdir().expect("a temporary folder");
    let audit = scratch.path().join("audit.jsonl");
    let server = ws_server::WsServer::start(
        Path::new(env!("CARGO_BIN_EXE_governed-server")),
        &[
            ("AGENTACP_TOKEN", TOKEN.into()),
            ("AGENTACP_WORKSPACE_ROOT", root.path().into()),
            ("AGENTACP_STATE_DIR", scratch.path().join("state").into()),
            ("AGENTACP_AUDIT_LOG", audit.clone().into()),
        ],
    );
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("ACP.md");
    let expected = acp_conform::manifest_initialize(&manifest).expect("the manifest explains");
    let suite = |url: String| {
        let config = Config {
            audit_log: Some(AuditSource::File(audit.clone())),
            tool_prompts: vec![
                r#"/tool read-file {"path": "conform.txt"}"#.into(),
                r#"/tool write-file {"path": "conform.txt", "content": "hi"}"#.into(),
                "/tool delete-repo {}".into(),
            ],
            expected_initialize: Some(expected.clone()),
            ..connecting(url, TOKEN, root.path())
        };
        acp_conform::run(config).expect("the suite runs")
    };
    let over_http = suite(format!("http://127.0.0.1:{}/acp", server.port));
    assert_eq!(failed(&over_http), Vec::<&str>::new(), "{over_http:#?}");
    assert_eq!(
        acp_conform::skipped(&over_http),
        vec!["jsonrpc.oversized-frame", "turn.sigterm", "turn.eof-exit"],
        "only the checks that need the agent's process: {over_http:#?}"
    );
    let over_websocket = suite(server.url());
    assert_eq!(outcomes(&over_http), outcomes(&over_websocket), "{over_websocket:#?}");
}

#[test]
fn a_refused_token_or_no_server_is_a_start_up_error_within_the_timeout() {
    let root = tempfile::tempdir().expect("a temporary workspace root");
    let server = ws_server::WsServer::start(
        Path::new(env!("CARGO_BIN_EXE_governed-server")),
        &[
            ("AGENTACP_TOKEN", TOKEN.into()),
            ("AGENTACP_WORKSPACE_ROOT", root.path().into()),
            ("AGENTACP_STATE_DIR", root.path().join(".state").into()),
        ],
    );
    let url = format!("http://127.0.0.1:{}/acp", server.port);
    let error = acp_conform::run(connecting(url, "not-the-token", root.path())).expect_err("a wrong token");
    assert_eq!(
        error.0,
        format!(
            "http://127.0.0.1:{}/acp: 401 Unauthorized: the server refused the token (--token)",
            server.port
        )
    );

    // A port nothing listens on (bound, then released): refused at once.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let port = closed.local_addr().expect("its address").port();
    drop(closed);
    let error = acp_conform::run(connecting(format!("http://127.0.0.1:{port}/acp"), TOKEN, root.path()))
        .expect_err("nothing listens");
    assert!(error.0.starts_with("cannot connect to http://"), "{error}");

    // A port that accepts TCP (the kernel's backlog) but never answers: the deadline, not a
    // hang.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let url = format!(
        "http://127.0.0.1:{}/acp",
        silent.local_addr().expect("its address").port()
    );
    let config = Config {
        timeout: Duration::from_millis(300),
        ..connecting(url, TOKEN, root.path())
    };
    // On a thread of its own, so that a hang fails the test rather than stalling it.
    let (tell, told) = std::sync::mpsc::channel();
    std::thread::spawn(move || tell.send(acp_conform::run(config).map(drop)));
    let error = told
        .recv_timeout(Duration::from_secs(10))
        .expect("the suite gives up within the timeout, not hangs")
        .expect_err("no answer");
    assert!(
        error.0.contains("no answer to the POST initialize within 300 ms"),
        "{error}"
    );
    drop(silent);
}
