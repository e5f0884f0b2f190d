//! MCP-over-ACP for an agent that does not take it (tier `sandboxed`, feature `mcp`;
//! `docs/mcp.md`, "Through a bridge"). The bridge advertises `mcpCapabilities.acp` to the
//! editor all the same and serves each of the editor's `"type": "acp"` servers to the agent
//! as a server it does take:
//!
//! - the editor's session request (`session/new`, `load`, `resume`) reaches the agent with each
//!   `acp` entry replaced by an `http` one: a URL on a loopback endpoint of the bridge's (one
//!   path per server) and an `Authorization: Bearer` header with a token made for it; an agent
//!   without `mcpCapabilities.http` gets a stdio server instead: the bridge's shim
//!   ([`BridgeOptions::mcp_shim`](super::super::BridgeOptions::mcp_shim), `crate::mcp::shim`),
//!   which carries its stdio to a Unix socket of the bridge's (in a folder only this user may
//!   enter; on Windows a named pipe only this user may open), where the same proxy serves it
//!   after the shim sent its server's token;
//! - the endpoint is rmcp's streamable-HTTP service; behind it, a proxy ([`Proxy`]) reaches the
//!   editor's server over an MCP connection of the bridge's own (`mcp/connect`, `mcp/message`,
//!   sent with the bridge's request ids, [`OWN_IDS`](super::OWN_IDS) up), opened when the agent
//!   first connects, and the editor's `mcp/message`s on it are answered by the bridge;
//! - governance and audit are those of MCP-over-ACP passing the bridge (`mcp.rs`): each
//!   `tools/call` is decided by `mcp/<server>/<tool>` (`deny` answered, `ask` asked of the
//!   editor), audited with its approval and result, and `tools/list` lists only what
//!   governance does not deny. Resources and prompts pass as they are;
//! - what the editor's server asks of its client (sampling, roots, elicitation) and tells it
//!   (progress, log messages, changed lists, an updated resource) is carried to the agent's
//!   MCP session, as it is (`carry.rs`).

use std::collections::HashMap;
use std::convert::Infallible;
#[cfg(unix)]
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, ErrorCode, ErrorData,
    GetPromptRequestParams, GetPromptResponse, Implementation, InitializeRequestParams, InitializeResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig, ServerResult,
};
use rmcp::service::{Peer, RequestContext, RoleClient, RoleServer, ServiceError};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;

use super::carry::{AgentSide, AgentSlot, within};
use super::mcp::{self as governed, Verdict};
use super::state::{Endpoint, Loopback, Relay, ShimSocket, SocketFolder, Translation, Upstream, random_name};
use crate::future::BoxFuture;
use crate::jsonrpc::{self, Id, RpcError, codes};
use crate::mcp::in_order::InOrder;
use crate::mcp::shim::{SOCKET_ENV, TOKEN_ENV, channel};
use crate::mcp::tunnel::{AcpPeer, PeerRequest};
use crate::mcp::{AcpLink, CALL_TIMEOUT, CONNECT_TIMEOUT, disconnect, open_over_acp};
use crate::methods::mcp_over_acp::{MESSAGE, server_id_of};
use crate::oversight::mcp_calls::{self, McpCall};
use crate::sync::lock;
use crate::wire::default as wire;

/// The editor's session request, for an agent without MCP-over-ACP: the line to send the
/// agent, its `"type": "acp"` servers replaced by servers the agent takes (`None`: nothing to
/// replace; an error: a server could not be served, answered to the editor).
pub(super) async fn session_request(
    relay: &Arc<Relay>,
    id: &Id,
    method: &str,
    params: Option<&RawValue>,
) -> Option<Result<Vec<u8>, RpcError>> {
    use wire::method_names as m;
    let translation = relay.translation.get()?;
    if !matches!(method, m::SESSION_NEW | m::SESSION_LOAD | "session/resume") {
        return None;
    }
    let mut params: Value = serde_json::from_str(params?.get()).ok()?;
    let session = params.get("sessionId").and_then(Value::as_str).map(str::to_string);
    let servers = params.get_mut("mcpServers")?.as_array_mut()?;
    let mut replaced = false;
    for entry in servers.iter_mut() {
        if entry.get("type").and_then(Value::as_str) != Some("acp") {
            continue;
        }
        match served_as(relay, translation, entry, id, session.as_deref()).await {
            Ok(served) => *entry = served,
            Err(why) => {
                tracing::warn!(%why, "an MCP-over-ACP server could not be served to the agent");
                // Nor are the request's others, served already.
                request_failed(relay, id);
                return Some(Err(RpcError::new(
                    codes::INTERNAL_ERROR,
                    format!("the bridge could not serve an MCP-over-ACP server to its agent: {why}"),
                )));
            }
        }
        replaced = true;
    }
    replaced.then(|| Ok(jsonrpc::encode_request(id, method, &params)))
}

