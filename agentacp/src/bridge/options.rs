//! The limits and bindings of a bridge, and the `AGENTACP_*` variables that set them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::audit::AuditLog;
use crate::client::Protocol;
use crate::connection::Limits;
use crate::env::env_path;
use crate::governance::Governance;

/// Limits and bindings of a bridge. Every field has a documented default (the limits and
/// timeouts a server and a client have too take theirs from [`Limits`]).
#[derive(Clone)]
pub struct BridgeOptions {
    /// How long the agent may take to answer a request other than `session/prompt`
    /// (`AGENTACP_REQUEST_TIMEOUT_MS`; default 60 s). Then the editor gets an error.
    pub request_timeout: Duration,
    /// During a prompt, the longest time without any message from the agent; then the prompt
    /// fails upstream and `session/cancel` goes downstream. Default 10 min.
    pub prompt_idle_timeout: Duration,
    /// How long the editor may take to answer a request of the agent's (a permission, a file,
    /// a terminal); then a permission is rejected and anything else fails
    /// (`AGENTACP_PERMISSION_TIMEOUT_MS`; default 5 min).
    pub permission_timeout: Duration,
    /// How long a write may wait for a peer that stopped reading (`AGENTACP_WRITE_TIMEOUT_MS`;
    /// default 60 s).
    pub write_timeout: Duration,
    /// The largest accepted message from either side (`AGENTACP_MAX_FRAME_BYTES`; default
    /// 4 MiB). A larger one is answered with an error and the connection goes on.
    pub max_frame_bytes: usize,
    /// On shutdown: how long the agent may take to exit after its stdin closed, then SIGTERM;
    /// then SIGKILL after `kill_grace`. Defaults 2 s and 5 s, as a client's ([`Limits`]).
    pub exit_grace: Duration,
    /// See `exit_grace`.
    pub kill_grace: Duration,
    /// When the editor closes its side: how long a running prompt gets to answer once it has
    /// been cancelled downstream (default 5 s, as a server's `shutdown_grace`), and an
    /// `initialize` the agent has not answered yet. Other requests already received keep their
    /// own deadline.
    pub shutdown_grace: Duration,
    /// Replaces the manifest's governance binding.
    pub governance: Option<Arc<dyn Governance>>,
    /// Replaces the manifest's audit log.
    pub audit: Option<AuditLog>,
    /// The audit log file, overriding the manifest's target (`AGENTACP_AUDIT_LOG`).
    pub audit_log: Option<PathBuf>,
    /// Where a governance channel's audit log is kept (`AGENTACP_STATE_DIR`; default
    /// `~/.local/state/agentacp/<id>`).
    pub state_dir: Option<PathBuf>,
    /// The workspace root (`AGENTACP_WORKSPACE_ROOT`): at tier `sandboxed`, the folder the
    /// SANDBOX.md workspace mount is narrowed to for the agent (`docs/sandbox.md`). Default
    /// none: the mount's `at`.
    pub workspace_root: Option<PathBuf>,
    /// Variables passed through from the bridge's environment to the agent, when set, besides
    /// what its [`AgentCommand`](crate::client::AgentCommand) allows (the agent starts with a
    /// cleared environment): an API key the agent reads, say. `AGENTACP_BRIDGE_PASS_ENV`,
    /// names separated by commas or spaces; default none.
    pub pass_env: Vec<String>,
    /// Dial this remote agent instead of starting [`BridgeOperator::downstream`](super::BridgeOperator::downstream)
    /// (feature `websocket`): `AGENTACP_BRIDGE_CONNECT=wss://host/acp` (WebSocket) or
    /// `https://host/acp` (Streamable HTTP), with the bearer token read from the variable
    /// `AGENTACP_BRIDGE_TOKEN_ENV` names (default `AGENTACP_TOKEN`), sent on the upgrade (on
    /// every request over HTTP). Governance, audit and narrowing are the same as for a subprocess;
    /// [`pass_env`](BridgeOptions::pass_env) does not apply (nothing of our environment
    /// reaches a remote agent). Default none.
    #[cfg(feature = "websocket")]
    pub connect: Option<crate::websocket::Dial>,
    /// The program an agent that takes neither MCP-over-ACP nor HTTP MCP servers runs as the
    /// stdio MCP server for each of the editor's MCP-over-ACP servers (tier `sandboxed`,
    /// feature `mcp`; `docs/mcp.md`): a program that calls
    /// `mcp::shim::serve_if_asked` first, as
    /// [`RunBridge::bridge_stdio`](super::RunBridge::bridge_stdio) does. Default: this
    /// program (`std::env::current_exe`).
    pub mcp_shim: Option<PathBuf>,
    /// The ACP versions the bridge asks its agent for (`AGENTACP_BRIDGE_AGENT_PROTOCOL`: `1`,
    /// `2`, or `2,1` for v2 falling back to v1; default v1). A v2 agent's messages are read
    /// as v1's, so governance, audit and the editor see the same (docs/v2.md).
    pub agent_protocol: Protocol,
    /// The ACP versions served to the editor, replacing the manifest's `protocol_versions`
    /// (`AGENTACP_PROTOCOL_VERSIONS`, e.g. `1,2`; default: the manifest's). Serving 2 needs
    /// agentacp's feature `v2`.
    pub protocol_versions: Option<Vec<u16>>,
}

