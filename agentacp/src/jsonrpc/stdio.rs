//! The process's stdin and stdout as the protocol channel.
//!
//! Editors start agents with pipes (Zed, JetBrains, Python's asyncio) or Unix stream sockets
//! (Node's `child_process`) as stdin and stdout. Those are read and written here directly,
//! non-blocking, on tokio's reactor: a line reaches the peer with one system call from the
//! writer task. Anything else (a terminal, a file, `/dev/null`) goes through tokio's
//! `stdin()` / `stdout()`, which hand every read and write to a blocking thread, a hop that
//! costs a thread wake-up each way.
//!
//! Non-blocking mode belongs to the open file, which a parent shell may share; it is set back
//! to what it was when the stream is dropped.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use rustix::fs::{FileType, OFlags};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tokio::net::unix::pipe;

/// What a standard stream is, as far as reading and writing it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// A pipe (FIFO).
    Pipe,
    /// A Unix-domain stream socket.
    UnixSocket,
    /// Anything else: a terminal, a file, a character device, another kind of socket.
    Other,
}

impl StreamKind {
    /// What `fd` is.
    pub fn of(fd: BorrowedFd<'_>) -> StreamKind {
        let Ok(stat) = rustix::fs::fstat(fd) else {
            return StreamKind::Other;
        };
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Fifo => StreamKind::Pipe,
            FileType::Socket if is_unix_stream(fd) => StreamKind::UnixSocket,
            _ => StreamKind::Other,
        }
    }
}

fn is_unix_stream(fd: BorrowedFd<'_>) -> bool {
    let stream = rustix::net::sockopt::socket_type(fd).is_ok_and(|kind| kind == rustix::net::SocketType::STREAM);
    let unix =
        rustix::net::getsockname(fd).is_ok_and(|address| address.address_family() == rustix::net::AddressFamily::UNIX);
    stream && unix
}

/// Sets a file's flags back to what they were when it was made non-blocking.
#[derive(Debug)]
struct RestoreFlags {
    fd: OwnedFd,
    flags: OFlags,
}

impl Drop for RestoreFlags {
    fn drop(&mut self) {
        let _ = rustix::fs::fcntl_setfl(&self.fd, self.flags);
    }
}

/// A copy of `fd` and a guard that restores its file's flags; `None` when it cannot be had,
/// or when there is no tokio runtime to register the copy with (one with IO enabled is
/// assumed, as for the rest of the runtime).
fn duplicate(fd: BorrowedFd<'_>) -> Option<(OwnedFd, RestoreFlags)> {
    tokio::runtime::Handle::try_current().ok()?;
    let flags = rustix::fs::fcntl_getfl(fd).ok()?;
    let copy = fd.try_clone_to_owned().ok()?;
    let guard = fd.try_clone_to_owned().ok()?;
    Some((copy, RestoreFlags { fd: guard, flags }))
}

/// The process's stdin, for reading the peer's lines.
#[derive(Debug)]
pub struct Stdin {
    inner: Reader,
    // Dropped after `inner`: the reactor lets go of the file first.
    _restore: Option<RestoreFlags>,
}

#[derive(Debug)]
enum Reader {
    Pipe(pipe::Receiver),
    Socket(UnixStream),
    Blocking(tokio::io::Stdin),
}

/// The process's stdout, for writing lines to the peer.
#[derive(Debug)]
pub struct Stdout {
    inner: Writer,
    _restore: Option<RestoreFlags>,
}

#[derive(Debug)]
pub(crate) enum Writer {
    // Shared with the senders that write whole lines themselves (`LineWriter`).
    Pipe(Arc<pipe::Sender>),
    Socket(UnixStream),
    /// tokio's stdout, through a blocking thread.
    Blocking(tokio::io::Stdout),
}

/// Stdout as a pipe, shared so that a sender can write a short line itself, from its own
/// thread, when nothing else is waiting to be written ([`Outbox`](super::outbox::Outbox)
/// does). A pipe takes a write of up to `PIPE_BUF` bytes whole or not at all, so a line
/// written so never tears.
#[derive(Debug, Clone)]
pub struct LineWriter(Arc<pipe::Sender>);

