//! An ACP protocol v2 agent written only with the official Rust SDK (`agent-client-protocol`
//! 5, `Agent.v2()`, feature `unstable_protocol_v2`, its default stdio transport): the SDK
//! baseline of `benches/v2.rs`, as `sdk-stream-agent` is the v1 baseline of `benches/stream.rs`.
//!
//! It does what `examples/echo-server` does on a v2 connection: `session/prompt` is
//! acknowledged with the user message's id, then the turn runs as updates: the
//! `user_message`, `state_update` `running`, the turn's chunks (one message id), and
//! `state_update` `idle` with the stop reason. `/stream N SIZE` sends N `agent_message_chunk`s
//! (chunk i is [`interop::stream_chunk`]`(i, SIZE)`) and ends `end_turn` (`cancelled` after
//! `session/cancel`); anything else is echoed back as one chunk.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v2::schema::{
    AgentCapabilities, CancelSessionNotification, ContentBlock, ContentChunk, IdleStateUpdate, Implementation,
    InitializeRequest, InitializeResponse, NewSessionRequest, NewSessionResponse, PromptRequest, PromptResponse,
    RunningStateUpdate, SessionCapabilities, SessionId, SessionUpdate, StateUpdate, StopReason, TextContent,
    UpdateSessionNotification, UserMessage,
};
use agent_client_protocol::v2::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, ConnectTo, Stdio};

/// The agent's name in `initialize`.
const NAME: &str = "sdk-v2-stream-agent";

/// The cancellation flag of each session's running turn.
type CancelFlags = Arc<Mutex<HashMap<String, Arc<AtomicBool>>>>;

/// What a prompt asks for.
enum Command {
    Stream { count: usize, size: usize },
    Echo(String),
}

fn command(prompt: &[ContentBlock]) -> Command {
    let text = prompt
        .iter()
        .find_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let words: Vec<&str> = text.split_whitespace().collect();
    match words.as_slice() {
        ["/stream", count, size] => match (count.parse(), size.parse()) {
            (Ok(count), Ok(size)) => Command::Stream { count, size },
            _ => Command::Echo(text),
        },
        _ => Command::Echo(text),
    }
}

fn send(cx: &ConnectionTo<Client>, session: &SessionId, update: SessionUpdate) -> agent_client_protocol::Result<()> {
    cx.send_notification(UpdateSessionNotification::new(session.clone(), update))
}

fn chunk(text: String, message: &str) -> SessionUpdate {
    SessionUpdate::AgentMessageChunk(ContentChunk::new(
        ContentBlock::Text(TextContent::new(text)),
        message.to_string(),
    ))
}

/// One accepted turn, from the user's message to `idle`.
async fn run_turn(
    cx: ConnectionTo<Client>,
    session: SessionId,
    (user, reply): (String, String),
    prompt: Vec<ContentBlock>,
    cancelled: Arc<AtomicBool>,
) -> agent_client_protocol::Result<()> {
    let command = command(&prompt);
    send(
        &cx,
        &session,
        SessionUpdate::UserMessage(UserMessage::new(user).content(prompt)),
    )?;
    send(
        &cx,
        &session,
        SessionUpdate::StateUpdate(StateUpdate::Running(RunningStateUpdate::new())),
    )?;
    let stop = match command {
        Command::Stream { count, size } => {
            let mut stop = StopReason::EndTurn;
            for i in 0..count {
                if cancelled.load(Ordering::SeqCst) {
                    stop = StopReason::Cancelled;
                    break;
                }
                send(&cx, &session, chunk(interop::stream_chunk(i, size), &reply))?;
            }
            stop
        }
        Command::Echo(text) => {
            send(&cx, &session, chunk(text, &reply))?;
            StopReason::EndTurn
        }
    };
    send(
        &cx,
        &session,
        SessionUpdate::StateUpdate(StateUpdate::Idle(IdleStateUpdate::new().stop_reason(stop))),
    )
}

/// The agent, with state of its own (ids and the cancellation flags): one per connection.
fn agent() -> impl ConnectTo<Client> {
    let ids = Arc::new(AtomicU64::new(0));
    let flags: CancelFlags = Arc::default();
    let (on_new, on_prompt, on_cancel) = (ids.clone(), flags.clone(), flags);
    Agent
        .v2()
        .name(NAME)
        .on_receive_request(
            async move |_: InitializeRequest, responder: Responder<InitializeResponse>, _cx| {
                responder.respond(
                    InitializeResponse::new(ProtocolVersion::V2, Implementation::new(NAME, "0.1.0"))
                        .capabilities(AgentCapabilities::new().session(SessionCapabilities::new())),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_: NewSessionRequest, responder: Responder<NewSessionResponse>, _cx| {
                let n = on_new.fetch_add(1, Ordering::Relaxed);
                responder.respond(NewSessionResponse::new(SessionId::new(format!("sdk-v2-session-{n}"))))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |cancel: CancelSessionNotification, _cx: ConnectionTo<Client>| {
                if let Some(flag) = on_cancel
                    .lock()
                    .expect("flags lock")
                    .get(&cancel.session_id.to_string())
                {
                    flag.store(true, Ordering::SeqCst);
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |prompt: PromptRequest, responder: Responder<PromptResponse>, cx: ConnectionTo<Client>| {
                let cancelled = Arc::new(AtomicBool::new(false));
                on_prompt
                    .lock()
                    .expect("flags lock")
                    .insert(prompt.session_id.to_string(), cancelled.clone());
                let n = ids.fetch_add(1, Ordering::Relaxed);
                let (user, reply) = (format!("user-message-{n}"), format!("agent-message-{n}"));
                responder.respond(PromptResponse::new(user.clone()))?;
                // The turn runs outside the dispatch loop, so `session/cancel` is seen while
                // it streams.
                let turn = run_turn(cx.clone(), prompt.session_id, (user, reply), prompt.prompt, cancelled);
                cx.spawn(turn)
            },
            agent_client_protocol::on_receive_request!(),
        )
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().len() > 1 {
        return Err("usage: sdk-v2-stream-agent (it takes no arguments; it speaks ACP v2 on stdio)".into());
    }
    Ok(agent().connect_to(Stdio::new()).await?)
}
