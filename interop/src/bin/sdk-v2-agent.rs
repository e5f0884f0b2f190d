//! A small ACP protocol v2 agent written only with the official Rust SDK
//! (`agent-client-protocol` 5, `Agent.v2()`, feature `unstable_protocol_v2`), for
//! `tests/v2_sdk.rs`: the known-good v2 peer that the SDK v2 clients (and our client) drive.
//!
//! Each prompt is acknowledged with the id of the user message it inserts (`messageId`),
//! then the turn runs as updates: the `user_message`, `state_update` `running`, and
//! - for a text containing `/wait`: the chunk `waiting`, then nothing until
//!   `session/cancel`; `state_update` `idle` `cancelled`;
//! - for any other text: the words of `echo: TEXT` as `agent_message_chunk`s of one
//!   message id, a `tool_call_update` that creates the tool call `write-file` (`pending`),
//!   `state_update` `requires_action`, `session/request_permission` (`allow` allow_once,
//!   `reject` reject_once) with the tool call as its subject, `running`, the tool call
//!   `completed` (or `failed`) and the chunk ` approved` (or ` rejected`); `idle`
//!   `end_turn`.
//!
//! `session/resume` with `replayFrom: {type: "start"}` replays every update of the session
//! except state updates, then sends an `idle` snapshot, then answers. `session/list` lists the
//! sessions of this connection (those in `cwd` when it is given), as v2's baseline asks.
//! `session/new` with a relative `cwd` is refused (-32602).
//!
//! `--both` serves v1 and v2 on the same stdio through the SDK's `Agent.protocol_router()`:
//! an `initialize` asking for v1 gets a minimal v1 agent (`v1 echo: TEXT`, `end_turn`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v2::schema::{
    AbsolutePath, AgentCapabilities, CancelSessionNotification, CloseSessionRequest, CloseSessionResponse,
    ContentBlock, ContentChunk, IdleStateUpdate, Implementation, InitializeRequest, InitializeResponse,
    ListSessionsRequest, ListSessionsResponse, NewSessionRequest, NewSessionResponse, PermissionOption,
    PermissionOptionKind, PromptRequest, PromptResponse, ReplayFrom, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionSubject, RequiresActionStateUpdate, ResumeSessionRequest,
    ResumeSessionResponse, RunningStateUpdate, SessionCapabilities, SessionId, SessionInfo, SessionUpdate, StateUpdate,
    StopReason, TextContent, ToolCallPermissionSubject, ToolCallStatus, ToolCallUpdate, ToolKind,
    UpdateSessionNotification, UserMessage,
};
use agent_client_protocol::v2::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, ConnectTo, Stdio};
use tokio::sync::Notify;

/// The agent's name in `initialize`.
const NAME: &str = "sdk-v2-agent-rust";

/// What the agent keeps per session: the updates to replay, and the signal that ends the
/// running turn (`session/cancel`).
struct Session {
    cwd: AbsolutePath,
    history: Vec<SessionUpdate>,
    cancel: Arc<Notify>,
}

/// The agent's state, one per connection.
#[derive(Clone, Default)]
struct State {
    sessions: Arc<Mutex<HashMap<String, Session>>>,
    ids: Arc<AtomicU64>,
}

impl State {
    /// A fresh id `PREFIX-N`.
    fn next(&self, prefix: &str) -> String {
        format!("{prefix}-{}", self.ids.fetch_add(1, Ordering::Relaxed))
    }

    /// Sends `update` on `session`, recording it for replay unless it is a state update.
    fn emit(
        &self,
        cx: &ConnectionTo<Client>,
        session: &SessionId,
        update: SessionUpdate,
    ) -> agent_client_protocol::Result<()> {
        if !matches!(update, SessionUpdate::StateUpdate(_))
            && let Some(state) = self.lock().get_mut(&session.to_string())
        {
            state.history.push(update.clone());
        }
        cx.send_notification(UpdateSessionNotification::new(session.clone(), update))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        self.sessions.lock().expect("sessions lock")
    }
}

fn text_chunk(text: &str, message: &str) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(ContentChunk::new(
        ContentBlock::Text(TextContent::new(text)),
        message.to_string(),
    ))
}

fn state(update: StateUpdate) -> SessionUpdate {
    SessionUpdate::StateUpdate(update)
}

