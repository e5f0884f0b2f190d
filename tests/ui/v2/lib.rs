//! Nothing: this package exists to run `compile_fail.rs` (trybuild) with `agentacp` and its
//! features `rev-272bf799` and `v2` as its only dependency.
