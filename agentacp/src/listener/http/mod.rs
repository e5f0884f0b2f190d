//! Serving an operator over Streamable HTTP (issue #47), on the same `/acp` endpoint and
//! listener as WebSocket: the listener reads each TCP connection's first request head and
//! hands a WebSocket upgrade to the WebSocket handshake, anything else to hyper here
//! (HTTP/1.1, or HTTP/2 for a client that starts with its preface, h2c, or that agreed on it
//! by ALPN over TLS).
//!
//! - `POST` carries one JSON-RPC message (`Content-Type: application/json`, at most the frame
//!   limit). Without `Acp-Connection-Id` it must be `initialize`: a new ACP connection is
//!   opened (admitted as a WebSocket one is) and the answer comes back `200` with the
//!   connection's id in `Acp-Connection-Id`. Anything else is answered `202` at once, its
//!   answer on a stream. A batch is `501`; a session-scoped method that names no session
//!   (neither `Acp-Session-Id` nor `params.sessionId`), or an `Acp-Session-Id` that differs
//!   from `params.sessionId`, `400`.
//! - `GET` with `Accept: text/event-stream` and `Acp-Connection-Id` opens the connection's
//!   SSE stream, with `Acp-Session-Id` too a session's ([`connection`] says what goes where);
//!   one reader per stream (`409` for a second), keepalive comments every
//!   `Limits::keepalive`.
//! - `DELETE` with `Acp-Connection-Id` ends the connection (`202`).
//! - `GET` with `Upgrade: websocket` on a kept-alive HTTP/1.1 connection (not its first
//!   request, which the listener upgrades itself) is upgraded here (`101`) and runs as a
//!   WebSocket the listener upgraded.
//! - Any other method, a CORS preflight (`OPTIONS`) included, is `405` with `Allow`: no CORS
//!   is served, and no cookies are set.
//!
//! Every request is checked as a WebSocket upgrade is (path, `Origin`, bearer token): a
//! connection opened with a token takes requests only with a token of the same identity;
//! one opened without must `authenticate` within the auth timeout. Each TCP connection holds a
//! listener slot as a WebSocket one does, and each ACP connection one more.

mod connection;
pub(crate) mod head;

use std::collections::HashMap;
use std::convert::Infallible;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, ALLOW, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use serde_json::Value;
use tokio::io::{DuplexStream, ReadHalf};
use tokio::sync::watch;

use crate::auth::Identity;
use crate::future::BoxFuture;
use crate::sync::lock;
use crate::websocket::{Limits, into_closable_lines};

use super::admission::{Gate, Refusal, Ticket, UnprovenPlace};
use super::upgraded::CONNECTION_ID;
use connection::{HttpConnection, NotTaken, Reader, Unavailable, answer_route};
use head::Io;

/// The header naming a session.
const SESSION_ID: &str = "acp-session-id";

/// The methods that must carry `Acp-Session-Id`.
const SESSION_SCOPED: [&str; 10] = [
    "session/prompt",
    "session/cancel",
    "session/close",
    "session/delete",
    "session/fork",
    "session/load",
    "session/resume",
    "session/set_config_option",
    "session/set_mode",
    "session/set_model",
];

/// Bytes between an ACP connection and its server, each way.
const PIPE_BYTES: usize = 256 * 1024;

/// The body of every answer.
type Body = UnsyncBoxBody<Bytes, Infallible>;

/// A refusal: the status and the sentence that says why.
pub(crate) type Refused = (StatusCode, String);

/// What runs one ACP connection (the listener's handler).
pub(crate) type Handle = Arc<dyn Fn(Lines) -> BoxFuture<'static, ()> + Send + Sync>;

/// The listener's checks of a request (path, `Origin`, bearer token): the identity it
/// proves, with its token, or why it is refused.
pub(crate) type Admit = Arc<dyn Fn(&Request<()>) -> Result<Option<(Identity, String)>, Refused> + Send + Sync>;

/// What the endpoint takes of its listener's options.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    /// How long a request head, and a POST's body, may take.
    pub(crate) handshake_timeout: Duration,
    /// How long an ending connection gets to finish.
    pub(crate) drain: Duration,
    /// The most ACP connections at once.
    pub(crate) max_connections: usize,
    /// The bounds of each connection (frame limit, keepalive, write timeout).
    pub(crate) limits: Limits,
}

