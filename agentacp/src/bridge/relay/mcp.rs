//! MCP-over-ACP through a bridge (`docs/mcp.md`): at tier `sandboxed` (feature `mcp`), when
//! the agent advertises `mcpCapabilities.acp`, the bridge advertises it to the editor and passes
//! `mcp/connect`, `mcp/message` (both ways) and `mcp/disconnect` — governed on the way: the
//! agent's `tools/call` of a tool of the editor's (`mcp/<server>/<tool>`) is decided by the
//! bridge's governance (`deny` answered by the bridge, `ask` asked of the editor with a
//! permission request of the bridge's own, `allow` passed) and audited with its approval and
//! result; a `tools/list` answer lists only the tools governance does not deny.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};

use super::state::{Forwarded, HeldCall, McpWaiting, Relay};
use crate::audit::Approval;
use crate::governance::Decision;
use crate::jsonrpc::pending::RequestFailure;
use crate::jsonrpc::{self, Id, RpcError, codes};
use crate::methods::Side;
use crate::methods::mcp_over_acp::{
    CONNECT, DISCONNECT, MESSAGE, connection_id_of, is_inner_notification, is_mcp_over_acp, server_id_of,
};
use crate::oversight::mcp_calls::{self, McpCall, McpMessage};
use crate::oversight::question as permission;
use crate::spec::OperatorSpec;
use crate::sync::lock;
use crate::wire::default as wire;

/// Whether the bridge can offer MCP-over-ACP: tier `sandboxed`, built with feature `mcp`.
pub(super) fn offered_by(spec: &OperatorSpec) -> bool {
    cfg!(feature = "mcp") && spec.tier == "sandboxed"
}

/// In the agent's `initialize` answer (`result`, narrowed): `mcpCapabilities.acp` when the
/// bridge offers it — passed through when the agent advertised it too (`theirs`, before
/// narrowing), else translated for the agent (`translate.rs`).
pub(super) fn advertise(relay: &Relay, theirs: &Value, result: &mut Value) {
    if !offered_by(relay.spec) {
        return;
    }
    let advertised = |transport: &str| theirs["mcpCapabilities"][transport] == Value::Bool(true);
    #[cfg(feature = "mcp")]
    if !advertised("acp") {
        #[cfg(feature = "websocket")]
        if relay.options.connect.as_ref().is_some_and(|dial| !dial.is_loopback()) {
            tracing::info!(
                "not offering MCP-over-ACP to the editor: the agent does not take it, and, on another machine, it could not reach the bridge's endpoints"
            );
            return;
        }
        // An agent whose network the sandbox cuts off cannot reach the loopback endpoint: it
        // gets the stdio shim, which reaches the bridge by its Unix socket.
        let network_open = relay
            .sandbox
            .as_ref()
            .is_none_or(|sandbox| sandbox.network() == crate::sandbox::NetworkConfinement::Open);
        let _ = relay
            .translation
            .set(super::state::Translation::new(advertised("http") && network_open));
    }
    #[cfg(not(feature = "mcp"))]
    let _ = advertised;
    relay.mcp_over_acp.store(true, Ordering::SeqCst);
    let capabilities = &mut result["agentCapabilities"];
    if !capabilities["mcpCapabilities"].is_object() {
        capabilities["mcpCapabilities"] = json!({});
    }
    capabilities["mcpCapabilities"]["acp"] = Value::Bool(true);
}

/// Why the MCP-over-ACP `method` may not go `to` that side (`None`: it may; not one of
/// MCP-over-ACP's methods: `Some` is never given for it).
pub(super) fn refusal(relay: &Relay, to: Side, method: &str) -> Option<Option<String>> {
    if !is_mcp_over_acp(method) {
        return None;
    }
    if !relay.mcp_over_acp.load(Ordering::SeqCst) {
        return Some(Some(format!(
            "`{method}` is not offered: MCP-over-ACP passes a bridge at tier `sandboxed` (built with feature `mcp`)"
        )));
    }
    #[cfg(feature = "mcp")]
    if to == Side::Client && relay.translation.get().is_some() {
        return Some(Some(format!(
            "`{method}` is not offered to an agent that does not advertise `mcpCapabilities.acp`"
        )));
    }
    // The agent connects and disconnects; messages go both ways.
    if to == Side::Agent && method != MESSAGE {
        return Some(Some(format!("`{method}` is not sent in this direction")));
    }
    Some(None)
}

