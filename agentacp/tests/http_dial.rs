//! Issue #47, the client side of Streamable HTTP: our [`Client`] (and a bridge) dialing
//! `http://…/acp` — our own server ([`Listening`]) through a TCP proxy that records what the
//! client sends and can cut a stream mid-turn, and small hyper servers for what ours does not
//! do (set cookies, forget a stream's events). Every wait is bounded.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentacp::audit::AuditLog;
use agentacp::bridge::BridgeOptions;
use agentacp::client::{AgentCommand, AuthPolicy, Client, ClientError, ClientOptions, PermissionDecision, PromptEvent};
use agentacp::prelude::*;
use agentacp::server::SessionContext;
use agentacp::websocket::Dial;
use bytes::Bytes;
use common::listening::{ALICE, Listening};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

mod common;

/// The bound on every wait.
const WAIT: Duration = Duration::from_secs(20);

async fn bounded<T>(future: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future)
        .await
        .expect("finished within its bound")
}

#[acp_operator(manifest = "tests/operators/test-remote/ACP.md")]
struct Remote;

impl RemoteServer for Remote {
    async fn prompt(
        &self,
        turn: &mut Turn<'_, GovernanceAware>,
        request: wire::PromptRequest,
    ) -> Result<wire::StopReason> {
        let text = match request.prompt.first() {
            Some(wire::ContentBlock::Text(text)) => text.text.clone(),
            _ => String::new(),
        };
        if text == "/wait" {
            turn.message("waiting").await?;
            turn.cancelled().await;
            return Ok(wire::StopReason::Cancelled);
        }
        if text == "/write" {
            let outcome = turn
                .tool_call("write", json!({}))
                .kind(ToolKind::Edit)
                .run(|_| async move { Ok::<_, String>(json!({"written": true})) })
                .await?;
            turn.message(&format!("{outcome:?}")).await?;
            return Ok(wire::StopReason::EndTurn);
        }
        for word in text.split_whitespace() {
            turn.message(word).await?;
        }
        Ok(wire::StopReason::EndTurn)
    }

    remote_no_ops!();
}

fn options(server: &Listening) -> ClientOptions {
    ClientOptions::default().with_workspace_root(server.cwd())
}

/// A turn's events up to its stop: the text of its updates (replayed ones too), and the stop
/// reason (`None` for a load).
async fn events(mut stream: agentacp::client::PromptStream) -> (Vec<String>, Option<wire::StopReason>) {
    let mut texts = Vec::new();
    loop {
        match bounded(stream.next()).await {
            Some(Ok(PromptEvent::Update(update) | PromptEvent::Replay(update))) => {
                texts.extend(update.text().map(str::to_string))
            }
            Some(Ok(PromptEvent::Stop(reason))) => return (texts, Some(reason)),
            Some(Ok(PromptEvent::Loaded)) => return (texts, None),
            Some(Err(error)) => panic!("the turn failed: {error}"),
            None => panic!("the turn ended without its last event"),
        }
    }
}

async fn prompt(client: &Client, session: &wire::SessionId, text: &str) -> (Vec<String>, Option<wire::StopReason>) {
    events(bounded(client.prompt_text(session, text)).await.unwrap()).await
}

// ---- a TCP proxy ---------------------------------------------------------------------------

/// A TCP proxy in front of `upstream`: what clients send is recorded; with `cut_after`, the
/// first connection that carries a session's event stream is cut once that many events have
/// passed, in the middle of the next one (whose bytes the server has written: only a client
/// that resumes after the last event it read gets it).
struct Proxy {
    addr: SocketAddr,
    upstream: SocketAddr,
    cut_after: Option<usize>,
    sent: Arc<Mutex<Vec<u8>>>,
    cut: Arc<AtomicBool>,
    /// The accepting task and every relay, ended by [`Proxy::outage`].
    tasks: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Proxy {
    async fn start(upstream: SocketAddr, cut_after: Option<usize>) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let proxy = Proxy {
            addr: listener.local_addr().unwrap(),
            upstream,
            cut_after,
            sent: Arc::default(),
            cut: Arc::default(),
            tasks: Arc::default(),
        };
        proxy.accept(listener);
        proxy
    }

