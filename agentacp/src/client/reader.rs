//! The reader loop of one agent connection (the mirror of `server::dispatch`): frames in
//! order, answers to our requests, updates to their session's stream, the agent's requests to
//! their handlers (permission requests through governance first).

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::AsyncBufRead;

use super::events::Update;
use super::extensions::{is_extension, method_not_found};
#[cfg(feature = "mcp")]
use super::mcp_governance::{McpCall, McpMessage, keep_allowed};
use super::oversight::{TERMINAL_TOOL, ToolFacts};
use super::permission::{self, PermissionDecision};
use super::state::{Ended, Shared};
use super::tap::Direction;
use crate::audit::Approval;
use crate::governance::Decision;
use crate::jsonrpc::cancels::Cancellable;
use crate::jsonrpc::frame::{Frame, FrameReader};
use crate::jsonrpc::{self, Id, Incoming, RpcError, codes};
use crate::sync::lock;
use crate::wire::default as wire;

/// How long, once the agent's stdout closed, we wait for its exit status and last stderr lines
/// before failing what is pending.
const EXIT_REPORT_WAIT: Duration = Duration::from_secs(2);

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
                    tap(Direction::FromAgent, &line);
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
    #[cfg(feature = "mcp")]
    shared.mcp.end_all();
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
            #[cfg(feature = "mcp")]
            if method == crate::mcp::tunnel::MESSAGE {
                shared.mcp.notification(params.as_deref());
                return;
            }
            if method == jsonrpc::pending::CANCEL_REQUEST {
                if !shared.answering.cancel(params.as_deref()) {
                    tracing::debug!("a `$/cancel_request` for no request being answered was ignored");
                }
                return;
            }
            if is_extension(&method) {
                extension_notification(shared, &method, params.as_deref());
                return;
            }
            if method != wire::method_names::SESSION_UPDATE {
                tracing::debug!(%method, "a notification from the agent was ignored");
                return;
            }
            let text = params.as_deref().map_or("null", RawValue::get);
            match serde_json::from_str::<UpdateParams>(text) {
                Ok(params) => {
                    let update = Update::from_raw(&params.update);
                    shared.sessions.observe(&params.session_id, &update);
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
            // Cancellable from now on: the agent's next message may be its cancel.
            let cancellable = shared.answering.cancellable(&id);
            #[cfg(feature = "mcp")]
            if method.starts_with("mcp/") && !shared.options.mcp_over_acp.is_empty() {
                tokio::spawn(answer_mcp(Arc::clone(shared), id, method, params, cancellable));
                return;
            }
            if method == wire::method_names::SESSION_REQUEST_PERMISSION {
                let text = params.as_deref().map_or("null", RawValue::get);
                match serde_json::from_str::<wire::RequestPermissionRequest>(text) {
                    Ok(request) => {
                        tokio::spawn(answer_permission(Arc::clone(shared), id, request, cancellable));
                    }
                    Err(error) => {
                        let error =
                            RpcError::new(codes::INVALID_PARAMS, format!("invalid params for `{method}`: {error}"));
                        shared.send_line(jsonrpc::encode_error(&id, &error)).await;
                    }
                }
            } else if is_extension(&method) {
                let params = params
                    .as_deref()
                    .and_then(|raw| serde_json::from_str(raw.get()).ok())
                    .unwrap_or(Value::Null);
                tokio::spawn(answer_extension(Arc::clone(shared), id, method, params, cancellable));
            } else {
                let params = params.unwrap_or_else(|| RawValue::from_string("null".into()).expect("valid JSON"));
                tokio::spawn(answer_request(Arc::clone(shared), id, method, params, cancellable));
            }
        }
    }
}

#[derive(Serialize)]
struct PermissionResponse {
    outcome: wire::RequestPermissionOutcome,
}