/// Why the agent's `mcp/message` notification does not pass: it carries no MCP notification
/// (a `tools/call` without an id would skip governance), or gives a key twice.
pub(super) fn notification_refusal(method: &str, params: Option<&RawValue>) -> Option<&'static str> {
    #[derive(serde::Deserialize)]
    struct Inner {
        method: String,
    }
    if method != MESSAGE {
        return None;
    }
    if params.is_some_and(|params| jsonrpc::gives_a_key_twice(params.get())) {
        return Some("an `mcp/message` notification that gives a key twice (parsers read it differently)");
    }
    let inner = params.and_then(|raw| serde_json::from_str::<Inner>(raw.get()).ok());
    match inner {
        Some(inner) if is_inner_notification(&inner.method) => None,
        _ => Some("an `mcp/message` notification that carries no MCP notification"),
    }
}

/// The editor's session request (`session/new`, `load`, `resume`) on its way: the
/// `"type": "acp"` servers it lists, remembered.
pub(super) fn editor_request(relay: &Relay, method: &str, params: Option<&RawValue>) -> Option<McpWaiting> {
    use wire::method_names as m;
    if !relay.mcp_over_acp.load(Ordering::SeqCst)
        || !matches!(method, m::SESSION_NEW | m::SESSION_LOAD | "session/resume")
    {
        return None;
    }
    let params: Value = serde_json::from_str(params?.get()).ok()?;
    let ids = relay.mcp.offered(&params);
    if let Some(session) = params.get("sessionId").and_then(Value::as_str) {
        hold_at_the_wire(relay, &ids, session);
    }
    (!ids.is_empty()).then_some(McpWaiting::Session(ids))
}

/// The agent answered the editor's `session/new`: its servers belong to `session`.
pub(super) fn session_created(relay: &Relay, waiting: Option<&McpWaiting>, session: &str) {
    if let Some(McpWaiting::Session(ids)) = waiting {
        relay.mcp.session_created(ids, session);
        hold_at_the_wire(relay, ids, session);
    }
}

/// The calls of the servers `ids` in `session` are governed here, at the wire: the gate lets
/// the agent report them running before the bridge has asked about them.
fn hold_at_the_wire(relay: &Relay, ids: &[String], session: &str) {
    let mut gate = lock(&relay.gate);
    for name in ids.iter().filter_map(|id| relay.mcp.name_of(id)) {
        gate.hold_at_the_wire(session, &name);
    }
}

/// What becomes of the agent's MCP-over-ACP request.
pub(super) enum Passage {
    /// Forward it, and follow its answer.
    Forward(Option<McpWaiting>),
    /// The bridge answers (or will answer) it.
    Handled,
}

/// The agent's `mcp/*` request: remembered, governed.
pub(super) async fn agent_request(
    relay: &Arc<Relay>,
    id: &Id,
    method: &str,
    params: Option<&RawValue>,
    line: &[u8],
) -> Passage {
    let value: Value = params
        .and_then(|raw| serde_json::from_str(raw.get()).ok())
        .unwrap_or(Value::Null);
    match method {
        CONNECT => Passage::Forward(server_id_of(&value).map(|id| McpWaiting::Connect(id.to_string()))),
        DISCONNECT => {
            if let Some(connection) = connection_id_of(&value) {
                relay.mcp.disconnected(connection);
            }
            Passage::Forward(None)
        }
        MESSAGE => match relay.mcp.read(&value) {
            McpMessage::Other => Passage::Forward(None),
            McpMessage::List { server } => Passage::Forward(Some(McpWaiting::List(server))),
            McpMessage::Call(call) => govern_call(relay, id, call, line).await,
        },
        _ => Passage::Forward(None),
    }
}

