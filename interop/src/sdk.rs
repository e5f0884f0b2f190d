//! A client built on the official Rust SDK (`agent-client-protocol` 5, protocol v1) driving
//! an agent process over its stdin/stdout.
//!
//! It records every `session/update` and `session/request_permission` in arrival order, each
//! tagged with the request it belongs to and whether it arrived before or after that
//! request's response; it answers permission requests by option kind, or holds them
//! unanswered. Responses are observed through the SDK's ordered response callbacks
//! (`prepare_request(..).on_receiving_result(..)`), which run in the connection's dispatch
//! loop, so the recorded order is the order of the lines on the wire.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, ContentBlock, CreateTerminalRequest, CreateTerminalResponse,
    FileSystemCapabilities, Implementation, InitializeRequest, InitializeResponse, KillTerminalRequest,
    KillTerminalResponse, LoadSessionRequest, LoadSessionResponse, NewSessionRequest, PermissionOptionKind,
    PromptRequest, PromptResponse, ReadTextFileRequest, ReadTextFileResponse, ReleaseTerminalRequest,
    ReleaseTerminalResponse, RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, SessionNotification, SessionUpdate, TerminalExitStatus, TerminalOutputRequest,
    TerminalOutputResponse, TextContent, WaitForTerminalExitRequest, WaitForTerminalExitResponse, WriteTextFileRequest,
    WriteTextFileResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, JsonRpcRequest, JsonRpcResponse, Lines};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::ChildStdin;
use tokio::sync::{oneshot, watch};

use crate::{AgentDirs, AgentProcess, Direction, StderrMode, TIMEOUT, Transcript};

pub use agent_client_protocol::Error as SdkError;

/// A request this client sent, as the recorded events refer to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestTag {
    /// The order in which this client sent its requests (0, 1, …).
    pub seq: u64,
    /// The JSON-RPC method.
    pub method: String,
    /// The JSON-RPC id the SDK put on the wire.
    pub wire_id: Value,
}

/// When a message about a session arrived, relative to the requests that name the session
/// (`session/prompt`, `session/load`, and `session/new` for the session it created).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// While this request was waiting for its response.
    BeforeResponse(RequestTag),
    /// After the response of this request (the last one naming the session), with no other
    /// request for the session outstanding.
    AfterResponse(RequestTag),
    /// Before any request named the session: for a session the agent created, before the
    /// `session/new` response.
    NoRequest,
}

impl Phase {
    /// Whether it arrived while `tag` was outstanding.
    pub fn is_before(&self, tag: &RequestTag) -> bool {
        matches!(self, Phase::BeforeResponse(t) if t == tag)
    }
}

/// One recorded message, in arrival order.
#[derive(Debug, Clone)]
pub enum Event {
    /// A `session/update` notification.
    Update {
        /// `sessionId`.
        session_id: String,
        /// `update`, as JSON (`{"sessionUpdate": "agent_message_chunk", …}`).
        update: Value,
        /// When it arrived.
        phase: Phase,
    },
    /// A `session/request_permission` request from the agent.
    Permission {
        /// `sessionId`.
        session_id: String,
        /// The whole params, as JSON.
        params: Value,
        /// When it arrived.
        phase: Phase,
        /// What this client answered (or that it held the request).
        answer: String,
    },
    /// A request of the agent for the editor's files or terminal (`fs/*`, `terminal/*`),
    /// answered by this client's stand-in editor (see [`SdkClient::initialize_as_editor`]).
    Editor {
        /// `sessionId`.
        session_id: String,
        /// The method.
        method: String,
        /// The whole params, as JSON.
        params: Value,
        /// When it arrived.
        phase: Phase,
    },
    /// The response to one of this client's requests.
    Response {
        /// The request.
        tag: RequestTag,
        /// `Ok(result)` or `Err(error object)`, as JSON.
        outcome: Result<Value, Value>,
    },
}

impl Event {
    /// The `sessionUpdate` kind of an update (`agent_message_chunk`, `tool_call`, …).
    pub fn update_kind(&self) -> Option<&str> {
        match self {
            Event::Update { update, .. } => update["sessionUpdate"].as_str(),
            _ => None,
        }
    }

    /// The text of a message chunk (`content.text`).
    pub fn chunk_text(&self) -> Option<&str> {
        match self {
            Event::Update { update, .. } => update["content"]["text"].as_str(),
            _ => None,
        }
    }

