//! The official Rust SDK's Streamable HTTP client (`agent-client-protocol-http` 5,
//! `HttpClient`) running one scripted conversation: `initialize`, `session/new`, an echo, a
//! tool call whose permission request it answers "allow once", and a turn it cancels once the
//! turn's first chunk arrived. `tests/http.rs` drives `governed-server` with it,
//! `tests/http_servers.rs` the SDK agents' HTTP servers (the harness's known-good client).

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
use serde_json::Value;
use tokio::sync::mpsc;

/// The bound on every wait.
pub const WAIT: Duration = Duration::from_secs(30);

/// What the client saw: each update's kind and text, and the permission requests it answered.
#[derive(Debug, Default)]
pub struct Seen {
    /// `(sessionUpdate, content.text)` of each update, in arrival order.
    pub updates: Vec<(String, String)>,
    /// How many permission requests it answered.
    pub permissions: usize,
}

/// The prompts of one conversation, in the agent's own words.
pub struct Script<'a> {
    /// A prompt the agent echoes; its echo contains `echoed`.
    pub echo: &'a str,
    pub echoed: &'a str,
    /// A prompt that asks for a permission (answered "allow once") and ends `end_turn`; `None`
    /// skips that turn.
    pub permission: Option<&'a str>,
    /// A prompt that runs until cancelled; cancelled once a chunk starting with `started`
    /// arrived.
    pub forever: &'a str,
    pub started: &'a str,
}

/// How each turn of a [`Script`] ended.
#[derive(Debug)]
pub struct Outcome {
    pub protocol_version: ProtocolVersion,
    pub echoed: StopReason,
    /// `None` when the script has no permission turn.
    pub approved: Option<StopReason>,
    pub cancelled: StopReason,
}

fn prompt(session: &str, text: &str) -> PromptRequest {
    PromptRequest::new(session.to_string(), vec![ContentBlock::Text(TextContent::new(text))])
}

/// Runs `main` on an SDK client connected through `http`, answering permission requests
/// "allow once" and recording updates (the text of each also sent on `ticks`).
pub async fn with_client<R>(
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

/// Runs `script` through `http` with a session in `project`: what each turn answered, and
/// what the client saw.
pub async fn converse(
    http: HttpClient,
    project: PathBuf,
    script: &Script<'_>,
) -> (Result<Outcome, agent_client_protocol::Error>, Seen) {
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
            .session_id
            .to_string();
        let echoed = cx.send_request(prompt(&session, script.echo)).block_task().await?;
        let approved = match script.permission {
            Some(text) => Some(cx.send_request(prompt(&session, text)).block_task().await?.stop_reason),
            None => None,
        };
        // A turn that runs until cancelled: cancelled once its first chunk arrived.
        let forever = cx.send_request(prompt(&session, script.forever));
        let turn = tokio::spawn(forever.block_task());
        loop {
            match tokio::time::timeout(WAIT, ticked.recv()).await {
                Ok(Some(text)) if text.starts_with(script.started) => break,
                Ok(Some(_)) => {}
                other => panic!("no `{}` chunk arrived: {other:?}", script.started),
            }
        }
        cx.send_notification(CancelNotification::new(session.clone()))?;
        let cancelled = tokio::time::timeout(WAIT, turn)
            .await
            .expect("the cancelled turn was answered in time")
            .expect("the turn's task")?;
        Ok(Outcome {
            protocol_version: initialized.protocol_version,
            echoed: echoed.stop_reason,
            approved,
            cancelled: cancelled.stop_reason,
        })
    })
    .await;
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    (outcome, seen)
}

/// Asserts that the conversation went as a [`Script`] says: v1, `end_turn` twice then
/// `cancelled`, the echo streamed, one permission request answered, a `tool_call` reported
/// (none without a permission turn).
/// `context` names the run and carries the server's stderr.
pub fn check(outcome: Result<Outcome, agent_client_protocol::Error>, seen: &Seen, script: &Script<'_>, context: &str) {
    let outcome = outcome.unwrap_or_else(|error| panic!("{context}: the SDK client failed: {error:?}"));
    assert_eq!(outcome.protocol_version, ProtocolVersion::V1, "{context}");
    assert_eq!(outcome.echoed, StopReason::EndTurn, "{context}");
    let asks = usize::from(script.permission.is_some());
    let approved = script.permission.map(|_| StopReason::EndTurn);
    assert_eq!(outcome.approved, approved, "{context}");
    assert_eq!(outcome.cancelled, StopReason::Cancelled, "{context}");
    let echo: String = seen
        .updates
        .iter()
        .filter(|(kind, _)| kind == "agent_message_chunk")
        .map(|(_, text)| text.as_str())
        .collect();
    assert!(
        echo.contains(script.echoed),
        "{context}: the echo streamed: {:?}",
        seen.updates
    );
    assert_eq!(
        seen.permissions, asks,
        "{context}: the tool asked once, and was answered"
    );
    assert_eq!(
        seen.updates.iter().any(|(kind, _)| kind == "tool_call"),
        asks == 1,
        "{context}: the tool call was reported: {:?}",
        seen.updates
    );
}
