//! The reader loop of one agent connection (the mirror of `server::dispatch`): frames in
//! order, answers to our requests, updates to their session's stream, the agent's requests to
//! their handlers (permission requests through governance first: `permission.rs`).

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::AsyncBufRead;
use tokio::sync::mpsc;

use super::events::Update;
use super::extensions::{is_extension, method_not_found};
#[cfg(feature = "mcp")]
use super::permission::own_mcp_call;
use super::permission::{answer_permission, authorize_terminal, run_authorized};
use super::state::{Ended, Shared};
use super::tap::Direction;
use crate::connection::{self, CONTINUE, Flow, Request, Role, Seam, dialect};
use crate::jsonrpc::cancels::{Cancellable, Cancels};
use crate::jsonrpc::frame::{Frame, FrameReader};
use crate::jsonrpc::{self, Id, RpcError, codes};
#[cfg(feature = "mcp")]
use crate::oversight::mcp_calls::{McpMessage, keep_allowed};
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

/// The dialect of a connection to an agent asked for another protocol version: its seam, and
/// the answers the dialect gives our requests itself.
pub(crate) type Translated = (Seam, mpsc::UnboundedReceiver<Vec<u8>>);

/// Reads the agent's frames until its stdout closes (on the connection core); then fails
/// everything pending.
pub(crate) async fn read_loop<R: AsyncBufRead + Unpin + Send>(
    shared: Arc<Shared>,
    frames: FrameReader<R>,
    translated: Option<Translated>,
) {
    let (seam, loopback) = translated.unzip();
    let mut role = FromAgent {
        shared: Arc::clone(&shared),
        seam,
        loopback,
    };
    connection::serve(&mut role, frames).await;
    shared.flushes.flush();
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

/// The client's role on the connection core: what it does with each message of the agent's.
struct FromAgent {
    shared: Arc<Shared>,
    /// The connection's dialect seam, for an agent asked for v2.
    seam: Option<Seam>,
    /// Answers the dialect gave our requests itself (v2 has no counterpart for them).
    loopback: dialect::LoopbackAnswers,
}

impl Role for FromAgent {
    const PEER: &'static str = "the agent";
    type Wake = Vec<u8>;

    fn seam(&self) -> Option<&Seam> {
        self.seam.as_ref()
    }

    async fn wait(&mut self) -> Vec<u8> {
        dialect::next_loopback(&mut self.loopback).await
    }

    async fn woken(&mut self, answer: Vec<u8>) -> Flow {
        connection::loopback_answered(self, answer).await
    }

    fn cancels(&self) -> Option<&Arc<Cancels>> {
        Some(&self.shared.answering)
    }

    fn frame_read(&mut self, frame: &Frame) {
        if let (Frame::Line(line), Some(tap)) = (frame, &self.shared.options.wire_tap) {
            tap(Direction::FromAgent, line);
        }
    }

    async fn too_large(&mut self, id: Option<Id>, error: RpcError) -> Flow {
        // Before anything that may wait, the streams see the updates queued (`queue.rs`).
        self.shared.flushes.flush();
        // Our request's answer: fail that request. Otherwise it was a request of the agent's.
        if let Some(id) = id
            && !self.shared.pending.resolve(&id, Err(error.clone()))
        {
            self.shared.send_line(jsonrpc::encode_error(&id, &error)).await;
        }
        CONTINUE
    }

    async fn response(&mut self, id: Id, outcome: Result<Box<RawValue>, RpcError>, _line: Vec<u8>) -> Flow {
        if !self.shared.pending.resolve(&id, outcome) {
            tracing::debug!(%id, "an answer to no pending request was ignored");
        }
        CONTINUE
    }

    async fn notification(&mut self, method: String, params: Option<Box<RawValue>>, _line: Vec<u8>) -> Flow {
        notification(&self.shared, &method, params.as_deref()).await;
        CONTINUE
    }

    async fn request(&mut self, request: Request) -> Flow {
        self.shared.flushes.flush();
        let Request {
            id,
            method,
            params,
            cancellable,
            ..
        } = request;
        let cancellable = cancellable.unwrap_or_else(|| self.shared.answering.cancellable(&id));
        agent_request(&self.shared, id, method, params, cancellable).await;
        CONTINUE
    }
}

/// A notification of the agent's: MCP-over-ACP, an extension, or a session's update.
async fn notification(shared: &Arc<Shared>, method: &str, params: Option<&RawValue>) {
    #[cfg(feature = "mcp")]
    if method == crate::mcp::tunnel::MESSAGE {
        shared.mcp.notification(params);
        return;
    }
    if is_extension(method) {
        extension_notification(shared, method, params);
        return;
    }
    if method == wire::method_names::ELICITATION_COMPLETE {
        super::elicitation::completed(shared, params);
        return;
    }
    if method != wire::method_names::SESSION_UPDATE {
        tracing::debug!(%method, "a notification from the agent was ignored");
        return;
    }
    let text = params.map_or("null", RawValue::get);
    match serde_json::from_str::<UpdateParams>(text) {
        Ok(params) => session_update(shared, params).await,
        Err(error) => tracing::warn!(%error, "an unreadable `session/update` was ignored"),
    }
}

/// A `session/update`: observed, audited (fail closed), and delivered to its prompt.
async fn session_update(shared: &Arc<Shared>, params: UpdateParams) {
    let update = Update::from_raw(&params.update);
    shared.sessions.observe(&params.session_id, &update);
    let subscriber = shared.subscriber(&params.session_id);
    let replay = subscriber.as_ref().is_some_and(|s| s.2);
    if !replay && let Err(error) = shared.oversight.observe(&params.session_id, &update) {
        // Fail closed: what cannot be audited is not shown, and the turn stops.
        tracing::error!(%error, session = %params.session_id, "auditing a tool call failed; cancelling the turn");
        let cancel = serde_json::json!({ "sessionId": params.session_id });
        shared.flushes.flush();
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

/// A request of the agent's, cancellable already: answered from a task of its own.
async fn agent_request(
    shared: &Arc<Shared>,
    id: Id,
    method: String,
    params: Option<Box<RawValue>>,
    cancellable: Cancellable,
) {
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
                let error = RpcError::new(codes::INVALID_PARAMS, format!("invalid params for `{method}`: {error}"));
                shared.send_line(jsonrpc::encode_error(&id, &error)).await;
            }
        }
    } else if method == wire::method_names::ELICITATION_CREATE {
        tokio::spawn(super::elicitation::answer(Arc::clone(shared), id, params, cancellable));
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

/// The agent, as the peer of the client's MCP-over-ACP connections (weak: a connection does
/// not keep the client alive).
#[cfg(feature = "mcp")]
struct AgentPeer(std::sync::Weak<Shared>);

#[cfg(feature = "mcp")]
impl crate::mcp::tunnel::AcpPeer for AgentPeer {
    fn request(
        &self,
        request: crate::mcp::tunnel::PeerRequest,
    ) -> crate::future::BoxFuture<'static, Result<Value, RpcError>> {
        let shared = self.0.upgrade();
        Box::pin(async move {
            let Some(shared) = shared else {
                return Err(RpcError::new(codes::INTERNAL_ERROR, "the client is gone"));
            };
            match shared.outbox() {
                Ok(outbox) => request.send(&shared.pending, &outbox).await,
                Err(_) => request.closed(),
            }
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