/// An ACP connection over HTTP, for the listener's handler: the server's lines, who
/// connected, the identity its first request proved (with the token), and its place among
/// the unauthenticated while it has one.
pub(crate) struct Lines {
    pub(crate) read: ReadHalf<DuplexStream>,
    pub(crate) write: tokio::io::WriteHalf<DuplexStream>,
    pub(crate) peer: SocketAddr,
    pub(crate) proved: Option<(Identity, String)>,
    pub(crate) unproven: Option<UnprovenPlace>,
}

/// The Streamable HTTP side of a listener: its ACP connections by id.
pub(crate) struct Endpoint {
    options: Settings,
    admit: Admit,
    gate: Arc<Gate>,
    stopped: watch::Receiver<bool>,
    handle: Handle,
    connections: Mutex<HashMap<String, Arc<HttpConnection>>>,
    /// How many ACP connections run (the listener's drain waits for none).
    running: watch::Sender<usize>,
}

impl Endpoint {
    /// The endpoint of a listener with `options`, `gate` and the checks of `admit`, running
    /// each ACP connection with `handle`; `stopped` turns true on shutdown.
    pub(crate) fn new(
        options: Settings,
        gate: Arc<Gate>,
        stopped: watch::Receiver<bool>,
        admit: Admit,
        handle: Handle,
    ) -> Arc<Endpoint> {
        Arc::new(Endpoint {
            options,
            admit,
            gate,
            stopped,
            handle,
            connections: Mutex::default(),
            running: watch::Sender::new(0),
        })
    }

    /// Completes once no ACP connection of this endpoint runs.
    pub(crate) async fn drained(&self) {
        let mut running = self.running.subscribe();
        let _ = running.wait_for(|running| *running == 0).await;
    }

    /// Serves the HTTP requests of one TCP connection (its slot in `ticket`) until it closes,
    /// `evicted` completes (an unauthenticated connection made room for an authenticated
    /// one), or the listener shuts down (then in-flight answers end first).
    pub(crate) async fn serve_tcp(
        self: Arc<Self>,
        io: Box<dyn Io>,
        peer: SocketAddr,
        ticket: Ticket,
        evicted: impl Future<Output = ()>,
    ) {
        let _slot = ticket.slot.clone();
        let ticket = Arc::new(Mutex::new(ticket));
        let endpoint = self.clone();
        let service = service_fn(move |request| {
            let (endpoint, ticket) = (endpoint.clone(), ticket.clone());
            async move { Ok::<_, Infallible>(endpoint.answer(request, peer, &ticket).await) }
        });
        // HTTP/1.1, or HTTP/2 when the client starts with its preface (h2c).
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(self.options.handshake_timeout);
        builder
            .http2()
            .timer(TokioTimer::new())
            .keep_alive_interval(self.options.limits.keepalive)
            .keep_alive_timeout(self.options.limits.keepalive);
        // With upgrades: a WebSocket upgrade that is not the connection's first request.
        let connection = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
        let mut stopped = self.stopped.clone();
        tokio::pin!(connection, evicted);
        tokio::select! {
            _ = &mut connection => return,
            () = &mut evicted => return tracing::info!(%peer, "an HTTP connection was dropped to make room"),
            _ = stopped.wait_for(|stopped| *stopped) => connection.as_mut().graceful_shutdown(),
        }
        let _ = connection.await;
    }

    /// The answer to one request.
    async fn answer(
        self: &Arc<Self>,
        request: Request<Incoming>,
        peer: SocketAddr,
        ticket: &Mutex<Ticket>,
    ) -> Response<Body> {
        let method = request.method().clone();
        match self.respond(request, peer, ticket).await {
            Ok(response) => response,
            Err((status, message)) => {
                tracing::debug!(%peer, %method, status = status.as_u16(), %message, "refused an HTTP request");
                plain(status, &message)
            }
        }
    }

