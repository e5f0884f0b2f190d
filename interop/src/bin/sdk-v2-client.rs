//! A protocol v2 client written only with the official Rust SDK (`agent-client-protocol` 5,
//! `Client.v2()`, feature `unstable_protocol_v2`), for `tests/v2_sdk.rs`. It spawns an agent
//! and drives it over the agent's stdio through one conversation, printing what the SDK
//! hands it as JSON lines on stdout (the transcript format of `tests/v2_sdk.rs`, shared with
//! `ts/v2-client.mjs` and `py/v2_client.py`):
//!
//! 1. `initialize` asking for protocol 2 (`{"step":"initialize","result":…}`);
//! 2. `session/new` in `--cwd` (`{"step":"session/new","sessionId":…}`);
//! 3. turn 1, `--prompt` (default `hello`): the acknowledgement (`{"step":"prompt","turn":1,
//!    "result":…}`), every `session/update` of the session (`{"step":"update","turn":1,
//!    "update":…}`) until a `state_update` `idle` that follows a non-idle state
//!    (`{"step":"idle","turn":1,"stopReason":…}`); a permission request is answered with its
//!    first `allow_once` (else `allow_always`) option (`{"step":"permission",…}`);
//! 4. turn 2, `--cancel-prompt` (default `/wait`): `session/cancel` once the turn's first
//!    `agent_message_chunk` arrived (`{"step":"cancel","turn":2}`), then updates to `idle`;
//! 5. unless `--no-resume`: `session/resume` with `replayFrom: {type: "start"}` (without
//!    it: `--no-replay`); the
//!    updates that arrive before its answer are tagged `"turn":"resume"`;
//! 6. `{"step":"done"}`, exit 0.
//!
//! Any protocol error, an agent that selects v1, or a wait longer than 30 s prints
//! `{"step":"error","message":…}` and exits 1.
//!
//! `sdk-v2-client [--prompt=TEXT] [--cancel-prompt=TEXT] [--cwd=DIR] [--no-resume] [--no-replay] -- PROGRAM [ARGS…]`

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v2::schema::{
    CancelSessionNotification, ContentBlock, Implementation, InitializeRequest, NewSessionRequest,
    PermissionOptionKind, PromptRequest, ReplayFrom, ReplayFromStart, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, ResumeSessionRequest, SelectedPermissionOutcome, SessionId,
    SessionUpdate, StateUpdate, TextContent, UpdateSessionNotification,
};
use agent_client_protocol::v2::{ConnectionTo, InitializeOutcome, Responder};
use agent_client_protocol::{Agent, Client, Lines};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

/// The bound on every wait for the agent.
const TIMEOUT: Duration = Duration::from_secs(30);

const USAGE: &str = "usage: sdk-v2-client [--prompt=TEXT] [--cancel-prompt=TEXT] [--cwd=DIR] [--no-resume] [--no-replay] -- PROGRAM [ARGS…]";

/// The command line.
struct Options {
    prompt: String,
    cancel_prompt: String,
    cwd: PathBuf,
    resume: bool,
    replay: bool,
    program: Vec<String>,
}

fn parse_options() -> Result<Options, String> {
    let mut options = Options {
        prompt: "hello".into(),
        cancel_prompt: "/wait".into(),
        cwd: std::env::current_dir().map_err(|e| format!("no current folder: {e}"))?,
        resume: true,
        replay: true,
        program: Vec::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let (name, value) = arg.split_once('=').unwrap_or((arg.as_str(), ""));
        match name {
            "--prompt" => options.prompt = value.to_string(),
            "--cancel-prompt" => options.cancel_prompt = value.to_string(),
            "--cwd" => options.cwd = PathBuf::from(value),
            "--no-resume" => options.resume = false,
            "--no-replay" => options.replay = false,
            "--" => {
                options.program = args.collect();
                break;
            }
            _ => return Err(format!("unknown argument {arg}")),
        }
    }
    if options.program.is_empty() {
        return Err(USAGE.into());
    }
    Ok(options)
}

/// Prints one transcript line (stdout is the transcript; a reader that went away ends it).
fn emit(line: Value) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

/// The turn the updates and permission requests arriving now belong to (0: none yet,
/// `u64::MAX`: the resume).
type Turn = Arc<AtomicU64>;

