//! `Turn::mcp_servers`, `Turn::sandbox_command` need tier sandboxed: at governance-aware each is E0277 with the
//! `SandboxedTier` message.

use agentacp::prelude::*;

#[acp_operator(manifest = "mcp-servers-below-sandboxed/ACP.md")]
pub struct Echo;

impl EchoServer for Echo {
    async fn prompt(
        &self,
        turn: &mut Turn<'_, GovernanceAware>,
        _request: wire::PromptRequest,
    ) -> Result<wire::StopReason> {
        let _servers = turn.mcp_servers();
        let _command = turn.sandbox_command("ls");
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
