//! `scaffold-aip conform` judges this example conformant with its manifest (issue #19).

use std::path::Path;

use acp_conform::{Config, Outcome, failed};

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
    let skipped: Vec<_> = verdicts
        .iter()
        .filter(|v| v.outcome != Outcome::Pass)
        .map(|v| v.id)
        .collect();
    assert_eq!(
        skipped,
        vec![
            "audit.tool-calls",
            "audit.denied-not-on-wire",
            "audit.rejected-not-run",
            "audit.unanswered-not-run"
        ],
        "{verdicts:#?}"
    );
}