fn turn_label(turn: &Turn) -> Value {
    match turn.load(Ordering::SeqCst) {
        u64::MAX => json!("resume"),
        n => json!(n),
    }
}

fn to_json(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or_else(|e| json!(format!("(not serialisable: {e})")))
}

fn protocol_error(message: impl Into<String>) -> agent_client_protocol::Error {
    agent_client_protocol::Error::internal_error().data(message.into())
}

/// Answers a permission request with its first allowing option.
fn allow(request: &RequestPermissionRequest, turn: &Turn) -> RequestPermissionResponse {
    let option = [PermissionOptionKind::AllowOnce, PermissionOptionKind::AllowAlways]
        .iter()
        .find_map(|kind| request.options.iter().find(|option| &option.kind == kind));
    let outcome = match option {
        Some(option) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(option.option_id.clone())),
        None => RequestPermissionOutcome::Cancelled(Default::default()),
    };
    emit(json!({
        "step": "permission",
        "turn": turn_label(turn),
        "request": to_json(request),
        "answer": to_json(&outcome),
    }));
    RequestPermissionResponse::new(outcome)
}

/// Receives the next update of `session`, bounded by [`TIMEOUT`].
async fn next_update(
    updates: &mut UnboundedReceiver<UpdateSessionNotification>,
    session: &SessionId,
) -> agent_client_protocol::Result<SessionUpdate> {
    loop {
        let notification = tokio::time::timeout(TIMEOUT, updates.recv())
            .await
            .map_err(|_| protocol_error("no session/update within 30 s"))?
            .ok_or_else(|| protocol_error("the agent closed the connection mid-turn"))?;
        if &notification.session_id == session {
            return Ok(notification.update);
        }
    }
}

/// Runs one turn: the prompt, its acknowledgement, its updates up to `idle`; with `cancel`,
/// `session/cancel` after the first agent message chunk.
async fn turn(
    cx: &ConnectionTo<Agent>,
    updates: &mut UnboundedReceiver<UpdateSessionNotification>,
    session: &SessionId,
    (number, current): (u64, &Turn),
    text: &str,
    cancel: bool,
) -> agent_client_protocol::Result<()> {
    // What arrived before this prompt is not of this turn (an idle snapshot, say).
    while updates.try_recv().is_ok() {}
    current.store(number, Ordering::SeqCst);
    let prompt = PromptRequest::new(session.clone(), vec![ContentBlock::Text(TextContent::new(text))]);
    let ack = tokio::time::timeout(TIMEOUT, cx.send_request(prompt).block_task())
        .await
        .map_err(|_| protocol_error("session/prompt was not acknowledged within 30 s"))??;
    emit(json!({"step": "prompt", "turn": number, "result": to_json(&ack)}));
    let mut active = false;
    let mut cancelled = false;
    loop {
        let update = next_update(updates, session).await?;
        let wire = to_json(&update);
        emit(json!({"step": "update", "turn": number, "update": wire}));
        match &update {
            SessionUpdate::StateUpdate(StateUpdate::Idle(_)) if active => {
                emit(json!({"step": "idle", "turn": number, "stopReason": wire["stopReason"]}));
                return Ok(());
            }
            SessionUpdate::StateUpdate(StateUpdate::Idle(_)) => {}
            SessionUpdate::StateUpdate(_) => active = true,
            SessionUpdate::AgentMessageChunk(_) if cancel && !cancelled => {
                cx.send_notification(CancelSessionNotification::new(session.clone()))?;
                emit(json!({"step": "cancel", "turn": number}));
                cancelled = true;
            }
            _ => {}
        }
    }
}

