//! Issue #47: Streamable HTTP on the WebSocket listener's `/acp` endpoint: the RFD's status
//! codes, the streams, authentication, and the bounds (a client that never opens its stream
//! neither hangs the server nor grows its memory). The client is reqwest; every wait is
//! bounded.

use std::time::Duration;

use agentacp::prelude::*;
use agentacp::server::SessionContext;
use agentacp::server::websocket::ListenOptions;
use common::listening::{ALICE, BOB, Listening, token_file, tokens, write_tokens};
use reqwest::StatusCode;

mod common;

scripted_remote!();

const WAIT: Duration = Duration::from_secs(10);
/// The listener of these tests ([`Listening`]), reached with reqwest.
struct Server {
    listening: Listening,
    http: reqwest::Client,
}

impl std::ops::Deref for Server {
    type Target = Listening;

    fn deref(&self) -> &Listening {
        &self.listening
    }
}

impl Server {
    async fn start(listen: impl FnOnce(ListenOptions) -> ListenOptions) -> Server {
        let listening = Listening::start(Remote, listen).await;
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder().timeout(WAIT * 3).build().unwrap();
        Server { listening, http }
    }

    fn url(&self) -> String {
        format!("http://{}/acp", self.addr)
    }

    /// POSTs `message` with `headers` (name, value); the status and body.
    async fn post(
        &self,
        message: &Value,
        headers: &[(&str, &str)],
    ) -> (StatusCode, reqwest::header::HeaderMap, String) {
        let mut request = self
            .http
            .post(self.url())
            .header("content-type", "application/json")
            .body(message.to_string());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.expect("answered");
        let (status, headers) = (response.status(), response.headers().clone());
        (status, headers, response.text().await.unwrap_or_default())
    }

    /// `initialize`, with `headers`; the connection id.
    async fn initialize(&self, headers: &[(&str, &str)]) -> String {
        let message = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}});
        let (status, response_headers, body) = self.post(&message, headers).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let answer: Value = serde_json::from_str(&body).expect("a JSON answer");
        assert_eq!(answer["id"], 0, "{answer}");
        assert!(answer["result"]["protocolVersion"].is_number(), "{answer}");
        response_headers["acp-connection-id"].to_str().unwrap().to_string()
    }

    /// Opens the connection's stream (or `session`'s).
    async fn stream(&self, connection: &str, session: Option<&str>, headers: &[(&str, &str)]) -> reqwest::Response {
        let mut request = self
            .http
            .get(self.url())
            .header("accept", "text/event-stream")
            .header("acp-connection-id", connection);
        if let Some(session) = session {
            request = request.header("acp-session-id", session);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().await.expect("answered")
    }

    async fn shut_down(self) {
        self.listening.shut_down().await;
    }
}

/// Reads SSE events from `response` until one whose JSON satisfies `wanted`.
async fn event(response: &mut reqwest::Response, buffer: &mut String, wanted: impl Fn(&Value) -> bool) -> Value {
    loop {
        let (_, message) = next_event(response, buffer).await;
        if wanted(&message) {
            return message;
        }
    }
}

/// The next SSE event of `response` that carries a JSON-RPC message, with its id.
async fn next_event(response: &mut reqwest::Response, buffer: &mut String) -> (Option<u64>, Value) {
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            let id = event
                .lines()
                .find_map(|line| line.strip_prefix("id: "))
                .and_then(|id| id.parse().ok());
            let data = event.lines().find_map(|line| line.strip_prefix("data: "));
            if let Some(message) = data.and_then(|data| serde_json::from_str::<Value>(data).ok()) {
                return (id, message);
            }
        }
        let chunk = tokio::time::timeout(WAIT, response.chunk())
            .await
            .expect("an event in time")
            .expect("the stream reads")
            .expect("the stream is open");
        buffer.push_str(&String::from_utf8_lossy(&chunk));
    }
}

fn request(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[tokio::test]
async fn a_prompt_is_answered_on_its_sessions_stream_and_delete_ends_the_connection() {
    let server = Server::start(|options| options).await;
    let connection = server.initialize(&[]).await;
    let id = connection.as_str();
    let mut stream = server.stream(id, None, &[]).await;
    assert_eq!(stream.status(), StatusCode::OK);
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    let mut buffer = String::new();
    let (status, _, _) = server
        .post(
            &request(1, "session/new", json!({"cwd": server.cwd(), "mcpServers": []})),
            &[("acp-connection-id", id)],
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let created = event(&mut stream, &mut buffer, |message| message["id"] == 1).await;
    let session = created["result"]["sessionId"].as_str().expect("a session").to_string();
    let mut session_stream = server.stream(id, Some(&session), &[]).await;
    assert_eq!(session_stream.status(), StatusCode::OK);
    assert_eq!(
        server.stream(id, Some(&session), &[]).await.status(),
        StatusCode::CONFLICT,
        "one reader per stream"
    );
    let prompt = request(
        2,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
    );
    // A session-scoped method names its session in Acp-Session-Id or in params (the
    // Python SDK's client sends the header with some session methods only): neither, or two
    // that differ, is `400`.
    let unnamed = request(2, "session/prompt", json!({"prompt": []}));
    let (status, _, body) = server.post(&unnamed, &[("acp-connection-id", id)]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "no session named: {body}");
    let (status, _, body) = server
        .post(&prompt, &[("acp-connection-id", id), ("acp-session-id", "sess_other")])
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "two sessions named: {body}");
    let (status, _, _) = server
        .post(&prompt, &[("acp-connection-id", id), ("acp-session-id", &session)])
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let mut session_buffer = String::new();
    let update = event(&mut session_stream, &mut session_buffer, |message| {
        message["method"] == "session/update"
    })
    .await;
    assert_eq!(update["params"]["update"]["content"]["text"], "hello ", "{update}");
    let answer = event(&mut session_stream, &mut session_buffer, |message| message["id"] == 2).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");

    let deleted = server
        .http
        .delete(server.url())
        .header("acp-connection-id", id)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::ACCEPTED);
    let (status, _, _) = server
        .post(&request(3, "session/list", json!({})), &[("acp-connection-id", id)])
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the connection is gone");
    let ended = tokio::time::timeout(WAIT, async { while let Ok(Some(_)) = stream.chunk().await {} }).await;
    assert!(ended.is_ok(), "the stream ended with the connection");
    server.shut_down().await;
}

