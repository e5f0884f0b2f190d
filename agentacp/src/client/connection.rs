//! The client side of one agent connection: the state shared by the [`Client`](super::Client),
//! its prompt streams and the reader loop, and the reader loop itself (the mirror of
//! `server::dispatch`: frames in order, answers to our requests, updates to their session's
//! stream, the agent's requests to their handlers).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::AsyncBufRead;
use tokio::sync::{mpsc, watch};

use super::ClientOptions;
use super::error::ClientError;
use super::events::Update;
use super::handlers::ClientContext;
use super::oversight::{Oversight, ToolFacts};
use super::permission::{self, PermissionDecision, PermissionHandler};
use super::process::{AgentProcess, ExitState};
use crate::audit::Approval;
use crate::governance::Decision;
use crate::jsonrpc::frame::{Frame, FrameReader};
use crate::jsonrpc::outbox::Outbox;
use crate::jsonrpc::pending::{Pending, RequestFailure};
use crate::jsonrpc::{self, Id, Incoming, RpcError, codes};
use crate::wire::default as wire;

/// How long, once the agent's stdout closed, we wait for its exit status and last stderr lines
/// before failing what is pending.
const EXIT_REPORT_WAIT: Duration = Duration::from_secs(2);

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where a session's updates go while a prompt (or a load) runs: tagged with the request id,
/// so a stream only removes its own entry.
pub(crate) struct Subscriber {
    pub(crate) tag: i64,
    pub(crate) sender: mpsc::Sender<Update>,
    /// A `session/load` is replaying history: its updates are not live tool calls.
    pub(crate) replay: bool,
}

pub(crate) struct Shared {
    /// `None` once the client closed its side (stdin closes when the last clone is gone).
    outbox: RwLock<Option<Outbox>>,
    pub(crate) pending: Pending,
    pub(crate) subscribers: Mutex<HashMap<String, Subscriber>>,
    /// Per session: bumped by `cancel`, so waiting permission requests end.
    cancels: Mutex<HashMap<String, watch::Sender<u64>>>,
    permission: Arc<dyn PermissionHandler>,
    pub(crate) options: ClientOptions,
    pub(crate) process: AgentProcess,
    /// Why the connection ended, once it has.
    ended: Mutex<Option<Ended>>,
    /// What the `fs/*` and `terminal/*` handlers see.
    pub(crate) context: ClientContext,
    /// Governance of permission requests, audit of tool calls.
    pub(crate) oversight: Oversight,
}

#[derive(Clone, Copy)]
enum Ended {
    /// We closed it.
    ByUs,
    /// The agent closed its stdout (or exited).
    ByAgent,
}

impl Shared {
    pub(crate) fn new(
        outbox: Outbox,
        permission: Arc<dyn PermissionHandler>,
        options: ClientOptions,
        process: AgentProcess,
        context: ClientContext,
        oversight: Oversight,
    ) -> Self {
        Shared {
            outbox: RwLock::new(Some(outbox)),
            pending: Pending::new(),
            subscribers: Mutex::default(),
            cancels: Mutex::default(),
            permission,
            options,
            process,
            ended: Mutex::new(None),
            context,
            oversight,
        }
    }

