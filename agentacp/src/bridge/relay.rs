//! The two read loops of a bridge — editor → agent and agent → editor — and what they share:
//! the requests waiting on each side (with their deadlines), what governance lets the editor
//! see of each tool call ([`Gate`]), and the audit log.
//!
//! Towards the editor the bridge keeps a server's runtime contract (`docs/design/runtime.md`):
//! `initialize` first and once, no id twice in flight, a frame over the limit answered with
//! its id or `null`, and at end of input every request already received still answered.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tokio::sync::{Notify, mpsc};

mod auth_env;
#[cfg(feature = "mcp")]
mod carry;
mod elicit;
mod mcp;
mod state;
#[cfg(feature = "mcp")]
mod translate;

#[cfg(feature = "mcp")]
pub(super) use state::SocketFolder;

use self::state::{Forwarded, Relay};
use super::gate;
use super::narrow;
use super::options::BridgeOptions;
use crate::audit::{Actor, Approval, AuditEvent, AuditLog, Lifecycle, Subject};
use crate::client::Protocol;
use crate::connection::dialect::{self, LoopbackAnswers, PROMPT_ACCEPTED};
use crate::connection::{self, CONTINUE, CancelRequest, Flow, InFlight, Negotiate, Request, Role, Seam};
use crate::dialect::{AgentNegotiation, ServedVersions, client_face};
use crate::downstream::Downstream;
use crate::governance::{Decision, Governance};
use crate::jsonrpc::frame::{Frame, FrameReader};
use crate::jsonrpc::outbox::Outbox;
use crate::jsonrpc::pending::Pending;
use crate::jsonrpc::{self, Id, RpcError, Unreadable, codes};
use crate::methods::{self, Side, mcp_over_acp};
use crate::oversight::mcp_calls::AcpMcpServers;
use crate::oversight::question::{self as permission, PermissionDecision};
use crate::oversight::record::write_ahead;
use crate::oversight::{Oversight, ToolFacts};
use crate::spec::OperatorSpec;
use crate::subprocess::ExitState;
use crate::wire::default as wire;

/// How often deadlines are checked.
const SWEEP_EVERY: Duration = Duration::from_millis(100);
/// How many of the agent's stderr lines are kept for errors.
const STDERR_LINES: usize = 20;

/// Why a bridge stopped with an error.
#[derive(Debug)]
pub(super) enum RelayError {
    /// The agent could not be started (or, remote, reached).
    Spawn(String),
    /// The agent went away while the editor was still connected.
    AgentExited(String),
    /// The editor stopped reading (for the write timeout) without closing its side.
    EditorStoppedReading,
}

impl std::fmt::Display for RelayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // Names the program or URL: `cannot start the agent `codex-acp`: …`.
            RelayError::Spawn(reason) => f.write_str(reason),
            RelayError::AgentExited(reason) => write!(f, "the downstream agent went away: {reason}"),
            RelayError::EditorStoppedReading => {
                f.write_str("the editor stopped reading our messages; the connection was closed")
            }
        }
    }
}

impl Forwarded {
    /// A request of the agent's to the editor: it waits as long as a permission may.
    fn agent_request(relay: &Relay, method: String, session: Option<String>) -> Forwarded {
        Forwarded {
            method,
            session,
            deadline: Instant::now() + relay.options.permission_timeout,
            idle: false,
            permission: None,
            mcp: None,
            elicitation: None,
        }
    }
}

/// The first id of the bridge's own requests to the editor: far above the ids agents count
/// from, and still exact in a JavaScript number. The range is the bridge's: an agent's
/// request with such an id is refused, and its cancel of one dropped, so the agent cannot
/// take an answer meant for the bridge, or cancel the bridge's question.
const OWN_IDS: i64 = 1 << 52;

/// Whether `id` is in the range of the bridge's own requests ([`OWN_IDS`] up).
fn is_the_bridges(id: &Id) -> bool {
    matches!(id, Id::Number(n) if *n >= OWN_IDS)
}

/// An answer to one of the editor's requests on its way (see [`Relay::take_to_agent`]).
struct Answering<'a>(&'a Relay);

impl Drop for Answering<'_> {
    fn drop(&mut self) {
        self.0.answering.fetch_sub(1, Ordering::SeqCst);
        self.0.answered.notify_waiters();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// `line` ended as the writer wants it (a line a dialect made may end so already).
fn with_newline(mut line: Vec<u8>) -> Vec<u8> {
    if line.last() != Some(&b'\n') {
        line.push(b'\n');
    }
    line
}

fn session_of(params: Option<&RawValue>) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(rename = "sessionId")]
        session_id: Option<String>,
    }
    serde_json::from_str::<Params>(params?.get()).ok()?.session_id
}

pub(super) async fn run<R, W>(
    spec: &'static OperatorSpec,
    downstream: Downstream,
    options: BridgeOptions,
    governance: Option<Arc<dyn Governance>>,
    audit: AuditLog,
    input: R,
    output: W,
) -> Result<(), RelayError>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (downstream, sandbox) = prepared(downstream, &options);
    let auth_env = auth_env::AuthEnv::new(&downstream);
    let served = ServedVersions::new(options.protocol_versions.as_deref().unwrap_or(spec.protocol_versions))
        .map_err(|error| format!("cannot serve the editor: {error}"));
    let opened = match served {
        Ok(served) => downstream.open(STDERR_LINES).await.map(|opened| (opened, served)),
        Err(reason) => Err(std::io::Error::other(reason)),
    };
    let ((process, stdin, stdout), served) = match opened {
        Ok(opened) => opened,
        Err(error) => {
            // The editor is told why (`unreachable.rs`), then the bridge stops.
            let reason = error.to_string();
            tracing::info!(%reason, "answering the editor's requests with the reason, then stopping");
            let message = format!("{} {reason}", spec.id);
            let (limit, timeout) = (options.max_frame_bytes, options.write_timeout);
            super::unreachable::answer_with(&message, input, output, limit, timeout).await;
            return Err(RelayError::Spawn(reason));
        }
    };
    let (up, up_writer) = Outbox::start(output, options.write_timeout);
    let (down, _down_writer) = Outbox::start(stdin, options.write_timeout);
    let (up_seam, down_seam, loopback) = seams(served, &up, &down, options.agent_protocol);
    let operator = spec.operator_id();
    let relay = Arc::new(Relay {
        spec,
        oversight: Oversight::new(governance, audit.clone(), operator.clone()),
        operator,
        up,
        down: RwLock::new(Some(down)),
        audit,
        agent_passed: Mutex::default(),
        client_passed: Mutex::default(),
        to_agent: InFlight::default(),
        answering: AtomicUsize::new(0),
        answered: Notify::new(),
        to_editor: Mutex::default(),
        last_from_agent: Mutex::new(Instant::now()),
        gate: Mutex::default(),
        initialized: AtomicBool::new(false),
        editor_closed: AtomicBool::new(false),
        editor: Mutex::new("client".to_string()),
        process,
        options,
        own: Pending::starting_at(OWN_IDS),
        mcp: AcpMcpServers::default(),
        held_calls: Mutex::default(),
        mcp_over_acp: AtomicBool::new(false),
        #[cfg(feature = "mcp")]
        translation: std::sync::OnceLock::new(),
        sandbox,
        auth_env,
        up_seam,
        down_seam,
    });
    let sweeper = tokio::spawn(sweep(Arc::clone(&relay)));
    // The faces hold the relay only until they end, so that its last lines can be let out below.
    let outcome = both_faces(&relay, input, stdout, loopback).await;
    sweeper.abort();
    #[cfg(feature = "mcp")]
    if let Some(translation) = relay.translation.get() {
        translation.stop.cancel();
    }
    // Before the agent's stdin closes: once it exits, what it started is no longer below it.
    relay.process.note_descendants();
    relay.close_down();
    let options = &relay.options;
    if let ExitState::Running = relay.process.stop(options.exit_grace, options.kill_grace).await {
        tracing::error!(pid = ?relay.process.pid, "the agent could not be stopped");
    }
    relay.oversight.flush();
    // Let the editor's last lines out (bounded by the write timeout), then close.
    let timeout = relay.options.write_timeout;
    drop(relay);
    let _ = tokio::time::timeout(timeout, up_writer).await;
    outcome
}

