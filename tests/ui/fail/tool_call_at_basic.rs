//! `Turn::tool_call` needs a governed tier: at tier basic it is E0277 with the `Governed` message.

use agentacp::prelude::*;

#[acp_operator(manifest = "tool-call-at-basic/ACP.md")]
pub struct Echo;

impl EchoServer for Echo {
    async fn prompt(&self, turn: &mut Turn<'_, Basic>, _request: wire::PromptRequest) -> Result<wire::StopReason> {
        let _call = turn.tool_call("read-file", json!({"path": "README.md"}));
        Ok(wire::StopReason::EndTurn)
    }
}

fn main() {
    let _operator = Echo;
}