/// What governance says of a `tools/call` before anyone is asked.
pub(super) enum Verdict {
    /// It may run, approved so.
    Run(Approval),
    /// It may not: the answer to give, and the approval to audit.
    Refuse(Approval, RpcError),
    /// The editor is to be asked ([`ask`]).
    Ask,
}

/// Governance's word on `call`: `allow` runs, `deny` is refused, `ask` asks the editor —
/// unless the agent asked about this very call and it was approved already.
pub(super) fn verdict(relay: &Relay, call: &McpCall) -> Verdict {
    let facts = call.facts();
    match relay.oversight.decide(call.session_or_dash(), &facts) {
        Decision::Allow => Verdict::Run(Approval::Auto),
        Decision::Deny(reason) => {
            let error = RpcError::new(
                codes::INVALID_REQUEST,
                format!("the MCP tool `{}` is denied by governance: {reason}", call.tool_name()),
            );
            Verdict::Refuse(Approval::Denied { reason }, error)
        }
        Decision::Ask => match relay.oversight.take_approval(call.session_or_dash(), &facts) {
            Some(approval) => Verdict::Run(approval),
            None => Verdict::Ask,
        },
    }
}

/// Asks the editor about `call` ([`Verdict::Ask`]): the approval (the tool call the agent
/// announced for it approved with it), or the refusal. When the agent cancels the call first
/// (`cancelled`), the editor's permission request is cancelled too, and the refusal is `-32800`.
pub(super) async fn ask(
    relay: &Relay,
    call: &McpCall,
    cancelled: impl Future<Output = ()>,
) -> Result<Approval, (Approval, RpcError)> {
    let by_the_agent = std::sync::atomic::AtomicBool::new(false);
    let cancelled = async {
        cancelled.await;
        by_the_agent.store(true, Ordering::SeqCst);
    };
    match ask_editor(relay, call, cancelled).await {
        Ok(approval) => {
            approve_the_agents_call(relay, call, &approval);
            Ok(approval)
        }
        Err(_) if by_the_agent.load(Ordering::SeqCst) => Err(cancelled_by_the_agent(call)),
        Err((approval, message)) => Err((approval, RpcError::new(codes::INVALID_REQUEST, message))),
    }
}

/// The refusal of a call the agent cancelled before the editor answered: `-32800`.
fn cancelled_by_the_agent(call: &McpCall) -> (Approval, RpcError) {
    (
        Approval::RejectedBy {
            who: "agentacp".into(),
            reason: "cancelled by the agent before the editor answered".into(),
        },
        RpcError::new(
            codes::REQUEST_CANCELLED,
            format!(
                "the MCP tool `{}` was cancelled before the editor answered",
                call.tool_name()
            ),
        ),
    )
}

/// The agent's `$/cancel_request` of `named`, for a `tools/call` the bridge holds: before the
/// decision, the call is cancelled here (`true`: the editor never sees it, nor this cancel);
/// after it, the cancel waits until the call is passed on, and then follows it (`false`, as
/// for any request the bridge does not hold).
pub(super) async fn cancel_held(relay: &Relay, named: &Id) -> bool {
    let mut settled = {
        let mut held = lock(&relay.held_calls);
        let Some(call) = held.get_mut(named) else {
            return false;
        };
        if let Some(cancel) = call.cancel.take() {
            let _ = cancel.send(());
            return true;
        }
        call.settled.clone()
    };
    // An error: the task is gone, so the call is settled too.
    let _ = settled.wait_for(|settled| *settled).await;
    false
}

/// Settles a held call however its task ends: forgotten, and a cancel waiting on it let go.
struct Settled<'a>(&'a Relay, Id, watch::Sender<bool>);

