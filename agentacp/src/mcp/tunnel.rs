//! MCP over ACP (the upstream RFD "MCP-over-ACP"): one MCP connection carried inside the ACP
//! connection, for an MCP server of `"type": "acp"`.
//!
//! The side that connects sends `mcp/connect` (`{"serverId"}` → `{"connectionId"}`) and, at
//! the end, `mcp/disconnect` (`{"connectionId"}`); in between, each MCP message either side
//! sends travels as `mcp/message` with `connectionId` beside the inner `method` and `params`:
//! an MCP request as an ACP request whose result (or error) is the MCP result (or error), an
//! MCP notification as an ACP notification. The field names are those of the official ACP
//! schema crate's `unstable_mcp_over_acp` types; `serverId` is also read as `id` or `acpId`
//! (the RFD's first spelling).
//!
//! [`Tunnel`] is one such connection: [`Tunnel::open`] gives it and the rmcp transport that
//! an rmcp client (the agent's side) or server (the client's side) runs on. MCP itself is
//! rmcp's; this module only moves its messages. [`Tunnels`] routes incoming `mcp/message`s
//! to their connection.
//!
//! An inner request's MCP id does not cross: the far side's rmcp gets the request under an
//! id of the tunnel's own (`acp-N`). So a cancellation does not travel as MCP's
//! `notifications/cancelled`, whose `requestId` the far side never saw; it travels as ACP's:
//! the local side's `notifications/cancelled` for a request still waiting cancels the
//! `mcp/message` request that carries it (`$/cancel_request`), and a carried request whose
//! `mcp/message` is cancelled (or given up on) is cancelled at the local side under the id
//! that side got.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::service::{RxJsonRpcMessage, ServiceRole, TxJsonRpcMessage};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::in_order::InOrder;
use crate::future::BoxFuture;
use crate::jsonrpc::cancels::{Cancellable, Cancels};
use crate::jsonrpc::outbox::Outbox;
use crate::jsonrpc::pending::{Pending, RequestFailure};
use crate::jsonrpc::{Id, RpcError, codes};
use crate::sync::lock;

use crate::methods::mcp_over_acp::is_inner_notification;
pub use crate::methods::mcp_over_acp::{CONNECT, DISCONNECT, MESSAGE};
pub(crate) use crate::methods::mcp_over_acp::{connection_id_of, server_id_of};

/// The ACP peer a tunnel's messages go to: the client (for an agent) or the agent (for a
/// client). Each side implements it on its connection.
pub(crate) trait AcpPeer: Send + Sync + 'static {
    /// Sends an ACP request and waits for its result (see [`PeerRequest`]).
    fn request(&self, request: PeerRequest) -> BoxFuture<'static, Result<Value, RpcError>>;
    /// Sends an ACP notification.
    fn notify(&self, method: &'static str, params: Value) -> BoxFuture<'static, ()>;
}

/// Told that a request is on its way to the peer ([`AcpPeer::request`]).
pub(crate) type Sent = oneshot::Sender<()>;

/// An ACP request a tunnel sends its peer ([`AcpPeer::request`]).
pub(crate) struct PeerRequest {
    /// The method.
    pub(crate) method: &'static str,
    /// The params.
    pub(crate) params: Value,
    /// The longest wait for the result.
    pub(crate) timeout: Duration,
    /// Completes when the request is given up on: then it is cancelled at the peer
    /// (`$/cancel_request`) and fails.
    pub(crate) cancelled: BoxFuture<'static, ()>,
    /// Told once the request is on its way, so that what is sent after it reaches the peer
    /// after it (dropped unused: it was not sent).
    pub(crate) sent: Sent,
}

impl PeerRequest {
    /// `method` with `params`, waited for at most `timeout`: never cancelled, and nobody told
    /// when it is sent.
    pub(crate) fn plain(method: &'static str, params: Value, timeout: Duration) -> Self {
        PeerRequest {
            method,
            params,
            timeout,
            cancelled: Box::pin(std::future::pending()),
            sent: oneshot::channel().0,
        }
    }

    /// Sends the request through `outbox`, awaited in `pending`, and reads its result (see
    /// [`answer_value`]).
    pub(crate) async fn send(self, pending: &Pending, outbox: &Outbox) -> Result<Value, RpcError> {
        let PeerRequest {
            method,
            params,
            timeout,
            cancelled,
            sent,
        } = self;
        let answer = pending
            .call_reporting(outbox, method, &params, timeout, cancelled, || {
                let _ = sent.send(());
            })
            .await;
        answer_value(method, timeout, answer)
    }

