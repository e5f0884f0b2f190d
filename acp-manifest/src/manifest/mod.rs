//! AIP-44 manifests: the model, its generated schema, the checks, and what a checked
//! manifest means (effective capabilities, refs, revision).

pub mod capabilities;
pub mod check;
pub mod model;
pub mod refs;
pub mod rules;
pub mod schema_check;
pub mod versions;

pub use capabilities::EffectiveCapabilities;
pub use check::{Checked, check_bytes, check_file};
pub use model::*;
