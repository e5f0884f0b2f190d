//! A small ACP agent written only with the official Rust SDK (`agent-client-protocol` 5,
//! protocol v1), for `tests/client_drives_sdk_agents.rs`: our client drives it, and the same
//! agent written with the TypeScript SDK (`interop/ts/agent.mjs`) and the Python SDK
//! (`interop/py/agent.py`).
//!
//! What it does with a prompt's text:
//! - `/permission`: a `tool_call` (`pending`, kind `edit`, title `write-file`), then
//!   `session/request_permission` with `allow` (allow_once) and `reject` (reject_once); on
//!   `allow` a `tool_call_update` `completed` and the chunk `approved`, else `failed` and
//!   `rejected`; `end_turn`;
//! - `/read PATH`: `fs/read_text_file` of PATH (when the client offers it), then the chunk
//!   `read: CONTENT`, or `error: CODE MESSAGE` when the client answered an error; `end_turn`;
//! - `/wait`: the chunk `waiting`, then nothing until `session/cancel`; `cancelled`;
//! - anything else: the words of `echo: TEXT` as chunks (every word but the first with its
//!   leading space); `end_turn`.
//!
//! `--listen HOST:PORT` serves the same agent over Streamable HTTP with the official
//! `AcpHttpServer` (`agent-client-protocol-http` 5), for `tests/http_servers.rs`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, CancelNotification, ContentBlock, ContentChunk, Implementation, InitializeRequest,
    InitializeResponse, NewSessionRequest, NewSessionResponse, PermissionOption, PermissionOptionKind, PromptRequest,
    PromptResponse, ReadTextFileRequest, RequestPermissionOutcome, RequestPermissionRequest, SessionId,
    SessionNotification, SessionUpdate, StopReason, TextContent, ToolCall, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind,
};
use agent_client_protocol::{Agent, Client, ConnectTo, Stdio};
use agent_client_protocol_http::AcpHttpServer;
use tokio::sync::Notify;

/// Per session, the signal that ends its running turn (`session/cancel`).
type Cancels = Arc<Mutex<HashMap<String, Arc<Notify>>>>;

fn say(cx: &ConnectionTo<Client>, session: &SessionId, text: &str) -> agent_client_protocol::Result<()> {
    cx.send_notification(SessionNotification::new(
        session.clone(),
        SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::Text(TextContent::new(text)))),
    ))
}