impl BridgeOptions {
    /// The program run as the stdio MCP shim: [`mcp_shim`](BridgeOptions::mcp_shim), else this
    /// program.
    pub(crate) fn shim_program(&self) -> std::io::Result<PathBuf> {
        match &self.mcp_shim {
            Some(program) => Ok(program.clone()),
            None => std::env::current_exe(),
        }
    }
}

impl Default for BridgeOptions {
    fn default() -> Self {
        BridgeOptions::with_limits(Limits::DEFAULT)
    }
}

impl BridgeOptions {
    /// The options with `limits` and every other field at its default.
    fn with_limits(limits: Limits) -> Self {
        BridgeOptions {
            request_timeout: limits.request_timeout,
            prompt_idle_timeout: limits.prompt_idle_timeout,
            permission_timeout: limits.permission_timeout,
            write_timeout: limits.write_timeout,
            max_frame_bytes: limits.max_frame_bytes,
            exit_grace: limits.exit_grace,
            kill_grace: limits.kill_grace,
            shutdown_grace: limits.shutdown_grace,
            governance: None,
            audit: None,
            audit_log: None,
            state_dir: None,
            workspace_root: None,
            pass_env: Vec::new(),
            #[cfg(feature = "websocket")]
            connect: None,
            mcp_shim: None,
            agent_protocol: Protocol::V1,
            protocol_versions: None,
        }
    }
}

impl std::fmt::Debug for BridgeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut f = f.debug_struct("BridgeOptions");
        f.field("request_timeout", &self.request_timeout)
            .field("prompt_idle_timeout", &self.prompt_idle_timeout)
            .field("permission_timeout", &self.permission_timeout)
            .field("write_timeout", &self.write_timeout)
            .field("max_frame_bytes", &self.max_frame_bytes)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("audit_log", &self.audit_log)
            .field("state_dir", &self.state_dir)
            .field("pass_env", &self.pass_env)
            .field("mcp_shim", &self.mcp_shim)
            .field("workspace_root", &self.workspace_root)
            .field("agent_protocol", &self.agent_protocol)
            .field("protocol_versions", &self.protocol_versions);
        #[cfg(feature = "websocket")]
        f.field("connect", &self.connect);
        f.finish_non_exhaustive()
    }
}

impl BridgeOptions {
    /// The defaults, overridden by the `AGENTACP_*` variables that are set (see the fields).
    pub fn from_env() -> Self {
        BridgeOptions {
            audit_log: env_path("AGENTACP_AUDIT_LOG"),
            state_dir: env_path("AGENTACP_STATE_DIR"),
            workspace_root: env_path("AGENTACP_WORKSPACE_ROOT"),
            pass_env: std::env::var("AGENTACP_BRIDGE_PASS_ENV")
                .map(|names| parse_names(&names))
                .unwrap_or_default(),
            #[cfg(feature = "websocket")]
            connect: connect_from_env(),
            agent_protocol: env_protocol("AGENTACP_BRIDGE_AGENT_PROTOCOL").unwrap_or_default(),
            protocol_versions: env_versions("AGENTACP_PROTOCOL_VERSIONS"),
            ..BridgeOptions::with_limits(Limits::from_env())
        }
    }

    /// Asks the agent for the ACP versions `protocol` names (see
    /// [`agent_protocol`](BridgeOptions::agent_protocol)).
    pub fn agent_protocol(mut self, protocol: Protocol) -> Self {
        self.agent_protocol = protocol;
        self
    }

    /// Serves the editor the ACP `versions` (see
    /// [`protocol_versions`](BridgeOptions::protocol_versions)).
    pub fn protocol_versions(mut self, versions: &[u16]) -> Self {
        self.protocol_versions = Some(versions.to_vec());
        self
    }

    /// Dials `dial` instead of starting the bridge's downstream command (see
    /// [`connect`](BridgeOptions::connect)).
    #[cfg(feature = "websocket")]
    pub fn connect(mut self, dial: crate::websocket::Dial) -> Self {
        self.connect = Some(dial);
        self
    }

