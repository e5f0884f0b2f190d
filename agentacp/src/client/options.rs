//! The timeouts, limits and collaborators of a [`Client`](super::Client).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::auth::AuthPolicy;
use super::extensions::ExtensionHandler;
use super::handlers::{ClientHandlers, NoHandlers};
use super::tap::{Direction, WireTap};
use crate::audit::AuditLog;
use crate::connection::Limits;
use crate::governance::Governance;
use crate::oversight::{ElicitationHandler, PermissionHandler, RejectAll};

/// Timeouts and limits of a [`Client`](crate::client::Client). Every field has a documented
/// default; the limits and timeouts a server and a bridge have too take theirs from [`Limits`].
#[derive(Clone)]
pub struct ClientOptions {
    /// The answer to `initialize`. Default 30 s.
    pub initialize_timeout: Duration,
    /// The answer to any other request (`session/new`, `session/load`, `session/list`,
    /// `session/set_mode`, extension requests…), and sending a notification. Default 60 s.
    pub request_timeout: Duration,
    /// During a prompt, the longest time without any message from the agent (an update or
    /// the answer); then the prompt fails and `session/cancel` is sent. Default 10 min.
    pub prompt_idle_timeout: Duration,
    /// How long the [`PermissionHandler`] may take; then the request is rejected.
    /// Default 5 min.
    pub permission_timeout: Duration,
    /// How long a write may wait for an agent that stopped reading; then the connection
    /// counts as closed. Default 60 s.
    pub write_timeout: Duration,
    /// The largest accepted message from the agent, in bytes. Default 4 MiB.
    pub max_frame_bytes: usize,
    /// On close: how long the agent may take to exit after its stdin closed, before SIGTERM.
    /// Default 2 s (interpreted agents under load need more than one).
    pub exit_grace: Duration,
    /// On close: how long after SIGTERM before SIGKILL. Default 5 s.
    pub kill_grace: Duration,
    /// How many of the agent's last stderr lines are kept for errors. Default 20.
    pub stderr_lines: usize,
    /// Our `clientInfo` (`name`, `version`).
    pub client_info: (String, String),
    /// Decides the agent's permission requests. Default [`RejectAll`].
    pub permission: Arc<dyn PermissionHandler>,
    /// Answers the agent's `fs/*` and `terminal/*` requests. Default [`NoHandlers`] (none
    /// offered).
    pub handlers: Arc<dyn ClientHandlers>,
    /// The folder the agent may reach through `fs/*` and `terminal/*`, and that every
    /// session's `cwd` must be inside. Default: the agent's working directory
    /// ([`AgentCommand::current_dir`](crate::client::AgentCommand::current_dir)), else ours.
    pub workspace_root: Option<PathBuf>,
    /// Decides the agent's permission requests before the [`PermissionHandler`] is asked:
    /// `allow` approves, `deny` rejects, `ask` goes to the handler. Default: none (every
    /// request goes to the handler).
    pub governance: Option<Arc<dyn Governance>>,
    /// Where tool calls are recorded (the AIP-44 tool-call mirror). Default: off.
    pub audit: AuditLog,
    /// Our operator id in audit records and governance requests. Default: `client_info`'s name.
    pub operator_id: Option<String>,
    /// Sees every message to and from the agent (a transcript, `--wire` output). Default: none.
    pub wire_tap: Option<WireTap>,
    /// Which of the agent's `authMethods` to `authenticate` with at connect. Default
    /// [`AuthPolicy::EnvVar`]: an `env_var` method whose variables are all set in the agent's
    /// environment (passed with [`AgentCommand::allow_env`](super::AgentCommand::allow_env)),
    /// else none.
    pub auth: AuthPolicy,
    /// Answers the agent's extension requests (`_`-prefixed) and sees its extension
    /// notifications. Default: none (requests `-32601`, notifications ignored).
    pub extensions: Option<Arc<dyn ExtensionHandler>>,
    /// Answers the agent's elicitations (`elicitation/create`); `clientCapabilities.elicitation`
    /// advertises its modes. Default: none (no elicitation advertised; a question is refused).
    pub elicitation: Option<Arc<dyn ElicitationHandler>>,
    /// MCP servers this client provides over the ACP connection (MCP-over-ACP), listed in
    /// every session it opens with an agent that takes them. Default: none.
    #[cfg(feature = "mcp")]
    pub mcp_over_acp: Vec<super::mcp::AcpMcpServer>,
    /// The ACP protocol versions asked for at `initialize`. Default [`Protocol::V1`].
    pub protocol: Protocol,
}

/// The ACP protocol versions a client asks an agent for at `initialize`. Whatever the agent
/// speaks, the client's API is the same (ACP v1's types and events; see docs/v2.md for what
/// a v2 agent's messages become); an answer with a version not asked for ends the connection
/// ([`ClientError::UnsupportedProtocol`](super::ClientError::UnsupportedProtocol)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Protocol {
    /// ACP v1 only (the default).
    #[default]
    V1,
    /// ACP v2 only (schema v2.0.0-alpha.3).
    V2,
    /// ACP v2, or v1 when the agent answers `1`.
    V2OrV1,
}

impl Protocol {
    /// The version `initialize` asks for.
    pub fn asked(self) -> u16 {
        match self {
            Protocol::V1 => 1,
            Protocol::V2 | Protocol::V2OrV1 => 2,
        }
    }

