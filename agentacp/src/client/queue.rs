//! The bounded queue that carries a running prompt's updates from the reader task to its
//! [`PromptStream`](super::stream::PromptStream).
//!
//! An update is in the queue as soon as the reader pushes it, but the waiting stream is woken
//! in batches: when [`BATCH`] updates wait, or when the reader has nothing more to read (see
//! [`Flushing`]), or before it waits on anything else. Across threads one wake per update was
//! the reader's main cost; the stream takes everything queued at once.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use tokio::io::{AsyncBufRead, AsyncRead, ReadBuf};

use super::events::Update;
use crate::sync::lock;

/// Updates that wake a waiting stream without waiting for the reader to run dry.
const BATCH: usize = 64;

/// The queue's state, behind one lock.
struct Inner {
    items: VecDeque<Update>,
    capacity: usize,
    /// The stream, waiting for an update.
    receiver: Option<Waker>,
    /// The reader, waiting for room.
    sender: Option<Waker>,
    /// Whether the queue is on its reader's list of queues to flush.
    listed: bool,
    /// The stream was dropped.
    closed: bool,
}

/// The reader's side of one stream's queue (one per running prompt or load).
pub(crate) struct UpdateQueue(Mutex<Inner>);

/// The stream's side: takes the queued updates in batches.
pub(crate) struct Updates {
    queue: Arc<UpdateQueue>,
    taken: VecDeque<Update>,
}

/// A queue of at most `capacity` updates, and its stream's side.
pub(crate) fn queue(capacity: usize) -> (Arc<UpdateQueue>, Updates) {
    let queue = Arc::new(UpdateQueue(Mutex::new(Inner {
        items: VecDeque::new(),
        capacity,
        receiver: None,
        sender: None,
        listed: false,
        closed: false,
    })));
    let updates = Updates {
        queue: Arc::clone(&queue),
        taken: VecDeque::new(),
    };
    (queue, updates)
}

impl UpdateQueue {
    /// Queues `update`, waiting while the queue is full; gives it back if the stream is gone.
    /// A stream left waiting is woken by `flush` (on `flushes`' list) unless a batch is full.
    pub(crate) async fn push(self: &Arc<Self>, update: Update, flushes: &Flushes) -> Result<(), Update> {
        let mut update = Some(update);
        std::future::poll_fn(|cx| {
            let mut inner = lock(&self.0);
            if inner.closed {
                return Poll::Ready(Err(update.take().expect("pushed once")));
            }
            if inner.items.len() >= inner.capacity {
                inner.sender = Some(cx.waker().clone());
                if let Some(receiver) = inner.receiver.take() {
                    receiver.wake();
                }
                return Poll::Pending;
            }
            inner.items.push_back(update.take().expect("pushed once"));
            if inner.receiver.is_some() {
                if inner.items.len() >= BATCH {
                    if let Some(waker) = inner.receiver.take() {
                        waker.wake();
                    }
                } else if !inner.listed {
                    inner.listed = true;
                    lock(&flushes.0).push(Arc::clone(self));
                }
            }
            Poll::Ready(Ok(()))
        })
        .await
    }

    /// Wakes the stream if it waits.
    fn flush(&self) {
        let mut inner = lock(&self.0);
        inner.listed = false;
        if let Some(waker) = inner.receiver.take() {
            waker.wake();
        }
    }
}

impl Updates {
    /// The next update, if one is queued; otherwise the stream is woken when one is.
    pub(crate) fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Update>> {
        if self.taken.is_empty() {
            let mut inner = lock(&self.queue.0);
            std::mem::swap(&mut inner.items, &mut self.taken);
            if self.taken.is_empty() {
                inner.receiver = Some(cx.waker().clone());
                return Poll::Pending;
            }
            if let Some(waker) = inner.sender.take() {
                waker.wake();
            }
        }
        Poll::Ready(self.taken.pop_front())
    }
}

