//! A server that speaks protocol version 2 only: version 2 has no client file system or
//! terminals, so its turn (`Turn<'_, V2<GovernanceAware>>`) has no `editor()`: E0277 with the
//! `ClientTools` message, at compile time rather than a run-time refusal.

use agentacp::prelude::*;
use agentacp::wire::rev_272bf799 as wire;

#[acp_operator(manifest = "v2-turn-editor/ACP.md")]
pub struct Reviewer;

impl ReviewerServer for Reviewer {
    async fn prompt(
        &self,
        turn: &mut Turn<'_, V2<GovernanceAware>>,
        _request: wire::PromptRequest,
    ) -> Result<wire::StopReason> {
        let _text = turn.editor().read_text_file("README.md").await?;
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
    let _operator = Reviewer;
}
