//! An ACP agent written only with the official Rust SDK (`agent-client-protocol` 5, its
//! default stdio transport): the baseline of the streaming benchmark.
//!
//! It answers `initialize`, `session/new` and `session/prompt` the way `examples/echo-server`
//! does (docs/design/runtime.md): `/stream N SIZE` sends N `agent_message_chunk` updates
//! (chunk i is i zero-padded to 8 digits, padded with `.` to SIZE bytes) and then `end_turn`;
//! `/forever` sends `tick N` chunks until `session/cancel`, then `cancelled`; anything else
//! is echoed back as one chunk.
//!
//! `--listen HOST:PORT` serves the same agent over Streamable HTTP with the official
//! `AcpHttpServer` (`agent-client-protocol-http` 5): the baseline of `benches/http.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ContentBlock, ContentChunk, Implementation, InitializeRequest,
    InitializeResponse, NewSessionRequest, NewSessionResponse, PromptRequest, PromptResponse, SessionId,
    SessionNotification, SessionUpdate, StopReason, TextContent,
};
use agent_client_protocol::{Agent, Client, ConnectTo, Stdio};
use agent_client_protocol_http::AcpHttpServer;
use axum::serve::ListenerExt;

/// The cancellation flag of each session's running turn.
type CancelFlags = Arc<Mutex<HashMap<String, Arc<AtomicBool>>>>;

fn chunk(session: &SessionId, text: String) -> SessionNotification {
    SessionNotification::new(
        session.clone(),
        SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::Text(TextContent::new(text)))),
    )
}

fn stream_text(i: usize, size: usize) -> String {
    let mut text = format!("{i:08}");
    while text.len() < size {
        text.push('.');
    }
    text
}

enum Command {
    Stream { count: usize, size: usize },
    Forever,
    Echo(String),
}

fn command(prompt: &PromptRequest) -> Command {
    let text = prompt
        .prompt
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
        ["/forever"] => Command::Forever,
        _ => Command::Echo(text),
    }
}

/// The agent, with state of its own (its sessions and their cancellation flags): one per
/// connection.
fn agent() -> impl ConnectTo<Client> {
    let sessions = AtomicU64::new(0);
    let flags: CancelFlags = Arc::default();
    let on_cancel = flags.clone();
    Agent
        .v1()
        .name("sdk-stream-agent")
        .on_receive_request(
            async move |_: InitializeRequest, responder, _cx| {
                responder.respond(
                    InitializeResponse::new(ProtocolVersion::V1)
                        .agent_capabilities(AgentCapabilities::new())
                        .agent_info(Implementation::new("sdk-stream-agent", "0.1.0")),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_: NewSessionRequest, responder, _cx| {
                let n = sessions.fetch_add(1, Ordering::Relaxed);
                responder.respond(NewSessionResponse::new(format!("sdk-session-{n}")))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |cancel: CancelNotification, _cx| {
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
            async move |prompt: PromptRequest, responder, cx| {
                let session = prompt.session_id.clone();
                let cancelled = Arc::new(AtomicBool::new(false));
                flags
                    .lock()
                    .expect("flags lock")
                    .insert(session.to_string(), cancelled.clone());
                let command = command(&prompt);
                // The turn runs outside the dispatch loop, so `session/cancel` is seen while
                // it streams.
                cx.clone().spawn(async move {
                    match command {
                        Command::Stream { count, size } => {
                            for i in 0..count {
                                if cancelled.load(Ordering::SeqCst) {
                                    return responder.respond(PromptResponse::new(StopReason::Cancelled));
                                }
                                cx.send_notification(chunk(&session, stream_text(i, size)))?;
                            }
                            responder.respond(PromptResponse::new(StopReason::EndTurn))
                        }
                        Command::Forever => {
                            let mut n = 0u64;
                            while !cancelled.load(Ordering::SeqCst) {
                                cx.send_notification(chunk(&session, format!("tick {n}")))?;
                                n += 1;
                                tokio::time::sleep(Duration::from_millis(1)).await;
                            }
                            responder.respond(PromptResponse::new(StopReason::Cancelled))
                        }
                        Command::Echo(text) => {
                            cx.send_notification(chunk(&session, text))?;
                            responder.respond(PromptResponse::new(StopReason::EndTurn))
                        }
                    }
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
}

/// With `--listen HOST:PORT`, the official `AcpHttpServer` serves a fresh [`agent`] per
/// connection over Streamable HTTP (and its WebSocket profile) at `/acp`; otherwise one
/// agent speaks over stdin/stdout.
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => Ok(agent().connect_to(Stdio::new()).await?),
        [flag, address] if flag == "--listen" => {
            // TCP_NODELAY on each connection, as axum documents it: without it a response's
            // head and its first SSE event can wait for a delayed ACK (about 40 ms).
            let listener = tokio::net::TcpListener::bind(address.as_str()).await?.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            let router = AcpHttpServer::new(agent).into_router();
            Ok(axum::serve(listener, router).await?)
        }
        _ => Err("usage: sdk-stream-agent [--listen HOST:PORT]".into()),
    }
}
