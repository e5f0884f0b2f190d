//! The smallest AIP-44 server: tier `basic`, no tools, no stored sessions.
//!
//! A prompt's first text block is read as a command (see `docs/design/runtime.md`):
//! `/stream N SIZE` streams N chunks of SIZE bytes, `/forever` streams until cancelled, and
//! anything else is echoed back.

use agentacp::prelude::*;

mod commands;

use commands::{Command, first_text, numbered_chunk};

/// The operator. It keeps no state.
#[acp_operator(manifest = "ACP.md")]
pub struct Echo;

impl EchoServer for Echo {
    async fn prompt(&self, turn: &mut Turn<'_, Basic>, request: wire::PromptRequest) -> Result<wire::StopReason> {
        let text = first_text(&request);
        match Command::parse(&text) {
            Command::Stream { count, size } => {
                for index in 0..count {
                    turn.message(numbered_chunk(index, size)).await?;
                }
            }
            Command::Forever => {
                let mut tick = 0u64;
                loop {
                    turn.message(format!("tick {tick}\n")).await?;
                    tick += 1;
                    tokio::task::yield_now().await;
                }
            }
            Command::Tool { .. } | Command::Echo => turn.message(text).await?,
        }
        Ok(wire::StopReason::EndTurn)
    }
}

fn main() -> agentacp::Result<()> {
    Echo.run_stdio()
}
