//! The listener that servers and bridges share (feature `websocket`): one ACP connection per
//! WebSocket connection. A request that is not a WebSocket upgrade goes to the Streamable HTTP
//! endpoint on the same port and path ([`http`]), under the same checks and slots. With TLS it
//! offers HTTP/2 and HTTP/1.1 by ALPN. A server
//! runs an operator on it (`server/websocket/listen.rs`, [`Listener::serve`]), a bridge one
//! bridge per connection (`bridge/listen.rs`); both through [`Listener::run`].
//!
//! Safe by default: it binds where it is told (the examples' `--listen` takes `HOST:PORT`) but
//! refuses a non-loopback address unless tokens are configured; a request carrying an `Origin`
//! (a browser) is refused unless that origin is allowed; connections, handshake time, message
//! size and silence are bounded, and so are the connections that have not authenticated yet,
//! from one address and in all, while an upgrade that shows a valid token gets in even when
//! they hold every slot (see [`admission`]); a wrong token on the upgrade is
//! answered `401`. On shutdown
//! (SIGTERM or Ctrl-C with [`Listener::serve_until_signal`]) it stops accepting, ends every
//! connection's input so running turns are cancelled and answered, and waits for them a
//! bounded time.

mod admission;
pub(crate) mod http;
mod upgraded;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode};

use crate::auth::{Identity, TokenStore};
use crate::env::env_number;
use crate::error::{Error, Result};
use crate::websocket::{Closer, Limits, into_closable_lines};

use admission::{Gate, Ticket, UnauthenticatedLimits, UnprovenPlace};
use http::Endpoint;
use http::head::{Io, Rewind, is_websocket_upgrade, read_head};
use upgraded::{until_evicted, websocket_config};

/// The paths a client may connect to.
pub const PATHS: [&str; 2] = ["/acp", "/"];

/// How a WebSocket listener runs. [`ListenOptions::from_env`] reads the `AGENTACP_*`
/// variables.
#[derive(Debug, Clone)]
pub struct ListenOptions {
    /// Where to listen.
    pub addr: SocketAddr,
    /// The tokens clients authenticate with (`AGENTACP_TOKEN`, `AGENTACP_TOKENS_FILE`). Without
    /// them only a loopback address may be bound, and clients need not authenticate.
    pub tokens: Option<Arc<TokenStore>>,
    /// Whether a client must show its token on the upgrade (`401` without one) rather than
    /// with `authenticate` (default: no; a bridge, which has no `authenticate`, sets it).
    pub token_on_upgrade: bool,
    /// The browser origins allowed to connect (`AGENTACP_ALLOWED_ORIGINS`, comma-separated,
    /// e.g. `https://editor.example.com`). A request with any other `Origin` is refused `403`;
    /// requests without one (editors, SDK clients) are not browsers and are let through.
    pub allowed_origins: Vec<String>,
    /// The most connections served at once (`AGENTACP_MAX_CONNECTIONS`, default 256); the next
    /// is answered `503`, unless it shows a valid token on the upgrade and an unauthenticated
    /// connection can be evicted to make room for it.
    pub max_connections: usize,
    /// The most connections from one address (IPv6: one `/64`) that have not authenticated
    /// yet, upgrading or before `authenticate` (`AGENTACP_MAX_UNAUTHENTICATED_PER_ADDRESS`,
    /// default 16); the next from there is answered `429` unless it shows a valid token on
    /// the upgrade. Only with tokens: without them, nobody authenticates. `0` turns it off:
    /// behind a reverse proxy every client comes from the proxy's address.
    pub max_unauthenticated_per_address: usize,
    /// The most connections that have not authenticated yet, from all addresses together
    /// (`AGENTACP_MAX_UNAUTHENTICATED`; default `None`: half of
    /// [`max_connections`](Self::max_connections)); the next is answered `503` unless it
    /// shows a valid token on the upgrade. Only with tokens. See
    /// [`unauthenticated_limit`](Self::unauthenticated_limit).
    pub max_unauthenticated: Option<usize>,
    /// How long a client may take to complete the upgrade (default 10 s).
    pub handshake_timeout: Duration,
    /// How long a connection may stay unauthenticated (default 30 s).
    pub auth_timeout: Duration,
    /// The bounds of each connection (`AGENTACP_IDLE_TIMEOUT_MS` sets
    /// [`Limits::idle`]).
    pub limits: Limits,
    /// How long running turns get on shutdown before connections are dropped (default 10 s).
    pub drain: Duration,
    /// Serve `wss://` with this certificate chain and key (PEM files; `AGENTACP_TLS_CERT`,
    /// `AGENTACP_TLS_KEY`).
    #[cfg(feature = "tls")]
    pub tls: Option<crate::websocket::TlsFiles>,
}

