//! A YAML syntax error (a second `: ` on the `kind` line) is ACP008, at the parser's position.

use agentacp::prelude::*;

#[acp_operator(manifest = "yaml-syntax-error/ACP.md")]
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