/// Governance first: `allow` approves and `deny` rejects without asking anyone; `ask` goes to
/// the handler, where a timeout, a cancel of the session or the agent's cancel of the request
/// rejects. The answer is remembered for the tool call's audit record.
async fn answer_permission(
    shared: Arc<Shared>,
    id: Id,
    request: wire::RequestPermissionRequest,
    mut cancellable: Cancellable,
) {
    let session = request.session_id.as_str().to_string();
    let facts = ToolFacts::of_permission(&request);
    let (outcome, approval) = decide_permission(&shared, &request, &facts, &mut cancellable).await;
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
    cancellable: &mut Cancellable,
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
        Decision::Ask => ask_handler(shared, request, cancellable).await,
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

/// `terminal/create` runs a command with all the rights of the client's user (its `cwd` is only
/// where it starts), so it is decided like a tool call: governance sees the tool
/// [`TERMINAL_TOOL`] (kind unknown, so it counts as changing something) with the request as
/// its arguments, `ask` goes to the permission handler (default: reject), and the decision and
/// its result are audited. `Err` is the answer to send when it is not approved.
async fn authorize_terminal(
    shared: &Shared,
    session: &str,
    arguments: &Value,
    cancellable: &mut Cancellable,
) -> Result<ToolFacts, Refused> {
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
    let refused = format!("`terminal/create` of `{command_line}` was not allowed by the client");
    authorize(shared, request, refused, cancellable).await
}

/// Runs a call this client decided itself (`authorized`, see [`authorize`]) with `run`, or
/// answers its refusal; audits either.
async fn run_authorized(
    shared: &Shared,
    session: &str,
    authorized: Result<ToolFacts, Refused>,
    run: impl std::future::Future<Output = Result<Value, RpcError>>,
) -> Result<Value, RpcError> {
    let (facts, approval, answer) = match authorized {
        Ok(facts) => (facts, None, run.await),
        Err((facts, approval, error)) => (facts, Some(approval), Err(error)),
    };
    shared.oversight.call_ended(session, &facts, approval, &answer);
    answer
}

/// A call this client would run itself, refused: what the audit records, and the answer.
type Refused = (ToolFacts, Approval, RpcError);

/// Governance, then (for `ask`) the permission handler, on the call the permission `request`
/// describes, which this client would run itself; `Err` carries the answer to give
/// (`refused`, the reason; `-32800` when the agent cancelled its request before it was run).
async fn authorize(
    shared: &Shared,
    request: Value,
    refused: String,
    cancellable: &mut Cancellable,
) -> Result<ToolFacts, Refused> {
    let session = request["sessionId"].as_str().unwrap_or_default().to_string();
    let described = ToolFacts::of(&request["toolCall"]).unwrap_or_default();
    let request: wire::RequestPermissionRequest = serde_json::from_value(request).map_err(|error| {
        let facts = described;
        let approval = Approval::Denied {
            reason: format!("unreadable permission request: {error}"),
        };
        (facts, approval, RpcError::new(codes::INVALID_PARAMS, error.to_string()))
    })?;
    // The request is this side's own: its title describes the call, it names no tool.
    let facts = ToolFacts {
        names: Vec::new(),
        titles: Vec::new(),
        ..ToolFacts::of_permission(&request)
    };
    let (outcome, approval) = decide_permission(shared, &request, &facts, cancellable).await;
    if cancellable.is_cancelled() {
        // Whatever was decided, the agent no longer wants it run.
        return Err(cancelled_before_it_ran(facts, &refused));
    }
    if permission::approves(&request, &outcome) {
        shared.oversight.permission_answered(&session, &facts, approval);
        Ok(facts)
    } else {
        Err((facts, approval, RpcError::new(codes::INVALID_REQUEST, refused)))
    }
}

/// A call this client would run itself, refused because the agent cancelled its request
/// before it was run: `-32800`.
fn cancelled_before_it_ran(facts: ToolFacts, refused: &str) -> Refused {
    let error = RpcError::new(codes::REQUEST_CANCELLED, format!("{refused}: the agent cancelled it"));
    (facts, cancelled_by_the_agent(), error)
}

/// What the audit records for a request the agent cancelled (`$/cancel_request`) before it
/// was decided or run.
fn cancelled_by_the_agent() -> Approval {
    Approval::RejectedBy {
        who: "agent".into(),
        reason: "cancelled".into(),
    }
}

/// The permission handler's answer, bounded by the permission timeout, the session's cancel
/// and the agent's cancel of the request.
async fn ask_handler(
    shared: &Shared,
    request: &wire::RequestPermissionRequest,
    cancellable: &mut Cancellable,
) -> (wire::RequestPermissionOutcome, Approval) {
    if cancellable.is_cancelled() {
        // Cancelled before it was read: the user is never asked.
        return (wire::RequestPermissionOutcome::Cancelled, cancelled_by_the_agent());
    }
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
        // So was the request: answered with the same marker, which `$/cancel_request` allows.
        () = cancellable.cancelled() => (wire::RequestPermissionOutcome::Cancelled, cancelled_by_the_agent()),
    }
}