    async fn respond(
        self: &Arc<Self>,
        request: Request<Incoming>,
        peer: SocketAddr,
        ticket: &Mutex<Ticket>,
    ) -> Result<Response<Body>, Refused> {
        let (parts, body) = request.into_parts();
        let mut head = Request::from_parts(parts, ());
        let shown = (self.admit)(&head)?;
        {
            let mut ticket = lock(ticket);
            let entered = match &shown {
                Some(_) => self.gate.prove(&mut ticket),
                None => ticket.over_limit().map_or(Ok(()), Err),
            };
            entered.map_err(refused)?;
        }
        match *head.method() {
            Method::POST => self.post(&head, body, peer, shown, ticket).await,
            // Another upgrade (`h2c`, say) is ignored, as a server may: served as HTTP/1.1.
            Method::GET if asks_websocket(&head) => self.websocket(&mut head, peer, shown),
            Method::GET => self.get(&head, shown.as_ref(), ticket),
            Method::DELETE => self.delete(&head, shown.as_ref(), ticket).await,
            // No CORS: a browser's preflight is refused as any other method (with `Allow`).
            _ => Err((
                StatusCode::METHOD_NOT_ALLOWED,
                format!("{} is not served at /acp: POST, GET and DELETE are", head.method()),
            )),
        }
    }

