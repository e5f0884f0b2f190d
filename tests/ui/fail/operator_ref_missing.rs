//! An `operator` ref to a file that does not exist is ACP301, at the ref.

use agentacp::prelude::*;

#[acp_operator(manifest = "operator-ref-missing/ACP.md")]
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