    fn accept(&self, listener: TcpListener) {
        let (sent, cut, tasks) = (self.sent.clone(), self.cut.clone(), self.tasks.clone());
        let (upstream, cut_after) = (self.upstream, self.cut_after);
        let accepting = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(upstream).await else {
                    continue;
                };
                let relaying = tokio::spawn(relay(client, server, sent.clone(), cut.clone(), cut_after));
                tasks.lock().unwrap().push(relaying.abort_handle());
            }
        });
        self.tasks.lock().unwrap().push(accepting.abort_handle());
    }

    /// The network goes: every connection through the proxy is dropped, and new ones are
    /// refused.
    fn outage(&self) {
        for task in self.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }

    /// The network is back, on the same port.
    async fn restore(&self) {
        self.accept(TcpListener::bind(self.addr).await.unwrap());
    }

    fn url(&self) -> String {
        format!("http://{}/acp", self.addr)
    }

    /// What clients sent so far, lowercased.
    fn sent(&self) -> String {
        String::from_utf8_lossy(&self.sent.lock().unwrap()).to_lowercase()
    }
}

async fn relay(
    client: TcpStream,
    server: TcpStream,
    sent: Arc<Mutex<Vec<u8>>>,
    cut: Arc<AtomicBool>,
    cut_after: Option<usize>,
) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    // Whether the last request on this connection is a session stream's GET.
    let streams_session = Arc::new(AtomicBool::new(false));
    let upward = {
        let streams_session = streams_session.clone();
        async move {
            let mut seen = Vec::new();
            let mut buffer = [0u8; 16 * 1024];
            loop {
                let read = match client_read.read(&mut buffer).await {
                    Ok(0) | Err(_) => break,
                    Ok(read) => read,
                };
                sent.lock().unwrap().extend_from_slice(&buffer[..read]);
                seen.extend_from_slice(&buffer[..read]);
                let text = String::from_utf8_lossy(&seen).to_lowercase();
                if let Some(at) = text.rfind("get /acp") {
                    let head = &text[at..];
                    let head = &head[..head.find("\r\n\r\n").unwrap_or(head.len())];
                    streams_session.store(head.contains("acp-session-id"), Ordering::SeqCst);
                }
                if server_write.write_all(&buffer[..read]).await.is_err() {
                    break;
                }
            }
        }
    };
    let downward = async move {
        let mut seen = Vec::new();
        let mut buffer = [0u8; 16 * 1024];
        loop {
            let read = match server_read.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(read) => read,
            };
            let mut forward = &buffer[..read];
            if let Some(after) = cut_after
                && streams_session.load(Ordering::SeqCst)
                && !cut.load(Ordering::SeqCst)
            {
                let start = seen.len();
                seen.extend_from_slice(forward);
                let text = String::from_utf8_lossy(&seen);
                if let Some((at, _)) = text.match_indices("data: ").nth(after) {
                    // Up to the middle of the next event's data; then the cut.
                    let end = (at + "data: ".len() + 4).min(seen.len());
                    let _ = client_write.write_all(&seen[start.min(end)..end]).await;
                    cut.store(true, Ordering::SeqCst);
                    return;
                }
            }
            if client_write.write_all(forward).await.is_err() {
                break;
            }
            forward = &[];
            let _ = forward;
        }
    };
    tokio::select! {
        () = upward => {}
        () = downward => {}
    }
}

// ---- our client, our server -----------------------------------------------------------------

