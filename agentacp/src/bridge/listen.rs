//! A bridge served over WebSocket: remote editors connect to the bridge, and each connection
//! gets a bridge of its own, with a downstream agent of its own (one process per connection,
//! or one dialed connection with [`BridgeOptions::connect`]). As for a server, only a bridge
//! whose manifest's `transport` lists `websocket` can be served so ([`OffersWebSocket`]).
//!
//! The listener is the one servers use too ([`Listener`], `src/listener/`): the same bounds,
//! origin checks, refusal of a non-loopback address without tokens, Streamable HTTP beside
//! WebSocket, and drain on shutdown. What differs is
//! authentication: a bridge has no `authenticate` step of its own, so when tokens are
//! configured ([`ListenOptions::tokens`]) a connection must show one on the upgrade
//! (`Authorization: Bearer <token>`): a missing or wrong token is refused `401` at the upgrade,
//! and no agent is started for it. Every audit record of a connection carries its identity
//! (`metadata.aip44.identity`). Without tokens (loopback only) anyone who can reach the port
//! is served.
//!
//! The token is checked again each time the editor sends something, and every 2 s in between:
//! once it is revoked from the store, what the editor sent is dropped, `auth.revoked` is
//! audited, and the connection ends as if the editor had closed it (running prompts
//! cancelled, the agent stopped).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, ReadBuf};

use super::options::BridgeOptions;
use super::{BridgeOperator, agent_sandbox, downstream, oversight, relay};
use crate::audit::AuditLog;
use crate::auth::{Identity, TokenStore};
use crate::error::Result;
use crate::listener::{ListenOptions, Listener, Upgraded};
use crate::oversight::record::{auth_event, write_ahead};
use crate::server::OffersWebSocket;

/// A bound WebSocket listener for a bridge. [`BridgeListener::serve`] runs one bridge per
/// connection (see the module docs).
pub struct BridgeListener {
    listener: Listener,
}

impl BridgeListener {
    /// Binds `options.addr` (see [`Listener::bind`]: a non-loopback address needs tokens).
    pub async fn bind(options: ListenOptions) -> Result<BridgeListener> {
        let options = ListenOptions {
            token_on_upgrade: true,
            ..options
        };
        Ok(BridgeListener {
            listener: Listener::bind(options).await?,
        })
    }

    /// The address it listens on (with the port the system chose for port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until SIGTERM or Ctrl-C, then drains (running prompts are cancelled downstream
    /// and answered, then each agent is stopped).
    pub async fn serve_until_signal<B: BridgeOperator + OffersWebSocket>(
        self,
        bridge: B,
        options: BridgeOptions,
    ) -> Result<()> {
        self.serve(bridge, options, crate::env::shutdown_signal()).await
    }