#[tokio::test]
async fn malformed_requests_get_the_rfds_status_codes() {
    let server = Server::start(|options| {
        let mut options = options;
        options.limits.max_message_bytes = 4096;
        options
    })
    .await;
    let connection = server.initialize(&[]).await;
    let id = connection.as_str();
    let cases: Vec<(&str, reqwest::RequestBuilder, StatusCode)> = vec![
        (
            "a POST that is not JSON",
            server
                .http
                .post(server.url())
                .header("content-type", "text/plain")
                .body("{}"),
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
        (
            "a batch",
            server
                .http
                .post(server.url())
                .header("content-type", "application/json")
                .body("[]"),
            StatusCode::NOT_IMPLEMENTED,
        ),
        (
            "not initialize, no connection",
            server
                .http
                .post(server.url())
                .header("content-type", "application/json")
                .body(request(1, "session/list", json!({})).to_string()),
            StatusCode::BAD_REQUEST,
        ),
        (
            "an unknown connection",
            server
                .http
                .post(server.url())
                .header("content-type", "application/json")
                .header("acp-connection-id", "0123")
                .body(request(1, "session/list", json!({})).to_string()),
            StatusCode::NOT_FOUND,
        ),
        (
            "a body over the frame limit",
            server
                .http
                .post(server.url())
                .header("content-type", "application/json")
                .header("acp-connection-id", id)
                .body(format!("\"{}\"", "x".repeat(5000))),
            StatusCode::PAYLOAD_TOO_LARGE,
        ),
        (
            "a GET that is no stream",
            server.http.get(server.url()).header("acp-connection-id", id),
            StatusCode::NOT_ACCEPTABLE,
        ),
        (
            "a GET asking for another upgrade than WebSocket (served as HTTP/1.1)",
            server
                .http
                .get(server.url())
                .header("connection", "upgrade")
                .header("upgrade", "h2c")
                .header("acp-connection-id", id),
            StatusCode::NOT_ACCEPTABLE,
        ),
        (
            "a stream without a connection",
            server.http.get(server.url()).header("accept", "text/event-stream"),
            StatusCode::BAD_REQUEST,
        ),
        (
            "a DELETE without a connection",
            server.http.delete(server.url()),
            StatusCode::BAD_REQUEST,
        ),
        (
            "another method",
            server.http.put(server.url()),
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (
            "another path",
            server.http.get(format!("http://{}/other", server.addr)),
            StatusCode::NOT_FOUND,
        ),
        (
            "a browser origin not allowed",
            server.http.get(server.url()).header("origin", "https://evil.example"),
            StatusCode::FORBIDDEN,
        ),
    ];
    for (what, request, status) in cases {
        let response = request.send().await.expect("answered");
        let got = response.status();
        let body = response.text().await.unwrap_or_default();
        assert_eq!(got, status, "{what}: {body}");
        assert!(
            !body.contains("Error {") && !body.trim().is_empty() || got.is_success(),
            "{what}: {body}"
        );
    }
    // A stream of a session nobody named: a few may be opened ahead (`session/load`), no more.
    let mut held = Vec::new();
    for n in 0.. {
        let response = server.stream(id, Some(&format!("sess_{n}")), &[]).await;
        if response.status() != StatusCode::OK {
            assert_eq!(response.status(), StatusCode::NOT_FOUND);
            break;
        }
        assert!(n < 100, "unknown sessions' streams are bounded");
        held.push(response);
    }
    server.shut_down().await;
}

#[tokio::test]
async fn the_bearer_token_is_checked_on_every_request_and_is_the_identity() {
    let server = Server::start(|options| options.tokens(tokens())).await;
    let bearer = format!("Bearer {ALICE}");
    let alice = [("authorization", bearer.as_str())];
    let message = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}});
    let (status, headers, _) = server.post(&message, &[("authorization", "Bearer wrong")]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(headers["www-authenticate"], "Bearer");

    let connection = server.initialize(&alice).await;
    let id = connection.as_str();
    let new_session = request(1, "session/new", json!({"cwd": server.cwd(), "mcpServers": []}));
    let (status, _, _) = server.post(&new_session, &[("acp-connection-id", id)]).await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "alice's connection takes requests with her token only"
    );
    let bob = format!("Bearer {BOB}");
    let (status, _, _) = server
        .post(&new_session, &[("acp-connection-id", id), ("authorization", &bob)])
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "nor with bob's");
    let mut stream = server.stream(id, None, &alice).await;
    assert_eq!(stream.status(), StatusCode::OK);
    let (status, _, _) = server
        .post(&new_session, &[("acp-connection-id", id), ("authorization", &bearer)])
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let mut buffer = String::new();
    let created = event(&mut stream, &mut buffer, |message| message["id"] == 1).await;
    let session = created["result"]["sessionId"].as_str().expect("a session").to_string();
    let mut session_stream = server.stream(id, Some(&session), &alice).await;
    let prompt = request(
        2,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
    );
    let (status, _, _) = server
        .post(
            &prompt,
            &[
                ("acp-connection-id", id),
                ("acp-session-id", &session),
                ("authorization", &bearer),
            ],
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let mut session_buffer = String::new();
    let update = event(&mut session_stream, &mut session_buffer, |message| {
        message["method"] == "session/update"
    })
    .await;
    assert_eq!(update["params"]["update"]["content"]["text"], "hello alice", "{update}");
    let records = server.audited();
    assert!(records.iter().any(|r| r["action"] == "auth.login"), "{records:?}");
    for record in &records {
        assert_eq!(record["metadata"]["aip44"]["identity"], "alice", "{record}");
    }
    server.shut_down().await;
}

