//! A server impl written against a `kind: bridge` manifest does not compile: the handler trait of a bridge is `EchoBridge` (`downstream`), not `EchoServer`.

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
