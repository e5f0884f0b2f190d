//! Issue #47: Streamable HTTP on the WebSocket listener's `/acp` endpoint: the RFD's status
//! codes, the streams, authentication, and the bounds (a client that never opens its stream
//! neither hangs the server nor grows its memory). The client is reqwest; every wait is
//! bounded.

use std::time::Duration;

use agentacp::prelude::*;
use agentacp::server::SessionContext;
use agentacp::server::websocket::ListenOptions;
use common::listening::{ALICE, BOB, Listening, tokens};
use reqwest::StatusCode;

mod common;

#[acp_operator(manifest = "tests/operators/test-remote/ACP.md")]
struct Remote;

impl RemoteServer for Remote {
    async fn prompt(
        &self,
        turn: &mut Turn<'_, GovernanceAware>,
        request: wire::PromptRequest,
    ) -> Result<wire::StopReason> {
        let text = serde_json::to_value(&request.prompt).unwrap_or_default().to_string();
        if text.contains("/flood") {
            // Streams until cancelled (or its connection is given up).
            let chunk = "x".repeat(1024);
            while !turn.is_cancelled() {
                if turn.message(&chunk).await.is_err() {
                    break;
                }
            }
            return Ok(wire::StopReason::Cancelled);
        }
        let who = turn.session().identity().map(|id| id.to_string()).unwrap_or_default();
        turn.message(&format!("hello {who}")).await?;
        Ok(wire::StopReason::EndTurn)
    }

    async fn load_session(
        &self,
        _session: &SessionContext,
        _request: wire::LoadSessionRequest,
    ) -> Result<wire::LoadSessionResponse> {
        Ok(wire::LoadSessionResponse::default())
    }

    async fn extension(&self, _method: &str, _params: Value) -> Result<Value> {
        Ok(json!({}))
    }

    async fn extension_notification(&self, _method: &str, _params: Value) -> Result<()> {
        Ok(())
    }

    async fn authenticate(&self, _request: wire::AuthenticateRequest) -> Result<wire::AuthenticateResponse> {
        Ok(wire::AuthenticateResponse::default())
    }
}

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
    let (status, _, body) = server.post(&prompt, &[("acp-connection-id", id)]).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "a session-scoped method needs Acp-Session-Id: {body}"
    );
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
