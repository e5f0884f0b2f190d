//! A bridge served over WebSocket: remote editors connect to the bridge, and each connection
//! gets a bridge of its own, with a downstream agent of its own (one process per connection,
//! or one dialed connection with [`BridgeOptions::connect`]).
//!
//! The listener is the server's ([`Listener`]): the same bounds, origin checks, refusal of a
//! non-loopback address without tokens, and drain on shutdown. What differs is
//! authentication: a bridge has no `authenticate` step of its own, so when tokens are
//! configured ([`ListenOptions::tokens`]) a connection must show one on the upgrade
//! (`Authorization: Bearer <token>`). A wrong token is refused `401` at the upgrade; a
//! connection without one gets, to its first request, a `-32000` error saying so, and is
//! closed — no agent is started for it. Without tokens (loopback only) anyone who can reach
//! the port is served.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncWriteExt, BufReader};

use super::options::BridgeOptions;
use super::{BridgeOperator, downstream, oversight, relay};
use crate::error::Result;
use crate::jsonrpc::frame::{Frame, FrameReader};
use crate::jsonrpc::{self, Id, RpcError, codes};
use crate::websocket::{ListenOptions, Listener, Upgraded};

/// How long a connection refused for want of a token has to send its first request.
const REFUSAL_WAIT: Duration = Duration::from_secs(10);

/// A bound WebSocket listener for a bridge. [`BridgeListener::serve`] runs one bridge per
/// connection (see the module docs).
pub struct BridgeListener {
    listener: Listener,
    tokens_required: bool,
}

impl BridgeListener {
    /// Binds `options.addr` (see [`Listener::bind`]: a non-loopback address needs tokens).
    pub async fn bind(options: ListenOptions) -> Result<BridgeListener> {
        let tokens_required = options.tokens.is_some();
        Ok(BridgeListener {
            listener: Listener::bind(options).await?,
            tokens_required,
        })
    }

    /// The address it listens on (with the port the system chose for port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until SIGTERM or Ctrl-C, then drains (running prompts are cancelled downstream
    /// and answered, then each agent is stopped).
    pub async fn serve_until_signal<B: BridgeOperator>(self, bridge: B, options: BridgeOptions) -> Result<()> {
        self.serve(bridge, options, crate::env::shutdown_signal()).await
    }

    /// Runs a bridge per connection until `shutdown` resolves, then drains. The audit log and
    /// governance are opened once and shared by every connection; each connection starts (or
    /// dials) its own downstream agent.
    pub async fn serve<B: BridgeOperator>(
        self,
        bridge: B,
        options: BridgeOptions,
        shutdown: impl Future<Output = ()>,
    ) -> Result<()> {
        let (audit, governance) = oversight::<B>(&options)?;
        let bridge = Arc::new(bridge);
        let options = Arc::new(options);
        let tokens_required = self.tokens_required;
        self.listener
            .run(shutdown, move |connection: Upgraded| {
                let (bridge, options, audit, governance) =
                    (bridge.clone(), options.clone(), audit.clone(), governance.clone());
                async move {
                    if tokens_required && connection.identity.is_none() {
                        tracing::warn!(peer = %connection.peer, "refusing a bridge connection without a token on the upgrade");
                        refuse(connection, options.max_frame_bytes).await;
                        return;
                    }
                    tracing::debug!(peer = %connection.peer, identity = ?connection.identity.as_ref().map(|i| i.to_string()), "bridging a connection");
                    let downstream = downstream(bridge.as_ref(), &options);
                    let run = relay::run(
                        B::spec(),
                        downstream,
                        (*options).clone(),
                        governance,
                        audit,
                        connection.read,
                        connection.write,
                    );
                    if let Err(error) = run.await {
                        tracing::warn!(peer = %connection.peer, %error, "a bridged connection ended with an error");
                    }
                }
            })
            .await;
        Ok(())
    }
}

/// Answers the first request of a connection that showed no token with `-32000`, then closes.
async fn refuse(connection: Upgraded, max_frame_bytes: usize) {
    let Upgraded { read, mut write, .. } = connection;
    let mut frames = FrameReader::new(BufReader::new(read), max_frame_bytes);
    let id = match tokio::time::timeout(REFUSAL_WAIT, frames.next()).await {
        Ok(Ok(Some(Frame::Line(line)))) => match jsonrpc::parse(&line) {
            Ok(jsonrpc::Incoming::Request { id, .. }) => Some(id),
            _ => None,
        },
        Ok(Ok(Some(Frame::TooLarge { id, .. }))) => id,
        _ => None,
    };
    let error = RpcError::new(
        codes::AUTH_REQUIRED,
        "this bridge needs a bearer token on the WebSocket upgrade (`Authorization: Bearer <token>`); it has no `authenticate`",
    );
    let line = jsonrpc::encode_error(&id.unwrap_or(Id::Null), &error);
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        let _ = write.write_all(&line).await;
        let _ = write.shutdown().await;
    })
    .await;
}
