//! An unquoted `version: 1.0` is a YAML float, not a string: ACP101, at the value.

use agentacp::prelude::*;

#[acp_operator(manifest = "version-not-a-string/ACP.md")]
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
