//! `capabilities.client` in a `kind: server` manifest is ACP207, at the `client` key.

use agentacp::prelude::*;

#[acp_operator(manifest = "client-capabilities-on-server/ACP.md")]
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
