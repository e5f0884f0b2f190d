//! The remote transports (feature `websocket`, "remote ACP"; `wss://` and `https://` with
//! feature `tls`): what servers, clients and bridges share.
//!
//! - [`into_lines`]: any WebSocket as the line stream the runtime speaks;
//! - [`Dial`]: connecting to a remote agent, with a bearer token, over WebSocket (`ws://`,
//!   `wss://`) or Streamable HTTP (`http://`, `https://`), the URL's scheme picks
//!   ([`Transport`]).
//!
//! Serving an operator remotely is `agentacp::server::websocket` (`Listener`,
//! `ServeWebSocket`): one listener serves both profiles on `/acp`.
//!
//! Over WebSocket, JSON-RPC travels as text messages, one message (or several,
//! newline-separated) a message; over Streamable HTTP, one message a POST or an event.
//! How to run, connect and issue tokens: `docs/remote.md`.

mod connect;
mod dial;
mod http_dial;
mod stream;
#[cfg(feature = "tls")]
mod tls;

pub(crate) use dial::ended_line;
pub use dial::{Dial, Transport};
pub(crate) use stream::{Closer, into_closable_lines};
pub use stream::{Ended, Limits, into_lines};
#[cfg(feature = "tls")]
pub use tls::{TlsFiles, client_config};
