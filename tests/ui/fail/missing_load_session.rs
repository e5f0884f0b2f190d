//! Tier governance-aware turns on loadSession, so the handler trait requires `load_session`: E0046.

use agentacp::prelude::*;

#[acp_operator(manifest = "missing-load-session/ACP.md")]
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
