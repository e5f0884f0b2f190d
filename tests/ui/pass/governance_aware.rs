//! Tier governance-aware: `prompt` with governed tool calls, and `load_session`.

use agentacp::prelude::*;
use agentacp::server::Operator;

#[acp_operator(manifest = "governance-aware/ACP.md")]
pub struct Reviewer;

impl ReviewerServer for Reviewer {
    async fn prompt(
        &self,
        turn: &mut Turn<'_, GovernanceAware>,
        _request: wire::PromptRequest,
    ) -> Result<wire::StopReason> {
        let outcome = turn
            .tool_call("read-file", json!({"path": "README.md"}))
            .kind(ToolKind::Read)
            .run(|_arguments| async { Ok::<_, String>(json!({"text": ""})) })
            .await?;
        if let ToolOutcome::Completed(_) = outcome {
            turn.message("read it").await?;
        }
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
    let _operator = Reviewer;
    let spec = Reviewer::spec();
    assert_eq!((spec.tier, spec.load_session()), ("governance-aware", true));
    assert!(spec.governance.is_some());
}
