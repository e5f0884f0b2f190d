//! The manifest declares no modes, so `set_mode` is not a member of the handler trait: E0407.

use agentacp::prelude::*;

#[acp_operator(manifest = "set-mode-without-modes/ACP.md")]
pub struct Echo;

impl EchoServer for Echo {
    async fn prompt(&self, turn: &mut Turn<'_, Basic>, _request: wire::PromptRequest) -> Result<wire::StopReason> {
        turn.message("hello").await?;
        Ok(wire::StopReason::EndTurn)
    }

    async fn set_mode(
        &self,
        _session: &SessionContext,
        _request: wire::SetSessionModeRequest,
    ) -> Result<wire::SetSessionModeResponse> {
        Ok(wire::SetSessionModeResponse::default())
    }
}

fn main() {
    let _operator = Echo;
}
