//! An ACP agent written only with the official Rust SDK (`agent-client-protocol` 5, protocol
//! v1) that offers what issue #16 adds to our client: `session/list` (one session per page),
//! `session/resume`, `session/close`, `session/delete`, modes (`ask`, `code`) with
//! `session/set_mode`, config options (`model`: `fast` / `smart`; `think`: boolean) with
//! `session/set_config_option`, slash commands (`available_commands_update` after
//! `session/new`), and the extension request `_sdk/echo` (answered with its params).
//!
//! Prompts: `/ext` asks the client `_sdk/ask` (params with a `_meta`) and says its answer as
//! JSON; `/switch` switches to mode `code` by itself (`current_mode_update`); anything else is
//! said back as `echo: TEXT`. For `tests/client_session_calls.rs`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AvailableCommand, AvailableCommandsUpdate, CloseSessionRequest, CloseSessionResponse,
    ContentBlock, ContentChunk, CurrentModeUpdate, DeleteSessionRequest, DeleteSessionResponse, Implementation,
    InitializeRequest, InitializeResponse, ListSessionsRequest, ListSessionsResponse, NewSessionRequest,
    NewSessionResponse, PromptRequest, PromptResponse, ResumeSessionRequest, ResumeSessionResponse,
    SessionCapabilities, SessionCloseCapabilities, SessionConfigOption, SessionConfigSelectOption,
    SessionDeleteCapabilities, SessionId, SessionInfo, SessionListCapabilities, SessionMode, SessionModeState,
    SessionNotification, SessionResumeCapabilities, SessionUpdate, SetSessionConfigOptionRequest,
    SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModeResponse, StopReason, TextContent,
};
use agent_client_protocol::{Agent, Client, Stdio, UntypedMessage};

/// Each session: its cwd, mode, model and `think`.
#[derive(Clone)]
struct Session {
    cwd: std::path::PathBuf,
    mode: String,
    model: String,
    think: bool,
}

type Sessions = Arc<Mutex<BTreeMap<String, Session>>>;

fn modes(current: &str) -> SessionModeState {
    SessionModeState::new(
        current.to_string(),
        vec![
            SessionMode::new("ask", "Ask"),
            SessionMode::new("code", "Code").description("Writes code"),
        ],
    )
}

fn config(session: &Session) -> Vec<SessionConfigOption> {
    vec![
        SessionConfigOption::select(
            "model",
            "Model",
            session.model.clone(),
            vec![
                SessionConfigSelectOption::new("fast", "Fast"),
                SessionConfigSelectOption::new("smart", "Smart"),
            ],
        ),
        SessionConfigOption::boolean("think", "Think", session.think),
    ]
}

fn notify(cx: &ConnectionTo<Client>, session: &str, update: SessionUpdate) -> agent_client_protocol::Result<()> {
    cx.send_notification(SessionNotification::new(SessionId::new(session.to_string()), update))
}

fn say(cx: &ConnectionTo<Client>, session: &str, text: &str) -> agent_client_protocol::Result<()> {
    let chunk = ContentChunk::new(ContentBlock::Text(TextContent::new(text)));
    notify(cx, session, SessionUpdate::AgentMessageChunk(chunk))
}

fn unknown(session: &SessionId) -> agent_client_protocol::Error {
    agent_client_protocol::Error::invalid_params().data(format!("no session {session}"))
}

