//! The per-turn handle operator code gets in `prompt`: stream messages, thoughts and other
//! updates, and — from tier governance-aware — make governed, audited tool calls.
//!
//! `Turn<'_, T>` is typed by the manifest's tier `T`; [`Turn::tool_call`] needs
//! `T: Governed`, so a tool call in a basic-tier operator is a compile error, and
//! [`Turn::set_mode`] needs `T: SessionModes`, which a manifest that lists protocol version 2
//! does not give (its tier is [`V2<T>`](crate::tier::V2)).

use std::fmt::Display;
use std::future::Future;
use std::marker::PhantomData;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::audit::{Approval, AuditEvent, Lifecycle, ToolCallMirror, ToolOutcomeRecord};
use crate::error::{Error, Result};
use crate::future::BoxFuture;
use crate::governance::{Decision, ToolKind, ToolRequest};
use crate::jsonrpc::pending::RequestFailure;
use crate::oversight::decide::{KindFrom, decide};
use crate::oversight::question::{self, Answer};
use crate::surface::{CommandInput, ConfigValue};
use crate::tier::{Governed, SandboxedTier, SessionModes, Tier};
use crate::wire::support::OperatorUpdate;

use super::connection::Connection;
use super::session::{Remembered, SessionContext};

/// What a turn runs with; owned by the runtime, borrowed by [`Turn`].
pub(crate) struct TurnScope {
    pub(crate) connection: Arc<Connection>,
    pub(crate) session: Arc<SessionContext>,
    pub(crate) cancel: watch::Receiver<bool>,
    pub(crate) announced: AtomicBool,
    /// The record of the tool call that is waiting for the user's answer or running, as it
    /// must be audited if the turn is cancelled meanwhile (the turn's future is gone by then):
    /// rejected (`cancelled`) while asking, failed (`cancelled while running`) after.
    pub(crate) unfinished_call: std::sync::Mutex<Option<ToolCallMirror>>,
    /// The declared slash command the prompt starts with, if any.
    pub(crate) command: Option<CommandInput>,
}

impl TurnScope {
    pub(crate) fn new(
        connection: Arc<Connection>,
        session: Arc<SessionContext>,
        cancel: watch::Receiver<bool>,
    ) -> Self {
        TurnScope {
            connection,
            session,
            cancel,
            announced: AtomicBool::new(false),
            unfinished_call: std::sync::Mutex::new(None),
            command: None,
        }
    }

    /// Appends `event`, naming the session's identity (which the connection may no longer
    /// have: a turn cancelled by a `logout` or a revoked token still ends in the log).
    pub(crate) fn audit(&self, event: AuditEvent) -> Result<()> {
        self.connection.audit_as(self.session.identity(), event)
    }

    /// After a cancel: audits the tool call the turn left unfinished, if any.
    pub(crate) fn audit_unfinished_call(&self) -> Result<()> {
        match self.set_unfinished_call(None) {
            Some(mirror) => self.audit(AuditEvent::tool_call(mirror)),
            None => Ok(()),
        }
    }

    /// Sets (or clears) the record of the unfinished tool call; returns the previous one.
    fn set_unfinished_call(&self, mirror: Option<ToolCallMirror>) -> Option<ToolCallMirror> {
        std::mem::replace(
            &mut *self.unfinished_call.lock().unwrap_or_else(|e| e.into_inner()),
            mirror,
        )
    }