/// The agent's requests whose handler is dropped, and the request answered `-32800`, when the
/// agent cancels it: the ones that only read or wait. A write, a command started, a kill or a
/// release runs to its end (cut short it could leave half a file or a terminal no one can
/// release) and is answered as usual, which `$/cancel_request` allows.
const DROPPED_WHEN_CANCELLED: [&str; 3] = [
    wire::method_names::FS_READ_TEXT_FILE,
    wire::method_names::TERMINAL_OUTPUT,
    wire::method_names::TERMINAL_WAIT_FOR_EXIT,
];

/// `answer`, unless the agent cancels its request first: then `-32800`.
async fn unless_cancelled(
    method: &str,
    cancellable: &mut Cancellable,
    answer: impl std::future::Future<Output = Result<Value, RpcError>>,
) -> Result<Value, RpcError> {
    tokio::select! {
        biased;
        answer = answer => answer,
        () = cancellable.cancelled() => Err(RpcError::new(
            codes::REQUEST_CANCELLED,
            format!("`{method}` was cancelled by the agent"),
        )),
    }
}

/// Answers one of the agent's `fs/*` or `terminal/*` requests: `-32601` unless offered, the
/// runtime's checks (see [`ClientContext`]), then the handler; see [`DROPPED_WHEN_CANCELLED`]
/// for the agent's cancel.
async fn answer_request(
    shared: Arc<Shared>,
    id: Id,
    method: String,
    params: Box<RawValue>,
    mut cancellable: Cancellable,
) {
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
                let authorized = authorize_terminal(&shared, &session, &arguments, &mut cancellable).await;
                run_authorized(&shared, &session, authorized, async {
                    match handlers.handle(&shared.context, &method, &checked) {
                        Some(answer) => answer.await,
                        None => Err(not_offered()),
                    }
                })
                .await
            }
            Ok(checked) => match handlers.handle(&shared.context, &method, &checked) {
                Some(answer) if DROPPED_WHEN_CANCELLED.contains(&method.as_str()) => {
                    unless_cancelled(&method, &mut cancellable, answer).await
                }
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

/// Answers the agent's `mcp/connect`, `mcp/message` and `mcp/disconnect` (MCP-over-ACP, to
/// the MCP servers this client provides).
#[cfg(feature = "mcp")]
async fn answer_mcp(
    shared: Arc<Shared>,
    id: Id,
    method: String,
    params: Option<Box<RawValue>>,
    cancellable: Cancellable,
) {
    use crate::mcp::tunnel;
    let value = || {
        params
            .as_deref()
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
            .unwrap_or(Value::Null)
    };
    let answer = match method.as_str() {
        tunnel::CONNECT => {
            let peer = Arc::new(AgentPeer(Arc::downgrade(&shared)));
            let servers = &shared.options.mcp_over_acp;
            shared
                .mcp
                .connect(servers, peer, shared.options.request_timeout, &value())
        }
        tunnel::MESSAGE => match shared.mcp.read(&value()) {
            McpMessage::Call(call) => own_mcp_call(&shared, call, params.as_deref(), cancellable).await,
            McpMessage::List { server } => {
                shared
                    .mcp
                    .message(params.as_deref(), cancellable)
                    .await
                    .map(|mut listed| {
                        keep_allowed(&mut listed, &server, &shared.oversight);
                        listed
                    })
            }
            McpMessage::Other => shared.mcp.message(params.as_deref(), cancellable).await,
        },
        tunnel::DISCONNECT => shared.mcp.disconnect(&value()),
        _ => Err(method_not_found(&method)),
    };
    let line = match answer {
        Ok(result) => jsonrpc::encode_result(&id, &result),
        Err(error) => jsonrpc::encode_error(&id, &error),
    };
    shared.send_line(line).await;
}

/// The agent's `tools/call` on an MCP server this client provides over ACP: decided like a
/// terminal (governance on `mcp/<server>/<tool>`, `ask` to the permission handler), then run
/// and audited.
#[cfg(feature = "mcp")]
async fn own_mcp_call(
    shared: &Shared,
    call: McpCall,
    params: Option<&RawValue>,
    mut cancellable: Cancellable,
) -> Result<Value, RpcError> {
    let refused = format!("the MCP tool `{}` was not allowed by the client", call.tool_name());
    let Some(session) = call.session.clone() else {
        let reason = "its server's session is not known, so it could not be decided";
        let error = RpcError::new(codes::INVALID_REQUEST, format!("{refused}: {reason}"));
        let approval = Approval::RejectedBy {
            who: "agentacp".into(),
            reason: reason.into(),
        };
        let refused = Err(error);
        (shared.oversight).call_ended(call.session_or_dash(), &call.facts(), Some(approval), &refused);
        return refused;
    };
    // The client chose to offer the tool: without a binding it is allowed; with one, an
    // `ask` the agent's own permission request already answered is not asked twice.
    let facts = call.facts();
    let approved = match shared.oversight.decide(&session, &facts) {
        Decision::Ask if !shared.oversight.governed() => Some(Approval::Auto),
        Decision::Ask => shared.oversight.take_approval(&session, &facts),
        _ => None,
    };
    let authorized = match approved {
        // Nothing to decide, but cancelled already: it never reaches the server.
        Some(_) if cancellable.is_cancelled() => Err(cancelled_before_it_ran(facts, &refused)),
        Some(approval) => {
            shared.oversight.permission_answered(&session, &facts, approval);
            Ok(facts)
        }
        None => authorize(shared, call.permission_request(&session), refused, &mut cancellable).await,
    };
    run_authorized(shared, &session, authorized, shared.mcp.message(params, cancellable)).await
}

/// The agent, as the peer of the client's MCP-over-ACP connections (weak: a connection does
/// not keep the client alive).
#[cfg(feature = "mcp")]
struct AgentPeer(std::sync::Weak<Shared>);

#[cfg(feature = "mcp")]
impl crate::mcp::tunnel::AcpPeer for AgentPeer {
    fn request(
        &self,
        method: &'static str,
        params: Value,
        timeout: std::time::Duration,
        cancelled: crate::future::BoxFuture<'static, ()>,
        sent: crate::mcp::tunnel::Sent,
    ) -> crate::future::BoxFuture<'static, Result<Value, RpcError>> {
        let shared = self.0.upgrade();
        Box::pin(async move {
            let Some(shared) = shared else {
                return Err(RpcError::new(codes::INTERNAL_ERROR, "the client is gone"));
            };
            let answer = match shared.outbox() {
                Ok(outbox) => {
                    (shared.pending)
                        .call_reporting(&outbox, method, &params, timeout, cancelled, || {
                            let _ = sent.send(());
                        })
                        .await
                }
                Err(_) => Err(jsonrpc::pending::RequestFailure::Closed),
            };
            crate::mcp::tunnel::answer_value(method, timeout, answer)
        })
    }

    fn notify(&self, method: &'static str, params: Value) -> crate::future::BoxFuture<'static, ()> {
        let shared = self.0.upgrade();
        Box::pin(async move {
            if let Some(shared) = shared {
                shared.send_line(jsonrpc::encode_notification(method, &params)).await;
            }
        })
    }
}

/// An extension notification of the agent's: to the [`ExtensionHandler`](super::ExtensionHandler), if any.
fn extension_notification(shared: &Shared, method: &str, params: Option<&RawValue>) {
    let Some(handler) = &shared.options.extensions else {
        tracing::debug!(%method, "an extension notification was ignored (no extension handler)");
        return;
    };
    let params = params
        .and_then(|raw| serde_json::from_str(raw.get()).ok())
        .unwrap_or(Value::Null);
    handler.notification(method, params);
}

/// Answers an extension request of the agent's: its [`ExtensionHandler`](super::ExtensionHandler)'s
/// answer within the request timeout, else `-32601` (no handler), `-32603` (too slow) or
/// `-32800` (the agent cancelled it first: the handler's future is dropped).
async fn answer_extension(shared: Arc<Shared>, id: Id, method: String, params: Value, mut cancellable: Cancellable) {
    let answer = match &shared.options.extensions {
        None => Err(method_not_found(&method)),
        Some(handler) => {
            let timeout = shared.options.request_timeout;
            let answered = async {
                match tokio::time::timeout(timeout, handler.request(&method, params)).await {
                    Ok(answer) => answer,
                    Err(_) => Err(RpcError::new(
                        codes::INTERNAL_ERROR,
                        format!("the client did not answer `{method}` within {timeout:?}"),
                    )),
                }
            };
            unless_cancelled(&method, &mut cancellable, answered).await
        }
    };
    let line = match answer {
        Ok(result) => jsonrpc::encode_result(&id, &result),
        Err(error) => jsonrpc::encode_error(&id, &error),
    };
    shared.send_line(line).await;
}
