//! The reader loop of one connection: reads frames in order, answers what is quick inline,
//! runs turns (and loads) as tasks, and shuts down cleanly at end of input.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::io::AsyncBufRead;
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};

use crate::audit::{AuditEvent, Lifecycle};
use crate::connection::{self, CONTINUE, CancelRequest, Flow, InFlight, Request, Role};
use crate::error::Error;
use crate::governance::OperatorProfile;
use crate::jsonrpc::frame::FrameReader;
use crate::jsonrpc::{self, Id, RpcError, codes};
use crate::wire::default::method_names as names;

use super::access::{self, StoreBook};
use super::connection::Connection;
use super::memory::MemoryBook;
#[cfg(feature = "postgres")]
use super::open_sessions::prompt_running;
use super::open_sessions::{AbandonOnDrop, Activity, LoadInFlight, SessionEntry, Sessions, Settled, retire};
use super::operator::Operator;
use super::session::{SessionContext, StoredSession};
use super::sign_in;
use super::turn::{Turn, TurnScope};
use crate::methods;
use crate::spec::OperatorSpec;
use crate::surface::{CommandInput, ConfigValue, Settings, Surface};
use crate::sync::lock;
use crate::workspace::Workspace;

/// One of the client's requests answered by a task (see [`Dispatcher::start`]).
struct Flight {
    abort: AbortHandle,
    /// Whoever flips this first sends the answer (the task, or `$/cancel_request`).
    answered: Arc<AtomicBool>,
    /// For prompts: the session, cancelled like `session/cancel`.
    session: Option<String>,
    /// For loads: the load, given up on at once when its request is cancelled (before the
    /// next message is read, so that what comes next finds the session as it was).
    load: Option<LoadInFlight>,
}

type InFlightTable = Arc<InFlight<Flight>>;

