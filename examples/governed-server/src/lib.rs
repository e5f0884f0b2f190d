//! The governed example's operator, a governance-aware AIP-44 server: tool calls decided by
//! the governance binding built from `OPERATOR.md` and `GOVERNANCE.md` (reading runs, writing
//! and running tests ask the user, anything else is denied), every step in a hash-chained
//! audit log, and `session/load`. `src/main.rs` serves it over stdio; the tour
//! (`examples/tour`) runs it too.
//!
//! The prompt commands of the echo example work here too; `/tool NAME ARGS-JSON` makes a
//! tool call (see `docs/design/runtime.md`).
//!
//! The manifest's `metadata.agentacp` adds the session surface, kept by the runtime: the
//! modes `ask` and `code`, the `model` option (`fast` or `deep`), the slash command
//! `/summary`, the extension request `_governed/status`, and `session/list`, `resume` and
//! `close`. An echoed prompt starts with the settings when they are not the defaults
//! (`[code, deep] hello`); `/summary` and `_governed/status` report them; `/mode ID` has the
//! operator switch the mode itself (a `current_mode_update`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agentacp::prelude::*;

#[path = "../../echo-server/src/commands.rs"]
mod commands;

use commands::{Command, first_text};

/// The operator. A real reviewer would keep its model client and memory here; this one keeps
/// the sessions it has seen, for `/summary` and `_governed/status`.
#[acp_operator(manifest = "ACP.md")]
#[derive(Clone, Default)]
pub struct Reviewer {
    /// Each session the operator has seen (a prompt, `set_mode`, `set_config_option` or
    /// `load_session`), by id.
    sessions: Arc<Mutex<HashMap<String, Seen>>>,
}

/// A session the operator has seen.
#[derive(Clone)]
struct Seen {
    /// Its context; its mode and config values are the runtime's, always current.
    session: SessionContext,
    /// The prompts it answered in this process, `/summary` included.
    prompts: u64,
}

impl Reviewer {
    /// Notes `session` (the newest context of its id wins); returns its prompt count, plus
    /// one when `prompt`.
    fn see(&self, session: &SessionContext, prompt: bool) -> u64 {
        let mut sessions = self.sessions.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let seen = sessions.entry(session.id().to_string()).or_insert_with(|| Seen {
            session: session.clone(),
            prompts: 0,
        });
        seen.session = session.clone();
        seen.prompts += u64::from(prompt);
        seen.prompts
    }

    /// `_governed/status` of session `id`: its mode, model and prompt count.
    fn status(&self, id: &str) -> Option<Value> {
        let sessions = self.sessions.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let seen = sessions.get(id)?;
        let (mode, model) = settings(&seen.session);
        Some(json!({"sessionId": id, "mode": mode, "model": model, "prompts": seen.prompts}))
    }
}

/// The session's mode and `model` value.
fn settings(session: &SessionContext) -> (String, String) {
    let mode = session.mode().unwrap_or_default();
    let model = session
        .config_value("model")
        .and_then(|value| value.as_str().map(str::to_string))
        .unwrap_or_default();
    (mode, model)
}

impl ReviewerServer for Reviewer {
    async fn prompt(
        &self,
        turn: &mut Turn<'_, GovernanceAware>,
        request: wire::PromptRequest,
    ) -> Result<wire::StopReason> {
        let prompts = self.see(turn.session(), true);
        let (mode, model) = settings(turn.session());
        if let Some(command) = turn.command() {
            // `/summary` is the only declared command.
            let mut summary = format!(
                "summary: {} earlier prompt{} in this session; mode {mode}, model {model}",
                prompts - 1,
                if prompts == 2 { "" } else { "s" },
            );
            if !command.input.is_empty() {
                summary.push_str(&format!("; focus: {}", command.input));
            }
            turn.message(summary).await?;
            return Ok(wire::StopReason::EndTurn);
        }
        let text = first_text(&request);
        if let Some(mode) = text.strip_prefix("/mode ") {
            // The operator switches the mode itself: checked against the manifest, audited,
            // and sent to the client as a `current_mode_update`.
            let report = match turn.set_mode(mode.trim()).await {
                Ok(()) => format!("mode {}", mode.trim()),
                Err(Error::Cancelled) => return Err(Error::Cancelled),
                Err(error) => format!("mode: {error}"),
            };
            turn.message(report).await?;
            return Ok(wire::StopReason::EndTurn);
        }
        if let Some(report) = editor_command(turn, &text).await? {
            turn.message(report).await?;
            return Ok(wire::StopReason::EndTurn);
        }
        match Command::parse(&text) {
            Command::Stream { count, size } => commands::stream(turn, count, size).await?,
            Command::Forever => commands::forever(turn).await?,
            Command::Tool { name, arguments } => {
                let report = call_tool(turn, &name, arguments).await?;
                turn.message(report).await?;
            }
            // The defaults say nothing; other settings show, so a switch is visible.
            Command::Echo if mode == DEFAULT_MODE && model == DEFAULT_MODEL => turn.message(text).await?,
            Command::Echo => turn.message(format!("[{mode}, {model}] {text}")).await?,
        }
        Ok(wire::StopReason::EndTurn)
    }

