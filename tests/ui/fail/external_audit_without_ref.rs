//! `audit.kind: external` without `audit.ref` is ACP204, at the `kind` value.

use agentacp::prelude::*;

#[acp_operator(manifest = "external-audit-without-ref/ACP.md")]
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
