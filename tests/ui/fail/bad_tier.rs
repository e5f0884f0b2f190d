//! `tier: gold` is not one of basic, governance-aware, sandboxed: ACP102, at the value.

use agentacp::prelude::*;

#[acp_operator(manifest = "bad-tier/ACP.md")]
pub struct Echo;

impl EchoServer for Echo {
    async fn prompt(&self, turn: &mut Turn<'_, Basic>, _request: wire::PromptRequest) -> Result<wire::StopReason> {
        turn.message("hello").await?;
        Ok(wire::StopReason::EndTurn)
    }
}

fn main() {
    let _operator = Echo;
}
