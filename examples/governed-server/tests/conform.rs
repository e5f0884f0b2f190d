//! `scaffold-aip conform` judges this example conformant with its manifest (issue #19).

use std::path::Path;

use acp_conform::{AuditSource, Config, Outcome, failed};

/// One tool that runs unasked, one that asks, one that governance denies.
fn tool_prompts() -> Vec<String> {
    vec![
        r#"/tool read-file {"path": "conform.txt"}"#.into(),
        r#"/tool write-file {"path": "conform.txt", "content": "hi"}"#.into(),
        "/tool delete-repo {}".into(),
    ]
}

#[test]
fn the_example_passes_the_conformance_suite_with_its_manifest() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("ACP.md");
    // Issue #45.5: the manifest's relative `audit.ref` is a file in the agent's state folder
    // (the kit gives it a temporary one), not in this checkout; without --audit-log the kit
    // finds the log there, and the `audit.*` checks read what the agent really wrote.
    let from_manifest = acp_conform::manifest_audit(&manifest).expect("the manifest resolves");
    assert_eq!(
        from_manifest,
        AuditSource::StateFolder("audit/governed-server.jsonl".into())
    );
    let config = Config {
        tool_prompts: tool_prompts(),
        ..Config::new(vec![env!("CARGO_BIN_EXE_governed-server").into()])
    }
    .with_manifest(&manifest)
    .expect("the manifest explains");
    assert_eq!(config.audit_log, Some(from_manifest));
    let verdicts = acp_conform::run(config).expect("the suite runs");
    assert_eq!(failed(&verdicts), Vec::<&str>::new(), "{verdicts:#?}");
    assert!(verdicts.iter().all(|v| v.outcome == Outcome::Pass), "{verdicts:#?}");
}

#[path = "../../test-support/ws_server.rs"]
mod ws_server;

#[test]
fn the_example_passes_the_conformance_suite_over_websocket() {
    const TOKEN: &str = "conform-test-token";
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
    let config = Config {
        connect: Some(acp_conform::Connect {
            url: server.url(),
            token: Some(TOKEN.into()),
            workspace_root: root.path().to_path_buf(),
        }),
        // The server's audit log is a local file: the `audit.*` checks apply.
        audit_log: Some(AuditSource::File(audit)),
        tool_prompts: tool_prompts(),
        expected_initialize: Some(acp_conform::manifest_initialize(&manifest).expect("the manifest explains")),
        ..Config::new(Vec::new())
    };
    let verdicts = acp_conform::run(config).expect("the suite runs");
    assert_eq!(failed(&verdicts), Vec::<&str>::new(), "{verdicts:#?}");
    // `session.load` passes across two connections of the same identity; only the checks
    // that need the agent's process are skipped.
    assert_eq!(
        acp_conform::skipped(&verdicts),
        vec!["jsonrpc.oversized-frame", "turn.sigterm", "turn.eof-exit"],
        "{verdicts:#?}"
    );
}