    /// What governance is asked about a call of `tool` in this turn's session (with the
    /// identity the client authenticated as, on remote connections).
    pub(crate) fn tool_request<'a>(
        &'a self,
        tool: &'a str,
        kind: Option<ToolKind>,
        arguments: &'a Value,
    ) -> ToolRequest<'a> {
        ToolRequest {
            operator: &self.connection.operator_id,
            session: self.session.id(),
            tool,
            kind,
            arguments,
            principal: self.session.identity().map(crate::auth::Identity::as_str),
        }
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        *self.cancel.borrow()
    }

    pub(crate) async fn cancelled(&self) {
        let mut cancel = self.cancel.clone();
        // An error means the runtime dropped the sender: the turn is over either way.
        let _ = cancel.wait_for(|cancelled| *cancelled).await;
    }

    /// Sends one `session/update` of this turn (recorded for `session/load` first, and the
    /// `running` transition audited before the first one).
    async fn send(&self, update: String) -> Result<()> {
        if self.is_cancelled() {
            return Err(Error::Cancelled);
        }
        self.announce_running()?;
        self.connection.send_update(&self.session, update).await
    }

    /// Audits the turn's `running` transition, once, before anything else of the turn.
    pub(super) fn announce_running(&self) -> Result<()> {
        if !self.announced.swap(true, Ordering::Relaxed) {
            self.audit(AuditEvent::lifecycle(
                &self.connection.operator_id,
                self.session.id(),
                Lifecycle::Running,
                None,
            ))?;
        }
        Ok(())
    }
}

/// The handle of one prompt turn, typed by the manifest's tier.
pub struct Turn<'t, T: Tier> {
    pub(super) scope: &'t TurnScope,
    _tier: PhantomData<fn() -> T>,
}

impl<T: Tier> std::fmt::Debug for Turn<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turn")
            .field("session", &self.scope.session.id())
            .field("tier", &T::NAME)
            .finish()
    }
}

#[derive(Serialize)]
struct TextChunk<'a> {
    #[serde(rename = "sessionUpdate")]
    kind: &'static str,
    content: TextContent<'a>,
}

#[derive(Serialize)]
struct TextContent<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

fn text_chunk(kind: &'static str, text: &str) -> String {
    let chunk = TextChunk {
        kind,
        content: TextContent { kind: "text", text },
    };
    serde_json::to_string(&chunk).unwrap_or_default()
}

impl<'t, T: Tier> Turn<'t, T> {
    pub(crate) fn new(scope: &'t TurnScope) -> Self {
        Turn {
            scope,
            _tier: PhantomData,
        }
    }