    async fn post(
        self: &Arc<Self>,
        head: &Request<()>,
        body: Incoming,
        peer: SocketAddr,
        shown: Option<(Identity, String)>,
        ticket: &Mutex<Ticket>,
    ) -> Result<Response<Body>, Refused> {
        let json = header(head, CONTENT_TYPE.as_str()).is_some_and(|value| {
            value
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .eq_ignore_ascii_case("application/json")
        });
        if !json {
            return Err((
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "a POST to /acp carries one JSON-RPC message, `Content-Type: application/json`".to_string(),
            ));
        }
        let text = self.read_body(head, body).await?;
        let message: Value = serde_json::from_str(&text)
            .map_err(|error| (StatusCode::BAD_REQUEST, format!("the body is not JSON: {error}")))?;
        if message.is_array() {
            return Err((
                StatusCode::NOT_IMPLEMENTED,
                "JSON-RPC batches are not served: POST one message at a time".to_string(),
            ));
        }
        if !message.is_object() {
            return Err((
                StatusCode::BAD_REQUEST,
                "the body is not a JSON-RPC message".to_string(),
            ));
        }
        // One message a line: a body spread over lines is written on one.
        let line = if text.contains(['\n', '\r']) {
            message.to_string()
        } else {
            text
        };
        let method = message.get("method").and_then(Value::as_str);
        let id = message.get("id").filter(|id| !id.is_null()).map(Value::to_string);
        let Some(connection_id) = header(head, CONNECTION_ID) else {
            return match (method, id) {
                (Some("initialize"), Some(id)) => self.open(&line, id, peer, shown).await,
                _ => Err((
                    StatusCode::BAD_REQUEST,
                    "Acp-Connection-Id is required: the first POST is `initialize`, whose answer names the connection"
                        .to_string(),
                )),
            };
        };
        let connection = self.find(connection_id, shown.as_ref(), ticket)?;
        let params = message.get("params");
        if let Some(method) = method {
            let named = params
                .and_then(|params| params.get("sessionId"))
                .and_then(Value::as_str);
            match (header(head, SESSION_ID), named) {
                // The session named in params alone is enough (the Python SDK's client sends
                // the header with some session methods only; the official Rust server agrees).
                (None, None) if SESSION_SCOPED.contains(&method) => {
                    return Err((
                        StatusCode::BAD_REQUEST,
                        format!("`{method}` is session-scoped: send Acp-Session-Id with it"),
                    ));
                }
                (Some(header), Some(named)) if header != named => {
                    return Err((
                        StatusCode::BAD_REQUEST,
                        "Acp-Session-Id differs from params.sessionId".to_string(),
                    ));
                }
                _ => {}
            }
        }
        let answer = method.zip(id).map(|(method, id)| (id, answer_route(method, params)));
        connection
            .post(&line, answer)
            .await
            .map_err(|not_taken| match not_taken {
                NotTaken::TooMany => (
                    StatusCode::TOO_MANY_REQUESTS,
                    "too many requests of this connection wait for their answers".to_string(),
                ),
                NotTaken::Stuck => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the connection takes no more messages (it is ending, or its agent is not reading)".to_string(),
                ),
            })?;
        Ok(empty(StatusCode::ACCEPTED))
    }

    /// The body, at most the frame limit, read within the handshake time.
    async fn read_body(&self, head: &Request<()>, body: Incoming) -> Result<String, Refused> {
        let max = self.options.limits.max_message_bytes;
        let too_large = || {
            (
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the message is over the limit of {max} bytes"),
            )
        };
        let declared = header(head, CONTENT_LENGTH.as_str()).and_then(|length| length.parse::<usize>().ok());
        if declared.is_some_and(|length| length > max) {
            return Err(too_large());
        }
        let reading = Limited::new(body, max).collect();
        let collected = tokio::time::timeout(self.options.handshake_timeout, reading)
            .await
            .map_err(|_| {
                (
                    StatusCode::REQUEST_TIMEOUT,
                    "the body took too long to arrive".to_string(),
                )
            })?;
        let bytes = match collected {
            Ok(collected) => collected.to_bytes(),
            Err(error) if error.downcast_ref::<http_body_util::LengthLimitError>().is_some() => return Err(too_large()),
            Err(error) => return Err((StatusCode::BAD_REQUEST, format!("the body could not be read: {error}"))),
        };
        String::from_utf8(bytes.to_vec()).map_err(|_| (StatusCode::BAD_REQUEST, "the body is not UTF-8".to_string()))
    }

    /// Opens an ACP connection with the client's `initialize` (request `id`); its answer.
    async fn open(
        self: &Arc<Self>,
        line: &str,
        id: String,
        peer: SocketAddr,
        shown: Option<(Identity, String)>,
    ) -> Result<Response<Body>, Refused> {
        if lock(&self.connections).len() >= self.options.max_connections {
            return Err((
                StatusCode::SERVICE_UNAVAILABLE,
                "too many connections; try again later".to_string(),
            ));
        }
        let mut ticket = self.ticket(peer, shown.as_ref())?;
        let unproven = ticket.take_place();
        let connection_id = new_connection_id()?;
        let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
        let (read, write) = tokio::io::split(theirs);
        let (output, input) = tokio::io::split(ours);
        let limits = self.options.limits;
        let connection = HttpConnection::new(
            connection_id.clone(),
            shown.as_ref().map(|(identity, _)| identity.clone()),
            unproven.as_ref().map(UnprovenPlace::number),
            input,
            stream_budget(limits.max_message_bytes),
            limits.write_timeout,
        );
        lock(&self.connections).insert(connection_id.clone(), connection.clone());
        self.running.send_modify(|running| *running += 1);
        let lines = Lines {
            read,
            write,
            peer,
            proved: shown,
            unproven,
        };
        tokio::spawn(self.clone().run(connection.clone(), lines, output, ticket));
        let Some(answer) = connection.initialize(line, id, self.options.handshake_timeout).await else {
            self.end(&connection).await;
            return Err((
                StatusCode::GATEWAY_TIMEOUT,
                "the agent did not answer `initialize` in time".to_string(),
            ));
        };
        let mut response = Response::new(Full::new(Bytes::from(answer)).boxed_unsync());
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Ok(value) = HeaderValue::from_str(&connection_id) {
            headers.insert(CONNECTION_ID, value);
        }
        Ok(response)
    }

    /// A slot (and, without a token, a place among the unauthenticated) for a new ACP
    /// connection from `peer`, as a new WebSocket connection gets one; else the refusal.
    fn ticket(&self, peer: SocketAddr, shown: Option<&(Identity, String)>) -> Result<Ticket, Refused> {
        let mut ticket = self.gate.admit(peer.ip()).map_err(refused)?;
        match shown {
            Some(_) => self.gate.prove(&mut ticket).map_err(refused)?,
            None => {
                if let Some(refusal) = ticket.over_limit() {
                    return Err(refused(refusal));
                }
            }
        }
        Ok(ticket)
    }

    /// Runs one ACP connection until its server ends; ends its input when it is evicted,
    /// detached (no stream and no request for the write timeout) or the listener shuts down.
    async fn run(
        self: Arc<Self>,
        connection: Arc<HttpConnection>,
        lines: Lines,
        output: ReadHalf<DuplexStream>,
        mut ticket: Ticket,
    ) {
        let _slot = ticket.slot.clone();
        let evicted = ticket.evicted();
        let routing = tokio::spawn(connection.clone().route(output));
        let serving = (self.handle)(lines);
        let mut stopped = self.stopped.clone();
        let detach = self.options.limits.write_timeout;
        tokio::pin!(serving, evicted);
        let ending = tokio::select! {
            () = &mut serving => None,
            () = &mut evicted => Some("evicted to make room for an authenticated connection"),
            () = connection.detached(detach) => Some("no stream open and no request for the detach time"),
            _ = stopped.wait_for(|stopped| *stopped) => Some("the server is shutting down"),
        };
        if let Some(reason) = ending {
            tracing::info!(connection = %connection.id, reason, "ending an HTTP connection");
            connection.end_input().await;
            if tokio::time::timeout(self.options.drain, &mut serving).await.is_err() {
                tracing::warn!(connection = %connection.id, "an HTTP connection did not end in the drain time; dropped");
            }
        }
        let _ = tokio::time::timeout(self.options.limits.write_timeout, routing).await;
        connection.close_streams();
        lock(&self.connections).remove(&connection.id);
        self.running.send_modify(|running| *running -= 1);
    }

    /// A WebSocket upgrade that is not the first request of its TCP connection (the listener
    /// upgrades a first one before hyper reads the connection): checked as any request (by
    /// [`respond`](Self::respond)), given a slot of its own as a new ACP connection is, and
    /// answered `101`; the WebSocket then runs as one the listener upgraded.
    fn websocket(
        self: &Arc<Self>,
        head: &mut Request<()>,
        peer: SocketAddr,
        shown: Option<(Identity, String)>,
    ) -> Result<Response<Body>, Refused> {
        let accept = websocket_accept(head)?;
        let ticket = self.ticket(peer, shown.as_ref())?;
        let upgrading = hyper::upgrade::on(head);
        self.running.send_modify(|running| *running += 1);
        let endpoint = self.clone();
        tokio::spawn(async move {
            endpoint.clone().serve_websocket(upgrading, peer, shown, ticket).await;
            endpoint.running.send_modify(|running| *running -= 1);
        });
        let id = new_connection_id()?;
        let mut response = empty(StatusCode::SWITCHING_PROTOCOLS);
        let headers = response.headers_mut();
        if let Ok(value) = HeaderValue::from_str(&id) {
            headers.insert(CONNECTION_ID, value);
        }
        headers.insert(http::header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(http::header::UPGRADE, HeaderValue::from_static("websocket"));
        headers.insert(http::header::SEC_WEBSOCKET_ACCEPT, accept);
        Ok(response)
    }

    /// Runs the WebSocket `upgrading` hands over (within the handshake time) with the
    /// listener's handler, holding `ticket`'s slot.
    async fn serve_websocket(
        self: Arc<Self>,
        upgrading: hyper::upgrade::OnUpgrade,
        peer: SocketAddr,
        proved: Option<(Identity, String)>,
        mut ticket: Ticket,
    ) {
        let _slot = ticket.slot.clone();
        let evicted = ticket.evicted();
        let upgraded = match tokio::time::timeout(self.options.handshake_timeout, upgrading).await {
            Ok(Ok(upgraded)) => upgraded,
            Ok(Err(error)) => return tracing::debug!(%peer, %error, "a WebSocket upgrade failed"),
            Err(_) => return tracing::debug!(%peer, "a WebSocket upgrade took too long; dropped"),
        };
        let limits = self.options.limits;
        let ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
            TokioIo::new(upgraded),
            tokio_tungstenite::tungstenite::protocol::Role::Server,
            Some(super::upgraded::websocket_config(&limits)),
        )
        .await;
        let (read, write, _pump, closer) = into_closable_lines(ws, limits, self.stopped.clone());
        let lines = Lines {
            read,
            write,
            peer,
            proved,
            unproven: ticket.take_place(),
        };
        super::upgraded::until_evicted((self.handle)(lines), evicted, Some(closer), peer).await;
    }

    fn get(
        &self,
        head: &Request<()>,
        shown: Option<&(Identity, String)>,
        ticket: &Mutex<Ticket>,
    ) -> Result<Response<Body>, Refused> {
        let streams = header(head, ACCEPT.as_str()).is_some_and(|accept| accept.contains("text/event-stream"));
        if !streams {
            return Err((
                StatusCode::NOT_ACCEPTABLE,
                "a GET of /acp is an SSE stream (`Accept: text/event-stream`) or a WebSocket upgrade".to_string(),
            ));
        }
        let connection_id = header(head, CONNECTION_ID).ok_or((
            StatusCode::BAD_REQUEST,
            "Acp-Connection-Id is required on a stream's GET".to_string(),
        ))?;
        let connection = self.find(connection_id, shown, ticket)?;
        let last = match header(head, "last-event-id") {
            Some(last) => Some(last.trim().parse::<u64>().map_err(|_| {
                (
                    StatusCode::BAD_REQUEST,
                    "Last-Event-ID is not an event id of this server's".to_string(),
                )
            })?),
            None => None,
        };
        let reader = connection
            .subscribe(header(head, SESSION_ID), last)
            .map_err(|unavailable| match unavailable {
                Unavailable::Busy => (StatusCode::CONFLICT, "another GET reads this stream".to_string()),
                Unavailable::Unknown => (StatusCode::NOT_FOUND, "no such session on this connection".to_string()),
                Unavailable::Closed => (StatusCode::NOT_FOUND, "the connection has ended".to_string()),
                Unavailable::Gone => (
                    StatusCode::CONFLICT,
                    "Last-Event-ID names an event this stream no longer keeps: reopen it without one (or load the session)"
                        .to_string(),
                ),
            })?;
        let mut response = Response::new(events(reader, self.options.limits.keepalive));
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        headers.insert("cache-control", HeaderValue::from_static("no-cache"));
        Ok(response)
    }

    async fn delete(
        &self,
        head: &Request<()>,
        shown: Option<&(Identity, String)>,
        ticket: &Mutex<Ticket>,
    ) -> Result<Response<Body>, Refused> {
        let connection_id = header(head, CONNECTION_ID).ok_or((
            StatusCode::BAD_REQUEST,
            "Acp-Connection-Id names the connection to end".to_string(),
        ))?;
        let connection = self.find(connection_id, shown, ticket)?;
        self.end(&connection).await;
        Ok(empty(StatusCode::ACCEPTED))
    }

    /// Ends `connection` at once: its input, its streams, its id.
    async fn end(&self, connection: &HttpConnection) {
        lock(&self.connections).remove(&connection.id);
        connection.end_input().await;
        connection.close_streams();
    }

    /// The connection `id` names, if the request may use it: one opened with a token takes
    /// requests with a token of the same identity only. One that has authenticated (with
    /// `authenticate`) proves who the TCP connection of the request is too: that gives its
    /// place among the unauthenticated back, as an authenticated WebSocket connection does.
    fn find(
        &self,
        id: &str,
        shown: Option<&(Identity, String)>,
        ticket: &Mutex<Ticket>,
    ) -> Result<Arc<HttpConnection>, Refused> {
        let connection = lock(&self.connections).get(id).cloned().ok_or((
            StatusCode::NOT_FOUND,
            "no such connection (it ended, or never was): POST `initialize` to open one".to_string(),
        ))?;
        match (&connection.owner, shown) {
            (Some(_), None) => Err((
                StatusCode::UNAUTHORIZED,
                "this connection was opened with a token: show it (`Authorization: Bearer`) on every request"
                    .to_string(),
            )),
            (Some(owner), Some((identity, _))) if owner != identity => Err((
                StatusCode::FORBIDDEN,
                "this connection belongs to another identity".to_string(),
            )),
            _ => {
                let authenticated = connection.unproven.is_none_or(|place| !self.gate.is_unproven(place));
                if shown.is_none() && authenticated {
                    drop(lock(ticket).take_place());
                }
                Ok(connection)
            }
        }
    }
}

