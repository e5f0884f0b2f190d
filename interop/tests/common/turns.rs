//! Our client's prompt turns read to their end (`tests/client_drives_sdk_agents.rs`,
//! `tests/http_servers.rs`).

use agentacp::client::{Client, PromptEvent, PromptStream, Update};
use agentacp::wire::default as wire;

/// Reads the turn to its end: every update, then the stop reason.
pub async fn finish_turn(mut turn: PromptStream) -> (Vec<Update>, wire::StopReason) {
    let mut updates = Vec::new();
    while let Some(event) = turn.next().await {
        let event = event.unwrap_or_else(|e| panic!("the turn failed after {updates:#?}: {e}"));
        match event {
            PromptEvent::Update(update) => updates.push(update),
            PromptEvent::Stop(reason) => {
                assert!(turn.next().await.is_none(), "an event after the stop");
                return (updates, reason);
            }
            // Other events (`Replay`, `Loaded`: those of `session/load`) are not expected here.
            other => panic!("unexpected event {other:?} after {updates:#?}"),
        }
    }
    panic!("the turn ended without a stop reason after {updates:#?}");
}

/// The texts of the message chunks among `updates`, in order.
pub fn chunks(updates: &[Update]) -> Vec<&str> {
    updates
        .iter()
        .filter(|u| matches!(u, Update::MessageChunk(_)))
        .filter_map(Update::text)
        .collect()
}

/// Sends `text` in `session` and reads the turn to its end.
pub async fn prompt(client: &Client, session: &wire::SessionId, text: &str) -> (Vec<Update>, wire::StopReason) {
    let turn = client
        .prompt_text(session, text)
        .await
        .unwrap_or_else(|e| panic!("sending the prompt {text:?} failed: {e}"));
    finish_turn(turn).await
}
