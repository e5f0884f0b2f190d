//! A server that speaks protocol versions 1 and 2: version 2 has no session modes, so its
//! turn (`Turn<'_, V2<Basic>>`) has no `set_mode()`: E0277 with the `SessionModes` message, at
//! compile time rather than a run-time refusal.

use agentacp::prelude::*;
use agentacp::wire::rev_272bf799 as wire;

#[acp_operator(manifest = "v2-turn-set-mode/ACP.md")]
pub struct Echo;

impl EchoServer for Echo {
    async fn prompt(&self, turn: &mut Turn<'_, V2<Basic>>, _request: wire::PromptRequest) -> Result<wire::StopReason> {
        turn.set_mode("code").await?;
        Ok(wire::StopReason::EndTurn)
    }
}

fn main() {
    let _operator = Echo;
}