    /// The failure of the request when its connection is closed (it was not sent).
    pub(crate) fn closed(self) -> Result<Value, RpcError> {
        answer_value(self.method, self.timeout, Err(RequestFailure::Closed))
    }
}

/// What reaches the local rmcp side: an MCP message, or the end of the connection.
type ToMcp = mpsc::UnboundedSender<Option<Value>>;

/// One MCP-over-ACP connection (cheap to clone).
#[derive(Clone)]
pub(crate) struct Tunnel {
    inner: Arc<Inner>,
}

struct Inner {
    connection_id: String,
    peer: Arc<dyn AcpPeer>,
    to_mcp: ToMcp,
    /// The peer's requests the local rmcp side has not answered yet, by the MCP id given them.
    answering: std::sync::Mutex<HashMap<String, oneshot::Sender<Result<Value, RpcError>>>>,
    /// The local rmcp side's requests the peer has not answered yet, by their MCP id: what
    /// cancels each.
    asking: std::sync::Mutex<HashMap<String, oneshot::Sender<()>>>,
    next_id: AtomicU64,
    /// How long one request may wait for its answer, either way.
    timeout: Duration,
}

impl std::fmt::Debug for Tunnel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tunnel")
            .field("connection_id", &self.inner.connection_id)
            .finish_non_exhaustive()
    }
}

impl Tunnel {
    /// The connection `connection_id` to `peer`, and the transport for the local rmcp
    /// service (role `R`) to run on, which sends its messages in the order rmcp gives them.
    /// Each request waits at most `timeout` for its answer.
    pub(crate) fn open<R: ServiceRole>(
        connection_id: String,
        peer: Arc<dyn AcpPeer>,
        timeout: Duration,
    ) -> (Tunnel, InOrder<TunnelTransport<R>>) {
        let (to_mcp, from_peer) = mpsc::unbounded_channel();
        let tunnel = Tunnel {
            inner: Arc::new(Inner {
                connection_id,
                peer,
                to_mcp,
                answering: std::sync::Mutex::new(HashMap::new()),
                asking: std::sync::Mutex::new(HashMap::new()),
                next_id: AtomicU64::new(0),
                timeout,
            }),
        };
        let transport = TunnelTransport {
            tunnel: tunnel.clone(),
            from_peer,
            role: std::marker::PhantomData,
        };
        (tunnel, InOrder::new(transport))
    }

    /// The connection's id (`connectionId`).
    pub(crate) fn id(&self) -> &str {
        &self.inner.connection_id
    }

    /// Ends the connection for the local rmcp side: its transport reports the end, and the
    /// peer's requests still waiting are answered with an error.
    pub(crate) fn end(&self) {
        let _ = self.inner.to_mcp.send(None);
        for (_, waiting) in lock(&self.inner.answering).drain() {
            let _ = waiting.send(Err(RpcError::new(
                codes::INTERNAL_ERROR,
                "the MCP connection was closed",
            )));
        }
    }

    /// A request of the peer's (`mcp/message` with an id): handed to the local rmcp side,
    /// whose answer is the result. When `cancelled` completes first, or no answer comes in
    /// time, the local side is told the request is cancelled.
    pub(crate) async fn deliver_request(
        &self,
        method: String,
        params: Option<Value>,
        cancelled: impl Future<Output = ()>,
    ) -> Result<Value, RpcError> {
        let id = format!("acp-{}", self.inner.next_id.fetch_add(1, Ordering::Relaxed));
        let (sender, receiver) = oneshot::channel();
        lock(&self.inner.answering).insert(id.clone(), sender);
        let _forget = ForgetAnswer(self, id.clone());
        let mut message = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if let Some(params) = params {
            message["params"] = params;
        }
        if self.inner.to_mcp.send(Some(message)).is_err() {
            return Err(closed());
        }
        tokio::select! {
            answer = tokio::time::timeout(self.inner.timeout, receiver) => match answer {
                Ok(Ok(answer)) => answer,
                Ok(Err(_)) => Err(closed()),
                Err(_) => Err(RpcError::new(
                    codes::INTERNAL_ERROR,
                    format!(
                        "the MCP server did not answer `{method}` within {:?}",
                        self.inner.timeout
                    ),
                )),
            },
            () = cancelled => Err(RpcError::new(
                codes::REQUEST_CANCELLED,
                format!("`{method}` was cancelled"),
            )),
        }
    }

