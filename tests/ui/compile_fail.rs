//! The `#[acp_operator]` compile-time contract, through the compiler: every case in `fail/`
//! must fail to build with exactly its checked-in `.stderr` (manifest errors name
//! `ACP.md:line:column`; code that does not match the manifest is a type error). Each case's
//! manifest is in the folder next to it named like the case (kebab-case). Regenerate with
//! `TRYBUILD=overwrite cargo test -p ui-tests`, then read every changed `.stderr`.
//!
//! The pass cases in `pass/` are compiled as ordinary tests of `agentacp` (`tests/tiers.rs`).
//! The cases of manifests that list protocol version 2 are in `v2/`, a package of its own
//! (`ui-v2-tests`: they need agentacp's features `rev-272bf799` and `v2`).

#[test]
fn compile_fail() {
    trybuild::TestCases::new().compile_fail("fail/*.rs");
}
