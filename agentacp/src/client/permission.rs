//! The client's side of oversight: the agent's permission requests (governance first, then
//! the [`PermissionHandler`](crate::oversight::PermissionHandler)), and the calls this client
//! runs itself on the agent's request — `terminal/create`, `tools/call` on an MCP server it
//! offers over ACP — decided like tool calls, asked about when governance asks, and recorded
//! with their approval ([`Oversight`](crate::oversight::Oversight)).

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
#[cfg(feature = "mcp")]
use serde_json::value::RawValue;

use super::state::Shared;
use crate::audit::Approval;
use crate::governance::Decision;
use crate::jsonrpc::cancels::Cancellable;
use crate::jsonrpc::{self, Id, RpcError, codes};
#[cfg(feature = "mcp")]
use crate::oversight::mcp_calls::McpCall;
use crate::oversight::question::{self as permission, PermissionDecision};
use crate::oversight::{TERMINAL_TOOL, ToolFacts};
use crate::wire::default as wire;

#[derive(Serialize)]
struct PermissionResponse {
    outcome: wire::RequestPermissionOutcome,
}

/// Governance first: `allow` approves and `deny` rejects without asking anyone; `ask` goes to
/// the handler, where a timeout, a cancel of the session or the agent's cancel of the request
/// rejects. The answer is remembered for the tool call's audit record.
pub(super) async fn answer_permission(
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
pub(super) async fn authorize_terminal(
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
    let tool_call = serde_json::json!({
        "toolCallId": id,
        "title": format!("Run `{command_line}` in {}", arguments["cwd"].as_str().unwrap_or("?")),
        "kind": "execute",
        "rawInput": arguments,
        "_meta": {"aip44": {"tool": TERMINAL_TOOL}},
    });
    let request = permission::ask_once(session, tool_call);
    let refused = format!("`terminal/create` of `{command_line}` was not allowed by the client");
    authorize(shared, request, refused, cancellable).await
}

/// Runs a call this client decided itself (`authorized`, see [`authorize`]) with `run`, or
/// answers its refusal; audits either.
pub(super) async fn run_authorized(
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

/// The agent's `tools/call` on an MCP server this client provides over ACP: decided like a
/// terminal (governance on `mcp/<server>/<tool>`, `ask` to the permission handler), then run
/// and audited.
#[cfg(feature = "mcp")]
pub(super) async fn own_mcp_call(
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