    /// What the turn runs with (for the editor calls of [`super::editor`]).
    pub(super) fn scope(&self) -> &'t TurnScope {
        self.scope
    }

    /// The session this turn runs in.
    pub fn session(&self) -> &SessionContext {
        &self.scope.session
    }

    /// The session id.
    pub fn session_id(&self) -> &str {
        self.scope.session.id()
    }

    /// The session's working directory.
    pub fn cwd(&self) -> &Path {
        self.scope.session.cwd()
    }

    /// Whether the client cancelled this turn. Sending fails with [`Error::Cancelled`] from
    /// then on; return it with `?`.
    pub fn is_cancelled(&self) -> bool {
        self.scope.is_cancelled()
    }

    /// Resolves when the client cancels this turn (for `tokio::select!` in long work).
    pub async fn cancelled(&self) {
        self.scope.cancelled().await
    }

    /// Streams text to the user (`agent_message_chunk`).
    pub async fn message(&mut self, text: impl AsRef<str>) -> Result<()> {
        self.scope.send(text_chunk("agent_message_chunk", text.as_ref())).await
    }

    /// Streams the agent's reasoning (`agent_thought_chunk`).
    pub async fn thought(&mut self, text: impl AsRef<str>) -> Result<()> {
        self.scope.send(text_chunk("agent_thought_chunk", text.as_ref())).await
    }

    /// Sends a `session/update` of the pinned revision, e.g.
    /// `wire::OperatorUpdate::Plan(..)`.
    ///
    /// `wire::OperatorUpdate` is the revision's `SessionUpdate` without `tool_call` and
    /// `tool_call_update`: those would bypass governance and audit, so they exist only through
    /// [`Turn::tool_call`] (tier governance-aware and up), and naming one here does not compile.
    pub async fn update(&mut self, update: &impl OperatorUpdate) -> Result<()> {
        self.update_json(serde_json::to_value(update)?).await
    }

    /// Sends a `session/update` given as JSON: the escape hatch for an update kind the pinned
    /// revision's types do not have (an extension, a newer field).
    ///
    /// Tool calls stay governed here too: a `tool_call` or `tool_call_update` is refused at
    /// every tier — logged, never sent, and an error for the operator.
    pub async fn update_json(&mut self, update: Value) -> Result<()> {
        // One look at the kind: the settings kinds go through their checks, tool calls are
        // refused, the rest is sent as it is.
        match update.get("sessionUpdate").and_then(Value::as_str) {
            Some("current_mode_update") => {
                let mode = update.get("currentModeId").and_then(Value::as_str).unwrap_or_default();
                self.switch_mode(mode).await
            }
            Some("config_option_update") => self.config_update_from(&update).await,
            Some("available_commands_update") => {
                let names: Vec<&str> = update
                    .get("availableCommands")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|command| command.get("name").and_then(Value::as_str).unwrap_or_default())
                    .collect();
                self.set_commands(&names).await
            }
            Some(kind @ ("tool_call" | "tool_call_update")) => {
                tracing::error!(
                    session = self.scope.session.id(),
                    kind,
                    "refused an ungoverned `{kind}` update from operator code; use turn.tool_call"
                );
                Err(Error::msg(format!(
                    "a `{kind}` update cannot be sent by operator code: tool calls are governed and audited, use `turn.tool_call` (tier governance-aware and up)"
                )))
            }
            _ => self.scope.send(update.to_string()).await,
        }
    }

    /// The declared slash command (`metadata.agentacp.commands`) this turn's prompt starts
    /// with: `/review the parser` gives the command `review` and the input `the parser`.
    pub fn command(&self) -> Option<CommandInput> {
        self.scope.command.clone()
    }

    /// The session's current mode (`metadata.agentacp.modes`).
    pub fn mode(&self) -> Option<String> {
        self.scope.session.mode()
    }

    /// The current value of config option `id` (`metadata.agentacp.configOptions`).
    pub fn config_value(&self, id: &str) -> Option<ConfigValue> {
        self.scope.session.config_value(id)
    }

    /// Switches the session to `mode`, one the manifest declares: audited (`session.mode`),
    /// set, and sent to the client as a `current_mode_update`. An undeclared mode is an error
    /// and nothing is sent.
    ///
    /// Not on a manifest that lists protocol version 2, which has no session modes (tier
    /// [`V2`](crate::tier::V2)): calling it there does not compile.
    // A named future, not `async fn`: a bound on an opaque future is reported three times
    // (the call, its future, its `.await`).
    pub fn set_mode<'a>(&'a mut self, mode: &'a str) -> BoxFuture<'a, Result<()>>
    where
        T: SessionModes,
    {
        Box::pin(self.switch_mode(mode))
    }

    /// [`Turn::set_mode`], and a `current_mode_update` given to [`Turn::update_json`] (which
    /// a manifest without modes refuses at run time).
    async fn switch_mode(&mut self, mode: &str) -> Result<()> {
        self.scope.announce_running()?;
        self.scope
            .connection
            .change_mode(&self.scope.session, mode, "operator")?;
        let update = json!({"sessionUpdate": "current_mode_update", "currentModeId": mode});
        self.scope.send(update.to_string()).await
    }

    /// Sets config option `id` to `value`, one the manifest allows: audited
    /// (`session.config`), set, and sent to the client as a `config_option_update` with every
    /// option's current value. An undeclared option or value is an error and nothing is sent.
    pub async fn set_config_value(&mut self, id: &str, value: ConfigValue) -> Result<()> {
        self.scope.announce_running()?;
        self.scope
            .connection
            .change_config(&self.scope.session, id, value, "operator")?;
        match self.scope.connection.config_update(&self.scope.session) {
            Some(update) => self.scope.send(update).await,
            None => Ok(()),
        }
    }

    /// Tells the client which slash commands are available now (`available_commands_update`):
    /// `names` must be commands the manifest declares (an empty list hides them all).
    pub async fn set_commands(&mut self, names: &[&str]) -> Result<()> {
        let surface = self.scope.session.surface();
        if let Some(unknown) = names.iter().find(|name| surface.command(name).is_none()) {
            return Err(Error::InvalidParams(format!(
                "no command `{unknown}`; the manifest declares `{}`",
                surface.command_names().join("`, `")
            )));
        }
        let update = surface
            .commands_update(names)
            .ok_or_else(|| Error::InvalidParams("the manifest declares no commands".into()))?;
        self.scope.send(update.to_string()).await
    }

    /// A `config_option_update` from operator code: each option it names is set as
    /// [`Turn::set_config_value`] would (all checked first, so a bad one changes nothing), then
    /// one update with every option's current value is sent.
    async fn config_update_from(&mut self, update: &Value) -> Result<()> {
        let surface = self.scope.session.surface();
        let mut changes = Vec::new();
        for option in update
            .get("configOptions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let id = option.get("id").and_then(Value::as_str).unwrap_or_default();
            let value = match option.get("currentValue").and_then(ConfigValue::from_json) {
                Some(value) => value,
                None => {
                    return Err(Error::InvalidParams(format!(
                        "config option `{id}` has no `currentValue`"
                    )));
                }
            };
            surface.check_config_value(id, &value).map_err(Error::InvalidParams)?;
            changes.push((id.to_string(), value));
        }
        self.scope.announce_running()?;
        for (id, value) in changes {
            if self.scope.session.config_value(&id).as_ref() != Some(&value) {
                self.scope
                    .connection
                    .change_config(&self.scope.session, &id, value, "operator")?;
            }
        }
        match self.scope.connection.config_update(&self.scope.session) {
            Some(update) => self.scope.send(update).await,
            None => Ok(()),
        }
    }

    /// Starts a governed tool call (tier governance-aware and up). Nothing happens until
    /// [`ToolCall::run`]: governance decides first, the user may be asked, and every step is
    /// audited before it reaches the wire.
    pub fn tool_call(&mut self, tool: impl Into<String>, arguments: Value) -> ToolCall<'_, 't, T>
    where
        T: Governed,
    {
        let tool = tool.into();
        ToolCall {
            turn: self,
            title: None,
            kind: None,
            tool,
            arguments,
            announced_once_started: false,
        }
    }

    /// The MCP servers the client passed for this session (tier sandboxed).
    pub fn mcp_servers(&self) -> &Value
    where
        T: SandboxedTier,
    {
        self.scope.session.mcp_servers()
    }
}