/// The agent answered the editor's `session/new` (`request`) with `session`: the servers
/// served for that request are that session's.
pub(super) fn session_created(relay: &Relay, request: &Id, session: &str) {
    let Some(translation) = relay.translation.get() else {
        return;
    };
    for endpoint in lock(&translation.endpoints).values() {
        if answered(endpoint, request) {
            lock(&endpoint.session).get_or_insert_with(|| session.to_string());
        }
    }
}

/// The agent accepted the editor's `session/load` or `resume` `request`: its servers are
/// that session's from now on, whatever the editor's next request with the same id.
pub(super) fn request_answered(relay: &Relay, request: &Id) {
    if let Some(translation) = relay.translation.get() {
        for endpoint in lock(&translation.endpoints).values() {
            answered(endpoint, request);
        }
    }
}

/// Whether `endpoint` was made for `request`, still unanswered; no more after this.
fn answered(endpoint: &Endpoint, request: &Id) -> bool {
    let mut made_for = lock(&endpoint.made_for);
    let ours = made_for.as_ref() == Some(request);
    if ours {
        *made_for = None;
    }
    ours
}

/// The editor closed `session` (the agent said so): the servers served for it are served no
/// more. Their endpoints and tokens are gone (a request on them is refused), and the bridge's
/// MCP connections to the editor's servers for them are disconnected (`mcp/disconnect`).
pub(super) fn session_closed(relay: &Arc<Relay>, session: &str) {
    forget_endpoints(relay, |endpoint| lock(&endpoint.session).as_deref() == Some(session));
}

/// The agent refused the editor's session request `request` (`session/new`, `load`,
/// `resume`): the servers served for it are served no more, as after a close.
pub(super) fn request_failed(relay: &Arc<Relay>, request: &Id) {
    forget_endpoints(relay, |endpoint| lock(&endpoint.made_for).as_ref() == Some(request));
}

/// Stops serving the endpoints `which` picks: their tokens, their HTTP services, the bridge's
/// MCP connections behind them.
fn forget_endpoints(relay: &Arc<Relay>, which: impl Fn(&Endpoint) -> bool) {
    let Some(translation) = relay.translation.get() else {
        return;
    };
    let closed: Vec<(String, Arc<Endpoint>)> = {
        let mut endpoints = lock(&translation.endpoints);
        let keys: Vec<String> = (endpoints.iter())
            .filter(|(_, endpoint)| which(endpoint))
            .map(|(key, _)| key.clone())
            .collect();
        keys.into_iter()
            .filter_map(|key| endpoints.remove(&key).map(|endpoint| (key, endpoint)))
            .collect()
    };
    let link = AcpLink {
        peer: Arc::new(EditorPeer(Arc::downgrade(relay))),
        tunnels: Arc::clone(&translation.tunnels),
    };
    for (key, endpoint) in closed {
        if let Some(loopback) = translation.loopback.get() {
            (loopback.forget_service)(&key);
        }
        if let Some(upstream) = endpoint.upstream.get() {
            disconnect(&upstream.tunnel, &link);
        }
        tracing::debug!(server = endpoint.server_id, "an MCP-over-ACP server is served no more");
    }
}

