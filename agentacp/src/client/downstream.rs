//! Where the agent is: a subprocess started from an [`AgentCommand`], or (feature `websocket`)
//! a remote agent dialed with a [`Dial`](crate::websocket::Dial). The client and the bridge
//! open either the same way and get the same two byte streams; nothing else differs.

use std::path::Path;
#[cfg(feature = "websocket")]
use std::pin::Pin;
#[cfg(feature = "websocket")]
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite};

use super::error::ClientError;
use crate::subprocess::{self, AgentCommand, AgentProcess};

/// What we write the agent's input to.
pub(crate) type AgentWriter = Box<dyn AsyncWrite + Unpin + Send>;
/// What we read the agent's output from.
pub(crate) type AgentReader = Box<dyn AsyncRead + Unpin + Send>;

/// How the agent is reached.
#[derive(Debug, Clone)]
pub(crate) enum Downstream {
    /// A subprocess, started and stopped by us.
    Process(AgentCommand),
    /// A remote agent over WebSocket.
    #[cfg(feature = "websocket")]
    Remote(crate::websocket::Dial),
}

impl Downstream {
    /// The agent's working folder, when we start it in one.
    pub(crate) fn working_dir(&self) -> Option<&Path> {
        match self {
            Downstream::Process(command) => command.working_dir(),
            #[cfg(feature = "websocket")]
            Downstream::Remote(_) => None,
        }
    }

    /// The command an [`AuthPolicy`](super::AuthPolicy) sees. A remote agent gets none of our
    /// environment: it is named by its URL, with an empty environment (so `env_var` methods,
    /// which the agent reads from its own environment, are never picked by the default).
    pub(crate) fn command_for_auth(&self) -> AgentCommand {
        match self {
            Downstream::Process(command) => command.clone(),
            #[cfg(feature = "websocket")]
            Downstream::Remote(dial) => AgentCommand::new(&dial.url).env_clear_all(),
        }
    }

    /// Whether the connection was authenticated on the WebSocket upgrade (a bearer token).
    pub(crate) fn token_on_upgrade(&self) -> bool {
        match self {
            Downstream::Process(_) => false,
            #[cfg(feature = "websocket")]
            Downstream::Remote(dial) => dial.token.is_some(),
        }
    }

    /// Starts (or dials) the agent: its handle, and the streams to its input and from its
    /// output. A remote agent that refuses the upgrade is a [`ClientError::Spawn`] whose
    /// error is `PermissionDenied` for `401` / `403` and names the status.
    pub(crate) async fn open(
        &self,
        stderr_lines: usize,
    ) -> Result<(AgentProcess, AgentWriter, AgentReader), ClientError> {
        match self {
            Downstream::Process(command) => {
                let (process, stdin, stdout) = subprocess::spawn(command, stderr_lines).map_err(ClientError::Spawn)?;
                Ok((process, Box::new(stdin), Box::new(stdout)))
            }
            #[cfg(feature = "websocket")]
            Downstream::Remote(dial) => {
                let (read, write, pump) = dial.connect_watched().await.map_err(ClientError::Spawn)?;
                tracing::debug!(url = %dial.url, "connected to a remote agent");
                let process = AgentProcess::remote(&dial.url, stderr_lines, pump);
                Ok((process, Box::new(ShutdownOnDrop(Some(write))), Box::new(read)))
            }
        }
    }
}

/// A writer that shuts down once dropped: a WebSocket's write half does not end the
/// connection by being dropped (the read half shares it), so closing our side — dropping the
/// writer, as a subprocess's stdin is closed — must say so.
#[cfg(feature = "websocket")]
struct ShutdownOnDrop<W: AsyncWrite + Unpin + Send + 'static>(Option<W>);

#[cfg(feature = "websocket")]
impl<W: AsyncWrite + Unpin + Send + 'static> AsyncWrite for ShutdownOnDrop<W> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match self.0.as_mut() {
            Some(inner) => Pin::new(inner).poll_write(cx, buf),
            None => Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into())),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.0.as_mut() {
            Some(inner) => Pin::new(inner).poll_flush(cx),
            None => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.0.as_mut() {
            Some(inner) => Pin::new(inner).poll_shutdown(cx),
            None => Poll::Ready(Ok(())),
        }
    }
}

#[cfg(feature = "websocket")]
impl<W: AsyncWrite + Unpin + Send + 'static> Drop for ShutdownOnDrop<W> {
    fn drop(&mut self) {
        let Some(mut inner) = self.0.take() else { return };
        // Shutting down a pipe's write side does not wait on the peer; bounded all the same.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let shutdown = tokio::io::AsyncWriteExt::shutdown(&mut inner);
                let _ = tokio::time::timeout(std::time::Duration::from_secs(5), shutdown).await;
            });
        }
    }
}