impl ListenOptions {
    /// Listening on `addr`, with the defaults and no tokens.
    pub fn new(addr: SocketAddr) -> Self {
        ListenOptions {
            addr,
            tokens: None,
            token_on_upgrade: false,
            allowed_origins: Vec::new(),
            max_connections: 256,
            max_unauthenticated_per_address: 16,
            max_unauthenticated: None,
            handshake_timeout: Duration::from_secs(10),
            auth_timeout: Duration::from_secs(30),
            limits: Limits::default(),
            drain: Duration::from_secs(10),
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    /// [`new`](Self::new) with what the `AGENTACP_*` variables set. An error names the
    /// variable (or token file line) that cannot be used.
    pub fn from_env(addr: SocketAddr) -> std::result::Result<Self, String> {
        let mut options = ListenOptions::new(addr);
        options.tokens = TokenStore::from_env()?.map(Arc::new);
        if let Ok(origins) = std::env::var("AGENTACP_ALLOWED_ORIGINS") {
            options.allowed_origins = origins
                .split(',')
                .map(str::trim)
                .filter(|origin| !origin.is_empty())
                .map(str::to_string)
                .collect();
        }
        if let Some(max) = env_number("AGENTACP_MAX_CONNECTIONS") {
            options.max_connections = usize::try_from(max).unwrap_or(usize::MAX).max(1);
        }
        if let Some(max) = env_number("AGENTACP_MAX_UNAUTHENTICATED_PER_ADDRESS") {
            options.max_unauthenticated_per_address = usize::try_from(max).unwrap_or(usize::MAX);
        }
        if let Some(max) = env_number("AGENTACP_MAX_UNAUTHENTICATED") {
            options.max_unauthenticated = Some(usize::try_from(max).unwrap_or(usize::MAX));
        }
        if let Some(ms) = env_number("AGENTACP_IDLE_TIMEOUT_MS") {
            options.limits.idle = (ms > 0).then(|| Duration::from_millis(ms));
        }
        if let Some(bytes) = env_number("AGENTACP_MAX_FRAME_BYTES") {
            options.limits.max_message_bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        }
        #[cfg(feature = "tls")]
        {
            options.tls = crate::websocket::TlsFiles::from_env()?;
        }
        Ok(options)
    }

    /// How many connections may be unauthenticated at once, from all addresses together:
    /// [`max_unauthenticated`](Self::max_unauthenticated), or half of
    /// [`max_connections`](Self::max_connections); at least 1, at most every slot.
    pub fn unauthenticated_limit(&self) -> usize {
        self.max_unauthenticated
            .unwrap_or(self.max_connections / 2)
            .clamp(1, self.max_connections.max(1))
    }

    /// Accepts `tokens`.
    pub fn tokens(mut self, tokens: TokenStore) -> Self {
        self.tokens = Some(Arc::new(tokens));
        self
    }
}

/// A bound listener. [`Listener::serve`] runs a server operator on it.
pub struct Listener {
    tcp: TcpListener,
    options: ListenOptions,
    #[cfg(feature = "tls")]
    tls: Option<tokio_rustls::TlsAcceptor>,
}

impl Listener {
    /// Binds `options.addr`. Refused: a non-loopback address without tokens (anyone who can
    /// reach it would drive the operator).
    pub async fn bind(options: ListenOptions) -> Result<Listener> {
        if !options.addr.ip().is_loopback() && options.tokens.is_none() {
            return Err(Error::Io(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "refusing to listen on {} without authentication: set AGENTACP_TOKEN (or AGENTACP_TOKENS_FILE), or listen on 127.0.0.1",
                    options.addr
                ),
            )));
        }
        #[cfg(feature = "tls")]
        let tls = match &options.tls {
            Some(files) => Some(with_alpn(
                files
                    .acceptor()
                    .map_err(|message| Error::Io(std::io::Error::other(message)))?,
            )),
            None => None,
        };
        let tcp = TcpListener::bind(options.addr).await.map_err(|error| {
            Error::Io(std::io::Error::new(
                error.kind(),
                format!("cannot listen on {}: {error}", options.addr),
            ))
        })?;
        if options.tokens.is_none() {
            tracing::warn!(addr = %options.addr, "listening without authentication: any local process can connect (set AGENTACP_TOKEN)");
        }
        Ok(Listener {
            tcp,
            options,
            #[cfg(feature = "tls")]
            tls,
        })
    }

