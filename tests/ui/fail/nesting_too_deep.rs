//! Lists nested 10,000 deep are ACP012 (at the 64th `-`), not a stack overflow in the compiler.

use agentacp::prelude::*;

#[acp_operator(manifest = "nesting-too-deep/ACP.md")]
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