/// The whole conversation, on an open connection.
async fn converse(
    cx: ConnectionTo<Agent>,
    mut updates: UnboundedReceiver<UpdateSessionNotification>,
    current: Turn,
    options: &Options,
) -> agent_client_protocol::Result<()> {
    let initialize = InitializeRequest::new(
        ProtocolVersion::V2,
        Implementation::new("sdk-v2-client-rust", env!("CARGO_PKG_VERSION")),
    );
    let outcome = tokio::time::timeout(TIMEOUT, cx.send_initialize(initialize).block_task())
        .await
        .map_err(|_| protocol_error("initialize was not answered within 30 s"))??;
    let response = match outcome {
        InitializeOutcome::Initialized(response) => response,
        InitializeOutcome::LowerVersion(lower) => {
            return Err(protocol_error(format!(
                "the agent selected a lower protocol version: {lower:?}"
            )));
        }
        other => return Err(protocol_error(format!("initialize ended {other:?}"))),
    };
    emit(json!({"step": "initialize", "result": to_json(&response)}));
    let new = NewSessionRequest::new(options.cwd.clone());
    let session = tokio::time::timeout(TIMEOUT, cx.send_request(new).block_task())
        .await
        .map_err(|_| protocol_error("session/new was not answered within 30 s"))??;
    emit(json!({"step": "session/new", "sessionId": to_json(&session.session_id), "result": to_json(&session)}));
    let id = session.session_id;
    turn(&cx, &mut updates, &id, (1, &current), &options.prompt, false).await?;
    turn(&cx, &mut updates, &id, (2, &current), &options.cancel_prompt, true).await?;
    if options.resume {
        while updates.try_recv().is_ok() {}
        current.store(u64::MAX, Ordering::SeqCst);
        let replay = options.replay.then(|| ReplayFrom::Start(ReplayFromStart::new()));
        let resume = ResumeSessionRequest::new(id.clone(), options.cwd.clone()).replay_from(replay);
        let answer = tokio::time::timeout(TIMEOUT, cx.send_request(resume).block_task())
            .await
            .map_err(|_| protocol_error("session/resume was not answered within 30 s"))??;
        // The replay arrives before the answer, and the SDK dispatches in wire order.
        while let Ok(notification) = updates.try_recv() {
            if notification.session_id == id {
                emit(json!({"step": "update", "turn": "resume", "update": to_json(&notification.update)}));
            }
        }
        emit(json!({"step": "resume", "replay": options.replay, "result": to_json(&answer)}));
    }
    emit(json!({"step": "done"}));
    Ok(())
}

/// The agent's stdio as the SDK's line transport.
fn lines(
    stdin: tokio::process::ChildStdin,
    stdout: tokio::process::ChildStdout,
) -> Lines<
    impl futures::Sink<String, Error = std::io::Error> + Send + 'static,
    impl futures::Stream<Item = std::io::Result<String>> + Send + 'static,
> {
    let incoming = futures::stream::unfold(BufReader::new(stdout), |mut reader| async move {
        let mut line = String::new();
        match reader.read_line(&mut line).await {
            Ok(0) => None,
            Ok(_) => Some((Ok(line.trim_end_matches('\n').to_string()), reader)),
            Err(e) => Some((Err(e), reader)),
        }
    });
    let outgoing = futures::sink::unfold(stdin, |mut stdin, line: String| async move {
        stdin.write_all(format!("{line}\n").as_bytes()).await?;
        stdin.flush().await?;
        Ok::<_, std::io::Error>(stdin)
    });
    Lines::new(Box::pin(outgoing), Box::pin(incoming))
}

async fn run(options: Options) -> Result<(), String> {
    let mut child = tokio::process::Command::new(&options.program[0])
        .args(&options.program[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", options.program[0]))?;
    let transport = lines(
        child.stdin.take().expect("piped stdin"),
        child.stdout.take().expect("piped stdout"),
    );
    let (update_tx, updates) = unbounded_channel();
    let current: Turn = Arc::default();
    let on_permission = current.clone();
    let result = Client
        .v2()
        .name("sdk-v2-client-rust")
        .on_receive_notification(
            async move |notification: UpdateSessionNotification, _cx: ConnectionTo<Agent>| {
                update_tx
                    .send(notification)
                    .map_err(agent_client_protocol::Error::into_internal_error)
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .on_receive_request(
            async move |request: RequestPermissionRequest,
                        responder: Responder<RequestPermissionResponse>,
                        _cx: ConnectionTo<Agent>| { responder.respond(allow(&request, &on_permission)) },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_with(transport, async |cx: ConnectionTo<Agent>| {
            converse(cx, updates, current, &options).await
        })
        .await;
    result.map_err(|e| format!("{}{}", e.message, e.data.map(|d| format!(": {d}")).unwrap_or_default()))
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let outcome = match parse_options() {
        Ok(options) => run(options).await,
        Err(usage) => Err(usage),
    };
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(message) => {
            emit(json!({"step": "error", "message": message}));
            std::process::ExitCode::FAILURE
        }
    }
}