    /// The address it listens on (with the port the system chose for port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.tcp.local_addr()
    }

    /// The tokens clients authenticate with, if any.
    pub(crate) fn tokens(&self) -> Option<Arc<TokenStore>> {
        self.options.tokens.clone()
    }

    /// How long a connection that did not prove who it is on the upgrade has to authenticate.
    pub(crate) fn auth_timeout(&self) -> Duration {
        self.options.auth_timeout
    }

    /// Accepts connections until `shutdown`, handing each upgraded one to `handle`; then stops
    /// accepting, ends every connection's input and waits up to [`ListenOptions::drain`].
    pub(crate) async fn run<F, Fut>(self, shutdown: impl Future<Output = ()>, handle: F)
    where
        F: Fn(Upgraded) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let options = Arc::new(self.options);
        let gate = gate_of(&options);
        let (stop, stopped) = watch::channel(false);
        let http = http_endpoint(&options, &gate, &stopped, handle.clone());
        let mut connections = JoinSet::new();
        let refused_reads = Arc::new(tokio::sync::Semaphore::new(REFUSED_READS));
        tokio::pin!(shutdown);
        loop {
            let (stream, peer) = tokio::select! {
                () = &mut shutdown => break,
                Some(_) = connections.join_next() => continue,
                accepted = self.tcp.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Out of file descriptors, say: give the running connections a moment.
                        tracing::warn!(%error, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            // Small frames (an SSE event, a WebSocket message) go out at once instead of
            // waiting for the peer's delayed ACK (Nagle); failing that is only slower.
            let _ = stream.set_nodelay(true);
            let ticket = match gate.admit(peer.ip()) {
                Ok(ticket) => ticket,
                Err((status, body)) => {
                    tracing::warn!(%peer, max = options.max_connections, "refusing a connection: too many open");
                    let reading = refused_reads.clone().try_acquire_owned().ok();
                    connections.spawn(refuse_unread(stream, status, body, reading));
                    continue;
                }
            };
            let connection = Connecting {
                options: options.clone(),
                gate: gate.clone(),
                stopped: stopped.clone(),
                http: http.clone(),
                #[cfg(feature = "tls")]
                tls: self.tls.clone(),
            };
            connections.spawn(connection.serve(stream, peer, ticket, handle.clone()));
        }
        drop(self.tcp);
        let _ = stop.send(true);
        let drained = tokio::time::timeout(options.drain, async {
            while connections.join_next().await.is_some() {}
            http.drained().await;
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                left = connections.len(),
                "connections still open after the drain time were dropped"
            );
            connections.shutdown().await;
        }
    }
}

/// What one accepted connection needs of its listener.
struct Connecting {
    options: Arc<ListenOptions>,
    gate: Arc<Gate>,
    stopped: watch::Receiver<bool>,
    /// Where requests other than a WebSocket upgrade go.
    http: Arc<Endpoint>,
    #[cfg(feature = "tls")]
    tls: Option<tokio_rustls::TlsAcceptor>,
}

/// An accepted TCP connection: upgraded to WebSocket, or speaking plain HTTP.
enum Accepted {
    WebSocket(Upgraded),
    Http(Box<dyn Io>),
}