/// The agent's command with the variables the options name passed through (its environment
/// is cleared otherwise), and the sandbox it will run in.
fn prepared(downstream: Downstream, options: &BridgeOptions) -> (Downstream, Option<Arc<crate::sandbox::Confinement>>) {
    let downstream = match downstream {
        Downstream::Process(command) => Downstream::Process(
            options
                .pass_env
                .iter()
                .fold(command, |command, name| command.allow_env(name)),
        ),
        #[cfg(feature = "websocket")]
        remote @ Downstream::Remote(_) => remote,
    };
    let sandbox = match &downstream {
        Downstream::Process(command) => command.sandbox().map(Arc::new),
        #[cfg(feature = "websocket")]
        Downstream::Remote(_) => None,
    };
    if let Some(sandbox) = &sandbox {
        tracing::info!(granted = %sandbox.report_granted(), "the agent runs in the sandbox");
    }
    (downstream, sandbox)
}

/// The dialect seams of the editor's connection (`up`) and the agent's (`down`), and where the
/// agent face reads the answers its dialect gives itself. The editor's version is settled by
/// its `initialize` (the agent face, for v2); the agent's is asked for with the client face
/// installed before anything is sent.
fn seams(
    served: ServedVersions,
    up: &Outbox,
    down: &Outbox,
    agent_protocol: Protocol,
) -> (Option<Seam>, Option<Seam>, LoopbackAnswers) {
    let up_seam = served
        .translates()
        .then(|| Seam::new(up, Some(Arc::new(AgentNegotiation(served)) as Arc<dyn Negotiate>)));
    let (down_seam, loopback) = match agent_protocol {
        Protocol::V1 => (None, None),
        protocol => {
            let (seam, answers) = client_face::install(down, protocol == Protocol::V2OrV1);
            (Some(seam), Some(answers))
        }
    };
    (up_seam, down_seam, loopback)
}

/// Runs the editor face and the agent face of the bridge, each a role on the connection core,
/// until the editor's requests are all answered after its end of input, the agent goes away,
/// or the editor stops reading.
async fn both_faces<R, A>(
    relay: &Arc<Relay>,
    input: R,
    stdout: A,
    loopback: Option<mpsc::UnboundedReceiver<Vec<u8>>>,
) -> Result<(), RelayError>
where
    R: AsyncRead + Unpin + Send,
    A: AsyncRead + Unpin + Send,
{
    let editor = FrameReader::new(
        BufReader::with_capacity(64 * 1024, input),
        relay.options.max_frame_bytes,
    );
    let agent = FrameReader::new(
        BufReader::with_capacity(64 * 1024, stdout),
        relay.options.max_frame_bytes,
    );
    // Pinned, to be polled by both `select!`s below.
    let mut from_agent = FromAgent(Arc::clone(relay), loopback);
    let mut agent_loop = Box::pin(async move { connection::serve(&mut from_agent, agent).await });
    let mut from_editor = FromEditor(Arc::clone(relay));
    tokio::select! {
        () = connection::serve(&mut from_editor, editor) => {
            // As a server does at end of input: what was received is still answered (each
            // request within its deadline, a running prompt interrupted and given the
            // shutdown grace), then the agent is stopped.
            tracing::debug!("the editor closed its side; answering what it asked, then stopping the agent");
            relay.editor_gone().await;
            tokio::select! {
                () = relay.all_answered() => {}
                () = &mut agent_loop => {
                    let reason = relay.agent_gone().await;
                    tracing::debug!(%reason, "the agent went away after the editor");
                }
            }
            Ok(())
        }
        () = &mut agent_loop => {
            let reason = relay.agent_gone().await;
            Err(RelayError::AgentExited(reason))
        }
        // The editor stopped reading (the writer gave up): nothing more can reach it, so
        // reading on would only take requests that can never be answered. Stop, as a server
        // does, so the editor sees end of file.
        () = relay.up.closed() => {
            tracing::warn!("the editor stopped reading; closing the connection");
            Err(RelayError::EditorStoppedReading)
        }
    }
}

impl Relay {
    /// Who answers the agent's permission requests, for audit records.
    fn editor(&self) -> String {
        lock(&self.editor).clone()
    }

    /// Takes the editor's request `id` off the waiting list to answer it; the request counts
    /// as unanswered until the returned guard is dropped (once the answer is queued).
    fn take_to_agent(&self, id: &Id) -> Option<(Forwarded, Answering<'_>)> {
        let mut waiting = self.to_agent.lock();
        let forwarded = waiting.remove(id)?;
        Some((forwarded, self.answering()))
    }

