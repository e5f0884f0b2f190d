//! A bridge (`kind: bridge`): an ACP agent to the editor upstream, an ACP client to the agent
//! it spawns downstream, with governance and audit in between.
//!
//! What passes, and how (see `relay.rs` for the details):
//! - upstream requests and notifications (`initialize`, `session/*`, `$/cancel_request`, ...)
//!   go downstream with their ids, params and `_meta` as they were; `initialize` is narrowed
//!   (the client capabilities passed down, the agent capabilities passed up; see `narrow.rs`): a
//!   capability passes only when the manifest can declare it, declares it and the peer
//!   advertises it, keys the method table does not know are removed, `_meta` passes unchanged
//!   (but for `clientCapabilities._meta` keys tied to a capability that did not pass, such as
//!   `terminal-auth`); the answer carries the bridge's `_meta.aip44`, and
//!   `_meta.agentacp.narrowed`: each capability of the agent's that did not pass, with why.
//!   The bridge keeps a server's rules towards the editor: `initialize` first and once, no id
//!   twice in flight, a frame over the limit answered with its id or `null`;
//! - every method, both ways, passes only when what offers it passed (the method table's
//!   `offer`); extension methods (`_…`) pass, other methods the table lacks do not. A request
//!   that does not pass gets `-32601` from the bridge, a notification is dropped, and both are
//!   audited (`metadata.aip44.refused`);
//! - downstream `session/update`s go upstream in order, byte for byte — except tool call
//!   updates governance does not let through: a call it denies (on the strictest reading of
//!   its names and kind, when announced, or once new arguments or a permission request turn
//!   it into one), an update for a call never announced, a result of a call that needed an
//!   approval it did not get, anything the bridge cannot read unambiguously; a call the
//!   editor was shown and that is hidden later is closed on the editor's side with a bare
//!   `failed`. An update that would change what a decided call is (its title, name, kind or
//!   `_meta.aip44.tool`) passes without that change, which is audited (`gate.rs`);
//! - the bearer token an editor authenticates with (`_meta.agentacp.token`) is removed from
//!   what goes to the agent;
//! - downstream `session/request_permission`: governance first, on the call as the editor
//!   would show it — `allow` and `deny` are answered by the bridge, `ask` goes to the editor (a
//!   timeout or an unreadable answer is a rejection), its `toolCall` showing a decided call as
//!   decided (a change of its title, name, kind or `_meta.aip44.tool` is left out and audited);
//! - MCP-over-ACP (tier `sandboxed`, feature `mcp`; `docs/mcp.md`): the bridge advertises
//!   `mcpCapabilities.acp`. When the agent does too, `mcp/*` pass (`relay/mcp.rs`); when it
//!   does not, the editor's `acp` servers reach it as `http` servers on a loopback endpoint of
//!   the bridge's (bearer token per server), or through the stdio shim
//!   ([`BridgeOptions::mcp_shim`], reaching the bridge by a Unix socket) for an agent without
//!   HTTP (`relay/translate.rs`). Either
//!   way the agent's calls of the editor's MCP tools are governed and audited on the way;
//! - the agent starts with a cleared environment, plus the variables
//!   [`BridgeOptions::pass_env`] names (`AGENTACP_BRIDGE_PASS_ENV`);
//! - at tier `sandboxed` the agent runs in the SANDBOX.md sandbox (`docs/sandbox.md`, "A
//!   sandboxed bridge's agent"): the mounts, the memory limit, the network, plus what its
//!   command grants ([`AgentCommand::sandbox_read`], [`AgentCommand::sandbox_write`]);
//! - every request in either direction, every lifecycle step and every tool call (the AIP-44
//!   mirror, with its approval) is audited before it is forwarded;
//! - when the editor closes its side, what it asked is still answered (a running prompt is
//!   cancelled downstream and gets `shutdown_grace`, as does an `initialize` the agent has
//!   not answered; other requests keep their deadline), the agent's requests to it fail (a
//!   permission is rejected), then the agent is stopped (stdin closed, SIGTERM, SIGKILL); when
//!   the agent goes away, the editor's waiting requests fail and the bridge exits;
//! - when the agent cannot be started or reached (no such program, a refused connection, a
//!   `401`), the editor's requests are answered with `-32603` naming the program or URL and
//!   the cause, for a few seconds at most, then the bridge exits with that error
//!   (`unreachable.rs`);
//! - remote (feature `websocket`): the downstream may be a remote agent the bridge dials
//!   (`BridgeOptions::connect`, `AGENTACP_BRIDGE_CONNECT`) instead of a subprocess — all of
//!   the above unchanged, but for the agent's environment (none of ours reaches it) — and the
//!   bridge may itself be served over WebSocket (`listen::BridgeListener`): one bridge and one
//!   downstream agent per connection, a bearer token required on the upgrade when tokens are
//!   configured (a bridge has no `authenticate` of its own);
//! - over stdio ([`RunBridge::bridge_stdio`]), SIGINT and SIGTERM are that same end of input:
//!   running prompts are cancelled downstream, then the agent's process group is stopped before
//!   the bridge exits. A second signal stops waiting: the agent's group gets SIGTERM, then
//!   SIGKILL, as the bridge exits.

