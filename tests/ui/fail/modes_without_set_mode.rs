//! The manifest declares modes and an extension request, so the handler trait requires
//! `set_mode` and `extension`; an impl without them is E0046, whose "from trait" points at the
//! manifest (each method's docs name the manifest line that requires it).

use agentacp::prelude::*;

#[acp_operator(manifest = "modes-without-set-mode/ACP.md")]
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