    /// Counts one more answer on its way; call with the `to_agent` lock held.
    fn answering(&self) -> Answering<'_> {
        self.answering.fetch_add(1, Ordering::SeqCst);
        Answering(self)
    }

    /// Returns once every request of the editor's has its answer queued.
    async fn all_answered(&self) {
        loop {
            let notified = self.answered.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let waiting = self.to_agent.lock();
                if waiting.is_empty() && self.answering.load(Ordering::SeqCst) == 0 {
                    return;
                }
            }
            notified.await;
        }
    }

    /// The editor closed its side: the agent's requests waiting for it fail (a permission is
    /// rejected), running prompts are cancelled downstream and get the shutdown grace, as does
    /// an unanswered `initialize`.
    async fn editor_gone(&self) {
        self.editor_closed.store(true, Ordering::SeqCst);
        self.own.close();
        let waiting: Vec<(Id, Forwarded)> = lock(&self.to_editor).drain().collect();
        for (id, forwarded) in waiting {
            self.fail_agent_request(&id, &forwarded, "agentacp", "connection closed")
                .await;
        }
        let until = Instant::now() + self.options.shutdown_grace;
        let prompts: Vec<String> = self
            .to_agent
            .lock()
            .values_mut()
            // An agent that has not answered `initialize` has nothing to finish: it gets the
            // grace too, not the request timeout (SIGTERM would otherwise wait that out).
            .filter(|f| f.idle || f.method == wire::method_names::INITIALIZE)
            .filter_map(|f| {
                f.deadline = f.deadline.min(until);
                // Only a prompt (no longer idle-timed) is cancelled downstream.
                let prompt = std::mem::take(&mut f.idle);
                if prompt { f.session.clone() } else { None }
            })
            .collect();
        for session in prompts {
            self.to_agent_line(jsonrpc::encode_notification(
                wire::method_names::SESSION_CANCEL,
                &json!({ "sessionId": session }),
            ))
            .await;
        }
    }

    /// Fails a request of the agent's that the editor will not answer: a permission is
    /// rejected (and audited as rejected by `who` for `reason`), anything else is an error.
    async fn fail_agent_request(&self, id: &Id, forwarded: &Forwarded, who: &str, reason: &str) {
        if let Some(waiting) = &forwarded.mcp {
            mcp::failed(self, waiting, reason);
        }
        match &forwarded.permission {
            Some((request, facts)) => {
                let session = request.session_id.as_str();
                lock(&self.gate).rejected(session, &facts.id);
                self.oversight.permission_answered(
                    session,
                    facts,
                    Approval::RejectedBy {
                        who: who.to_string(),
                        reason: reason.to_string(),
                    },
                );
                answer_permission(self, id, request, &PermissionDecision::Reject).await;
            }
            None => {
                let message = if reason == "timeout" {
                    format!("the client did not answer `{}` in time", forwarded.method)
                } else {
                    format!("the client cannot answer `{}`: {reason}", forwarded.method)
                };
                let error = RpcError::new(codes::INTERNAL_ERROR, message);
                self.to_agent_line(jsonrpc::encode_error(id, &error)).await;
            }
        }
    }

    /// Audits something from the agent the bridge did not pass to the editor, and why.
    fn audit_dropped(&self, method: &str, session: Option<&str>, tool_call: Option<&str>, reason: &str) {
        tracing::warn!(method, session, tool_call, reason, "dropped a message from the agent");
        let mut extra = serde_json::Map::new();
        extra.insert("dropped".into(), json!(reason));
        if let Some(tool_call) = tool_call {
            extra.insert("toolCallId".into(), json!(tool_call));
        }
        if let Err(error) = self.record_passage(false, method, session, None, extra) {
            tracing::error!(%error, "auditing a dropped message failed");
        }
    }

    /// Audits a message the bridge refused to pass (`from_editor`: the editor's, else the
    /// agent's), and why.
    fn audit_refused(&self, from_editor: bool, method: &str, session: Option<&str>, id: Option<&Id>, reason: &str) {
        tracing::warn!(method, session, reason, from_editor, "refused a message");
        let mut extra = serde_json::Map::new();
        extra.insert("refused".into(), json!(reason));
        if let Err(error) = self.record_passage(from_editor, method, session, id, extra) {
            tracing::error!(%error, "auditing a refused message failed");
        }
    }

    /// Why `method` may not go to `to` (the agent for the editor's messages, the editor for
    /// the agent's); `None` when it may. Extension methods (`_…`) pass; a method of the table
    /// passes when it goes to the side that receives it and what offers it passed the
    /// bridge (see [`narrow`]); any other method does not.
    fn refusal(&self, to: Side, method: &str) -> Option<String> {
        if let Some(refusal) = mcp::refusal(self, to, method) {
            return refusal;
        }
        if method.starts_with('_') {
            return None;
        }
        let Some(row) = methods::find(method) else {
            return Some(format!(
                "`{method}` is not a method this bridge knows (it passes extension methods, `_…`, and the ACP methods it governs)"
            ));
        };
        if row.side != to && row.side != Side::Both {
            return Some(format!("`{method}` is not sent in this direction"));
        }
        let capability = row.offer.capability()?;
        let passed = lock(if to == Side::Agent {
            &self.agent_passed
        } else {
            &self.client_passed
        });
        let path = capability.path.join(".");
        match passed.as_ref() {
            Some(passed) if passed.has(capability) => None,
            // Declared for a v2 editor (`narrow::with_v2_baseline`): the agent lacks it.
            Some(_)
                if to == Side::Agent
                    && self.editor_speaks_v2()
                    && narrow::V2_SESSION_BASELINE.contains(&capability) =>
            {
                Some(format!(
                    "`{method}` is one of ACP protocol version 2's baseline session methods, but the agent behind this bridge does not offer it (it does not advertise `{path}`)"
                ))
            }
            Some(_) if !capability.declarable => Some(format!(
                "`{method}` is not offered: the bridge does not govern `{path}` (a manifest cannot declare it), so it does not pass"
            )),
            Some(_) => Some(format!(
                "`{method}` is not offered: `{path}` is not both declared by the bridge's manifest and advertised"
            )),
            None => Some(format!("`{method}` is not offered before `initialize` is answered")),
        }
    }

    /// Whether the editor speaks ACP protocol version 2 (settled by its `initialize`).
    fn editor_speaks_v2(&self) -> bool {
        self.up_seam.as_ref().is_some_and(|seam| seam.version() >= 2)
    }

    fn down(&self) -> Option<Outbox> {
        self.down.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn close_down(&self) {
        self.down.write().unwrap_or_else(|e| e.into_inner()).take();
    }

    async fn to_editor_line(&self, line: Vec<u8>) {
        if self.up.send(line).await.is_err() {
            tracing::debug!("the editor stopped reading");
        }
    }

    async fn to_agent_line(&self, line: Vec<u8>) -> bool {
        match self.down() {
            Some(down) => down.send(line).await.is_ok(),
            None => false,
        }
    }

    /// Writes an audit record of a message passing through; what cannot be audited does not
    /// pass.
    fn audit_passage(
        &self,
        from_editor: bool,
        method: &str,
        session: Option<&str>,
        id: Option<&Id>,
    ) -> Result<(), RpcError> {
        self.record_passage(from_editor, method, session, id, serde_json::Map::new())
    }

    /// A passage record with `extra` fields in its `metadata.aip44`.
    fn record_passage(
        &self,
        from_editor: bool,
        method: &str,
        session: Option<&str>,
        id: Option<&Id>,
        extra: serde_json::Map<String, Value>,
    ) -> Result<(), RpcError> {
        if self.audit.is_off() {
            return Ok(());
        }
        let (actor, role) = if from_editor {
            ("client:upstream", "client")
        } else {
            ("agent:downstream", "agent")
        };
        let mut event = AuditEvent::new(
            Actor {
                id: actor.into(),
                role: Some(role.into()),
            },
            action_of(method),
            Subject {
                kind: if session.is_some() { "session" } else { "connection" }.into(),
                reference: session.map(str::to_string),
                path: None,
            },
        );
        let mut aip44 = serde_json::Map::new();
        aip44.insert("audit-event-kind".into(), json!("bridge"));
        aip44.insert("operator".into(), json!(self.operator));
        aip44.insert(
            "direction".into(),
            json!(if from_editor {
                "upstream→downstream"
            } else {
                "downstream→upstream"
            }),
        );
        aip44.insert("method".into(), json!(method));
        if let Some(id) = id {
            aip44.insert("id".into(), json!(id));
        }
        aip44.extend(extra);
        event.metadata = Some(serde_json::Map::from_iter([(
            "aip44".to_string(),
            Value::Object(aip44),
        )]));
        self.record(event)
    }

    fn lifecycle(&self, session: &str, state: Lifecycle, detail: Option<Value>) -> Result<(), RpcError> {
        self.record(AuditEvent::lifecycle(&self.operator, session, state, detail))
    }

    fn record(&self, event: AuditEvent) -> Result<(), RpcError> {
        if self.audit.is_off() {
            return Ok(());
        }
        write_ahead(&self.audit, None, event).map_err(|error| {
            tracing::error!(%error, "the bridge's audit log failed");
            RpcError::new(
                codes::INTERNAL_ERROR,
                format!("the bridge could not write its audit record: {error}"),
            )
        })
    }

    /// The agent closed its output: fail what the editor waits for; the reason, with the
    /// agent's exit status and last stderr lines.
    async fn agent_gone(&self) -> String {
        let (state, ()) = tokio::join!(
            self.process.wait_exit(Duration::from_secs(2)),
            self.process.stderr.wait_closed(Duration::from_secs(2))
        );
        let status = match state {
            ExitState::Exited(Some(status)) => format!("it exited ({status})"),
            _ => "it closed its output".to_string(),
        };
        let stderr = self.process.stderr.lines();
        let reason = if stderr.is_empty() {
            status
        } else {
            format!("{status}; its last stderr lines: {}", stderr.join(" | "))
        };
        let waiting: Vec<(Id, Answering<'_>)> = {
            let mut waiting = self.to_agent.lock();
            let ids: Vec<Id> = waiting.drain().map(|(id, _)| id).collect();
            ids.into_iter().map(|id| (id, self.answering())).collect()
        };
        for (id, _answering) in waiting {
            let error = RpcError::new(
                codes::INTERNAL_ERROR,
                format!("the downstream agent went away: {reason}"),
            );
            self.to_editor_line(jsonrpc::encode_error(&id, &error)).await;
        }
        lock(&self.to_editor).clear();
        reason
    }
}

// ---- editor → agent ----------------------------------------------------------------------------

/// The bridge's editor face on the connection core: the editor's messages, kept to a server's
/// rules, to the agent.
struct FromEditor(Arc<Relay>);

impl Role for FromEditor {
    const PEER: &'static str = "the editor";
    const BOUND_DEPTH: bool = true;
    type Wake = std::convert::Infallible;

    fn seam(&self) -> Option<&Seam> {
        self.0.up_seam.as_ref()
    }

    async fn too_large(&mut self, id: Option<Id>, error: RpcError) -> Flow {
        // As a server answers: the id read from its first bytes, else `null`.
        let line = jsonrpc::encode_error(&id.unwrap_or(Id::Null), &error);
        self.0.to_editor_line(line).await;
        CONTINUE
    }

    async fn unreadable(&mut self, unreadable: Box<Unreadable>) -> Flow {
        let line = jsonrpc::encode_error(&unreadable.id, &unreadable.error);
        self.0.to_editor_line(line).await;
        CONTINUE
    }

    async fn response(&mut self, id: Id, outcome: Result<Box<RawValue>, RpcError>, line: Vec<u8>) -> Flow {
        editor_response(&self.0, id, outcome, line).await;
        CONTINUE
    }

    async fn notification(&mut self, method: String, params: Option<Box<RawValue>>, line: Vec<u8>) -> Flow {
        editor_notification(&self.0, method, params, line).await;
        CONTINUE
    }

    async fn cancel_request(&mut self, cancel: CancelRequest) -> Flow {
        editor_cancel(&self.0, cancel).await;
        CONTINUE
    }

    async fn request(&mut self, request: Request) -> Flow {
        editor_request(&self.0, request).await;
        CONTINUE
    }
}