/// How many bytes of events already waiting go out in one chunk of an SSE body (at least
/// one event, whatever its size).
const CHUNK_BYTES: usize = 64 * 1024;

/// What all of one connection's streams may hold: 4 messages at the frame limit, at least
/// 1 MiB.
fn stream_budget(max_message_bytes: usize) -> usize {
    max_message_bytes.saturating_mul(4).clamp(1 << 20, u32::MAX as usize)
}

/// The SSE body of `reader`'s stream: a comment at once (the stream is open), then each
/// message as an event, and a comment every `keepalive`; it ends with the stream.
fn events(reader: Reader, keepalive: Duration) -> Body {
    let ticks = tokio::time::interval_at(tokio::time::Instant::now() + keepalive, keepalive);
    let opened = Some(Bytes::from_static(b": open\n\n"));
    let stream = futures_util::stream::unfold((reader, ticks, opened), |(mut reader, mut ticks, opened)| async move {
        if let Some(opened) = opened {
            return Some((Ok(Frame::data(opened)), (reader, ticks, None)));
        }
        let chunk = tokio::select! {
            event = reader.next() => {
                // With the events already waiting behind it, up to `CHUNK_BYTES`: one write
                // (and one read for the client) for a burst of updates, not one each.
                let mut chunk = String::new();
                let mut event = event;
                while let Some((id, line)) = event {
                    let _ = write!(chunk, "id: {id}\ndata: {line}\n\n");
                    event = if chunk.len() < CHUNK_BYTES { reader.ready() } else { None };
                }
                if chunk.is_empty() {
                    return None;
                }
                Bytes::from(chunk)
            }
            _ = ticks.tick() => Bytes::from_static(b": keepalive\n\n"),
        };
        Some((Ok(Frame::data(chunk)), (reader, ticks, None)))
    });
    StreamBody::new(stream).boxed_unsync()
}