/// A client that initializes, starts a turn that streams without end and never opens a
/// stream: what waits for it is bounded, and once nothing more fits for the write timeout
/// its connection is ended (the turn cancelled), not left to grow or hang.
#[tokio::test]
async fn a_client_that_never_opens_its_stream_is_ended_not_buffered_without_bound() {
    let server = Server::start(|options| {
        let mut options = options;
        options.limits.write_timeout = Duration::from_millis(500);
        options
    })
    .await;
    let connection = server.initialize(&[]).await;
    let id = connection.as_str();
    let (status, _, _) = server
        .post(
            &request(1, "session/new", json!({"cwd": server.cwd(), "mcpServers": []})),
            &[("acp-connection-id", id)],
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    // The session's id is read from the connection's stream, which is then left unread, and
    // the session's stream is never opened.
    let mut stream = server.stream(id, None, &[]).await;
    let mut buffer = String::new();
    let created = event(&mut stream, &mut buffer, |message| message["id"] == 1).await;
    drop(stream);
    let session = created["result"]["sessionId"].as_str().unwrap().to_string();
    let flood = request(
        2,
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "/flood"}]}),
    );
    let (status, _, _) = server
        .post(&flood, &[("acp-connection-id", id), ("acp-session-id", &session)])
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    // The connection ends by itself: its id is soon unknown.
    let ended = tokio::time::timeout(WAIT * 2, async {
        loop {
            let (status, _, _) = server
                .post(
                    &json!({"jsonrpc": "2.0", "method": "_test/poke", "params": {}}),
                    &[("acp-connection-id", id)],
                )
                .await;
            if status == StatusCode::NOT_FOUND {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(ended.is_ok(), "the connection that read nothing was ended");
    server.shut_down().await;
}

/// A client that loses its session's stream mid-turn and reopens it with `Last-Event-ID`
/// gets every event after that one, once; a cursor the stream does not hold is `409`.
#[tokio::test]
async fn a_stream_resumed_with_last_event_id_misses_nothing_and_repeats_nothing() {
    let server = Server::start(|options| options).await;
    let connection = server.initialize(&[]).await;
    let id = connection.as_str();
    let mut stream = server.stream(id, None, &[]).await;
    let with_connection = [("acp-connection-id", id)];
    let new_session = request(1, "session/new", json!({"cwd": server.cwd(), "mcpServers": []}));
    server.post(&new_session, &with_connection).await;
    let created = event(&mut stream, &mut String::new(), |message| message["id"] == 1).await;
    let session = created["result"]["sessionId"].as_str().unwrap().to_string();
    let scoped = [("acp-connection-id", id), ("acp-session-id", session.as_str())];
    let prompt = |n: i64| {
        request(
            n,
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}),
        )
    };

    let mut first = server.stream(id, Some(&session), &[]).await;
    let mut buffer = String::new();
    server.post(&prompt(2), &scoped).await;
    let (update_id, update) = next_event(&mut first, &mut buffer).await;
    assert_eq!(update["method"], "session/update", "{update}");
    let update_id = update_id.expect("every event has an id");
    // The network goes: the turn's answer may have been written to the lost stream, or not.
    drop(first);
    server.post(&prompt(3), &scoped).await;
    let last = update_id.to_string();
    let mut resumed = server
        .stream(id, Some(&session), &[("last-event-id", last.as_str())])
        .await;
    assert_eq!(resumed.status(), StatusCode::OK);
    let mut buffer = String::new();
    let mut seen = Vec::new();
    while !seen.iter().any(|(_, message): &(u64, Value)| message["id"] == 3) {
        let (event_id, message) = next_event(&mut resumed, &mut buffer).await;
        seen.push((event_id.expect("an id"), message));
    }
    let ids: Vec<u64> = seen.iter().map(|(event_id, _)| *event_id).collect();
    let expected: Vec<u64> = (update_id + 1..=update_id + ids.len() as u64).collect();
    assert_eq!(ids, expected, "every event after the last one seen, in order, once");
    let answers = |n: i64| seen.iter().filter(|(_, message)| message["id"] == n).count();
    assert_eq!((answers(2), answers(3)), (1, 1), "{seen:?}");
    drop(resumed);

    let gone = server.stream(id, Some(&session), &[("last-event-id", "100000")]).await;
    assert_eq!(gone.status(), StatusCode::CONFLICT);
    let unreadable = server
        .stream(id, Some(&session), &[("last-event-id", "yesterday")])
        .await;
    assert_eq!(unreadable.status(), StatusCode::BAD_REQUEST);
    server.shut_down().await;
}

/// HTTP/2 without TLS (h2c), as the RFD asks: a client that starts with the HTTP/2 preface
/// is served HTTP/2 on the same port, its POSTs and its stream multiplexed on one connection.
#[tokio::test]
async fn a_client_speaking_http2_is_served_http2_on_the_same_port() {
    let server = Server::start(|options| options).await;
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .timeout(WAIT * 3)
        .build()
        .unwrap();
    let post = |message: Value, connection: Option<&str>| {
        let mut request = h2
            .post(server.url())
            .header("content-type", "application/json")
            .body(message.to_string());
        if let Some(connection) = connection {
            request = request.header("acp-connection-id", connection);
        }
        request.send()
    };
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}});
    let response = post(initialize, None).await.expect("answered");
    assert_eq!(response.version(), reqwest::Version::HTTP_2);
    assert_eq!(response.status(), StatusCode::OK);
    let id = response.headers()["acp-connection-id"].to_str().unwrap().to_string();
    let mut stream = h2
        .get(server.url())
        .header("accept", "text/event-stream")
        .header("acp-connection-id", &id)
        .send()
        .await
        .expect("answered");
    assert_eq!(
        (stream.version(), stream.status()),
        (reqwest::Version::HTTP_2, StatusCode::OK)
    );
    let new_session = request(1, "session/new", json!({"cwd": server.cwd(), "mcpServers": []}));
    let accepted = post(new_session, Some(&id)).await.expect("answered");
    assert_eq!(accepted.status(), StatusCode::ACCEPTED);
    let created = event(&mut stream, &mut String::new(), |message| message["id"] == 1).await;
    assert!(created["result"]["sessionId"].is_string(), "{created}");
    server.shut_down().await;
}

