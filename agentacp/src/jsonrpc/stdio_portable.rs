//! The process's stdin and stdout as the protocol channel, off Unix (Windows).
//!
//! tokio's `stdin()` / `stdout()`, which hand every read and write to a blocking thread: the
//! anonymous pipes an editor starts an agent with on Windows cannot be put on the reactor
//! (they are not opened for overlapped I/O), so each line costs a thread hop each way. There
//! is no writer that sends a line from the sender's own thread ([`Stdout::line_writer`] is
//! always `None`): the Unix version's is a pipe's atomic write, which this one does not have.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The process's stdin, for reading the peer's lines.
#[derive(Debug)]
pub struct Stdin(tokio::io::Stdin);

/// The process's stdout, for writing lines to the peer.
#[derive(Debug)]
pub struct Stdout(tokio::io::Stdout);

/// A handle that writes short lines whole from any thread; none exists here (see the module).
#[derive(Debug, Clone)]
pub enum LineWriter {}

pub use super::write_now::WriteNow;

impl LineWriter {
    /// Writes `line` now, whole, or says why not; never waits. (There is no `LineWriter` here.)
    pub fn try_write_line(&self, _line: &[u8]) -> WriteNow {
        match *self {}
    }
}

/// Stdin, read through a blocking thread.
pub fn stdin() -> Stdin {
    Stdin(tokio::io::stdin())
}

/// Stdout, written through a blocking thread.
pub fn stdout() -> Stdout {
    Stdout(tokio::io::stdout())
}

impl Stdin {
    /// Whether reads go through the reactor rather than a blocking thread: never here.
    pub fn is_direct(&self) -> bool {
        false
    }
}

impl Stdout {
    /// Whether writes go through the reactor rather than a blocking thread: never here.
    pub fn is_direct(&self) -> bool {
        false
    }

    /// A handle that writes short lines whole from any thread: `None` here.
    pub fn line_writer(&self) -> Option<LineWriter> {
        None
    }
}

impl AsyncRead for Stdin {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Stdout {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Only flush, as the Unix version and tokio's own stdout do.
        self.poll_flush(cx)
    }
}
