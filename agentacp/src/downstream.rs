//! Where the agent is: a subprocess started from an [`AgentCommand`], or (feature `websocket`)
//! a remote agent dialed with a [`Dial`](crate::websocket::Dial), over WebSocket or
//! Streamable HTTP. The client and the bridge
//! open either the same way and get the same two byte streams; nothing else differs.

use std::path::Path;
#[cfg(feature = "websocket")]
use std::pin::Pin;
#[cfg(feature = "websocket")]
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite};

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
    /// A remote agent over WebSocket or Streamable HTTP (the URL's scheme picks).
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

    /// The command an `AuthPolicy` sees. A remote agent gets none of our
    /// environment: it is named by its URL, with an empty environment (so `env_var` methods,
    /// which the agent reads from its own environment, are never picked by the default).
    pub(crate) fn command_for_auth(&self) -> AgentCommand {
        match self {
            Downstream::Process(command) => command.clone(),
            #[cfg(feature = "websocket")]
            Downstream::Remote(dial) => AgentCommand::new(&dial.url).env_clear_all(),
        }
    }

    /// Whether the connection was authenticated on the WebSocket upgrade, or on every HTTP
    /// request (a bearer token).
    pub(crate) fn token_on_upgrade(&self) -> bool {
        match self {
            Downstream::Process(_) => false,
            #[cfg(feature = "websocket")]
            Downstream::Remote(dial) => dial.token.is_some(),
        }
    }

    /// Starts (or dials) the agent: its handle, and the streams to its input and from its
    /// output. Failing, an error whose text is a sentence naming the program
    /// (or the URL) and the cause: `cannot start the agent `codex-acp`: no program of that
    /// name on PATH`. A remote agent that refuses the upgrade is `PermissionDenied` for `401`
    /// / `403` and names the status.
    pub(crate) async fn open(&self, stderr_lines: usize) -> std::io::Result<(AgentProcess, AgentWriter, AgentReader)> {
        match self {
            Downstream::Process(command) => {
                let (process, stdin, stdout) =
                    subprocess::spawn(command, stderr_lines).map_err(|error| cannot_start(command, error))?;
                Ok((process, Box::new(stdin), Box::new(stdout)))
            }
            #[cfg(feature = "websocket")]
            Downstream::Remote(dial) => {
                let (read, write, pump) = dial.connect_watched().await?;
                tracing::debug!(url = %dial.url, "connected to a remote agent");
                let process = AgentProcess::remote(&dial.url, stderr_lines, pump);
                Ok((process, Box::new(ShutdownOnDrop(Some(write))), Box::new(read)))
            }
        }
    }
}

/// `error` of starting `command`, as a sentence naming the program and the cause, of the
/// same kind. "No such file" is told apart: no program of that name on the agent's `PATH`, no
/// such file, no working folder, or a script whose interpreter (its `#!` line) is missing.
fn cannot_start(command: &AgentCommand, error: std::io::Error) -> std::io::Error {
    let program = Path::new(command.program());
    // A raw OS error is the `exec`'s own; a sandbox's step already says what failed.
    let cause = match (error.kind(), error.raw_os_error()) {
        (std::io::ErrorKind::NotFound, Some(_)) => {
            // Where the program would be, as the child sees it from its working folder.
            let from_cwd = |path: &Path| {
                command
                    .working_dir()
                    .map_or_else(|| path.to_path_buf(), |cwd| cwd.join(path))
            };
            let found = if program.components().count() > 1 {
                Some(from_cwd(program)).filter(|file| file.is_file())
            } else {
                let path = command.agent_env("PATH").unwrap_or_default();
                std::env::split_paths(&path)
                    .map(|dir| from_cwd(&dir).join(program))
                    .find(|candidate| candidate.is_file())
            };
            match (found, command.working_dir()) {
                (_, Some(cwd)) if !cwd.is_dir() => format!("its working folder {} does not exist", cwd.display()),
                (None, _) if program.components().count() > 1 => "no such file".to_string(),
                (None, _) => "no program of that name on PATH".to_string(),
                (Some(file), _) => format!(
                    "{} exists, but the interpreter its `#!` line names was not found",
                    file.display()
                ),
            }
        }
        (std::io::ErrorKind::PermissionDenied, Some(_)) => format!("{error} (is it an executable file?)"),
        _ => error.to_string(),
    };
    std::io::Error::new(
        error.kind(),
        format!("cannot start the agent `{}`: {cause}", program.display()),
    )
}

/// A writer that shuts down once dropped: a remote connection's write half does not end the
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