    /// The session the event is about (none for a response).
    pub fn session_id(&self) -> Option<&str> {
        match self {
            Event::Update { session_id, .. }
            | Event::Permission { session_id, .. }
            | Event::Editor { session_id, .. } => Some(session_id),
            Event::Response { .. } => None,
        }
    }

    /// One line describing the event, for failure messages.
    pub fn describe(&self) -> String {
        let phase = |p: &Phase| match p {
            Phase::BeforeResponse(t) => format!("before response to {} #{}", t.method, t.seq),
            Phase::AfterResponse(t) => format!("after response to {} #{}", t.method, t.seq),
            Phase::NoRequest => "before any request named the session".to_string(),
        };
        match self {
            Event::Update { update, phase: p, .. } => {
                format!("update {} [{}]", crate::shorten(&update.to_string(), 300), phase(p))
            }
            Event::Permission {
                params,
                phase: p,
                answer,
                ..
            } => format!(
                "request_permission {} [{}] -> {answer}",
                crate::shorten(&params.to_string(), 300),
                phase(p)
            ),
            Event::Editor { method, params, .. } => {
                format!("{method} {}", crate::shorten(&params.to_string(), 300))
            }
            Event::Response { tag, outcome } => format!(
                "response to {} #{} (id {}): {}",
                tag.method,
                tag.seq,
                tag.wire_id,
                crate::shorten(
                    &match outcome {
                        Ok(v) => v.to_string(),
                        Err(e) => format!("error {e}"),
                    },
                    300
                )
            ),
        }
    }
}

/// How the client answers `session/request_permission`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionPolicy {
    /// Select the first option of this kind (`allow_once`, `reject_once`, …); answer
    /// `cancelled` when the agent offered none of that kind.
    Select(PermissionOptionKind),
    /// Answer with the `cancelled` outcome.
    Cancel,
    /// Do not answer: keep the request pending (see [`SdkClient::held_permissions`]).
    Hold,
}

/// What the client keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Record every line of the wire in the [`Transcript`].
    pub transcript: bool,
    /// Record every update as an [`Event`]; when false, updates are only counted
    /// ([`SdkClient::update_count`]), for benchmarks.
    pub record_updates: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            transcript: true,
            record_updates: true,
        }
    }
}

struct State {
    events: Vec<Event>,
    next_seq: u64,
    open: HashMap<String, Vec<RequestTag>>,
    last_closed: HashMap<String, RequestTag>,
    policy: PermissionPolicy,
    held: Vec<Responder<RequestPermissionResponse>>,
}

impl State {
    fn phase(&self, session: &str) -> Phase {
        if let Some(tag) = self.open.get(session).and_then(|open| open.last()) {
            Phase::BeforeResponse(tag.clone())
        } else if let Some(tag) = self.last_closed.get(session) {
            Phase::AfterResponse(tag.clone())
        } else {
            Phase::NoRequest
        }
    }
}

