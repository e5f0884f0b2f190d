//! `kind: server` without `metadata.aip44.operator` is ACP202, at the `kind` value.

use agentacp::prelude::*;

#[acp_operator(manifest = "server-without-operator/ACP.md")]
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
