//! A sandboxed AIP-44 server: it offers the tools of the MCP servers the client passes in
//! `session/new` (connected by the runtime with `rmcp`), and calls them as governed tool
//! calls: allowed, asked or denied by the manifest's governance, streamed to the client as
//! `tool_call` / `tool_call_update`, and mirrored to the audit log.
//!
//! It also runs programs in the sandbox SANDBOX.md declares (`/run`), as governed tool calls:
//! confined to the workspace, within the limits, with only `PATH` of the environment and no
//! network.
//!
//! A prompt's first text block is a command: `/mcp tools`, `/mcp call SERVER TOOL {JSON}`,
//! `/mcp repeat N SERVER TOOL {JSON}` (the same call N times, then the time each took, as the
//! operator saw it: governance, audit and the MCP round trip), `/run PROGRAM ARGS…`; anything
//! else is echoed back.

mod commands;

use agentacp::prelude::*;

/// The operator. It keeps no state.
#[acp_operator(manifest = "ACP.md")]
pub struct NoteKeeper;

impl NoteKeeperServer for NoteKeeper {
    async fn prompt(&self, turn: &mut Turn<'_, Sandboxed>, request: wire::PromptRequest) -> Result<wire::StopReason> {
        commands::answer(turn, request).await
    }

    async fn load_session(
        &self,
        _session: &SessionContext,
        _request: wire::LoadSessionRequest,
    ) -> Result<wire::LoadSessionResponse> {
        // The runtime replays the stored history; nothing of the operator's to restore.
        Ok(wire::LoadSessionResponse::default())
    }
}

/// The command line: no arguments (the manifest's only transport is stdio), and `--help`.
#[derive(clap::Parser)]
#[command(
    version,
    about,
    long_about = None,
    after_help = "It serves ACP over stdio only (the manifest's transport), as an editor starts it; it takes no --listen. \
                  Settings come from the AGENTACP_* variables (docs/design/runtime.md); the sandbox is SANDBOX.md's."
)]
struct Args {}

fn main() -> std::process::ExitCode {
    // Parsed before anything opens: `--help` and a bad argument touch no audit log.
    let Args {} = clap::Parser::parse();
    match NoteKeeper.run_stdio() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("sandboxed-server: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