/// The whole round over Streamable HTTP with a token: initialize, a session, a streamed turn,
/// a permission question answered, a cancelled turn, a load (the session's stream opened
/// before `session/load`, so its history arrives), and `close` ending the connection with
/// `DELETE`; every request carries the token.
#[tokio::test]
async fn our_client_drives_our_server_over_streamable_http() {
    let server = Listening::start(Remote, |listen| listen.tokens(common::listening::tokens())).await;
    let proxy = Proxy::start(server.addr, None).await;
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = asked.clone();
    let options = options(&server).with_permission(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
        async { PermissionDecision::Approve }
    });
    let client = bounded(Client::connect_http(Dial::new(proxy.url()).token(ALICE), options))
        .await
        .unwrap();
    assert_eq!(client.pid(), None);
    assert_eq!(
        client.initialize_response().agent_info.as_ref().unwrap().name,
        "test-remote"
    );
    let session = bounded(client.new_session(std::path::Path::new(&server.cwd())))
        .await
        .unwrap();
    let (texts, stop) = prompt(&client, &session, "one two three four").await;
    assert_eq!(texts, ["one", "two", "three", "four"]);
    assert_eq!(stop, Some(wire::StopReason::EndTurn));

    let (texts, _) = prompt(&client, &session, "/write").await;
    assert_eq!(
        asked.load(Ordering::SeqCst),
        1,
        "the agent's permission question reached us"
    );
    assert!(texts.iter().any(|text| text.contains("Completed")), "{texts:?}");

    let mut waiting = bounded(client.prompt_text(&session, "/wait")).await.unwrap();
    match bounded(waiting.next()).await {
        Some(Ok(PromptEvent::Update(update))) => assert_eq!(update.text(), Some("waiting")),
        other => panic!("expected the first update, got {other:?}"),
    }
    bounded(client.cancel(&session)).await.unwrap();
    let (_, stop) = events(waiting).await;
    assert_eq!(stop, Some(wire::StopReason::Cancelled));
    assert_eq!(bounded(client.close()).await, None);

    // A second connection loads the session: its history comes on the session's stream.
    let client = bounded(Client::connect_remote(
        Dial::new(proxy.url()).token(ALICE),
        ClientOptions::default().with_workspace_root(server.cwd()),
    ))
    .await
    .unwrap();
    let loading = bounded(client.load_session(&session, std::path::Path::new(&server.cwd())))
        .await
        .unwrap();
    let (history, _) = events(loading).await;
    assert!(history.iter().any(|text| text == "three"), "{history:?}");
    bounded(client.close()).await;

    bounded(async {
        while proxy.sent().matches("delete /acp").count() < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let sent = proxy.sent();
    let requests = sent.matches(" /acp http/1.1\r\n").count();
    let with_token = sent
        .matches(&format!("authorization: bearer {}", ALICE.to_lowercase()))
        .count();
    assert_eq!(requests, with_token, "every request carries the token");
    assert!(
        sent.contains("acp-session-id: "),
        "session-scoped requests name the session"
    );
    server.shut_down().await;
}

/// A token the server does not accept fails the connect as over WebSocket: `PermissionDenied`
/// naming `401`. A connection without a token authenticates with `authenticate` instead. A
/// URL of the other profile is refused by the connect that does not dial it.
#[tokio::test]
async fn a_refused_token_is_permission_denied_and_authenticate_works_without_one() {
    let server = Listening::start(Remote, |listen| listen.tokens(common::listening::tokens())).await;
    let url = format!("http://{}/acp", server.addr);
    let error = bounded(Client::connect_http(Dial::new(&url).token("wrong"), options(&server)))
        .await
        .unwrap_err();
    match &error {
        ClientError::Spawn(io) => {
            assert_eq!(io.kind(), std::io::ErrorKind::PermissionDenied, "{io}");
            assert!(io.to_string().contains("401"), "{io}");
            assert!(io.to_string().contains(&url), "{io}");
        }
        other => panic!("expected a refused connection, got {other:?}"),
    }
    let with_token = options(&server).with_auth(AuthPolicy::Token(ALICE.into()));
    let client = bounded(Client::connect_http(Dial::new(&url), with_token))
        .await
        .unwrap();
    let session = bounded(client.new_session(std::path::Path::new(&server.cwd())))
        .await
        .unwrap();
    assert_eq!(prompt(&client, &session, "in").await.0, ["in"]);
    bounded(client.close()).await;

    for (connect, url) in [(true, url.clone()), (false, url.replace("http://", "ws://"))] {
        let dial = Dial::new(&url);
        let refused = match connect {
            true => Client::connect_websocket(dial, options(&server)).await,
            false => Client::connect_http(dial, options(&server)).await,
        };
        match refused {
            Err(ClientError::Spawn(io)) => {
                assert_eq!(io.kind(), std::io::ErrorKind::InvalidInput, "{io}");
                assert!(io.to_string().contains("connect_remote"), "{io}");
            }
            other => panic!("expected a refusal of {url}, got {:?}", other.map(|_| ())),
        }
    }
    server.shut_down().await;
}

/// Issue #47's durable streams: the session's stream is cut mid-turn (after 10 events, in the
/// middle of the 11th); the client resumes it with `Last-Event-ID` and every update arrives
/// exactly once, in order.
#[tokio::test]
async fn a_stream_cut_mid_turn_resumes_and_every_update_arrives_exactly_once() {
    let server = Listening::start(Remote, |listen| listen).await;
    let proxy = Proxy::start(server.addr, Some(10)).await;
    let client = bounded(Client::connect_http(Dial::new(proxy.url()), options(&server)))
        .await
        .unwrap();
    let session = bounded(client.new_session(std::path::Path::new(&server.cwd())))
        .await
        .unwrap();
    let words: Vec<String> = (1..=40).map(|n| format!("w{n}")).collect();
    let (texts, stop) = prompt(&client, &session, &words.join(" ")).await;
    assert!(proxy.cut.load(Ordering::SeqCst), "the stream was cut");
    assert_eq!(texts, words, "every update once, in order");
    assert_eq!(stop, Some(wire::StopReason::EndTurn));
    assert!(
        proxy.sent().contains("last-event-id: "),
        "resumed after the last event read"
    );
    // The connection goes on.
    assert_eq!(prompt(&client, &session, "after").await.0, ["after"]);
    bounded(client.close()).await;
    server.shut_down().await;
}

/// `https://`: a client that trusts the server's certificate (self-signed here) drives a
/// streamed turn (HTTP/2 where the server's ALPN offers it); one that does not is refused
/// at connect, naming the certificate.
#[tokio::test]
async fn over_https_a_client_that_trusts_the_certificate_drives_a_turn() {
    let certs = tempfile::tempdir().unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let files = agentacp::websocket::TlsFiles {
        cert: certs.path().join("cert.pem"),
        key: certs.path().join("key.pem"),
    };
    std::fs::write(&files.cert, certified.cert.pem()).unwrap();
    std::fs::write(&files.key, certified.signing_key.serialize_pem()).unwrap();
    let server = Listening::start(Remote, move |mut listen| {
        listen.tls = Some(files);
        listen
    })
    .await;
    let url = format!("https://localhost:{}/acp", server.addr.port());
    let error = bounded(Client::connect_http(Dial::new(&url), options(&server)))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ClientError::Spawn(io) if io.to_string().to_lowercase().contains("certificate")),
        "{error:?}"
    );
    let mut dial = Dial::new(&url);
    dial.tls = Some(agentacp::websocket::client_config(&[certified.cert.der().clone()]).unwrap());
    let client = bounded(Client::connect_http(dial, options(&server))).await.unwrap();
    let session = bounded(client.new_session(std::path::Path::new(&server.cwd())))
        .await
        .unwrap();
    assert_eq!(prompt(&client, &session, "over tls").await.0, ["over", "tls"]);
    bounded(client.close()).await;
    server.shut_down().await;
}

