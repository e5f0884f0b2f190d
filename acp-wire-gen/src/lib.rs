//! The upstream ACP wire schema → Rust (`scaffold-aip regen`).
//!
//! The pipeline, one module a stage:
//! 0. [`input`] refuses what the generator must not read (too large, a `$ref` that is not a
//!    local `#/$defs/Name`, a definition name that is no Rust name);
//! 1. [`shape`] classifies every `$defs` entry into one of the constructs the snapshots use;
//! 2. [`plan`] decides each item's Rust form and each field's type and serde behaviour;
//! 3. [`emit`] prints the items with `quote`, [`dispatch`] the typed method enums built from
//!    the [`methods`] table (which binds each method to its types from the `x-method`
//!    annotations, or, in the early revisions that lack them, from the [`routing`] unions);
//! 4. [`generate()`](fn@generate) puts them in one module and formats it with `prettyplease`.
//!
//! See `docs/design/regen.md` for why this is our own generator and not typify.

pub mod dispatch;
pub mod emit;
pub mod generate;
pub mod input;
pub mod methods;
pub mod names;
pub mod plan;
pub mod routing;
pub mod shape;

pub use generate::{GenerateError, Generated, Options, SchemaFiles, generate, generate_files};
pub use methods::{Method, MethodBinding, MethodTable, Side};
pub use shape::{Shape, classify_all};
