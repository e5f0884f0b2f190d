//! A connection to one agent: [`Client`] spawns it, runs `initialize`, opens sessions and
//! starts their prompt streams; the reader loop (`reader.rs`) answers the agent.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::io::BufReader;

use super::auth::{AuthKind, AuthMethodInfo, AuthPolicy};
use super::context::ClientContext;
use super::error::ClientError;
use super::options::{ClientOptions, Protocol};
use super::state::{Shared, Subscriber};
use super::stream::{self, PromptStream, StreamKind};
use super::{queue, reader, tap, terminal};
use crate::dialect::client_face;
use crate::downstream::Downstream;
use crate::jsonrpc::frame::FrameReader;
use crate::jsonrpc::outbox::Outbox;
use crate::jsonrpc::pending::RequestFailure;
use crate::methods;
use crate::oversight::Oversight;
use crate::subprocess::{AgentCommand, ExitState};
use crate::sync::lock;
use crate::wire::default as wire;

/// The dialect seam of a connection that asks for v2 (the client face of ACP v2 installed on
/// it before `initialize` is sent), and where the dialect's own answers come out; `None` for v1.
fn translate(outbox: &Outbox, protocol: Protocol) -> Option<reader::Translated> {
    (protocol != Protocol::V1).then(|| client_face::install(outbox, protocol == Protocol::V2OrV1))
}

/// How many updates of one turn may wait for the reader of its [`PromptStream`].
const UPDATE_QUEUE: usize = 1024;

/// A connection to one agent — a subprocess, or (feature `websocket`) a remote agent — initialized.
pub struct Client {
    pub(super) shared: Arc<Shared>,
    pub(super) initialize: wire::InitializeResponse,
    /// The `authMethods` of `initialize`, read from its JSON (`env_var` included).
    auth_methods: Vec<AuthMethodInfo>,
    /// Whether the agent takes MCP servers over ACP (`mcpCapabilities.acp`, read from the
    /// JSON: the pinned revision's types do not have it).
    mcp_over_acp: bool,
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
    /// Starts the agent and runs `initialize`, then `authenticate` when
    /// [`ClientOptions::auth`] picks one of the agent's methods. Fails — and stops the agent —
    /// when it does not answer within [`ClientOptions::initialize_timeout`], answers with an
    /// error, chooses a protocol version other than [`wire::PROTOCOL_VERSION`], or refuses the
    /// chosen `authenticate`.
    pub async fn connect(command: AgentCommand, options: ClientOptions) -> Result<Client, ClientError> {
        Client::open(Downstream::Process(command), options, None).await
    }

    /// Connects to a remote agent over WebSocket (`ws://`, or `wss://` with feature `tls`)
    /// and runs `initialize`, then `authenticate` as [`ClientOptions::auth`] says; the client
    /// is then the same as one [`connect`](Client::connect)ed to a subprocess: the same
    /// events, timeouts, permission handling, governance, audit mirror and wire tap. An
    /// `http://` or `https://` URL is refused ([`ClientError::Spawn`], `InvalidInput`): see
    /// [`connect_http`](Client::connect_http), or [`connect_remote`](Client::connect_remote)
    /// for either.
    ///
    /// ```ignore
    /// use agentacp::websocket::Dial;
    /// let token = std::env::var("AGENTACP_TOKEN")?;
    /// let client = Client::connect_websocket(Dial::new("wss://agents.example.com/acp").token(token), options).await?;
    /// ```
    ///
    /// What differs from a subprocess:
    /// - authentication: a token given with [`Dial::token`](crate::websocket::Dial::token) goes
    ///   as `Authorization: Bearer` on the upgrade, and the connection is authenticated from
    ///   the start. A refused upgrade (a token not accepted: `401`; a browser origin not
    ///   allowed: `403`) fails here with [`ClientError::Spawn`] whose error kind is
    ///   `PermissionDenied` and whose text names the status. Without a token on the upgrade,
    ///   an agent that needs one (it advertises the `bearer` auth method) serves nothing but
    ///   `initialize` and `authenticate` (else `-32000`) until
    ///   [`authenticate_with_token`](Client::authenticate_with_token) is called, or connect
    ///   does it with [`AuthPolicy::Token`](super::AuthPolicy::Token);
    /// - the [`AuthPolicy`](super::AuthPolicy) sees the agent as a command named by the URL
    ///   with an empty environment: none of ours reaches a remote agent, so the default never
    ///   picks an `env_var` method;
    /// - [`pid`](Client::pid) is `None`; [`close`](Client::close) closes the connection
    ///   (waiting up to [`ClientOptions::exit_grace`] for it to end) and returns `None`;
    /// - the workspace root the `fs/*` and `terminal/*` handlers are confined to is
    ///   [`ClientOptions::workspace_root`], else our current folder: the paths the agent
    ///   sends name files on this machine, whatever machine it runs on;
    /// - a connection that ends fails waiting requests with [`ClientError::AgentExited`],
    ///   whose "stderr" line says how the WebSocket ended;
    /// - the bounds of the connection itself (message size, keepalive pings, connect
    ///   timeout) are the [`Dial`](crate::websocket::Dial)'s.
    #[cfg(feature = "websocket")]
    pub async fn connect_websocket(
        dial: crate::websocket::Dial,
        options: ClientOptions,
    ) -> Result<Client, ClientError> {
        Client::connect_as(crate::websocket::Transport::WebSocket, dial, options).await
    }

