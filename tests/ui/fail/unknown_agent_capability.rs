//! A misspelt key under the closed `capabilities.agent` is ACP105, at the key.

use agentacp::prelude::*;

#[acp_operator(manifest = "unknown-agent-capability/ACP.md")]
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