/// How a tool call ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    /// It ran and returned this.
    Completed(Value),
    /// It ran and failed.
    Failed(String),
    /// The user (or a timeout) said no; it did not run.
    Rejected(String),
    /// Governance denied it; it did not run and was never shown to the client.
    Denied(String),
}

/// A tool call being prepared: set a title and a kind, then [`run`](ToolCall::run) it.
#[derive(Debug)]
pub struct ToolCall<'a, 't, T: Tier> {
    turn: &'a mut Turn<'t, T>,
    tool: String,
    arguments: Value,
    title: Option<String>,
    kind: Option<ToolKind>,
    /// Whether a call run without asking is announced (`in_progress`) once it has started,
    /// rather than before: its start and the client's reading of the update overlap.
    announced_once_started: bool,
}

enum Permission {
    Approved(String),
    Rejected { who: String, reason: String },
}

/// What a tool call does next: governance's decision, with an earlier `allow_always` /
/// `reject_always` answering what it would ask.
enum Step {
    /// Run it without asking, recorded with this approval.
    Run(Approval),
    /// Ask the user.
    Ask,
    /// Refuse it without asking: the user said `reject_always` (this approver).
    RejectedForTheSession(String),
    /// Governance denies it.
    Deny(String),
}

impl Step {
    fn of(decision: Decision, remembered: impl FnOnce() -> Option<Remembered>) -> Step {
        match decision {
            Decision::Allow => Step::Run(Approval::Auto),
            Decision::Deny(reason) => Step::Deny(reason),
            Decision::Ask => match remembered() {
                Some(Remembered::Allowed(who)) => Step::Run(Approval::ApprovedBy(format!("{who} (allow_always)"))),
                Some(Remembered::Rejected(who)) => Step::RejectedForTheSession(who),
                None => Step::Ask,
            },
        }
    }
}

/// The reason recorded for a call refused by an earlier `reject_always`.
const REJECTED_ALWAYS: &str = "rejected for the rest of the session (reject_always)";

