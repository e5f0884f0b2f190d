//! `scaffold-aip conform` judges this example conformant with its manifest (issue #19).

use std::path::Path;

use acp_conform::{Config, Outcome, failed};

#[test]
fn the_example_passes_the_conformance_suite_with_its_manifest() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("ACP.md");
    let scratch = tempfile::tempdir().expect("a temporary folder");
    let audit = scratch.path().join("audit.jsonl");
    let mut config = Config {
        audit_log: Some(audit.clone()),
        expected_initialize: Some(acp_conform::manifest_initialize(&manifest).expect("the manifest explains")),
        ..Config::new(vec![env!("CARGO_BIN_EXE_governed-server").into()])
    };
    config.launch.env.push(("AGENTACP_AUDIT_LOG".into(), audit.into()));
    let verdicts = acp_conform::run(config).expect("the suite runs");
    assert_eq!(failed(&verdicts), Vec::<&str>::new(), "{verdicts:#?}");
    assert!(verdicts.iter().all(|v| v.outcome == Outcome::Pass), "{verdicts:#?}");
}