/// The editor's request: admitted, audited, rewritten where needed, and passed to the agent.
async fn editor_request(
    relay: &Arc<Relay>,
    Request {
        id,
        method,
        params,
        line,
        ..
    }: Request,
) {
    if let Err(error) = admit(relay, &id, &method, params.as_deref()) {
        relay.to_editor_line(jsonrpc::encode_error(&id, &error)).await;
        return;
    }
    let session = session_of(params.as_deref());
    let mcp_waiting = mcp::editor_request(relay, &method, params.as_deref());
    let audited = relay
        .audit_passage(true, &method, session.as_deref(), Some(&id))
        .and_then(|()| match (method.as_str(), &session) {
            (wire::method_names::SESSION_PROMPT, Some(session)) => relay.lifecycle(session, Lifecycle::Running, None),
            _ => Ok(()),
        });
    if let Err(error) = audited {
        relay.to_editor_line(jsonrpc::encode_error(&id, &error)).await;
        return;
    }
    #[cfg(feature = "mcp")]
    if translate::editor_message(relay, Some(&id), &method, params.as_deref()) {
        return;
    }
    let line = if method == wire::method_names::INITIALIZE {
        narrow_initialize(relay, &id, params.as_deref())
    } else {
        without_token(Some(&id), &method, params.as_deref()).unwrap_or_else(|| with_newline(line))
    };
    #[cfg(feature = "mcp")]
    let line = match translate::session_request(relay, &id, &method, params.as_deref()).await {
        None => line,
        Some(Ok(rewritten)) => rewritten,
        Some(Err(error)) => {
            relay.to_editor_line(jsonrpc::encode_error(&id, &error)).await;
            return;
        }
    };
    let timeout = relay.options.request_timeout;
    let is_prompt = method == wire::method_names::SESSION_PROMPT;
    let deadline = Instant::now()
        + if is_prompt {
            relay.options.prompt_idle_timeout
        } else {
            timeout
        };
    relay.to_agent.lock().insert(
        id.clone(),
        Forwarded {
            method,
            session,
            deadline,
            idle: is_prompt,
            permission: None,
            mcp: mcp_waiting,
            elicitation: None,
        },
    );
    if is_prompt && relay.up.rewrites() {
        // A v2 editor's prompt is acknowledged as it goes on (the agent face), before anything
        // of its turn can reach the editor.
        let notice = jsonrpc::encode_notification(PROMPT_ACCEPTED, &json!({ "requestId": id }));
        relay.to_editor_line(notice).await;
    }
    if !relay.to_agent_line(line).await {
        let _answering = relay.take_to_agent(&id);
        let error = RpcError::new(codes::INTERNAL_ERROR, "the downstream agent is gone");
        relay.to_editor_line(jsonrpc::encode_error(&id, &error)).await;
    }
}

/// The editor's notification: refused or audited, then passed to the agent.
async fn editor_notification(relay: &Arc<Relay>, method: String, params: Option<Box<RawValue>>, line: Vec<u8>) {
    if !editor_notice_passes(relay, &method, params.as_deref()) {
        return;
    }
    #[cfg(feature = "mcp")]
    if translate::editor_message(relay, None, &method, params.as_deref()) {
        return;
    }
    editor_notice_on(relay, &method, params.as_deref(), line).await;
}

/// The editor's `$/cancel_request`: refused or audited as a notification; one of a request on
/// the bridge's own MCP connections is the bridge's, any other is passed to the agent.
async fn editor_cancel(relay: &Arc<Relay>, CancelRequest { params, line, .. }: CancelRequest) {
    if !editor_notice_passes(relay, CancelRequest::METHOD, params.as_deref()) {
        return;
    }
    #[cfg(feature = "mcp")]
    if translate::editor_cancel(relay, params.as_deref()) {
        return;
    }
    editor_notice_on(relay, CancelRequest::METHOD, params.as_deref(), line).await;
}

/// Whether the editor's notification `method` may pass (audited); a refusal is audited.
fn editor_notice_passes(relay: &Relay, method: &str, params: Option<&RawValue>) -> bool {
    let session = session_of(params);
    if let Some(reason) = relay.refusal(Side::Agent, method) {
        relay.audit_refused(true, method, session.as_deref(), None, &reason);
        return false;
    }
    relay.audit_passage(true, method, session.as_deref(), None).is_ok()
}

/// Passes the editor's notification on to the agent (without its token).
async fn editor_notice_on(relay: &Relay, method: &str, params: Option<&RawValue>, line: Vec<u8>) {
    let line = without_token(None, method, params).unwrap_or_else(|| with_newline(line));
    relay.to_agent_line(line).await;
}

/// The editor's answer to a request of the agent's (a permission: decided here first) or of
/// the bridge's own.
async fn editor_response(relay: &Arc<Relay>, id: Id, outcome: Result<Box<RawValue>, RpcError>, line: Vec<u8>) {
    let Some(forwarded) = lock(&relay.to_editor).remove(&id) else {
        if !relay.own.resolve(&id, outcome) {
            tracing::debug!(%id, "an answer from the editor to nothing waiting was dropped");
        }
        return;
    };
    if let Some((request, facts)) = &forwarded.permission {
        let session = request.session_id.as_str();
        // Fail closed: an unreadable answer is a rejection, which the bridge answers.
        let mut readable = true;
        let approval = match &outcome {
            Ok(result) => match serde_json::from_str::<wire::RequestPermissionResponse>(result.get()) {
                Ok(response) if permission::approves(request, &response.outcome) => {
                    Approval::ApprovedBy(relay.editor())
                }
                Ok(response) => Approval::RejectedBy {
                    who: relay.editor(),
                    reason: match response.outcome {
                        wire::RequestPermissionOutcome::Cancelled => "cancelled".into(),
                        _ => "rejected".into(),
                    },
                },
                Err(_) => {
                    readable = false;
                    Approval::RejectedBy {
                        who: relay.editor(),
                        reason: "unreadable answer".into(),
                    }
                }
            },
            Err(_) => Approval::RejectedBy {
                who: relay.editor(),
                reason: "error answer".into(),
            },
        };
        let approved = matches!(approval, Approval::ApprovedBy(_));
        let applies = lock(&relay.gate).answered(session, facts, approved);
        match applies {
            gate::Answer::Applies => relay.oversight.permission_answered(session, facts, approval),
            // Denied meanwhile (and audited so): whatever the editor said, no.
            gate::Answer::Hidden => readable = false,
            gate::Answer::Changed | gate::Answer::Gone => {
                let reason = if applies == gate::Answer::Changed {
                    "the tool call changed while the client was asked"
                } else {
                    "the tool call was over before the client answered"
                };
                lock(&relay.gate).rejected(session, &facts.id);
                relay.oversight.permission_answered(
                    session,
                    facts,
                    Approval::RejectedBy {
                        who: "agentacp".into(),
                        reason: reason.into(),
                    },
                );
                readable = false;
            }
        }
        if !readable {
            answer_permission(relay, &id, request, &PermissionDecision::Reject).await;
            return;
        }
    }
    let rewritten = (forwarded.mcp.as_ref())
        .and_then(|waiting| mcp::editor_answered(relay, &id, waiting, &outcome))
        .or_else(|| {
            (forwarded.elicitation.as_ref()).and_then(|waiting| elicit::editor_answered(relay, &id, waiting, &outcome))
        });
    relay
        .to_agent_line(rewritten.unwrap_or_else(|| with_newline(line)))
        .await;
}

/// Whether the editor's request may go to the agent, by the rules a server keeps:
/// `initialize` first (with a readable protocol version) and only once, no id that is still
/// waiting for its answer; and only methods that passed the bridge ([`Relay::refusal`],
/// refused with `-32601` and audited).
fn admit(relay: &Relay, id: &Id, method: &str, params: Option<&RawValue>) -> Result<(), RpcError> {
    #[derive(serde::Deserialize)]
    struct Initialize {
        #[serde(rename = "protocolVersion")]
        _protocol_version: u64,
    }
    if method == wire::method_names::INITIALIZE {
        if relay.initialized.load(Ordering::SeqCst) {
            return Err(RpcError::new(codes::INVALID_REQUEST, "`initialize` was already called"));
        }
        serde_json::from_str::<Initialize>(params.map_or("null", RawValue::get)).map_err(|error| {
            RpcError::new(
                codes::INVALID_PARAMS,
                format!("invalid params for `initialize`: {error}"),
            )
        })?;
    } else if !relay.initialized.load(Ordering::SeqCst) {
        return Err(RpcError::new(
            codes::INVALID_REQUEST,
            format!("`{method}` before `initialize`: the client must initialize first"),
        ));
    }
    relay.to_agent.refuse_duplicate(id)?;
    if let Some(reason) = relay.refusal(Side::Agent, method) {
        relay.audit_refused(true, method, session_of(params).as_deref(), Some(id), &reason);
        return Err(RpcError::new(codes::METHOD_NOT_FOUND, reason));
    }
    let unpassed = (method == wire::method_names::AUTHENTICATE).then(|| relay.auth_env.refusal(params));
    if let Some(Some(reason)) = unpassed {
        relay.audit_refused(true, method, None, Some(id), &reason);
        return Err(RpcError::new(codes::INTERNAL_ERROR, reason));
    }
    if method == wire::method_names::INITIALIZE {
        relay.initialized.store(true, Ordering::SeqCst);
    }
    Ok(())
}

