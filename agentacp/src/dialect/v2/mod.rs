//! ACP v2 (schema-v2.0.0-alpha.3, the built-in revision 272bf799, feature `v2`): the shapes
//! that differ from v1, turned from v1 into v2 ([`shapes`]), and the agent face of a server
//! ([`AgentFace`]).

mod agent_face;
mod batch;
pub mod shapes;

pub use agent_face::AgentFace;

/// The protocol version of this dialect.
pub const VERSION: u16 = crate::wire::rev_272bf799_v2::PROTOCOL_VERSION;