mod gate;
#[cfg(feature = "websocket")]
pub mod listen;
mod narrow;
mod options;
mod relay;
mod unreachable;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;

use crate::audit::{AuditLog, FsyncPolicy};
use crate::client::AgentCommand;
use crate::downstream::Downstream;
use crate::env::{ShutdownSignals, default_state_dir, init_logging};
use crate::error::{Error, Result};
use crate::governance::Governance;
use crate::sandbox::{Confinement, Grant};
use crate::spec::OperatorSpec;
use crate::tier::Tier;

pub use options::BridgeOptions;
#[cfg(feature = "websocket")]
pub use options::{DEFAULT_TOKEN_ENV, TOKEN_ENV_VAR, token_from_env};

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

/// Runs `bridge` between an editor on `input`/`output` and the agent it starts (or, with
/// `BridgeOptions::connect` (feature `websocket`), dials), until either side goes away. `Ok` when the editor
/// closed its side; an error when the agent could not be started (reached) or went away first.
pub async fn bridge<B, R, W>(bridge: B, options: BridgeOptions, input: R, output: W) -> Result<()>
where
    B: BridgeOperator,
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (audit, governance) = oversight::<B>(&options)?;
    // The shims' socket folder outlives the relay: it is removed when this returns.
    let (sandbox, _socket_folder) = agent_sandbox::<B>(&options)?;
    let downstream = downstream(&bridge, &options, sandbox.as_ref());
    relay::run(B::spec(), downstream, options, governance, audit, input, output)
        .await
        .map_err(|error| Error::msg(error.to_string()))
}

/// The folder a sandboxed bridge's stdio MCP shims reach it in (feature `mcp`).
#[cfg(feature = "mcp")]
type SocketFolder = relay::SocketFolder;
#[cfg(not(feature = "mcp"))]
type SocketFolder = ();

/// The audit log and governance of a bridge: the options', else the manifest's (no
/// governance for a `basic` one).
fn oversight<B: BridgeOperator>(options: &BridgeOptions) -> Result<(AuditLog, Option<Arc<dyn Governance>>)> {
    let spec = B::spec();
    let audit = match &options.audit {
        Some(audit) => audit.clone(),
        None => {
            let state_dir = options.state_dir.clone().unwrap_or_else(|| default_state_dir(spec.id));
            spec.open_audit(options.audit_log.as_deref(), FsyncPolicy::EveryRecord, &state_dir)?
        }
    };
    let governance: Option<Arc<dyn Governance>> = match (&options.governance, B::Tier::NAME) {
        (Some(governance), _) => Some(Arc::clone(governance)),
        (None, "basic") => None,
        (None, _) => Some(Arc::new(spec.governance())),
    };
    Ok((audit, governance))
}

/// The sandbox a sandboxed bridge runs its agent in (SANDBOX.md, planned for this kernel),
/// granting the stdio shim the agent may be given to run, and the folder its Unix socket will
/// be in, made now (Landlock's rules are fixed when the agent starts; from ABI 9 they confine
/// connecting to pathname sockets); `None` without one. An error when it cannot be enforced
/// and the profile does not accept best effort — a remote agent ([`BridgeOptions::connect`])
/// cannot be confined at all.
fn agent_sandbox<B: BridgeOperator>(
    options: &BridgeOptions,
) -> Result<(Option<Arc<Confinement>>, Option<SocketFolder>)> {
    let spec = B::spec();
    let state_dir = options.state_dir.clone().unwrap_or_else(|| default_state_dir(spec.id));
    let runtime_files = (state_dir.as_path(), options.audit_log.as_deref());
    let Some(sandbox) =
        crate::sandbox::from_spec(spec, options.workspace_root.as_deref(), runtime_files).map_err(Error::msg)?
    else {
        return Ok((None, None));
    };
    #[cfg(feature = "websocket")]
    if options.connect.is_some() {
        let gap = "the agent is reached over WebSocket, so nothing of it is confined";
        if !sandbox.profile().best_effort {
            return Err(Error::msg(format!(
                "`{}`: the sandbox cannot be enforced: {gap}. Refusing to run unconfined; a profile that accepts this says `metadata: {{agentacp: {{enforcement: best-effort}}}}` in SANDBOX.md",
                spec.id
            )));
        }
        tracing::warn!(gap, "sandbox not fully enforced (best effort)");
    }
    let shim = options
        .shim_program()
        .map_err(|error| Error::msg(format!("no program to run as the stdio MCP shim: {error}")))?;
    #[cfg(feature = "mcp")]
    {
        let folder = SocketFolder::create().map_err(Error::msg)?;
        let granted = [(shim, Grant::Read), (folder.path().to_path_buf(), Grant::ConnectUnix)];
        Ok((Some(Arc::new(sandbox.granting(&granted))), Some(folder)))
    }
    #[cfg(not(feature = "mcp"))]
    Ok((Some(Arc::new(sandbox.granting(&[(shim, Grant::Read)]))), None))
}