    /// A notification of the peer's (`mcp/message` without an id): handed to the local rmcp
    /// side.
    pub(crate) fn deliver_notification(&self, method: String, params: Option<Value>) {
        let mut message = json!({"jsonrpc": "2.0", "method": method});
        if let Some(params) = params {
            message["params"] = params;
        }
        let _ = self.inner.to_mcp.send(Some(message));
    }

    /// One message of the local rmcp side, sent on to the peer: a request as an ACP request
    /// (its answer comes back to the rmcp side), a notification as a notification, an answer
    /// to one of the peer's requests to that request.
    fn send_on(&self, mut message: Value) -> BoxFuture<'static, ()> {
        let Some(object) = message.as_object_mut() else {
            return Box::pin(async {});
        };
        let id = object.remove("id");
        let method = object.remove("method");
        let params = object.remove("params");
        let inner = self.inner.clone();
        match (id, method) {
            (Some(id), Some(Value::String(method))) => {
                let outer = wrap(&inner.connection_id, method, params);
                let key = id_key(&id);
                let (cancel, cancelled) = oneshot::channel();
                lock(&inner.asking).insert(key.clone(), cancel);
                let cancelled = Box::pin(async move {
                    // Its sender dropped unused: the request was answered, never cancelled.
                    if cancelled.await.is_err() {
                        std::future::pending::<()>().await;
                    }
                });
                // In a task of its own: rmcp may send the next message before this one is
                // answered, but not before it is sent (a notification that overtook its
                // request could reach the far side before the request it is about).
                let (sent, on_its_way) = oneshot::channel();
                tokio::spawn(async move {
                    let request = PeerRequest {
                        method: MESSAGE,
                        params: outer,
                        timeout: inner.timeout,
                        cancelled,
                        sent,
                    };
                    let answer = inner.peer.request(request).await;
                    if lock(&inner.asking).remove(&key).is_none() {
                        // Cancelled by the local side, which no longer waits for an answer.
                        return;
                    }
                    let reply = match answer {
                        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                        Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
                    };
                    let _ = inner.to_mcp.send(Some(reply));
                });
                Box::pin(async move {
                    let _ = on_its_way.await;
                })
            }
            (None, Some(Value::String(method))) if method == CANCELLED => {
                // Names one of the local side's requests: its `mcp/message` is cancelled
                // instead (the peer never saw this id). An answered one needs nothing.
                let named = params.as_ref().and_then(|params| params.get("requestId"));
                if let Some(cancel) = named.and_then(|id| lock(&inner.asking).remove(&id_key(id))) {
                    let _ = cancel.send(());
                }
                Box::pin(async {})
            }
            (None, Some(Value::String(method))) => {
                let outer = wrap(&inner.connection_id, method, params);
                Box::pin(async move { inner.peer.notify(MESSAGE, outer).await })
            }
            (Some(id), None) => {
                let key = id_key(&id);
                let answer = match object.remove("error") {
                    Some(error) => Err(serde_json::from_value(error)
                        .unwrap_or_else(|_| RpcError::new(codes::INTERNAL_ERROR, "the MCP server failed"))),
                    None => Ok(object.remove("result").unwrap_or(Value::Null)),
                };
                if let Some(waiting) = lock(&inner.answering).remove(&key) {
                    let _ = waiting.send(answer);
                }
                Box::pin(async {})
            }
            _ => {
                tracing::debug!(
                    connection = inner.connection_id,
                    "an MCP message of no known shape was dropped"
                );
                Box::pin(async {})
            }
        }
    }
}

/// `mcp/message` params: the connection, and the inner message's `method` and `params`.
fn wrap(connection_id: &str, method: String, params: Option<Value>) -> Value {
    let mut outer = json!({"connectionId": connection_id, "method": method});
    if let Some(params) = params.filter(|p| !p.is_null()) {
        outer["params"] = params;
    }
    outer
}

fn closed() -> RpcError {
    RpcError::new(codes::INTERNAL_ERROR, "the MCP connection was closed")
}

/// MCP's notification that cancels a request.
const CANCELLED: &str = "notifications/cancelled";

/// An MCP id as a map key: a string as it is, a number in digits.
fn id_key(id: &Value) -> String {
    match id {
        Value::String(id) => id.clone(),
        other => other.to_string(),
    }
}

/// Forgets a request of the peer's however its wait ends; one still unanswered then
/// (cancelled, timed out, or its `mcp/message` dropped) is cancelled at the local side.
struct ForgetAnswer<'a>(&'a Tunnel, String);

