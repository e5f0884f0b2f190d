//! Telling a WebSocket upgrade from a Streamable HTTP request before either is served: the
//! request head is read ([`read_head`]), looked at with `httparse`
//! ([`is_websocket_upgrade`]), and handed on unread ([`Rewind`]) to the WebSocket handshake
//! or to hyper.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// The most bytes read to find the end of a request head (a longer head goes to hyper, which
/// refuses it).
const MAX_HEAD_BYTES: usize = 16 * 1024;

/// The most headers looked at.
const MAX_HEADERS: usize = 100;

/// A stream of either side of the endpoint, boxed.
pub(crate) trait Io: AsyncRead + AsyncWrite + Send + Unpin {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin> Io for T {}

/// Reads from `stream` until the end of a request head (an empty line), its end, or
/// [`MAX_HEAD_BYTES`]; what was read.
pub(crate) async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    while !head.windows(4).any(|four| four == b"\r\n\r\n") && head.len() < MAX_HEAD_BYTES {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            break;
        }
        head.extend_from_slice(&chunk[..read]);
    }
    Ok(head)
}

/// Whether `head` is a complete HTTP/1.1 `GET` asking for `Upgrade: websocket`.
pub(crate) fn is_websocket_upgrade(head: &[u8]) -> bool {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    if !matches!(request.parse(head), Ok(httparse::Status::Complete(_))) {
        return false;
    }
    request.method == Some("GET")
        && request.headers.iter().any(|header| {
            header.name.eq_ignore_ascii_case("upgrade") && names_websocket(&String::from_utf8_lossy(header.value))
        })
}

/// Whether an `Upgrade` header's value names `websocket` among its protocols.
pub(crate) fn names_websocket(upgrade: &str) -> bool {
    upgrade
        .split(',')
        .any(|protocol| protocol.trim().eq_ignore_ascii_case("websocket"))
}

/// A stream whose first bytes, already read, are read again.
pub(crate) struct Rewind<S> {
    prefix: Vec<u8>,
    at: usize,
    inner: S,
}

impl<S> Rewind<S> {
    /// `inner`, with `prefix` read first.
    pub(crate) fn new(prefix: Vec<u8>, inner: S) -> Self {
        Rewind { prefix, at: 0, inner }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.at < this.prefix.len() {
            let left = &this.prefix[this.at..];
            let take = left.len().min(buf.remaining());
            buf.put_slice(&left[..take]);
            this.at += take;
            if this.at == this.prefix.len() {
                this.prefix = Vec::new();
                this.at = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_complete_get_asking_for_websocket_is_an_upgrade() {
        let upgrade = b"GET /acp HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: WebSocket\r\n\r\n";
        assert!(is_websocket_upgrade(upgrade));
        assert!(!is_websocket_upgrade(b"GET /acp HTTP/1.1\r\nHost: x\r\n\r\n"));
        assert!(!is_websocket_upgrade(
            b"POST /acp HTTP/1.1\r\nUpgrade: websocket\r\n\r\n"
        ));
        assert!(!is_websocket_upgrade(b"GET /acp HTTP/1.1\r\nUpgrade: websocket\r\n"));
        assert!(!is_websocket_upgrade(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));
    }

    #[tokio::test]
    async fn what_was_read_is_read_again_then_the_rest() {
        let mut stream = Rewind::new(b"head".to_vec(), &b" and body"[..]);
        let mut all = String::new();
        stream.read_to_string(&mut all).await.unwrap();
        assert_eq!(all, "head and body");
    }
}