fn prompt_text(prompt: &[ContentBlock]) -> String {
    prompt
        .iter()
        .find_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// The echo turn: chunks, a tool call that asks for permission, the outcome.
async fn echo_turn(
    agent: &State,
    cx: &ConnectionTo<Client>,
    session: &SessionId,
    text: &str,
) -> agent_client_protocol::Result<StopReason> {
    let message = agent.next("agent-message");
    for (i, word) in format!("echo: {text}").split_whitespace().enumerate() {
        let word = if i == 0 { word.to_string() } else { format!(" {word}") };
        agent.emit(cx, session, text_chunk(&word, &message))?;
    }
    let call = agent.next("call");
    let pending = ToolCallUpdate::new(call.clone())
        .title("write-file")
        .kind(ToolKind::Edit)
        .status(ToolCallStatus::Pending);
    agent.emit(cx, session, SessionUpdate::ToolCallUpdate(pending))?;
    agent.emit(
        cx,
        session,
        state(StateUpdate::RequiresAction(RequiresActionStateUpdate::new())),
    )?;
    let request = RequestPermissionRequest::new(
        session.clone(),
        "write-file",
        vec![
            PermissionOption::new("allow", "Allow", PermissionOptionKind::AllowOnce),
            PermissionOption::new("reject", "Reject", PermissionOptionKind::RejectOnce),
        ],
    )
    .subject(RequestPermissionSubject::ToolCall(Box::new(
        ToolCallPermissionSubject::new(ToolCallUpdate::new(call.clone())),
    )));
    let answer = cx.send_request(request).block_task().await?;
    let approved = matches!(&answer.outcome,
        RequestPermissionOutcome::Selected(selected) if selected.option_id.to_string() == "allow");
    agent.emit(cx, session, state(StateUpdate::Running(RunningStateUpdate::new())))?;
    let status = if approved {
        ToolCallStatus::Completed
    } else {
        ToolCallStatus::Failed
    };
    agent.emit(
        cx,
        session,
        SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(call).status(status)),
    )?;
    let outcome = if approved { " approved" } else { " rejected" };
    agent.emit(cx, session, text_chunk(outcome, &message))?;
    Ok(StopReason::EndTurn)
}

/// Runs one accepted prompt to its `idle` state update.
async fn run_turn(
    agent: State,
    cx: ConnectionTo<Client>,
    session: SessionId,
    user: String,
    prompt: Vec<ContentBlock>,
) -> agent_client_protocol::Result<()> {
    let text = prompt_text(&prompt);
    agent.emit(
        &cx,
        &session,
        SessionUpdate::UserMessage(UserMessage::new(user).content(prompt)),
    )?;
    agent.emit(&cx, &session, state(StateUpdate::Running(RunningStateUpdate::new())))?;
    let stop = if text.contains("/wait") {
        let cancel = agent
            .lock()
            .get(&session.to_string())
            .map(|s| s.cancel.clone())
            .unwrap_or_default();
        agent.emit(&cx, &session, text_chunk("waiting", &agent.next("agent-message")))?;
        cancel.notified().await;
        StopReason::Cancelled
    } else {
        echo_turn(&agent, &cx, &session, &text).await?
    };
    agent.emit(
        &cx,
        &session,
        state(StateUpdate::Idle(IdleStateUpdate::new().stop_reason(stop))),
    )
}

