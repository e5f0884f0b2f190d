//! Tier sandboxed: a SANDBOX.md ref, `load_session`, and the session's MCP servers on the turn.

use agentacp::prelude::*;
use agentacp::server::Operator;

#[acp_operator(manifest = "sandboxed/ACP.md")]
pub struct Confined;

impl ConfinedServer for Confined {
    async fn prompt(&self, turn: &mut Turn<'_, Sandboxed>, _request: wire::PromptRequest) -> Result<wire::StopReason> {
        let count = turn.mcp_servers().as_array().map_or(0, Vec::len);
        turn.message(format!("{count} MCP servers")).await?;
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

pub fn main() {
    let _operator = Confined;
    let spec = Confined::spec();
    assert_eq!((spec.tier, spec.load_session()), ("sandboxed", true));
    assert!(spec.sandbox.is_some());
}
