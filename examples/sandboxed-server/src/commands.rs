//! The commands a prompt may be (the first text block): `/mcp tools`, `/mcp call SERVER TOOL
//! {JSON}`, `/mcp repeat N SERVER TOOL {JSON}`, `/run PROGRAM ARGS…`; anything else is echoed
//! back. Shared, as the file itself, with the test operator that runs the same commands as a
//! sandboxed bridge's agent (`interop/src/bin/nested-agent.rs`).

use agentacp::prelude::*;
use agentacp::server::turn::ToolOutcome;

/// Answers one prompt: runs the command its first text block is.
pub(crate) async fn answer(turn: &mut Turn<'_, Sandboxed>, request: wire::PromptRequest) -> Result<wire::StopReason> {
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
