//! A valid `kind: bridge` manifest is refused by `#[acp_operator]` (servers only, for now), naming the `kind` line.

use agentacp::prelude::*;

#[acp_operator(manifest = "kind-bridge/ACP.md")]
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