    pub(crate) fn outbox(&self) -> Result<Outbox, ClientError> {
        self.outbox
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| self.closed_error())
    }

    /// Closes our side: no more writes; the agent's stdin closes once queued lines are out.
    pub(crate) fn close_outbox(&self) {
        lock(&self.ended).get_or_insert(Ended::ByUs);
        self.outbox.write().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// The error for a request that failed because the connection is gone.
    pub(crate) fn closed_error(&self) -> ClientError {
        match *lock(&self.ended) {
            Some(Ended::ByUs) => ClientError::Closed,
            _ => ClientError::AgentExited {
                status: match self.process.state() {
                    ExitState::Exited(status) => status,
                    ExitState::Running => None,
                },
                stderr: self.process.stderr.lines(),
            },
        }
    }

    pub(crate) fn timeout_error(&self, what: &str, after: Duration) -> ClientError {
        ClientError::Timeout {
            what: what.to_string(),
            after,
            stderr: self.process.stderr.lines(),
        }
    }

    /// The error for a failed request of ours.
    pub(crate) fn failure(&self, method: &str, failure: RequestFailure, timeout: Duration) -> ClientError {
        match failure {
            RequestFailure::Rpc(error) => ClientError::Rpc {
                method: method.to_string(),
                error: Box::new(error),
            },
            RequestFailure::Closed => self.closed_error(),
            RequestFailure::TimedOut => self.timeout_error(method, timeout),
        }
    }

    /// Sends a request and reads its result as `T`, at most `timeout`.
    pub(crate) async fn request<T: for<'de> Deserialize<'de>>(
        &self,
        method: &str,
        params: &impl Serialize,
        timeout: Duration,
    ) -> Result<T, ClientError> {
        let outbox = self.outbox()?;
        let raw = self
            .pending
            .call(&outbox, method, params, timeout)
            .await
            .map_err(|failure| self.failure(method, failure, timeout))?;
        serde_json::from_str(raw.get()).map_err(|error| ClientError::InvalidResponse {
            method: method.to_string(),
            reason: error.to_string(),
        })
    }

    pub(crate) async fn notify(&self, method: &str, params: &impl Serialize) -> Result<(), ClientError> {
        let outbox = self.outbox()?;
        outbox
            .send(jsonrpc::encode_notification(method, params))
            .await
            .map_err(|_| self.closed_error())
    }

    async fn send_line(&self, line: Vec<u8>) {
        if let Ok(outbox) = self.outbox()
            && outbox.send(line).await.is_err()
        {
            tracing::debug!("the agent stopped reading");
        }
    }

    fn cancel_receiver(&self, session: &str) -> watch::Receiver<u64> {
        lock(&self.cancels)
            .entry(session.to_string())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe()
    }

    /// Ends the permission requests waiting in `session`.
    pub(crate) fn cancel_permissions(&self, session: &str) {
        if let Some(sender) = lock(&self.cancels).get(session) {
            sender.send_modify(|generation| *generation += 1);
        }
    }

    /// The subscriber of `session` (its tag, its queue, and whether it is a replay).
    fn subscriber(&self, session: &str) -> Option<(i64, mpsc::Sender<Update>, bool)> {
        lock(&self.subscribers)
            .get(session)
            .map(|s| (s.tag, s.sender.clone(), s.replay))
    }

    /// Delivers an update to its session's subscriber (waiting while its queue is full).
    async fn deliver(&self, session: &str, (tag, sender): (i64, mpsc::Sender<Update>), update: Update) {
        if sender.send(update).await.is_err() {
            let mut subscribers = lock(&self.subscribers);
            if subscribers.get(session).is_some_and(|s| s.tag == tag) {
                subscribers.remove(session);
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UpdateParams {
    session_id: String,
    update: Box<RawValue>,
}

/// Reads the agent's frames until its stdout closes; then fails everything pending.
pub(crate) async fn read_loop<R: AsyncBufRead + Unpin>(shared: Arc<Shared>, mut frames: FrameReader<R>) {
    loop {
        match frames.next().await {
            Ok(None) => break,
            Err(error) => {
                tracing::warn!(%error, "reading from the agent failed");
                break;
            }
            Ok(Some(Frame::TooLarge { len, id })) => too_large(&shared, len, id).await,
            Ok(Some(Frame::Line(line))) => {
                if let Some(tap) = &shared.options.wire_tap {
                    tap(super::Direction::FromAgent, &line);
                }
                handle(&shared, &line).await
            }
        }
    }
    tracing::debug!(pid = ?shared.process.pid, "the agent closed its output");
    lock(&shared.ended).get_or_insert(Ended::ByAgent);
    // So that errors carry the exit status and the last stderr lines.
    let (_, ()) = tokio::join!(
        shared.process.wait_exit(EXIT_REPORT_WAIT),
        shared.process.stderr.wait_closed(EXIT_REPORT_WAIT)
    );
    shared.pending.close();
    lock(&shared.subscribers).clear();
    for sender in lock(&shared.cancels).values() {
        sender.send_modify(|generation| *generation += 1);
    }
}

async fn too_large(shared: &Shared, len: usize, id: Option<Id>) {
    let limit = shared.options.max_frame_bytes;
    tracing::warn!(len, limit, ?id, "a message from the agent over the limit was discarded");
    let Some(id) = id else { return };
    let error = RpcError::new(
        codes::INVALID_REQUEST,
        format!("message of {len} bytes is over the limit of {limit} bytes; it was discarded"),
    );
    // Our request's answer: fail that request. Otherwise it was a request of the agent's.
    if !shared.pending.resolve(&id, Err(error.clone())) {
        shared.send_line(jsonrpc::encode_error(&id, &error)).await;
    }
}

async fn handle(shared: &Arc<Shared>, line: &[u8]) {
    let message = match jsonrpc::parse(line) {
        Ok(message) => message,
        Err(unreadable) => {
            tracing::warn!(error = %unreadable.error, "an unreadable message from the agent was ignored");
            return;
        }
    };
    match message {
        Incoming::Response { id, outcome } => {
            if !shared.pending.resolve(&id, outcome) {
                tracing::debug!(%id, "an answer to no pending request was ignored");
            }
        }
        Incoming::Notification { method, params } => {
            if method != wire::method_names::SESSION_UPDATE {
                tracing::debug!(%method, "a notification from the agent was ignored");
                return;
            }
            let text = params.as_deref().map_or("null", RawValue::get);
            match serde_json::from_str::<UpdateParams>(text) {
                Ok(params) => {
                    let update = Update::from_raw(&params.update);
                    let subscriber = shared.subscriber(&params.session_id);
                    let replay = subscriber.as_ref().is_some_and(|s| s.2);
                    if !replay && let Err(error) = shared.oversight.observe(&params.session_id, &update) {
                        // Fail closed: what cannot be audited is not shown, and the turn stops.
                        tracing::error!(%error, session = %params.session_id, "auditing a tool call failed; cancelling the turn");
                        let cancel = serde_json::json!({ "sessionId": params.session_id });
                        let _ = shared.notify(wire::method_names::SESSION_CANCEL, &cancel).await;
                        return;
                    }
                    match subscriber {
                        Some((tag, sender, _)) => shared.deliver(&params.session_id, (tag, sender), update).await,
                        None => {
                            tracing::debug!(session = %params.session_id, "an update for a session without a running prompt was dropped")
                        }
                    }
                }
                Err(error) => tracing::warn!(%error, "an unreadable `session/update` was ignored"),
            }
        }
        Incoming::Request { id, method, params } => {
            if method == wire::method_names::SESSION_REQUEST_PERMISSION {
                let text = params.as_deref().map_or("null", RawValue::get);
                match serde_json::from_str::<wire::RequestPermissionRequest>(text) {
                    Ok(request) => {
                        tokio::spawn(answer_permission(Arc::clone(shared), id, request));
                    }
                    Err(error) => {
                        let error =
                            RpcError::new(codes::INVALID_PARAMS, format!("invalid params for `{method}`: {error}"));
                        shared.send_line(jsonrpc::encode_error(&id, &error)).await;
                    }
                }
            } else {
                let params = params.unwrap_or_else(|| RawValue::from_string("null".into()).expect("valid JSON"));
                tokio::spawn(answer_request(Arc::clone(shared), id, method, params));
            }
        }
    }
}

#[derive(Serialize)]
struct PermissionResponse {
    outcome: wire::RequestPermissionOutcome,
}

/// Governance first: `allow` approves and `deny` rejects without asking anyone; `ask` goes to
/// the handler, where a timeout or a cancel of the session rejects. The answer is remembered
/// for the tool call's audit record.
async fn answer_permission(shared: Arc<Shared>, id: Id, request: wire::RequestPermissionRequest) {
    let session = request.session_id.as_str().to_string();
    let facts = ToolFacts::of_permission(&request);
    let (outcome, approval) = decide_permission(&shared, &request, &facts).await;
    shared.oversight.permission_answered(&session, &facts, approval);
    tracing::debug!(%id, ?outcome, "permission answered");
    shared
        .send_line(jsonrpc::encode_result(&id, &PermissionResponse { outcome }))
        .await;
}

/// Governance, then (for `ask`) the permission handler: the outcome to answer with and the
/// approval to record.
async fn decide_permission(
    shared: &Shared,
    request: &wire::RequestPermissionRequest,
    facts: &ToolFacts,
) -> (wire::RequestPermissionOutcome, Approval) {
    let session = request.session_id.as_str();
    let (outcome, approval) = match shared.oversight.decide(session, facts) {
        Decision::Allow => (
            permission::outcome(request, &PermissionDecision::Approve),
            Approval::Auto,
        ),
        Decision::Deny(reason) => (
            permission::outcome(request, &PermissionDecision::Reject),
            Approval::Denied { reason },
        ),
        Decision::Ask => ask_handler(shared, request).await,
    };
    // An `allow` that the request did not offer is a rejection: record what was answered.
    let approval = match (&approval, permission::approves(request, &outcome)) {
        (Approval::Auto, false) => Approval::RejectedBy {
            who: "governance".into(),
            reason: "the request offered no allow option".into(),
        },
        _ => approval,
    };
    (outcome, approval)
}

/// The tool name governance and the audit log know a terminal by.
pub const TERMINAL_TOOL: &str = "terminal/create";

/// `terminal/create` runs a command with all the rights of the client's user (its `cwd` is only
/// where it starts), so it is decided like a tool call: governance sees the tool
/// [`TERMINAL_TOOL`] (kind unknown, so it counts as changing something) with the request as
/// its arguments, `ask` goes to the permission handler (default: reject), and the decision and
/// its result are audited. `Err` is the answer to send when it is not approved.
async fn authorize_terminal(
    shared: &Shared,
    session: &str,
    arguments: &Value,
) -> Result<ToolFacts, (ToolFacts, Approval, RpcError)> {
    static TERMINALS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let command_line = std::iter::once(&arguments["command"])
        .chain(arguments["args"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join(" ");
    let id = format!(
        "terminal-{}",
        TERMINALS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
    );
    let request = serde_json::json!({
        "sessionId": session,
        "toolCall": {
            "toolCallId": id,
            "title": format!("Run `{command_line}` in {}", arguments["cwd"].as_str().unwrap_or("?")),
            "kind": "execute",
            "rawInput": arguments,
            "_meta": {"aip44": {"tool": TERMINAL_TOOL}},
        },
        "options": [
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ],
    });
    let request: wire::RequestPermissionRequest = serde_json::from_value(request).map_err(|error| {
        let facts = ToolFacts::terminal(&id, arguments.clone());
        let approval = Approval::Denied {
            reason: format!("unreadable terminal request: {error}"),
        };
        (facts, approval, RpcError::new(codes::INVALID_PARAMS, error.to_string()))
    })?;
    let facts = ToolFacts::of_permission(&request);
    let (outcome, approval) = decide_permission(shared, &request, &facts).await;
    if permission::approves(&request, &outcome) {
        shared.oversight.permission_answered(session, &facts, approval);
        Ok(facts)
    } else {
        let error = RpcError::new(
            codes::INVALID_REQUEST,
            format!("`terminal/create` of `{command_line}` was not allowed by the client"),
        );
        Err((facts, approval, error))
    }
}

/// The permission handler's answer, bounded by the permission timeout and the session's cancel.
async fn ask_handler(
    shared: &Shared,
    request: &wire::RequestPermissionRequest,
) -> (wire::RequestPermissionOutcome, Approval) {
    let mut cancelled = shared.cancel_receiver(request.session_id.as_str());
    cancelled.mark_unchanged();
    let timeout = shared.options.permission_timeout;
    let rejected = |reason: &str| Approval::RejectedBy {
        who: "user".into(),
        reason: reason.into(),
    };
    tokio::select! {
        decision = tokio::time::timeout(timeout, shared.permission.decide(request.clone())) => match decision {
            Ok(decision) => {
                let outcome = permission::outcome(request, &decision);
                let approval = if permission::approves(request, &outcome) {
                    Approval::ApprovedBy("user".into())
                } else {
                    rejected("rejected")
                };
                (outcome, approval)
            }
            Err(_) => {
                tracing::warn!(?timeout, "no permission decision in time: rejected");
                (permission::outcome(request, &PermissionDecision::Reject), rejected("timeout"))
            }
        },
        // The turn was cancelled: ACP's `cancelled` outcome (a rejection).
        _ = cancelled.changed() => (wire::RequestPermissionOutcome::Cancelled, rejected("cancelled")),
    }
}

/// Answers one of the agent's `fs/*` or `terminal/*` requests: `-32601` unless offered, the
/// runtime's checks (see [`ClientContext`]), then the handler.
async fn answer_request(shared: Arc<Shared>, id: Id, method: String, params: Box<RawValue>) {
    let handlers = Arc::clone(&shared.options.handlers);
    let not_offered = || {
        RpcError::new(
            codes::METHOD_NOT_FOUND,
            format!("`{method}` is not offered by this client (see its `clientCapabilities`)"),
        )
    };
    let answer = if handlers.capabilities().offers(&method) {
        match shared.context.check(&method, &params) {
            Ok(checked) if method == wire::method_names::TERMINAL_CREATE => {
                let arguments: Value = serde_json::from_str(checked.get()).unwrap_or(Value::Null);
                let session = arguments["sessionId"].as_str().unwrap_or_default().to_string();
                match authorize_terminal(&shared, &session, &arguments).await {
                    Ok(facts) => {
                        let answer = match handlers.handle(&shared.context, &method, &checked) {
                            Some(answer) => answer.await,
                            None => Err(not_offered()),
                        };
                        shared.oversight.terminal_ended(&session, &facts, None, &answer);
                        answer
                    }
                    Err((facts, approval, error)) => {
                        let refused = Err(error);
                        shared
                            .oversight
                            .terminal_ended(&session, &facts, Some(approval), &refused);
                        refused
                    }
                }
            }
            Ok(checked) => match handlers.handle(&shared.context, &method, &checked) {
                Some(answer) => answer.await,
                None => Err(not_offered()),
            },
            Err(error) => Err(error),
        }
    } else {
        Err(not_offered())
    };
    let line = match answer {
        Ok(result) => jsonrpc::encode_result(&id, &result),
        Err(error) => {
            tracing::debug!(%id, %method, code = error.code, message = %error.message, "the agent's request failed");
            jsonrpc::encode_error(&id, &error)
        }
    };
    shared.send_line(line).await;
}
