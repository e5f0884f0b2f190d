//! A bridge (`kind: bridge`): an ACP agent to the editor upstream, an ACP client to the agent
//! it spawns downstream, with governance and audit in between.
//!
//! What passes, and how (see [`relay`] for the details):
//! - upstream requests and notifications (`initialize`, `session/*`, `$/cancel_request`, ...)
//!   go downstream with their ids, params and `_meta` as they were; `initialize` is narrowed to
//!   what the manifest declares (the client capabilities passed down, the agent capabilities
//!   passed up), and the answer carries the bridge's `_meta.aip44`. The bridge keeps a
//!   server's rules towards the editor: `initialize` first and once, no id twice in flight,
//!   `session/load` only when the manifest offers it, a frame over the limit answered with its
//!   id or `null`;
//! - downstream `session/update`s go upstream in order, byte for byte — except tool call
//!   updates governance does not let through: a call it denies (when announced, or once an
//!   update, a re-announcement or a permission request turns it into one), an update for a
//!   call never announced, a result of a call that needed an approval it did not get, anything
//!   the bridge cannot read unambiguously; a call the editor was shown and that is hidden later
//!   is closed on the editor's side with a bare `failed`;
//! - downstream `session/request_permission`: governance first, on the call as the editor
//!   would show it — `allow` and `deny` are answered by the bridge, `ask` goes to the editor (a
//!   timeout or an unreadable answer is a rejection);
//! - downstream `fs/*` and `terminal/*` requests pass only when the manifest declares them
//!   (else `-32601` from the bridge);
//! - every request in either direction, every lifecycle step and every tool call (the AIP-44
//!   mirror, with its approval) is audited before it is forwarded;
//! - when the editor closes its side, what it asked is still answered (a running prompt is
//!   cancelled downstream and gets `shutdown_grace`, other requests keep their deadline), the
//!   agent's requests to it fail (a permission is rejected), then the agent is stopped (stdin
//!   closed, SIGTERM, SIGKILL); when the agent goes away, the editor's waiting requests fail and
//!   the bridge exits.

mod gate;
mod relay;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};

use crate::audit::{AuditLog, FsyncPolicy};
use crate::client::AgentCommand;
use crate::error::{Error, Result};
use crate::governance::Governance;
use crate::server::{OperatorSpec, env_number, env_path};
use crate::tier::Tier;

/// A bridge operator, as the runtime drives it. `#[acp_operator]` implements this for a
/// `kind: bridge` struct; authors implement the generated `…Bridge` trait instead.
pub trait BridgeOperator: Send + Sync + 'static {
    /// The manifest's tier.
    type Tier: Tier;

    /// The manifest, as read at compile time.
    fn spec() -> &'static OperatorSpec;

    /// The agent to start downstream.
    fn downstream(&self) -> AgentCommand;
}

/// Limits and bindings of a bridge. Every field has a documented default.
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
    /// then SIGKILL after `kill_grace`. Defaults 1 s and 5 s.
    pub exit_grace: Duration,
    /// See `exit_grace`.
    pub kill_grace: Duration,
    /// When the editor closes its side: how long a running prompt gets to answer once it has
    /// been cancelled downstream (default 5 s, as a server's `shutdown_grace`). Other requests
    /// already received keep their own deadline.
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
}

impl Default for BridgeOptions {
    fn default() -> Self {
        BridgeOptions {
            request_timeout: Duration::from_secs(60),
            prompt_idle_timeout: Duration::from_secs(600),
            permission_timeout: Duration::from_secs(300),
            write_timeout: Duration::from_secs(60),
            max_frame_bytes: 4 * 1024 * 1024,
            exit_grace: Duration::from_secs(1),
            kill_grace: Duration::from_secs(5),
            shutdown_grace: Duration::from_secs(5),
            governance: None,
            audit: None,
            audit_log: None,
            state_dir: None,
        }
    }
}

impl std::fmt::Debug for BridgeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BridgeOptions")
            .field("request_timeout", &self.request_timeout)
            .field("prompt_idle_timeout", &self.prompt_idle_timeout)
            .field("permission_timeout", &self.permission_timeout)
            .field("write_timeout", &self.write_timeout)
            .field("max_frame_bytes", &self.max_frame_bytes)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("audit_log", &self.audit_log)
            .field("state_dir", &self.state_dir)
            .finish_non_exhaustive()
    }
}

impl BridgeOptions {
    /// The defaults, overridden by the `AGENTACP_*` variables that are set (see the fields).
    pub fn from_env() -> Self {
        let mut options = BridgeOptions {
            audit_log: env_path("AGENTACP_AUDIT_LOG"),
            state_dir: env_path("AGENTACP_STATE_DIR"),
            ..BridgeOptions::default()
        };
        let number = env_number;
        if let Some(ms) = number("AGENTACP_REQUEST_TIMEOUT_MS") {
            options.request_timeout = Duration::from_millis(ms);
        }
        if let Some(ms) = number("AGENTACP_PERMISSION_TIMEOUT_MS") {
            options.permission_timeout = Duration::from_millis(ms);
        }
        if let Some(ms) = number("AGENTACP_WRITE_TIMEOUT_MS") {
            options.write_timeout = Duration::from_millis(ms);
        }
        if let Some(bytes) = number("AGENTACP_MAX_FRAME_BYTES") {
            options.max_frame_bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        }
        options
    }

    /// Replaces the manifest's governance binding.
    pub fn governance(mut self, governance: impl Governance) -> Self {
        self.governance = Some(Arc::new(governance));
        self
    }
}

/// Runs `bridge` between an editor on `input`/`output` and the agent it starts, until either
/// side goes away. `Ok` when the editor closed its side; an error when the agent could not be
/// started or went away first.
pub async fn bridge<B, R, W>(bridge: B, options: BridgeOptions, input: R, output: W) -> Result<()>
where
    B: BridgeOperator,
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let spec = B::spec();
    let audit = match &options.audit {
        Some(audit) => audit.clone(),
        None => {
            let state_dir = options
                .state_dir
                .clone()
                .unwrap_or_else(|| crate::server::default_state_dir(spec.id));
            spec.open_audit(options.audit_log.as_deref(), FsyncPolicy::EveryRecord, &state_dir)?
        }
    };
    let governance: Option<Arc<dyn Governance>> = match (&options.governance, B::Tier::NAME) {
        (Some(governance), _) => Some(Arc::clone(governance)),
        (None, "basic") => None,
        (None, _) => Some(Arc::new(spec.governance())),
    };
    let command = bridge.downstream();
    relay::run(spec, command, options, governance, audit, input, output)
        .await
        .map_err(|error| Error::msg(error.to_string()))
}

/// Running a bridge over stdio. Implemented for every [`BridgeOperator`].
pub trait RunBridge: BridgeOperator + Sized {
    /// Bridges stdin/stdout with [`BridgeOptions::from_env`], logging to stderr.
    fn bridge_stdio(self) -> impl Future<Output = Result<()>> + Send {
        crate::server::init_logging();
        bridge(self, BridgeOptions::from_env(), tokio::io::stdin(), tokio::io::stdout())
    }

    /// Like [`bridge_stdio`](RunBridge::bridge_stdio), on a runtime of its own, for a plain
    /// `main`.
    fn run_stdio(self) -> Result<()> {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        let result = runtime.block_on(self.bridge_stdio());
        runtime.shutdown_timeout(Duration::from_millis(100));
        result
    }
}

impl<B: BridgeOperator> RunBridge for B {}