pub(crate) struct Dispatcher<O: Operator> {
    operator: Arc<O>,
    spec: &'static OperatorSpec,
    /// The operator's AIP-9 profile, handed to every session.
    profile: Arc<OperatorProfile>,
    /// The operator's memory, by session.
    memory: Arc<MemoryBook>,
    initialize_response: Value,
    connection: Arc<Connection>,
    /// The session store of each identity.
    stores: Arc<StoreBook>,
    /// The workspace root, held open; or why there is none (sessions are then refused).
    workspace_root: Result<Workspace, String>,
    initialized: bool,
    sessions: Sessions,
    in_flight: InFlightTable,
    tasks: JoinSet<()>,
    /// The request each task answers, so a task that panics still gets its request answered.
    task_requests: HashMap<tokio::task::Id, (Id, Arc<AtomicBool>)>,
    shutdown_grace: Duration,
    /// The most sessions this connection may have.
    max_sessions: usize,
    /// Whether the user signed in on this connection (a declared `agent` method's
    /// `authenticate` succeeded, or the credential file held a credential).
    signed_in: Arc<AtomicBool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InitializeParams {
    protocol_version: u64,
    #[serde(default)]
    client_info: Option<ClientInfo>,
    #[serde(default)]
    client_capabilities: Option<Value>,
}

#[derive(Deserialize)]
struct ClientInfo {
    name: String,
}

/// The params of a request that opens a session in a folder: its own `fields` first, then
/// the folder, the additional ones and the MCP servers (one struct each, not a flattened one:
/// serde's errors name the field and its place in the params either way).
macro_rules! opening_params {
    ($(#[$doc:meta])* $name:ident { $($field:ident: $type:ty,)* }) => {
        $(#[$doc])*
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct $name {
            $($field: $type,)*
            cwd: String,
            #[serde(default)]
            additional_directories: Vec<String>,
            #[serde(default)]
            mcp_servers: Value,
        }
    };
}

opening_params!(
    /// `session/new`: a session opened in a folder.
    NewSessionParams {}
);

opening_params!(
    /// `session/load` and `session/resume`: a stored session, reopened in a folder.
    ReopenSessionParams { session_id: String, }
);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListSessionsParams {
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    cursor: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SetModeParams {
    session_id: String,
    mode_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SetConfigParams {
    session_id: String,
    config_id: String,
    value: Value,
}

/// How many sessions one `session/list` page holds.
const LIST_PAGE: usize = 50;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionRef {
    session_id: String,
}

/// The params of a message the runtime answers itself (`initialize`, `session/new`,
/// `session/close`, `session/cancel`): decoded through the pinned
/// revision's generated enums first ([`Operator::check_params`]: the whole message against
/// the schema's types), then read for the few fields the runtime uses.
///
/// MCP servers of `"type": "acp"` (MCP-over-ACP) are left out of that check: the pinned
/// revision's `McpServer` does not have them; `check_mcp_servers` reads them instead.
fn runtime_params<'a, O: Operator, T: Deserialize<'a>>(
    method: &str,
    params: Option<&'a RawValue>,
    notification: bool,
) -> Result<T, RpcError> {
    let carries_mcp_servers = matches!(method, names::SESSION_NEW | names::SESSION_LOAD | names::SESSION_RESUME);
    match params.filter(|_| carries_mcp_servers).and_then(without_acp_mcp_servers) {
        Some(checked) => O::check_params(method, Some(&checked), notification)?,
        None => O::check_params(method, params, notification)?,
    }
    read_params(method, params)
}

/// `params` without their `mcpServers` of `"type": "acp"`, when they have any.
fn without_acp_mcp_servers(params: &RawValue) -> Option<Box<RawValue>> {
    if !params.get().contains("\"acp\"") {
        return None;
    }
    let mut value: Value = serde_json::from_str(params.get()).ok()?;
    let servers = value.get_mut("mcpServers")?.as_array_mut()?;
    let before = servers.len();
    servers.retain(|server| server.get("type").and_then(Value::as_str) != Some("acp"));
    if servers.len() == before {
        return None;
    }
    serde_json::value::to_raw_value(&value).ok()
}

fn read_params<'a, T: Deserialize<'a>>(method: &str, params: Option<&'a RawValue>) -> Result<T, RpcError> {
    let text = params.map_or("null", RawValue::get);
    serde_json::from_str(text)
        .map_err(|error| RpcError::new(codes::INVALID_PARAMS, format!("invalid params for `{method}`: {error}")))
}

impl<O: Operator> Dispatcher<O> {
    pub(crate) fn new(
        operator: Arc<O>,
        (connection, stores): (Arc<Connection>, Arc<StoreBook>),
        (profile, memory): (Arc<OperatorProfile>, Arc<MemoryBook>),
        workspace_root: Result<Workspace, String>,
        shutdown_grace: Duration,
        max_sessions: usize,
    ) -> Self {
        let spec = O::spec();
        let mut initialize_response = spec.initialize_result();
        if connection.access.tokens.is_some() {
            access::advertise(&mut initialize_response);
        }
        #[cfg(not(feature = "mcp"))]
        for transport in unadvertise_mcp(&mut initialize_response) {
            tracing::warn!(
                transport,
                "the manifest declares `mcpCapabilities.{transport}`, but this agent was built without agentacp's feature `mcp`: not advertised"
            );
        }
        if let Some(sandbox) = &connection.sandbox {
            // What this kernel enforces of SANDBOX.md (the manifest's ask is in `explain`).
            initialize_response["_meta"]["aip44"]["sandbox_enforcement"] = sandbox.report();
        }
        Dispatcher {
            operator,
            spec,
            profile,
            memory,
            initialize_response,
            connection,
            stores,
            workspace_root,
            initialized: false,
            sessions: Arc::default(),
            in_flight: Arc::default(),
            tasks: JoinSet::new(),
            task_requests: HashMap::new(),
            shutdown_grace,
            max_sessions,
            signed_in: Arc::default(),
        }
    }

    /// The declared sign-in methods that apply to this connection: none on a WebSocket
    /// listener with tokens (which offers its bearer method instead).
    fn sign_in_methods(&self) -> &'static [crate::surface::SignIn] {
        match self.connection.access.tokens {
            Some(_) => &[],
            None => self.spec.surface.sign_in,
        }
    }

    /// `Err` (`-32000`) for a request other than `authenticate` while the operator declares
    /// sign-in methods and the user has not signed in (see [`sign_in`]).
    fn check_signed_in(&self, method: &str) -> Result<(), RpcError> {
        let methods = self.sign_in_methods();
        if methods.is_empty() || method == names::AUTHENTICATE || self.signed_in.load(Ordering::Acquire) {
            return Ok(());
        }
        if self.operator.credential_file().is_some_and(|file| file.holds_one()) {
            self.signed_in.store(true, Ordering::Release);
            return Ok(());
        }
        Err(sign_in::required(method, methods))
    }

    /// Reads and handles frames until end of input (on the connection core), then shuts down.
    pub(crate) async fn run<R: AsyncBufRead + Unpin + Send>(mut self, frames: FrameReader<R>) {
        let tokens = self.connection.access.tokens.as_ref();
        let revocations = tokens.and_then(|tokens| tokens.revocations());
        // A store that says when it learns of a revocation wakes the connection at once (see
        // `FromClient::wait`); it learns only by a notification or its poll, so checking more
        // often than it polls finds nothing new.
        let recheck = tokens
            .and_then(|tokens| tokens.poll_period())
            .map_or(REVOCATION_RECHECK, |poll| poll.max(REVOCATION_RECHECK));
        let mut revocation = tokio::time::interval(recheck);
        revocation.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut role = FromClient {
            dispatcher: &mut self,
            revocation,
            revocations,
        };
        connection::serve(&mut role, frames).await;
        self.shut_down().await;
    }

    /// A task ended: forget it; if operator code panicked in it, answer its request.
    async fn reap(&mut self, joined: Result<(tokio::task::Id, ()), tokio::task::JoinError>) {
        let (task, panicked) = match &joined {
            Ok((task, ())) => (*task, false),
            Err(error) => (error.id(), error.is_panic()),
        };
        let Some((request, answered)) = self.task_requests.remove(&task) else {
            return;
        };
        {
            // Only this task's entry: the id may already name a newer request.
            let mut in_flight = self.in_flight.lock();
            if in_flight.get(&request).is_some_and(|flight| flight.abort.id() == task) {
                in_flight.remove(&request);
            }
        }
        if panicked && !answered.swap(true, Ordering::SeqCst) {
            tracing::error!(%request, "the operator panicked while handling a request");
            let error = RpcError::new(
                codes::INTERNAL_ERROR,
                "the operator panicked while handling this request",
            );
            let _ = self.connection.respond_error(&request, &error).await;
        }
    }

    fn track(&mut self, abort: &AbortHandle, request: &Id, answered: &Arc<AtomicBool>) {
        self.task_requests
            .insert(abort.id(), (request.clone(), answered.clone()));
    }

    /// Runs `task`, which answers request `id`. The request is in flight (for
    /// `$/cancel_request` and the duplicate-id check) before the task can run, so the task's
    /// taking itself off when it answers always finds its own entry.
    fn start(
        &mut self,
        id: &Id,
        answered: &Arc<AtomicBool>,
        session: Option<String>,
        task: impl Future<Output = ()> + Send + 'static,
    ) {
        let abort = {
            let mut in_flight = self.in_flight.lock();
            let abort = self.tasks.spawn(task);
            in_flight.insert(
                id.clone(),
                Flight {
                    abort: abort.clone(),
                    answered: answered.clone(),
                    session,
                    load: None,
                },
            );
            abort
        };
        self.track(&abort, id, answered);
    }

    async fn request(&mut self, id: &Id, method: &str, params: Option<Box<RawValue>>) -> Result<(), RpcError> {
        if method == names::INITIALIZE {
            return self.initialize(id, params.as_deref()).await;
        }
        if !self.initialized {
            return Err(RpcError::new(
                codes::INVALID_REQUEST,
                format!("`{method}` before `initialize`: the client must initialize first"),
            ));
        }
        self.check_revocation().await?;
        if self.connection.access.pending() && method != names::AUTHENTICATE {
            return Err(RpcError::new(
                codes::AUTH_REQUIRED,
                format!(
                    "`{method}` before `authenticate`: this connection must authenticate first (method `{}`)",
                    crate::auth::BEARER
                ),
            ));
        }
        self.check_signed_in(method)?;
        // An id still waiting for its answer: refused; the first keeps its answer. (Requests
        // answered inline are never in flight when the next line is read.)
        self.in_flight.refuse_duplicate(id)?;
        match method {
            names::SESSION_NEW => self.new_session(id, params.as_deref()).await,
            names::SESSION_PROMPT => self.prompt(id, params).await,
            names::SESSION_LOAD if self.spec.load_session() => self.load_session(id, params),
            names::SESSION_CLOSE => self.close_session(id, params.as_deref()).await,
            names::SESSION_LIST if self.spec.sessions().list || self.connection.session_baseline() => {
                self.list_sessions(id, params.as_deref()).await
            }
            names::SESSION_RESUME if self.spec.sessions().resume || self.connection.session_baseline() => {
                self.resume_session(id, params.as_deref()).await
            }
            names::SESSION_DELETE if self.spec.sessions().delete => self.delete_session(id, params.as_deref()).await,
            names::SESSION_SET_MODE if self.spec.surface.modes.is_some() => self.set_mode(id, params),
            names::SESSION_SET_CONFIG_OPTION if !self.spec.surface.config_options.is_empty() => {
                self.set_config_option(id, params)
            }
            names::AUTHENTICATE => self.authenticate(id, params),
            names::LOGOUT if self.connection.access.tokens.is_some() => self.logout(id).await,
            extension if self.spec.surface.extensions.requests.contains(&extension) => {
                self.extension(id, extension, params.as_deref())
            }
            #[cfg(feature = "mcp")]
            crate::mcp::tunnel::MESSAGE if self.offers_mcp_over_acp() => {
                // `$/cancel_request` stops the task (see `cancel_request`), which the tunnel
                // tells its MCP side.
                let tunnels = self.connection.tunnels.clone();
                self.answer_in_task(id, async move {
                    tunnels.request(params.as_deref(), None).await.map_err(Error::Rpc)
                });
                Ok(())
            }
            _ => Err(RpcError::new(
                codes::METHOD_NOT_FOUND,
                format!("method not found: `{method}`"),
            )),
        }
    }

    fn notification(&mut self, method: &str, params: Option<&RawValue>) {
        if self.connection.access.pending() {
            tracing::debug!(method, "ignored a notification before authentication");
            return;
        }
        match method {
            names::SESSION_CANCEL => match runtime_params::<O, SessionRef>(method, params, true) {
                Ok(session) => self.cancel_turn(&session.session_id),
                Err(error) => tracing::warn!(%error, "ignored a bad session/cancel"),
            },
            extension if self.spec.surface.extensions.notifications.contains(&extension) => {
                self.extension_notification(extension, params);
            }
            #[cfg(feature = "mcp")]
            crate::mcp::tunnel::MESSAGE if self.offers_mcp_over_acp() => self.connection.tunnels.notification(params),
            other => tracing::debug!(method = other, "ignored a notification"),
        }
    }

    async fn initialize(&mut self, id: &Id, params: Option<&RawValue>) -> Result<(), RpcError> {
        if self.initialized {
            return Err(RpcError::new(codes::INVALID_REQUEST, "`initialize` was already called"));
        }
        let params: InitializeParams = runtime_params::<O, _>(names::INITIALIZE, params, false)?;
        if params.protocol_version != u64::from(self.spec.protocol_version) {
            tracing::info!(
                asked = params.protocol_version,
                ours = self.spec.protocol_version,
                "the client asked for another protocol version; answering with ours"
            );
        }
        self.connection
            .set_client_name(params.client_info.as_ref().map(|info| info.name.as_str()));
        self.connection
            .set_offered_editor(methods::offered_in(params.client_capabilities.as_ref()));
        (self.connection.elicitations).set_offered(params.client_capabilities.as_ref());
        self.connection.set_boolean_options(
            params
                .client_capabilities
                .as_ref()
                .and_then(|caps| caps.pointer("/session/configOptions/boolean"))
                .is_some_and(Value::is_object),
        );
        if !self.sign_in_methods().is_empty() {
            self.initialize_response["authMethods"] =
                sign_in::advertised(self.sign_in_methods(), params.client_capabilities.as_ref());
        }
        self.initialized = true;
        match &self.connection.sandbox {
            // Not authenticated yet (over WebSocket): told what is enforced, not where.
            Some(sandbox) if self.connection.access.pending() => {
                let mut answer = self.initialize_response.clone();
                answer["_meta"]["aip44"]["sandbox_enforcement"] = sandbox.report_without_paths();
                let _ = self.connection.respond(id, &answer).await;
            }
            _ => {
                let _ = self.connection.respond(id, &self.initialize_response).await;
            }
        }
        Ok(())
    }

    async fn new_session(&mut self, id: &Id, params: Option<&RawValue>) -> Result<(), RpcError> {
        let params: NewSessionParams = runtime_params::<O, _>(names::SESSION_NEW, params, false)?;
        self.check_mcp_servers(&params.mcp_servers)?;
        self.room_for_a_session(None)?;
        let workspace = self.confine_cwd(&params.cwd)?;
        let additional = self.confine_additional(&params.additional_directories)?;
        let cwd = workspace.path();
        let session_id = new_session_id()?;
        if self.connection.record_history {
            self.connection
                .store()
                .create(&session_id, &cwd)
                .map_err(|e| internal(&e))?;
        }
        let invoked = AuditEvent::lifecycle(&self.connection.operator_id, &session_id, Lifecycle::Invoked, None);
        self.connection.audit(invoked).map_err(|e| internal(&e))?;
        let settings = self.spec.surface.defaults();
        let context = self.session_context(&session_id, workspace, params.mcp_servers, settings, additional);
        lock(&self.sessions).insert(session_id.clone(), SessionEntry::idle(context.clone()));
        let answer = self.connection.setup_answer(&context, json!({"sessionId": session_id}));
        let _ = self.connection.respond(id, &answer).await;
        self.connection.announce_commands(&context).await;
        Ok(())
    }

    async fn prompt(&mut self, id: &Id, params: Option<Box<RawValue>>) -> Result<(), RpcError> {
        let params = params.unwrap_or_else(null_params);
        let session: SessionRef = read_params(names::SESSION_PROMPT, Some(&params))?;
        if self.connection.session_baseline() {
            // Acknowledged before the turn runs (v2): what the operator's types refuse is
            // refused now, not after the acknowledgement.
            O::check_params(names::SESSION_PROMPT, Some(&params), false)?;
        }
        let (cancel, cancel_rx) = watch::channel(false);
        #[cfg(feature = "postgres")]
        let cancel_for_lease = cancel.clone();
        let context = {
            let mut sessions = lock(&self.sessions);
            let entry = sessions
                .get_mut(&session.session_id)
                .ok_or_else(|| unknown_session(&session.session_id))?;
            entry.busy("prompting")?;
            entry.activity = Activity::Prompting(cancel);
            entry.context.clone()
        };
        #[cfg(feature = "postgres")]
        let lease = match self.take_lease(&context, cancel_for_lease).await {
            Ok(lease) => lease,
            Err(error) => {
                drop(ClearRunning(&self.sessions, &session.session_id));
                return Err(error);
            }
        };
        // Taken: a client that speaks v2 hears so before anything of the turn.
        self.connection.prompt_accepted(id).await;
        let task = PromptTask {
            operator: self.operator.clone(),
            memory: self.memory.clone(),
            connection: self.connection.clone(),
            sessions: self.sessions.clone(),
            in_flight: self.in_flight.clone(),
            id: id.clone(),
            answered: Arc::new(AtomicBool::new(false)),
            scope: TurnScope {
                // Read only when commands are declared: a prompt may be large.
                command: (!self.spec.surface.commands.is_empty())
                    .then(|| first_text(&params))
                    .flatten()
                    .and_then(|text| CommandInput::parse(&self.spec.surface, &text)),
                ..TurnScope::new(self.connection.clone(), context, cancel_rx)
            },
            params,
            #[cfg(feature = "postgres")]
            lease,
        };
        let answered = task.answered.clone();
        self.start(id, &answered, Some(session.session_id), task.run());
        Ok(())
    }

    /// In a fleet: takes the session's lease for a turn that `cancel` cancels — refused as a
    /// busy session is while another replica (or connection) runs one of its turns — and
    /// records the turn a dead replica left unfinished as interrupted.
    #[cfg(feature = "postgres")]
    async fn take_lease(
        &self,
        context: &SessionContext,
        cancel: watch::Sender<bool>,
    ) -> Result<Option<crate::server::store::fleet::TurnLease>, RpcError> {
        use crate::server::store::fleet::NotTaken;
        let Some(fleet) = self.connection.fleet.clone() else {
            return Ok(None);
        };
        let (lease, interrupted) = fleet.take(context.id(), cancel).await.map_err(|not| match not {
            NotTaken::Busy { owner } => {
                tracing::debug!(session = context.id(), owner, "a turn of this session runs elsewhere");
                prompt_running("prompting")
            }
            NotTaken::Failed(error) => RpcError::new(
                codes::INTERNAL_ERROR,
                format!("the turn cannot start: the session's lease cannot be taken ({error})"),
            ),
        })?;
        if let Some(interrupted) = interrupted {
            let connection = &self.connection;
            let history = connection.record_history.then(|| connection.store_of(context));
            record_interrupted(
                |event| connection.audit(event),
                &connection.operator_id,
                history.as_deref(),
                context.id(),
                &interrupted,
                fleet.replica(),
            )
            .map_err(|e| internal(&e))?;
        }
        Ok(Some(lease))
    }

    fn load_session(&mut self, id: &Id, params: Option<Box<RawValue>>) -> Result<(), RpcError> {
        let raw = params.unwrap_or_else(null_params);
        let params: ReopenSessionParams = read_params(names::SESSION_LOAD, Some(&raw))?;
        self.check_mcp_servers(&params.mcp_servers)?;
        self.room_for_a_session(Some(&params.session_id))?;
        let workspace = self.confine_cwd(&params.cwd)?;
        let additional = self.confine_additional(&params.additional_directories)?;
        let stored = self.stored_session(&params.session_id)?;
        let settings = stored_settings(&self.spec.surface, &stored.history);
        let context = self.session_context(&params.session_id, workspace, params.mcp_servers, settings, additional);
        let previous = self.take_for_loading(&params.session_id, &context)?;
        let operator = self.operator.clone();
        let connection = self.connection.clone();
        let load = LoadInFlight::new(
            self.sessions.clone(),
            context.clone(),
            previous,
            self.memory.clone(),
            connection.clone(),
        );
        let answered = Arc::new(AtomicBool::new(false));
        let id_for_task = id.clone();
        let answered_by_task = answered.clone();
        let in_flight = self.in_flight.clone();
        let guard = AbandonOnDrop(load.clone());
        self.start(id, &answered, None, async move {
            let AbandonOnDrop(ref load) = guard;
            let outcome = replay_and_load(operator.as_ref(), &connection, &context, &stored, &raw).await;
            // The answer is claimed before the session is settled: a `$/cancel_request` that
            // comes between them finds the load answered and leaves it, rather than telling
            // the client "cancelled" of a session that is open.
            let answers = !answered_by_task.swap(true, Ordering::SeqCst);
            let settled = load.settle(answers && outcome.is_ok());
            let outcome = match (&settled, outcome) {
                (Settled::Gone { .. }, Ok(_)) => Err(Error::msg(CLOSED_WHILE_LOADING)),
                (_, outcome) => outcome,
            };
            forget_own_flight(&in_flight, &id_for_task, &answered_by_task);
            if answers {
                answer_load(&connection, &id_for_task, &context, outcome).await;
            }
            // After the answer: stopping what the load replaced may take a while.
            load.let_go(settled).await;
        });
        if let Some(flight) = self.in_flight.lock().get_mut(id) {
            flight.load = Some(load);
        }
        Ok(())
    }

    /// The stored session `session_id` names, for `session/load`.
    fn stored_session(&self, session_id: &str) -> Result<StoredSession, RpcError> {
        self.connection
            .store()
            .load(session_id)
            .map_err(|error| RpcError::new(codes::INTERNAL_ERROR, format!("reading the session failed: {error}")))?
            .ok_or_else(|| unknown_session(session_id))
    }

    /// Takes the session for a load now, not when the load ends: a prompt, a close or another
    /// load meanwhile is refused, and loads under way count against the session limit. The
    /// entry the load replaces, if any, is returned.
    fn take_for_loading(
        &self,
        session_id: &str,
        context: &Arc<SessionContext>,
    ) -> Result<Option<SessionEntry>, RpcError> {
        let mut sessions = lock(&self.sessions);
        if let Some(entry) = sessions.get(session_id) {
            entry.busy("loading it again")?;
        } else {
            self.has_room(&sessions)?;
        }
        let loading = SessionEntry {
            context: context.clone(),
            activity: Activity::Loading,
        };
        Ok(sessions.insert(session_id.to_string(), loading))
    }

    /// `session/close`: the session ends here. Its operator memory is kept (when its kind asks
    /// for it) and its history made durable; a session with a prompt running is refused (cancel
    /// it first). Advertised when `metadata.agentacp.sessions.close` declares it; answered
    /// for clients that send it anyway.
    async fn close_session(&mut self, id: &Id, params: Option<&RawValue>) -> Result<(), RpcError> {
        let session: SessionRef = runtime_params::<O, _>(names::SESSION_CLOSE, params, false)?;
        match lock(&self.sessions).get(&session.session_id) {
            None => return Err(unknown_session(&session.session_id)),
            Some(entry) => entry.busy("closing the session")?,
        }
        // Audited first: when the record cannot be written, the session stays open.
        self.session_audit("session.close", &session.session_id)?;
        let entry = lock(&self.sessions).remove(&session.session_id);
        if let Some(entry) = entry {
            retire(&entry.context, &self.memory, &self.connection).await;
        }
        let _ = self.connection.respond(id, &json!({})).await;
        Ok(())
    }

    /// `session/list` (`metadata.agentacp.sessions.list`): the stored sessions, newest first,
    /// [`LIST_PAGE`] at a time; `cwd` keeps those whose folder is that one (confined like a
    /// session's), `cursor` is the previous page's `nextCursor`.
    async fn list_sessions(&mut self, id: &Id, params: Option<&RawValue>) -> Result<(), RpcError> {
        let params: ListSessionsParams = runtime_params::<O, _>(names::SESSION_LIST, params, false)?;
        let cwd = params.cwd.as_deref().map(|cwd| self.confine_cwd(cwd)).transpose()?;
        let after = match params.cursor.as_deref() {
            None => None,
            Some(cursor) => Some(super::list_cursor::read(cursor).ok_or_else(|| {
                RpcError::new(
                    codes::INVALID_PARAMS,
                    format!(
                        "`cursor` `{cursor}` is not one this agent gave: pass the `nextCursor` of the previous page, or none for the first"
                    ),
                )
            })?),
        };
        let cwd = cwd.map(|cwd| cwd.path());
        let (sessions, more) = self
            .connection
            .store()
            .list_page(cwd.as_deref(), after.as_ref(), LIST_PAGE)
            .map_err(|error| RpcError::new(codes::INTERNAL_ERROR, format!("cannot list the sessions: {error}")))?;
        let page: Vec<Value> = sessions
            .iter()
            .map(|session| {
                let mut info = json!({"sessionId": session.id, "cwd": session.cwd});
                if let Some(time) = session.updated_at {
                    info["updatedAt"] = json!(crate::audit::rfc3339_millis(time));
                }
                info
            })
            .collect();
        let mut answer = json!({ "sessions": page });
        if more && let Some(last) = sessions.last() {
            answer["nextCursor"] = json!(super::list_cursor::write(&super::session::ListPosition::of(last)));
        }
        let _ = self.connection.respond(id, &answer).await;
        Ok(())
    }

    /// `session/resume` (`metadata.agentacp.sessions.resume`): a stored session becomes
    /// usable on this connection again, without its history being replayed (that is
    /// `session/load`) and without the operator's `load_session`.
    async fn resume_session(&mut self, id: &Id, params: Option<&RawValue>) -> Result<(), RpcError> {
        let params: ReopenSessionParams = runtime_params::<O, _>(names::SESSION_RESUME, params, false)?;
        self.check_mcp_servers(&params.mcp_servers)?;
        if lock(&self.sessions).contains_key(&params.session_id) {
            let _ = self.connection.respond(id, &json!({})).await;
            return Ok(());
        }
        self.room_for_a_session(None)?;
        let workspace = self.confine_cwd(&params.cwd)?;
        let additional = self.confine_additional(&params.additional_directories)?;
        let stored = self
            .connection
            .store()
            .summary(&params.session_id)
            .map_err(|error| RpcError::new(codes::INTERNAL_ERROR, format!("cannot read the session: {error}")))?
            .ok_or_else(|| unknown_session(&params.session_id))?;
        if stored.cwd != workspace.path() {
            return Err(RpcError::new(
                codes::INVALID_PARAMS,
                format!(
                    "session `{}` ran in `{}`, not in `{}`",
                    params.session_id,
                    stored.cwd.display(),
                    params.cwd
                ),
            ));
        }
        // Modes and config values come back from the history, read only when there are some
        // (or when the client's dialect numbers the session's messages from it: a recorded one).
        let surface = &self.spec.surface;
        let wants_settings = surface.modes.is_some() || !surface.config_options.is_empty();
        let numbered = self.connection.translated() && self.connection.record_history;
        let stored = if wants_settings || numbered {
            self.connection
                .store()
                .load(&params.session_id)
                .map_err(|error| RpcError::new(codes::INTERNAL_ERROR, format!("cannot read the session: {error}")))?
        } else {
            None
        };
        let settings = match &stored {
            Some(stored) if wants_settings => stored_settings(surface, &stored.history),
            _ => surface.defaults(),
        };
        self.session_audit("session.resume", &params.session_id)?;
        if let Some(stored) = stored.as_ref().filter(|_| numbered) {
            self.connection
                .session_history(&params.session_id, &stored.history)
                .await;
        }
        let context = self.session_context(&params.session_id, workspace, params.mcp_servers, settings, additional);
        lock(&self.sessions).insert(params.session_id, SessionEntry::idle(context.clone()));
        let answer = self.connection.setup_answer(&context, json!({}));
        let _ = self.connection.respond(id, &answer).await;
        self.connection.announce_commands(&context).await;
        Ok(())
    }

    /// `session/delete` (`metadata.agentacp.sessions.delete`): the session is closed here if
    /// open (refused while a prompt runs) and removed from the store.
    async fn delete_session(&mut self, id: &Id, params: Option<&RawValue>) -> Result<(), RpcError> {
        let session: SessionRef = runtime_params::<O, _>(names::SESSION_DELETE, params, false)?;
        let open = {
            let sessions = lock(&self.sessions);
            if let Some(entry) = sessions.get(&session.session_id) {
                entry.busy("deleting the session")?;
            }
            sessions.contains_key(&session.session_id)
        };
        let stored = self
            .connection
            .store()
            .summary(&session.session_id)
            .map_err(|error| RpcError::new(codes::INTERNAL_ERROR, format!("cannot read the session: {error}")))?
            .is_some();
        if !open && !stored {
            return Err(unknown_session(&session.session_id));
        }
        // Audited first: when the record cannot be written, the session stays.
        self.session_audit("session.delete", &session.session_id)?;
        lock(&self.sessions).remove(&session.session_id);
        self.connection
            .store()
            .delete(&session.session_id)
            .map_err(|error| RpcError::new(codes::INTERNAL_ERROR, format!("cannot delete the session: {error}")))?;
        let _ = self.connection.respond(id, &json!({})).await;
        Ok(())
    }

    /// Audits a request about a whole session (`action`, e.g. `session.close`) before it is
    /// carried out: if the record cannot be written, nothing happens.
    fn session_audit(&self, action: &str, session: &str) -> Result<(), RpcError> {
        self.connection
            .session_audit(action, session, None)
            .map_err(|error| internal(&error))
    }

    /// Whether this agent takes MCP servers over ACP (`mcpCapabilities.acp`, tier sandboxed).
    #[cfg(feature = "mcp")]
    fn offers_mcp_over_acp(&self) -> bool {
        self.initialize_response["agentCapabilities"]["mcpCapabilities"]["acp"] == Value::Bool(true)
    }

    /// At the sandboxed tier, where the operator uses them (`Turn::mcp`): the `mcpServers`
    /// of a session request are well formed, and each uses a transport this agent offers
    /// (stdio always; `http` and `sse` where `mcpCapabilities` says so). Below that tier
    /// they are not used.
    fn check_mcp_servers(&self, servers: &Value) -> Result<(), RpcError> {
        if self.spec.tier != <crate::tier::Sandboxed as crate::tier::Tier>::NAME {
            return Ok(());
        }
        let invalid = |message: String| RpcError::new(codes::INVALID_PARAMS, message);
        #[cfg(feature = "mcp")]
        {
            let offered = &self.initialize_response["agentCapabilities"]["mcpCapabilities"];
            for spec in crate::mcp::McpServerSpec::parse_all(servers).map_err(invalid)? {
                let transport = spec.transport();
                if transport != "stdio" && offered[transport] != Value::Bool(true) {
                    return Err(invalid(format!(
                        "the MCP server `{}` uses `{transport}`, which this agent does not offer (`mcpCapabilities.{transport}` is not advertised)",
                        spec.name()
                    )));
                }
            }
            Ok(())
        }
        #[cfg(not(feature = "mcp"))]
        match servers {
            Value::Array(servers) if !servers.is_empty() => Err(invalid(
                "this agent was built without MCP support (agentacp feature `mcp`); it cannot use `mcpServers`".into(),
            )),
            _ => Ok(()),
        }
    }

    /// A session's context: its roots, the operator's profile and memory, the manifest's
    /// surface and the session's settings.
    fn session_context(
        &self,
        session_id: &str,
        workspace: Workspace,
        mcp_servers: Value,
        settings: Settings,
        additional: Vec<Workspace>,
    ) -> Arc<SessionContext> {
        Arc::new(
            SessionContext::new(session_id.to_string(), workspace, mcp_servers)
                .with_operator(self.profile.clone(), self.memory.for_session(session_id))
                .with_surface(&self.spec.surface, settings, additional)
                .with_identity(self.connection.access.identity())
                .with_store(self.connection.store())
                .with_sandbox(self.connection.sandbox.clone()),
        )
    }

    /// The `additionalDirectories` of a session request, each confined like `cwd`; refused
    /// unless the manifest declares `sessions.additionalDirectories`.
    fn confine_additional(&self, directories: &[String]) -> Result<Vec<Workspace>, RpcError> {
        if directories.is_empty() {
            return Ok(Vec::new());
        }
        if !self.spec.sessions().additional_directories {
            return Err(RpcError::new(
                codes::INVALID_PARAMS,
                "this agent does not take `additionalDirectories` (its manifest does not declare `metadata.agentacp.sessions.additionalDirectories`)",
            ));
        }
        directories
            .iter()
            .map(|directory| self.confine_cwd(directory))
            .collect()
    }

    /// An open session's context (`-32002` for an unknown one).
    fn open_session(&self, session_id: &str) -> Result<Arc<SessionContext>, RpcError> {
        lock(&self.sessions)
            .get(session_id)
            .map(|entry| entry.context.clone())
            .ok_or_else(|| unknown_session(session_id))
    }

    /// Runs `work` as a task that answers request `id` with its outcome.
    fn answer_in_task(&mut self, id: &Id, work: impl Future<Output = Result<Value, Error>> + Send + 'static) {
        let connection = self.connection.clone();
        let in_flight = self.in_flight.clone();
        let answered = Arc::new(AtomicBool::new(false));
        let answered_by_task = answered.clone();
        let request = id.clone();
        self.start(id, &answered, None, async move {
            let outcome = work.await;
            in_flight.lock().remove(&request);
            if answered_by_task.swap(true, Ordering::SeqCst) {
                return;
            }
            let _ = match outcome {
                Ok(result) => connection.respond(&request, &result).await,
                Err(error) => connection.respond_error(&request, &error.to_rpc()).await,
            };
        });
    }

    /// `session/set_mode` (`metadata.agentacp.modes`): the mode is checked, audited and set,
    /// then the operator's `set_mode` runs; if it fails, the mode goes back (audited too).
    fn set_mode(&mut self, id: &Id, params: Option<Box<RawValue>>) -> Result<(), RpcError> {
        let raw = params.unwrap_or_else(null_params);
        let request: SetModeParams = runtime_params::<O, _>(names::SESSION_SET_MODE, Some(&raw), false)?;
        let context = self.open_session(&request.session_id)?;
        let previous = self
            .connection
            .change_mode(&context, &request.mode_id, "client")
            .map_err(|error| error.to_rpc())?;
        let (operator, connection) = (self.operator.clone(), self.connection.clone());
        self.answer_in_task(id, async move {
            let kept = |answer| {
                let update = json!({"sessionUpdate": "current_mode_update", "currentModeId": request.mode_id});
                connection.record_only(&context, &update.to_string())?;
                Ok(answer)
            };
            let undo = || match previous {
                Some(previous) => connection.change_mode(&context, &previous, "operator").map(drop),
                None => Ok(()),
            };
            settle_change(operator.set_mode(&context, &raw), kept, undo).await
        });
        Ok(())
    }

    /// `session/set_config_option` (`metadata.agentacp.configOptions`): the value is checked,
    /// audited and set, then the operator's `set_config_option` runs; if it fails, the value
    /// goes back (audited too). The answer's `configOptions` are every option's current value.
    fn set_config_option(&mut self, id: &Id, params: Option<Box<RawValue>>) -> Result<(), RpcError> {
        let raw = params.unwrap_or_else(null_params);
        let request: SetConfigParams = runtime_params::<O, _>(names::SESSION_SET_CONFIG_OPTION, Some(&raw), false)?;
        let context = self.open_session(&request.session_id)?;
        let value = ConfigValue::from_json(&request.value).ok_or_else(|| {
            RpcError::new(
                codes::INVALID_PARAMS,
                format!("`value` must be a value id or a boolean, not `{}`", request.value),
            )
        })?;
        let previous = self
            .connection
            .change_config(&context, &request.config_id, value, "client")
            .map_err(|error| error.to_rpc())?;
        let (operator, connection) = (self.operator.clone(), self.connection.clone());
        self.answer_in_task(id, async move {
            let kept = |mut answer: Value| {
                if let Some(update) = connection.config_update(&context) {
                    connection.record_only(&context, &update)?;
                }
                let options = context
                    .surface()
                    .config_options_json(&context.settings(), connection.boolean_options());
                if let (Some(answer), Some(options)) = (answer.as_object_mut(), options) {
                    answer.insert("configOptions".into(), options);
                }
                Ok(answer)
            };
            let undo = || match previous {
                Some(previous) => connection
                    .change_config(&context, &request.config_id, previous, "operator")
                    .map(drop),
                None => Ok(()),
            };
            settle_change(operator.set_config_option(&context, &raw), kept, undo).await
        });
        Ok(())
    }

    /// A declared extension request: the operator's `extension` answers it, in a task. One
    /// that names a session this connection's identity does not own is refused first
    /// ([`Dispatcher::owned_session_check`]).
    fn extension(&mut self, id: &Id, method: &str, params: Option<&RawValue>) -> Result<(), RpcError> {
        let params = extension_params(params);
        self.owned_session_check(&params)?;
        let (operator, method) = (self.operator.clone(), method.to_string());
        self.answer_in_task(id, async move {
            match operator.extension(&method, params) {
                Some(future) => future.await,
                None => Err(Error::Rpc(RpcError::new(
                    codes::METHOD_NOT_FOUND,
                    format!("method not found: `{method}`"),
                ))),
            }
        });
        Ok(())
    }

    /// A declared extension notification: the operator's `extension_notification` takes it, in
    /// a task; a failure is logged. One that names a session this connection's identity does
    /// not own is dropped (a notification is never answered).
    fn extension_notification(&mut self, method: &str, params: Option<&RawValue>) {
        let params = extension_params(params);
        if let Err(error) = self.owned_session_check(&params) {
            tracing::debug!(method, error = %error.message, "dropped an extension notification");
            return;
        }
        let (operator, method) = (self.operator.clone(), method.to_string());
        self.tasks.spawn(async move {
            if let Some(future) = operator.extension_notification(&method, params)
                && let Err(error) = future.await
            {
                tracing::warn!(%error, method, "the operator failed an extension notification");
            }
        });
    }

    /// The session `params` name (a top-level `sessionId`) is this connection's identity's:
    /// open on this connection, or in its identity's store. Else `-32002`, the very answer
    /// to a session that does not exist, so that nobody learns of another identity's
    /// sessions; a `sessionId` that is not a string is `-32602`. What the runtime hands to
    /// operator code passes here first when the runtime does not look the session up itself.
    fn owned_session_check(&self, params: &Value) -> Result<(), RpcError> {
        let session_id = match params.get("sessionId") {
            None | Some(Value::Null) => return Ok(()),
            Some(Value::String(session_id)) => session_id,
            Some(_) => {
                return Err(RpcError::new(
                    codes::INVALID_PARAMS,
                    "`sessionId` must be a string: the id of one of this connection's sessions",
                ));
            }
        };
        if lock(&self.sessions).contains_key(session_id) {
            return Ok(());
        }
        match self.connection.store().summary(session_id) {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(unknown_session(session_id)),
            Err(error) => Err(RpcError::new(
                codes::INTERNAL_ERROR,
                format!("cannot read the session: {error}"),
            )),
        }
    }

    /// Refuses a new session (or the load of one not open here) when the connection has
    /// [`max_sessions`](super::ServerOptions::max_sessions) already.
    fn room_for_a_session(&self, loading: Option<&str>) -> Result<(), RpcError> {
        let sessions = lock(&self.sessions);
        if loading.is_some_and(|id| sessions.contains_key(id)) {
            return Ok(());
        }
        self.has_room(&sessions)
    }

    /// [`Dispatcher::room_for_a_session`] on the table already locked.
    fn has_room(&self, sessions: &HashMap<String, SessionEntry>) -> Result<(), RpcError> {
        if sessions.len() < self.max_sessions {
            return Ok(());
        }
        Err(RpcError::new(
            codes::INVALID_REQUEST,
            format!(
                "this connection has {} sessions, its limit (AGENTACP_MAX_SESSIONS); start another connection",
                sessions.len()
            ),
        ))
    }

    /// A session's `cwd`, confined to the workspace root (`-32602` when it is not, or when the
    /// server has no usable root).
    fn confine_cwd(&self, cwd: &str) -> Result<Workspace, RpcError> {
        let root = self
            .workspace_root
            .as_ref()
            .map_err(|reason| RpcError::new(codes::INVALID_PARAMS, reason.clone()))?;
        root.confine_cwd(cwd)
            .map_err(|message| RpcError::new(codes::INVALID_PARAMS, message))
    }

    fn authenticate(&mut self, id: &Id, params: Option<Box<RawValue>>) -> Result<(), RpcError> {
        let raw = params.unwrap_or_else(|| RawValue::from_string("{}".into()).expect("valid JSON"));
        // Where authentication is needed, the runtime checks the credential before the
        // operator's `authenticate` sees the request; the identity is set once both agree.
        let proved = match &self.connection.access.tokens {
            Some(tokens) => Some(access::check_bearer(tokens, &self.connection.access, &raw)?),
            None => None,
        };
        // A declared sign-in method (stdio, an open listener): an `agent` one goes to the
        // operator, and the connection is signed in once it answers.
        let signing_in = (!self.sign_in_methods().is_empty())
            .then(|| {
                let params: Value = serde_json::from_str(raw.get()).map_err(|error| {
                    RpcError::new(codes::INVALID_PARAMS, format!("invalid `authenticate` params: {error}"))
                })?;
                sign_in::check_method(self.sign_in_methods(), &params).map(|()| self.signed_in.clone())
            })
            .transpose()?;
        let (operator, connection, stores) = (self.operator.clone(), self.connection.clone(), self.stores.clone());
        self.answer_in_task(id, async move {
            // The operator has `authenticate` only when the manifest offers websocket.
            let result = match operator.authenticate(&raw) {
                Some(future) => future.await?,
                None if proved.is_some() => json!({}),
                None => {
                    return Err(Error::Rpc(RpcError::new(
                        codes::METHOD_NOT_FOUND,
                        "method not found: `authenticate`",
                    )));
                }
            };
            if let Some(identity) = proved {
                access::admit(&connection, &stores, identity)?;
            }
            if let Some(signed_in) = signing_in {
                signed_in.store(true, Ordering::Release);
            }
            Ok(result)
        });
        Ok(())
    }

    /// `logout` (offered where authentication is needed): the connection's sessions are
    /// forgotten — running turns cancelled (each saves its session as it ends), the others
    /// closed as `session/close` closes them (memory, history saved for their identity) —
    /// then `auth.logout` is audited and the connection is back to unauthenticated.
    async fn logout(&mut self, id: &Id) -> Result<(), RpcError> {
        self.forget_sessions().await;
        access::leave(&self.connection).map_err(|e| internal(&e))?;
        let _ = self.connection.respond(id, &json!({})).await;
        Ok(())
    }

    /// When the token that proved the connection's identity was revoked: its sessions are
    /// forgotten as `logout` forgets them (running turns cancelled: a revoked identity's turn
    /// neither goes on nor takes its answers), `auth.revoked` is audited, and the connection
    /// is unauthenticated (it must authenticate again in time, or is closed). `Err`: the
    /// record could not be written.
    async fn check_revocation(&mut self) -> Result<(), RpcError> {
        if !self.connection.access.revoked() {
            return Ok(());
        }
        let audited = access::revoked(&self.connection);
        self.forget_sessions().await;
        audited.map_err(|e| internal(&e))
    }

    /// [`check_revocation`](Self::check_revocation), where a failed audit is only logged.
    async fn lose_a_revoked_identity(&mut self) {
        if let Err(error) = self.check_revocation().await {
            tracing::error!(%error, "auditing a revoked token failed");
        }
    }

    /// Forgets the connection's sessions (`logout`, a revoked token): running turns
    /// cancelled (each saves its session as it ends), loads under way left to close their
    /// own as they end, the others closed as `session/close` closes them (memory, history
    /// saved for their identity).
    async fn forget_sessions(&mut self) {
        // Loads under way stop now: they would go on replaying the history to a client that
        // is not, or no longer, its identity's.
        let loads: Vec<(Id, Flight)> = {
            let mut in_flight = self.in_flight.lock();
            let ids: Vec<Id> = in_flight
                .iter()
                .filter(|(_, flight)| flight.load.is_some())
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| in_flight.remove(&id).map(|flight| (id, flight)))
                .collect()
        };
        for (id, flight) in loads {
            self.stop(&id, flight, Error::msg(CLOSED_WHILE_LOADING).to_rpc());
        }
        let sessions: Vec<_> = lock(&self.sessions).drain().collect();
        for (_, entry) in sessions {
            if entry.cancel() || matches!(entry.activity, Activity::Loading) {
                continue;
            }
            retire(&entry.context, &self.memory, &self.connection).await;
        }
    }

    /// Cancels `session_id`'s running turn; in a fleet, one that does not run on this
    /// connection is forwarded to the replica that holds its lease (a session not open here
    /// must be this identity's).
    fn cancel_turn(&self, session_id: &str) {
        let open = match lock(&self.sessions).get(session_id) {
            Some(entry) if entry.cancel() => return,
            open => open.is_some(),
        };
        #[cfg(feature = "postgres")]
        if let Some(fleet) = &self.connection.fleet {
            fleet.forward_cancel(session_id, (!open).then(|| self.connection.store()));
            return;
        }
        tracing::debug!(session = session_id, open, "session/cancel with no prompt running");
    }

    /// The client's `$/cancel_request`, as the connection core read it: ignored before
    /// authentication; its params checked against the pinned revision's schema, as those of
    /// every message the runtime answers itself are ([`Operator::check_params`]).
    fn cancel(&self, cancel: &CancelRequest) {
        if self.connection.access.pending() {
            tracing::debug!(
                method = CancelRequest::METHOD,
                "ignored a notification before authentication"
            );
            return;
        }
        match (
            O::check_params(CancelRequest::METHOD, cancel.params.as_deref(), true),
            &cancel.request,
        ) {
            (Ok(()), Some(request_id)) => self.cancel_request(request_id),
            (Err(error), _) => tracing::warn!(%error, "ignored a bad $/cancel_request"),
            (Ok(()), None) => tracing::warn!("ignored a bad $/cancel_request: its params name no request"),
        }
    }

    fn cancel_request(&self, request_id: &Id) {
        let mut in_flight = self.in_flight.lock();
        let Some(flight) = in_flight.get(request_id) else {
            tracing::debug!(%request_id, "$/cancel_request for no request in flight");
            return;
        };
        if let Some(session) = flight.session.clone() {
            // A prompt ends the way `session/cancel` ends it: `stopReason: cancelled`.
            drop(in_flight);
            self.cancel_turn(&session);
            return;
        }
        let Some(flight) = in_flight.remove(request_id) else {
            return;
        };
        drop(in_flight);
        let cancelled = RpcError::new(codes::REQUEST_CANCELLED, "request cancelled");
        self.stop(request_id, flight, cancelled);
    }

    /// Stops request `id`'s task, taken off the in-flight table, unless it answered already,
    /// and answers `error` for it; a load gives its session back first (as it was).
    fn stop(&self, id: &Id, flight: Flight, error: RpcError) {
        if flight.answered.swap(true, Ordering::SeqCst) {
            return;
        }
        flight.abort.abort();
        if let Some(load) = flight.load {
            load.abandon();
        }
        let connection = self.connection.clone();
        let id = id.clone();
        tokio::spawn(async move {
            let _ = connection.respond_error(&id, &error).await;
        });
    }

    /// End of input: interrupt running turns, let them answer (for a grace period), fail
    /// requests still waiting on the client, and make sessions and audit durable.
    async fn shut_down(mut self) {
        for entry in lock(&self.sessions).values() {
            entry.cancel();
        }
        self.connection.pending.close();
        #[cfg(feature = "mcp")]
        self.connection.tunnels.end_all();
        let drained = tokio::time::timeout(self.shutdown_grace, async {
            while self.tasks.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!("turns did not end within the grace period; stopping them");
            self.tasks.abort_all();
            while self.tasks.join_next().await.is_some() {}
        }
        let contexts: Vec<_> = lock(&self.sessions)
            .values()
            .map(|entry| entry.context.clone())
            .collect();
        // The sessions' MCP servers are stopped side by side (each stop is bounded).
        let mut closing = tokio::task::JoinSet::new();
        for context in contexts {
            closing.spawn(async move { context.close_mcp().await });
        }
        while closing.join_next().await.is_some() {}
        for (id, entry) in lock(&self.sessions).iter() {
            let records = self.connection.records_of(&entry.context);
            self.memory.persist(id, entry.context.memory(), Some(&records));
        }
        if let Err(error) = self.connection.store().flush() {
            tracing::error!(%error, "saving sessions failed");
        }
        if let Err(error) = self.connection.audit.flush() {
            tracing::error!(%error, "flushing the audit log failed");
        }
    }
}

/// The server's role on the connection core: the [`Dispatcher`], and the token recheck of a
/// connection that must authenticate.
struct FromClient<'a, O: Operator> {
    dispatcher: &'a mut Dispatcher<O>,
    revocation: tokio::time::Interval,
    /// Changes when the token store learns of a revocation (tokens in a database): the token
    /// is checked again at once, not at the next tick.
    revocations: Option<tokio::sync::watch::Receiver<u64>>,
}

/// What the server waits on beside the client's frames.
enum Wake {
    /// Time to check the connection's token again.
    Revocation,
    /// One of its tasks ended.
    Joined(Result<(tokio::task::Id, ()), tokio::task::JoinError>),
    /// Its writer gave up.
    Closed,
}

/// Go on unless an answer could not be written (the client stopped reading).
fn unless_closed(written: Result<(), Error>) -> Flow {
    match written {
        Ok(()) => CONTINUE,
        Err(_) => {
            tracing::debug!("the client stopped reading");
            Flow::Break(())
        }
    }
}

impl<O: Operator> Role for FromClient<'_, O> {
    const PEER: &'static str = "the client";

    fn seam(&self) -> Option<&connection::Seam> {
        self.dispatcher.connection.seam.as_ref()
    }

    type Wake = Wake;

    async fn wait(&mut self) -> Wake {
        let tokens = self.dispatcher.connection.access.tokens.is_some();
        let learned = async {
            match self.revocations.as_mut() {
                Some(revocations) => revocations.changed().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = self.revocation.tick(), if tokens => Wake::Revocation,
            Ok(()) = learned => Wake::Revocation,
            Some(joined) = self.dispatcher.tasks.join_next_with_id() => Wake::Joined(joined),
            () = self.dispatcher.connection.outbox.closed() => Wake::Closed,
        }
    }

    async fn woken(&mut self, wake: Wake) -> Flow {
        match wake {
            // Also a connection that sends nothing (a turn streaming to it) loses a revoked
            // identity in time.
            Wake::Revocation => self.dispatcher.lose_a_revoked_identity().await,
            Wake::Joined(joined) => self.dispatcher.reap(joined).await,
            // The writer gave up (the client stopped reading): reading on would only take
            // requests that can never be answered. Stop, so the client sees end of file.
            Wake::Closed => {
                tracing::warn!("the client stopped reading our messages; closing the connection");
                return Flow::Break(());
            }
        }
        CONTINUE
    }

    async fn too_large(&mut self, id: Option<Id>, error: RpcError) -> Flow {
        let id = id.unwrap_or(Id::Null);
        unless_closed(self.dispatcher.connection.respond_error(&id, &error).await)
    }

    async fn unreadable(&mut self, unreadable: Box<jsonrpc::Unreadable>) -> Flow {
        let connection = &self.dispatcher.connection;
        unless_closed(connection.respond_error(&unreadable.id, &unreadable.error).await)
    }

    async fn response(&mut self, id: Id, outcome: Result<Box<RawValue>, RpcError>, _line: Vec<u8>) -> Flow {
        let dispatcher = &mut *self.dispatcher;
        // A revoked identity's answer (to a permission question) is not taken.
        if dispatcher.connection.access.revoked() {
            dispatcher.lose_a_revoked_identity().await;
            return CONTINUE;
        }
        if !dispatcher.connection.pending.resolve(&id, outcome) {
            tracing::warn!(%id, "an answer to no request we are waiting on was ignored");
        }
        CONTINUE
    }

    async fn notification(&mut self, method: String, params: Option<Box<RawValue>>, _line: Vec<u8>) -> Flow {
        // Nor is a revoked identity's notification.
        self.dispatcher.lose_a_revoked_identity().await;
        self.dispatcher.notification(&method, params.as_deref());
        CONTINUE
    }

    /// A prompt's cancel ends it as `session/cancel` does (`stopReason: cancelled`); any
    /// other request's task is stopped and answered `-32800` (a load gives its session back
    /// first), before the next message is read.
    async fn cancel_request(&mut self, cancel: CancelRequest) -> Flow {
        // Nor is a revoked identity's cancel taken.
        self.dispatcher.lose_a_revoked_identity().await;
        self.dispatcher.cancel(&cancel);
        CONTINUE
    }

    async fn request(&mut self, request: Request) -> Flow {
        let Request { id, method, params, .. } = request;
        match self.dispatcher.request(&id, &method, params).await {
            Ok(()) => CONTINUE,
            Err(error) => unless_closed(self.dispatcher.connection.respond_error(&id, &error).await),
        }
    }
}

/// A setting the client changed (made and audited already): the operator's `hook` runs (`{}`
/// when it has none); then `kept` records the change and makes the answer, or, when the hook
/// failed, `undo` puts the previous value back (audited too).
async fn settle_change(
    hook: Option<crate::future::BoxFuture<'_, Result<Value, Error>>>,
    kept: impl FnOnce(Value) -> Result<Value, Error>,
    undo: impl FnOnce() -> Result<(), Error>,
) -> Result<Value, Error> {
    let outcome = match hook {
        Some(future) => future.await,
        None => Ok(json!({})),
    };
    match outcome {
        Ok(answer) => kept(answer),
        Err(error) => {
            undo()?;
            Err(error)
        }
    }
}

/// The text of a prompt's first content block, when it is text.
fn first_text(params: &RawValue) -> Option<String> {
    #[derive(Deserialize)]
    struct Prompt {
        prompt: Vec<Value>,
    }
    let prompt: Prompt = serde_json::from_str(params.get()).ok()?;
    let first = prompt.prompt.into_iter().next()?;
    (first.get("type")? == "text").then(|| first.get("text")?.as_str().map(str::to_string))?
}

/// `null`: the params of a request sent without any.
fn null_params() -> Box<RawValue> {
    RawValue::from_string("null".into()).expect("valid JSON")
}

/// A loaded or resumed session's settings: the manifest's defaults, then what its history's
/// `current_mode_update` and `config_option_update` records say (only lines that name one are
/// parsed).
fn stored_settings(surface: &Surface, history: &[Box<RawValue>]) -> Settings {
    let mut settings = surface.defaults();
    for update in history {
        let text = update.get();
        if (text.contains("current_mode_update") || text.contains("config_option_update"))
            && let Ok(update) = serde_json::from_str::<Value>(text)
        {
            settings.apply_stored(surface, &update);
        }
    }
    settings
}

/// The answer to a load whose session was closed meanwhile.
const CLOSED_WHILE_LOADING: &str =
    "the session was closed while it loaded (`logout`, or its token revoked); load it again";

/// How often a connection that must authenticate checks its token again between requests
/// (tokens in a database: every poll period, if longer; their revocations wake it at once).
const REVOCATION_RECHECK: Duration = Duration::from_secs(2);

/// `-32603` with `error`'s text.
fn internal(error: &dyn std::fmt::Display) -> RpcError {
    RpcError::new(codes::INTERNAL_ERROR, error.to_string())
}

/// Without feature `mcp` no MCP server is ever connected: what the manifest advertises of
/// `mcpCapabilities` (`http`, `acp`) is answered `false`, so that a client does not list
/// servers `session/new` would refuse. Returns the transports withdrawn.
#[cfg_attr(feature = "mcp", allow(dead_code))]
fn unadvertise_mcp(initialize_response: &mut Value) -> Vec<String> {
    let Some(offered) = initialize_response
        .pointer_mut("/agentCapabilities/mcpCapabilities")
        .and_then(Value::as_object_mut)
    else {
        return Vec::new();
    };
    let mut withdrawn = Vec::new();
    for (transport, advertised) in offered.iter_mut() {
        if *advertised == Value::Bool(true) {
            *advertised = Value::Bool(false);
            withdrawn.push(transport.clone());
        }
    }
    withdrawn
}

/// The answer to a request naming a session that is not open here (or, where the method
/// looks there, not in this identity's store): `-32002` "Resource not found", with the id in
/// `data.sessionId`, as ACP says. Clients treat it on `session/close` and `session/delete`
/// as success.
fn unknown_session(id: &str) -> RpcError {
    RpcError {
        data: Some(json!({ "sessionId": id })),
        ..RpcError::new(codes::RESOURCE_NOT_FOUND, format!("unknown session `{id}`"))
    }
}

/// The params of an extension message as the operator gets them (`null` when there are none
/// or they are not JSON).
fn extension_params(params: Option<&RawValue>) -> Value {
    params
        .and_then(|raw| serde_json::from_str(raw.get()).ok())
        .unwrap_or(Value::Null)
}

/// A fresh session id: `sess_` and 32 hex digits, 128 bits from the operating system's
/// random source and nothing else, so that an id tells nothing of the others (how many there
/// are, when they were made). `-32603` if the system has no randomness to give.
fn new_session_id() -> Result<String, RpcError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|error| {
        RpcError::new(
            codes::INTERNAL_ERROR,
            format!("cannot make a session id: the system's random source failed ({error})"),
        )
    })?;
    Ok(format!("sess_{:032x}", u128::from_be_bytes(bytes)))
}

struct PromptTask<O: Operator> {
    operator: Arc<O>,
    memory: Arc<MemoryBook>,
    connection: Arc<Connection>,
    sessions: Sessions,
    in_flight: InFlightTable,
    id: Id,
    answered: Arc<AtomicBool>,
    scope: TurnScope,
    params: Box<RawValue>,
    /// In a fleet: the session's lease, released after the turn's last write.
    #[cfg(feature = "postgres")]
    lease: Option<crate::server::store::fleet::TurnLease>,
}

impl<O: Operator> PromptTask<O> {
    #[cfg_attr(not(feature = "postgres"), allow(unused_mut))]
    async fn run(mut self) {
        let session_id = self.scope.session.id().to_string();
        // However this task ends, the session can take the next prompt.
        let running = ClearRunning(&self.sessions, &session_id);
        if self.connection.record_history {
            self.record_prompt();
        }
        let outcome = {
            let mut turn: Turn<'_, O::Tier> = Turn::new(&self.scope);
            let future = self.operator.prompt(&mut turn, &self.params);
            tokio::select! {
                biased;
                _ = self.scope.cancelled() => Err(Error::Cancelled),
                outcome = future => outcome,
            }
        };
        let operator = &self.connection.operator_id;
        let (state, detail, answer) = match outcome {
            Ok(result) => {
                let stop = result.get("stopReason").cloned().unwrap_or(Value::Null);
                let state = if stop == "cancelled" {
                    Lifecycle::Interrupted
                } else {
                    Lifecycle::Completed
                };
                (state, json!({"stopReason": stop}), Ok(result))
            }
            Err(Error::Cancelled) => (
                Lifecycle::Interrupted,
                json!({"stopReason": "cancelled"}),
                Ok(json!({"stopReason": "cancelled"})),
            ),
            Err(error) => {
                let rpc = error.to_rpc();
                (Lifecycle::Interrupted, json!({"error": rpc.message}), Err(rpc))
            }
        };
        let audited = self.scope.audit_unfinished_call().and_then(|()| {
            self.scope
                .audit(AuditEvent::lifecycle(operator, &session_id, state, Some(detail)))
        });
        let mut answer = match audited {
            Ok(()) => answer,
            Err(error) => Err(error.to_rpc()),
        };
        if self.connection.record_history
            && let Err(error) = self.connection.store_of(&self.scope.session).flush_session(&session_id)
        {
            tracing::error!(%error, session = session_id, "saving the session failed");
            // Its last updates may not be kept (a database's batch): the turn does not end as
            // if they were.
            answer = Err(RpcError::new(
                codes::INTERNAL_ERROR,
                format!("the turn's updates could not be saved: {error}"),
            ));
        }
        self.memory.persist(
            &session_id,
            self.scope.session.memory(),
            Some(&self.connection.records_of(&self.scope.session)),
        );
        #[cfg(feature = "postgres")]
        if let Some(lease) = self.lease.take() {
            lease.release().await;
        }
        self.in_flight.lock().remove(&self.id);
        // The turn is over before the client hears so: a prompt sent the moment the answer
        // arrives is a new turn, not a second one.
        drop(running);
        if self.answered.swap(true, Ordering::SeqCst) {
            return;
        }
        let _ = match answer {
            Ok(result) => self.connection.respond(&self.id, &result).await,
            Err(error) => self.connection.respond_error(&self.id, &error).await,
        };
    }

