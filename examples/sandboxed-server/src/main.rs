//! A sandboxed AIP-44 server: it offers the tools of the MCP servers the client passes in
//! `session/new` (connected by the runtime with `rmcp`), and calls them as governed tool
//! calls: allowed, asked or denied by the manifest's governance, streamed to the client as
//! `tool_call` / `tool_call_update`, and mirrored to the audit log.
//!
//! It also runs programs in the sandbox SANDBOX.md declares (`/run`), as governed tool calls:
//! confined to the workspace, within the limits, with only `PATH` of the environment and no
//! network.
//!
//! A prompt's first text block is a command: `/mcp tools`, `/mcp call SERVER TOOL {JSON}`,
//! `/mcp repeat N SERVER TOOL {JSON}` (the same call N times, then the time each took, as the
//! operator saw it: governance, audit and the MCP round trip), `/run PROGRAM ARGS…`; anything
//! else is echoed back.

use agentacp::prelude::*;
use agentacp::server::turn::ToolOutcome;

/// The operator. It keeps no state.
#[acp_operator(manifest = "ACP.md")]
pub struct NoteKeeper;

impl NoteKeeperServer for NoteKeeper {
    async fn prompt(&self, turn: &mut Turn<'_, Sandboxed>, request: wire::PromptRequest) -> Result<wire::StopReason> {
        let text = match request.prompt.first() {
            Some(wire::ContentBlock::Text(text)) => text.text.trim().to_string(),
            _ => String::new(),
        };
        if text == "/mcp tools" {
            list_tools(turn).await?;
        } else if let Some(repeat) = text.strip_prefix("/mcp repeat ") {
            let report = repeat_tool(turn, repeat).await?;
            turn.message(report).await?;
        } else if let Some(call) = text.strip_prefix("/mcp call ") {
            let report = call_tool(turn, call).await?;
            turn.message(report).await?;
        } else if let Some(command) = text.strip_prefix("/run ") {
            let report = run_in_sandbox(turn, command).await?;
            turn.message(report).await?;
        } else {
            turn.message(text).await?;
        }
        Ok(wire::StopReason::EndTurn)
    }

    async fn load_session(
        &self,
        _session: &SessionContext,
        _request: wire::LoadSessionRequest,
    ) -> Result<wire::LoadSessionResponse> {
        // The runtime replays the stored history; nothing of the operator's to restore.
        Ok(wire::LoadSessionResponse::default())
    }
}

/// One message per tool (`mcp/<server>/<tool> (<kind>)`), then one per server that could not
/// be started.
async fn list_tools(turn: &mut Turn<'_, Sandboxed>) -> Result<()> {
    let tools = turn.mcp().tools().await?;
    let unavailable = turn.mcp().unavailable().await?;
    if tools.is_empty() && unavailable.is_empty() {
        return turn.message("no MCP tools").await;
    }
    for tool in tools {
        let kind = serde_json::to_value(tool.kind).unwrap_or_default();
        turn.message(format!(
            "{} ({})",
            tool.governed_name(),
            kind.as_str().unwrap_or("other")
        ))
        .await?;
    }
    for (server, why) in unavailable {
        turn.message(format!("unavailable: {server}: {why}")).await?;
    }
    Ok(())
}

/// `SERVER TOOL {JSON}`: the call's outcome in one line.
async fn call_tool(turn: &mut Turn<'_, Sandboxed>, call: &str) -> Result<String> {
    let mut words = call.splitn(3, ' ');
    let (Some(server), Some(tool)) = (words.next(), words.next()) else {
        return Ok("usage: /mcp call SERVER TOOL {JSON arguments}".into());
    };
    let arguments = match words.next().map(serde_json::from_str::<serde_json::Value>) {
        None => serde_json::json!({}),
        Some(Ok(arguments)) => arguments,
        Some(Err(error)) => return Ok(format!("the arguments are not JSON: {error}")),
    };
    Ok(match turn.mcp().call(server, tool, arguments).await {
        Ok(ToolOutcome::Completed(result)) => {
            let text: Vec<&str> = result["content"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|block| block["text"].as_str())
                .collect();
            format!("completed: {}", text.join(" "))
        }
        Ok(ToolOutcome::Failed(why)) => format!("failed: {why}"),
        Ok(ToolOutcome::Rejected(why)) => format!("rejected: {why}"),
        Ok(ToolOutcome::Denied(why)) => format!("denied: {why}"),
        Err(Error::InvalidParams(why)) => format!("no such tool: {why}"),
        Err(error) => return Err(error),
    })
}

/// `N SERVER TOOL {JSON}`: the call made N times in a row; the mean time of one call (from
/// `turn.mcp().call()` to its outcome) and the last outcome.
async fn repeat_tool(turn: &mut Turn<'_, Sandboxed>, repeat: &str) -> Result<String> {
    let Some((Ok(times), call)) = repeat.split_once(' ').map(|(n, call)| (n.parse::<u32>(), call)) else {
        return Ok("usage: /mcp repeat N SERVER TOOL {JSON arguments}".into());
    };
    let started = std::time::Instant::now();
    let mut last = String::new();
    for _ in 0..times {
        last = call_tool(turn, call).await?;
    }
    let micros = started.elapsed().as_secs_f64() * 1e6 / f64::from(times.max(1));
    Ok(format!("{times} calls, {micros:.1} µs per call; the last {last}"))
}

/// `PROGRAM ARGS…` (split on spaces) run in the sandbox as the governed tool call `run`:
/// its outcome in one line, with what it printed.
async fn run_in_sandbox(turn: &mut Turn<'_, Sandboxed>, command: &str) -> Result<String> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let Some((program, args)) = words.split_first() else {
        return Ok("usage: /run PROGRAM ARGS…".into());
    };
    let sandboxed = turn.sandbox_command(program)?.args(args);
    let outcome = turn
        .tool_call("run", serde_json::json!({ "command": words }))
        .title(format!("run {command}"))
        .kind(ToolKind::Execute)
        .run(|_| async move {
            let output = sandboxed.output().await?;
            let printed = format!("{}{}", output.stdout_text(), output.stderr_text());
            match output.success() {
                true => Ok(serde_json::json!({ "output": printed })),
                false => Err(Error::msg(format!(
                    "exited with {}: {}",
                    output.status.map_or("no status".into(), |status| status.to_string()),
                    printed.trim()
                ))),
            }
        })
        .await?;
    Ok(match outcome {
        ToolOutcome::Completed(result) => format!("completed: {}", result["output"].as_str().unwrap_or("").trim()),
        ToolOutcome::Failed(why) => format!("failed: {why}"),
        ToolOutcome::Rejected(why) => format!("rejected: {why}"),
        ToolOutcome::Denied(why) => format!("denied: {why}"),
    })
}

/// The command line: no arguments (the manifest's only transport is stdio), and `--help`.
#[derive(clap::Parser)]
#[command(
    version,
    about,
    long_about = None,
    after_help = "It serves ACP over stdio only (the manifest's transport), as an editor starts it; it takes no --listen. \
                  Settings come from the AGENTACP_* variables (docs/design/runtime.md); the sandbox is SANDBOX.md's."
)]
struct Args {}

fn main() -> std::process::ExitCode {
    // Parsed before anything opens: `--help` and a bad argument touch no audit log.
    let Args {} = clap::Parser::parse();
    match NoteKeeper.run_stdio() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("sandboxed-server: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
