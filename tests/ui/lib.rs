//! Nothing: this package exists to run `compile_fail.rs` (trybuild) with `agentacp` as its
//! only dependency, so trybuild's own build stays small.
