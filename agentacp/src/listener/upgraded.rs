//! What every upgraded WebSocket connection of a listener gets, whether its upgrade came
//! first on its TCP connection (`mod.rs`) or after Streamable HTTP requests (`http`): its
//! settings, its `Acp-Connection-Id`, and its close when it is evicted.

use std::future::Future;
use std::net::SocketAddr;

use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::websocket::{Closer, Limits};

/// The close reason of a connection evicted for an authenticated one (at most 123 bytes).
const EVICTED: &str = "the server is full: an unauthenticated connection made room for an authenticated one";

/// The header naming a connection (on a `101`, as on an `initialize` POST's `200`).
pub(super) const CONNECTION_ID: &str = "acp-connection-id";

/// A fresh connection id: 128 bits from the operating system's random source, in hex.
pub(super) fn new_connection_id() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|error| format!("cannot make a connection id: the system's random source failed ({error})"))?;
    Ok(format!("{:032x}", u128::from_be_bytes(bytes)))
}

/// The WebSocket settings of a connection with `limits`.
pub(super) fn websocket_config(limits: &Limits) -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(limits.max_message_bytes))
        .max_frame_size(Some(limits.max_message_bytes))
        .read_buffer_size(16 * 1024)
        .write_buffer_size(16 * 1024)
}

/// Runs `handling`, a WebSocket connection's handler, to its end; `evicted` meanwhile, the
/// connection is closed with `1013` and a reason (its handler then sees its input end).
pub(super) async fn until_evicted(
    handling: impl Future<Output = ()>,
    evicted: impl Future<Output = ()>,
    closer: Option<Closer>,
    peer: SocketAddr,
) {
    tokio::pin!(handling, evicted);
    tokio::select! {
        () = &mut handling => return,
        () = &mut evicted => {
            tracing::info!(%peer, "closing an unauthenticated connection to make room for an authenticated one");
            if let Some(closer) = closer {
                closer.close(CloseCode::Again, EVICTED);
            }
        }
    }
    handling.await;
}
