//! A `kind: client` manifest generates `EchoClient`, not `EchoServer`: a server impl against it does not compile.

use agentacp::prelude::*;

#[acp_operator(manifest = "kind-client/ACP.md")]
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
