//! `transport: websocket` alone breaks the AIP-44 rule that stdio is always offered: ACP201.

use agentacp::prelude::*;

#[acp_operator(manifest = "transport-without-stdio/ACP.md")]
pub struct Echo;

impl EchoServer for Echo {
    async fn prompt(&self, turn: &mut Turn<'_, Basic>, _request: wire::PromptRequest) -> Result<wire::StopReason> {
        turn.message("hello").await?;
        Ok(wire::StopReason::EndTurn)
    }

    async fn authenticate(&self, _request: wire::AuthenticateRequest) -> Result<wire::AuthenticateResponse> {
        Ok(wire::AuthenticateResponse::default())
    }
}

fn main() {
    let _operator = Echo;
}