/// The server the agent gets for the editor's `acp` server `entry`: an `http` server on the
/// loopback listener, or (an agent without HTTP) the stdio shim, which reaches the bridge
/// through its Unix socket. Either way with a token made for this server alone.
async fn served_as(
    relay: &Arc<Relay>,
    translation: &Translation,
    entry: &Value,
    request: &Id,
    session: Option<&str>,
) -> Result<Value, String> {
    let server_id = server_id_of(entry).ok_or("an `acp` server without a `serverId`")?;
    let name = entry.get("name").and_then(Value::as_str).unwrap_or(server_id);
    let secret = acp_tokens::generate_token().map_err(|error| format!("no token for the endpoint: {error}"))?;
    let key = {
        let mut endpoints = lock(&translation.endpoints);
        let key = (translation.last_key.fetch_add(1, Ordering::Relaxed) + 1).to_string();
        endpoints.insert(
            key.clone(),
            Arc::new(Endpoint {
                server_id: server_id.to_string(),
                name: name.to_string(),
                made_for: Mutex::new(Some(request.clone())),
                session: Mutex::new(session.map(str::to_string)),
                secret: secret.clone(),
                upstream: tokio::sync::OnceCell::new(),
                agent: AgentSlot::default(),
            }),
        );
        key
    };
    if translation.agent_http {
        let address = loopback(relay, translation).await?.address;
        return Ok(json!({
            "type": "http",
            "name": name,
            "url": format!("http://{address}/mcp/{key}"),
            "headers": [{"name": "Authorization", "value": format!("Bearer {secret}")}],
        }));
    }
    let socket = shim_socket(relay, translation).await?;
    let shim = relay
        .options
        .shim_program()
        .map_err(|error| format!("no program to run as the stdio shim: {error}"))?;
    Ok(json!({
        "name": name,
        "command": shim,
        "args": [],
        "env": [
            {"name": SOCKET_ENV, "value": socket.path},
            {"name": TOKEN_ENV, "value": secret},
        ],
    }))
}

/// The Unix socket of the stdio shims, listening from first use until [`Translation::stop`]
/// (removed when the translation ends). It is made in the folder the agent's sandbox lets it
/// connect to sockets in (made before the agent started, see `bridge::agent_sandbox`, and
/// shared by a listener's connections), else in a folder of its own, removed with it.
async fn shim_socket<'t>(relay: &Arc<Relay>, translation: &'t Translation) -> Result<&'t ShimSocket, String> {
    translation
        .socket
        .get_or_try_init(|| async {
            let (path, own) = shim_address(relay)?;
            let listener = channel::Listener::bind(&path)
                .map_err(|error| format!("no {SHIM_CHANNEL} at {}: {error}", path.display()))?;
            tokio::spawn(accept_shims(listener, Arc::downgrade(relay), translation.stop.clone()));
            tracing::debug!(socket = %path.display(), "serving the editor's MCP-over-ACP servers to the agent's shims");
            Ok(ShimSocket { path, _folder: own })
        })
        .await
}

/// What the shims reach the bridge through, in words.
#[cfg(unix)]
const SHIM_CHANNEL: &str = "Unix socket";
/// What the shims reach the bridge through, in words.
#[cfg(windows)]
const SHIM_CHANNEL: &str = "named pipe";

/// Where the shims' socket goes: in the folder the agent's sandbox grants, else in a new
/// folder of its own (returned too).
#[cfg(unix)]
fn shim_address(relay: &Relay) -> Result<(PathBuf, Option<SocketFolder>), String> {
    let granted = relay
        .sandbox
        .as_ref()
        .and_then(|sandbox| sandbox.unix_socket_folders().next().map(Path::to_path_buf));
    let (folder, own) = match granted {
        Some(folder) => (folder, None),
        None => {
            let own = SocketFolder::create()?;
            (own.path().to_path_buf(), Some(own))
        }
    };
    // A name of its own: the folder may be shared by the connections of a listener.
    let name = random_name(12).map_err(|error| format!("no name for the socket: {error}"))?;
    Ok((folder.join(format!("mcp-{name}.sock")), own))
}

/// The shims' named pipe: a name no one can guess (no folder: a pipe has none; who may open
/// it is its security descriptor's business, see `crate::mcp::shim::channel`).
#[cfg(windows)]
fn shim_address(_relay: &Relay) -> Result<(PathBuf, Option<SocketFolder>), String> {
    let name = random_name(24).map_err(|error| format!("no name for the pipe: {error}"))?;
    Ok((PathBuf::from(format!(r"\\.\pipe\agentacp-mcp-{name}")), None))
}

