//! A sandboxed server for running inside another sandbox, as a sandboxed bridge's agent in
//! the MCP-over-ACP tests: `examples/sandboxed-server`'s commands (the same source file) and
//! governance, under a best-effort profile (tests/operators/nested-agent). A runtime that is
//! itself confined cannot give its programs a root of their own — the outer sandbox's
//! Landlock forbids mounting — so the example's required profile refuses to start there.

#[path = "../../../examples/sandboxed-server/src/commands.rs"]
mod commands;

use agentacp::prelude::*;

/// The operator. It keeps no state.
#[acp_operator(manifest = "tests/operators/nested-agent/ACP.md")]
struct NestedAgent;

impl NestedAgentServer for NestedAgent {
    async fn prompt(&self, turn: &mut Turn<'_, Sandboxed>, request: wire::PromptRequest) -> Result<wire::StopReason> {
        commands::answer(turn, request).await
    }

    async fn load_session(
        &self,
        _session: &SessionContext,
        _request: wire::LoadSessionRequest,
    ) -> Result<wire::LoadSessionResponse> {
        Ok(wire::LoadSessionResponse::default())
    }
}

fn main() -> std::process::ExitCode {
    match NestedAgent.run_stdio() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("nested-agent: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