impl Drop for Updates {
    fn drop(&mut self) {
        let mut inner = lock(&self.queue.0);
        inner.closed = true;
        inner.items.clear();
        if let Some(waker) = inner.sender.take() {
            waker.wake();
        }
    }
}

/// The queues of one connection whose stream waits for updates already queued.
#[derive(Default)]
pub(crate) struct Flushes(Mutex<Vec<Arc<UpdateQueue>>>);

impl Flushes {
    /// Wakes every stream waiting for updates already queued.
    pub(crate) fn flush(&self) {
        let queues = std::mem::take(&mut *lock(&self.0));
        for queue in queues {
            queue.flush();
        }
    }
}

/// The agent's output, read through: whenever a read would wait, the streams are woken first.
pub(crate) struct Flushing<R> {
    reader: R,
    flushes: Arc<Flushes>,
}

impl<R> Flushing<R> {
    /// `reader`, flushing `flushes` before it waits.
    pub(crate) fn new(reader: R, flushes: Arc<Flushes>) -> Self {
        Flushing { reader, flushes }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Flushing<R> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.reader).poll_read(cx, buf);
        if polled.is_pending() {
            this.flushes.flush();
        }
        polled
    }
}

impl<R: AsyncBufRead + Unpin> AsyncBufRead for Flushing<R> {
    fn poll_fill_buf(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<&[u8]>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.reader).poll_fill_buf(cx);
        if polled.is_pending() {
            this.flushes.flush();
        }
        polled
    }

    fn consume(mut self: Pin<&mut Self>, amt: usize) {
        Pin::new(&mut self.reader).consume(amt);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    use super::*;

    /// Counts its wakes.
    #[derive(Default)]
    struct Counter(AtomicUsize);

    impl Wake for Counter {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn update(n: usize) -> Update {
        Update::Other(serde_json::json!(n))
    }

    #[tokio::test]
    async fn a_waiting_stream_is_woken_by_a_flush_or_a_full_batch_and_reads_in_order() {
        let (queue, mut updates) = super::queue(1024);
        let flushes = Flushes::default();
        let counter = Arc::new(Counter::default());
        let waker = Waker::from(Arc::clone(&counter));
        let mut cx = Context::from_waker(&waker);
        assert!(updates.poll_recv(&mut cx).is_pending());
        queue.push(update(0), &flushes).await.unwrap();
        assert_eq!(counter.0.load(Ordering::SeqCst), 0, "woken before a flush");
        flushes.flush();
        assert_eq!(counter.0.load(Ordering::SeqCst), 1, "not woken by the flush");
        assert_eq!(updates.poll_recv(&mut cx), Poll::Ready(Some(update(0))));
        assert!(updates.poll_recv(&mut cx).is_pending());
        for n in 1..=BATCH {
            queue.push(update(n), &flushes).await.unwrap();
        }
        assert_eq!(counter.0.load(Ordering::SeqCst), 2, "not woken by a full batch");
        for n in 1..=BATCH {
            assert_eq!(updates.poll_recv(&mut cx), Poll::Ready(Some(update(n))));
        }
    }

    #[tokio::test]
    async fn a_full_queue_waits_for_the_stream_and_a_dropped_stream_gives_the_update_back() {
        let (queue, mut updates) = super::queue(2);
        let flushes = Flushes::default();
        queue.push(update(0), &flushes).await.unwrap();
        queue.push(update(1), &flushes).await.unwrap();
        let pusher = {
            let queue = Arc::clone(&queue);
            tokio::spawn(async move { queue.push(update(2), &Flushes::default()).await })
        };
        tokio::task::yield_now().await;
        assert!(!pusher.is_finished(), "pushed into a full queue");
        let next = std::future::poll_fn(|cx| updates.poll_recv(cx));
        assert_eq!(next.await, Some(update(0)));
        assert!(pusher.await.unwrap().is_ok());
        drop(updates);
        assert_eq!(queue.push(update(3), &flushes).await, Err(update(3)));
    }
}