    /// Connects to a remote agent over Streamable HTTP, the upstream RFD's profile that the
    /// official SDKs' HTTP clients and servers speak (`http://`, or `https://` with feature
    /// `tls`: HTTP/2 where ALPN agrees on it, else HTTP/1.1), and runs `initialize`, then
    /// `authenticate` as [`ClientOptions::auth`] says.
    ///
    /// ```ignore
    /// use agentacp::websocket::Dial;
    /// let token = std::env::var("AGENTACP_TOKEN")?;
    /// let client = Client::connect_http(Dial::new("https://agents.example.com/acp").token(token), options).await?;
    /// ```
    ///
    /// The client is then the same as one [`connect_websocket`](Client::connect_websocket)ed
    /// (what is said there holds), except:
    /// - the token goes as `Authorization: Bearer` on every request; connecting checks it
    ///   (one `GET` that opens nothing) and fails with `PermissionDenied` naming `401` or
    ///   `403` as over WebSocket; the connection itself opens with `initialize`;
    /// - what the agent sends comes on event streams (the connection's, and one per session,
    ///   opened as sessions are named); a stream that breaks is resumed with `Last-Event-ID`
    ///   for [`Dial::resume_within`](crate::websocket::Dial::resume_within), so that nothing
    ///   is missed or read twice from a server that numbers its events (agentacp's does);
    ///   one whose server no longer holds the events (`409` to the end of that time) ends
    ///   the connection with [`ClientError::AgentExited`] naming the stream and the status;
    /// - cookies the agent sets are kept for the connection and sent back with each request;
    /// - [`close`](Client::close) sends what is queued, then `DELETE` ends the connection;
    /// - a `ws://` or `wss://` URL is refused ([`ClientError::Spawn`], `InvalidInput`).
    #[cfg(feature = "websocket")]
    pub async fn connect_http(dial: crate::websocket::Dial, options: ClientOptions) -> Result<Client, ClientError> {
        Client::connect_as(crate::websocket::Transport::StreamableHttp, dial, options).await
    }

    /// Connects to a remote agent over the profile its URL names: WebSocket for `ws://` and
    /// `wss://` ([`connect_websocket`](Client::connect_websocket)), Streamable HTTP for
    /// `http://` and `https://` ([`connect_http`](Client::connect_http)).
    #[cfg(feature = "websocket")]
    pub async fn connect_remote(dial: crate::websocket::Dial, options: ClientOptions) -> Result<Client, ClientError> {
        Client::open(Downstream::Remote(dial), options, None).await
    }

