//! `acp-manifest`: the AIP-44 manifest core, shared by `#[acp_operator]` and `scaffold-aip`.
//!
//! It reads `ACP.md` manifests into a located YAML tree ([`yaml`], [`document`]), checks them
//! ([`manifest::check_file`]: every finding at once, each with a stable [`Code`] and a
//! `file:line:column`), and computes what a checked manifest means: the effective ACP
//! capabilities, the resolved refs, the pinned revision ([`revisions`]) — together one typed
//! [`resolved::Resolved`] value — and the explanation ([`explain`]); which methods a capability turns on comes from the one method table,
//! [`methods`]. [`render`] prints findings for people, for JSON and for GitHub annotations.
//!
//! It has no proc-macro types and no command line: the expansion (`acp-expand`) and the CLI
//! (`scaffold-aip`) are thin layers over it, the typify / progenitor pattern.

pub mod codes;
pub mod diagnostic;
pub mod document;
pub mod explain;
pub mod manifest;
pub mod render;
pub mod resolved;
pub mod revisions;
pub mod source;
pub mod yaml;

/// The method table ([`acp_methods`]), which the checks and the expansion read.
pub use acp_methods as methods;
pub use diagnostic::{Code, Diagnostic, Severity};
