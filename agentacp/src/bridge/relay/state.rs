//! What a bridge's two read loops share ([`Relay`]), and what waits for an answer
//! ([`Forwarded`]); kept apart so the MCP-over-ACP part (`mcp.rs`) and the loops (`relay.rs`)
//! both read them without importing each other.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Mutex, RwLock};
use std::time::Instant;

use tokio::sync::Notify;

use super::super::gate::Gate;
use super::super::narrow::Passed;
use super::super::options::BridgeOptions;
use crate::audit::{Approval, AuditLog};
use crate::client::mcp_governance::{AcpMcpServers, McpCall};
use crate::client::oversight::{Oversight, ToolFacts};
use crate::jsonrpc::Id;
use crate::jsonrpc::outbox::Outbox;
use crate::jsonrpc::pending::Pending;
use crate::spec::OperatorSpec;
use crate::subprocess::AgentProcess;
use crate::wire::default as wire;

/// A request forwarded to one side, waiting for its answer.
pub(super) struct Forwarded {
    pub(super) method: String,
    pub(super) session: Option<String>,
    /// When to give up.
    pub(super) deadline: Instant,
    /// For prompts: the deadline also moves with every message from the agent (until the
    /// editor closes its side; then a prompt has the shutdown grace).
    pub(super) idle: bool,
    /// For the agent's permission requests: what governance and audit need at the answer.
    pub(super) permission: Option<(wire::RequestPermissionRequest, ToolFacts)>,
    /// What its answer means for MCP-over-ACP.
    pub(super) mcp: Option<McpWaiting>,
}

/// What a forwarded request's answer means for MCP-over-ACP.
#[derive(Debug)]
pub(super) enum McpWaiting {
    /// A session request of the editor's that listed these `"type": "acp"` servers.
    Session(Vec<String>),
    /// The agent's `mcp/connect` of this server.
    Connect(String),
    /// The agent's `tools/list` on this server.
    List(String),
    /// The agent's `tools/call`, approved so.
    Call(Box<McpCall>, Approval),
}

pub(super) struct Relay {
    pub(super) spec: &'static OperatorSpec,
    pub(super) options: BridgeOptions,
    pub(super) operator: String,
    /// To the editor.
    pub(super) up: Outbox,
    /// To the agent; `None` once closed.
    pub(super) down: RwLock<Option<Outbox>>,
    pub(super) audit: AuditLog,
    /// Governance of tool calls and permission requests, and their audit.
    pub(super) oversight: Oversight,
    /// The agent's capabilities that passed to the editor (`None` until the agent answered
    /// `initialize`): what the editor may call.
    pub(super) agent_passed: Mutex<Option<Passed>>,
    /// The editor's capabilities that passed to the agent (`None` until the editor's
    /// `initialize`): what the agent may call.
    pub(super) client_passed: Mutex<Option<Passed>>,
    /// The editor's requests waiting for the agent.
    pub(super) to_agent: Mutex<HashMap<Id, Forwarded>>,
    /// Answers to the editor's requests taken off `to_agent` and not yet queued for the editor
    /// (changed under the `to_agent` lock when it grows).
    pub(super) answering: AtomicUsize,
    /// Signalled whenever an answer to one of the editor's requests has been queued.
    pub(super) answered: Notify,
    /// The agent's requests waiting for the editor.
    pub(super) to_editor: Mutex<HashMap<Id, Forwarded>>,
    /// When the agent last sent anything: a prompt's deadline is the idle timeout after that.
    pub(super) last_from_agent: Mutex<Instant>,
    /// What the editor may see of each tool call.
    pub(super) gate: Mutex<Gate>,
    /// Whether the editor's `initialize` has been passed on (then a second one is refused).
    pub(super) initialized: AtomicBool,
    /// Whether the editor closed its side: it can no longer answer the agent's requests.
    pub(super) editor_closed: AtomicBool,
    /// Who answers permission requests in audit records: `client:<clientInfo.name>` from the
    /// editor's `initialize` (as a server records it), `client` before that or without a name.
    pub(super) editor: Mutex<String>,
    pub(super) process: AgentProcess,
    /// The bridge's own requests to the editor (permission requests about MCP tool calls),
    /// numbered from [`OWN_IDS`] so they do not meet the agent's ids.
    pub(super) own: Pending,
    /// The MCP servers the editor offers over ACP, and their connections.
    pub(super) mcp: AcpMcpServers,
    /// Whether MCP-over-ACP passes (see [`mcp`]).
    pub(super) mcp_over_acp: AtomicBool,
}
