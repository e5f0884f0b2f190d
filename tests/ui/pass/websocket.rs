//! `transport: [stdio, websocket]`: the handler trait gains `authenticate`.

use agentacp::prelude::*;
use agentacp::server::Operator;

#[acp_operator(manifest = "websocket/ACP.md")]
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

pub fn main() {
    let _operator = Echo;
    assert_eq!(Echo::spec().tier, "basic");
}
