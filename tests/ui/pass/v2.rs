//! Protocol versions 1 and 2: the turn is `Turn<'_, V2<GovernanceAware>>`, with everything of
//! the tier version 2 has (messages, governed tool calls, config options; the mode a config
//! option) and neither `editor()` nor `set_mode()` (see `fail/v2_turn_*.rs`).

use agentacp::prelude::*;
use agentacp::server::Operator;
use agentacp::surface::ConfigValue;
use agentacp::wire::rev_272bf799 as wire;

#[acp_operator(manifest = "v2/ACP.md")]
pub struct Both;

impl BothServer for Both {
    async fn prompt(
        &self,
        turn: &mut Turn<'_, V2<GovernanceAware>>,
        _request: wire::PromptRequest,
    ) -> Result<wire::StopReason> {
        turn.set_config_value("mode", ConfigValue::Value("code".into())).await?;
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

    async fn set_config_option(
        &self,
        _session: &SessionContext,
        _request: wire::SetSessionConfigOptionRequest,
    ) -> Result<wire::SetSessionConfigOptionResponse> {
        Ok(wire::SetSessionConfigOptionResponse::new(Vec::new()))
    }
}

pub fn main() {
    let _operator = Both;
    let spec = Both::spec();
    assert_eq!((spec.tier, spec.protocol_versions), ("governance-aware", &[1, 2][..]));
    assert_eq!(
        <<Both as Operator>::Tier as agentacp::tier::Tier>::NAME,
        "governance-aware"
    );
}