/// The editor's message (request `id`, else a notification) re-encoded without
/// `_meta.agentacp.token` in its params — the bearer token an editor authenticates to the
/// bridge with (`authenticate`), which is the bridge's and never the agent's; `None` when it
/// carries none (it passes byte for byte).
/// A message that gives a key twice is re-encoded too (each parser might read another
/// `_meta`).
fn without_token(id: Option<&Id>, method: &str, params: Option<&RawValue>) -> Option<Vec<u8>> {
    let text = params?.get();
    let mut params: Value = serde_json::from_str(text).ok()?;
    if !remove_token(method, &mut params) && !jsonrpc::gives_a_key_twice(text) {
        return None;
    }
    Some(match id {
        Some(id) => jsonrpc::encode_request(id, method, &params),
        None => jsonrpc::encode_notification(method, &params),
    })
}

/// Removes `_meta.agentacp.token` from `params`; whether there was one.
fn remove_token(method: &str, params: &mut Value) -> bool {
    let removed = params
        .pointer_mut("/_meta/agentacp")
        .and_then(Value::as_object_mut)
        .and_then(|ours| ours.remove("token"))
        .is_some();
    if removed {
        tracing::info!(method, "removed the bearer token from a message to the agent");
    }
    removed
}

/// The editor's `initialize`, with the client capabilities narrowed to what the manifest lets
/// through ([`narrow`]).
fn narrow_initialize(relay: &Relay, id: &Id, params: Option<&RawValue>) -> Vec<u8> {
    let mut params: Value = params
        .and_then(|p| serde_json::from_str(p.get()).ok())
        .unwrap_or_else(|| json!({}));
    if let Some(name) = params.pointer("/clientInfo/name").and_then(Value::as_str) {
        *lock(&relay.editor) = format!("client:{name}");
    }
    remove_token(wire::method_names::INITIALIZE, &mut params);
    if relay.down_seam.is_some() {
        // The client face shapes it as v2's.
        params["protocolVersion"] = Value::from(relay.options.agent_protocol.asked());
    }
    let declared = relay.spec.initialize_params();
    if let Some(object) = params.as_object_mut() {
        let mut capabilities = match object.remove("clientCapabilities") {
            Some(Value::Object(capabilities)) => capabilities,
            _ => serde_json::Map::new(),
        };
        let declared = declared.get("clientCapabilities").unwrap_or(&Value::Null);
        let passed = narrow::narrow(Side::Client, &mut capabilities, declared);
        *lock(&relay.client_passed) = Some(passed);
        object.insert("clientCapabilities".into(), Value::Object(capabilities));
    }
    jsonrpc::encode_request(id, wire::method_names::INITIALIZE, &params)
}

// ---- agent → editor ----------------------------------------------------------------------------

/// The bridge's agent face on the connection core: the agent's messages, governed, to the
/// editor; and, for an agent asked for v2, the answers the client face gives the editor's
/// requests that v2 has no counterpart for (read as the agent's).
struct FromAgent(Arc<Relay>, LoopbackAnswers);

impl Role for FromAgent {
    const PEER: &'static str = "the agent";
    const BOUND_DEPTH: bool = true;
    type Wake = Vec<u8>;

    fn seam(&self) -> Option<&Seam> {
        self.0.down_seam.as_ref()
    }

    async fn wait(&mut self) -> Vec<u8> {
        dialect::next_loopback(&mut self.1).await
    }

    async fn woken(&mut self, answer: Vec<u8>) -> Flow {
        connection::loopback_answered(self, answer).await
    }

    fn frame_read(&mut self, _frame: &Frame) {
        // Any message from the agent shows a running prompt is alive (see `sweep`).
        *lock(&self.0.last_from_agent) = Instant::now();
    }

    async fn too_large(&mut self, id: Option<Id>, error: RpcError) -> Flow {
        let Some(id) = id else { return CONTINUE };
        // An answer to the editor's request: fail that request. Else the agent's request.
        if let Some((_, _answering)) = self.0.take_to_agent(&id) {
            self.0.to_editor_line(jsonrpc::encode_error(&id, &error)).await;
        } else {
            self.0.to_agent_line(jsonrpc::encode_error(&id, &error)).await;
        }
        CONTINUE
    }

    async fn response(&mut self, id: Id, outcome: Result<Box<RawValue>, RpcError>, line: Vec<u8>) -> Flow {
        agent_response(&self.0, id, outcome, line).await;
        CONTINUE
    }

    async fn notification(&mut self, method: String, params: Option<Box<RawValue>>, line: Vec<u8>) -> Flow {
        agent_notification(&self.0, method, params, line).await;
        CONTINUE
    }

    async fn cancel_request(&mut self, cancel: CancelRequest) -> Flow {
        agent_cancel(&self.0, cancel).await;
        CONTINUE
    }

    async fn request(&mut self, request: Request) -> Flow {
        agent_request(&self.0, request).await;
        CONTINUE
    }
}

/// The agent's answer to a request of the editor's: audited, rewritten where needed, passed on.
async fn agent_response(relay: &Arc<Relay>, id: Id, outcome: Result<Box<RawValue>, RpcError>, line: Vec<u8>) {
    let Some((forwarded, _answering)) = relay.take_to_agent(&id) else {
        tracing::debug!(%id, "an answer from the agent to nothing waiting was dropped");
        return;
    };
    let line = match answered(relay, &id, &forwarded, &outcome) {
        Ok(Some(rewritten)) => rewritten,
        Ok(None) => with_newline(line),
        Err(error) => jsonrpc::encode_error(&id, &error),
    };
    relay.to_editor_line(line).await;
}

/// The agent's notification: refused, dropped or passed on (an update through the gate).
async fn agent_notification(relay: &Arc<Relay>, method: String, params: Option<Box<RawValue>>, line: Vec<u8>) {
    if agent_notice_refused(relay, &method, params.as_deref()) {
        return;
    }
    let line = match params.as_deref() {
        Some(params) if method == wire::method_names::SESSION_UPDATE => match pass_update(relay, params).await {
            Passage::Drop => return,
            Passage::Pass => with_newline(line),
            Passage::Rewritten(line) => line,
        },
        _ => with_newline(line),
    };
    relay.to_editor_line(line).await;
}

/// The agent's `$/cancel_request`: refused as a notification would be; a cancel of one of the
/// bridge's own requests is dropped, one of a call the bridge still holds is the bridge's
/// (the editor has not seen that id), any other is passed to the editor.
async fn agent_cancel(relay: &Arc<Relay>, CancelRequest { request, params, line }: CancelRequest) {
    let method = CancelRequest::METHOD;
    if agent_notice_refused(relay, method, params.as_deref()) {
        return;
    }
    if request.as_ref().is_some_and(is_the_bridges) {
        relay.audit_dropped(method, None, None, "a cancel of a request id in the bridge's own range");
        return;
    }
    if let Some(named) = &request
        && mcp::cancel_held(relay, named).await
    {
        return;
    }
    relay.to_editor_line(with_newline(line)).await;
}

/// Whether the agent's notification `method` is refused or dropped here (audited so).
fn agent_notice_refused(relay: &Relay, method: &str, params: Option<&RawValue>) -> bool {
    if is_request_method(method) {
        // A request without an id: the editor could show it but never answer it, and
        // governance never saw it.
        let session = session_of(params);
        relay.audit_dropped(method, session.as_deref(), None, "a request sent as a notification");
        return true;
    }
    if let Some(reason) = relay.refusal(Side::Client, method) {
        let session = session_of(params);
        relay.audit_refused(false, method, session.as_deref(), None, &reason);
        return true;
    }
    if let Some(reason) = mcp::notification_refusal(method, params) {
        relay.audit_dropped(method, None, None, reason);
        return true;
    }
    false
}