/// A fresh connection id ([`new_connection_id`](super::upgraded::new_connection_id)), or
/// `500`.
fn new_connection_id() -> Result<String, Refused> {
    super::upgraded::new_connection_id().map_err(|why| (StatusCode::INTERNAL_SERVER_ERROR, why))
}

/// Whether `head` asks for `Upgrade: websocket`.
fn asks_websocket(head: &Request<()>) -> bool {
    header(head, "upgrade").is_some_and(head::names_websocket)
}

/// The `Sec-WebSocket-Accept` of a WebSocket upgrade (RFC 6455, 4.2.1), or why it is none.
fn websocket_accept(head: &Request<()>) -> Result<HeaderValue, Refused> {
    let bad = |why: &str| Err((StatusCode::BAD_REQUEST, format!("not a WebSocket upgrade: {why}")));
    if head.version() != http::Version::HTTP_11 {
        return bad("an upgrade is an HTTP/1.1 GET (over HTTP/2, open the WebSocket on a connection of its own)");
    }
    let connection = header(head, "connection").unwrap_or_default();
    if !connection
        .split(',')
        .any(|option| option.trim().eq_ignore_ascii_case("upgrade"))
    {
        return bad("`Connection: Upgrade` is missing");
    }
    if header(head, "sec-websocket-version") != Some("13") {
        return bad("`Sec-WebSocket-Version: 13` is missing");
    }
    let Some(key) = header(head, "sec-websocket-key") else {
        return bad("`Sec-WebSocket-Key` is missing");
    };
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.trim().as_bytes());
    HeaderValue::from_str(&accept).map_err(|_| (StatusCode::BAD_REQUEST, "not a WebSocket upgrade".to_string()))
}

/// A header's value, if it is text.
fn header<'a>(head: &'a Request<()>, name: &str) -> Option<&'a str> {
    head.headers().get(name).and_then(|value| value.to_str().ok())
}

fn refused((status, message): Refusal) -> Refused {
    (status, message.to_string())
}

fn empty(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(Empty::new().boxed_unsync());
    *response.status_mut() = status;
    response
}

/// A refusal's answer: the sentence as text (`WWW-Authenticate: Bearer` with a `401`).
fn plain(status: StatusCode, message: &str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(format!("{message}\n"))).boxed_unsync());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    if status == StatusCode::UNAUTHORIZED {
        headers.insert("www-authenticate", HeaderValue::from_static("Bearer"));
    }
    if status == StatusCode::METHOD_NOT_ALLOWED {
        headers.insert(ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
    }
    response
}
