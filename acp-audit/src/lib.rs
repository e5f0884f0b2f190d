//! `acp-audit`: the AIP-7 hash-chained audit log shared by the `agentacp` runtime (which
//! writes it, as `agentacp::audit`) and `scaffold-aip audit verify` (which checks it).
//!
//! It is its own crate so that the CLI can verify logs without depending on the runtime.

#[path = "../../agentacp/src/audit/mod.rs"]
mod audit;

pub use audit::*;