/// Audits the agent's answer to a request of the editor's; `Some(line)` when it is rewritten.
fn answered(
    relay: &Arc<Relay>,
    id: &Id,
    forwarded: &Forwarded,
    outcome: &Result<Box<RawValue>, RpcError>,
) -> Result<Option<Vec<u8>>, RpcError> {
    let session = forwarded.session.as_deref();
    match (forwarded.method.as_str(), outcome) {
        (wire::method_names::INITIALIZE, Ok(result)) => widen_initialize(relay, id, result).map(Some),
        (wire::method_names::SESSION_NEW, Ok(result)) => {
            let created = serde_json::from_str::<Value>(result.get()).ok();
            match created.as_ref().and_then(|v| v["sessionId"].as_str()) {
                Some(session) => {
                    mcp::session_created(relay, forwarded.mcp.as_ref(), session);
                    #[cfg(feature = "mcp")]
                    translate::session_created(relay, id, session);
                    relay.lifecycle(session, Lifecycle::Invoked, None)?;
                }
                #[cfg(feature = "mcp")]
                None => translate::request_failed(relay, id),
                #[cfg(not(feature = "mcp"))]
                None => {}
            }
            Ok(None)
        }
        // Refused, a session request leaves no server served for it.
        #[cfg(feature = "mcp")]
        (wire::method_names::SESSION_NEW | "session/resume", Err(_)) => {
            translate::request_failed(relay, id);
            Ok(None)
        }
        #[cfg(feature = "mcp")]
        ("session/resume", Ok(_)) => {
            translate::request_answered(relay, id);
            Ok(None)
        }
        #[cfg(feature = "mcp")]
        (wire::method_names::SESSION_CLOSE, Ok(_)) => {
            if let Some(session) = session {
                translate::session_closed(relay, session);
                // Its servers' listings and connections, as governance knew them.
                relay.mcp.session_closed(session);
            }
            Ok(None)
        }
        (wire::method_names::SESSION_LOAD, outcome) => {
            #[cfg(feature = "mcp")]
            match outcome {
                Ok(_) => translate::request_answered(relay, id),
                Err(_) => translate::request_failed(relay, id),
            }
            let Some(session) = session else { return Ok(None) };
            lock(&relay.gate).load_answered(session);
            if outcome.is_ok() {
                relay.lifecycle(session, Lifecycle::Invoked, Some(json!({"loaded": true})))?;
            }
            Ok(None)
        }
        (wire::method_names::SESSION_PROMPT, outcome) => {
            let Some(session) = session else { return Ok(None) };
            relay.oversight.turn_ended(session);
            lock(&relay.gate).turn_ended(session);
            let stop = outcome
                .as_ref()
                .ok()
                .and_then(|result| serde_json::from_str::<Value>(result.get()).ok())
                .and_then(|v| v["stopReason"].as_str().map(str::to_string));
            match stop.as_deref() {
                Some("cancelled") | None => {
                    let detail =
                        stop.map_or_else(|| json!({"error": "the prompt failed"}), |s| json!({"stopReason": s}));
                    relay.lifecycle(session, Lifecycle::Interrupted, Some(detail))?;
                }
                Some(reason) => relay.lifecycle(session, Lifecycle::Completed, Some(json!({"stopReason": reason})))?,
            }
            Ok(None)
        }
        _ => Ok(None),
    }
}

/// The audit action of a forwarded method: `acp.` and the method with `/` as `.`
/// (`session/prompt` → `acp.session.prompt`); anything outside `[a-z0-9._-]` becomes `-`.
fn action_of(method: &str) -> String {
    let name: String = method
        .trim_start_matches("$/")
        .chars()
        .map(|c| match c {
            '/' => '.',
            'a'..='z' | '0'..='9' | '.' | '_' | '-' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        })
        .collect();
    let name = name.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if name.is_empty() {
        "acp.unknown".to_string()
    } else {
        format!("acp.{name}")
    }
}

/// The agent's `initialize` answer, as the editor sees it: the protocol version checked, the
/// agent capabilities narrowed to the manifest's ([`narrow`]), the bridge's `_meta.aip44`
/// added, and `_meta.agentacp.narrowed`: what was narrowed away and why (the agent's other
/// `_meta` kept).
fn widen_initialize(relay: &Relay, id: &Id, result: &RawValue) -> Result<Vec<u8>, RpcError> {
    let mut result: Value = serde_json::from_str(result.get()).map_err(|error| {
        RpcError::new(
            codes::INTERNAL_ERROR,
            format!("the agent's `initialize` answer is unreadable: {error}"),
        )
    })?;
    let ours = relay.spec.initialize_result();
    let mut version = result.get("protocolVersion").and_then(Value::as_u64);
    if relay.down_seam.is_some() && version.is_some_and(|v| relay.options.agent_protocol.accepts(v)) {
        // A v2 agent's answer, read as v1's (the client face): the editor is answered in
        // the bridge's own version (and in v2 by the agent face, for a v2 editor).
        version = Some(u64::from(relay.spec.protocol_version));
        result["protocolVersion"] = Value::from(relay.spec.protocol_version);
    }
    if version != Some(u64::from(relay.spec.protocol_version)) {
        return Err(RpcError::new(
            codes::INTERNAL_ERROR,
            format!(
                "the downstream agent chose protocol version {}; this bridge speaks {}",
                version.map_or("(none)".to_string(), |v| v.to_string()),
                relay.spec.protocol_version
            ),
        ));
    }
    let mut theirs = match result.get_mut("agentCapabilities").map(Value::take) {
        Some(Value::Object(theirs)) => theirs,
        _ => serde_json::Map::new(),
    };
    relay.auth_env.advertised(&result);
    let advertised = Value::Object(theirs.clone());
    // A v2 editor is owed v2's baseline session methods whatever the manifest declares.
    let with_baseline;
    let declared = if relay.editor_speaks_v2() {
        with_baseline = narrow::with_v2_baseline(&ours["agentCapabilities"]);
        &with_baseline
    } else {
        &ours["agentCapabilities"]
    };
    let passed = narrow::narrow(Side::Agent, &mut theirs, declared);
    *lock(&relay.agent_passed) = Some(passed);
    result["agentCapabilities"] = Value::Object(theirs);
    mcp::advertise(relay, &advertised, &mut result);
    let mut meta = result
        .get("_meta")
        .cloned()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}));
    meta["aip44"] = ours["_meta"]["aip44"].clone();
    // What the editor does not get of the agent's capabilities, and why (`narrow.rs`).
    if !meta["agentacp"].is_object() {
        meta["agentacp"] = json!({});
    }
    meta["agentacp"]["narrowed"] = Value::Array(narrow::narrowed(&advertised, &result["agentCapabilities"]));
    if let Some(downstream) = result.get("agentInfo").cloned() {
        meta["aip44"]["downstream"] = downstream;
    }
    if let Some(sandbox) = &relay.sandbox {
        meta["aip44"]["sandbox_enforcement"] = sandbox.report();
    }
    result["_meta"] = meta;
    result["agentInfo"] = ours["agentInfo"].clone();
    Ok(jsonrpc::encode_result(id, &result))
}

/// The methods the agent may call on the editor (requests: they need an id).
fn is_request_method(method: &str) -> bool {
    methods::find(method).is_some_and(methods::Method::is_client_request)
}

/// What becomes of a `session/update` of the agent's.
enum Passage {
    /// It does not reach the editor.
    Drop,
    /// It passes byte for byte.
    Pass,
    /// This line (newline included) passes instead: the update rewritten by the [`Gate`].
    Rewritten(Vec<u8>),
}

impl From<bool> for Passage {
    fn from(pass: bool) -> Passage {
        if pass { Passage::Pass } else { Passage::Drop }
    }
}