/// The agent to relay to: the remote one [`BridgeOptions::connect`] names, else the
/// bridge's command — in `sandbox` when there is one: confined like a sandboxed server's
/// stdio MCP servers (the mounts, the memory limit, the network; no timer and no CPU limit,
/// as it lives for the connection), and passed `env.passthrough` besides what the bridge's
/// code passes.
fn downstream<B: BridgeOperator>(
    bridge: &B,
    options: &BridgeOptions,
    sandbox: Option<&Arc<Confinement>>,
) -> Downstream {
    #[cfg(feature = "websocket")]
    if let Some(dial) = &options.connect {
        return Downstream::Remote(dial.clone());
    }
    let _ = options;
    let command = bridge.downstream();
    Downstream::Process(match sandbox {
        Some(sandbox) => sandbox
            .profile()
            .env_passthrough
            .iter()
            .fold(command, |command, name| command.allow_env(name))
            .confined(Arc::clone(sandbox)),
        None => command,
    })
}

/// Running a bridge over stdio. Implemented for every [`BridgeOperator`].
pub trait RunBridge: BridgeOperator + Sized {
    /// Bridges stdin/stdout with [`BridgeOptions::from_env`], logging to stderr. SIGINT and
    /// SIGTERM end the input (as the editor closing its side does): the bridge answers what
    /// it can, stops the agent's process group, and returns `Ok`; a second signal returns at
    /// once (the agent's group is then stopped as the relay is dropped).
    fn bridge_stdio(self) -> impl Future<Output = Result<()>> + Send {
        self.bridge_stdio_with(BridgeOptions::from_env())
    }

    /// [`bridge_stdio`](RunBridge::bridge_stdio) with these options (e.g.
    /// [`BridgeOptions::from_env`] with `connect` (feature `websocket`) set from the
    /// command line).
    fn bridge_stdio_with(self, options: BridgeOptions) -> impl Future<Output = Result<()>> + Send {
        init_logging();
        async move {
            // Started by an agent as this bridge's stdio MCP shim: that, and nothing else.
            #[cfg(feature = "mcp")]
            if let Some(shim) = crate::mcp::shim::serve_if_asked().await {
                return shim;
            }
            let mut signals = ShutdownSignals::install()?;
            let (end, ended) = oneshot::channel();
            let input = EndOnSignal {
                inner: crate::jsonrpc::stdio::stdin(),
                end: Some(ended),
            };
            let run = bridge(self, options, input, crate::jsonrpc::stdio::stdout());
            tokio::pin!(run);
            tokio::select! {
                result = &mut run => return result,
                signal = signals.recv() => {
                    tracing::info!(signal = signal.name(), "stopping: cancelling running prompts, then the agent");
                    let _ = end.send(());
                }
            }
            tokio::select! {
                result = &mut run => result,
                signal = signals.recv() => {
                    tracing::warn!(signal = signal.name(), "second signal: stopping the agent now");
                    Err(Error::msg(format!("stopped by a second {}", signal.name())))
                }
            }
        }
    }

    /// Like [`bridge_stdio`](RunBridge::bridge_stdio), on a runtime of its own, for a plain
    /// `main`.
    fn run_stdio(self) -> Result<()> {
        self.run_stdio_with(BridgeOptions::from_env())
    }

    /// [`run_stdio`](RunBridge::run_stdio) with these options.
    fn run_stdio_with(self, options: BridgeOptions) -> Result<()> {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        let result = runtime.block_on(self.bridge_stdio_with(options));
        runtime.shutdown_timeout(Duration::from_millis(100));
        result
    }
}

impl<B: BridgeOperator> RunBridge for B {}

/// The editor's input, ending (EOF) once `end` fires: a signal then takes the path of the
/// editor closing its side.
struct EndOnSignal<R> {
    inner: R,
    /// `None` once ended.
    end: Option<oneshot::Receiver<()>>,
}

impl<R: AsyncRead + Unpin> AsyncRead for EndOnSignal<R> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        let Some(end) = &mut this.end else {
            return Poll::Ready(Ok(()));
        };
        if Pin::new(end).poll(cx).is_ready() {
            this.end = None;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}
