//! A sandboxed AIP-44 server: it offers the tools of the MCP servers the client passes in
//! `session/new` (connected by the runtime with `rmcp`), and calls them as governed tool
//! calls: allowed, asked or denied by the manifest's governance, streamed to the client as
//! `tool_call` / `tool_call_update`, and mirrored to the audit log.
//!
//! A prompt's first text block is a command: `/mcp tools`, `/mcp call SERVER TOOL {JSON}`;
//! anything else is echoed back.

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
        } else if let Some(call) = text.strip_prefix("/mcp call ") {
            let report = call_tool(turn, call).await?;
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

fn main() -> agentacp::Result<()> {
    NoteKeeper.run_stdio()
}
