//! The manifest's `transport` is stdio alone, so the operator does not offer WebSocket:
//! serving it over WebSocket (`ServeWebSocket`, which needs `OffersWebSocket`) does not compile.

use agentacp::prelude::*;

#[acp_operator(manifest = "set-mode-without-modes/ACP.md")]
pub struct Echo;

impl EchoServer for Echo {
    async fn prompt(&self, turn: &mut Turn<'_, Basic>, _request: wire::PromptRequest) -> Result<wire::StopReason> {
        turn.message("hello").await?;
        Ok(wire::StopReason::EndTurn)
    }
}

/// What `ServeWebSocket` (feature `websocket`) is implemented for.
fn serve_over_websocket<O: agentacp::server::OffersWebSocket>(_operator: O) {}

fn main() {
    serve_over_websocket(Echo);
}