impl Connecting {
    /// Upgrades the connection (within the handshake time) and hands it to `handle`. Evicted
    /// meanwhile, an upgrading connection is dropped and an open one closed with `1013`.
    async fn serve<F, Fut>(self, stream: TcpStream, peer: SocketAddr, mut ticket: Ticket, handle: F)
    where
        F: Fn(Upgraded) -> Fut,
        Fut: Future<Output = ()>,
    {
        // Its slot, held (unless evicted) until the connection ends.
        let _slot = ticket.slot.clone();
        let evicted = ticket.evicted();
        tokio::pin!(evicted);
        let upgrading = tokio::time::timeout(self.options.handshake_timeout, self.accept(stream, peer, &mut ticket));
        let mut connection = tokio::select! {
            upgraded = upgrading => match upgraded {
                Ok(Ok(Accepted::WebSocket(connection))) => connection,
                Ok(Ok(Accepted::Http(io))) => return self.http.clone().serve_tcp(io, peer, ticket, evicted).await,
                Ok(Err(reason)) => return tracing::debug!(%peer, %reason, "a WebSocket upgrade was refused or failed"),
                Err(_) => return tracing::debug!(%peer, "a WebSocket upgrade took too long; dropped"),
            },
            () = &mut evicted => return tracing::info!(%peer, "an upgrade was dropped to make room"),
        };
        // Still to prove who it is: its place among the unauthenticated connections goes with
        // it until it does.
        connection.unproven = ticket.take_place();
        let closer = connection.closer.take();
        until_evicted(handle(connection), evicted, closer, peer).await;
    }

    /// TLS (when configured), then the request head: a WebSocket upgrade is upgraded with
    /// its checks, anything else is Streamable HTTP.
    async fn accept(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        ticket: &mut Ticket,
    ) -> std::result::Result<Accepted, String> {
        #[cfg(feature = "tls")]
        if let Some(acceptor) = &self.tls {
            let stream = acceptor.accept(stream).await.map_err(|error| format!("TLS: {error}"))?;
            // HTTP/2 chosen by ALPN: Streamable HTTP (no WebSocket upgrade over HTTP/2).
            if stream.get_ref().1.alpn_protocol() == Some(b"h2") {
                return Ok(Accepted::Http(Box::new(stream)));
            }
            return self.dispatch(stream, None, peer, ticket).await;
        }
        // A second handle on the socket, to answer a plain HTTP request that the WebSocket
        // handshake gives up on without a word.
        let std = stream.into_std().map_err(|error| error.to_string())?;
        let raw = std.try_clone().map_err(|error| error.to_string())?;
        let stream = TcpStream::from_std(std).map_err(|error| error.to_string())?;
        self.dispatch(stream, Some(raw), peer, ticket).await
    }

    /// Reads the request head: anything but a WebSocket upgrade goes to the HTTP endpoint,
    /// the head read again. The WebSocket upgrade: path, `Origin` and `Authorization`
    /// checked, a connection over the limit let in only with a valid token; refusals answered
    /// with their HTTP status.
    async fn dispatch<S>(
        &self,
        mut stream: S,
        raw: Option<std::net::TcpStream>,
        peer: SocketAddr,
        ticket: &mut Ticket,
    ) -> std::result::Result<Accepted, String>
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let head = read_head(&mut stream).await.map_err(|error| error.to_string())?;
        if !is_websocket_upgrade(&head) {
            return Ok(Accepted::Http(Box::new(Rewind::new(head, stream))));
        }
        let stream = Rewind::new(head, stream);
        let options = &*self.options;
        let mut proved = None;
        #[allow(clippy::result_large_err, reason = "the signature of tungstenite's upgrade callback")]
        let check = |request: &Request, response: Response| -> std::result::Result<Response, ErrorResponse> {
            let outcome = admit(request, options).and_then(|shown| {
                let entered = match &shown {
                    Some(_) => self.gate.prove(ticket),
                    None => ticket.over_limit().map_or(Ok(()), Err),
                };
                entered.map_err(|(status, body)| (status, body.to_string()))?;
                let id = upgraded::new_connection_id().map_err(|why| (StatusCode::INTERNAL_SERVER_ERROR, why))?;
                Ok((shown, id))
            });
            match outcome {
                Ok((shown, id)) => {
                    proved = shown;
                    let mut response = response;
                    // The RFD names the connection on the `101` too (nothing here needs it).
                    if let Ok(value) = HeaderValue::from_str(&id) {
                        response.headers_mut().insert(upgraded::CONNECTION_ID, value);
                    }
                    Ok(response)
                }
                Err((status, message)) => {
                    tracing::warn!(%peer, status = status.as_u16(), %message, "refused a WebSocket upgrade");
                    Err(error_response(status, message))
                }
            }
        };
        let config = websocket_config(&options.limits);
        match tokio_tungstenite::accept_hdr_async_with_config(stream, check, Some(config)).await {
            Ok(ws) => {
                let (read, write, _pump, closer) = into_closable_lines(ws, options.limits, self.stopped.clone());
                Ok(Accepted::WebSocket(Upgraded {
                    read,
                    write,
                    peer,
                    proved,
                    unproven: None,
                    closer: Some(closer),
                }))
            }
            Err(tokio_tungstenite::tungstenite::Error::Protocol(error)) => {
                if let Some(raw) = raw {
                    let body = "this is an ACP agent: connect with a WebSocket client to /acp\n";
                    let _ = refuse(
                        TcpStream::from_std(raw).map_err(|e| e.to_string())?,
                        StatusCode::UPGRADE_REQUIRED,
                        body,
                    )
                    .await;
                }
                Err(format!("not a WebSocket upgrade: {error}"))
            }
            Err(error) => Err(error.to_string()),
        }
    }
}