fn prompt_text(prompt: &PromptRequest) -> String {
    prompt
        .prompt
        .iter()
        .find_map(|block| match block {
            ContentBlock::Text(text) => Some(text.text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// `/permission`: announce the tool call, ask, and report the answer.
async fn permission(cx: &ConnectionTo<Client>, session: &SessionId, id: String) -> agent_client_protocol::Result<()> {
    cx.send_notification(SessionNotification::new(
        session.clone(),
        SessionUpdate::ToolCall(
            ToolCall::new(id.clone(), "write-file")
                .kind(ToolKind::Edit)
                .status(ToolCallStatus::Pending),
        ),
    ))?;
    let request = RequestPermissionRequest::new(
        session.clone(),
        ToolCallUpdate::new(id.clone(), ToolCallUpdateFields::new().title("write-file")),
        vec![
            PermissionOption::new("allow", "Allow", PermissionOptionKind::AllowOnce),
            PermissionOption::new("reject", "Reject", PermissionOptionKind::RejectOnce),
        ],
    );
    let answer = cx.send_request(request).block_task().await?;
    let approved = matches!(&answer.outcome,
        RequestPermissionOutcome::Selected(selected) if selected.option_id.to_string() == "allow");
    let status = if approved {
        ToolCallStatus::Completed
    } else {
        ToolCallStatus::Failed
    };
    cx.send_notification(SessionNotification::new(
        session.clone(),
        SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(id, ToolCallUpdateFields::new().status(status))),
    ))?;
    say(cx, session, if approved { "approved" } else { "rejected" })
}

/// `/read PATH`: ask the client for the file.
async fn read(
    cx: &ConnectionTo<Client>,
    session: &SessionId,
    path: &str,
    offered: bool,
) -> agent_client_protocol::Result<()> {
    if !offered {
        return say(cx, session, "error: the client does not offer fs/read_text_file");
    }
    match cx
        .send_request(ReadTextFileRequest::new(session.clone(), path))
        .block_task()
        .await
    {
        Ok(file) => say(cx, session, &format!("read: {}", file.content)),
        Err(error) => say(
            cx,
            session,
            &format!("error: {} {}", i32::from(error.code), error.message),
        ),
    }
}

/// The agent, with state of its own (its sessions, their turns): one per connection.
fn agent() -> impl ConnectTo<Client> {
    let sessions = AtomicU64::new(0);
    let tool_calls = Arc::new(AtomicU64::new(0));
    let reads_offered = Arc::new(AtomicBool::new(false));
    let offered = reads_offered.clone();
    let cancels: Cancels = Arc::default();
    let on_cancel = cancels.clone();
    Agent
        .v1()
        .name("sdk-agent-rust")
        .on_receive_request(
            async move |initialize: InitializeRequest, responder, _cx| {
                offered.store(initialize.client_capabilities.fs.read_text_file, Ordering::SeqCst);
                responder.respond(
                    InitializeResponse::new(ProtocolVersion::V1)
                        .agent_capabilities(AgentCapabilities::new())
                        .agent_info(Implementation::new("sdk-agent-rust", env!("CARGO_PKG_VERSION"))),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |_: NewSessionRequest, responder, _cx| {
                let n = sessions.fetch_add(1, Ordering::Relaxed);
                responder.respond(NewSessionResponse::new(format!("rust-session-{n}")))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |cancel: CancelNotification, _cx| {
                if let Some(turn) = on_cancel
                    .lock()
                    .expect("cancels lock")
                    .get(&cancel.session_id.to_string())
                {
                    // Stores a permit when the turn is not waiting yet.
                    turn.notify_one();
                }
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |prompt: PromptRequest, responder, cx| {
                let session = prompt.session_id.clone();
                let cancelled = Arc::new(Notify::new());
                cancels
                    .lock()
                    .expect("cancels lock")
                    .insert(session.to_string(), cancelled.clone());
                let text = prompt_text(&prompt);
                let offered = reads_offered.load(Ordering::SeqCst);
                let tool_call = format!("call-{}", tool_calls.fetch_add(1, Ordering::Relaxed));
                // The turn runs outside the dispatch loop, so that `session/cancel` and the
                // answers to our own requests are seen while it waits.
                cx.clone().spawn(async move {
                    let stop = if text == "/wait" {
                        say(&cx, &session, "waiting")?;
                        cancelled.notified().await;
                        StopReason::Cancelled
                    } else if text == "/permission" {
                        permission(&cx, &session, tool_call).await?;
                        StopReason::EndTurn
                    } else if let Some(path) = text.strip_prefix("/read ") {
                        read(&cx, &session, path.trim(), offered).await?;
                        StopReason::EndTurn
                    } else {
                        let echo = format!("echo: {text}");
                        for (i, word) in echo.split_whitespace().enumerate() {
                            say(
                                &cx,
                                &session,
                                &if i == 0 { word.to_string() } else { format!(" {word}") },
                            )?;
                        }
                        StopReason::EndTurn
                    };
                    responder.respond(PromptResponse::new(stop))
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
}

/// Over stdin/stdout; with `--listen HOST:PORT`, a fresh [`agent`] per connection served by
/// the official `AcpHttpServer` at `/acp` (Streamable HTTP and its WebSocket profile).
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => Ok(agent().connect_to(Stdio::new()).await?),
        [flag, address] if flag == "--listen" => {
            let listener = tokio::net::TcpListener::bind(address.as_str()).await?;
            Ok(axum::serve(listener, AcpHttpServer::new(agent).into_router()).await?)
        }
        _ => Err("usage: sdk-agent [--listen HOST:PORT]".into()),
    }
}
