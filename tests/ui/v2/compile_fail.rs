//! The `#[acp_operator]` compile-time contract of a server whose manifest lists ACP protocol
//! version 2 (issue #48), through the compiler: what version 2 removed is not on its turn
//! (`Turn<'_, V2<tier>>`), so each case in `fail/` must fail to build with exactly its
//! checked-in `.stderr`. Each case's manifest is in the folder next to it named like the case
//! (kebab-case). A package of its own because it needs agentacp's features `rev-272bf799` and
//! `v2` (the other cases, in `tests/ui`, are built without them). Regenerate with
//! `TRYBUILD=overwrite cargo test -p ui-v2-tests`, then read every changed `.stderr`.
//!
//! The pass case, `tests/ui/pass/v2.rs`, is compiled as an ordinary test of `agentacp`
//! (`tests/tiers.rs`).

#[test]
fn compile_fail_v2() {
    trybuild::TestCases::new().compile_fail("fail/*.rs");
}
