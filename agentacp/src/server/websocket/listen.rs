//! Serving a server operator on the shared listener ([`crate::listener`]): one ACP connection
//! per WebSocket (or Streamable HTTP) connection, with the guarantees of stdio; see the
//! listener's docs for the bounds, checks and drain.

use std::future::Future;
use std::sync::Arc;

use crate::error::Result;
use crate::listener::Listener;
use crate::server::{Access, OffersWebSocket, Operator, Served, ServerOptions};

impl Listener {
    /// Serves `operator` until SIGTERM or Ctrl-C, then drains (see the listener's docs).
    pub async fn serve_until_signal<O: Operator + OffersWebSocket>(
        self,
        operator: O,
        options: ServerOptions,
    ) -> Result<()> {
        self.serve(operator, options, crate::env::shutdown_signal()).await
    }

    /// Serves `operator`, one ACP connection per WebSocket connection (each with the same
    /// guarantees as stdio), until `shutdown` resolves; then drains. What the connections
    /// share (audit log, session stores, governance, workspace root) is opened once.
    pub async fn serve<O: Operator + OffersWebSocket>(
        self,
        operator: O,
        options: ServerOptions,
        shutdown: impl Future<Output = ()>,
    ) -> Result<()> {
        let served = Arc::new(Served::open::<O>(options)?);
        let stopping = served.clone();
        let operator = Arc::new(operator);
        let tokens = self.tokens();
        let auth_timeout = self.auth_timeout();
        self.run(shutdown, move |connection| {
            let (served, operator, tokens) = (served.clone(), operator.clone(), tokens.clone());
            async move {
                let access = match &tokens {
                    Some(tokens) => Access::required(tokens.clone(), connection.proved.clone()),
                    None => Access::default(),
                };
                if let Some(unproven) = connection.unproven {
                    access.hold_until_proven(Box::new(unproven));
                }
                let access = Arc::new(access);
                let serving = served.connection(operator, access.clone(), connection.read, connection.write);
                tokio::select! {
                    result = serving => {
                        if let Err(error) = result {
                            tracing::warn!(peer = %connection.peer, %error, "a connection ended with an error");
                        }
                    }
                    () = access.unauthenticated_for(auth_timeout) => {
                        tracing::warn!(peer = %connection.peer, "closing a connection that did not authenticate in {auth_timeout:?}");
                    }
                }
            }
        })
        .await;
        stopping.stop().await;
        Ok(())
    }
}
