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
use crate::jsonrpc::Id;
use crate::jsonrpc::outbox::Outbox;
use crate::jsonrpc::pending::Pending;
use crate::oversight::mcp_calls::{AcpMcpServers, McpCall};
use crate::oversight::{Oversight, ToolFacts};
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
    /// For the agent's elicitations: what the record of the editor's answer needs.
    pub(super) elicitation: Option<crate::oversight::elicitation::Asked>,
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
    pub(super) to_agent: crate::connection::InFlight<Forwarded>,
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
    /// The agent's MCP `tools/call`s held while the editor is asked about them, by the
    /// agent's request id: what cancels each (the agent's `$/cancel_request`).
    pub(super) held_calls: Mutex<HashMap<Id, HeldCall>>,
    /// Whether the bridge offers MCP-over-ACP to the editor (see `mcp.rs`).
    pub(super) mcp_over_acp: AtomicBool,
    /// Set when the agent does not take MCP-over-ACP itself: the bridge serves the editor's
    /// servers to it (see `translate.rs`).
    #[cfg(feature = "mcp")]
    pub(super) translation: std::sync::OnceLock<Translation>,
    /// The sandbox the agent runs in (tier sandboxed, a started agent).
    pub(super) sandbox: Option<std::sync::Arc<crate::sandbox::Confinement>>,
    /// What an `env_var` auth method needs of the agent's environment (`auth_env.rs`).
    pub(super) auth_env: super::auth_env::AuthEnv,
    /// The editor connection's dialect seam, when the bridge serves the editor other protocol
    /// versions than v1 (a v2 editor's messages are read as v1's: the agent face).
    pub(super) up_seam: Option<crate::connection::Seam>,
    /// The agent connection's dialect seam, when the bridge asks its agent for v2 (the
    /// client face).
    pub(super) down_seam: Option<crate::connection::Seam>,
}

/// A `tools/call` of the agent's that the bridge holds while it asks the editor (`mcp.rs`).
pub(super) struct HeldCall {
    /// Cancels the asking; `None` once taken: by the agent's cancel, or by the decision.
    pub(super) cancel: Option<tokio::sync::oneshot::Sender<()>>,
    /// `true` once the decided call is passed on or answered (or its task is gone).
    pub(super) settled: tokio::sync::watch::Receiver<bool>,
}

/// The editor's MCP-over-ACP servers, served by the bridge to an agent without MCP-over-ACP
/// as `"type": "http"` servers on a loopback endpoint (or through a stdio shim and a Unix
/// socket when the agent takes no HTTP either), each reached by an MCP connection of the
/// bridge's own to the editor.
#[cfg(feature = "mcp")]
pub(super) struct Translation {
    /// Whether the agent advertised `mcpCapabilities.http`.
    pub(super) agent_http: bool,
    /// The bridge's own MCP connections to the editor, by connection id (the editor's
    /// `mcp/message`s on them are answered by the bridge).
    pub(super) tunnels: std::sync::Arc<crate::mcp::tunnel::Tunnels>,
    /// The loopback endpoint, once started.
    pub(super) loopback: tokio::sync::OnceCell<Loopback>,
    /// The Unix socket the stdio shims reach the servers through, once listening.
    pub(super) socket: tokio::sync::OnceCell<ShimSocket>,
    /// The served servers, by the key in their URL; removed when their session closes.
    pub(super) endpoints: Mutex<HashMap<String, std::sync::Arc<Endpoint>>>,
    /// The last key given to an endpoint (keys are never given twice).
    pub(super) last_key: std::sync::atomic::AtomicU64,
    /// Ends the endpoint's accept loop and MCP sessions.
    pub(super) stop: tokio_util::sync::CancellationToken,
}

/// The loopback endpoint: where it listens.
#[cfg(feature = "mcp")]
pub(super) struct Loopback {
    pub(super) address: std::net::SocketAddr,
    /// Forgets the service of an endpoint key (removed with its endpoint).
    pub(super) forget_service: Box<dyn Fn(&str) + Send + Sync>,
}

/// The Unix socket of the stdio shims, in a folder only this user may enter; removed when it
/// is dropped (with the [`Translation`]), and its folder too when the folder is its own. On
/// Windows a named pipe (`path` is its name), which ends when the listener is dropped.
#[cfg(feature = "mcp")]
pub(super) struct ShimSocket {
    pub(super) path: std::path::PathBuf,
    /// Its own folder (dropped after the socket is removed), if it has one.
    pub(super) _folder: Option<SocketFolder>,
}

