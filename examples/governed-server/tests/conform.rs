//! `scaffold-aip conform` judges this example conformant with its manifest (issue #19).

use std::path::Path;

use acp_conform::{AuditSource, Config, Outcome, failed};

#[test]
fn the_example_passes_the_conformance_suite_with_its_manifest() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("ACP.md");
    let scratch = tempfile::tempdir().expect("a temporary folder");
    let audit = scratch.path().join("audit.jsonl");
    // Without --audit-log, the kit finds the log where the manifest's `audit.ref` says; the
    // test keeps the checkout's log untouched and gives the agent a log of its own.
    let from_manifest = acp_conform::manifest_audit(&manifest).expect("the manifest resolves");
    assert!(
        matches!(&from_manifest, AuditSource::File(path) if path.ends_with("audit/governed-server.jsonl")),
        "{from_manifest:?}"
    );
    let mut config = Config {
        audit_log: Some(AuditSource::File(audit.clone())),
        // One tool that runs unasked, one that asks, one that governance denies.
        tool_prompts: vec![
            r#"/tool read-file {"path": "conform.txt"}"#.into(),
            r#"/tool write-file {"path": "conform.txt", "content": "hi"}"#.into(),
            "/tool delete-repo {}".into(),
        ],
        expected_initialize: Some(acp_conform::manifest_initialize(&manifest).expect("the manifest explains")),
        ..Config::new(vec![env!("CARGO_BIN_EXE_governed-server").into()])
    };
    config.launch.env.push(("AGENTACP_AUDIT_LOG".into(), audit.into()));
    let verdicts = acp_conform::run(config).expect("the suite runs");
    assert_eq!(failed(&verdicts), Vec::<&str>::new(), "{verdicts:#?}");
    assert!(verdicts.iter().all(|v| v.outcome == Outcome::Pass), "{verdicts:#?}");
}