pub use super::write_now::WriteNow;

impl LineWriter {
    /// Writes `line` now, whole, or says why not; never waits.
    pub fn try_write_line(&self, line: &[u8]) -> WriteNow {
        if line.len() > rustix::pipe::PIPE_BUF {
            return WriteNow::Later;
        }
        // The system call itself, not tokio's `try_write`: that one would not even try until
        // the reactor has seen the pipe writable, which it learns only when the writer task polls.
        match rustix::io::write(&*self.0, line) {
            Ok(written) if written == line.len() => WriteNow::Written,
            Ok(0) | Err(_) => WriteNow::Later,
            Ok(written) => WriteNow::Partly(written),
        }
    }
}

/// Stdin, read on the reactor when it is a pipe or a Unix stream socket (called outside a
/// tokio runtime: through a blocking thread).
pub fn stdin() -> Stdin {
    reader_for(io::stdin().as_fd(), || Reader::Blocking(tokio::io::stdin()))
}

/// Stdout, written on the reactor when it is a pipe or a Unix stream socket (called outside a
/// tokio runtime: through a blocking thread).
pub fn stdout() -> Stdout {
    writer_for(io::stdout().as_fd(), || Writer::Blocking(tokio::io::stdout()))
}

fn reader_for(fd: BorrowedFd<'_>, blocking: impl FnOnce() -> Reader) -> Stdin {
    let reader = on_reactor(fd, |copy, kind| match kind {
        StreamKind::Pipe => pipe::Receiver::from_owned_fd(copy).ok().map(Reader::Pipe),
        StreamKind::UnixSocket => unix_stream(copy).map(Reader::Socket),
        StreamKind::Other => None,
    });
    let (inner, _restore) = reader.map_or_else(|| (blocking(), None), |(reader, restore)| (reader, Some(restore)));
    Stdin { inner, _restore }
}

/// `fd` as [`Stdout`] is stdout: through the reactor when it is a pipe or a socket.
pub(crate) fn writer_for(fd: BorrowedFd<'_>, blocking: impl FnOnce() -> Writer) -> Stdout {
    let writer = on_reactor(fd, |copy, kind| match kind {
        StreamKind::Pipe => pipe::Sender::from_owned_fd(copy)
            .ok()
            .map(|pipe| Writer::Pipe(Arc::new(pipe))),
        StreamKind::UnixSocket => unix_stream(copy).map(Writer::Socket),
        StreamKind::Other => None,
    });
    let (inner, _restore) = writer.map_or_else(|| (blocking(), None), |(writer, restore)| (writer, Some(restore)));
    Stdout { inner, _restore }
}

/// `open` given a copy of `fd` and what `fd` is, and the guard that restores its flags;
/// `None` when `fd` cannot be read or written on the reactor.
fn on_reactor<T>(fd: BorrowedFd<'_>, open: impl FnOnce(OwnedFd, StreamKind) -> Option<T>) -> Option<(T, RestoreFlags)> {
    let (copy, restore) = duplicate(fd)?;
    Some((open(copy, StreamKind::of(fd))?, restore))
}

fn unix_stream(fd: OwnedFd) -> Option<UnixStream> {
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream.set_nonblocking(true).ok()?;
    UnixStream::from_std(stream).ok()
}

impl Stdin {
    /// Whether reads go through the reactor rather than a blocking thread.
    pub fn is_direct(&self) -> bool {
        !matches!(self.inner, Reader::Blocking(_))
    }
}

impl Stdout {
    /// Whether writes go through the reactor rather than a blocking thread.
    pub fn is_direct(&self) -> bool {
        !matches!(self.inner, Writer::Blocking(_))
    }

    /// When stdout is a pipe: a handle that writes short lines whole from any thread.
    pub fn line_writer(&self) -> Option<LineWriter> {
        match &self.inner {
            Writer::Pipe(pipe) => Some(LineWriter(pipe.clone())),
            _ => None,
        }
    }
}

