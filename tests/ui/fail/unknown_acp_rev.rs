//! A well-formed `acp_rev` that is no built-in revision is ACP400, which says how to get wire types.

use agentacp::prelude::*;

#[acp_operator(manifest = "unknown-acp-rev/ACP.md")]
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