/// The network goes for a moment mid-session: every connection is dropped and new ones are
/// refused, so the streams break and cannot be reopened at first. Once it is back, within
/// `Dial::resume_within`, the streams are resumed and the session goes on.
#[tokio::test]
async fn a_connection_outlives_a_short_network_outage() {
    let server = Listening::start(Remote, |listen| listen).await;
    let proxy = Proxy::start(server.addr, None).await;
    let client = bounded(Client::connect_http(Dial::new(proxy.url()), options(&server)))
        .await
        .unwrap();
    let session = bounded(client.new_session(std::path::Path::new(&server.cwd())))
        .await
        .unwrap();
    assert_eq!(prompt(&client, &session, "before").await.0, ["before"]);
    proxy.outage();
    // The outage lasts a while (its length is the scenario, not a wait for the code).
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.restore().await;
    let (texts, stop) = prompt(&client, &session, "after the outage").await;
    assert_eq!(texts, ["after", "the", "outage"]);
    assert_eq!(stop, Some(wire::StopReason::EndTurn));
    bounded(client.close()).await;
    server.shut_down().await;
}

// ---- a bridge ---------------------------------------------------------------------------------

/// A basic bridge whose downstream is always remote here: its command is never started.
#[acp_operator(manifest = "../tests/ui/pass/bridge/ACP.md")]
struct TestBridge;

