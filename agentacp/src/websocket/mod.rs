//! The WebSocket transport (feature `websocket`; `wss://` with feature `tls`): what servers,
//! clients and bridges share.
//!
//! - [`into_lines`]: any WebSocket as the line stream the runtime speaks;
//! - [`Dial`]: connecting to a remote agent, with a bearer token.
//!
//! Serving an operator over WebSocket is `agentacp::server::websocket` (`Listener`,
//! `ServeWebSocket`).
//!
//! JSON-RPC travels as text messages, one message (or several, newline-separated) a message.
//! How to run, connect and issue tokens: `docs/remote.md`.

mod dial;
mod stream;
#[cfg(feature = "tls")]
mod tls;

pub use dial::Dial;
pub(crate) use stream::{Closer, into_closable_lines};
pub use stream::{Ended, Limits, into_lines};
#[cfg(feature = "tls")]
pub use tls::{TlsFiles, client_config};