/// The next connection `accept` gives, retried after a failure (out of descriptors, say: the
/// others get a moment to close); `None` once `stop` is cancelled. `what` names the listener.
async fn next_connection<S, A, F>(stop: &CancellationToken, what: &str, mut accept: A) -> Option<S>
where
    A: FnMut() -> F,
    F: Future<Output = std::io::Result<S>>,
{
    loop {
        tokio::select! {
            () = stop.cancelled() => return None,
            accepted = accept() => match accepted {
                Ok(stream) => return Some(stream),
                Err(error) => {
                    tracing::warn!(%error, "{what} could not accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
}

/// Accepts the shims' connections until `stop`.
async fn accept_shims(listener: channel::Listener, relay: Weak<Relay>, stop: CancellationToken) {
    let accept = || listener.accept();
    while let Some(stream) = next_connection(&stop, "the shims' socket", accept).await {
        let relay = relay.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = stop.cancelled() => {}
                () = serve_shim(stream, relay) => {}
            }
        });
    }
}

/// The longest first line a shim may send: its token.
const TOKEN_LINE_BYTES: u64 = 256;

/// One shim's connection: its first line is the token of the server it wants (within
/// [`CONNECT_TIMEOUT`]); then MCP, one message per line, served by that server's [`Proxy`]
/// until either side ends. A wrong token closes the connection.
async fn serve_shim<S>(stream: S, relay: Weak<Relay>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    let mut stream = tokio::io::BufReader::new(stream);
    let mut line = Vec::new();
    let mut first_line = (&mut stream).take(TOKEN_LINE_BYTES);
    let read = first_line.read_until(b'\n', &mut line);
    if !matches!(tokio::time::timeout(CONNECT_TIMEOUT, read).await, Ok(Ok(_))) {
        tracing::debug!("a shim sent no token");
        return;
    }
    let token = line.strip_suffix(b"\n").unwrap_or(&line);
    let key = relay.upgrade().and_then(|relay| {
        let translation = relay.translation.get()?;
        let endpoints = lock(&translation.endpoints);
        endpoints
            .iter()
            .find(|(_, endpoint)| bool::from(endpoint.secret.as_bytes().ct_eq(token)))
            .map(|(key, _)| key.clone())
    });
    let Some(key) = key else {
        tracing::warn!("a connection to the shims' socket without a server's token was refused");
        return;
    };
    // In order: a cancellation must not overtake the request it cancels.
    let (read, write) = tokio::io::split(stream);
    let transport = InOrder::new(rmcp::transport::async_rw::AsyncRwTransport::new_server(read, write));
    match tokio::time::timeout(
        CONNECT_TIMEOUT,
        rmcp::ServiceExt::serve(Proxy { relay, key }, transport),
    )
    .await
    {
        Ok(Ok(service)) => {
            let _ = service.waiting().await;
        }
        Ok(Err(error)) => tracing::debug!(%error, "a shim's MCP session did not start"),
        Err(_) => tracing::debug!("a shim did not initialize within {CONNECT_TIMEOUT:?}"),
    }
}

/// The loopback listener, started on first use; it stops with [`Translation::stop`].
async fn loopback<'t>(relay: &Arc<Relay>, translation: &'t Translation) -> Result<&'t Loopback, String> {
    translation
        .loopback
        .get_or_try_init(|| async {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
                .await
                .map_err(|error| format!("no loopback port to listen on: {error}"))?;
            let address = listener.local_addr().map_err(|error| error.to_string())?;
            let services = HttpServices::default();
            let router = Router {
                relay: Arc::downgrade(relay),
                services: Arc::clone(&services),
                stop: translation.stop.clone(),
                max_body: relay.options.max_frame_bytes,
            };
            tokio::spawn(accept(listener, router));
            tracing::debug!(%address, "serving the editor's MCP-over-ACP servers to the agent");
            let forget_service = Box::new(move |key: &str| {
                lock(&services).remove(key);
            });
            Ok(Loopback {
                address,
                forget_service,
            })
        })
        .await
}

