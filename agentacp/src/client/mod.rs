//! A typed ACP client: spawns an agent as a subprocess and talks to it over its stdio.
//!
//! ```ignore
//! use agentacp::client::{AgentCommand, Client, ClientOptions, PromptEvent};
//!
//! let client = Client::connect(AgentCommand::new("my-agent"), ClientOptions::default()).await?;
//! let session = client.new_session(std::path::Path::new("/work")).await?;
//! let mut turn = client.prompt_text(&session, "hello").await?;
//! while let Some(event) = turn.next().await {
//!     match event? {
//!         PromptEvent::Update(update) => println!("{update:?}"),
//!         PromptEvent::Stop(reason) => println!("stopped: {reason:?}"),
//!     }
//! }
//! client.close().await;
//! ```
//!
//! Safety rails:
//! - every wait on the agent is bounded (see [`ClientOptions`] for the timeouts and defaults);
//! - requests still waiting fail when the agent closes its stdout or exits, with its exit
//!   status and the last lines of its stderr ([`ClientError::AgentExited`]);
//! - the agent runs in its own process group with a cleared environment ([`AgentCommand`]);
//!   [`Client::close`] (or dropping the client) closes its stdin, waits
//!   [`ClientOptions::exit_grace`], SIGTERMs the group, waits [`ClientOptions::kill_grace`],
//!   SIGKILLs the group and reaps it;
//! - a message over [`ClientOptions::max_frame_bytes`] is discarded without being buffered
//!   whole; if it answered one of our requests that request fails, the connection goes on;
//!   lines that are not JSON-RPC are logged and ignored;
//! - every `session/request_permission` goes to the [`PermissionHandler`]; the default,
//!   [`RejectAll`], rejects; a timeout or a cancel of the turn rejects too.
//!
//! - the agent's `fs/*` and `terminal/*` requests go to [`ClientHandlers`] (default: none
//!   offered, `-32601`); paths and a terminal's `cwd` must be absolute and inside the
//!   workspace root before any handler sees them ([`Builtin`] implements them all);
//! - with a [`Governance`] binding, `allow`/`deny` answer permission requests without asking;
//!   every tool call is mirrored to the audit log with its approval ([`ClientOptions::audit`]);
//! - `session/load` history arrives as [`PromptEvent::Replay`] (untrusted, not audited as live).
//!
//! Not yet: `authenticate`.

mod connection;
mod error;
mod events;
pub mod fs;
mod handlers;
mod operator;
pub(crate) mod oversight;
pub(crate) mod permission;
pub(crate) mod process;
mod tap;
pub mod terminal;

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::BufReader;
use tokio::sync::mpsc;

pub use connection::TERMINAL_TOOL;
pub use error::ClientError;
use events::StreamKind;
pub use events::{PromptEvent, PromptStream, Update};
pub use handlers::{Builtin, Capabilities, ClientContext, ClientHandlers, HandlerResult, NoHandlers, decode, encode};
pub use operator::{ClientOperator, Connect};
pub use permission::{BoxFuture, PermissionDecision, PermissionHandler, RejectAll};
pub use process::{AgentCommand, DEFAULT_ENV_ALLOW};
pub use tap::{Direction, WireTap};

use crate::audit::AuditLog;
use crate::governance::Governance;
use crate::jsonrpc::frame::FrameReader;
use crate::jsonrpc::outbox::Outbox;
use crate::jsonrpc::pending::RequestFailure;
use crate::wire::default as wire;
use connection::{Shared, Subscriber, lock};
use oversight::Oversight;
use process::ExitState;

/// How many updates of one turn may wait for the reader of its [`PromptStream`].
const UPDATE_QUEUE: usize = 1024;

