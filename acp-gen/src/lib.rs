//! `acp-gen`: the library behind `scaffold-aip` and `#[acp_operator]`.
//!
//! It reads AIP-44 `ACP.md` manifests into a located YAML tree, checks them (every finding
//! at once, each with a stable code and a `file:line:column`), and computes what a checked
//! manifest means: the effective ACP capabilities, the resolved refs, the pinned revision.
//! It has no proc-macro types and no spans of its own: the macro and the CLI are thin
//! adapters over it (the typify / progenitor pattern).

#[cfg(feature = "cli")]
pub mod cli;
pub mod codes;
pub mod diagnostic;
pub mod document;
pub mod explain;
pub mod lint;
pub mod manifest;
pub mod operator;
#[cfg(feature = "cli")]
pub mod regen;
pub mod render;
pub mod revisions;
#[cfg(feature = "cli")]
pub mod scaffold;
pub mod source;
#[cfg(feature = "cli")]
pub mod wire;
pub mod yaml;

pub use diagnostic::{Code, Diagnostic, Severity};