    /// [`connect_remote`](Client::connect_remote), for a URL of `transport` only.
    #[cfg(feature = "websocket")]
    async fn connect_as(
        transport: crate::websocket::Transport,
        dial: crate::websocket::Dial,
        options: ClientOptions,
    ) -> Result<Client, ClientError> {
        let named = dial.transport().map_err(ClientError::Spawn)?;
        if named != transport {
            let (wants, other) = match transport {
                crate::websocket::Transport::WebSocket => ("connect_websocket dials ws:// and wss://", "connect_http"),
                crate::websocket::Transport::StreamableHttp => {
                    ("connect_http dials http:// and https://", "connect_websocket")
                }
            };
            return Err(ClientError::Spawn(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "cannot reach the agent at {}: {wants}; use {other} (or connect_remote) for this URL",
                    dial.url
                ),
            )));
        }
        Client::connect_remote(dial, options).await
    }

    /// [`Client::connect`], sending `initialize` with these params (a manifest's; the
    /// `clientCapabilities` are always the handlers').
    pub(crate) async fn spawn(
        command: AgentCommand,
        options: ClientOptions,
        initialize: Option<Value>,
    ) -> Result<Client, ClientError> {
        Client::open(Downstream::Process(command), options, initialize).await
    }

    /// Starts or dials the agent (the only difference between the two), then initializes.
    async fn open(
        downstream: Downstream,
        options: ClientOptions,
        initialize: Option<Value>,
    ) -> Result<Client, ClientError> {
        let root = match (&options.workspace_root, downstream.working_dir()) {
            (Some(root), _) => root.clone(),
            (None, Some(dir)) => dir.to_path_buf(),
            (None, None) => std::env::current_dir().map_err(|error| {
                let why = format!("cannot start the agent: the current folder cannot be read: {error}");
                ClientError::Spawn(std::io::Error::new(error.kind(), why))
            })?,
        };
        let root = crate::workspace::Workspace::open(&root).map_err(ClientError::InvalidState)?;
        let (process, stdin, stdout) = downstream
            .open(options.stderr_lines)
            .await
            .map_err(ClientError::Spawn)?;
        let (outbox, _writer) = match options.wire_tap.clone() {
            Some(tap) => Outbox::start(tap::TapWriter::new(stdin, tap), options.write_timeout),
            None => Outbox::start(stdin, options.write_timeout),
        };
        let permission = Arc::clone(&options.permission);
        let context = ClientContext::new(root, terminal::Terminals::default());
        let operator = options
            .operator_id
            .clone()
            .unwrap_or_else(|| options.client_info.0.clone());
        let oversight = Oversight::new(options.governance.clone(), options.audit.clone(), operator);
        let translated = translate(&outbox, options.protocol);
        let shared = Arc::new(Shared::new(outbox, permission, options, process, context, oversight));
        let stdout = queue::Flushing::new(BufReader::new(stdout), Arc::clone(&shared.flushes));
        let frames = FrameReader::new(stdout, shared.options.max_frame_bytes);
        tokio::spawn(reader::read_loop(Arc::clone(&shared), frames, translated));
        let mut client = Client {
            shared,
            // Replaced below; a client is only handed out once initialized.
            initialize: wire::InitializeResponse::new(0),
            auth_methods: Vec::new(),
            mcp_over_acp: false,
            closed: false,
        };
        let ready = async {
            let (response, auth_methods, mcp_over_acp) = client.initialize(initialize).await?;
            client.initialize = response;
            client.auth_methods = auth_methods;
            client.mcp_over_acp = mcp_over_acp;
            client.authenticate_at_connect(&downstream).await?;
            Ok(())
        }
        .await;
        match ready {
            Ok(()) => Ok(client),
            Err(error) => {
                client.close().await;
                Err(error)
            }
        }
    }

    async fn initialize(
        &self,
        params: Option<Value>,
    ) -> Result<(wire::InitializeResponse, Vec<AuthMethodInfo>, bool), ClientError> {
        let options = &self.shared.options;
        let method = wire::method_names::INITIALIZE;
        let mut params = params.filter(Value::is_object).unwrap_or_else(|| {
            json!({
                "protocolVersion": wire::PROTOCOL_VERSION,
                "clientInfo": { "name": options.client_info.0, "version": options.client_info.1 },
            })
        });
        params["clientCapabilities"] = methods::client_capabilities_json(options.handlers.capabilities());
        let elicitation = options.elicitation.as_ref().map(|handler| handler.modes());
        if let Some(modes) = elicitation.and_then(methods::elicitation_json) {
            params["clientCapabilities"]["elicitation"] = modes;
        }
        // The version we speak: the manifest's wire module's (in its params), else the default;
        // asked for v2, the dialect translates (see `translate`).
        let protocol = options.protocol;
        let ours = match protocol {
            Protocol::V1 => params
                .get("protocolVersion")
                .and_then(Value::as_u64)
                .and_then(|version| u16::try_from(version).ok())
                .unwrap_or(wire::PROTOCOL_VERSION),
            _ => protocol.asked(),
        };
        params["protocolVersion"] = Value::from(ours);
        let value: Value = self.shared.request(method, &params, options.initialize_timeout).await?;
        let chosen = value.get("protocolVersion").and_then(Value::as_u64);
        match chosen {
            Some(version) if version == u64::from(ours) || (protocol != Protocol::V1 && protocol.accepts(version)) => {}
            Some(version) => {
                return Err(ClientError::UnsupportedProtocol { agent: version, ours });
            }
            None => {
                return Err(ClientError::InvalidResponse {
                    method: method.to_string(),
                    reason: "no numeric `protocolVersion`".to_string(),
                });
            }
        }
        let auth_methods = AuthMethodInfo::read_all(&value);
        let mcp_over_acp = value["agentCapabilities"]["mcpCapabilities"]["acp"] == Value::Bool(true);
        let response = serde_json::from_value(value).map_err(|error| ClientError::InvalidResponse {
            method: method.to_string(),
            reason: error.to_string(),
        })?;
        Ok((response, auth_methods, mcp_over_acp))
    }

    /// The agent's `authMethods` from `initialize`, every kind (`agent`, `env_var`,
    /// `terminal`, others) read from its JSON.
    pub fn auth_methods(&self) -> &[AuthMethodInfo] {
        &self.auth_methods
    }

    /// `authenticate` with `method`, one of [`Client::auth_methods`]. Refused here, without
    /// asking, for a method the agent did not advertise and for a `terminal` one (the user
    /// runs those; they are never passed to `authenticate`). An `env_var` method needs its
    /// variables in the agent's environment ([`AgentCommand::allow_env`]).
    pub async fn authenticate(&self, method: &wire::AuthMethodId) -> Result<wire::AuthenticateResponse, ClientError> {
        self.offered(method)?;
        self.shared
            .request(
                wire::method_names::AUTHENTICATE,
                &wire::AuthenticateRequest::new(method.clone()),
                self.shared.options.request_timeout,
            )
            .await
    }

    /// `authenticate` with the `bearer` method ([`crate::auth::BEARER`]), `token` in
    /// `_meta.agentacp.token`: how a client shows a token to a remote agent (an agentacp
    /// server listening over WebSocket with tokens) when it did not send one on the upgrade.
    /// Until then such an agent answers every request but `initialize` and `authenticate`
    /// with `-32000`. Refused here, without asking, when the agent does not advertise
    /// `bearer`; a token the agent does not accept is a [`ClientError::Rpc`] (`-32000`). The
    /// token is never logged.
    pub async fn authenticate_with_token(&self, token: &str) -> Result<wire::AuthenticateResponse, ClientError> {
        let method = wire::AuthMethodId::from(crate::auth::BEARER);
        self.offered(&method)?;
        let params = json!({ "methodId": method, "_meta": { "agentacp": { "token": token } } });
        self.shared
            .request(
                wire::method_names::AUTHENTICATE,
                &params,
                self.shared.options.request_timeout,
            )
            .await
    }

    /// At connect: `authenticate` as [`ClientOptions::auth`] chooses, if at all.
    async fn authenticate_at_connect(&self, downstream: &Downstream) -> Result<(), ClientError> {
        let policy = &self.shared.options.auth;
        let Some(method) = policy.choose(&self.auth_methods, &downstream.command_for_auth()) else {
            return Ok(());
        };
        if method.as_str() == crate::auth::BEARER {
            if downstream.token_on_upgrade() {
                tracing::debug!("the bearer token went on the upgrade; no `authenticate` at connect");
                return Ok(());
            }
            if let AuthPolicy::Token(token) = policy {
                tracing::debug!("authenticating at connect with a bearer token");
                return self.authenticate_with_token(token).await.map(drop);
            }
        }
        tracing::debug!(%method, "authenticating at connect");
        self.authenticate(&method).await.map(drop)
    }

    /// The advertised method `method`, unless it cannot be passed to `authenticate`.
    fn offered(&self, method: &wire::AuthMethodId) -> Result<&AuthMethodInfo, ClientError> {
        let Some(advertised) = self.auth_methods.iter().find(|m| &m.id == method) else {
            let offered: Vec<&str> = self.auth_methods.iter().map(|m| m.id.as_str()).collect();
            return Err(ClientError::InvalidState(format!(
                "the agent does not offer the auth method `{method}` (it offers: {})",
                if offered.is_empty() {
                    "none".to_string()
                } else {
                    offered.join(", ")
                }
            )));
        };
        if let AuthKind::Terminal(terminal) = &advertised.kind {
            return Err(ClientError::InvalidState(format!(
                "`{method}` is a terminal auth method: run the agent with the arguments {:?} in a terminal \
                 and log in there; it is never passed to `authenticate`",
                terminal.args
            )));
        }
        Ok(advertised)
    }

    /// `logout`. Refused here, without asking, when the agent did not advertise it
    /// (`agentCapabilities.auth.logout` at `initialize`).
    pub async fn logout(&self) -> Result<wire::LogoutResponse, ClientError> {
        if self.initialize.agent_capabilities.auth.logout.is_none() {
            return Err(ClientError::InvalidState(
                "the agent does not offer `logout` (no `auth.logout` in its capabilities at `initialize`)".into(),
            ));
        }
        self.shared
            .request(
                wire::method_names::LOGOUT,
                &wire::LogoutRequest::default(),
                self.shared.options.request_timeout,
            )
            .await
    }

    /// The ACP protocol version spoken with the agent, as it answered `initialize` (2 for a
    /// v2 agent, whose messages the client reads as v1's: see [`ClientOptions::protocol`]).
    pub fn protocol_version(&self) -> u16 {
        self.initialize.protocol_version
    }

    /// The agent's answer to `initialize` (capabilities, `agentInfo`, `_meta`; a v2 agent's
    /// in the v1 shape).
    pub fn initialize_response(&self) -> &wire::InitializeResponse {
        &self.initialize
    }

    /// The agent's process id (also its process group id); `None` for a remote agent. Where
    /// the agent runs in a PID namespace of its own (a runtime run as root, the sandbox), the
    /// process the runtime started stands for it: it waits for the agent and ends as it did,
    /// and a signal to its group reaches the agent.
    pub fn pid(&self) -> Option<u32> {
        self.shared.process.pid
    }

    /// The workspace root (canonical).
    pub fn workspace_root(&self) -> &Path {
        self.shared.context.root()
    }

    pub(super) fn confine_cwd(&self, cwd: &Path) -> Result<PathBuf, ClientError> {
        self.shared
            .context
            .workspace()
            .confine_cwd(&cwd.to_string_lossy())
            .map(|session| session.path())
            .map_err(ClientError::InvalidState)
    }

    /// `session/new` in `cwd` (absolute, inside the workspace root); the new session's id.
    /// The modes and config options of the answer are kept ([`Client::session_state`]).
    pub async fn new_session(&self, cwd: &Path) -> Result<wire::SessionId, ClientError> {
        self.new_session_with_mcp_servers(cwd, json!([])).await
    }

    /// [`new_session`](Client::new_session) with MCP servers for the agent to use
    /// (`mcpServers`: ACP `McpServer` objects, e.g.
    /// `{"name": "notes", "command": "/usr/bin/notes-mcp", "args": [], "env": []}`).
    pub async fn new_session_with_mcp_servers(
        &self,
        cwd: &Path,
        mcp_servers: Value,
    ) -> Result<wire::SessionId, ClientError> {
        let cwd = self.confine_cwd(cwd)?;
        let (mcp_servers, own) = self.with_own_mcp_servers(mcp_servers, None);
        let created: wire::NewSessionResponse = self
            .shared
            .request(
                wire::method_names::SESSION_NEW,
                &json!({ "cwd": cwd, "mcpServers": mcp_servers }),
                self.shared.options.request_timeout,
            )
            .await?;
        self.shared.context.set_session_cwd(created.session_id.as_str(), cwd);
        let session = created.session_id.as_str();
        own.created(self, session);
        (self.shared.sessions).answered(session, created.modes, created.config_options, created.meta);
        Ok(created.session_id)
    }

    /// `mcp_servers` and the MCP servers this client provides over ACP
    /// ([`ClientOptions::with_mcp_over_acp`]) for the session `session` (`None`: the one this
    /// request creates), when the agent takes them (else they are left out, with a warning).
    pub(super) fn with_own_mcp_servers(
        &self,
        mcp_servers: Value,
        session: Option<&wire::SessionId>,
    ) -> (Value, OwnMcpServers) {
        #[cfg(feature = "mcp")]
        let (mcp_servers, listed) = {
            let mut listed = OwnMcpServers::default();
            let mut mcp_servers = mcp_servers;
            let own = &self.shared.options.mcp_over_acp;
            if !own.is_empty() && !self.mcp_over_acp {
                tracing::warn!(
                    servers = ?own.iter().map(|s| &s.name).collect::<Vec<_>>(),
                    "the agent does not advertise `mcpCapabilities.acp`: the MCP servers this client provides over ACP are left out of the session"
                );
            } else if let Some(list) = mcp_servers.as_array_mut() {
                let (entries, ids) = self.shared.mcp.offer(own, session.map(wire::SessionId::as_str));
                list.extend(entries);
                listed.0 = ids;
            }
            (mcp_servers, listed)
        };
        #[cfg(not(feature = "mcp"))]
        let listed = {
            let _ = session;
            OwnMcpServers::default()
        };
        (mcp_servers, listed)
    }

    /// Whether the agent takes MCP servers over ACP (`mcpCapabilities.acp` at `initialize`).
    pub fn takes_mcp_over_acp(&self) -> bool {
        self.mcp_over_acp
    }

    /// `session/load` of `session` in `cwd`: a stream of the history the agent replays, each
    /// update as [`PromptEvent::Replay`](crate::client::PromptEvent::Replay) (the agent's account of the past: untrusted, and not
    /// audited as live tool calls), ending with [`PromptEvent::Loaded`](crate::client::PromptEvent::Loaded). Refused here, without
    /// asking, when the agent did not advertise `loadSession` at `initialize`.
    pub async fn load_session(&self, session: &wire::SessionId, cwd: &Path) -> Result<PromptStream, ClientError> {
        if !self.initialize.agent_capabilities.load_session {
            return Err(ClientError::InvalidState(
                "the agent does not offer `session/load` (no `loadSession` in its capabilities at `initialize`)".into(),
            ));
        }
        let cwd = self.confine_cwd(cwd)?;
        let (mcp_servers, _) = self.with_own_mcp_servers(json!([]), Some(session));
        let params = json!({ "sessionId": session, "cwd": cwd, "mcpServers": mcp_servers });
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
        let (sender, updates) = queue::queue(UPDATE_QUEUE);
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
        stream::cancel(&self.shared, session).await
    }

    /// Closes stdin, then stops the agent (SIGTERM, then SIGKILL to its process group, see
    /// [`ClientOptions`]) and reaps it. Its exit status, when it could be read. A remote
    /// agent's connection is closed instead (waiting up to [`ClientOptions::exit_grace`] for
    /// it to end); `None`.
    /// Dropped before it finishes, the client stops the agent's group as a drop does.
    pub async fn close(mut self) -> Option<ExitStatus> {
        let status = stop(&self.shared).await;
        self.closed = true;
        status
    }

    fn subscribe(
        &self,
        session: &wire::SessionId,
        sender: Arc<queue::UpdateQueue>,
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
    // Before its stdin closes: once it exits, what it started is no longer below it.
    shared.process.note_descendants();
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
        // Not closed with `close` (an early return on an error, a panic, a runtime shutting
        // down): nothing here may await, and a task spawned now could die with the runtime
        // before it ran. Stop the agent's whole process group now, bounded.
        tracing::debug!(pid = ?self.shared.process.pid, "client dropped without close(); stopping the agent");
        self.shared.process.note_descendants();
        self.shared.close_outbox();
        self.shared.oversight.flush();
        self.shared.context.terminals().kill_all();
        self.shared.process.stop_now(self.shared.options.kill_grace);
    }
}

/// The ids of the MCP servers this client listed over ACP in a `session/new` (see
/// [`Client::with_own_mcp_servers`]).
#[derive(Debug, Default)]
pub(super) struct OwnMcpServers(Vec<String>);

impl OwnMcpServers {
    /// The session they were listed for was created as `session`.
    fn created(&self, client: &Client, session: &str) {
        #[cfg(feature = "mcp")]
        client.shared.mcp.session_created(&self.0, session);
        #[cfg(not(feature = "mcp"))]
        let _ = (client, session, &self.0);
    }
}