    /// Whether the agent's answer `version` is one this client goes on with.
    pub fn accepts(self, version: u64) -> bool {
        match self {
            Protocol::V1 => version == 1,
            Protocol::V2 => version == 2,
            Protocol::V2OrV1 => version == 1 || version == 2,
        }
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            initialize_timeout: Duration::from_secs(30),
            request_timeout: Limits::DEFAULT.request_timeout,
            prompt_idle_timeout: Limits::DEFAULT.prompt_idle_timeout,
            permission_timeout: Limits::DEFAULT.permission_timeout,
            write_timeout: Limits::DEFAULT.write_timeout,
            max_frame_bytes: Limits::DEFAULT.max_frame_bytes,
            exit_grace: Limits::DEFAULT.exit_grace,
            kill_grace: Limits::DEFAULT.kill_grace,
            stderr_lines: 20,
            client_info: ("agentacp".to_string(), env!("CARGO_PKG_VERSION").to_string()),
            permission: Arc::new(RejectAll),
            handlers: Arc::new(NoHandlers),
            workspace_root: None,
            governance: None,
            audit: AuditLog::off(),
            operator_id: None,
            wire_tap: None,
            auth: AuthPolicy::default(),
            extensions: None,
            elicitation: None,
            #[cfg(feature = "mcp")]
            mcp_over_acp: Vec::new(),
            protocol: Protocol::V1,
        }
    }
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut f = f.debug_struct("ClientOptions");
        f.field("initialize_timeout", &self.initialize_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("prompt_idle_timeout", &self.prompt_idle_timeout)
            .field("permission_timeout", &self.permission_timeout)
            .field("write_timeout", &self.write_timeout)
            .field("max_frame_bytes", &self.max_frame_bytes)
            .field("exit_grace", &self.exit_grace)
            .field("kill_grace", &self.kill_grace)
            .field("stderr_lines", &self.stderr_lines)
            .field("client_info", &self.client_info)
            .field("offered", &self.handlers.capabilities())
            .field("workspace_root", &self.workspace_root)
            .field("governance", &self.governance.is_some())
            .field("audit", &!self.audit.is_off())
            .field("operator_id", &self.operator_id)
            .field("wire_tap", &self.wire_tap.is_some())
            .field("auth", &self.auth)
            .field("extensions", &self.extensions.is_some())
            .field("elicitation", &self.elicitation.as_ref().map(|handler| handler.modes()))
            .field("protocol", &self.protocol);
        #[cfg(feature = "mcp")]
        f.field("mcp_over_acp", &self.mcp_over_acp);
        f.finish_non_exhaustive()
    }
}

impl ClientOptions {
    /// Answers the agent's elicitations with `handler` (e.g.
    /// [`DeclineAll`](crate::oversight::DeclineAll)), offering its modes.
    pub fn with_elicitation(mut self, handler: impl ElicitationHandler) -> Self {
        self.elicitation = Some(Arc::new(handler));
        self
    }

    /// Uses `handler` for permission requests.
    pub fn with_permission(mut self, handler: impl PermissionHandler) -> Self {
        self.permission = Arc::new(handler);
        self
    }

    /// Uses `handlers` for the agent's `fs/*` and `terminal/*` requests (e.g.
    /// [`Builtin::read_only`](crate::client::Builtin::read_only)).
    pub fn with_handlers(mut self, handlers: impl ClientHandlers) -> Self {
        self.handlers = Arc::new(handlers);
        self
    }

    /// Decides permission requests with `governance` first.
    pub fn with_governance(mut self, governance: impl Governance) -> Self {
        self.governance = Some(Arc::new(governance));
        self
    }

    /// Records tool calls in `audit`.
    pub fn with_audit(mut self, audit: AuditLog) -> Self {
        self.audit = audit;
        self
    }

    /// Shows `tap` every message to and from the agent ([`WireTap`]).
    pub fn with_wire_tap(mut self, tap: impl Fn(Direction, &[u8]) + Send + Sync + 'static) -> Self {
        self.wire_tap = Some(Arc::new(tap));
        self
    }

    /// Authenticates at connect as `policy` says ([`AuthPolicy`]).
    pub fn with_auth(mut self, policy: AuthPolicy) -> Self {
        self.auth = policy;
        self
    }

    /// Answers the agent's extension methods with `handler` ([`ExtensionHandler`]).
    pub fn with_extensions(mut self, handler: impl ExtensionHandler) -> Self {
        self.extensions = Some(Arc::new(handler));
        self
    }

    /// Provides the MCP server `name` over the ACP connection (MCP-over-ACP, feature `mcp`):
    /// `make` makes its rmcp service (any `rmcp::ServerHandler`), once per `mcp/connect`.
    /// Sessions list it when the agent advertises `mcpCapabilities.acp`.
    #[cfg(feature = "mcp")]
    pub fn with_mcp_over_acp<S, F>(mut self, name: impl Into<String>, make: F) -> Self
    where
        S: rmcp::Service<rmcp::service::RoleServer>,
        F: Fn() -> S + Send + Sync + 'static,
    {
        self.mcp_over_acp.push(super::mcp::AcpMcpServer::new(name, make));
        self
    }

    /// Asks the agent for the ACP versions `protocol` names at `initialize`.
    pub fn with_protocol(mut self, protocol: Protocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// Confines sessions and file access to `root`.
    pub fn with_workspace_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.workspace_root = Some(root.into());
        self
    }
}
