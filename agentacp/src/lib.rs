//! `agentacp` — the crate operator authors depend on.
//!
//! Annotate a struct with [`acp_operator`] and point it at an AIP-44 `ACP.md`; the macro
//! checks the manifest at compile time and generates a handler trait with exactly the methods
//! the manifest's capabilities need. Implement it, call `serve_stdio()`, and the runtime here
//! does the rest: JSON-RPC over stdio ([`jsonrpc`]), the manifest as read at compile time
//! ([`spec`]), the ACP methods it implements ([`methods`]), sessions and turns ([`server`]), governance ([`governance`]), the hash-chained
//! audit log ([`audit`]), and the wire types of the pinned ACP revision ([`wire`]).
//!
//! ```ignore
//! use agentacp::prelude::*;
//!
//! #[acp_operator(manifest = "ACP.md")] // kind: server, tier: basic
//! pub struct Echo;
//!
//! impl EchoServer for Echo {
//!     async fn prompt(&self, turn: &mut Turn<'_, Basic>, request: wire::PromptRequest) -> Result<wire::StopReason> {
//!         turn.message("hello").await?;
//!         Ok(wire::StopReason::EndTurn)
//!     }
//! }
//!
//! fn main() -> agentacp::Result<()> {
//!     Echo.run_stdio()
//! }
//! ```

// No `unsafe` here at all: the system calls that need it are in `acp-process` and
// `agentacp-sandbox` (see the workspace's `unsafe_code` lint).
#![forbid(unsafe_code)]

// Code the macro generates names `::agentacp::…`, in this crate's own tests too.
extern crate self as agentacp;

pub use acp_audit as audit;
/// Bearer-token authentication of remote connections: identities and accepted tokens.
pub mod auth;
pub mod bridge;
pub mod client;
pub mod connection;
pub mod dialect;
pub(crate) mod downstream;
pub mod env;
pub mod error;
pub mod future;
pub mod governance;
pub mod jsonrpc;
#[cfg(feature = "websocket")]
pub(crate) mod listener;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod methods;
pub(crate) mod oversight;
/// Ending every process an agent started, not only the agent: the child subreaper the runtime
/// becomes when it starts an agent, and [`end_all_descendants`](process_tree::end_all_descendants)
/// for a program that started agents to call as it exits (the `acp-process` crate).
pub use acp_process as process_tree;
pub mod database;
pub mod sandbox;
pub mod server;
pub mod spec;
pub(crate) mod subprocess;
pub mod surface;
mod sync;
pub mod tier;
#[cfg(feature = "websocket")]
pub mod websocket;
pub use agentacp_wire as wire;
// The expansion checks a pinned revision's feature through `::agentacp::__require_rev_…!`.
#[doc(hidden)]
pub use agentacp_wire::{
    __require_rev_0fc18323, __require_rev_272bf799, __require_rev_272bf799_v2, __require_rev_b7f00054,
    __require_rev_d9072428,
};

/// `#[acp_operator]` on a `tier: sandboxed` server or bridge calls this: nothing with feature
/// `mcp` (MCP, MCP-over-ACP and the local sandbox), the message as a compile error without it.
#[cfg(feature = "mcp")]
#[doc(hidden)]
#[macro_export]
macro_rules! __require_mcp {
    ($message:literal) => {};
}

/// See the `mcp` feature's variant.
#[cfg(not(feature = "mcp"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __require_mcp {
    ($message:literal) => {
        ::core::compile_error!($message);
    };
}

/// `#[acp_operator]` on a manifest that lists protocol version 2 calls this: nothing with
/// feature `v2` (the runtime's version-2 translation), the message as a compile error without.
#[cfg(feature = "v2")]
#[doc(hidden)]
#[macro_export]
macro_rules! __require_v2 {
    ($message:literal) => {};
}

/// See the `v2` feature's variant.
#[cfg(not(feature = "v2"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __require_v2 {
    ($message:literal) => {
        ::core::compile_error!($message);
    };
}
pub mod workspace;

pub use acp_macros::acp_operator;
pub use error::{Error, Result};

/// What operator code usually needs: the macro, the turn handle, tiers, the default wire
/// revision as `wire`, `json!` and the error type.
pub mod prelude {
    pub use crate::acp_operator;
    pub use crate::error::{Error, Result};
    pub use crate::governance::{Decision, Governance, ToolKind, ToolRequest};
    pub use crate::server::{EditorError, Serve, ServerOptions, SessionContext, TerminalCommand, ToolOutcome, Turn};
    pub use crate::tier::{Basic, GovernanceAware, Sandboxed, V2};
    pub use crate::wire::default as wire;
    pub use serde_json::{Value, json};
}

/// Re-exports for code the macro generates (not a stable API).
#[doc(hidden)]
pub mod __private {
    pub use serde_json;
    pub use serde_json::Value;
    pub use serde_json::value::RawValue;

    pub use crate::future::BoxFuture;
    pub use crate::methods::{
        AgentCapabilities, ClientMethods, ElicitationModes, McpCapabilities, PromptCapabilities, SessionCapabilities,
    };
    pub use crate::spec::{AuditTarget, Bindings, OperatorKind, OperatorSpec};
    pub use crate::surface::{
        Choice, Command, ConfigKind, ConfigOption, Extensions, Mode, Modes, SignIn, SignInKind, Surface,
    };

    /// Whether the full SHA `rev` starts with the manifest's `prefix` (checked at compile time
    /// against a `wire = path` module).
    pub const fn rev_matches(rev: &str, prefix: &str) -> bool {
        let (rev, prefix) = (rev.as_bytes(), prefix.as_bytes());
        if prefix.len() > rev.len() {
            return false;
        }
        let mut i = 0;
        while i < prefix.len() {
            if rev[i] != prefix[i] {
                return false;
            }
            i += 1;
        }
        true
    }

    /// The spec of the stand-in emitted next to manifest errors (never served).
    pub fn stand_in_spec() -> &'static OperatorSpec {
        static SPEC: OperatorSpec = OperatorSpec {
            manifest_path: "",
            name: "invalid",
            id: "invalid",
            version: "0.0.0",
            tier: "basic",
            acp_rev: "",
            protocol_version: 1,
            kind: OperatorKind::Server,
            agent: None,
            client: None,
            bindings: Bindings {
                operator: None,
                governance: None,
                sandbox: None,
            },
            operator: None,
            governance: None,
            sandbox: None,
            audit: AuditTarget::Off,
            editor: ClientMethods::NONE,
            policies: &[],
            surface: crate::surface::Surface::NONE,
            websocket: false,
            elicitation: ElicitationModes::NONE,
            protocol_versions: &[1],
        };
        &SPEC
    }
}