/// `acceptor`, offering HTTP/2 and HTTP/1.1 by ALPN (RFC 7301), HTTP/2 first: a client that
/// speaks both (an HTTP client) gets HTTP/2; a WebSocket client offers HTTP/1.1, or nothing
/// (then no protocol is agreed and the head of its first request decides, as without TLS).
#[cfg(feature = "tls")]
fn with_alpn(acceptor: tokio_rustls::TlsAcceptor) -> tokio_rustls::TlsAcceptor {
    let mut config = rustls::ServerConfig::clone(acceptor.config());
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// The Streamable HTTP endpoint of a listener with `options` and `gate`: the same checks,
/// and each ACP connection handed to `handle` as an upgraded one (that no listener closes
/// with a code of its own).
fn http_endpoint<F, Fut>(
    options: &Arc<ListenOptions>,
    gate: &Arc<Gate>,
    stopped: &watch::Receiver<bool>,
    handle: F,
) -> Arc<Endpoint>
where
    F: Fn(Upgraded) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let settings = http::Settings {
        handshake_timeout: options.handshake_timeout,
        drain: options.drain,
        max_connections: options.max_connections,
        limits: options.limits,
    };
    let admitting = options.clone();
    let admit: http::Admit = Arc::new(move |request: &Request| admit(request, &admitting));
    let handle: http::Handle = Arc::new(move |lines: http::Lines| {
        Box::pin(handle(Upgraded {
            read: lines.read,
            write: lines.write,
            peer: lines.peer,
            proved: lines.proved,
            unproven: lines.unproven,
            closer: None,
        }))
    });
    Endpoint::new(settings, gate.clone(), stopped.clone(), admit, handle)
}

/// An upgraded connection: its JSON-RPC lines, who connected, and the identity its upgrade
/// proved (`Authorization: Bearer`), with that token, if any.
pub(crate) struct Upgraded {
    pub(crate) read: tokio::io::ReadHalf<tokio::io::DuplexStream>,
    pub(crate) write: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    pub(crate) peer: SocketAddr,
    pub(crate) proved: Option<(Identity, String)>,
    /// Its place among the unauthenticated connections, while it has one.
    pub(crate) unproven: Option<UnprovenPlace>,
    /// What closes it with a code and reason of the listener's (taken by the listener).
    closer: Option<Closer>,
}

