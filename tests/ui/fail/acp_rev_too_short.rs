//! An `acp_rev` prefix shorter than 7 hex digits is ACP103 (it is not looked up).

use agentacp::prelude::*;

#[acp_operator(manifest = "acp-rev-too-short/ACP.md")]
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
