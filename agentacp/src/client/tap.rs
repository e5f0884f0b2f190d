//! The wire tap: a view of every message between the client and the agent, for transcripts
//! and debugging (`ClientOptions::wire_tap`).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;

/// Which way a message went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From us to the agent (its stdin).
    ToAgent,
    /// From the agent to us (its stdout).
    FromAgent,
}

/// Sees every message on the wire: one line of JSON without its newline. Messages to the agent
/// are seen as they are written, messages from it as they are read, so an answer is never seen
/// before its request. It runs on the connection's tasks: keep it quick.
pub type WireTap = Arc<dyn Fn(Direction, &[u8]) + Send + Sync>;

/// Shows the tap each line written through it, once the agent's stdin took the whole line.
pub(crate) struct TapWriter<W> {
    inner: W,
    tap: WireTap,
    /// The start of a line whose end has not been written yet.
    partial: Vec<u8>,
}

impl<W> TapWriter<W> {
    pub(crate) fn new(inner: W, tap: WireTap) -> Self {
        TapWriter {
            inner,
            tap,
            partial: Vec::new(),
        }
    }

    fn saw(&mut self, mut written: &[u8]) {
        while let Some(end) = written.iter().position(|&byte| byte == b'\n') {
            let (line, rest) = written.split_at(end);
            if self.partial.is_empty() {
                (self.tap)(Direction::ToAgent, trim_cr(line));
            } else {
                self.partial.extend_from_slice(line);
                (self.tap)(Direction::ToAgent, trim_cr(&self.partial));
                self.partial.clear();
            }
            written = &rest[1..];
        }
        self.partial.extend_from_slice(written);
    }
}

/// `line` without a trailing `\r`.
fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

impl<W: AsyncWrite + Unpin> AsyncWrite for TapWriter<W> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(written)) = polled {
            self.saw(&buf[..written]);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tokio::io::AsyncWriteExt;

    use super::*;

    #[tokio::test]
    async fn lines_split_across_writes_are_seen_whole_and_once() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let tap: WireTap = {
            let seen = Arc::clone(&seen);
            Arc::new(move |direction, line: &[u8]| {
                seen.lock()
                    .unwrap()
                    .push((direction, String::from_utf8_lossy(line).into_owned()))
            })
        };
        let mut writer = TapWriter::new(Vec::new(), tap);
        writer.write_all(b"{\"a\":1}\n{\"b\"").await.unwrap();
        writer.write_all(b":2}\r\n\n{\"c\":3}").await.unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            vec![
                (Direction::ToAgent, "{\"a\":1}".to_string()),
                (Direction::ToAgent, "{\"b\":2}".to_string()),
                (Direction::ToAgent, String::new()),
            ],
            "a line is shown when its newline is written, not before"
        );
        assert_eq!(
            writer.inner, b"{\"a\":1}\n{\"b\":2}\r\n\n{\"c\":3}",
            "the bytes pass unchanged"
        );
    }
}
