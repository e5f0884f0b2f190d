//! `examples/sandboxed-server` with a best-effort sandbox (tests/sandboxed-server-best-effort: a copy of its
//! SANDBOX.md that accepts best effort, with a 5-second timeout): the same operator,
//! governance and commands (the same source file). The sandbox is bound at build time by
//! the manifest, not chosen at run time, so the Wine test (`tests/wine.rs`) runs this program
//! to show what a best-effort profile does on Windows: it starts and reports what it cannot
//! enforce, where the example's own required profile refuses to start.

#[path = "../src/commands.rs"]
mod commands;

use agentacp::prelude::*;

/// The operator. It keeps no state.
#[acp_operator(manifest = "tests/sandboxed-server-best-effort/ACP.md")]
struct BestEffort;

impl BestEffortServer for BestEffort {
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
    match BestEffort.run_stdio() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("sandboxed-server-best-effort: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
