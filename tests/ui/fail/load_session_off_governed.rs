//! Switching `loadSession` off at tier governance-aware, which requires it, is ACP209.

use agentacp::prelude::*;

#[acp_operator(manifest = "load-session-off-governed/ACP.md")]
pub struct Echo;

impl EchoServer for Echo {
    async fn prompt(
        &self,
        turn: &mut Turn<'_, GovernanceAware>,
        _request: wire::PromptRequest,
    ) -> Result<wire::StopReason> {
        turn.message("hello").await?;
        Ok(wire::StopReason::EndTurn)
    }

    async fn load_session(
        &self,
        _session: &SessionContext,
        _request: wire::LoadSessionRequest,
    ) -> Result<wire::LoadSessionResponse> {
        Ok(wire::LoadSessionResponse::default())
    }
}

fn main() {
    let _operator = Echo;
}
