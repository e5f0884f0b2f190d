//! An OPERATOR.md without `persona_summary` and `profile` is ACP304, naming both, at the ref.

use agentacp::prelude::*;

#[acp_operator(manifest = "operator-ref-incomplete/ACP.md")]
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