/// The identity an upgrade request proves (with its token), or the status it is refused with.
fn admit(
    request: &Request,
    options: &ListenOptions,
) -> std::result::Result<Option<(Identity, String)>, (StatusCode, String)> {
    if !PATHS.contains(&request.uri().path()) {
        return Err((
            StatusCode::NOT_FOUND,
            format!("no ACP endpoint at {}: use /acp", request.uri().path()),
        ));
    }
    if let Some(origin) = request.headers().get("origin") {
        let origin = origin.to_str().unwrap_or_default();
        if !options.allowed_origins.iter().any(|allowed| allowed == origin) {
            return Err((
                StatusCode::FORBIDDEN,
                format!("origin `{origin}` is not allowed (AGENTACP_ALLOWED_ORIGINS)"),
            ));
        }
    }
    let Some(tokens) = &options.tokens else {
        return Ok(None);
    };
    let Some(authorization) = request.headers().get("authorization") else {
        if options.token_on_upgrade {
            return Err((
                StatusCode::UNAUTHORIZED,
                "this endpoint needs `Authorization: Bearer <token>` on the upgrade".to_string(),
            ));
        }
        return Ok(None);
    };
    let token = authorization
        .to_str()
        .ok()
        .and_then(|value| value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer ")))
        .map(str::trim)
        .ok_or((
            StatusCode::UNAUTHORIZED,
            "the Authorization header is not `Bearer <token>`".to_string(),
        ))?;
    match tokens.check(token) {
        Ok(Some(identity)) => Ok(Some((identity, token.to_string()))),
        Ok(None) => Err((StatusCode::UNAUTHORIZED, "the token is not accepted".to_string())),
        // Never admitted unchecked: the client may try again (another replica, later).
        Err(unchecked) => Err((StatusCode::SERVICE_UNAVAILABLE, unchecked.to_string())),
    }
}

fn error_response(status: StatusCode, message: String) -> ErrorResponse {
    let mut response = ErrorResponse::new(Some(format!("{message}\n")));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert("content-type", HeaderValue::from_static("text/plain; charset=utf-8"));
    headers.insert("connection", HeaderValue::from_static("close"));
    if status == StatusCode::UNAUTHORIZED {
        headers.insert("www-authenticate", HeaderValue::from_static("Bearer"));
    }
    response
}

/// How many refused connections may have their request's head read at once (the next ones
/// are answered without waiting for it), and for how long.
const REFUSED_READS: usize = 64;
const REFUSED_READ_TIME: Duration = Duration::from_secs(2);

/// [`refuse`]s a connection whose request has not been read: with a `reading` permit, its
/// head is read first (for a short time), for an HTTP client takes an answer that comes
/// before its request is sent for a broken connection, not for the refusal.
async fn refuse_unread(
    mut stream: TcpStream,
    status: StatusCode,
    body: &str,
    reading: Option<tokio::sync::OwnedSemaphorePermit>,
) {
    if let Some(_reading) = reading {
        let _ = tokio::time::timeout(REFUSED_READ_TIME, read_head(&mut stream)).await;
    }
    refuse(stream, status, body).await;
}

/// Answers a plain HTTP response and closes (a refusal outside the WebSocket handshake): the
/// answer, the end of what is sent, then what the client still sends is read and dropped
/// until it closes (a few seconds at most), so that unread bytes do not reset the connection
/// before the client has read the answer.
async fn refuse(mut stream: TcpStream, status: StatusCode, body: &str) {
    let body = format!("{}\n", body.trim_end());
    // A 426 must name the protocol to upgrade to (RFC 9110, 15.5.22).
    let upgrade = if status == StatusCode::UPGRADE_REQUIRED {
        "upgrade: websocket\r\n"
    } else {
        ""
    };
    let head = format!(
        "HTTP/1.1 {} {}\r\n{upgrade}content-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        status.as_u16(),
        status.canonical_reason().unwrap_or_default(),
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        let _ = stream.write_all(head.as_bytes()).await;
        let _ = stream.shutdown().await;
        let mut rest = [0u8; 4096];
        while matches!(stream.read(&mut rest).await, Ok(read) if read > 0) {}
    })
    .await;
}

/// The admission gate `options` describe.
fn gate_of(options: &ListenOptions) -> Arc<Gate> {
    let limits = options.tokens.is_some().then(|| UnauthenticatedLimits {
        per_address: options.max_unauthenticated_per_address,
        total: options.unauthenticated_limit(),
    });
    Gate::new(options.max_connections, limits)
}