impl TestBridgeBridge for TestBridge {
    fn downstream(&self) -> AgentCommand {
        AgentCommand::new("/nonexistent/agent-that-must-not-be-started")
    }
}

/// A bridge connected to our server over Streamable HTTP relays a prompt round trip.
#[tokio::test]
async fn a_bridge_dialing_http_relays_a_prompt_round_trip() {
    let server = Listening::start(Remote, |listen| listen.tokens(common::listening::tokens())).await;
    let options = BridgeOptions {
        audit: Some(AuditLog::off()),
        ..BridgeOptions::default()
    }
    .connect(Dial::new(format!("http://{}/acp", server.addr)).token(ALICE));
    let (mut editor, bridge_in) = tokio::io::duplex(1 << 16);
    let (bridge_out, from_bridge) = tokio::io::duplex(1 << 16);
    let bridge = tokio::spawn(agentacp::bridge::bridge(TestBridge, options, bridge_in, bridge_out));
    let mut lines = BufReader::new(from_bridge).lines();
    let mut send = async |message: Value| {
        let line = format!("{message}\n");
        bounded(editor.write_all(line.as_bytes())).await.unwrap();
    };
    let mut until_answer = async |id: i64| {
        let mut seen = Vec::new();
        loop {
            let line = bounded(lines.next_line()).await.unwrap().expect("the bridge answers");
            let message: Value = serde_json::from_str(&line).unwrap();
            let done = message["id"] == json!(id) && message.get("method").is_none();
            seen.push(message);
            if done {
                return seen;
            }
        }
    };
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": wire::PROTOCOL_VERSION, "clientCapabilities": {},
        "clientInfo": {"name": "test-editor", "version": "0"}}}))
    .await;
    let init = until_answer(1).await;
    let init = init.last().unwrap();
    assert_eq!(
        init["result"]["_meta"]["aip44"]["downstream"]["name"], "test-remote",
        "{init}"
    );
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": server.cwd(), "mcpServers": []}}),
    )
    .await;
    let created = until_answer(2).await;
    let session = created.last().unwrap()["result"]["sessionId"].clone();
    assert!(session.is_string(), "{created:?}");
    send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
        "sessionId": session, "prompt": [{"type": "text", "text": "over the bridge"}]}}),
    )
    .await;
    let turn = until_answer(3).await;
    let texts: Vec<&str> = turn
        .iter()
        .filter(|m| m["method"] == "session/update")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect();
    assert_eq!(texts, ["over", "the", "bridge"], "{turn:?}");
    assert_eq!(turn.last().unwrap()["result"]["stopReason"], "end_turn");
    drop(editor);
    bounded(bridge).await.unwrap().unwrap();
    server.shut_down().await;
}

// ---- small servers for what ours does not do --------------------------------------------------

type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// One request a small server saw.
#[derive(Debug)]
struct Request {
    method: String,
    cookie: Option<String>,
    last_event_id: Option<String>,
}

/// What a small server saw.
#[derive(Default)]
struct Seen(Mutex<Vec<Request>>);