/// An HTTP/2 client (prior knowledge: one TCP connection for all its requests and streams).
fn h2_client() -> reqwest::Client {
    reqwest::Client::builder()
        .http2_prior_knowledge()
        .timeout(WAIT * 3)
        .build()
        .unwrap()
}

/// The SSE events of one stream.
struct Events {
    response: reqwest::Response,
    buffer: String,
}

impl Events {
    fn new(response: reqwest::Response) -> Events {
        assert_eq!(response.status(), StatusCode::OK, "the stream opened");
        Events {
            response,
            buffer: String::new(),
        }
    }

    /// The next message that satisfies `wanted`.
    async fn until(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        event(&mut self.response, &mut self.buffer, wanted).await
    }

    /// Whether the stream ends (after what is still in it) within [`WAIT`].
    async fn ends(&mut self) -> bool {
        tokio::time::timeout(WAIT, async { while let Ok(Some(_)) = self.response.chunk().await {} })
            .await
            .is_ok()
    }
}

/// One ACP connection over Streamable HTTP as a client drives it: its id, the bearer token it
/// shows on every request (if any), and its connection-scoped stream, open.
struct Connection {
    url: String,
    cwd: String,
    client: reqwest::Client,
    id: String,
    bearer: Option<String>,
    events: Events,
    next_id: i64,
}

impl Connection {
    /// `initialize` with `token` (then shown on every request), and the connection's stream.
    async fn open(server: &Server, token: Option<&str>) -> Connection {
        Connection::open_with(server, server.http.clone(), token).await
    }

    /// [`open`](Self::open) with `client`.
    async fn open_with(server: &Server, client: reqwest::Client, token: Option<&str>) -> Connection {
        let bearer = token.map(|token| format!("Bearer {token}"));
        let (status, response) = initialize_with(server, &client, bearer.as_deref()).await;
        assert_eq!(status, StatusCode::OK, "initialize: {}", response.1);
        let id = response.0.expect("a connection id");
        let mut opening = client
            .get(server.url())
            .header("accept", "text/event-stream")
            .header("acp-connection-id", &id);
        if let Some(bearer) = &bearer {
            opening = opening.header("authorization", bearer);
        }
        let events = Events::new(opening.send().await.expect("answered"));
        Connection {
            url: server.url(),
            cwd: server.cwd(),
            client,
            id,
            bearer,
            events,
            next_id: 0,
        }
    }

    /// A request to the endpoint with this connection's headers (and `session`'s).
    fn request(&self, method: reqwest::Method, session: Option<&str>) -> reqwest::RequestBuilder {
        let mut request = self
            .client
            .request(method, &self.url)
            .header("acp-connection-id", &self.id);
        if let Some(bearer) = &self.bearer {
            request = request.header("authorization", bearer);
        }
        if let Some(session) = session {
            request = request.header("acp-session-id", session);
        }
        request
    }

    /// POSTs the next request, `method` with `params` (about `session`, if any); the status
    /// and the request's id.
    async fn send(&mut self, method: &str, params: Value, session: Option<&str>) -> (StatusCode, i64) {
        self.next_id += 1;
        let response = self
            .request(reqwest::Method::POST, session)
            .header("content-type", "application/json")
            .body(request(self.next_id, method, params).to_string())
            .send()
            .await
            .expect("answered");
        (response.status(), self.next_id)
    }

    /// A request not about a session, and its answer (read from the connection's stream).
    async fn call(&mut self, method: &str, params: Value) -> Value {
        let (status, id) = self.send(method, params, None).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{method}");
        self.events
            .until(|message| message["id"] == id && message.get("method").is_none())
            .await
    }

    async fn new_session(&mut self) -> Value {
        let cwd = self.cwd.clone();
        self.call("session/new", json!({"cwd": cwd, "mcpServers": []})).await
    }

    /// `authenticate` with a bearer token; the answer.
    async fn authenticate(&mut self, token: &str) -> Value {
        let params = json!({"methodId": "bearer", "_meta": {"agentacp": {"token": token}}});
        self.call("authenticate", params).await
    }

