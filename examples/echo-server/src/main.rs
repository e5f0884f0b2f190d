//! The smallest AIP-44 server: tier `basic`, no tools, no stored sessions.
//!
//! A prompt's first text block is read as a command (see `docs/design/runtime.md`):
//! `/stream N SIZE` streams N chunks of SIZE bytes, `/forever` streams until cancelled, and
//! anything else is echoed back.

use agentacp::prelude::*;

mod cli;
mod commands;

use commands::{Command, first_text};

/// The operator. It keeps no state.
#[acp_operator(manifest = "ACP.md")]
pub struct Echo;

impl EchoServer for Echo {
    async fn prompt(&self, turn: &mut Turn<'_, Basic>, request: wire::PromptRequest) -> Result<wire::StopReason> {
        let text = first_text(&request);
        match Command::parse(&text) {
            Command::Stream { count, size } => commands::stream(turn, count, size).await?,
            Command::Forever => commands::forever(turn).await?,
            Command::Tool { .. } | Command::Echo => turn.message(text).await?,
        }
        Ok(wire::StopReason::EndTurn)
    }

    async fn authenticate(&self, _request: wire::AuthenticateRequest) -> Result<wire::AuthenticateResponse> {
        // Over WebSocket the runtime checked the bearer token before this runs; nothing to add.
        Ok(wire::AuthenticateResponse::default())
    }
}

/// stdio with no arguments; WebSocket with `--listen HOST:PORT` (token: `AGENTACP_TOKEN`);
/// `--help`.
fn main() -> std::process::ExitCode {
    cli::main(Echo)
}