/// Serves `answer` on a loopback port; what it saw.
async fn small_server<F, Fut>(answer: F) -> (SocketAddr, Arc<Seen>)
where
    F: Fn(hyper::Request<hyper::body::Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = hyper::Response<Body>> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let noted = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (answer, noted) = (answer.clone(), noted.clone());
            let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                let header = |name: &str| {
                    request
                        .headers()
                        .get(name)
                        .and_then(|value| value.to_str().ok())
                        .map(str::to_string)
                };
                noted.0.lock().unwrap().push(Request {
                    method: request.method().to_string(),
                    cookie: header("cookie"),
                    last_event_id: header("last-event-id"),
                });
                let answering = answer(request);
                async move { Ok::<_, Infallible>(answering.await) }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new().serve_connection(hyper_util::rt::TokioIo::new(tcp), service),
            );
        }
    });
    (addr, seen)
}

fn respond(status: u16, headers: &[(&'static str, &str)], body: Body) -> hyper::Response<Body> {
    let mut response = hyper::Response::new(body);
    *response.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
    for (name, value) in headers {
        response
            .headers_mut()
            .append(*name, hyper::header::HeaderValue::from_str(value).unwrap());
    }
    response
}

fn text(body: &str) -> Body {
    Full::new(Bytes::from(body.to_string()))
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// An event stream of `events` (SSE text), then, once `broken` is notified, a broken body
/// (the connection is dropped); without it, one that stays open.
fn sse(events: Vec<String>, broken: Option<Arc<tokio::sync::Notify>>) -> Body {
    let chunks = events
        .into_iter()
        .map(|event| Ok(hyper::body::Frame::data(Bytes::from(event))));
    let end = futures_util::stream::once(async move {
        match broken {
            Some(broken) => broken.notified().await,
            None => std::future::pending().await,
        }
        Err(std::io::Error::other("cut"))
    });
    StreamBody::new(futures_util::StreamExt::chain(futures_util::stream::iter(chunks), end)).boxed_unsync()
}

/// `initialize`'s answer for `id` (the protocol version our client speaks).
fn initialized(id: &Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": wire::PROTOCOL_VERSION,
        "agentCapabilities": {}, "authMethods": []}})
    .to_string()
}

async fn message(request: hyper::Request<hyper::body::Incoming>) -> Value {
    let body = request.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&body).unwrap()
}