    /// Runs a bridge per connection until `shutdown` resolves, then drains. The audit log and
    /// governance are opened once and shared by every connection; each connection starts (or
    /// dials) its own downstream agent. Only a bridge whose manifest's `transport` lists
    /// `websocket` ([`OffersWebSocket`]) can be served: for any other it does not compile.
    ///
    /// ```compile_fail,E0277
    /// use agentacp::bridge::BridgeOptions;
    /// use agentacp::bridge::listen::BridgeListener;
    /// use agentacp::client::AgentCommand;
    /// use agentacp::prelude::*;
    ///
    /// // `transport: stdio`, and nothing more.
    /// #[acp_operator(manifest = "tests/operators/test-bridge-stdio-only/ACP.md")]
    /// pub struct Gate;
    ///
    /// impl GateBridge for Gate {
    ///     fn downstream(&self) -> AgentCommand {
    ///         AgentCommand::new("agent")
    ///     }
    /// }
    ///
    /// async fn listen(listener: BridgeListener) {
    ///     let _ = listener.serve(Gate, BridgeOptions::default(), async {}).await;
    /// }
    /// # fn main() {}
    /// ```
    pub async fn serve<B: BridgeOperator + OffersWebSocket>(
        self,
        bridge: B,
        options: BridgeOptions,
        shutdown: impl Future<Output = ()>,
    ) -> Result<()> {
        let (audit, governance) = oversight::<B>(&options)?;
        // One folder for the shims' sockets of every connection, removed when serving ends.
        let (sandbox, _socket_folder) = agent_sandbox::<B>(&options)?;
        let bridge = Arc::new(bridge);
        let options = Arc::new(options);
        let tokens = self.listener.tokens();
        self.listener
            .run(shutdown, move |connection: Upgraded| {
                let (bridge, options, audit, governance, sandbox, tokens) = (
                    bridge.clone(),
                    options.clone(),
                    audit.clone(),
                    governance.clone(),
                    sandbox.clone(),
                    tokens.clone(),
                );
                async move {
                    tracing::debug!(peer = %connection.peer, identity = ?connection.proved.as_ref().map(|(i, _)| i.to_string()), "bridging a connection");
                    let downstream = downstream(bridge.as_ref(), &options, sandbox.as_ref());
                    // Every record of this connection names who it serves.
                    let audit = match &connection.proved {
                        Some((identity, _)) => audit.stamped("aip44", identity.audit_fields()),
                        None => audit,
                    };
                    // As a server does: the identity the request's token proved signs in,
                    // audited before anything is served (nothing is, if that fails).
                    if let Some((identity, _)) = &connection.proved {
                        let login = auth_event(B::spec().id, "auth.login", identity, "upgrade");
                        if let Err(error) = write_ahead(&audit, None, login) {
                            return tracing::error!(peer = %connection.peer, %error, "auditing a sign-in failed; the connection is not served");
                        }
                    }
                    let input = RevocableInput::new(connection.read, tokens.zip(connection.proved), audit.clone(), B::spec().id);
                    let run = relay::run(
                        B::spec(),
                        downstream,
                        (*options).clone(),
                        governance,
                        audit,
                        input,
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

/// How often a bridged connection's token is checked again while the editor sends nothing.
const REVOCATION_RECHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// The editor's input, ended at the first read after the token that opened the connection was
/// revoked (what that read got is dropped), or at the next check while the editor is quiet.
struct RevocableInput<R> {
    input: R,
    /// The store, and the identity and token the upgrade proved (none without tokens).
    proof: Option<(Arc<TokenStore>, (Identity, String))>,
    audit: AuditLog,
    operator: &'static str,
    /// When to check the token while the editor sends nothing (with a token).
    recheck: Option<tokio::time::Interval>,
    revoked: bool,
}

impl<R> RevocableInput<R> {
    fn new(
        input: R,
        proof: Option<(Arc<TokenStore>, (Identity, String))>,
        audit: AuditLog,
        operator: &'static str,
    ) -> Self {
        let recheck = proof.as_ref().map(|_| {
            let mut recheck = tokio::time::interval(REVOCATION_RECHECK);
            recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            recheck
        });
        RevocableInput {
            input,
            proof,
            audit,
            operator,
            recheck,
            revoked: false,
        }
    }

    /// Whether the token no longer proves the identity (gone from the store, or another's).
    fn token_revoked(&self) -> bool {
        self.proof
            .as_ref()
            .is_some_and(|(tokens, (identity, token))| !tokens.still_proves(identity, token))
    }

    /// The token was revoked: audited, and the input ends.
    fn end_revoked(&mut self) {
        self.revoked = true;
        if let Some((_, (identity, _))) = &self.proof {
            tracing::warn!(
                identity = identity.as_str(),
                "the token of a bridged connection was revoked; ending it"
            );
            let event = auth_event(self.operator, "auth.revoked", identity, "token store");
            if let Err(error) = write_ahead(&self.audit, None, event) {
                tracing::error!(%error, "auditing a revoked token failed");
            }
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for RevocableInput<R> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        if self.revoked {
            return Poll::Ready(Ok(()));
        }
        // Each tick due checks the token; the last one pending wakes this read at the next.
        while let Some(recheck) = self.recheck.as_mut()
            && recheck.poll_tick(cx).is_ready()
        {
            if self.token_revoked() {
                self.end_revoked();
                return Poll::Ready(Ok(()));
            }
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.input).poll_read(cx, buf))?;
        if buf.filled().len() > before && self.token_revoked() {
            buf.set_filled(before);
            self.end_revoked();
        }
        Poll::Ready(Ok(()))
    }
}
