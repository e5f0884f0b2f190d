//! Tier basic: the handler trait is `prompt` alone, on a `Turn<'_, Basic>`, which may send any
//! update but a tool call (`wire::OperatorUpdate`).

use agentacp::prelude::*;
use agentacp::server::Operator;

#[acp_operator(manifest = "basic/ACP.md")]
pub struct Echo;

impl EchoServer for Echo {
    async fn prompt(&self, turn: &mut Turn<'_, Basic>, _request: wire::PromptRequest) -> Result<wire::StopReason> {
        turn.thought("echoing").await?;
        turn.message("hello").await?;
        turn.update(&wire::OperatorUpdate::Plan(wire::Plan::new(Vec::new())))
            .await?;
        Ok(wire::StopReason::EndTurn)
    }
}

pub fn main() {
    let _operator = Echo;
    let spec = Echo::spec();
    assert_eq!((spec.name, spec.tier, spec.load_session()), ("basic", "basic", false));
}