impl AsyncRead for Stdin {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match &mut self.inner {
            Reader::Pipe(pipe) => Pin::new(pipe).poll_read(cx, buf),
            Reader::Socket(socket) => Pin::new(socket).poll_read(cx, buf),
            Reader::Blocking(stdin) => Pin::new(stdin).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stdout {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().inner {
            Writer::Pipe(pipe) => loop {
                ready!(pipe.poll_write_ready(cx))?;
                match pipe.try_write(buf) {
                    Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
                    written => return Poll::Ready(written),
                }
            },
            Writer::Socket(socket) => Pin::new(socket).poll_write(cx, buf),
            Writer::Blocking(stdout) => Pin::new(stdout).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().inner {
            Writer::Pipe(_) => Poll::Ready(Ok(())),
            Writer::Socket(socket) => Pin::new(socket).poll_flush(cx),
            Writer::Blocking(stdout) => Pin::new(stdout).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Shutting a socket down would end the peer's input while fd 1 is still ours; only
        // flush, as tokio's own stdout does.
        self.poll_flush(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipes_and_unix_stream_sockets_are_told_apart_from_files() {
        let (reader, writer) = std::io::pipe().unwrap();
        assert_eq!(StreamKind::of(reader.as_fd()), StreamKind::Pipe);
        assert_eq!(StreamKind::of(writer.as_fd()), StreamKind::Pipe);
        let (left, _right) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(StreamKind::of(left.as_fd()), StreamKind::UnixSocket);
        let (datagram, _other) = std::os::unix::net::UnixDatagram::pair().unwrap();
        assert_eq!(StreamKind::of(datagram.as_fd()), StreamKind::Other);
        let file = tempfile::tempfile().unwrap();
        assert_eq!(StreamKind::of(file.as_fd()), StreamKind::Other);
    }

    #[tokio::test]
    async fn a_pipe_is_written_directly_and_made_blocking_again_when_dropped() {
        use std::io::Read;
        use tokio::io::AsyncWriteExt;

        let (mut reader, writer) = std::io::pipe().unwrap();
        let mut out = writer_for(writer.as_fd(), || Writer::Blocking(tokio::io::stdout()));
        assert!(out.is_direct());
        assert!(rustix::fs::fcntl_getfl(&writer).unwrap().contains(OFlags::NONBLOCK));
        out.write_all(b"{}\n").await.unwrap();
        out.flush().await.unwrap();
        drop(out);
        assert!(!rustix::fs::fcntl_getfl(&writer).unwrap().contains(OFlags::NONBLOCK));
        drop(writer);
        let mut line = String::new();
        reader.read_to_string(&mut line).unwrap();
        assert_eq!(line, "{}\n");
    }

    #[tokio::test]
    async fn a_socket_is_read_directly_and_a_file_through_a_blocking_thread() {
        use std::io::Write;
        use tokio::io::AsyncReadExt;

        let (left, mut right) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut input = reader_for(left.as_fd(), || Reader::Blocking(tokio::io::stdin()));
        assert!(input.is_direct());
        right.write_all(b"hello\n").unwrap();
        drop(right);
        let mut text = String::new();
        input.read_to_string(&mut text).await.unwrap();
        assert_eq!(text, "hello\n");

        let file = tempfile::tempfile().unwrap();
        let out = writer_for(file.as_fd(), || Writer::Blocking(tokio::io::stdout()));
        assert!(!out.is_direct());
        assert!(!rustix::fs::fcntl_getfl(&file).unwrap().contains(OFlags::NONBLOCK));
    }

    #[test]
    fn outside_a_runtime_a_pipe_goes_through_a_blocking_thread_instead_of_panicking() {
        let (_reader, writer) = std::io::pipe().unwrap();
        let out = writer_for(writer.as_fd(), || Writer::Blocking(tokio::io::stdout()));
        assert!(!out.is_direct());
        assert!(!rustix::fs::fcntl_getfl(&writer).unwrap().contains(OFlags::NONBLOCK));
    }
}
