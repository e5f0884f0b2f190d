//! `metadata.agentacp.auth` with an `agent` and a `terminal` method makes the handler trait
//! require `authenticate` and `sign_in`: E0046.

use agentacp::prelude::*;

#[acp_operator(manifest = "missing-sign-in/ACP.md")]
pub struct Gated;

impl GatedServer for Gated {
    async fn prompt(&self, turn: &mut Turn<'_, Basic>, _request: wire::PromptRequest) -> Result<wire::StopReason> {
        turn.message("hello").await?;
        Ok(wire::StopReason::EndTurn)
    }
}

fn main() {
    let _operator = Gated;
}
