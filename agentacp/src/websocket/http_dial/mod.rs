//! Dialing an agent over Streamable HTTP (the upstream RFD "Streamable HTTP & WebSocket
//! Transport"): `http://` (HTTP/1.1) or, with feature `tls`, `https://` (HTTP/2 where ALPN
//! agrees on `h2`, else HTTP/1.1). [`connect`] gives the runtime the same line stream a
//! WebSocket does ([`pump`] says how the lines travel):
//!
//! - connecting checks that the endpoint is there and takes the token: a `GET` that opens
//!   nothing (a server of the RFD answers `400`, no connection named); `401` and `403` are
//!   `PermissionDenied`, as on a WebSocket upgrade;
//! - the first line the runtime writes, `initialize`, is POSTed without `Acp-Connection-Id`;
//!   the `200` answer names the connection; every later line is POSTed with it;
//! - what the agent sends comes on event streams ([`events`]), resumed with `Last-Event-ID`
//!   when one breaks;
//! - when the runtime closes its side, `DELETE` ends the connection.
//!
//! The cookies the agent sets are kept for the connection (reqwest's cookie store, one per
//! connection) and sent with each of its requests. Redirects are not followed, and no proxy
//! is used (as over WebSocket).

mod endpoint;
mod events;
mod pump;

use std::sync::Arc;

use tokio::io::{DuplexStream, ReadHalf, WriteHalf};
use tokio::task::JoinHandle;

use super::dial::Dial;
use super::stream::Ended;
use endpoint::Endpoint;

/// Bytes between the runtime and the pump, each way.
const PIPE_BYTES: usize = 256 * 1024;

/// Connects to `dial`'s `http(s)://` endpoint: the runtime's lines (read half, write half)
/// and the task that tells how the connection ended.
pub(crate) async fn connect(
    dial: &Dial,
) -> std::io::Result<(ReadHalf<DuplexStream>, WriteHalf<DuplexStream>, JoinHandle<Ended>)> {
    let endpoint = Arc::new(Endpoint::new(dial)?);
    endpoint.probe().await?;
    let (ours, theirs) = tokio::io::duplex(PIPE_BYTES);
    let (read, write) = tokio::io::split(theirs);
    let pump = tokio::spawn(pump::run(endpoint, ours));
    Ok((read, write, pump))
}