/// Accepts connections to the loopback endpoint until `router.stop`.
async fn accept(listener: tokio::net::TcpListener, router: Router) {
    let accept = || async { listener.accept().await.map(|(stream, _)| stream) };
    while let Some(stream) = next_connection(&router.stop, "the loopback MCP endpoint", accept).await {
        let router = router.clone();
        tokio::spawn(async move {
            let stop = router.stop.clone();
            let service = hyper::service::service_fn(move |request| {
                let router = router.clone();
                async move { Ok::<_, Infallible>(router.route(request).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::select! {
                () = stop.cancelled() => {}
                ended = connection => if let Err(error) = ended {
                    tracing::debug!(%error, "a connection to the loopback MCP endpoint ended");
                },
            }
        });
    }
}

type Body = BoxBody<Bytes, Infallible>;

/// The loopback endpoint's streamable-HTTP services, by endpoint key (made on first use;
/// removed with their endpoint).
type HttpServices = Arc<Mutex<HashMap<String, StreamableHttpService<Proxy, LocalSessionManager>>>>;

/// Routes `/mcp/<key>` to its server's streamable-HTTP service, once the bearer token matched.
#[derive(Clone)]
struct Router {
    relay: Weak<Relay>,
    services: HttpServices,
    stop: CancellationToken,
    max_body: usize,
}

impl Router {
    async fn route(&self, request: Request<Incoming>) -> Response<Body> {
        let Some(relay) = self.relay.upgrade() else {
            return plain(StatusCode::SERVICE_UNAVAILABLE, "the bridge is closing");
        };
        let key = request
            .uri()
            .path()
            .strip_prefix("/mcp/")
            .unwrap_or_default()
            .to_string();
        let endpoint = relay
            .translation
            .get()
            .and_then(|translation| translation.endpoint(&key));
        drop(relay);
        let Some(endpoint) = endpoint else {
            return plain(StatusCode::NOT_FOUND, "no such MCP server");
        };
        if !bearer_matches(&request, &endpoint.secret) {
            tracing::warn!(
                path = request.uri().path(),
                "a request to the loopback MCP endpoint without its token was refused"
            );
            let mut response = plain(StatusCode::UNAUTHORIZED, "a bearer token is required");
            response.headers_mut().insert(
                hyper::header::WWW_AUTHENTICATE,
                hyper::header::HeaderValue::from_static("Bearer"),
            );
            return response;
        }
        let service = lock(&self.services)
            .entry(key.clone())
            .or_insert_with(|| {
                let relay = self.relay.clone();
                StreamableHttpService::new(
                    move || {
                        Ok(Proxy {
                            relay: relay.clone(),
                            key: key.clone(),
                        })
                    },
                    LocalSessionManager::default().into(),
                    StreamableHttpServerConfig::default()
                        .with_cancellation_token(self.stop.child_token())
                        .with_max_request_body_bytes(self.max_body),
                )
            })
            .clone();
        service.handle(request).await
    }
}

/// Whether `request` carries `Authorization: Bearer <secret>` (compared in constant time).
fn bearer_matches(request: &Request<Incoming>, secret: &str) -> bool {
    let expected = format!("Bearer {secret}");
    request
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .is_some_and(|given| bool::from(given.as_bytes().ct_eq(expected.as_bytes())))
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response
}

/// The editor's `$/cancel_request` (its `params`) of a request on one of the bridge's own MCP
/// connections: handed to it. `false`: not such a request.
pub(super) fn editor_cancel(relay: &Relay, params: Option<&RawValue>) -> bool {
    relay
        .translation
        .get()
        .is_some_and(|translation| translation.tunnels.cancel(params))
}

/// The editor's `mcp/message` on one of the bridge's own MCP connections: handed to it, a
/// request answered to the editor when its proxy has answered. `false`: not one.
pub(super) fn editor_message(relay: &Arc<Relay>, id: Option<&Id>, method: &str, params: Option<&RawValue>) -> bool {
    let Some(translation) = relay.translation.get() else {
        return false;
    };
    if method != MESSAGE {
        return false;
    }
    let Some(id) = id else {
        translation.tunnels.notification(params);
        return true;
    };
    let tunnels = Arc::clone(&translation.tunnels);
    let cancellable = tunnels.cancellable(id);
    let relay = Arc::clone(relay);
    let id = id.clone();
    let params = params.map(ToOwned::to_owned);
    tokio::spawn(async move {
        let line = match tunnels.request(params.as_deref(), Some(cancellable)).await {
            Ok(result) => jsonrpc::encode_result(&id, &result),
            Err(error) => jsonrpc::encode_error(&id, &error),
        };
        relay.to_editor_line(line).await;
    });
    true
}

/// The editor, as the bridge's MCP connections reach it: requests numbered with the
/// bridge's own ids.
struct EditorPeer(Weak<Relay>);

impl AcpPeer for EditorPeer {
    fn request(&self, request: PeerRequest) -> BoxFuture<'static, Result<Value, RpcError>> {
        let relay = self.0.upgrade();
        Box::pin(async move {
            let Some(relay) = relay else {
                return Err(RpcError::new(codes::INTERNAL_ERROR, "the bridge is closing"));
            };
            request.send(&relay.own, &relay.up).await
        })
    }

    fn notify(&self, method: &'static str, params: Value) -> BoxFuture<'static, ()> {
        let relay = self.0.upgrade();
        Box::pin(async move {
            if let Some(relay) = relay {
                relay
                    .to_editor_line(jsonrpc::encode_notification(method, &params))
                    .await;
            }
        })
    }
}

/// One of the editor's servers, as the agent reaches it through the endpoint `key`: its
/// requests passed to the editor's server over the bridge's MCP connection, tool calls
/// governed and audited.
#[derive(Clone)]
struct Proxy {
    relay: Weak<Relay>,
    key: String,
}

/// The editor's server behind a proxy, reached.
struct Reached {
    peer: Peer<RoleClient>,
    /// Its name in the session request.
    server: String,
    /// The session that listed it, once known.
    session: Option<String>,
}

impl Proxy {
    fn relay(&self) -> Result<Arc<Relay>, ErrorData> {
        self.relay
            .upgrade()
            .ok_or_else(|| ErrorData::internal_error("the bridge is closing", None))
    }

    /// The editor's server, over the bridge's MCP connection to it (opened on first use, with
    /// `client` as the MCP client the editor's server sees).
    async fn reach(&self, relay: &Arc<Relay>, client: Option<InitializeRequestParams>) -> Result<Reached, ErrorData> {
        let no_server = || ErrorData::internal_error("this MCP server is no longer served", None);
        let translation = relay.translation.get().ok_or_else(no_server)?;
        let endpoint = translation.endpoint(&self.key).ok_or_else(no_server)?;
        let upstream = endpoint
            .upstream
            .get_or_try_init(|| async {
                let link = AcpLink {
                    peer: Arc::new(EditorPeer(Arc::downgrade(relay))),
                    tunnels: Arc::clone(&translation.tunnels),
                };
                let info = client.unwrap_or_else(|| {
                    ClientConfig::new(
                        ClientCapabilities::default(),
                        Implementation::new("agentacp-bridge", env!("CARGO_PKG_VERSION")),
                    )
                });
                let client = AgentSide::new(info, endpoint.agent.clone());
                let (service, tunnel) = open_over_acp(&endpoint.server_id, &link, client, CALL_TIMEOUT).await?;
                Ok::<_, String>(Upstream { service, tunnel })
            })
            .await
            .map_err(|why| {
                ErrorData::internal_error(format!("the editor's MCP server could not be reached: {why}"), None)
            })?;
        // The endpoint's own server and session: a `serverId` the editor used in another
        // session too does not make this one's calls that session's.
        Ok(Reached {
            peer: upstream.service.peer().clone(),
            server: endpoint.name.clone(),
            session: lock(&endpoint.session).clone(),
        })
    }

    /// The editor's server, reached.
    async fn reached(&self) -> Result<(Arc<Relay>, Reached), ErrorData> {
        let relay = self.relay()?;
        let reached = self.reach(&relay, None).await?;
        Ok((relay, reached))
    }
}

/// `request` to the editor's server, bounded by [`CALL_TIMEOUT`](crate::mcp::CALL_TIMEOUT).
async fn bounded<T>(request: impl Future<Output = Result<T, ServiceError>>) -> Result<T, ErrorData> {
    within("the editor's MCP server", request).await
}

fn mcp_error(error: &RpcError) -> ErrorData {
    ErrorData::new(ErrorCode(error.code), error.message.clone(), error.data.clone())
}

impl rmcp::ServerHandler for Proxy {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        let relay = self.relay()?;
        if let Some(endpoint) = relay
            .translation
            .get()
            .and_then(|translation| translation.endpoint(&self.key))
        {
            *lock(&endpoint.agent) = Some(context.peer.clone());
        }
        let reached = self.reach(&relay, Some(request)).await?;
        // What the editor's server said of itself, as the agent's `initialize` answer.
        let info = (reached.peer.peer_info())
            .ok_or_else(|| ErrorData::internal_error("the editor's MCP server did not say what it is", None))?;
        let mut result = InitializeResult::new(info.capabilities.clone());
        result.protocol_version = info.protocol_version.clone();
        if let Some(server) = &info.server_info {
            result.server_info = server.clone();
        }
        result.instructions = info.instructions.clone();
        Ok(result)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let (relay, reached) = self.reached().await?;
        let listed = bounded(reached.peer.list_tools(request)).await?;
        let unreadable = |error: serde_json::Error| ErrorData::internal_error(error.to_string(), None);
        let mut listed = serde_json::to_value(listed).map_err(unreadable)?;
        mcp_calls::keep_allowed(&mut listed, &reached.server, &relay.oversight);
        serde_json::from_value(listed).map_err(unreadable)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        asked: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let (relay, reached) = self.reached().await?;
        let arguments = request.arguments.clone().map_or_else(|| json!({}), Value::Object);
        let call = McpCall::new(reached.session, reached.server, request.name.to_string(), arguments);
        let approval = match governed::verdict(&relay, &call) {
            Verdict::Run(approval) => approval,
            Verdict::Refuse(approval, error) => {
                governed::refused(&relay, &call, approval, &error);
                return Err(mcp_error(&error));
            }
            Verdict::Ask => match governed::ask(&relay, &call, asked.ct.cancelled()).await {
                Ok(approval) => approval,
                Err((approval, error)) => {
                    governed::refused(&relay, &call, approval, &error);
                    return Err(mcp_error(&error));
                }
            },
        };
        // Recorded before it reaches the editor, as an `mcp/message` passing the bridge is:
        // what cannot be audited does not run.
        let passage = serde_json::Map::from_iter([
            ("mcpMethod".to_string(), json!("tools/call")),
            ("mcpTool".to_string(), json!(call.tool_name())),
            ("toolCallId".to_string(), json!(call.id)),
        ]);
        if let Err(error) = relay.record_passage(false, MESSAGE, call.session.as_deref(), None, passage) {
            governed::refused(&relay, &call, approval, &error);
            return Err(mcp_error(&error));
        }
        // Cancelled by the agent: the call is dropped, which rmcp cancels at the editor's server.
        let answer = tokio::select! {
            answer = bounded(reached.peer.call_tool_once(request)) => answer,
            () = asked.ct.cancelled() => Err(ErrorData::new(
                rmcp::model::ErrorCode(codes::REQUEST_CANCELLED),
                "the agent cancelled the call",
                None,
            )),
        };
        let audited = match &answer {
            Ok(result) => Ok(serde_json::to_value(ServerResult::from(result.clone())).unwrap_or(Value::Null)),
            Err(error) => Err(RpcError {
                code: error.code.0,
                message: error.message.to_string(),
                data: error.data.clone(),
            }),
        };
        relay
            .oversight
            .call_ended(call.session_or_dash(), &call.facts(), Some(approval), &audited);
        answer
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        bounded(self.reached().await?.1.peer.list_resources(request)).await
    }

    async fn list_resource_templates(
        &self,
        request: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        bounded(self.reached().await?.1.peer.list_resource_templates(request)).await
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        bounded(self.reached().await?.1.peer.read_resource_once(request)).await
    }

    async fn list_prompts(
        &self,
        request: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        bounded(self.reached().await?.1.peer.list_prompts(request)).await
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        bounded(self.reached().await?.1.peer.get_prompt_once(request)).await
    }
}