/// Timeouts and limits of a [`Client`]. Every field has a documented default.
#[derive(Clone)]
pub struct ClientOptions {
    /// The answer to `initialize`. Default 30 s.
    pub initialize_timeout: Duration,
    /// The answer to any other request (`session/new`, `session/load`), and sending a
    /// notification. Default 60 s.
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
    /// ([`AgentCommand::current_dir`]), else ours.
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
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            initialize_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(60),
            prompt_idle_timeout: Duration::from_secs(600),
            permission_timeout: Duration::from_secs(300),
            write_timeout: Duration::from_secs(60),
            max_frame_bytes: 4 * 1024 * 1024,
            exit_grace: Duration::from_secs(2),
            kill_grace: Duration::from_secs(5),
            stderr_lines: 20,
            client_info: ("agentacp".to_string(), env!("CARGO_PKG_VERSION").to_string()),
            permission: Arc::new(RejectAll),
            handlers: Arc::new(NoHandlers),
            workspace_root: None,
            governance: None,
            audit: AuditLog::off(),
            operator_id: None,
            wire_tap: None,
        }
    }
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientOptions")
            .field("initialize_timeout", &self.initialize_timeout)
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
            .finish_non_exhaustive()
    }
}

impl ClientOptions {
    /// Uses `handler` for permission requests.
    pub fn with_permission(mut self, handler: impl PermissionHandler) -> Self {
        self.permission = Arc::new(handler);
        self
    }

    /// Uses `handlers` for the agent's `fs/*` and `terminal/*` requests (e.g.
    /// [`Builtin::read_only`]).
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

    /// Confines sessions and file access to `root`.
    pub fn with_workspace_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.workspace_root = Some(root.into());
        self
    }
}

/// A connection to one agent subprocess, initialized.
pub struct Client {
    shared: Arc<Shared>,
    initialize: wire::InitializeResponse,
    closed: bool,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("pid", &self.shared.process.pid)
            .field("agent", &self.initialize.agent_info)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Starts the agent and runs `initialize`. Fails — and stops the agent — when it does
    /// not answer within [`ClientOptions::initialize_timeout`], answers with an error, or
    /// chooses a protocol version other than [`wire::PROTOCOL_VERSION`].
    pub async fn connect(command: AgentCommand, options: ClientOptions) -> Result<Client, ClientError> {
        Client::spawn(command, options, None).await
    }

    /// [`Client::connect`], sending `initialize` with these params (a manifest's; the
    /// `clientCapabilities` are always the handlers').
    pub(crate) async fn spawn(
        command: AgentCommand,
        options: ClientOptions,
        initialize: Option<Value>,
    ) -> Result<Client, ClientError> {
        let root = match (&options.workspace_root, command.working_dir()) {
            (Some(root), _) => root.clone(),
            (None, Some(dir)) => dir.to_path_buf(),
            (None, None) => std::env::current_dir().map_err(ClientError::Spawn)?,
        };
        let root = crate::workspace::Workspace::open(&root).map_err(ClientError::InvalidState)?;
        let (process, stdin, stdout) = process::spawn(&command, options.stderr_lines)?;
        let (outbox, _writer) = match options.wire_tap.clone() {
            Some(tap) => Outbox::start(tap::TapWriter::new(stdin, tap), options.write_timeout),
            None => Outbox::start(stdin, options.write_timeout),
        };
        let frames = FrameReader::new(BufReader::new(stdout), options.max_frame_bytes);
        let permission = Arc::clone(&options.permission);
        let context = ClientContext::new(root, terminal::Terminals::default());
        let operator = options
            .operator_id
            .clone()
            .unwrap_or_else(|| options.client_info.0.clone());
        let oversight = Oversight::new(options.governance.clone(), options.audit.clone(), operator);
        let shared = Arc::new(Shared::new(outbox, permission, options, process, context, oversight));
        tokio::spawn(connection::read_loop(Arc::clone(&shared), frames));
        let mut client = Client {
            shared,
            // Replaced below; a client is only handed out once initialized.
            initialize: wire::InitializeResponse::new(0),
            closed: false,
        };
        match client.initialize(initialize).await {
            Ok(response) => {
                client.initialize = response;
                Ok(client)
            }
            Err(error) => {
                client.close().await;
                Err(error)
            }
        }
    }