/// A new folder in the temporary folder that only this user may enter, for the shims' Unix
/// socket; removed, with what is in it, when dropped.
#[cfg(feature = "mcp")]
#[derive(Debug)]
pub(crate) struct SocketFolder {
    path: std::path::PathBuf,
}

#[cfg(feature = "mcp")]
impl SocketFolder {
    /// Makes the folder (on Windows in the user's own temporary folder, which the profile's
    /// default permissions keep to the user: there are no mode bits to set).
    pub(crate) fn create() -> Result<SocketFolder, String> {
        #[cfg(unix)]
        use std::os::unix::fs::DirBuilderExt;
        let suffix = random_name(16).map_err(|error| format!("no name for the socket's folder: {error}"))?;
        let path = std::env::temp_dir().join(format!("agentacp-mcp-{suffix}"));
        #[cfg_attr(not(unix), allow(unused_mut))]
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        builder.mode(0o700);
        builder
            .create(&path)
            .map_err(|error| format!("no folder for the shims' socket at {}: {error}", path.display()))?;
        Ok(SocketFolder { path })
    }

    /// Where it is.
    pub(crate) fn path(&self) -> &std::path::Path {
        &self.path
    }
}

/// `len` random letters and digits, for a file name no one can guess or meet.
#[cfg(feature = "mcp")]
pub(super) fn random_name(len: usize) -> std::io::Result<String> {
    let random = acp_tokens::generate_token()?;
    Ok(random.chars().filter(char::is_ascii_alphanumeric).take(len).collect())
}

#[cfg(feature = "mcp")]
impl Drop for SocketFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(feature = "mcp")]
impl Drop for ShimSocket {
    /// Removes the socket file (a named pipe ends with its last handle, on Windows).
    fn drop(&mut self) {
        #[cfg(unix)]
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One of the editor's servers, as the bridge serves it.
#[cfg(feature = "mcp")]
pub(super) struct Endpoint {
    /// The editor's `serverId`.
    pub(super) server_id: String,
    /// The server's name in the editor's session request: what governance knows it by.
    pub(super) name: String,
    /// The editor's session request it was made for, until the agent answered it (the editor
    /// may use the id again after).
    pub(super) made_for: Mutex<Option<crate::jsonrpc::Id>>,
    /// Its session: from the request (`session/load`, `resume`), else from the answer.
    pub(super) session: Mutex<Option<String>>,
    /// The bearer token a request must carry.
    pub(super) secret: String,
    /// The bridge's MCP connection to the editor's server, once the agent connected.
    pub(super) upstream: tokio::sync::OnceCell<Upstream>,
    /// The agent's MCP session on this endpoint (the latest, when it opened several): where
    /// what the editor's server asks of its client, or tells it, is carried.
    pub(super) agent: super::carry::AgentSlot,
}

/// The bridge's MCP connection to one of the editor's servers.
#[cfg(feature = "mcp")]
pub(super) struct Upstream {
    /// The rmcp client on it (stopped when dropped).
    pub(super) service: rmcp::service::RunningService<rmcp::RoleClient, super::carry::AgentSide>,
    /// Its tunnel in [`Translation::tunnels`].
    pub(super) tunnel: crate::mcp::tunnel::Tunnel,
}

#[cfg(feature = "mcp")]
impl Translation {
    /// For an agent that takes `"type": "http"` servers (`agent_http`) or not.
    pub(super) fn new(agent_http: bool) -> Translation {
        Translation {
            agent_http,
            tunnels: std::sync::Arc::default(),
            loopback: tokio::sync::OnceCell::new(),
            socket: tokio::sync::OnceCell::new(),
            endpoints: Mutex::default(),
            last_key: std::sync::atomic::AtomicU64::new(0),
            stop: tokio_util::sync::CancellationToken::new(),
        }
    }

    /// The served server whose URL or shim names `key`.
    pub(super) fn endpoint(&self, key: &str) -> Option<std::sync::Arc<Endpoint>> {
        crate::sync::lock(&self.endpoints).get(key).cloned()
    }
}

#[cfg(feature = "mcp")]
impl Drop for Translation {
    fn drop(&mut self) {
        self.stop.cancel();
        self.tunnels.end_all();
    }
}