    /// `session`'s stream.
    async fn session_events(&self, session: &str) -> Events {
        let opening = self
            .request(reqwest::Method::GET, Some(session))
            .header("accept", "text/event-stream");
        Events::new(opening.send().await.expect("answered"))
    }

    /// Prompts `text` in a new session; the session's stream and the prompt's id.
    async fn prompt_in_new_session(&mut self, text: &str) -> (Events, i64) {
        let session = self.new_session().await["result"]["sessionId"]
            .as_str()
            .expect("a session")
            .to_string();
        let events = self.session_events(&session).await;
        let params = json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]});
        let (status, id) = self.send("session/prompt", params, Some(&session)).await;
        assert_eq!(status, StatusCode::ACCEPTED);
        (events, id)
    }

    /// Starts `/wait` in a new session; returns once the turn runs.
    async fn start_waiting_turn(&mut self) -> (Events, i64) {
        let (mut events, id) = self.prompt_in_new_session("/wait").await;
        let running = events.until(|message| message["method"] == "session/update").await;
        assert_eq!(running["params"]["update"]["content"]["text"], "waiting", "{running}");
        (events, id)
    }
}

/// POSTs `initialize` with `client` (and `bearer`); the status, and the connection's id with
/// the body.
async fn initialize_with(
    server: &Server,
    client: &reqwest::Client,
    bearer: Option<&str>,
) -> (StatusCode, (Option<String>, String)) {
    let message = request(0, "initialize", json!({"protocolVersion": 1}));
    let mut posting = client
        .post(server.url())
        .header("content-type", "application/json")
        .body(message.to_string());
    if let Some(bearer) = bearer {
        posting = posting.header("authorization", bearer);
    }
    let response = posting.send().await.expect("answered");
    let status = response.status();
    let id = response
        .headers()
        .get("acp-connection-id")
        .map(|id| id.to_str().unwrap().to_string());
    (status, (id, response.text().await.unwrap_or_default()))
}

/// As over WebSocket: a connection opened without a token is served nothing but `initialize`
/// and `authenticate` until it authenticates; then it acts as the token's identity, and every
/// record from its login on names it.
#[tokio::test]
async fn a_connection_opened_without_a_token_authenticates_with_authenticate() {
    let server = Server::start(|options| options.tokens(tokens())).await;
    let mut peer = Connection::open(&server, None).await;
    let refused = peer.new_session().await;
    assert_eq!(refused["error"]["code"], -32000, "{refused}");
    let wrong = peer.authenticate("not-a-token").await;
    assert_eq!(wrong["error"]["code"], -32000, "{wrong}");
    assert!(
        !wrong.to_string().contains("not-a-token"),
        "the answer repeats the token: {wrong}"
    );
    let admitted = peer.authenticate(BOB).await;
    assert!(admitted.get("result").is_some(), "{admitted}");
    let (mut events, prompt) = peer.prompt_in_new_session("hi").await;
    let said = events.until(|message| message["method"] == "session/update").await;
    assert_eq!(said["params"]["update"]["content"]["text"], "hello bob", "{said}");
    let answer = events.until(|message| message["id"] == prompt).await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let records = server.audited();
    let login = records
        .iter()
        .position(|r| r["action"] == "auth.login")
        .expect("the login is audited");
    assert_eq!(records[login]["actor"]["id"], "bob", "{}", records[login]);
    for record in &records[login..] {
        assert_eq!(record["metadata"]["aip44"]["identity"], "bob", "{record}");
    }
    server.shut_down().await;
}

/// As over WebSocket: a connection that does not authenticate within the auth timeout is
/// ended (its stream closes, its id is forgotten).
#[tokio::test]
async fn a_connection_that_does_not_authenticate_in_time_is_ended() {
    let server = Server::start(|options| ListenOptions {
        auth_timeout: Duration::from_millis(300),
        ..options.tokens(tokens())
    })
    .await;
    let mut idle = Connection::open(&server, None).await;
    assert!(idle.events.ends().await, "an unauthenticated connection stayed open");
    let (status, _) = idle.send("session/list", json!({}), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "the connection is forgotten");
    server.shut_down().await;
}