    async fn initialize(&self, params: Option<Value>) -> Result<wire::InitializeResponse, ClientError> {
        let options = &self.shared.options;
        let method = wire::method_names::INITIALIZE;
        let mut params = params.filter(Value::is_object).unwrap_or_else(|| {
            json!({
                "protocolVersion": wire::PROTOCOL_VERSION,
                "clientInfo": { "name": options.client_info.0, "version": options.client_info.1 },
            })
        });
        params["clientCapabilities"] = options.handlers.capabilities().to_json();
        let value: Value = self.shared.request(method, &params, options.initialize_timeout).await?;
        let chosen = value.get("protocolVersion").and_then(Value::as_u64);
        match chosen {
            Some(version) if version == u64::from(wire::PROTOCOL_VERSION) => {}
            Some(version) => {
                return Err(ClientError::UnsupportedProtocol {
                    agent: version,
                    ours: wire::PROTOCOL_VERSION,
                });
            }
            None => {
                return Err(ClientError::InvalidResponse {
                    method: method.to_string(),
                    reason: "no numeric `protocolVersion`".to_string(),
                });
            }
        }
        serde_json::from_value(value).map_err(|error| ClientError::InvalidResponse {
            method: method.to_string(),
            reason: error.to_string(),
        })
    }

    /// The agent's answer to `initialize` (capabilities, `agentInfo`, `_meta`).
    pub fn initialize_response(&self) -> &wire::InitializeResponse {
        &self.initialize
    }

    /// The agent's process id (also its process group id).
    pub fn pid(&self) -> Option<u32> {
        self.shared.process.pid
    }

    /// The workspace root (canonical).
    pub fn workspace_root(&self) -> &Path {
        self.shared.context.root()
    }

    fn confine_cwd(&self, cwd: &Path) -> Result<PathBuf, ClientError> {
        self.shared
            .context
            .workspace()
            .confine_cwd(&cwd.to_string_lossy())
            .map(|session| session.path())
            .map_err(ClientError::InvalidState)
    }

    /// `session/new` in `cwd` (absolute, inside the workspace root); the new session's id.
    pub async fn new_session(&self, cwd: &Path) -> Result<wire::SessionId, ClientError> {
        let cwd = self.confine_cwd(cwd)?;
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Created {
            session_id: wire::SessionId,
        }
        let created: Created = self
            .shared
            .request(
                wire::method_names::SESSION_NEW,
                &json!({ "cwd": cwd, "mcpServers": [] }),
                self.shared.options.request_timeout,
            )
            .await?;
        self.shared.context.set_session_cwd(created.session_id.as_str(), cwd);
        Ok(created.session_id)
    }

    /// `session/load` of `session` in `cwd`: a stream of the history the agent replays, each
    /// update as [`PromptEvent::Replay`] (the agent's account of the past: untrusted, and not
    /// audited as live tool calls), ending with [`PromptEvent::Loaded`]. Refused here, without
    /// asking, when the agent did not advertise `loadSession` at `initialize`.
    pub async fn load_session(&self, session: &wire::SessionId, cwd: &Path) -> Result<PromptStream, ClientError> {
        if !self.initialize.agent_capabilities.load_session {
            return Err(ClientError::InvalidState(
                "the agent does not offer `session/load` (no `loadSession` in its capabilities at `initialize`)".into(),
            ));
        }
        let cwd = self.confine_cwd(cwd)?;
        let params = json!({ "sessionId": session, "cwd": cwd, "mcpServers": [] });
        let stream = self
            .start(session, wire::method_names::SESSION_LOAD, &params, StreamKind::Load)
            .await?;
        self.shared.context.set_session_cwd(session.as_str(), cwd);
        Ok(stream)
    }

    /// `session/prompt` with `prompt`; read its events from the stream.
    pub async fn prompt(
        &self,
        session: &wire::SessionId,
        prompt: Vec<wire::ContentBlock>,
    ) -> Result<PromptStream, ClientError> {
        let params = json!({ "sessionId": session, "prompt": prompt });
        self.start(session, wire::method_names::SESSION_PROMPT, &params, StreamKind::Prompt)
            .await
    }