    /// The user's prompt goes into the history as `user_message_chunk`s, so `session/load`
    /// replays both sides of the conversation.
    fn record_prompt(&self) {
        #[derive(Deserialize)]
        struct Prompt<'a> {
            #[serde(borrow)]
            prompt: Vec<&'a RawValue>,
        }
        // Only the content blocks are needed, verbatim: no `Value` tree is built.
        let Ok(params) = serde_json::from_str::<Prompt<'_>>(self.params.get()) else {
            return;
        };
        for block in params.prompt {
            let update = format!(r#"{{"sessionUpdate":"user_message_chunk","content":{}}}"#, block.get());
            if let Err(error) = self
                .connection
                .store_of(&self.scope.session)
                .append(self.scope.session.id(), &update)
            {
                tracing::error!(%error, "recording the prompt failed");
            }
        }
    }
}

struct ClearRunning<'a>(&'a Sessions, &'a str);

impl Drop for ClearRunning<'_> {
    fn drop(&mut self) {
        if let Some(entry) = lock(self.0).get_mut(self.1)
            && matches!(entry.activity, Activity::Prompting(_))
        {
            entry.activity = Activity::Idle;
        }
    }
}

/// A load's work: the stored history replayed (not recorded again), the load audited, then
/// the operator's `load_session`; the answer to send.
async fn replay_and_load<O: Operator>(
    operator: &O,
    connection: &Connection,
    context: &SessionContext,
    stored: &StoredSession,
    raw: &RawValue,
) -> Result<Value, Error> {
    for update in &stored.history {
        let update = update.get().to_string();
        // Replayed history is not recorded again.
        connection.send_update_unrecorded(context, update).await?;
    }
    let invoked = AuditEvent::lifecycle(
        &connection.operator_id,
        context.id(),
        Lifecycle::Invoked,
        Some(json!({"loaded": true, "replayed": stored.history.len()})),
    );
    connection.audit_as(context.identity(), invoked)?;
    let result = match operator.load_session(context, raw) {
        Some(future) => future.await?,
        None => json!({}),
    };
    Ok(connection.setup_answer(context, result))
}

