//! The `#[acp_operator]` compile-time contract, through the compiler: every case in
//! `tests/ui/fail` must fail to build with exactly its checked-in `.stderr`, and every case
//! in `tests/ui/pass` must build and run. Each case's manifest is in the folder next to it
//! named like the case (kebab-case). Regenerate the `.stderr` files with
//! `TRYBUILD=overwrite cargo test -p agentacp --test ui`, then read every one.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("../tests/ui/fail/*.rs");
    cases.pass("../tests/ui/pass/*.rs");
}