/// Follows a `session/update`: tool calls go through the [`Gate`] and are audited; whether
/// (and as what) to pass it to the editor. What the bridge cannot read unambiguously
/// (duplicate keys, a tool call without an id) does not pass: the editor might read it
/// otherwise.
async fn pass_update(relay: &Relay, raw: &RawValue) -> Passage {
    const METHOD: &str = wire::method_names::SESSION_UPDATE;
    // Derived, so a key given twice is an error rather than one reading among several.
    #[derive(serde::Deserialize)]
    struct Params {
        #[serde(rename = "sessionId")]
        session_id: String,
        update: Box<RawValue>,
    }
    #[derive(serde::Deserialize)]
    struct Kind {
        #[serde(rename = "sessionUpdate")]
        kind: Option<String>,
    }
    let Ok(params) = serde_json::from_str::<Params>(raw.get()) else {
        relay.audit_dropped(METHOD, None, None, "a session/update the bridge cannot read");
        return Passage::Drop;
    };
    let session = params.session_id;
    let is_new = match serde_json::from_str::<Kind>(params.update.get()).map(|k| k.kind) {
        Ok(Some(kind)) if kind == "tool_call" => true,
        Ok(Some(kind)) if kind == "tool_call_update" => false,
        Ok(_) => return Passage::Pass,
        Err(_) => {
            relay.audit_dropped(METHOD, Some(&session), None, "an update the bridge cannot read");
            return Passage::Drop;
        }
    };
    // Only tool calls are gated: every other update passes without a typed parse.
    let update = crate::client::Update::from_raw(&params.update);
    let object = match serde_json::from_str::<Value>(params.update.get()) {
        Ok(Value::Object(object)) => object,
        _ => serde_json::Map::new(),
    };
    let id = object.get("toolCallId").and_then(Value::as_str).map(str::to_string);
    let typed = matches!(
        (&update, is_new),
        (crate::client::Update::ToolCall(_), true) | (crate::client::Update::ToolCallUpdate(_), false)
    );
    let Some(id) = id.filter(|_| typed) else {
        relay.audit_dropped(
            METHOD,
            Some(&session),
            None,
            "a tool call update the bridge cannot read (no toolCallId, a key given twice, a field of the wrong type)",
        );
        return Passage::Drop;
    };
    // What the agent runs is classified by what it reports — every name it gives, its kind
    // only where stricter (showing it approves nothing); its permission requests, below,
    // are decided without its word on the kind.
    let decide = |facts: &ToolFacts| relay.oversight.classify(&session, facts);
    // History replayed by a `session/load` is not live: not audited as tool calls, and gated
    // on governance alone (it reports calls that ran before this connection).
    let replaying = relay
        .to_agent
        .lock()
        .values()
        .any(|f| f.method == wire::method_names::SESSION_LOAD && f.session.as_deref() == Some(session.as_str()));
    if replaying {
        let verdict = lock(&relay.gate).replayed(&session, &id, &object, is_new, decide);
        return match verdict {
            gate::Replayed::Pass => Passage::Pass,
            gate::Replayed::Drop { reason } => {
                relay.audit_dropped(METHOD, Some(&session), Some(&id), &reason);
                Passage::Drop
            }
        };
    }
    let verdict = lock(&relay.gate).live(&session, &id, &object, is_new, decide);
    let (pass, close, frozen) = live_verdict(relay, &session, &id, verdict);
    // What the editor is shown is what is audited.
    let rewritten = frozen.map(|frozen| frozen_update(relay, raw, &session, &id, frozen));
    let update = rewritten.as_ref().map_or(&update, |(_, update)| update);
    if let Err(error) = relay.oversight.observe(&session, update) {
        // Fail closed: what cannot be audited is not shown, and the turn stops.
        tracing::error!(%error, "auditing a tool call failed; cancelling the turn");
        relay
            .to_agent_line(jsonrpc::encode_notification(
                wire::method_names::SESSION_CANCEL,
                &json!({ "sessionId": session }),
            ))
            .await;
        return Passage::Drop;
    }
    if close {
        close_on_editor(relay, &session, &id).await;
    }
    match rewritten {
        Some((line, _)) if pass => Passage::Rewritten(line),
        _ => Passage::from(pass),
    }
}

/// What a live tool call's `verdict` from the gate means for its update: whether it passes,
/// whether the call is closed on the editor, and the call as decided when it was frozen.
/// What governance did (decided again, allowed, hid) is audited here.
fn live_verdict(relay: &Relay, session: &str, id: &str, verdict: gate::Live) -> (bool, bool, Option<gate::Frozen>) {
    const METHOD: &str = wire::method_names::SESSION_UPDATE;
    match verdict {
        gate::Live::Pass {
            facts,
            auto,
            redecided,
            frozen,
        } => {
            if let Some(decision) = redecided {
                let mut extra = serde_json::Map::new();
                extra.insert("toolCallId".into(), json!(id));
                extra.insert("tool".into(), json!(facts.tool));
                extra.insert("redecided".into(), json!(decision));
                if let Err(error) = relay.record_passage(false, METHOD, Some(session), None, extra) {
                    tracing::error!(%error, "auditing a tool call decided again failed");
                }
            }
            if auto {
                relay.oversight.permission_answered(session, &facts, Approval::Auto);
            }
            (true, false, frozen)
        }
        gate::Live::Drop => (false, false, None),
        gate::Live::Hide { facts, reason, close } => {
            tracing::warn!(tool = ?facts.tool, %reason, "governance hid a tool call from the editor");
            relay
                .oversight
                .permission_answered(session, &facts, Approval::Denied { reason });
            (false, close, None)
        }
    }
}

/// The notification `raw` with the tool call update `frozen` left of it ([`gate::Frozen`]),
/// and that update; what the agent tried to change of the decided call `id` is audited
/// (`metadata.aip44.rewritten`).
fn frozen_update(
    relay: &Relay,
    raw: &RawValue,
    session: &str,
    id: &str,
    frozen: gate::Frozen,
) -> (Vec<u8>, crate::client::Update) {
    const METHOD: &str = wire::method_names::SESSION_UPDATE;
    audit_rewritten(relay, METHOD, session, id, frozen.refused.as_deref());
    let update = Value::Object(frozen.update);
    let typed = serde_json::value::to_raw_value(&update).map_or(crate::client::Update::Other(Value::Null), |raw| {
        crate::client::Update::from_raw(&raw)
    });
    let mut params = match serde_json::from_str::<Value>(raw.get()) {
        Ok(Value::Object(params)) => params,
        _ => serde_json::Map::new(),
    };
    params.insert("sessionId".into(), json!(session));
    params.insert("update".into(), update);
    (jsonrpc::encode_notification(METHOD, &params), typed)
}

/// Audits what the agent tried to change of the decided call `id` (`refused`, when anything)
/// in a `method` the bridge passes rewritten ([`gate::Frozen`]): a passage record with
/// `metadata.aip44.rewritten`.
fn audit_rewritten(relay: &Relay, method: &str, session: &str, id: &str, refused: Option<&str>) {
    let Some(refused) = refused else { return };
    tracing::warn!(tool_call = id, %refused, method, "the agent tried to change what a decided tool call is");
    let mut extra = serde_json::Map::new();
    extra.insert("toolCallId".into(), json!(id));
    let reason = format!("policy violation: the agent tried to change what the tool call is ({refused}); not shown");
    extra.insert("rewritten".into(), json!(reason));
    if let Err(error) = relay.record_passage(false, method, Some(session), None, extra) {
        tracing::error!(%error, "auditing a rewritten tool call failed");
    }
}

/// The agent's request `id` (`method`, with params `params`) re-encoded with `tool_call` as
/// its `toolCall` — a permission request as the editor is to see it — as a line without its
/// newline, like the lines read from the agent.
fn with_tool_call(id: &Id, method: &str, params: &str, tool_call: serde_json::Map<String, Value>) -> Vec<u8> {
    let mut params = match serde_json::from_str::<Value>(params) {
        Ok(Value::Object(params)) => params,
        _ => serde_json::Map::new(),
    };
    params.insert("toolCall".into(), Value::Object(tool_call));
    let mut line = jsonrpc::encode_request(id, method, &params);
    line.pop();
    line
}

/// Tells the editor a tool call it was shown, and that governance hid since, failed: nothing
/// else about it (no output, no title).
async fn close_on_editor(relay: &Relay, session: &str, id: &str) {
    let update = json!({
        "sessionId": session,
        "update": {"sessionUpdate": "tool_call_update", "toolCallId": id, "status": "failed"},
    });
    relay
        .to_editor_line(jsonrpc::encode_notification(
            wire::method_names::SESSION_UPDATE,
            &update,
        ))
        .await;
}

/// The agent's `session/request_permission` (params `text`): decided on the call as the editor
/// was shown it. Answered here (`None`) when governance allows or denies it; else the
/// question to pass to the editor (`line`, rewritten to show the call as it was decided).
async fn agent_permission(
    relay: &Arc<Relay>,
    id: &Id,
    method: &str,
    text: &str,
    line: &mut Vec<u8>,
) -> Option<(wire::RequestPermissionRequest, ToolFacts)> {
    let request = match serde_json::from_str::<wire::RequestPermissionRequest>(text) {
        Ok(request) => request,
        Err(error) => {
            let error = RpcError::new(codes::INVALID_PARAMS, format!("invalid params for `{method}`: {error}"));
            relay.to_agent_line(jsonrpc::encode_error(id, &error)).await;
            return None;
        }
    };
    // The `toolCall` as sent (what the editor would read), applied to the call the
    // editor was shown: governance decides on that.
    let tool_call = match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(mut params)) => match params.remove("toolCall") {
            Some(Value::Object(tool_call)) => tool_call,
            _ => serde_json::Map::new(),
        },
        _ => serde_json::Map::new(),
    };
    let session_id = request.session_id.as_str().to_string();
    let call_id = request.tool_call.tool_call_id.as_str().to_string();
    let decide = |facts: &ToolFacts| relay.oversight.decide(&session_id, facts);
    let gate::Permission {
        facts,
        frozen,
        decision,
        close,
        hidden_before,
    } = lock(&relay.gate).permission(&session_id, &call_id, &tool_call, decide);
    // The editor is asked about the call as it was decided, and the attempt to
    // change that is audited (a denied call's denial says enough).
    let mut shown = None;
    if let Some(frozen) = frozen
        && !matches!(decision, Decision::Deny(_))
    {
        audit_rewritten(relay, method, &session_id, &call_id, frozen.refused.as_deref());
        shown = Some(frozen.update);
    }
    match decision {
        Decision::Allow => {
            relay.oversight.permission_answered(&session_id, &facts, Approval::Auto);
            answer_permission(relay, id, &request, &PermissionDecision::Approve).await;
            None
        }
        Decision::Deny(reason) => {
            if !hidden_before {
                relay
                    .oversight
                    .permission_answered(&session_id, &facts, Approval::Denied { reason });
            }
            answer_permission(relay, id, &request, &PermissionDecision::Reject).await;
            if close {
                close_on_editor(relay, &session_id, &call_id).await;
            }
            None
        }
        Decision::Ask => {
            relay.oversight.permission_asked(&session_id, &facts);
            if let Some(tool_call) = shown {
                *line = with_tool_call(id, method, text, tool_call);
            }
            Some((request, facts))
        }
    }
}

