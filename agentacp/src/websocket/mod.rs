//! Remote ACP over WebSocket (feature `websocket`; `wss://` with feature `tls`).
//!
//! - [`Listener`]: a server operator whose manifest lists `websocket` served to remote
//!   clients, one ACP connection per WebSocket connection, with bearer-token authentication
//!   ([`crate::auth`]) and the bounds of [`ListenOptions`].
//! - [`into_lines`]: any WebSocket as the line stream the runtime speaks, for servers, clients
//!   and bridges alike.
//!
//! JSON-RPC travels as text messages, one message (or several, newline-separated) a message.
//! How to run, connect and issue tokens: `docs/remote.md`.

// The upgrade callback's error type is tungstenite's (`ErrorResponse`), large by design.
// (The lint fires in `listen.rs`, owned by the server side: drop this once it is fixed there.)
#[allow(clippy::result_large_err)]
mod listen;
mod stream;
#[cfg(feature = "tls")]
mod tls;

pub(crate) use listen::Upgraded;
pub use listen::{ListenOptions, Listener, PATHS};
pub use stream::{Ended, Limits, into_lines};
#[cfg(feature = "tls")]
pub use tls::{TlsFiles, client_config};
mod dial;
mod serve;

pub use dial::Dial;
pub use serve::ServeWebSocket;