impl Drop for Settled<'_> {
    fn drop(&mut self) {
        lock(&self.0.held_calls).remove(&self.1);
        self.2.send_replace(true);
    }
}

/// A `tools/call`: `allow` passes, `deny` is answered here, `ask` asks the editor first (in
/// a task of its own, so the agent's other messages keep flowing).
async fn govern_call(relay: &Arc<Relay>, id: &Id, call: McpCall, line: &[u8]) -> Passage {
    match verdict(relay, &call) {
        Verdict::Run(approval) => Passage::Forward(Some(McpWaiting::Call(Box::new(call), approval))),
        Verdict::Refuse(approval, error) => {
            refuse(relay, id, &call, approval, error).await;
            Passage::Handled
        }
        Verdict::Ask => {
            // Cancellable from now on: the agent's next message may be its cancel.
            let (cancel, cancelled) = oneshot::channel();
            let (settle, settled) = watch::channel(false);
            let held = HeldCall {
                cancel: Some(cancel),
                settled,
            };
            lock(&relay.held_calls).insert(id.clone(), held);
            let relay = Arc::clone(relay);
            let id = id.clone();
            let mut line = line.to_vec();
            line.push(b'\n');
            tokio::spawn(async move {
                let settled = Settled(&relay, id.clone(), settle);
                let cancelled = async {
                    if cancelled.await.is_err() {
                        std::future::pending::<()>().await;
                    }
                };
                let mut decided = ask(&relay, &call, cancelled).await;
                // Decided, unless the agent's cancel took the call first (then it stands,
                // whatever the editor said): one of the two, under the lock.
                let cancelled_first = lock(&relay.held_calls)
                    .get_mut(&id)
                    .is_some_and(|held| held.cancel.take().is_none());
                if cancelled_first && decided.is_ok() {
                    decided = Err(cancelled_by_the_agent(&call));
                }
                match decided {
                    Ok(approval) => {
                        let forwarded = Forwarded::agent_request(&relay, MESSAGE.to_string(), call.session.clone());
                        let forwarded = Forwarded {
                            mcp: Some(McpWaiting::Call(Box::new(call), approval)),
                            ..forwarded
                        };
                        relay.forward_to_editor(id, forwarded, line).await;
                    }
                    Err((approval, error)) => {
                        // Free the id before the answer: the agent may use it again at once.
                        drop(settled);
                        refuse(&relay, &id, &call, approval, error).await;
                    }
                }
            });
            Passage::Handled
        }
    }
}

/// The editor approved `call` through the bridge: the tool call the agent announced for it
/// without asking (if any) is approved with it, so its result reaches the editor.
fn approve_the_agents_call(relay: &Relay, call: &McpCall, approval: &Approval) {
    let Some(session) = call.session.as_deref() else { return };
    let announced = lock(&relay.gate).approved_elsewhere(session, &call.tool_name(), &call.arguments);
    if let Some(facts) = announced {
        relay.oversight.approved_with_a_call(session, &facts, approval.clone());
    }
}

