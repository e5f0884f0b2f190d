//! The shared test helpers (the `test-support` crate), and what only the manifest tests need.

pub use test_support::*;

/// Codes about what a file is rather than what it says — its size, its kind — which neither
/// the corpus nor an example in the docs can hold, with the test in
/// `scaffold-aip/tests/hostile.rs` that makes such a file and checks the code instead.
pub const NOT_FROM_TEXT: &[(acp_manifest::Code, &str)] = &[
    (
        acp_manifest::Code::FileTooLarge,
        "a_manifest_one_byte_over_the_limit_is_refused",
    ),
    (acp_manifest::Code::NotARegularFile, "lint_and_explain_refuse_dev_zero"),
];

/// Each code of [`NOT_FROM_TEXT`] has its test in `scaffold-aip/tests/hostile.rs`.
#[test]
fn every_code_no_text_can_show_is_checked_in_hostile_rs() {
    let source = include_str!("../../../scaffold-aip/tests/hostile.rs");
    for (code, test) in NOT_FROM_TEXT {
        assert!(
            source.contains(&format!("fn {test}()")),
            "{code}: no test `{test}` in scaffold-aip/tests/hostile.rs"
        );
    }
}
