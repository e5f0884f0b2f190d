//! The one ordered writer: every outgoing line goes through one channel to one task, so lines
//! reach the peer in the order they were queued.
//!
//! The task writes whatever has queued up since its last write in one go and flushes once per
//! batch, so a burst of updates costs one system call per batch rather than one per message.
//!
//! When the output is stdout and stdout is a pipe ([`stdio::Stdout::line_writer`]), a line
//! sent while nothing is waiting to be written is written by the sender itself, whole, from
//! its own thread (a pipe takes up to `PIPE_BUF` bytes whole or not at all): no wake-up of
//! the writer task. A count of the lines handed to the task and not yet written keeps the
//! order: a sender writes itself only when it is zero.

use std::any::Any;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::stdio::{self, LineWriter, WriteNow};
use crate::sync::lock;

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

/// What every line goes through on its way out once set ([`Outbox::rewrite_slot`]): a
/// connection's dialect, turning the runtime's messages into the peer's protocol version.
pub trait Rewrite: Send + Sync {
    /// The lines `line` becomes for the peer (none, one or several), appended to `out`.
    fn rewrite(&self, line: Vec<u8>, out: &mut Vec<Vec<u8>>);
}

/// A handle for queueing lines; cheap to clone.
#[derive(Clone)]
pub struct Outbox {
    tx: mpsc::Sender<Vec<u8>>,
    direct: Option<Arc<Direct>>,
    /// Shared by every clone: set once, at most.
    rewrite: Arc<OnceLock<Arc<dyn Rewrite>>>,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox")
            .field("direct", &self.direct.is_some())
            .field("rewrites", &self.rewrites())
            .finish_non_exhaustive()
    }
}

/// The rewrite of an [`Outbox`] and all its clones, set at most once, held apart from the
/// outbox itself ([`Outbox::rewrite_slot`]).
#[derive(Clone)]
pub struct RewriteSlot(Arc<OnceLock<Arc<dyn Rewrite>>>);

impl RewriteSlot {
    /// Rewrites every line sent from now on; `false` when a rewrite was set already (it
    /// stays).
    pub fn set(&self, rewrite: Arc<dyn Rewrite>) -> bool {
        self.0.set(rewrite).is_ok()
    }
}

impl std::fmt::Debug for RewriteSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RewriteSlot")
            .field("set", &self.0.get().is_some())
            .finish()
    }
}

/// An [`Outbox`] that does not keep the writer open ([`Outbox::downgrade`]): for a part of the
/// connection that must not outlive its writers (a dialect's seam) yet may write to the peer.
#[derive(Clone)]
pub struct WeakOutbox {
    tx: mpsc::WeakSender<Vec<u8>>,
    direct: Option<Arc<Direct>>,
    rewrite: Arc<OnceLock<Arc<dyn Rewrite>>>,
}

impl std::fmt::Debug for WeakOutbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeakOutbox").finish_non_exhaustive()
    }
}

impl WeakOutbox {
    /// The outbox, while some clone of it is still alive.
    pub fn upgrade(&self) -> Option<Outbox> {
        Some(Outbox {
            tx: self.tx.upgrade()?,
            direct: self.direct.clone(),
            rewrite: self.rewrite.clone(),
        })
    }
}

