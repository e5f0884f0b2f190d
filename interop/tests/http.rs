//! Issue #47: the official Rust SDK's Streamable HTTP client (`agent-client-protocol-http` 5,
//! `HttpClient`) drives `examples/governed-server`, run as a process with `--listen`: the
//! `/acp` endpoint that serves WebSocket serves Streamable HTTP too (POST, SSE streams,
//! DELETE), and the same client's WebSocket profile on that endpoint. A prompt streams its
//! updates, a permission request is answered (over a POST), a running turn is cancelled;
//! with tokens, the bearer on every request is the identity.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, InitializeRequest, NewSessionRequest, PermissionOptionKind, PromptRequest,
    RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse, SelectedPermissionOutcome,
    SessionNotification, StopReason, TextContent,
};
use agent_client_protocol::{Agent, Client};
use agent_client_protocol_http::HttpClient;
use interop::websocket::{WsServer, test_token};
use interop::{AgentDirs, example_binary};
use serde_json::Value;
use tokio::sync::mpsc;

/// The bound on every wait.
const WAIT: Duration = Duration::from_secs(30);

/// The server's base URL for the HTTP client (it adds `/acp`).
fn base_url(server: &WsServer) -> String {
    server
        .url()
        .replace("ws://", "http://")
        .trim_end_matches("/acp")
        .to_string()
}

/// What the client saw: each update's kind and text, and the permission requests it answered.
#[derive(Default)]
struct Seen {
    updates: Vec<(String, String)>,
    permissions: usize,
}

fn prompt(session: &str, text: &str) -> PromptRequest {
    PromptRequest::new(session.to_string(), vec![ContentBlock::Text(TextContent::new(text))])
}

