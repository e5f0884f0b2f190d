//! The governed example's operator, a governance-aware AIP-44 server: tool calls decided by
//! the governance binding built from `OPERATOR.md` and `GOVERNANCE.md` (reading runs, writing
//! and running tests ask the user, anything else is denied), every step in a hash-chained
//! audit log, and `session/load`. `src/main.rs` serves it over stdio; the tour
//! (`examples/tour`) runs it too.
//!
//! The prompt commands of the echo example work here too; `/tool NAME ARGS-JSON` makes a
//! tool call (see `docs/design/runtime.md`).

use agentacp::prelude::*;

#[path = "../../echo-server/src/commands.rs"]
mod commands;

use commands::{Command, first_text};

/// The operator. A real reviewer would keep its model client and memory here.
#[acp_operator(manifest = "ACP.md")]
pub struct Reviewer;

impl ReviewerServer for Reviewer {
    async fn prompt(
        &self,
        turn: &mut Turn<'_, GovernanceAware>,
        request: wire::PromptRequest,
    ) -> Result<wire::StopReason> {
        let text = first_text(&request);
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
            Command::Echo => turn.message(text).await?,
        }
        Ok(wire::StopReason::EndTurn)
    }

    async fn load_session(
        &self,
        _session: &SessionContext,
        _request: wire::LoadSessionRequest,
    ) -> Result<wire::LoadSessionResponse> {
        // The runtime replayed the conversation already; this operator keeps no other state.
        Ok(wire::LoadSessionResponse::default())
    }
}

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