/// Asks the editor about `call`: the approval, or why it was not approved. When `cancelled`
/// completes first, the permission request is cancelled at the editor (`$/cancel_request`).
async fn ask_editor(
    relay: &Relay,
    call: &McpCall,
    cancelled: impl Future<Output = ()>,
) -> Result<Approval, (Approval, String)> {
    let editor = relay.editor();
    let not_asked = |reason: &str| {
        (
            Approval::RejectedBy {
                who: "agentacp".into(),
                reason: reason.into(),
            },
            format!("the MCP tool `{}` was not approved: {reason}", call.tool_name()),
        )
    };
    let Some(session) = call.session.as_deref() else {
        return Err(not_asked(
            "its server's session is not known, so the editor could not be asked",
        ));
    };
    let request = call.permission_request(session);
    let Ok(typed) = serde_json::from_value::<wire::RequestPermissionRequest>(request.clone()) else {
        return Err(not_asked("the permission request could not be made"));
    };
    let timeout = relay.options.permission_timeout;
    let answer = relay
        .own
        .call_unless(
            &relay.up,
            wire::method_names::SESSION_REQUEST_PERMISSION,
            &request,
            timeout,
            cancelled,
        )
        .await;
    let rejected = |reason: &str| {
        (
            Approval::RejectedBy {
                who: editor.clone(),
                reason: reason.into(),
            },
            format!(
                "the MCP tool `{}` was not approved by the client ({reason})",
                call.tool_name()
            ),
        )
    };
    match answer {
        Ok(raw) => match serde_json::from_str::<wire::RequestPermissionResponse>(raw.get()) {
            Ok(response) if permission::approves(&typed, &response.outcome) => Ok(Approval::ApprovedBy(editor.clone())),
            Ok(response) => Err(rejected(match response.outcome {
                wire::RequestPermissionOutcome::Cancelled => "cancelled",
                _ => "rejected",
            })),
            Err(_) => Err(rejected("unreadable answer")),
        },
        Err(RequestFailure::TimedOut) => Err(rejected("timeout")),
        Err(RequestFailure::Closed) => Err(rejected("connection closed")),
        Err(RequestFailure::Rpc(_)) => Err(rejected("error answer")),
    }
}

/// Answers the agent's `tools/call` with `error`, and audits it with `approval`.
async fn refuse(relay: &Relay, id: &Id, call: &McpCall, approval: Approval, error: RpcError) {
    refused(relay, call, approval, &error);
    relay.to_agent_line(jsonrpc::encode_error(id, &error)).await;
}

/// Logs and audits the refusal of `call` (`error`, approved so).
pub(super) fn refused(relay: &Relay, call: &McpCall, approval: Approval, error: &RpcError) {
    tracing::warn!(tool = call.tool_name(), message = %error.message, "an MCP tool call over ACP was refused");
    relay.oversight.call_ended(
        call.session_or_dash(),
        &call.facts(),
        Some(approval),
        &Err(error.clone()),
    );
}

/// The editor answered the agent's MCP-over-ACP request: remembered, audited, and the answer
/// to pass (`tools/list` narrowed to what governance does not deny).
pub(super) fn editor_answered(
    relay: &Relay,
    id: &Id,
    waiting: &McpWaiting,
    outcome: &Result<Box<RawValue>, RpcError>,
) -> Option<Vec<u8>> {
    match (waiting, outcome) {
        (McpWaiting::Connect(server), Ok(result)) => {
            let result: Value = serde_json::from_str(result.get()).ok()?;
            if let Some(connection) = connection_id_of(&result) {
                relay.mcp.connected(server, connection);
            }
            None
        }
        (McpWaiting::List(server), Ok(result)) => {
            let mut result: Value = serde_json::from_str(result.get()).ok()?;
            mcp_calls::keep_allowed(&mut result, server, &relay.oversight).then(|| jsonrpc::encode_result(id, &result))
        }
        (McpWaiting::Call(call, approval), outcome) => {
            let answer = match outcome {
                Ok(result) => Ok(serde_json::from_str(result.get()).unwrap_or(Value::Null)),
                Err(error) => Err(error.clone()),
            };
            relay
                .oversight
                .call_ended(call.session_or_dash(), &call.facts(), Some(approval.clone()), &answer);
            None
        }
        _ => None,
    }
}

/// The agent's MCP-over-ACP request will not be answered by the editor (`reason`): a tool
/// call is audited as failed.
pub(super) fn failed(relay: &Relay, waiting: &McpWaiting, reason: &str) {
    if let McpWaiting::Call(call, approval) = waiting {
        let failed = Err(RpcError::new(codes::INTERNAL_ERROR, reason));
        relay
            .oversight
            .call_ended(call.session_or_dash(), &call.facts(), Some(approval.clone()), &failed);
    }
}
