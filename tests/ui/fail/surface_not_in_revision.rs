//! The manifest declares modes, but the revision it pins (the module `scaffold-aip regen`
//! generated, here a stand-in) has no `session/set_mode`: the build fails with ACP216 at the
//! manifest's `modes` line.

use agentacp::prelude::*;

#[acp_operator(manifest = "surface-not-in-revision/ACP.md")]
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