/// Senders writing lines themselves (stdout as a pipe).
#[derive(Debug)]
struct Direct {
    writer: LineWriter,
    /// Lines handed to the writer task and not yet written. A sender writes itself only when
    /// this is zero, holding the lock while it writes.
    unwritten: Mutex<usize>,
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
        let direct = (&output as &dyn Any)
            .downcast_ref::<stdio::Stdout>()
            .and_then(stdio::Stdout::line_writer)
            .map(|writer| {
                Arc::new(Direct {
                    writer,
                    unwritten: Mutex::new(0),
                })
            });
        let task = tokio::spawn(write_all(rx, output, write_timeout, direct.clone()));
        let rewrite = Arc::default();
        (Outbox { tx, direct, rewrite }, task)
    }

    /// Where this outbox's rewrite is set: from then on every line sent (by any clone) goes
    /// through it first. The slot does not keep the queue open (the writer ends when the last
    /// clone of the outbox is dropped).
    pub fn rewrite_slot(&self) -> RewriteSlot {
        RewriteSlot(self.rewrite.clone())
    }

    /// A handle on this outbox that does not keep its writer open.
    pub fn downgrade(&self) -> WeakOutbox {
        WeakOutbox {
            tx: self.tx.downgrade(),
            direct: self.direct.clone(),
            rewrite: self.rewrite.clone(),
        }
    }

    /// Queues one line (ending with `\n`) as it is, past the rewrite: a line already in the
    /// peer's version (a dialect's own).
    pub async fn send_untranslated(&self, line: Vec<u8>) -> Result<(), Closed> {
        self.send_line(line).await
    }

    /// Whether lines are rewritten on their way out.
    pub fn rewrites(&self) -> bool {
        self.rewrite.get().is_some()
    }

    /// Queues one line (it must end with `\n`), rewritten first when a rewrite is set; waits
    /// while the queue is full. With stdout a pipe and nothing waiting to be written, writes
    /// it at once instead.
    pub async fn send(&self, line: Vec<u8>) -> Result<(), Closed> {
        let Some(rewrite) = self.rewrite.get() else {
            return self.send_line(line).await;
        };
        let mut lines = Vec::new();
        rewrite.rewrite(line, &mut lines);
        for line in lines {
            self.send_line(line).await?;
        }
        Ok(())
    }

    /// Queues one line as it is.
    async fn send_line(&self, line: Vec<u8>) -> Result<(), Closed> {
        let Some(direct) = &self.direct else {
            return self.tx.send(line).await.map_err(|_| Closed);
        };
        {
            let mut unwritten = lock(&direct.unwritten);
            if *unwritten == 0 && !self.tx.is_closed() {
                match direct.writer.try_write_line(&line) {
                    WriteNow::Written => return Ok(()),
                    WriteNow::Later => {}
                    WriteNow::Partly(written) => {
                        // The rest goes next. Nothing is queued, so the queue has room unless
                        // senders hold every place; the line is then lost with the connection.
                        *unwritten += 1;
                        return self.tx.try_send(line[written..].to_vec()).map_err(|_| {
                            *unwritten -= 1;
                            Closed
                        });
                    }
                }
            }
        }
        let place = self.tx.reserve().await.map_err(|_| Closed)?;
        *lock(&direct.unwritten) += 1;
        place.send(line);
        Ok(())
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
    direct: Option<Arc<Direct>>,
) -> std::io::Result<()> {
    // Grown on demand: an idle connection (one of hundreds over WebSocket) holds no batch.
    let mut batch = Vec::new();
    while let Some(first) = rx.recv().await {
        batch.extend_from_slice(&first);
        let mut lines = 1;
        while batch.len() < BATCH_BYTES {
            match rx.try_recv() {
                Ok(line) => {
                    batch.extend_from_slice(&line);
                    lines += 1;
                }
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
        if let Some(direct) = &direct {
            *lock(&direct.unwritten) -= lines;
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

    #[cfg(unix)]
    /// Stdout's writer over the write end of a fresh pipe, and its read end.
    fn pipe_stdout() -> (std::io::PipeReader, std::io::PipeWriter, stdio::Stdout) {
        use std::os::fd::AsFd;
        let (reader, writer) = std::io::pipe().unwrap();
        let out = stdio::writer_for(writer.as_fd(), || stdio::Writer::Blocking(tokio::io::stdout()));
        (reader, writer, out)
    }

    #[cfg(unix)]
    #[tokio::test(flavor = "current_thread")]
    async fn a_line_sent_while_nothing_waits_is_written_by_the_sender_itself() {
        use std::io::Read;
        let (mut reader, writer, out) = pipe_stdout();
        let (outbox, task) = Outbox::start(out, Duration::from_secs(10));
        outbox.send(b"{\"a\":1}\n".to_vec()).await.unwrap();
        // On this one thread the writer task has not run since: the sender wrote the line.
        rustix::fs::fcntl_setfl(&reader, rustix::fs::OFlags::NONBLOCK).unwrap();
        let mut got = [0u8; 64];
        let read = reader.read(&mut got).expect("the line is in the pipe already");
        assert_eq!(&got[..read], b"{\"a\":1}\n");
        drop(outbox);
        task.await.unwrap().unwrap();
        drop(writer);
    }

    #[cfg(unix)]
    /// How long line `n` of a sender is: some longer than `PIPE_BUF`, which always go through
    /// the queue.
    fn padding_of(n: usize) -> usize {
        if n.is_multiple_of(97) { 5000 } else { n % 50 }
    }

    #[cfg(unix)]
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn senders_writing_themselves_and_the_queue_keep_each_senders_order_and_whole_lines() {
        use std::io::Read;
        let (mut reader, writer, out) = pipe_stdout();
        let (outbox, task) = Outbox::start(out, Duration::from_secs(30));
        // A slow reader keeps the pipe full at times, so both ways are taken.
        let collector = std::thread::spawn(move || {
            let mut all = Vec::new();
            let mut chunk = vec![0u8; 1000];
            loop {
                match reader.read(&mut chunk).unwrap() {
                    0 => return all,
                    read => all.extend_from_slice(&chunk[..read]),
                }
            }
        });
        let mut senders = Vec::new();
        for sender in 0..4 {
            let outbox = outbox.clone();
            senders.push(tokio::spawn(async move {
                for n in 0..3000 {
                    let padding = padding_of(n);
                    let line = format!("{sender} {n} {}\n", "x".repeat(padding));
                    outbox.send(line.into_bytes()).await.unwrap();
                }
            }));
        }
        for sender in senders {
            sender.await.unwrap();
        }
        drop(outbox);
        task.await.unwrap().unwrap();
        drop(writer);
        let all = String::from_utf8(collector.join().unwrap()).unwrap();
        let mut next = [0usize; 4];
        for line in all.lines() {
            let mut fields = line.split(' ');
            let sender: usize = fields.next().unwrap().parse().unwrap();
            let n: usize = fields.next().unwrap().parse().unwrap();
            let padding = fields.next().unwrap();
            assert_eq!(n, next[sender], "sender {sender}'s lines out of order");
            assert_eq!(padding.len(), padding_of(n), "a torn line");
            assert!(padding.bytes().all(|b| b == b'x'), "a torn line");
            next[sender] += 1;
        }
        assert_eq!(next, [3000; 4]);
    }
}
