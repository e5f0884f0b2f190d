//! One oversight layer for every role: what stands between a tool call and the wire, in this
//! order, each step in one place.
//!
//! 1. **The governance decision** — [`decide`](decide::decide): allow, ask or deny, on every
//!    name the call goes by ([`ToolFacts`]), the strictest winning; a kind the peer claims
//!    may only make it stricter.
//! 2. **The approval question** — [`question`]: a permission request and how its answer
//!    reads ([`outcome`](question::outcome), [`approves`](question::approves)); a client
//!    answers through its [`PermissionHandler`](question::PermissionHandler).
//! 3. **The write-ahead audit record** — [`write_ahead`](record::write_ahead): written before
//!    what it describes is sent; when it fails, nothing is sent.
//! 4. **Then the wire**: the caller sends (the server's turn, the client's reader, the
//!    bridge's relay).
//!
//! Server turns (`server::ToolCall::run`, which the editor's `fs/*` and `terminal/*` and
//! MCP tool calls go through), the client's permission requests and the calls it runs
//! itself (`terminal/create`, its MCP tools: `client::permission`), the bridge and
//! MCP-over-ACP calls ([`mcp_calls`]) all go through these; [`Oversight`] follows the tool
//! calls a client or a bridge receives until their record is written. The approval question
//! is asked by each role its own way (a server asks its client, a client its
//! `PermissionHandler`, a bridge its editor), with the shapes and readings here.
//!
//! An agent's question to the user for structured input ([`elicitation`]) goes through the
//! same steps: governance decides whether it reaches the user at all (a client, a bridge),
//! and each question and answer is recorded before it is sent or acted on.

pub(crate) mod calls;
pub(crate) mod decide;
pub(crate) mod elicitation;
pub(crate) mod facts;
pub(crate) mod mcp_calls;
pub(crate) mod question;
pub(crate) mod record;

pub(crate) use calls::Oversight;
pub use calls::TERMINAL_TOOL;
pub use elicitation::{DeclineAll, Elicitation, ElicitationHandler, ElicitationModes, ElicitationOutcome};
pub(crate) use facts::{ReportsToolCall, ToolFacts};
pub use question::{BoxFuture, PermissionDecision, PermissionHandler, RejectAll};