fn text_of(prompt: &PromptRequest) -> String {
    prompt
        .prompt
        .iter()
        .find_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

#[tokio::main]
async fn main() -> agent_client_protocol::Result<()> {
    let sessions: Sessions = Arc::default();
    let (on_new, on_list, on_resume, on_close, on_delete, on_mode, on_config, on_prompt) = (
        sessions.clone(),
        sessions.clone(),
        sessions.clone(),
        sessions.clone(),
        sessions.clone(),
        sessions.clone(),
        sessions.clone(),
        sessions.clone(),
    );
    Agent
        .v1()
        .name("sdk-session-agent")
        .on_receive_request(
            async move |_: InitializeRequest, responder, _cx| {
                let sessions = SessionCapabilities::new()
                    .list(SessionListCapabilities::new())
                    .resume(SessionResumeCapabilities::new())
                    .close(SessionCloseCapabilities::new())
                    .delete(SessionDeleteCapabilities::new());
                responder.respond(
                    InitializeResponse::new(ProtocolVersion::V1)
                        .agent_capabilities(AgentCapabilities::new().session_capabilities(sessions))
                        .agent_info(Implementation::new("sdk-session-agent", env!("CARGO_PKG_VERSION"))),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: NewSessionRequest, responder, cx| {
                let session = Session {
                    cwd: request.cwd.clone(),
                    mode: "ask".into(),
                    model: "fast".into(),
                    think: false,
                };
                let id = {
                    let mut sessions = on_new.lock().expect("sessions lock");
                    let id = format!("sdk-session-{}", sessions.len());
                    sessions.insert(id.clone(), session.clone());
                    id
                };
                responder.respond(
                    NewSessionResponse::new(id.clone())
                        .modes(modes(&session.mode))
                        .config_options(config(&session)),
                )?;
                let commands = vec![
                    AvailableCommand::new("review", "Review a change"),
                    AvailableCommand::new("plan", "Plan the work"),
                ];
                notify(
                    &cx,
                    &id,
                    SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands)),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ListSessionsRequest, responder, _cx| {
                // One session per page; the cursor is the index of the next one.
                let all: Vec<SessionInfo> = on_list
                    .lock()
                    .expect("sessions lock")
                    .iter()
                    .filter(|(_, s)| request.cwd.as_ref().is_none_or(|cwd| &s.cwd == cwd))
                    .map(|(id, s)| SessionInfo::new(id.clone(), s.cwd.clone()).title(format!("Session {id}")))
                    .collect();
                let start: usize = request.cursor.as_deref().and_then(|c| c.parse().ok()).unwrap_or(0);
                let page = all.iter().skip(start).take(1).cloned().collect();
                let next = (start + 1 < all.len()).then(|| (start + 1).to_string());
                responder.respond(ListSessionsResponse::new(page).next_cursor(next))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: ResumeSessionRequest, responder, _cx| {
                let session = on_resume
                    .lock()
                    .expect("sessions lock")
                    .get(&request.session_id.to_string())
                    .cloned();
                match session {
                    Some(session) => responder.respond(
                        ResumeSessionResponse::new()
                            .modes(modes(&session.mode))
                            .config_options(config(&session)),
                    ),
                    None => responder.respond_with_error(unknown(&request.session_id)),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: CloseSessionRequest, responder, _cx| {
                // Closing keeps the session listed (it can be resumed); deleting forgets it.
                match on_close
                    .lock()
                    .expect("sessions lock")
                    .contains_key(&request.session_id.to_string())
                {
                    true => responder.respond(CloseSessionResponse::new()),
                    false => responder.respond_with_error(unknown(&request.session_id)),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: DeleteSessionRequest, responder, _cx| match on_delete
                .lock()
                .expect("sessions lock")
                .remove(&request.session_id.to_string())
            {
                Some(_) => responder.respond(DeleteSessionResponse::new()),
                None => responder.respond_with_error(unknown(&request.session_id)),
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionModeRequest, responder, _cx| {
                let mode = request.mode_id.to_string();
                if mode != "ask" && mode != "code" {
                    return responder.respond_with_error(agent_client_protocol::Error::invalid_params());
                }
                match on_mode
                    .lock()
                    .expect("sessions lock")
                    .get_mut(&request.session_id.to_string())
                {
                    Some(session) => {
                        session.mode = mode;
                        responder.respond(SetSessionModeResponse::new())
                    }
                    None => responder.respond_with_error(unknown(&request.session_id)),
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |request: SetSessionConfigOptionRequest, responder, _cx| {
                let mut sessions = on_config.lock().expect("sessions lock");
                let Some(session) = sessions.get_mut(&request.session_id.to_string()) else {
                    return responder.respond_with_error(unknown(&request.session_id));
                };
                match (request.config_id.to_string().as_str(), &request.value) {
                    ("model", value) if value.as_value_id().is_some() => {
                        session.model = value.as_value_id().map(ToString::to_string).unwrap_or_default();
                    }
                    ("think", value) if value.as_bool().is_some() => session.think = value.as_bool() == Some(true),
                    _ => return responder.respond_with_error(agent_client_protocol::Error::invalid_params()),
                }
                responder.respond(SetSessionConfigOptionResponse::new(config(session)))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |prompt: PromptRequest, responder, cx| {
                let session = prompt.session_id.to_string();
                let text = text_of(&prompt);
                let sessions = on_prompt.clone();
                // Outside the dispatch loop: `/ext` waits for the client's answer.
                cx.clone().spawn(async move {
                    if text == "/ext" {
                        let ask = UntypedMessage::new(
                            "_sdk/ask",
                            serde_json::json!({"question": "ready?", "_meta": {"trace": "sdk-1"}}),
                        )?;
                        let reply = match cx.send_request(ask).block_task().await {
                            Ok(result) => serde_json::json!({"result": result}),
                            Err(error) => serde_json::json!({"error": {"code": i32::from(error.code)}}),
                        };
                        say(&cx, &session, &reply.to_string())?;
                    } else if text == "/switch" {
                        if let Some(s) = sessions.lock().expect("sessions lock").get_mut(&session) {
                            s.mode = "code".into();
                        }
                        notify(
                            &cx,
                            &session,
                            SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new("code")),
                        )?;
                    } else {
                        say(&cx, &session, &format!("echo: {text}"))?;
                    }
                    responder.respond(PromptResponse::new(StopReason::EndTurn))
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            // Last: any other request. The one extension method it knows: `_sdk/echo`.
            async move |request: UntypedMessage, responder, _cx| {
                if request.method == "_sdk/echo" {
                    responder.respond(serde_json::json!({"echo": request.params}))
                } else {
                    responder.respond_with_error(agent_client_protocol::Error::method_not_found())
                }
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_to(Stdio::new())
        .await
}