struct Shared {
    state: Mutex<State>,
    changed: watch::Sender<u64>,
    transcript: Transcript,
    options: Options,
    updates: AtomicU64,
    eof: AtomicBool,
    name: String,
    stderr: Option<PathBuf>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn notify(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    fn diagnostics(&self) -> String {
        let events = self.lock().events.clone();
        let skip = events.len().saturating_sub(40);
        let mut out = format!(
            "recorded events ({} in all, last {} shown):\n",
            events.len(),
            events.len() - skip
        );
        for event in &events[skip..] {
            out += &format!("  {}\n", event.describe());
        }
        if !self.options.transcript {
            out += "(wire transcript not recorded)\n";
        } else {
            out += &self.transcript.tail();
        }
        let stderr = self
            .stderr
            .as_ref()
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .unwrap_or_else(|| "(not captured)".to_string());
        out += &format!("{} stderr:\n{}", self.name, crate::shorten(&stderr, 8000));
        out
    }

    fn on_update(&self, notification: SessionNotification) {
        self.updates.fetch_add(1, Ordering::Relaxed);
        if !self.options.record_updates {
            return;
        }
        let session_id = notification.session_id.to_string();
        let mut update = serde_json::to_value(&notification.update).unwrap_or(Value::Null);
        // The SDK's `ToolCall` serialises its default status (`pending`) by omitting it; keep
        // the status the SDK read, so a test sees what an SDK client sees.
        if let SessionUpdate::ToolCall(call) = &notification.update
            && let Ok(status) = serde_json::to_value(call.status)
        {
            update["status"] = status;
        }
        {
            let mut state = self.lock();
            let phase = state.phase(&session_id);
            state.events.push(Event::Update {
                session_id,
                update,
                phase,
            });
        }
        self.notify();
    }

    /// Records an editor request and answers it with `answer`.
    fn on_editor<Req: serde::Serialize, Resp: JsonRpcResponse>(
        &self,
        method: &str,
        request: &Req,
        answer: Resp,
        responder: Responder<Resp>,
    ) -> Result<(), SdkError> {
        let params = serde_json::to_value(request).unwrap_or(Value::Null);
        let session_id = params["sessionId"].as_str().unwrap_or_default().to_string();
        let mut state = self.lock();
        let phase = state.phase(&session_id);
        state.events.push(Event::Editor {
            session_id,
            method: method.to_string(),
            params,
            phase,
        });
        drop(state);
        self.notify();
        responder.respond(answer)
    }

    fn on_permission(
        &self,
        request: RequestPermissionRequest,
        responder: Responder<RequestPermissionResponse>,
    ) -> Result<(), SdkError> {
        let session_id = request.session_id.to_string();
        let params = serde_json::to_value(&request).unwrap_or(Value::Null);
        let mut state = self.lock();
        let phase = state.phase(&session_id);
        let (answer, outcome) = match &state.policy {
            PermissionPolicy::Select(kind) => match request.options.iter().find(|o| o.kind == *kind) {
                Some(option) => (
                    format!("selected {} ({kind:?})", option.option_id),
                    Some(RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(
                        option.option_id.clone(),
                    ))),
                ),
                None => (
                    format!("cancelled: no option of kind {kind:?} offered"),
                    Some(RequestPermissionOutcome::Cancelled),
                ),
            },
            PermissionPolicy::Cancel => ("cancelled".to_string(), Some(RequestPermissionOutcome::Cancelled)),
            PermissionPolicy::Hold => ("held, not answered".to_string(), None),
        };
        state.events.push(Event::Permission {
            session_id,
            params,
            phase,
            answer,
        });
        let result = match outcome {
            Some(outcome) => {
                drop(state);
                responder.respond(RequestPermissionResponse::new(outcome))
            }
            None => {
                state.held.push(responder);
                drop(state);
                Ok(())
            }
        };
        self.notify();
        result
    }

    fn open(&self, session: Option<&str>, method: &str, wire_id: Value) -> RequestTag {
        let mut state = self.lock();
        let tag = RequestTag {
            seq: state.next_seq,
            method: method.to_string(),
            wire_id,
        };
        state.next_seq += 1;
        if let Some(session) = session {
            state.open.entry(session.to_string()).or_default().push(tag.clone());
        }
        tag
    }

    fn close(&self, tag: &RequestTag, session: Option<&str>, outcome: Result<Value, Value>) {
        {
            let mut state = self.lock();
            if let Some(session) = session {
                if let Some(open) = state.open.get_mut(session) {
                    open.retain(|t| t != tag);
                }
                state.last_closed.insert(session.to_string(), tag.clone());
            }
            // The session a `session/new` created: what follows comes after its response.
            if let Ok(result) = &outcome
                && tag.method == "session/new"
                && let Some(created) = result["sessionId"].as_str()
            {
                state.last_closed.insert(created.to_string(), tag.clone());
            }
            state.events.push(Event::Response {
                tag: tag.clone(),
                outcome,
            });
        }
        self.notify();
    }
}

/// A request in flight.
#[must_use = "a request's response should be awaited"]
pub struct Pending<T> {
    /// The request.
    pub tag: RequestTag,
    rx: oneshot::Receiver<Result<T, SdkError>>,
    shared: Arc<Shared>,
}

impl<T> std::fmt::Debug for Pending<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending").field("tag", &self.tag).finish()
    }
}

impl<T> Pending<T> {
    /// The response (or the error the agent answered), waiting at most [`TIMEOUT`]; fails the
    /// test, with everything seen, when none comes.
    pub async fn response(self) -> Result<T, SdkError> {
        match tokio::time::timeout(TIMEOUT, self.rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => panic!(
                "the SDK dropped the response callback of {} #{}\n\n{}",
                self.tag.method,
                self.tag.seq,
                self.shared.diagnostics()
            ),
            Err(_) => panic!(
                "no response to {} (id {}) within {TIMEOUT:?}\n\n{}",
                self.tag.method,
                self.tag.wire_id,
                self.shared.diagnostics()
            ),
        }
    }