impl<T: Governed> ToolCall<'_, '_, T> {
    /// The title the client shows (default: the tool's name).
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// What the tool does; governance may treat reading and changing differently. Without
    /// a kind the call counts as changing something.
    pub fn kind(mut self, kind: ToolKind) -> Self {
        self.kind = Some(kind);
        self
    }

    /// Announces a call run without asking once it has started (its future polled once),
    /// rather than before; for a call whose start the client does not see (an MCP request
    /// to a server of the runtime's). Its `running` record is still written before it starts.
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    pub(crate) fn announced_once_started(mut self, yes: bool) -> Self {
        self.announced_once_started = yes;
        self
    }

    /// Decides, asks if needed, runs `execute` with the arguments if allowed, and reports
    /// each step to the client (`tool_call`, `tool_call_update`) after auditing it.
    pub async fn run<F, Fut, E>(self, execute: F) -> Result<ToolOutcome>
    where
        F: FnOnce(Value) -> Fut,
        Fut: Future<Output = std::result::Result<Value, E>>,
        E: Display,
    {
        let scope = self.turn.scope;
        if scope.is_cancelled() {
            return Err(Error::Cancelled);
        }
        let request = scope.tool_request(&self.tool, self.kind, &self.arguments);
        let decision = decide(
            scope.connection.governance.as_ref(),
            &request,
            [self.tool.as_str()],
            KindFrom::Operator,
        );
        let call = Call {
            scope,
            id: scope.connection.next_tool_call_id(),
            title: self.title.clone().unwrap_or_else(|| self.tool.clone()),
            tool: self.tool,
            arguments: self.arguments,
            kind: self.kind,
        };
        // The `in_progress` announcement of a call run without asking, when it waits for the
        // call's start.
        let mut deferred = None;
        let approval = match Step::of(decision, || scope.session.remembered(&call.tool)) {
            Step::RejectedForTheSession(who) => return call.rejected_for_the_session(who),
            Step::Deny(reason) => return call.denied(reason),
            Step::Run(approval) => {
                deferred = call.start_unasked(self.announced_once_started).await?;
                approval
            }
            Step::Ask => match call.ask_first().await? {
                Ok(approval) => approval,
                Err(rejected) => return Ok(rejected),
            },
        };
        call.execute(execute, approval, deferred).await
    }
}

/// A tool call with its id, from its decision to its end: what its records and the client's
/// updates say of it.
struct Call<'s> {
    scope: &'s TurnScope,
    id: String,
    tool: String,
    arguments: Value,
    title: String,
    kind: Option<ToolKind>,
}

