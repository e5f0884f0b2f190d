//! A frontmatter that is a list, not a mapping, is ACP010, at its first `-`.

use agentacp::prelude::*;

#[acp_operator(manifest = "frontmatter-not-mapping/ACP.md")]
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