    /// The successful response; fails the test when the agent answered an error.
    pub async fn ok(self) -> T {
        let method = self.tag.method.clone();
        let shared = self.shared.clone();
        match self.response().await {
            Ok(value) => value,
            Err(error) => panic!(
                "{method} failed: {} {:?} {:?}\n\n{}",
                i32::from(error.code),
                error.message,
                error.data,
                shared.diagnostics()
            ),
        }
    }
}

/// The official SDK's client connected to an agent process.
pub struct SdkClient {
    /// The agent.
    pub process: AgentProcess,
    cx: ConnectionTo<Agent>,
    shared: Arc<Shared>,
    stdin: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    stop: Option<oneshot::Sender<()>>,
    driver: Option<tokio::task::JoinHandle<Result<(), SdkError>>>,
}

impl std::fmt::Debug for SdkClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SdkClient")
            .field("process", &self.process)
            .finish_non_exhaustive()
    }
}

impl SdkClient {
    /// Spawns `binary` in `dirs` (stderr captured) and connects to it.
    pub async fn spawn(binary: &Path, dirs: &AgentDirs) -> Self {
        let process = AgentProcess::spawn(binary, dirs, StderrMode::Capture);
        Self::connect(process, Options::default()).await
    }

    /// Connects the SDK client to a spawned agent's stdin/stdout.
    pub async fn connect(mut process: AgentProcess, options: Options) -> Self {
        let (stdin, stdout) = process.take_stdio();
        let (changed, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                events: Vec::new(),
                next_seq: 0,
                open: HashMap::new(),
                last_closed: HashMap::new(),
                policy: PermissionPolicy::Hold,
                held: Vec::new(),
            }),
            changed,
            transcript: Transcript::new(),
            options,
            updates: AtomicU64::new(0),
            eof: AtomicBool::new(false),
            name: process.name.clone(),
            stderr: process.stderr_path(),
        });
        let stdin = Arc::new(tokio::sync::Mutex::new(Some(stdin)));

        let incoming = {
            let shared = shared.clone();
            futures::stream::unfold(
                (BufReader::with_capacity(1 << 16, stdout), shared),
                |(mut reader, shared)| async move {
                    let mut line = String::new();
                    match reader.read_line(&mut line).await {
                        Ok(0) => {
                            shared.eof.store(true, Ordering::SeqCst);
                            shared.notify();
                            None
                        }
                        Ok(_) => {
                            if line.ends_with('\n') {
                                line.pop();
                            }
                            if shared.options.transcript {
                                shared.transcript.record(Direction::Received, &line);
                            }
                            Some((Ok(line), (reader, shared)))
                        }
                        Err(e) => {
                            shared.eof.store(true, Ordering::SeqCst);
                            shared.notify();
                            Some((Err(e), (reader, shared)))
                        }
                    }
                },
            )
        };
        let outgoing = {
            let transcript = options.transcript.then(|| shared.transcript.clone());
            futures::sink::unfold(
                (stdin.clone(), transcript),
                |(stdin, transcript), line: String| async move {
                    if let Some(t) = &transcript {
                        t.record(Direction::Sent, &line);
                    }
                    let mut guard = stdin.lock().await;
                    // After `close_stdin` the SDK may still send (say, a `$/cancel_request`
                    // for an abandoned request): those lines are dropped.
                    if let Some(writer) = guard.as_mut() {
                        let mut bytes = line.into_bytes();
                        bytes.push(b'\n');
                        writer.write_all(&bytes).await?;
                        writer.flush().await?;
                    }
                    drop(guard);
                    Ok::<_, std::io::Error>((stdin, transcript))
                },
            )
        };
        let transport = Lines::new(Box::pin(outgoing), Box::pin(incoming));

        let (cx_tx, cx_rx) = oneshot::channel();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let on_update = shared.clone();
        let on_permission = shared.clone();
        let (on_read, on_write, on_create, on_wait, on_output, on_release, on_kill) = (
            shared.clone(),
            shared.clone(),
            shared.clone(),
            shared.clone(),
            shared.clone(),
            shared.clone(),
            shared.clone(),
        );
        let driver = tokio::spawn(async move {
            Client
                .v1()
                .name("agentacp-interop")
                .on_receive_notification(
                    async move |notification: SessionNotification, _cx| {
                        on_update.on_update(notification);
                        Ok(())
                    },
                    agent_client_protocol::on_receive_notification!(),
                )
                .on_receive_request(
                    async move |request: RequestPermissionRequest, responder, _cx| {
                        on_permission.on_permission(request, responder)
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                // The stand-in editor: a buffer's text names its file, every command exits 0
                // and prints what it was asked to run.
                .on_receive_request(
                    async move |request: ReadTextFileRequest, responder, _cx| {
                        let text = format!("editor buffer of {}", request.path.display());
                        on_read.on_editor(
                            "fs/read_text_file",
                            &request,
                            ReadTextFileResponse::new(text),
                            responder,
                        )
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |request: WriteTextFileRequest, responder, _cx| {
                        on_write.on_editor("fs/write_text_file", &request, WriteTextFileResponse::new(), responder)
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |request: CreateTerminalRequest, responder, _cx| {
                        let answer = CreateTerminalResponse::new("term-1");
                        on_create.on_editor("terminal/create", &request, answer, responder)
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |request: WaitForTerminalExitRequest, responder, _cx| {
                        let answer = WaitForTerminalExitResponse::new(TerminalExitStatus::new().exit_code(0));
                        on_wait.on_editor("terminal/wait_for_exit", &request, answer, responder)
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |request: TerminalOutputRequest, responder, _cx| {
                        let answer = TerminalOutputResponse::new("ran in the editor's terminal", false);
                        on_output.on_editor("terminal/output", &request, answer, responder)
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |request: ReleaseTerminalRequest, responder, _cx| {
                        on_release.on_editor("terminal/release", &request, ReleaseTerminalResponse::new(), responder)
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_request(
                    async move |request: KillTerminalRequest, responder, _cx| {
                        on_kill.on_editor("terminal/kill", &request, KillTerminalResponse::new(), responder)
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
                    let _ = cx_tx.send(cx);
                    let _ = stop_rx.await;
                    Ok(())
                })
                .await
        });
        let cx = match tokio::time::timeout(TIMEOUT, cx_rx).await {
            Ok(Ok(cx)) => cx,
            _ => panic!(
                "the SDK connection did not start: {:?}\n\n{}",
                if driver.is_finished() { Some(driver.await) } else { None },
                shared.diagnostics()
            ),
        };
        Self {
            process,
            cx,
            shared,
            stdin,
            stop: Some(stop_tx),
            driver: Some(driver),
        }
    }

    /// The SDK connection, for sending anything else.
    pub fn connection(&self) -> &ConnectionTo<Agent> {
        &self.cx
    }

    /// The wire transcript.
    pub fn transcript(&self) -> &Transcript {
        &self.shared.transcript
    }

    /// Panics with `message` and everything seen (events, wire, the agent's stderr).
    #[track_caller]
    pub fn fail(&self, message: impl std::fmt::Display) -> ! {
        panic!("{message}\n\n{}", self.shared.diagnostics())
    }

    /// Everything seen so far, for messages.
    pub fn diagnostics(&self) -> String {
        self.shared.diagnostics()
    }

    /// Sets how `session/request_permission` is answered from now on.
    pub fn set_permission_policy(&self, policy: PermissionPolicy) {
        self.shared.lock().policy = policy;
    }

    /// How many permission requests are held unanswered ([`PermissionPolicy::Hold`]).
    pub fn held_permissions(&self) -> usize {
        self.shared.lock().held.len()
    }

    /// Every recorded event, in arrival order.
    pub fn events(&self) -> Vec<Event> {
        self.shared.lock().events.clone()
    }

    /// How many `session/update` notifications arrived (recorded or not).
    pub fn update_count(&self) -> u64 {
        self.shared.updates.load(Ordering::Relaxed)
    }

    /// Waits (at most [`TIMEOUT`]) until `condition` holds for the recorded events; fails the
    /// test, naming `what`, if it does not, or if the agent closed its stdout first.
    pub async fn wait_until(&self, what: &str, condition: impl Fn(&[Event]) -> bool) {
        let mut changed = self.shared.changed.subscribe();
        let wait = async {
            loop {
                if condition(&self.shared.lock().events) {
                    return true;
                }
                if self.shared.eof.load(Ordering::SeqCst) {
                    return false;
                }
                if changed.changed().await.is_err() {
                    return false;
                }
            }
        };
        match tokio::time::timeout(TIMEOUT, wait).await {
            Ok(true) => {}
            Ok(false) => self.fail(format!("the agent closed its stdout while waiting for {what}")),
            Err(_) => self.fail(format!("timed out after {TIMEOUT:?} waiting for {what}")),
        }
    }

    /// Sends `request` (naming `session`, if it is about one) and returns its pending
    /// response. Events about `session` are tagged relative to it.
    pub fn start<Req>(&self, session: Option<&str>, request: Req) -> Pending<Req::Response>
    where
        Req: JsonRpcRequest,
    {
        let method = request.method().to_string();
        let prepared = self.cx.prepare_request(request);
        let wire_id = serde_json::to_value(prepared.id()).unwrap_or(Value::Null);
        let tag = self.shared.open(session, &method, wire_id);
        let (tx, rx) = oneshot::channel();
        let shared = self.shared.clone();
        let session = session.map(str::to_string);
        let closing = tag.clone();
        let registered = prepared.on_receiving_result(move |result: Result<Req::Response, _>| {
            let outcome = match &result {
                Ok(response) => Ok(response.clone().into_json(&closing.method).unwrap_or(Value::Null)),
                Err(error) => Err(json!({
                    "code": i32::from(error.code),
                    "message": error.message,
                    "data": error.data,
                })),
            };
            shared.close(&closing, session.as_deref(), outcome);
            let _ = tx.send(result);
            async { Ok(()) }
        });
        if let Err(error) = registered {
            self.fail(format!("cannot send {method}: {error:?}"));
        }
        Pending {
            tag,
            rx,
            shared: self.shared.clone(),
        }
    }

    /// The `clientInfo.name` this client sends, as an editor would.
    pub const NAME: &'static str = "sdk-editor";

    /// `initialize` (protocol version 1, default client capabilities, `clientInfo`
    /// [`Self::NAME`]); fails the test on error.
    pub async fn initialize(&self) -> InitializeResponse {
        let request = InitializeRequest::new(ProtocolVersion::V1).client_info(Implementation::new(Self::NAME, "1.0.0"));
        self.start(None, request).ok().await
    }

    /// `initialize` as an editor offering its files and terminal (`fs.readTextFile`,
    /// `fs.writeTextFile`, `terminal`), answered by the stand-in editor: a read gives
    /// `editor buffer of PATH`, a command exits 0 with the output `ran in the editor's
    /// terminal`. Each request is recorded as an [`Event::Editor`].
    pub async fn initialize_as_editor(&self) -> InitializeResponse {
        let capabilities = ClientCapabilities::new()
            .fs(FileSystemCapabilities::new().read_text_file(true).write_text_file(true))
            .terminal(true);
        let request = InitializeRequest::new(ProtocolVersion::V1)
            .client_info(Implementation::new(Self::NAME, "1.0.0"))
            .client_capabilities(capabilities);
        self.start(None, request).ok().await
    }

    /// `session/new` in `cwd`; returns the session id. Fails the test on error.
    pub async fn new_session(&self, cwd: &Path) -> String {
        self.start(None, NewSessionRequest::new(cwd))
            .ok()
            .await
            .session_id
            .to_string()
    }

    /// Sends `session/prompt` with one text block.
    pub fn prompt(&self, session: &str, text: &str) -> Pending<PromptResponse> {
        self.start(
            Some(session),
            PromptRequest::new(session.to_string(), vec![ContentBlock::Text(TextContent::new(text))]),
        )
    }

    /// Sends `session/load`.
    pub fn load_session(&self, session: &str, cwd: &Path) -> Pending<LoadSessionResponse> {
        self.start(Some(session), LoadSessionRequest::new(session.to_string(), cwd))
    }

    /// Sends the `session/cancel` notification.
    pub fn cancel(&self, session: &str) {
        if let Err(error) = self.cx.send_notification(CancelNotification::new(session.to_string())) {
            self.fail(format!("cannot send session/cancel: {error:?}"));
        }
    }

    /// Closes the agent's stdin (EOF); the SDK connection stays up to read what the agent
    /// still writes.
    pub async fn close_stdin(&self) {
        if let Some(mut stdin) = self.stdin.lock().await.take() {
            let _ = stdin.shutdown().await;
        }
    }

    /// Closes the agent's stdin and waits (at most [`TIMEOUT`]) for it to exit; fails the
    /// test if it does not.
    pub async fn shutdown(mut self) -> ExitStatus {
        self.close_stdin().await;
        match self.process.wait_exit(TIMEOUT).await {
            Some(status) => {
                self.stop_driver().await;
                status
            }
            None => self.fail(format!(
                "the agent did not exit within {TIMEOUT:?} of its stdin closing"
            )),
        }
    }

    async fn stop_driver(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(driver) = self.driver.take() {
            let _ = tokio::time::timeout(TIMEOUT, driver).await;
        }
    }
}

impl Drop for SdkClient {
    fn drop(&mut self) {
        if let Some(driver) = self.driver.take() {
            driver.abort();
        }
    }
}
