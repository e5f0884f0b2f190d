//! [`Dial::connect`]: the URL's scheme picks the transport (WebSocket in `dial.rs`, Streamable
//! HTTP in `http_dial`).

use tokio::io::{DuplexStream, ReadHalf, WriteHalf};
use tokio::task::JoinHandle;

use super::dial::{Dial, Transport};
use super::stream::Ended;

impl Dial {
    /// Connects: upgrades to a WebSocket, or (Streamable HTTP) checks that the endpoint is
    /// there and takes the token (the connection itself opens with the `initialize` written
    /// first). The agent's JSON-RPC lines come from the first half and go to the second. A
    /// refused connection (`401`, `403`, …) is an error that says so: `PermissionDenied`
    /// for `401` and `403`. Every error is a sentence naming the URL: `cannot reach the
    /// agent at URL: …`.
    pub async fn connect(&self) -> std::io::Result<(ReadHalf<DuplexStream>, WriteHalf<DuplexStream>)> {
        let (read, write, _pump) = self.connect_watched().await?;
        Ok((read, write))
    }

    /// [`connect`](Dial::connect), and the task that tells how the connection ended.
    pub(crate) async fn connect_watched(
        &self,
    ) -> std::io::Result<(ReadHalf<DuplexStream>, WriteHalf<DuplexStream>, JoinHandle<Ended>)> {
        match self.transport()? {
            Transport::WebSocket => self.connect_websocket().await,
            Transport::StreamableHttp => super::http_dial::connect(self).await,
        }
    }
}