impl Drop for ForgetAnswer<'_> {
    fn drop(&mut self) {
        if lock(&self.0.inner.answering).remove(&self.1).is_some() {
            let cancelled = json!({
                "jsonrpc": "2.0",
                "method": CANCELLED,
                "params": {"requestId": self.1, "reason": "the ACP peer no longer waits for the answer"},
            });
            let _ = self.0.inner.to_mcp.send(Some(cancelled));
        }
    }
}

/// The rmcp transport of a [`Tunnel`], for a service of role `R`.
pub(crate) struct TunnelTransport<R> {
    tunnel: Tunnel,
    from_peer: mpsc::UnboundedReceiver<Option<Value>>,
    role: std::marker::PhantomData<fn() -> R>,
}

/// A tunnel's transport never fails to send: what the peer does not take is its loss (an
/// ACP connection that closed ends the tunnel).
#[derive(Debug)]
pub(crate) struct Never;

impl std::fmt::Display for Never {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("never")
    }
}

impl std::error::Error for Never {}

impl<R: ServiceRole> rmcp::transport::Transport<R> for TunnelTransport<R> {
    type Error = Never;

    /// Nothing happens until the future is polled, so that [`InOrder`] keeps every effect
    /// (a request sent, an answer delivered, a cancellation) in the order rmcp gave them.
    fn send(&mut self, item: TxJsonRpcMessage<R>) -> impl Future<Output = Result<(), Never>> + Send + 'static {
        let encoded = serde_json::to_value(&item);
        let tunnel = self.tunnel.clone();
        async move {
            match encoded {
                Ok(message) => tunnel.send_on(message).await,
                Err(error) => tracing::warn!(%error, "an MCP message could not be encoded"),
            }
            Ok(())
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<R>> {
        loop {
            let message = self.from_peer.recv().await.flatten()?;
            // A request's id, to answer it if the local side cannot read it.
            let request = message.get("method").and(message.get("id")).cloned();
            match serde_json::from_value(message) {
                Ok(message) => return Some(message),
                Err(error) => {
                    tracing::warn!(%error, connection = self.tunnel.id(), "an unreadable MCP message over ACP was dropped");
                    // Answered at once, not left to wait for the tunnel's timeout.
                    if let Some(id) = request {
                        let message = format!("an unreadable MCP request: {error}");
                        let error = RpcError::new(codes::INVALID_PARAMS, message);
                        self.tunnel
                            .send_on(json!({"jsonrpc": "2.0", "id": id, "error": error}))
                            .await;
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Never> {
        self.from_peer.close();
        Ok(())
    }
}

/// A connection's open tunnels, by `connectionId`: where an incoming `mcp/message` goes.
#[derive(Debug, Default)]
pub(crate) struct Tunnels {
    open: std::sync::Mutex<HashMap<String, Tunnel>>,
    /// The peer's `mcp/message` requests being answered, by their ACP id: what cancels each.
    cancels: Arc<Cancels>,
}

/// The params of an incoming `mcp/message`.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageParams {
    connection_id: String,
    method: String,
    #[serde(default)]
    params: Option<Value>,
}

impl Tunnels {
    /// Routes `mcp/message`s of `tunnel`'s connection id to it; `false`, and nothing changed,
    /// when that id is routed already (a peer that gave two connections one id).
    #[must_use]
    pub(crate) fn insert(&self, tunnel: Tunnel) -> bool {
        match lock(&self.open).entry(tunnel.id().to_string()) {
            std::collections::hash_map::Entry::Occupied(_) => false,
            std::collections::hash_map::Entry::Vacant(vacant) => {
                vacant.insert(tunnel);
                true
            }
        }
    }

    /// How many tunnels are open.
    pub(crate) fn open_count(&self) -> usize {
        lock(&self.open).len()
    }

    /// Stops routing to `connection_id`, and returns its tunnel (ended).
    pub(crate) fn remove(&self, connection_id: &str) -> Option<Tunnel> {
        let tunnel = lock(&self.open).remove(connection_id)?;
        tunnel.end();
        Some(tunnel)
    }

    /// Ends every tunnel: the ACP connection is gone.
    pub(crate) fn end_all(&self) {
        for (_, tunnel) in lock(&self.open).drain() {
            tunnel.end();
        }
    }

    /// Makes the incoming `mcp/message` request `id` one that [`cancel`](Self::cancel) can
    /// cancel, until the [`Cancellable`] is dropped. Taken as the request is read, before the
    /// next message is: the peer may cancel it at once.
    pub(crate) fn cancellable(&self, id: &Id) -> Cancellable {
        self.cancels.cancellable(id)
    }

    /// An incoming `mcp/message` request: its tunnel's answer, or `-32602` naming what is
    /// wrong (bad params, no such connection), or `-32800` when it is cancelled first (see
    /// [`cancellable`](Self::cancellable); `None`: it cannot be).
    pub(crate) async fn request(
        &self,
        params: Option<&RawValue>,
        cancellable: Option<Cancellable>,
    ) -> Result<Value, RpcError> {
        let (tunnel, message) = self.route(params)?;
        let cancelled = async move {
            match cancellable {
                Some(mut cancellable) => cancellable.cancelled().await,
                None => std::future::pending().await,
            }
        };
        tunnel.deliver_request(message.method, message.params, cancelled).await
    }

    /// `$/cancel_request` (its params): cancels the `mcp/message` request it names, when
    /// that is one of these tunnels'. `false`: it names none of theirs.
    pub(crate) fn cancel(&self, params: Option<&RawValue>) -> bool {
        self.cancels.cancel(params)
    }

    /// An incoming `mcp/message` notification, to its tunnel (dropped, with a log line, when
    /// it has none).
    pub(crate) fn notification(&self, params: Option<&RawValue>) {
        match self.route(params) {
            Ok((_, message)) if !is_inner_notification(&message.method) => tracing::warn!(
                method = message.method,
                "an `mcp/message` notification that does not carry an MCP notification was dropped"
            ),
            Ok((tunnel, message)) => tunnel.deliver_notification(message.method, message.params),
            Err(error) => tracing::debug!(%error, "an `mcp/message` notification was dropped"),
        }
    }

    fn route(&self, params: Option<&RawValue>) -> Result<(Tunnel, MessageParams), RpcError> {
        let text = params.map_or("null", |raw| raw.get());
        let message: MessageParams = serde_json::from_str(text).map_err(|error| {
            RpcError::new(
                codes::INVALID_PARAMS,
                format!("invalid params for `{MESSAGE}`: {error}"),
            )
        })?;
        let tunnel = lock(&self.open).get(&message.connection_id).cloned().ok_or_else(|| {
            RpcError::new(
                codes::INVALID_PARAMS,
                format!("no open MCP connection `{}`", message.connection_id),
            )
        })?;
        Ok((tunnel, message))
    }
}

/// The answer to an ACP request sent with [`Pending::call`](crate::jsonrpc::pending::Pending::call),
/// as JSON, or the error to give the MCP side.
pub(crate) fn answer_value(
    method: &str,
    timeout: Duration,
    answer: Result<Box<serde_json::value::RawValue>, RequestFailure>,
) -> Result<Value, RpcError> {
    match answer {
        Ok(raw) => serde_json::from_str(raw.get()).map_err(|error| {
            let levels = crate::audit::text_depth(raw.get().as_bytes());
            let why = if levels > crate::audit::PEER_READ_DEPTH {
                format!("the answer nests too deep: {levels} levels")
            } else {
                error.to_string()
            };
            RpcError::new(
                codes::INTERNAL_ERROR,
                format!("an unreadable answer to `{method}`: {why}"),
            )
        }),
        Err(RequestFailure::Rpc(error)) => Err(error),
        Err(RequestFailure::Closed) => Err(RpcError::new(
            codes::INTERNAL_ERROR,
            format!("the ACP connection closed before `{method}` was answered"),
        )),
        Err(RequestFailure::TimedOut) => Err(RpcError::new(
            codes::INTERNAL_ERROR,
            format!("`{method}` was not answered within {timeout:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use rmcp::service::RoleClient;
    use rmcp::transport::Transport;

    use super::*;

    /// A peer that records what is sent to it. It answers `ping`, holds `hold` until it is
    /// cancelled (recording that as a `$/cancel_request`), and knows no other method. With
    /// `gate` set, a request is sent only once the gate lets it (as a real peer's waits for
    /// room in its outbox).
    #[derive(Default)]
    struct Recorder {
        sent: std::sync::Mutex<Vec<(&'static str, Value, bool)>>,
        cancelled: tokio::sync::Notify,
        gate: std::sync::Mutex<Option<Arc<tokio::sync::Semaphore>>>,
    }

    impl AcpPeer for Arc<Recorder> {
        fn request(&self, request: PeerRequest) -> BoxFuture<'static, Result<Value, RpcError>> {
            let PeerRequest {
                method,
                params,
                cancelled,
                sent,
                ..
            } = request;
            let recorder = self.clone();
            let gate = lock(&self.gate).clone();
            Box::pin(async move {
                if let Some(gate) = gate {
                    gate.acquire().await.expect("the gate stays open").forget();
                }
                lock(&recorder.sent).push((method, params.clone(), true));
                let _ = sent.send(());
                match params["method"].as_str() {
                    Some("ping") => Ok(json!({})),
                    Some("hold") => {
                        cancelled.await;
                        lock(&recorder.sent).push(("$/cancel_request", params, false));
                        recorder.cancelled.notify_one();
                        Err(RpcError::new(codes::REQUEST_CANCELLED, "cancelled"))
                    }
                    _ => Err(RpcError::new(-32601, "no such MCP method")),
                }
            })
        }

        fn notify(&self, method: &'static str, params: Value) -> BoxFuture<'static, ()> {
            lock(&self.sent).push((method, params, false));
            Box::pin(async {})
        }
    }

    impl Recorder {
        /// The inner MCP methods of what was sent, in order.
        fn inner_methods(&self) -> Vec<Value> {
            lock(&self.sent)
                .iter()
                .map(|(_, params, _)| params["method"].clone())
                .collect()
        }
    }

    /// An MCP `ping` request (id 1), as rmcp hands it to the transport.
    fn ping() -> TxJsonRpcMessage<RoleClient> {
        serde_json::from_value(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})).unwrap()
    }

    /// MCP's `notifications/initialized`, as rmcp hands it to the transport.
    fn initialized() -> TxJsonRpcMessage<RoleClient> {
        serde_json::from_value(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap()
    }

    /// The peer's `ping`, delivered to the local side until it is answered.
    fn ping_from_the_peer(tunnel: &Tunnel) -> impl Future<Output = Result<Value, RpcError>> + use<> {
        let tunnel = tunnel.clone();
        async move {
            tunnel
                .deliver_request("ping".into(), None, std::future::pending())
                .await
        }
    }

    /// Once the `sends` (tasks) are done: the MCP methods the peer was sent, in order.
    async fn methods_sent<E: std::fmt::Debug>(
        sends: [tokio::task::JoinHandle<Result<(), E>>; 2],
        recorder: &Recorder,
    ) -> Vec<Value> {
        for send in sends {
            send.await.unwrap().unwrap();
        }
        recorder.inner_methods()
    }

    fn open() -> (Tunnel, InOrder<TunnelTransport<RoleClient>>, Arc<Recorder>) {
        let recorder = Arc::new(Recorder::default());
        let (tunnel, transport) =
            Tunnel::open::<RoleClient>("c-1".into(), Arc::new(recorder.clone()), Duration::from_secs(5));
        (tunnel, transport, recorder)
    }

    async fn next(transport: &mut InOrder<TunnelTransport<RoleClient>>) -> Value {
        let message = tokio::time::timeout(Duration::from_secs(5), transport.receive())
            .await
            .expect("a message in time")
            .expect("the tunnel is open");
        serde_json::to_value(message).unwrap()
    }

    #[tokio::test]
    async fn an_mcp_request_goes_out_as_mcp_message_and_its_answer_or_error_comes_back() {
        let (_tunnel, mut transport, recorder) = open();
        for (id, method) in [(7, "ping"), (8, "resources/list")] {
            let request = serde_json::from_value(json!({"jsonrpc": "2.0", "id": id, "method": method})).unwrap();
            transport.send(request).await.unwrap();
            let answer = next(&mut transport).await;
            assert_eq!(answer["id"], id, "{answer}");
            if method == "ping" {
                assert_eq!(answer["result"], json!({}), "{answer}");
            } else {
                assert_eq!(answer["error"]["code"], -32601, "{answer}");
            }
        }
        let sent = lock(&recorder.sent).clone();
        assert_eq!(
            sent[0],
            (MESSAGE, json!({"connectionId": "c-1", "method": "ping"}), true),
            "flattened into `mcp/message`, without `params` when it has none"
        );
        let notification =
            serde_json::from_value(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
        transport.send(notification).await.unwrap();
        assert_eq!(
            lock(&recorder.sent).last().unwrap(),
            &(
                MESSAGE,
                json!({"connectionId": "c-1", "method": "notifications/initialized"}),
                false
            )
        );
    }

    /// Review of #18: a request went out from a task of its own while the transport moved on,
    /// so an MCP notification sent after it could reach the peer first (rmcp runs each send
    /// as a task of its own, too).
    #[tokio::test]
    async fn a_notification_sent_after_a_request_reaches_the_peer_after_it() {
        let (_tunnel, mut transport, recorder) = open();
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        *lock(&recorder.gate) = Some(gate.clone());
        let request = transport.send(ping());
        let notification = transport.send(initialized());
        let notification = tokio::spawn(notification);
        let request = tokio::spawn(request);
        // On this single-threaded runtime, every task that can run does while this one yields:
        // a notification free to overtake the held request has done so by now.
        for _ in 0..16 {
            tokio::task::yield_now().await;
        }
        gate.add_permits(1);
        let methods = methods_sent([request, notification], &recorder).await;
        assert_eq!(methods, [json!("ping"), json!("notifications/initialized")]);
    }

    /// Review of #18: only notifications waited for their turn; a request (or an answer) took
    /// effect when rmcp handed it over, so it could overtake a notification handed over
    /// before it (progress arriving after the result it was about).
    #[tokio::test]
    async fn a_request_sent_after_a_notification_reaches_the_peer_after_it() {
        let (_tunnel, mut transport, recorder) = open();
        let notification = transport.send(initialized());
        let request = transport.send(ping());
        // rmcp runs each send as a task; these run in the order spawned (single thread).
        let request = tokio::spawn(request);
        let notification = tokio::spawn(notification);
        let methods = methods_sent([request, notification], &recorder).await;
        assert_eq!(methods, [json!("notifications/initialized"), json!("ping")]);
    }

    #[tokio::test]
    async fn a_request_of_the_peers_reaches_the_local_side_and_gets_its_answer() {
        let (tunnel, mut transport, _) = open();
        let asking = tokio::spawn(ping_from_the_peer(&tunnel));
        let request = next(&mut transport).await;
        assert_eq!(request["method"], "ping", "{request}");
        let reply = serde_json::from_value(json!({"jsonrpc": "2.0", "id": request["id"], "result": {}})).unwrap();
        transport.send(reply).await.unwrap();
        assert_eq!(asking.await.unwrap().unwrap(), json!({}));

        // Ended: the local side sees the end, and a waiting request fails at once.
        let waiting = tokio::spawn(ping_from_the_peer(&tunnel));
        let _ = next(&mut transport).await;
        tunnel.end();
        let error = waiting.await.unwrap().unwrap_err();
        assert!(error.message.contains("closed"), "{error:?}");
        assert!(transport.receive().await.is_none());
    }

    /// A request of the peer's that the local side cannot read is answered `-32602` at once.
    /// Before, it was dropped, and its `mcp/message` waited for the tunnel's timeout.
    #[tokio::test]
    async fn a_request_the_local_side_cannot_read_is_answered_at_once() {
        let (tunnel, mut transport, _) = open();
        let reading = tokio::spawn(async move { transport.receive().await.map(|_| ()) });
        // Params that are not an object: no MCP request reads so.
        let params = json!("not an object");
        let answer = tokio::time::timeout(
            Duration::from_secs(2),
            tunnel.deliver_request("sampling/createMessage".into(), Some(params), std::future::pending()),
        )
        .await
        .expect("answered before the tunnel's timeout (5 s)");
        let error = answer.unwrap_err();
        assert_eq!(error.code, codes::INVALID_PARAMS, "{error:?}");
        assert!(error.message.contains("unreadable MCP request"), "{error:?}");
        reading.abort();
    }

    #[tokio::test]
    async fn a_message_for_no_open_connection_or_with_bad_params_is_refused_naming_why() {
        let tunnels = Tunnels::default();
        let raw = |value: Value| serde_json::value::to_raw_value(&value).unwrap();
        let error = tunnels
            .request(Some(&raw(json!({"connectionId": "nope", "method": "ping"}))), None)
            .await
            .unwrap_err();
        assert_eq!(error.code, codes::INVALID_PARAMS);
        assert!(error.message.contains("no open MCP connection `nope`"), "{error:?}");
        let error = tunnels
            .request(Some(&raw(json!({"method": "ping"}))), None)
            .await
            .unwrap_err();
        assert!(error.message.contains("connectionId"), "{error:?}");
        let error = tunnels.request(None, None).await.unwrap_err();
        assert_eq!(error.code, codes::INVALID_PARAMS);
    }

    /// A `tools/call` sent without an id would skip what governs requests: only MCP
    /// notifications pass as `mcp/message` notifications.
    #[tokio::test]
    async fn only_an_mcp_notification_passes_as_an_mcp_message_notification() {
        let (tunnel, mut transport, _) = open();
        let tunnels = Tunnels::default();
        assert!(tunnels.insert(tunnel));
        let raw = |value: Value| serde_json::value::to_raw_value(&value).unwrap();
        let call = json!({"connectionId": "c-1", "method": "tools/call", "params": {"name": "write"}});
        tunnels.notification(Some(&raw(call)));
        let cancelled = json!({"connectionId": "c-1", "method": "notifications/cancelled", "params": {"requestId": 1}});
        tunnels.notification(Some(&raw(cancelled)));
        let delivered = next(&mut transport).await;
        assert_eq!(delivered["method"], "notifications/cancelled", "{delivered}");
    }

    /// The peer never saw the local side's MCP id, so a cancellation naming it cannot travel
    /// as it is: the `mcp/message` carrying the request is cancelled instead, and the local
    /// side, which no longer waits, gets no answer.
    #[tokio::test]
    async fn the_local_sides_cancellation_cancels_the_mcp_message_that_carries_its_request() {
        let (_tunnel, mut transport, recorder) = open();
        let hold = serde_json::from_value(json!({"jsonrpc": "2.0", "id": 9, "method": "hold"})).unwrap();
        transport.send(hold).await.unwrap();
        let cancelled = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 9}});
        transport
            .send(serde_json::from_value(cancelled).unwrap())
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(5), recorder.cancelled.notified())
            .await
            .expect("the `mcp/message` carrying request 9 is cancelled");
        // No answer to 9 reaches the local side: the next is the answer to 10.
        let ping = serde_json::from_value(json!({"jsonrpc": "2.0", "id": 10, "method": "ping"})).unwrap();
        transport.send(ping).await.unwrap();
        assert_eq!(next(&mut transport).await["id"], 10);
        let sent: Vec<_> = lock(&recorder.sent)
            .iter()
            .map(|(method, params, _)| (*method, params["method"].clone()))
            .collect();
        assert_eq!(
            sent,
            [
                (MESSAGE, json!("hold")),
                ("$/cancel_request", json!("hold")),
                (MESSAGE, json!("ping"))
            ],
            "the cancellation itself is not sent as an `mcp/message`"
        );
    }

    /// The peer cancels its `mcp/message` (`$/cancel_request`): the local side is told, under
    /// the id it got the request with, and the `mcp/message` is answered `-32800`.
    #[tokio::test]
    async fn a_cancelled_mcp_message_cancels_its_request_at_the_local_side_under_the_id_it_got() {
        let (tunnel, mut transport, _) = open();
        let tunnels = Arc::new(Tunnels::default());
        assert!(tunnels.insert(tunnel));
        let raw = |value: Value| serde_json::value::to_raw_value(&value).unwrap();
        let asking = tokio::spawn({
            let tunnels = tunnels.clone();
            let params = raw(json!({"connectionId": "c-1", "method": "tools/call", "params": {"name": "slow"}}));
            let cancellable = tunnels.cancellable(&Id::Number(5));
            async move { tunnels.request(Some(&params), Some(cancellable)).await }
        });
        // Cancelled as soon as it was read, maybe before its task ran: it is cancelled all the same.
        assert!(
            !tunnels.cancel(Some(&raw(json!({"requestId": 6})))),
            "6 is not being answered"
        );
        assert!(tunnels.cancel(Some(&raw(json!({"requestId": 5})))));
        let request = next(&mut transport).await;
        assert_eq!(request["method"], "tools/call", "{request}");
        let error = asking.await.unwrap().unwrap_err();
        assert_eq!(error.code, codes::REQUEST_CANCELLED, "{error:?}");
        let told = next(&mut transport).await;
        assert_eq!(told["method"], "notifications/cancelled", "{told}");
        assert_eq!(told["params"]["requestId"], request["id"], "{told}");
        assert!(
            !tunnels.cancel(Some(&raw(json!({"requestId": 5})))),
            "answered: nothing left to cancel"
        );
    }

    #[test]
    fn the_server_id_is_read_under_each_of_its_names() {
        for key in ["serverId", "acpId", "id"] {
            assert_eq!(server_id_of(&json!({ key: "s-1" })), Some("s-1"), "{key}");
        }
        assert_eq!(server_id_of(&json!({"serverId": 1})), None);
    }
}
