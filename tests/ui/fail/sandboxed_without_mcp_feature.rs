//! A `tier: sandboxed` server built without agentacp's `mcp` feature (this crate's agentacp
//! has none): a compile error naming the `tier` line and the feature, never a server that
//! would advertise MCP it cannot take, or run its programs unconfined.

use agentacp::prelude::*;

#[acp_operator(manifest = "sandboxed-without-mcp-feature/ACP.md")]
pub struct Boxed;

impl BoxedServer for Boxed {
    async fn prompt(&self, turn: &mut Turn<'_, Sandboxed>, _request: wire::PromptRequest) -> Result<wire::StopReason> {
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
    let _operator = Boxed;
}