impl Call<'_> {
    /// Its tool-call record, ending with `outcome`, approved as `approval`.
    fn record(&self, outcome: ToolOutcomeRecord, approval: Approval) -> ToolCallMirror {
        ToolCallMirror {
            operator: self.scope.connection.operator_id.clone(),
            session: self.scope.session.id().to_string(),
            tool_call_id: self.id.clone(),
            tool: self.tool.clone(),
            arguments: self.arguments.clone(),
            outcome,
            approval,
        }
    }

    /// Writes its tool-call record (write-ahead: before the client hears of the end).
    fn audit(&self, outcome: ToolOutcomeRecord, approval: Approval) -> Result<()> {
        self.scope.audit(AuditEvent::tool_call(self.record(outcome, approval)))
    }

    /// Writes the turn's lifecycle step `state` about this call (`detail` beside its id).
    fn audit_lifecycle(&self, state: Lifecycle, approved_by: Option<&str>) -> Result<()> {
        let mut detail = json!({"toolCallId": self.id, "tool": self.tool});
        if let Some(who) = approved_by {
            detail["approvedBy"] = json!(who);
        }
        let connection = &self.scope.connection;
        (self.scope).audit(AuditEvent::lifecycle(
            &connection.operator_id,
            self.scope.session.id(),
            state,
            Some(detail),
        ))
    }

    /// The `tool_call` update announcing it with `status`.
    fn announcement(&self, status: &str) -> String {
        let mut update = json!({
            "sessionUpdate": "tool_call",
            "toolCallId": self.id,
            "title": self.title,
            "name": self.tool,
            "status": status,
            "rawInput": on_the_wire(&self.arguments),
        });
        if let Some(kind) = self.kind {
            update["kind"] = json!(kind);
        }
        update.to_string()
    }

    /// Refused without asking: the user rejected the tool for the session before.
    fn rejected_for_the_session(&self, who: String) -> Result<ToolOutcome> {
        let approval = Approval::RejectedBy {
            who,
            reason: REJECTED_ALWAYS.into(),
        };
        self.audit(
            ToolOutcomeRecord::Error(format!("rejected: {REJECTED_ALWAYS}")),
            approval,
        )?;
        Ok(ToolOutcome::Rejected(REJECTED_ALWAYS.into()))
    }

    /// Denied by governance: recorded, never shown to the client.
    fn denied(&self, reason: String) -> Result<ToolOutcome> {
        let approval = Approval::Denied { reason: reason.clone() };
        self.audit(ToolOutcomeRecord::Error(format!("denied: {reason}")), approval)?;
        Ok(ToolOutcome::Denied(reason))
    }

    /// A call run without asking: `running` recorded, then announced `in_progress` — or,
    /// `once_started`, the announcement returned, to be sent once the call has started.
    async fn start_unasked(&self, once_started: bool) -> Result<Option<String>> {
        self.scope.announced.store(true, Ordering::Relaxed);
        self.audit_lifecycle(Lifecycle::Running, None)?;
        if once_started {
            return Ok(Some(self.announcement("in_progress")));
        }
        self.scope.send(self.announcement("in_progress")).await?;
        Ok(None)
    }

    /// Asks the user, each step recorded first: `suspended`, the `pending` announcement,
    /// the question; then `resumed` and `in_progress` (the approval), or the rejection's
    /// record and `failed` (the outcome to return).
    async fn ask_first(&self) -> Result<std::result::Result<Approval, ToolOutcome>> {
        // A turn suspends only once it runs: `running` comes first even when asking is the
        // turn's first step.
        self.scope.announce_running()?;
        self.audit_lifecycle(Lifecycle::Suspended, None)?;
        self.scope.send(self.announcement("pending")).await?;
        self.scope.set_unfinished_call(Some(self.record(
            ToolOutcomeRecord::Error("rejected: cancelled".into()),
            Approval::RejectedBy {
                who: self.scope.connection.client_name(),
                reason: "cancelled".into(),
            },
        )));
        let permission = self.ask().await?;
        self.scope.set_unfinished_call(None);
        match permission {
            Permission::Approved(who) => {
                self.audit_lifecycle(Lifecycle::Resumed, Some(&who))?;
                (self.scope).send(status_update(&self.id, "in_progress", None)).await?;
                Ok(Ok(Approval::ApprovedBy(who)))
            }
            Permission::Rejected { who, reason } => {
                let approval = Approval::RejectedBy {
                    who,
                    reason: reason.clone(),
                };
                self.audit(ToolOutcomeRecord::Error(format!("rejected: {reason}")), approval)?;
                let output = json!({"error": format!("rejected: {reason}")});
                (self.scope)
                    .send(status_update(&self.id, "failed", Some(output)))
                    .await?;
                Ok(Err(ToolOutcome::Rejected(reason)))
            }
        }
    }

    /// Runs the approved call; its end recorded, then reported. Cancelled while it runs, it
    /// is still recorded (`audit_unfinished_call`): it may have done something.
    async fn execute<F, Fut, E>(self, execute: F, approval: Approval, deferred: Option<String>) -> Result<ToolOutcome>
    where
        F: FnOnce(Value) -> Fut,
        Fut: Future<Output = std::result::Result<Value, E>>,
        E: Display,
    {
        let scope = self.scope;
        let running = self.record(
            ToolOutcomeRecord::Error("cancelled while running".into()),
            approval.clone(),
        );
        scope.set_unfinished_call(Some(running));
        let arguments = self.arguments.clone();
        let executed = match deferred {
            None => execute(arguments).await,
            Some(announcement) => {
                let mut executing = std::pin::pin!(execute(arguments));
                let started = std::future::poll_fn(|cx| Poll::Ready(executing.as_mut().poll(cx))).await;
                scope.send(announcement).await?;
                match started {
                    Poll::Ready(executed) => executed,
                    Poll::Pending => executing.await,
                }
            }
        };
        scope.set_unfinished_call(None);
        match executed {
            Ok(result) => {
                self.audit(ToolOutcomeRecord::Result(result.clone()), approval)?;
                let update = status_update(&self.id, "completed", Some(result.clone()));
                scope.send(update).await?;
                Ok(ToolOutcome::Completed(result))
            }
            Err(error) => {
                let message = error.to_string();
                self.audit(ToolOutcomeRecord::Error(message.clone()), approval)?;
                let output = json!({"error": message});
                scope.send(status_update(&self.id, "failed", Some(output))).await?;
                Ok(ToolOutcome::Failed(message))
            }
        }
    }

    /// `session/request_permission`; fails closed: a timeout, a closed connection, an error
    /// answer or anything unreadable is a rejection. A cancelled turn is [`Error::Cancelled`].
    async fn ask(&self) -> Result<Permission> {
        let scope = self.scope;
        let connection = &scope.connection;
        let mut tool_call = json!({
            "toolCallId": self.id,
            "title": self.title,
            "name": self.tool,
            "status": "pending",
            "rawInput": on_the_wire(&self.arguments),
        });
        if let Some(kind) = self.kind {
            tool_call["kind"] = json!(kind);
        }
        let request = scope.tool_request(&self.tool, self.kind, &self.arguments);
        let may_remember = connection.governance.may_remember(&request);
        let params = json!({
            "sessionId": scope.session.id(),
            "toolCall": tool_call,
            "options": question::options(may_remember),
        });
        let client = connection.client_name();
        let answer = tokio::select! {
            biased;
            _ = scope.cancelled() => return Err(Error::Cancelled),
            answer = connection.request("session/request_permission", &params, connection.permission_timeout) => answer,
        };
        let runtime = |reason: &str| Permission::Rejected {
            who: "agentacp".to_string(),
            reason: reason.to_string(),
        };
        let rejected_by_client = |reason: String| Permission::Rejected {
            who: client.clone(),
            reason,
        };
        let raw = match answer {
            Err(RequestFailure::TimedOut) => return Ok(runtime("timeout")),
            Err(RequestFailure::Closed) => return Ok(runtime("connection closed")),
            Err(RequestFailure::Rpc(error)) => return Ok(rejected_by_client(format!("error answer: {error}"))),
            Ok(raw) => raw,
        };
        Ok(match question::read_answer(raw.get(), may_remember) {
            Answer::AllowOnce => Permission::Approved(client),
            Answer::RejectOnce => rejected_by_client("declined".into()),
            Answer::AllowAlways => {
                scope.session.remember(&self.tool, Remembered::Allowed(client.clone()));
                Permission::Approved(format!("{client} (allow_always)"))
            }
            Answer::RejectAlways => {
                scope.session.remember(&self.tool, Remembered::Rejected(client.clone()));
                rejected_by_client("declined for the rest of the session (reject_always)".into())
            }
            Answer::Cancelled => rejected_by_client("cancelled".into()),
            Answer::Unreadable(value) => rejected_by_client(format!("unreadable answer: {value}")),
        })
    }
}

fn status_update(tool_call_id: &str, status: &str, raw_output: Option<Value>) -> String {
    let mut update = json!({
        "sessionUpdate": "tool_call_update",
        "toolCallId": tool_call_id,
        "status": status,
    });
    if let Some(output) = raw_output {
        update["rawOutput"] = on_the_wire(&output);
    }
    update.to_string()
}

/// Where `rawInput` and `rawOutput` sit in the messages that carry them: the message, its
/// `params`, the update (or `toolCall`), then the value.
const RAW_LEVEL: usize = 4;

/// A value from a peer (a call's arguments, a tool's result) as it is put in a message to the
/// client: within the depth every peer reads, by the audit log's rule (`acp_audit::bound`:
/// what nests deeper is kept as its JSON text, `{"$deepJson": "…"}`).
fn on_the_wire(value: &Value) -> Value {
    let mut value = value.clone();
    crate::audit::bound(&mut value, RAW_LEVEL);
    value
}