async fn agent_request(
    relay: &Arc<Relay>,
    Request {
        id,
        method,
        params,
        mut line,
        ..
    }: Request,
) {
    use wire::method_names as m;
    let session = session_of(params.as_deref());
    // What the bridge decides on must be what the editor reads: a key given twice is read
    // differently by different parsers (a tool's name, a command, a server id).
    if params
        .as_deref()
        .is_some_and(|params| jsonrpc::gives_a_key_twice(params.get()))
    {
        let reason = "a request whose params give a key twice (parsers read it differently)";
        relay.audit_refused(false, &method, session.as_deref(), Some(&id), reason);
        let error = RpcError::new(codes::INVALID_REQUEST, reason);
        relay.to_agent_line(jsonrpc::encode_error(&id, &error)).await;
        return;
    }
    if is_the_bridges(&id) {
        let reason = format!("request ids from {OWN_IDS} up are the bridge's own (its requests to the editor)");
        relay.audit_refused(false, &method, session.as_deref(), Some(&id), &reason);
        let error = RpcError::new(codes::INVALID_REQUEST, reason);
        relay.to_agent_line(jsonrpc::encode_error(&id, &error)).await;
        return;
    }
    // In flight: passed on to the editor, or an MCP call held while the editor is asked.
    if lock(&relay.to_editor).contains_key(&id) || lock(&relay.held_calls).contains_key(&id) {
        relay
            .to_agent_line(jsonrpc::encode_error(&id, &connection::duplicate_id(&id)))
            .await;
        return;
    }
    // Only what the manifest and the editor both offer (else `-32601` from the bridge).
    if let Some(reason) = relay.refusal(Side::Client, &method) {
        relay.audit_refused(false, &method, session.as_deref(), Some(&id), &reason);
        let error = RpcError::new(codes::METHOD_NOT_FOUND, reason);
        relay.to_agent_line(jsonrpc::encode_error(&id, &error)).await;
        return;
    }
    let mut permission = None;
    let mut mcp_waiting = None;
    let mut elicitation = None;
    match method.as_str() {
        m::ELICITATION_CREATE => {
            let text = params.as_deref().map_or("null", RawValue::get);
            match elicit::agent_request(relay, &id, text).await {
                Some(waiting) => elicitation = Some(waiting),
                None => return,
            }
        }
        m::SESSION_REQUEST_PERMISSION => {
            let text = params.as_deref().map_or("null", RawValue::get);
            match agent_permission(relay, &id, &method, text, &mut line).await {
                Some(asked) => permission = Some(asked),
                None => return,
            }
        }
        mcp_over_acp::CONNECT | mcp_over_acp::MESSAGE | mcp_over_acp::DISCONNECT => {
            match mcp::agent_request(relay, &id, &method, params.as_deref(), &line).await {
                mcp::Passage::Forward(waiting) => mcp_waiting = waiting,
                mcp::Passage::Handled => return,
            }
        }
        m::SESSION_UPDATE => {
            // Updates are notifications; one sent as a request would pass the gate unread.
            relay.audit_dropped(&method, session.as_deref(), None, "a notification sent as a request");
            let error = RpcError::new(
                codes::INVALID_REQUEST,
                "`session/update` is a notification; sent as a request it was not passed on",
            );
            relay.to_agent_line(jsonrpc::encode_error(&id, &error)).await;
            return;
        }
        _ => {}
    }
    let forwarded = Forwarded {
        permission,
        mcp: mcp_waiting,
        elicitation,
        ..Forwarded::agent_request(relay, method, session)
    };
    relay.forward_to_editor(id, forwarded, with_newline(line)).await;
}

impl Relay {
    /// Sends the agent's request (`line`, newline included) to the editor, waiting as
    /// `forwarded` says — unless the editor closed its side, or auditing it failed.
    async fn forward_to_editor(&self, id: Id, forwarded: Forwarded, line: Vec<u8>) {
        if self.editor_closed.load(Ordering::SeqCst) {
            self.fail_agent_request(&id, &forwarded, "agentacp", "connection closed")
                .await;
            return;
        }
        if let Err(error) = self.audit_passage(false, &forwarded.method, forwarded.session.as_deref(), Some(&id)) {
            self.to_agent_line(jsonrpc::encode_error(&id, &error)).await;
            return;
        }
        lock(&self.to_editor).insert(id, forwarded);
        self.to_editor_line(line).await;
    }
}

/// Answers the agent's permission request ourselves.
async fn answer_permission(
    relay: &Relay,
    id: &Id,
    request: &wire::RequestPermissionRequest,
    decision: &PermissionDecision,
) {
    let outcome = permission::outcome(request, decision);
    let line = jsonrpc::encode_result(id, &json!({ "outcome": outcome }));
    relay.to_agent_line(line).await;
}

// ---- deadlines ---------------------------------------------------------------------------------

/// Fails what waits past its deadline: the editor's requests with an error (a prompt also
/// gets `session/cancel` downstream); the agent's permission requests with a rejection, its
/// other requests with an error.
async fn sweep(relay: Arc<Relay>) {
    loop {
        tokio::time::sleep(SWEEP_EVERY).await;
        let now = Instant::now();
        let prompt_alive_until = *lock(&relay.last_from_agent) + relay.options.prompt_idle_timeout;
        let expired = |map: &mut HashMap<Id, Forwarded>| -> Vec<(Id, Forwarded)> {
            let ids: Vec<Id> = map
                .iter()
                .filter(|(_, f)| {
                    let deadline = if f.idle {
                        f.deadline.max(prompt_alive_until)
                    } else {
                        f.deadline
                    };
                    deadline <= now
                })
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| map.remove(&id).map(|f| (id, f)))
                .collect()
        };
        let late: Vec<(Id, Forwarded, Answering<'_>)> = {
            let mut waiting = relay.to_agent.lock();
            expired(&mut waiting)
                .into_iter()
                .map(|(id, f)| (id, f, relay.answering()))
                .collect()
        };
        for (id, forwarded, _answering) in late {
            tracing::warn!(%id, method = %forwarded.method, "the agent did not answer in time");
            let prompt = match (forwarded.method.as_str(), &forwarded.session) {
                (wire::method_names::SESSION_PROMPT, Some(session)) => Some(session),
                _ => None,
            };
            if let Some(session) = prompt {
                // Audited before the editor hears of it.
                relay.oversight.turn_ended(session);
                lock(&relay.gate).turn_ended(session);
                let _ = relay.lifecycle(session, Lifecycle::Interrupted, Some(json!({"error": "timeout"})));
            }
            let error = RpcError::new(
                codes::INTERNAL_ERROR,
                format!("the downstream agent did not answer `{}` in time", forwarded.method),
            );
            // A session request answered so leaves no server served for it.
            #[cfg(feature = "mcp")]
            translate::request_failed(&relay, &id);
            relay.to_editor_line(jsonrpc::encode_error(&id, &error)).await;
            if let Some(session) = prompt {
                relay
                    .to_agent_line(jsonrpc::encode_notification(
                        wire::method_names::SESSION_CANCEL,
                        &json!({ "sessionId": session }),
                    ))
                    .await;
            }
        }
        let unanswered = expired(&mut lock(&relay.to_editor));
        for (id, forwarded) in unanswered {
            tracing::warn!(%id, method = %forwarded.method, "the editor did not answer in time");
            relay
                .fail_agent_request(&id, &forwarded, &relay.editor(), "timeout")
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_fit_the_audit_pattern() {
        assert_eq!(action_of("session/prompt"), "acp.session.prompt");
        assert_eq!(action_of("$/cancel_request"), "acp.cancel_request");
        assert_eq!(action_of("_zed/Weird Thing!"), "acp.zed.weird-thing");
        assert_eq!(action_of("///"), "acp.unknown");
    }
}
