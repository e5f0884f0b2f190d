//! The one ordered writer: every outgoing line goes through one channel to one task, so lines
//! reach the peer in the order they were queued.
//!
//! The task writes whatever has queued up since its last write in one go and flushes once per
//! batch, so a burst of updates costs one system call per batch rather than one per message.

use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// How many lines may wait before senders wait (backpressure).
pub const QUEUE_LINES: usize = 1024;
/// Flush when a batch reaches this size even if more lines are waiting.
const BATCH_BYTES: usize = 256 * 1024;

/// The peer stopped reading (or the writer failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

impl std::fmt::Display for Closed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the connection is closed")
    }
}

impl std::error::Error for Closed {}

/// A handle for queueing lines; cheap to clone.
#[derive(Debug, Clone)]
pub struct Outbox {
    tx: mpsc::Sender<Vec<u8>>,
}

impl Outbox {
    /// Starts the writer task over `output`. The task ends, after writing everything queued,
    /// when every `Outbox` clone is dropped; it returns the first write error, if any. A batch
    /// that the peer does not take within `write_timeout` (it stopped reading but did not
    /// close) ends the task too, so no sender waits forever.
    pub fn start<W>(output: W, write_timeout: Duration) -> (Outbox, JoinHandle<std::io::Result<()>>)
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (tx, rx) = mpsc::channel(QUEUE_LINES);
        (Outbox { tx }, tokio::spawn(write_all(rx, output, write_timeout)))
    }

    /// Queues one line (it must end with `\n`); waits while the queue is full.
    pub async fn send(&self, line: Vec<u8>) -> Result<(), Closed> {
        self.tx.send(line).await.map_err(|_| Closed)
    }

    /// Resolves once the writer task has ended (the peer stopped reading, or a write failed):
    /// nothing sent from then on reaches the peer.
    pub async fn closed(&self) {
        self.tx.closed().await;
    }
}

async fn write_all<W: AsyncWrite + Unpin>(
    mut rx: mpsc::Receiver<Vec<u8>>,
    mut output: W,
    write_timeout: Duration,
) -> std::io::Result<()> {
    // Grown on demand: an idle connection (one of hundreds over WebSocket) holds no batch.
    let mut batch = Vec::new();
    while let Some(first) = rx.recv().await {
        batch.extend_from_slice(&first);
        while batch.len() < BATCH_BYTES {
            match rx.try_recv() {
                Ok(line) => batch.extend_from_slice(&line),
                Err(_) => break,
            }
        }
        let written = tokio::time::timeout(write_timeout, async {
            output.write_all(&batch).await?;
            output.flush().await
        })
        .await
        .unwrap_or_else(|_| {
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the peer took nothing for {write_timeout:?}"),
            ))
        });
        if let Err(error) = written {
            // Dropping the receiver makes every later `send` fail with `Closed`.
            tracing::debug!(%error, "writing to the peer failed");
            return Err(error);
        }
        batch.clear();
    }
    output.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_arrive_in_order_and_everything_is_written_before_the_task_ends() {
        let (reader, writer) = tokio::io::duplex(64);
        let (outbox, task) = Outbox::start(writer, Duration::from_secs(10));
        let collector = tokio::spawn(async move {
            let mut reader = reader;
            let mut all = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut reader, &mut all)
                .await
                .unwrap();
            all
        });
        let mut expected = Vec::new();
        for i in 0..5000 {
            let line = format!("{i}\n").into_bytes();
            expected.extend_from_slice(&line);
            outbox.send(line).await.unwrap();
        }
        drop(outbox);
        task.await.unwrap().unwrap();
        assert_eq!(collector.await.unwrap(), expected);
    }

    #[tokio::test]
    async fn sending_after_the_peer_went_away_fails_instead_of_hanging() {
        let (reader, writer) = tokio::io::duplex(8);
        drop(reader);
        let (outbox, task) = Outbox::start(writer, Duration::from_secs(10));
        // The first write fails; the task ends and later sends report `Closed`.
        let _ = outbox.send(b"0123456789\n".to_vec()).await;
        assert!(task.await.unwrap().is_err());
        assert_eq!(outbox.send(b"x\n".to_vec()).await, Err(Closed));
    }

    #[tokio::test]
    async fn a_peer_that_stops_reading_ends_the_writer_after_the_timeout() {
        // The reader stays open but never reads: the pipe fills up.
        let (_reader, writer) = tokio::io::duplex(16);
        let (outbox, task) = Outbox::start(writer, Duration::from_millis(50));
        let _ = outbox.send(vec![b'x'; 1024]).await;
        let ended = tokio::time::timeout(Duration::from_secs(10), task).await;
        let error = ended.expect("the writer gave up").unwrap().unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
        // Senders now fail instead of waiting.
        let mut closed = false;
        for _ in 0..=QUEUE_LINES {
            if outbox.send(b"y\n".to_vec()).await.is_err() {
                closed = true;
                break;
            }
        }
        assert!(closed);
    }
}
