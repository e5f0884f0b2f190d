//! An absolute `operator` path is ACP300: refs are relative to the manifest's folder.

use agentacp::prelude::*;

#[acp_operator(manifest = "operator-ref-absolute/ACP.md")]
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