    /// Sends a request whose session's updates form a stream until it is answered.
    async fn start(
        &self,
        session: &wire::SessionId,
        method: &'static str,
        params: &Value,
        kind: StreamKind,
    ) -> Result<PromptStream, ClientError> {
        let (sender, updates) = mpsc::channel(UPDATE_QUEUE);
        let tag = self.subscribe(session, sender, kind == StreamKind::Load)?;
        let subscribed = Unsubscribe(self, session, tag);
        let waiting = self
            .shared
            .pending
            .register()
            .ok_or_else(|| self.shared.closed_error())?;
        let id = waiting.id.clone();
        let line = crate::jsonrpc::encode_request(&id, method, params);
        let outbox = self.shared.outbox()?;
        let timeout = self.shared.options.request_timeout;
        let sent = tokio::time::timeout(timeout, outbox.send(line)).await;
        if !matches!(sent, Ok(Ok(()))) {
            self.shared.pending.forget(&id);
            return Err(match sent {
                Err(_) => self.shared.timeout_error(method, timeout),
                _ => self.shared.closed_error(),
            });
        }
        std::mem::forget(subscribed);
        Ok(PromptStream {
            shared: Arc::clone(&self.shared),
            session: session.clone(),
            id,
            tag,
            kind,
            updates,
            answer: Some(Box::pin(async move {
                let answer: Result<_, RequestFailure> = waiting.answer().await;
                answer
            })),
            idle: Box::pin(tokio::time::sleep(self.shared.options.prompt_idle_timeout)),
            last_message: tokio::time::Instant::now(),
        })
    }

    /// [`Client::prompt`] with one text block.
    pub async fn prompt_text(&self, session: &wire::SessionId, text: &str) -> Result<PromptStream, ClientError> {
        let block: wire::ContentBlock = serde_json::from_value(json!({ "type": "text", "text": text }))
            .map_err(|error| ClientError::InvalidState(error.to_string()))?;
        self.prompt(session, vec![block]).await
    }

    /// `session/cancel`: the running turn ends with `cancelled`; permission requests waiting
    /// in the session are answered `cancelled`.
    pub async fn cancel(&self, session: &wire::SessionId) -> Result<(), ClientError> {
        events::cancel(&self.shared, session).await
    }

    /// Closes stdin, then stops the agent (SIGTERM, then SIGKILL to its process group, see
    /// [`ClientOptions`]) and reaps it. Its exit status, when it could be read.
    pub async fn close(mut self) -> Option<ExitStatus> {
        self.closed = true;
        stop(&self.shared).await
    }

    fn subscribe(
        &self,
        session: &wire::SessionId,
        sender: mpsc::Sender<Update>,
        replay: bool,
    ) -> Result<i64, ClientError> {
        static TAGS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
        let tag = TAGS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut subscribers = lock(&self.shared.subscribers);
        if subscribers.contains_key(session.as_str()) {
            return Err(ClientError::InvalidState(format!(
                "session {} already has a prompt (or load) running",
                session.as_str()
            )));
        }
        subscribers.insert(session.as_str().to_string(), Subscriber { tag, sender, replay });
        Ok(tag)
    }

    fn unsubscribe(&self, session: &wire::SessionId, tag: i64) {
        let mut subscribers = lock(&self.shared.subscribers);
        if subscribers.get(session.as_str()).is_some_and(|s| s.tag == tag) {
            subscribers.remove(session.as_str());
        }
    }
}

struct Unsubscribe<'a>(&'a Client, &'a wire::SessionId, i64);

impl Drop for Unsubscribe<'_> {
    fn drop(&mut self) {
        self.0.unsubscribe(self.1, self.2);
    }
}

async fn stop(shared: &Shared) -> Option<ExitStatus> {
    shared.close_outbox();
    shared.oversight.flush();
    shared.context.terminals().kill_all();
    let options = &shared.options;
    match shared.process.stop(options.exit_grace, options.kill_grace).await {
        ExitState::Exited(status) => status,
        ExitState::Running => {
            tracing::error!(pid = ?shared.process.pid, "the agent could not be stopped");
            None
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        // Not closed with `close`: stop the agent in the background.
        let shared = Arc::clone(&self.shared);
        shared.close_outbox();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                stop(&shared).await;
            });
        }
    }
}