/// As over WebSocket: a token revoked from the token file cancels the running turn of the
/// connection it opened (audited `auth.revoked`), and its next request is refused `401`.
#[tokio::test]
async fn a_revoked_token_cancels_its_running_turn_and_is_refused_on_the_next_request() {
    let (_dir, store, file) = token_file(&[("alice", ALICE), ("bob", BOB)]);
    let server = Server::start(|options| options.tokens(store)).await;
    let mut alice = Connection::open(&server, Some(ALICE)).await;
    let (mut events, prompt) = alice.start_waiting_turn().await;
    write_tokens(&file, &[("bob", BOB)]);
    let ended = events.until(|message| message["id"] == prompt).await;
    assert_eq!(ended["result"]["stopReason"], "cancelled", "{ended}");
    assert!(server.recorded("auth.revoked").await, "the revocation is audited");
    let (status, _) = alice.send("session/list", json!({}), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    server.shut_down().await;
}

/// As over WebSocket: past the most connections a new client is answered `503` with a
/// sentence, and the connections in are served on.
#[tokio::test]
async fn connections_over_the_limit_get_503_and_the_others_are_served() {
    // One TCP connection (HTTP/2) and its ACP connection: both slots.
    let server = Server::start(|options| ListenOptions {
        max_connections: 2,
        ..options
    })
    .await;
    let mut first = Connection::open_with(&server, h2_client(), None).await;
    let (status, (_, body)) = initialize_with(&server, &server.http, None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(body.contains("too many connections"), "{body}");
    let session = first.new_session().await;
    assert!(session["result"]["sessionId"].is_string(), "{session}");
    server.shut_down().await;
}

/// As over WebSocket: one address holds at most its limit of unauthenticated places (`429`
/// after), a token gets in over it, and a connection that authenticates gives its places
/// back. Over HTTP the TCP connection its requests came on kept its place after the
/// `authenticate`, so an address with one such client had one place fewer for good.
#[tokio::test]
async fn one_address_holds_no_more_unauthenticated_connections_than_its_limit() {
    let server = Server::start(|options| ListenOptions {
        max_unauthenticated_per_address: 2,
        ..options.tokens(tokens())
    })
    .await;
    // Its TCP connection and its ACP connection: the address's two places.
    let mut first = Connection::open_with(&server, h2_client(), None).await;
    let (status, (_, body)) = initialize_with(&server, &h2_client(), None).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    let mut alice = Connection::open_with(&server, h2_client(), Some(ALICE)).await;
    assert!(alice.new_session().await["result"]["sessionId"].is_string());
    let admitted = first.authenticate(BOB).await;
    assert!(admitted.get("result").is_some(), "{admitted}");
    assert!(first.new_session().await["result"]["sessionId"].is_string());
    let mut second = Connection::open_with(&server, h2_client(), None).await;
    second.new_session().await;
    let (status, (_, body)) = initialize_with(&server, &h2_client(), None).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{body}");
    server.shut_down().await;
}

/// A browser origin on the list is served; no CORS is: a preflight (`OPTIONS`) is `405`
/// with `Allow`, and no answer carries `Access-Control-*` headers.
#[tokio::test]
async fn an_allowed_origin_is_served_and_cors_is_not() {
    let server = Server::start(|options| ListenOptions {
        allowed_origins: vec!["https://editor.example".into()],
        ..options
    })
    .await;
    let origin = [("origin", "https://editor.example")];
    let message = request(0, "initialize", json!({"protocolVersion": 1}));
    let (status, headers, body) = server.post(&message, &origin).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let preflight = server
        .http
        .request(reqwest::Method::OPTIONS, server.url())
        .header("origin", "https://editor.example")
        .header("access-control-request-method", "POST")
        .send()
        .await
        .expect("answered");
    assert_eq!(preflight.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(preflight.headers()["allow"], "GET, POST, DELETE");
    for headers in [&headers, preflight.headers()] {
        assert!(
            !headers.keys().any(|name| name.as_str().starts_with("access-control-")),
            "{headers:?}"
        );
    }
    let evil = server
        .http
        .request(reqwest::Method::OPTIONS, server.url())
        .header("origin", "https://evil.example")
        .send()
        .await
        .expect("answered");
    assert_eq!(evil.status(), StatusCode::FORBIDDEN);
    server.shut_down().await;
}

/// As over WebSocket: on shutdown a running turn is answered `cancelled` on its stream, then
/// every stream ends and nothing more is accepted.
#[tokio::test]
async fn shutdown_answers_running_turns_then_ends_every_stream() {
    let server = Server::start(|options| options).await;
    let mut peer = Connection::open(&server, None).await;
    let (mut events, prompt) = peer.start_waiting_turn().await;
    let addr = server.addr;
    server.shut_down().await;
    let answer = events.until(|message| message["id"] == prompt).await;
    assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
    assert!(events.ends().await, "the session's stream outlived the listener");
    assert!(
        peer.events.ends().await,
        "the connection's stream outlived the listener"
    );
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "still accepting after shutdown"
    );
}

/// The HTTP twin of a WebSocket dropped mid-turn: a connection ended with `DELETE` cancels
/// its turn, recorded under its identity, and the audit chain verifies.
#[tokio::test]
async fn a_connection_deleted_mid_turn_cancels_the_turn_under_its_identity() {
    let server = Server::start(|options| options.tokens(tokens())).await;
    let mut alice = Connection::open(&server, Some(ALICE)).await;
    let (_events, _) = alice.start_waiting_turn().await;
    let deleted = alice.request(reqwest::Method::DELETE, None).send().await.unwrap();
    assert_eq!(deleted.status(), StatusCode::ACCEPTED);
    assert!(server.recorded("operator.interrupted").await, "{:?}", server.audited());
    let records = server.audited();
    let ended = records.iter().find(|r| r["action"] == "operator.interrupted").unwrap();
    assert_eq!(ended["metadata"]["aip44"]["identity"], "alice", "{ended}");
    server.shut_down().await;
}

/// Reads one HTTP/1.1 response from `stream`: its status line and body (by
/// `Content-Length`; none without one).
async fn read_response<S: tokio::io::AsyncBufRead + Unpin>(stream: &mut S) -> (String, String) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt};
    tokio::time::timeout(WAIT, async {
        let mut status = String::new();
        stream.read_line(&mut status).await.unwrap();
        let mut length = 0;
        loop {
            let mut line = String::new();
            stream.read_line(&mut line).await.unwrap();
            if line.trim().is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        stream.read_exact(&mut body).await.unwrap();
        (status.trim().to_string(), String::from_utf8(body).unwrap())
    })
    .await
    .expect("answered in time")
}

/// A TCP connection on which alice's `initialize` was POSTed by hand (HTTP/1.1, kept alive)
/// and answered `200`.
async fn initialized_by_hand(server: &Server) -> tokio::io::BufReader<tokio::net::TcpStream> {
    use tokio::io::AsyncWriteExt;
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let mut tcp = tokio::io::BufReader::new(tcp);
    let body = request(0, "initialize", json!({"protocolVersion": 1})).to_string();
    let post = format!(
        "POST /acp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
         Authorization: Bearer {ALICE}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(post.as_bytes()).await.unwrap();
    let (status, body) = read_response(&mut tcp).await;
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    tcp
}

/// A WebSocket upgrade request written by hand, with `token` as its bearer.
fn upgrade_by_hand(token: &str) -> String {
    format!(
        "GET /acp HTTP/1.1\r\nHost: localhost\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
         Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Authorization: Bearer {token}\r\n\r\n"
    )
}

/// A WebSocket upgrade that came after another request on the same kept-alive HTTP/1.1
/// connection was answered `400` (the listener looked only at the first request's head). It
/// is upgraded now, with the same checks as a first one: a wrong token is `401` and the
/// connection serves on; with alice's token the WebSocket is hers.
#[tokio::test]
async fn a_websocket_upgrade_after_another_request_on_the_connection_is_upgraded() {
    use futures_util::{SinkExt, StreamExt};
    use tokio::io::AsyncWriteExt;
    use tokio_tungstenite::tungstenite::Message;
    let server = Server::start(|options| options.tokens(tokens())).await;
    let mut tcp = initialized_by_hand(&server).await;
    tcp.write_all(upgrade_by_hand("wrong").as_bytes()).await.unwrap();
    let (status, body) = read_response(&mut tcp).await;
    assert_eq!(status, "HTTP/1.1 401 Unauthorized", "{body}");
    tcp.write_all(upgrade_by_hand(ALICE).as_bytes()).await.unwrap();
    let (status, _) = read_response(&mut tcp).await;
    assert_eq!(status, "HTTP/1.1 101 Switching Protocols");
    assert!(
        tcp.buffer().is_empty(),
        "nothing follows the 101 before the client speaks"
    );
    let role = tokio_tungstenite::tungstenite::protocol::Role::Client;
    let mut ws = tokio_tungstenite::WebSocketStream::from_raw_socket(tcp.into_inner(), role, None).await;
    let mut call = async |message: Value| {
        ws.send(Message::text(message.to_string())).await.unwrap();
        loop {
            let next = tokio::time::timeout(WAIT, ws.next()).await.expect("in time");
            if let Some(Ok(Message::Text(text))) = next {
                let answer: Value = serde_json::from_str(&text).unwrap();
                if answer["id"] == message["id"] {
                    return answer;
                }
            } else {
                panic!("the WebSocket closed: {next:?}");
            }
        }
    };
    let initialized = call(request(0, "initialize", json!({"protocolVersion": 1}))).await;
    assert!(initialized["result"]["protocolVersion"].is_number(), "{initialized}");
    let created = call(request(
        1,
        "session/new",
        json!({"cwd": server.cwd(), "mcpServers": []}),
    ))
    .await;
    assert!(created["result"]["sessionId"].is_string(), "{created}");
    let login = server
        .audited()
        .into_iter()
        .rfind(|r| r["action"] == "auth.login")
        .expect("the login is audited");
    assert_eq!(login["metadata"]["aip44"]["identity"], "alice", "{login}");
    server.shut_down().await;
}

/// With TLS the listener offers HTTP/2 and HTTP/1.1 by ALPN: an HTTP client that speaks both
/// gets HTTP/2 (it got HTTP/1.1: no ALPN was offered), one that speaks HTTP/1.1 only gets
/// that, and a WebSocket client still upgrades.
#[tokio::test]
async fn over_tls_http2_is_agreed_by_alpn_and_http1_and_websocket_still_served() {
    let certs = tempfile::tempdir().unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let files = agentacp::websocket::TlsFiles {
        cert: certs.path().join("cert.pem"),
        key: certs.path().join("key.pem"),
    };
    std::fs::write(&files.cert, certified.cert.pem()).unwrap();
    std::fs::write(&files.key, certified.signing_key.serialize_pem()).unwrap();
    let server = Server::start(|options| ListenOptions {
        tls: Some(files),
        ..options
    })
    .await;
    let url = format!("https://localhost:{}/acp", server.addr.port());
    let https = |http1_only: bool| {
        let builder = reqwest::Client::builder()
            .resolve("localhost", server.addr)
            .tls_certs_only([reqwest::Certificate::from_pem(certified.cert.pem().as_bytes()).unwrap()])
            .timeout(WAIT);
        let builder = if http1_only { builder.http1_only() } else { builder };
        builder.build().unwrap()
    };
    let initialize = request(0, "initialize", json!({"protocolVersion": 1})).to_string();
    for (http1_only, version) in [(false, reqwest::Version::HTTP_2), (true, reqwest::Version::HTTP_11)] {
        let response = https(http1_only)
            .post(&url)
            .header("content-type", "application/json")
            .body(initialize.clone())
            .send()
            .await
            .expect("answered");
        assert_eq!((response.version(), response.status()), (version, StatusCode::OK));
    }
    let mut tls = (*agentacp::websocket::client_config(&[certified.cert.der().clone()]).unwrap()).clone();
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    let connector = tokio_tungstenite::Connector::Rustls(std::sync::Arc::new(tls));
    let wss = url.replace("https://", "wss://");
    let connecting = tokio_tungstenite::connect_async_tls_with_config(wss, None, false, Some(connector));
    let (_, response) = tokio::time::timeout(WAIT, connecting)
        .await
        .expect("in time")
        .expect("a WebSocket client upgrades over TLS");
    assert_eq!(response.status(), 101);
    server.shut_down().await;
}

/// As over WebSocket: on a server whose every slot is taken, a client with a valid token
/// takes the slots of the oldest connection that has not authenticated (its TCP connection
/// dropped, its ACP connection ended); with none left to evict it is answered `503`.
#[tokio::test]
async fn a_token_on_a_full_server_evicts_the_oldest_unauthenticated_connection() {
    let server = Server::start(|options| ListenOptions {
        max_connections: 4,
        ..options.tokens(tokens())
    })
    .await;
    // Its TCP connection and its ACP connection: the unauthenticated share (half the slots).
    let mut oldest = Connection::open_with(&server, h2_client(), None).await;
    let (status, (_, body)) = initialize_with(&server, &h2_client(), None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "over the share: {body}");
    // The other half taken by bob.
    let _bob = Connection::open_with(&server, h2_client(), Some(BOB)).await;
    let mut alice = Connection::open_with(&server, h2_client(), Some(ALICE)).await;
    assert!(oldest.events.ends().await, "the evicted connection's stream ended");
    let (status, _) = oldest.send("session/list", json!({}), None).await;
    assert!(
        status == StatusCode::NOT_FOUND || status == StatusCode::SERVICE_UNAVAILABLE,
        "the evicted connection is gone: {status}"
    );
    assert!(alice.new_session().await["result"]["sessionId"].is_string());
    let bearer = format!("Bearer {ALICE}");
    let (status, (_, body)) = initialize_with(&server, &h2_client(), Some(&bearer)).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "none left to evict: {body}");
    server.shut_down().await;
}

/// As a slow WebSocket upgrade is dropped: a body that does not arrive within the handshake
/// time is `408`, and a request head left half-sent on a kept-alive connection closes it.
#[tokio::test]
async fn a_slow_body_is_408_and_a_half_sent_head_closes_the_connection() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = Server::start(|options| ListenOptions {
        handshake_timeout: Duration::from_millis(300),
        ..options
    })
    .await;
    let body = request(0, "initialize", json!({"protocolVersion": 1})).to_string();
    let post = format!(
        "POST /acp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    // A first request answered at once (no agent involved): the connection is kept alive.
    let first = "GET /acp HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let mut tcp = tokio::io::BufReader::new(tokio::net::TcpStream::connect(server.addr).await.unwrap());
    tcp.write_all(first.as_bytes()).await.unwrap();
    assert_eq!(read_response(&mut tcp).await.0, "HTTP/1.1 406 Not Acceptable");
    // A POST whose body is cut short.
    tcp.write_all(format!("{post}{}", &body[..10]).as_bytes())
        .await
        .unwrap();
    let (status, said) = read_response(&mut tcp).await;
    assert_eq!(status, "HTTP/1.1 408 Request Timeout", "{said}");
    // Half a head on a kept-alive connection: closed after the handshake time.
    let mut tcp = tokio::io::BufReader::new(tokio::net::TcpStream::connect(server.addr).await.unwrap());
    tcp.write_all(first.as_bytes()).await.unwrap();
    assert_eq!(read_response(&mut tcp).await.0, "HTTP/1.1 406 Not Acceptable");
    tcp.write_all(b"GET /acp HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(WAIT, tcp.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "a half-sent head kept its connection open");
    server.shut_down().await;
}

/// The RFD names the connection on a WebSocket upgrade's `101` too (`Acp-Connection-Id`), as on
/// an `initialize` POST's `200`; ours said nothing there. Both ways to upgrade are checked: an
/// upgrade that opens its TCP connection, and one after a POST on a kept-alive one.
#[tokio::test]
async fn the_101_of_a_websocket_upgrade_names_a_fresh_connection() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let server = Server::start(|options| options.tokens(tokens())).await;
    let is_an_id = |id: &str| id.len() == 32 && id.bytes().all(|byte| byte.is_ascii_hexdigit());
    let mut ids = Vec::new();
    for _ in 0..2 {
        let mut upgrade = format!("ws://{}/acp", server.addr).into_client_request().unwrap();
        let bearer = format!("Bearer {ALICE}").parse().unwrap();
        upgrade.headers_mut().insert("authorization", bearer);
        let connecting = tokio_tungstenite::connect_async(upgrade);
        let (_ws, response) = tokio::time::timeout(WAIT, connecting).await.expect("in time").unwrap();
        let id = response
            .headers()
            .get("acp-connection-id")
            .expect("an Acp-Connection-Id on the 101");
        ids.push(id.to_str().unwrap().to_string());
    }
    // After a POST on the same TCP connection (hyper's upgrade, not the first-request path).
    let mut tcp = initialized_by_hand(&server).await;
    tcp.write_all(upgrade_by_hand(ALICE).as_bytes()).await.unwrap();
    let head = tokio::time::timeout(WAIT, async {
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            tcp.read_line(&mut line).await.unwrap();
            if line.trim().is_empty() {
                return head;
            }
            head.push(line.trim().to_string());
        }
    })
    .await
    .expect("the 101 in time");
    assert_eq!(head[0], "HTTP/1.1 101 Switching Protocols", "{head:?}");
    let named = head.iter().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("acp-connection-id")
            .then(|| value.trim().to_string())
    });
    ids.push(named.unwrap_or_else(|| panic!("an Acp-Connection-Id on the 101: {head:?}")));
    assert!(ids.iter().all(|id| is_an_id(id)), "{ids:?}");
    assert!(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2], "{ids:?}");
}