/// RFD §5: a cookie the agent sets on `initialize`'s answer comes back with every later
/// request of the connection: the streams' GETs, each POST, and the closing `DELETE`.
#[tokio::test]
async fn cookies_the_agent_sets_come_back_with_every_request_of_the_connection() {
    let (stream, events) = tokio::sync::mpsc::unbounded_channel::<String>();
    let events = Arc::new(tokio::sync::Mutex::new(Some(events)));
    let (addr, seen) = small_server(move |request| {
        let (stream, events) = (stream.clone(), events.clone());
        async move {
            let session_stream = request.headers().contains_key("acp-session-id");
            match request.method().as_str() {
                "GET" if !request.headers().contains_key("acp-connection-id") => {
                    respond(400, &[], text("no connection"))
                }
                "GET" if session_stream => respond(200, &[("content-type", "text/event-stream")], sse(vec![], None)),
                "GET" => {
                    let receiver = events.lock().await.take().expect("one connection stream");
                    let chunks = futures_util::stream::unfold(receiver, |mut receiver| async move {
                        let event = receiver.recv().await?;
                        Some((Ok(hyper::body::Frame::data(Bytes::from(event))), receiver))
                    });
                    respond(
                        200,
                        &[("content-type", "text/event-stream")],
                        StreamBody::new(chunks).boxed_unsync(),
                    )
                }
                "POST" => {
                    let message = message(request).await;
                    match message["method"].as_str() {
                        Some("initialize") => respond(
                            200,
                            &[
                                ("content-type", "application/json"),
                                ("acp-connection-id", "c1"),
                                ("set-cookie", "affinity=node-7; Path=/; HttpOnly"),
                            ],
                            text(&initialized(&message["id"])),
                        ),
                        Some("session/new") => {
                            let answer = json!({"jsonrpc": "2.0", "id": message["id"], "result": {"sessionId": "s1"}});
                            let _ = stream.send(format!("id: 1\ndata: {answer}\n\n"));
                            respond(202, &[], text(""))
                        }
                        _ => respond(202, &[], text("")),
                    }
                }
                _ => respond(202, &[], text("")),
            }
        }
    })
    .await;
    let client = bounded(Client::connect_http(
        Dial::new(format!("http://{addr}/acp")),
        ClientOptions::default(),
    ))
    .await
    .unwrap();
    let session = bounded(client.new_session(&std::env::current_dir().unwrap()))
        .await
        .unwrap();
    assert_eq!(session.to_string(), "s1");
    bounded(client.close()).await;
    bounded(async {
        while !seen.0.lock().unwrap().iter().any(|request| request.method == "DELETE") {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let seen = seen.0.lock().unwrap();
    let initialize = seen
        .iter()
        .position(|request| request.method == "POST")
        .expect("initialize was posted");
    let after: Vec<_> = seen[initialize + 1..].iter().collect();
    assert!(after.len() >= 4, "two streams, session/new, DELETE: {after:?}");
    for request in after {
        assert_eq!(request.cookie.as_deref(), Some("affinity=node-7"), "{request:?}");
    }
}

/// A stream whose server no longer holds the events after the client's last one (`409` to
/// its resume with `Last-Event-ID`) ends the connection at once: the client's waiting
/// request fails, and the reason names the stream, the event and the status.
#[tokio::test]
async fn a_stream_that_cannot_be_resumed_ends_the_connection_naming_the_409() {
    // The stream breaks once the client posts something after `initialize` (so it has
    // read the event by then).
    let broken = Arc::new(tokio::sync::Notify::new());
    let (addr, seen) = small_server(move |request| {
        let broken = broken.clone();
        async move {
            match request.method().as_str() {
                "GET" if !request.headers().contains_key("acp-connection-id") => {
                    respond(400, &[], text("no connection"))
                }
                "GET" if request.headers().contains_key("last-event-id") => respond(
                    409,
                    &[],
                    text("Last-Event-ID names an event this stream no longer keeps"),
                ),
                "GET" => {
                    let update = json!({"jsonrpc": "2.0", "method": "_test/poke", "params": {}});
                    respond(
                        200,
                        &[("content-type", "text/event-stream")],
                        sse(vec![format!(": open\n\nid: 7\ndata: {update}\n\n")], Some(broken)),
                    )
                }
                "POST" => {
                    let message = message(request).await;
                    match message["method"].as_str() {
                        Some("initialize") => respond(
                            200,
                            &[("content-type", "application/json"), ("acp-connection-id", "c1")],
                            text(&initialized(&message["id"])),
                        ),
                        _ => {
                            broken.notify_one();
                            respond(202, &[], text(""))
                        }
                    }
                }
                _ => respond(202, &[], text("")),
            }
        }
    })
    .await;
    // At once: not after `Dial::resume_within` (60 s, past this test's bound).
    let dial = Dial::new(format!("http://{addr}/acp"));
    let client = bounded(Client::connect_http(dial, ClientOptions::default()))
        .await
        .unwrap();
    // Never answered: it fails when the connection ends.
    let error = bounded(client.new_session(&std::env::current_dir().unwrap()))
        .await
        .unwrap_err();
    let ClientError::AgentExited { stderr, .. } = &error else {
        panic!("expected the connection's end, got {error:?}");
    };
    let reason = stderr.join("\n");
    assert!(reason.contains("Streamable HTTP connection"), "{reason}");
    assert!(reason.contains("the connection's stream after event 7"), "{reason}");
    assert!(reason.contains("409"), "{reason}");
    let seen = seen.0.lock().unwrap();
    assert!(
        seen.iter().any(|request| request.last_event_id.as_deref() == Some("7")),
        "resumed after event 7"
    );
}
