//! A basic manifest's `prompt` takes `Turn<'_, Basic>`; writing another tier is E0053.

use agentacp::prelude::*;

#[acp_operator(manifest = "wrong-tier-in-prompt/ACP.md")]
pub struct Echo;

impl EchoServer for Echo {
    async fn prompt(
        &self,
        turn: &mut Turn<'_, GovernanceAware>,
        _request: wire::PromptRequest,
    ) -> Result<wire::StopReason> {
        turn.message("hello").await?;
        Ok(wire::StopReason::EndTurn)
    }
}

fn main() {
    let _operator = Echo;
}
