//! The upstream ACP wire schema, read for code generation (`scaffold-aip regen`, issue #3).
//!
//! This first layer turns one revision's `schema.json` + `meta.json` into a model the
//! generator will emit Rust from: every `$defs` entry classified into one of the constructs
//! the snapshots use ([`shape`]), and the method table ([`methods`]). The emitter is not
//! written yet; see `docs/design/regen.md` for why it is our own and not typify.

pub mod methods;
pub mod shape;

pub use methods::{Method, MethodTable, Side};
pub use shape::{Shape, classify_all};