    async fn load_session(
        &self,
        session: &SessionContext,
        _request: wire::LoadSessionRequest,
    ) -> Result<wire::LoadSessionResponse> {
        // The runtime replayed the conversation (and the settings) already.
        self.see(session, false);
        Ok(wire::LoadSessionResponse::default())
    }

    async fn set_mode(
        &self,
        session: &SessionContext,
        _request: wire::SetSessionModeRequest,
    ) -> Result<wire::SetSessionModeResponse> {
        // The runtime checked, audited and set the mode; the next echo shows it.
        self.see(session, false);
        Ok(wire::SetSessionModeResponse::default())
    }

    async fn set_config_option(
        &self,
        session: &SessionContext,
        _request: wire::SetSessionConfigOptionRequest,
    ) -> Result<wire::SetSessionConfigOptionResponse> {
        // The runtime checked, audited and set the value, and fills in every option's value.
        self.see(session, false);
        Ok(wire::SetSessionConfigOptionResponse::new(Vec::new()))
    }

    async fn authenticate(&self, _request: wire::AuthenticateRequest) -> Result<wire::AuthenticateResponse> {
        // Over WebSocket the runtime checked the bearer token before this runs (and writes the
        // identity into every audit record); nothing to add.
        Ok(wire::AuthenticateResponse::default())
    }

    async fn extension(&self, method: &str, params: Value) -> Result<Value> {
        // `_governed/status` is the only declared request; the runtime answers others -32601.
        let id = params["sessionId"]
            .as_str()
            .ok_or_else(|| Error::InvalidParams(format!("{method} takes `sessionId`")))?;
        self.status(id).ok_or_else(|| {
            Error::InvalidParams(format!(
                "no session `{id}` seen yet: the operator learns of a session at its first prompt, \
                 set_mode, set_config_option or load"
            ))
        })
    }
}

/// The mode a session starts in (`metadata.agentacp.modes.default`).
const DEFAULT_MODE: &str = "ask";
/// The `model` a session starts with.
const DEFAULT_MODEL: &str = "fast";

/// `/editor-read PATH`, `/editor-write PATH TEXT` and `/editor-run COMMAND ARGS…`: the
/// editor's files and terminal, through governance; `None` for any other prompt.
async fn editor_command(turn: &mut Turn<'_, GovernanceAware>, text: &str) -> Result<Option<String>> {
    let mut words = text.split_whitespace();
    let outcome = match words.next() {
        Some("/editor-read") => turn.editor().read_text_file(words.next().unwrap_or_default()).await,
        Some("/editor-write") => {
            let path = words.next().unwrap_or_default();
            let content = words.collect::<Vec<_>>().join(" ");
            turn.editor()
                .write_text_file(path, &content)
                .await
                .map(|()| format!("wrote {} bytes", content.len()))
        }
        Some("/editor-run") => {
            let mut command = TerminalCommand::new(words.next().unwrap_or_default());
            command.args = words.map(str::to_string).collect();
            turn.editor().run_command(&command).await.map(|run| {
                format!(
                    "exit {}: {}",
                    run.exit_code
                        .map_or_else(|| run.signal.unwrap_or_default(), |code| code.to_string()),
                    run.output
                )
            })
        }
        _ => return Ok(None),
    };
    match outcome {
        Ok(report) => Ok(Some(report)),
        Err(Error::Cancelled) => Err(Error::Cancelled),
        Err(error) => Ok(Some(format!("editor: {error}"))),
    }
}

/// Runs one tool through governance and says how it went.
async fn call_tool(turn: &mut Turn<'_, GovernanceAware>, name: &str, arguments: Value) -> Result<String> {
    let session = turn.session().clone();
    let call = turn.tool_call(name, arguments);
    let outcome = match name {
        "read-file" => {
            call.kind(ToolKind::Read)
                .run(|args| async move {
                    // Opened beneath the workspace root's handle: no symlink, no swap leads out.
                    let text = session
                        .workspace()
                        .read_to_string(args["path"].as_str().unwrap_or_default())
                        .map_err(|e| e.to_string())?;
                    Ok::<_, String>(json!({ "text": text }))
                })
                .await?
        }
        "write-file" => {
            call.kind(ToolKind::Edit)
                .run(|args| async move {
                    let content = args["content"].as_str().unwrap_or_default().to_string();
                    session
                        .workspace()
                        .write(args["path"].as_str().unwrap_or_default(), content.as_bytes())
                        .map_err(|e| e.to_string())?;
                    Ok::<_, String>(json!({ "written": content.len() }))
                })
                .await?
        }
        "run-tests" => {
            call.kind(ToolKind::Execute)
                .run(|_| async {
                    Ok::<_, String>(json!({ "passed": 0, "failed": 0, "note": "the example runs no real tests" }))
                })
                .await?
        }
        // Not in the operator's tool list: governance denies it before anything reaches the wire.
        _ => call.run(|_| async { Ok::<_, String>(Value::Null) }).await?,
    };
    Ok(match outcome {
        ToolOutcome::Completed(result) => format!("completed: {result}"),
        ToolOutcome::Failed(error) => format!("failed: {error}"),
        ToolOutcome::Rejected(_) => "rejected".to_string(),
        ToolOutcome::Denied(reason) => format!("denied: {reason}"),
    })
}