/// Runs `main` on an SDK client connected through `http`, answering permission requests
/// "allow once" and recording updates (each also sent on `ticks`).
async fn with_client<R>(
    http: HttpClient,
    seen: Arc<Mutex<Seen>>,
    ticks: mpsc::UnboundedSender<String>,
    main: impl AsyncFnOnce(ConnectionTo<Agent>) -> Result<R, agent_client_protocol::Error>,
) -> Result<R, agent_client_protocol::Error> {
    let (on_update, on_permission) = (seen.clone(), seen);
    let running = Client
        .v1()
        .name("http-interop")
        .on_receive_notification(
            async move |notification: SessionNotification, _cx| {
                let update = serde_json::to_value(&notification.update).unwrap_or(Value::Null);
                let kind = update["sessionUpdate"].as_str().unwrap_or_default().to_string();
                let text = update["content"]["text"].as_str().unwrap_or_default().to_string();
                let _ = ticks.send(text.clone());
                on_update.lock().unwrap().updates.push((kind, text));
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: RequestPermissionRequest, responder, _cx| {
                on_permission.lock().unwrap().permissions += 1;
                let allow = request
                    .options
                    .iter()
                    .find(|option| option.kind == PermissionOptionKind::AllowOnce)
                    .map(|option| option.option_id.clone());
                let outcome = match allow {
                    Some(id) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id)),
                    None => RequestPermissionOutcome::Cancelled,
                };
                responder.respond(RequestPermissionResponse::new(outcome))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(http, main);
    tokio::time::timeout(Duration::from_secs(120), running)
        .await
        .expect("the SDK client finished in time")
}

/// Drives a prompt, a governed write (its permission answered "allow once") and a
/// cancelled turn through `http`; fails naming `profile` and the server's stderr.
async fn prompts_answers_a_permission_and_cancels(
    http: HttpClient,
    project: PathBuf,
    server: &WsServer,
    profile: &str,
) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (ticks, mut ticked) = mpsc::unbounded_channel();
    let outcome = with_client(http, seen.clone(), ticks, async move |cx| {
        let initialized = cx
            .send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        let session = cx
            .send_request(NewSessionRequest::new(project))
            .block_task()
            .await?
            .session_id;
        let session = session.to_string();
        let echoed = cx
            .send_request(prompt(&session, "hello over http"))
            .block_task()
            .await?;
        let tool = "/tool write-file {\"path\": \"note.txt\", \"content\": \"hi\"}";
        let approved = cx.send_request(prompt(&session, tool)).block_task().await?;
        // A turn that runs until cancelled: cancelled once its first tick arrived.
        let forever = cx.send_request(prompt(&session, "/forever"));
        let turn = tokio::spawn(forever.block_task());
        loop {
            match tokio::time::timeout(WAIT, ticked.recv()).await {
                Ok(Some(text)) if text.starts_with("tick") => break,
                Ok(Some(_)) => {}
                other => panic!("no tick arrived: {other:?}"),
            }
        }
        cx.send_notification(CancelNotification::new(session.clone()))?;
        let cancelled = tokio::time::timeout(WAIT, turn)
            .await
            .expect("the cancelled turn was answered in time")
            .expect("the turn's task")?;
        Ok((
            initialized,
            echoed.stop_reason,
            approved.stop_reason,
            cancelled.stop_reason,
        ))
    })
    .await;
    let (initialized, echoed, approved, cancelled) =
        outcome.unwrap_or_else(|error| panic!("{profile}: the SDK client failed: {error:?}\n{}", server.stderr_text()));
    assert_eq!(initialized.protocol_version, ProtocolVersion::V1, "{profile}");
    assert_eq!(echoed, StopReason::EndTurn, "{profile}");
    assert_eq!(approved, StopReason::EndTurn, "{profile}");
    assert_eq!(cancelled, StopReason::Cancelled, "{profile}");
    let seen = seen.lock().unwrap();
    assert!(
        seen.updates
            .iter()
            .any(|(kind, text)| kind == "agent_message_chunk" && text.contains("hello over http")),
        "{profile}: the echo streamed: {:?}",
        seen.updates
    );
    assert_eq!(seen.permissions, 1, "{profile}: the write asked once, and was answered");
    assert!(
        seen.updates.iter().any(|(kind, _)| kind == "tool_call"),
        "{profile}: the tool call was reported: {:?}",
        seen.updates
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_http_client_prompts_answers_a_permission_and_cancels() {
    let dirs = AgentDirs::new();
    let server = WsServer::start(&example_binary("governed-server"), &dirs.env());
    let http = HttpClient::new(base_url(&server)).expect("a valid URL");
    prompts_answers_a_permission_and_cancels(http, dirs.project("p"), &server, "Streamable HTTP").await;
    // Its WebSocket profile, on the same endpoint.
    let websocket = HttpClient::new(base_url(&server).replace("http://", "ws://")).expect("a valid URL");
    prompts_answers_a_permission_and_cancels(websocket, dirs.project("q"), &server, "WebSocket").await;
    assert!(!server.stderr_text().contains("panicked"), "{}", server.stderr_text());
}

/// With tokens, the bearer token on every request is who the connection is; a wrong one is
/// refused before anything reaches the operator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tokens_the_bearer_on_each_request_is_the_identity_and_a_wrong_one_is_refused() {
    let dirs = AgentDirs::new();
    let project: PathBuf = dirs.project("p");
    let token = test_token();
    let mut env = dirs.env();
    env.push(("AGENTACP_TOKEN", token.clone().into()));
    env.push(("AGENTACP_TOKEN_IDENTITY", "http-runner".into()));
    let server = WsServer::start(&example_binary("governed-server"), &env);
    let client = |token: &str| {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::AUTHORIZATION,
            format!("Bearer {token}").parse().expect("a header value"),
        );
        HttpClient::builder(base_url(&server))
            .configure_http(|http| http.default_headers(headers))
            .build()
            .expect("a client")
    };
    let (ticks, _) = mpsc::unbounded_channel();
    let session = with_client(client(&token), Arc::default(), ticks.clone(), async move |cx| {
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await?;
        Ok(cx
            .send_request(NewSessionRequest::new(project))
            .block_task()
            .await?
            .session_id)
    })
    .await;
    assert!(session.is_ok(), "{session:?}\n{}", server.stderr_text());

    let refused = with_client(client("not-the-token"), Arc::default(), ticks, async move |cx| {
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await
    })
    .await;
    let error = format!("{:?}", refused.expect_err("a wrong token is refused"));
    assert!(error.contains("401"), "{error}");
}