/// The v2 agent.
fn v2_agent() -> impl ConnectTo<Client> {
    let agent = State::default();
    let (on_new, on_prompt, on_cancel, on_resume) = (agent.clone(), agent.clone(), agent.clone(), agent.clone());
    let on_list = agent;
    Agent
        .v2()
        .name(NAME)
        .on_receive_request(
            async move |_: InitializeRequest, responder: Responder<InitializeResponse>, _cx| {
                responder.respond(
                    InitializeResponse::new(
                        ProtocolVersion::V2,
                        Implementation::new(NAME, env!("CARGO_PKG_VERSION")),
                    )
                    .capabilities(AgentCapabilities::new().session(SessionCapabilities::new())),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |new: NewSessionRequest, responder: Responder<NewSessionResponse>, cx: ConnectionTo<Client>| {
                if !new.cwd.0.is_absolute() {
                    return responder.respond_with_error(agent_client_protocol::Error::invalid_params());
                }
                let id = SessionId::new(on_new.next("rust-v2-session"));
                let session = Session {
                    cwd: new.cwd,
                    history: Vec::new(),
                    cancel: Arc::default(),
                };
                on_new.lock().insert(id.to_string(), session);
                responder.respond(NewSessionResponse::new(id.clone()))?;
                on_new.emit(&cx, &id, state(StateUpdate::Idle(IdleStateUpdate::new())))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |prompt: PromptRequest, responder: Responder<PromptResponse>, cx: ConnectionTo<Client>| {
                if !on_prompt.lock().contains_key(&prompt.session_id.to_string()) {
                    return responder.respond_with_error(agent_client_protocol::Error::invalid_params());
                }
                let user = on_prompt.next("user-message");
                responder.respond(PromptResponse::new(user.clone()))?;
                let turn = run_turn(on_prompt.clone(), cx.clone(), prompt.session_id, user, prompt.prompt);
                cx.spawn(turn)
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |cancel: CancelSessionNotification, _cx: ConnectionTo<Client>| {
                if let Some(session) = on_cancel.lock().get(&cancel.session_id.to_string()) {
                    // Stores a permit when the turn is not waiting yet.
                    session.cancel.notify_one();
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |resume: ResumeSessionRequest,
                        responder: Responder<ResumeSessionResponse>,
                        cx: ConnectionTo<Client>| {
                let history = match on_resume.lock().get(&resume.session_id.to_string()) {
                    Some(session) => session.history.clone(),
                    None => return responder.respond_with_error(agent_client_protocol::Error::invalid_params()),
                };
                if matches!(resume.replay_from, Some(ReplayFrom::Start(_))) {
                    for update in history {
                        cx.send_notification(UpdateSessionNotification::new(resume.session_id.clone(), update))?;
                    }
                }
                on_resume.emit(
                    &cx,
                    &resume.session_id,
                    state(StateUpdate::Idle(IdleStateUpdate::new())),
                )?;
                responder.respond(ResumeSessionResponse::new())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |list: ListSessionsRequest, responder: Responder<ListSessionsResponse>, _cx| {
                let sessions = on_list
                    .lock()
                    .iter()
                    .filter(|(_, session)| list.cwd.as_ref().is_none_or(|cwd| *cwd == session.cwd))
                    .map(|(id, session)| SessionInfo::new(id.clone(), session.cwd.clone()))
                    .collect();
                responder.respond(ListSessionsResponse::new(sessions))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_: CloseSessionRequest, responder: Responder<CloseSessionResponse>, _cx| {
                responder.respond(CloseSessionResponse::new())
            },
            agent_client_protocol::on_receive_request!(),
        )
}

/// The v1 half of `--both`: `initialize`, `session/new`, and one chunk `v1 echo: TEXT` per
/// prompt, `end_turn`.
fn v1_agent() -> impl ConnectTo<Client> {
    use agent_client_protocol::v1::schema as v1;
    let sessions = Arc::new(AtomicU64::new(0));
    Agent
        .v1()
        .name(NAME)
        .on_receive_request(
            async move |_: v1::InitializeRequest, responder, _cx| {
                responder.respond(
                    v1::InitializeResponse::new(ProtocolVersion::V1)
                        .agent_info(v1::Implementation::new(NAME, env!("CARGO_PKG_VERSION"))),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_: v1::NewSessionRequest, responder, _cx| {
                let n = sessions.fetch_add(1, Ordering::Relaxed);
                responder.respond(v1::NewSessionResponse::new(format!("rust-v1-session-{n}")))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |prompt: v1::PromptRequest, responder, cx: agent_client_protocol::v1::ConnectionTo<Client>| {
                let text = prompt
                    .prompt
                    .iter()
                    .find_map(|block| match block {
                        v1::ContentBlock::Text(text) => Some(text.text.clone()),
                        _ => None,
                    })
                    .unwrap_or_default();
                cx.send_notification(v1::SessionNotification::new(
                    prompt.session_id,
                    v1::SessionUpdate::AgentMessageChunk(v1::ContentChunk::new(v1::ContentBlock::Text(
                        v1::TextContent::new(format!("v1 echo: {text}")),
                    ))),
                ))?;
                responder.respond(v1::PromptResponse::new(v1::StopReason::EndTurn))
            },
            agent_client_protocol::on_receive_request!(),
        )
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => Ok(v2_agent().connect_to(Stdio::new()).await?),
        [flag] if flag == "--both" => Ok(Agent
            .protocol_router()
            .with_v1(v1_agent())
            .with_v2(v2_agent())
            .connect_to(Stdio::new())
            .await?),
        _ => Err("usage: sdk-v2-agent [--both]".into()),
    }
}