    /// Replaces the manifest's governance binding.
    pub fn governance(mut self, governance: impl Governance) -> Self {
        self.governance = Some(Arc::new(governance));
        self
    }

    /// Passes the variable `name` through to the agent, when it is set (see
    /// [`pass_env`](BridgeOptions::pass_env)).
    pub fn pass_env(mut self, name: impl Into<String>) -> Self {
        self.pass_env.push(name.into());
        self
    }
}

/// The [`Protocol`] the variable `name` names (`1`, `2`, `2,1`); `None` when it is unset,
/// empty, or names something else (with a warning).
fn env_protocol(name: &str) -> Option<Protocol> {
    let text = std::env::var(name).ok().filter(|text| !text.trim().is_empty())?;
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    match compact.as_str() {
        "1" => Some(Protocol::V1),
        "2" => Some(Protocol::V2),
        "2,1" => Some(Protocol::V2OrV1),
        _ => {
            tracing::warn!("{name}={text} is ignored: say `1`, `2`, or `2,1` (v2, falling back to v1)");
            None
        }
    }
}

/// The protocol versions the variable `name` lists (`1,2`); `None` when unset or unreadable
/// (with a warning).
fn env_versions(name: &str) -> Option<Vec<u16>> {
    let text = std::env::var(name).ok().filter(|text| !text.trim().is_empty())?;
    match crate::dialect::ServedVersions::parse(&text) {
        Ok(served) => Some(served.versions().to_vec()),
        Err(error) => {
            tracing::warn!("{name} is ignored: {error}");
            None
        }
    }
}

/// The variable that names the variable holding the token for `AGENTACP_BRIDGE_CONNECT`.
#[cfg(feature = "websocket")]
pub const TOKEN_ENV_VAR: &str = "AGENTACP_BRIDGE_TOKEN_ENV";

/// The variable holding that token when [`TOKEN_ENV_VAR`] is not set.
#[cfg(feature = "websocket")]
pub const DEFAULT_TOKEN_ENV: &str = "AGENTACP_TOKEN";

/// `AGENTACP_BRIDGE_CONNECT`, with the token of [`token_from_env`] (named by
/// `AGENTACP_BRIDGE_TOKEN_ENV`).
#[cfg(feature = "websocket")]
fn connect_from_env() -> Option<crate::websocket::Dial> {
    let url = std::env::var("AGENTACP_BRIDGE_CONNECT")
        .ok()
        .filter(|url| !url.trim().is_empty())?;
    let name = std::env::var(TOKEN_ENV_VAR).unwrap_or_else(|_| DEFAULT_TOKEN_ENV.to_string());
    let dial = crate::websocket::Dial::new(url.trim());
    Some(match token_from_env(&name) {
        Some(token) => dial.token(token),
        None => {
            tracing::debug!(variable = %name, "no token for the remote agent: connecting without one");
            dial
        }
    })
}

/// The token in the variable `name`, when it is set and not empty (surrounding whitespace,
/// such as a trailing newline from a secrets file, removed).
#[cfg(feature = "websocket")]
pub fn token_from_env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|token| token.trim().to_string())
        .filter(|token| !token.is_empty())
}

/// The variable names in `list`, separated by commas or whitespace.
fn parse_names(list: &str) -> Vec<String> {
    list.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|name| !name.is_empty())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn pass_env_names_are_split_on_commas_and_spaces() {
        assert_eq!(
            super::parse_names(" OPENAI_API_KEY,GEMINI_API_KEY  ANTHROPIC_API_KEY,,"),
            ["OPENAI_API_KEY", "GEMINI_API_KEY", "ANTHROPIC_API_KEY"]
        );
    }

    /// Each shared limit lands in the bridge's field of the same name.
    #[test]
    fn every_limit_lands_in_its_own_field() {
        use std::time::Duration;
        let secs = Duration::from_secs;
        let limits = crate::connection::Limits {
            max_frame_bytes: 1,
            write_timeout: secs(2),
            request_timeout: secs(3),
            prompt_idle_timeout: secs(4),
            permission_timeout: secs(5),
            exit_grace: secs(6),
            kill_grace: secs(7),
            shutdown_grace: secs(8),
        };
        let options = super::BridgeOptions::with_limits(limits);
        let got = [
            options.write_timeout,
            options.request_timeout,
            options.prompt_idle_timeout,
            options.permission_timeout,
            options.exit_grace,
            options.kill_grace,
            options.shutdown_grace,
        ];
        assert_eq!(options.max_frame_bytes, 1);
        assert_eq!(got, [2, 3, 4, 5, 6, 7, 8].map(secs));
    }
}
