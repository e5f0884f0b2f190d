//! `wire = path` naming a module generated from another revision than the manifest's `acp_rev` fails a const assertion.

use agentacp::prelude::*;

#[acp_operator(manifest = "wire-module-of-another-rev/ACP.md", wire = agentacp::wire::rev_0fc18323)]
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