/// Removes request `id`'s entry from the table, if it is still the one `answered` belongs to:
/// after a cancel took it, the id may be a new request's.
fn forget_own_flight(in_flight: &InFlightTable, id: &Id, answered: &Arc<AtomicBool>) {
    let mut flights = in_flight.lock();
    if flights
        .get(id)
        .is_some_and(|flight| Arc::ptr_eq(&flight.answered, answered))
    {
        flights.remove(id);
    }
}

/// Answers a load: its result and then the session's commands, or its error.
async fn answer_load(connection: &Connection, id: &Id, context: &SessionContext, outcome: Result<Value, Error>) {
    match outcome {
        Ok(result) => {
            let _ = connection.respond(id, &result).await;
            connection.announce_commands(context).await;
        }
        Err(error) => {
            let _ = connection.respond_error(id, &error.to_rpc()).await;
        }
    }
}

/// Records the turn `interrupted` left unfinished in `session`, now taken over by `replica`
/// (to run a turn, or by its sweeper of expired leases): audited with `audit`
/// (`turn.interrupted` by operator `operator_id`, naming the replica that ran it and its
/// lease's epoch), then marked in the session's `history` when it is kept (a last message of
/// that turn, saying so, which `session/load` replays), before the new turn starts.
#[cfg(feature = "postgres")]
pub(crate) fn record_interrupted(
    audit: impl FnOnce(AuditEvent) -> crate::Result<()>,
    operator_id: &str,
    history: Option<&dyn crate::server::SessionStore>,
    session: &str,
    interrupted: &crate::server::store::lease::Interrupted,
    replica: &str,
) -> crate::Result<()> {
    let detail = serde_json::json!({
        "replica": interrupted.owner,
        "epoch": interrupted.epoch,
        "takenOverBy": replica,
    });
    tracing::warn!(session, replica = %interrupted.owner, epoch = interrupted.epoch, taken_over_by = replica, "the session's last turn was interrupted: its replica stopped mid-turn");
    audit(crate::server::connection::session_event(
        operator_id,
        "turn.interrupted",
        session,
        Some(detail.clone()),
    ))?;
    let marker = serde_json::json!({
        "sessionUpdate": "agent_message_chunk",
        "content": {
            "type": "text",
            "text": format!("\n\n[This turn was interrupted: replica {} stopped before it ended.]", interrupted.owner),
        },
        "_meta": {"agentacp": {"interrupted": detail}},
    });
    match history {
        Some(store) => store.append(session, &marker.to_string()).map_err(Error::Io),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    /// Issue #44: ids ended in a process-wide counter (`…00000003`), which told how many
    /// sessions there were. Now every hex digit is random: among 32 ids, none is the same
    /// in all (a counter's high digits are; for random ones, the odds are 16^-31 a digit).
    #[test]
    fn session_ids_are_wholly_random() {
        let ids: Vec<String> = (0..32).map(|_| super::new_session_id().unwrap()).collect();
        for id in &ids {
            let hex = id.strip_prefix("sess_").expect("`sess_` and hex");
            assert_eq!(hex.len(), 32, "128 bits: {id}");
            assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        }
        for position in 5..ids[0].len() {
            let digit = |id: &String| id.as_bytes()[position];
            assert!(
                ids.iter().any(|id| digit(id) != digit(&ids[0])),
                "digit {position} is the same in every id: {ids:?}"
            );
        }
    }

    #[test]
    fn without_mcp_support_no_mcp_transport_is_advertised() {
        let mut answer = json!({"agentCapabilities": {
            "mcpCapabilities": {"http": true, "sse": false, "acp": true, "_meta": {"x": true}},
            "loadSession": true,
        }});
        assert_eq!(super::unadvertise_mcp(&mut answer), ["http", "acp"]);
        assert_eq!(
            answer,
            json!({"agentCapabilities": {
                "mcpCapabilities": {"http": false, "sse": false, "acp": false, "_meta": {"x": true}},
                "loadSession": true,
            }})
        );
        assert!(super::unadvertise_mcp(&mut json!({"agentCapabilities": {}})).is_empty());
    }
}
