//! `scaffold-aip conform` judges this example conformant with its manifest (issue #19).

use std::path::Path;

use acp_conform::{Config, Outcome, failed};

#[test]
fn the_example_passes_the_conformance_suite_with_its_manifest() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("ACP.md");
    let config = Config {
        expected_initialize: Some(acp_conform::manifest_initialize(&manifest).expect("the manifest explains")),
        ..Config::new(vec![env!("CARGO_BIN_EXE_echo-server").into()])
    };
    let verdicts = acp_conform::run(config).expect("the suite runs");
    assert_eq!(failed(&verdicts), Vec::<&str>::new(), "{verdicts:#?}");
    // Tier basic writes no audit log: `audit.chain` is the one check that does not apply.
    let skipped: Vec<_> = verdicts
        .iter()
        .filter(|v| v.outcome != Outcome::Pass)
        .map(|v| v.id)
        .collect();
    assert_eq!(skipped, vec!["audit.chain"], "{verdicts:#?}");
}
