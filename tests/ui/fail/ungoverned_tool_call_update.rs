//! `Turn::update` takes `wire::OperatorUpdate`, which has no tool-call variants, so a tool call
//! that bypasses `turn.tool_call` (and governance, and audit) does not compile — neither named
//! on `OperatorUpdate` (E0599) nor smuggled in as a `SessionUpdate` (E0277, with its message).

use agentacp::prelude::*;

#[acp_operator(manifest = "ungoverned-tool-call-update/ACP.md")]
pub struct Echo;

impl EchoServer for Echo {
    async fn prompt(&self, _turn: &mut Turn<'_, Basic>, _request: wire::PromptRequest) -> Result<wire::StopReason> {
        Ok(wire::StopReason::EndTurn)
    }
}

fn ungoverned(turn: &mut Turn<'_, Basic>, call: wire::ToolCall) {
    let _named = turn.update(&wire::OperatorUpdate::ToolCall(call));
    let _smuggled = turn.update(&wire::SessionUpdate::Plan(wire::Plan::new(Vec::new())));
}

fn main() {
    let _operator = Echo;
    let _ = ungoverned;
}
