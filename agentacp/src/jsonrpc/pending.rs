//! Requests we sent and are waiting on: each gets a fresh numeric id and a slot its response
//! fills. When the peer goes away every slot fails at once, so no await hangs. A request we
//! stop waiting for before its answer came (a timeout, a cancel, the caller dropped the
//! future) is cancelled at the peer with `$/cancel_request`, so it can stop working on it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use serde::Serialize;
use serde_json::value::RawValue;
use tokio::sync::oneshot;

use super::outbox::Outbox;
use super::{Id, RpcError};
use crate::sync::lock;

/// Why an outbound request has no result.
#[derive(Debug)]
pub enum RequestFailure {
    /// The peer answered with an error.
    Rpc(RpcError),
    /// The connection closed before the answer came.
    Closed,
    /// No answer within the time allowed.
    TimedOut,
}

type Slot = oneshot::Sender<Result<Box<RawValue>, RpcError>>;

/// The table of requests waiting for an answer.
#[derive(Debug, Default)]
pub struct Pending {
    next_id: AtomicI64,
    slots: Mutex<Option<HashMap<i64, Slot>>>,
}

/// A request waiting for its answer.
#[derive(Debug)]
pub struct Waiting {
    /// The id to send it with.
    pub id: Id,
    receiver: oneshot::Receiver<Result<Box<RawValue>, RpcError>>,
}

impl Pending {
    /// An empty table, open for requests.
    pub fn new() -> Self {
        Pending::starting_at(0)
    }

    /// An empty table whose ids count from `first` (to keep them apart from another
    /// sender's on the same connection).
    pub fn starting_at(first: i64) -> Self {
        Pending {
            next_id: AtomicI64::new(first),
            slots: Mutex::new(Some(HashMap::new())),
        }
    }

    /// Reserves an id; `None` once the connection has closed.
    pub fn register(&self) -> Option<Waiting> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (sender, receiver) = oneshot::channel();
        let mut slots = lock(&self.slots);
        slots.as_mut()?.insert(id, sender);
        Some(Waiting {
            id: Id::Number(id),
            receiver,
        })
    }

    /// Delivers an answer; `false` when no request has that id (a stray or repeated answer).
    pub fn resolve(&self, id: &Id, outcome: Result<Box<RawValue>, RpcError>) -> bool {
        let Id::Number(number) = id else { return false };
        let slot = {
            let mut slots = lock(&self.slots);
            slots.as_mut().and_then(|slots| slots.remove(number))
        };
        match slot {
            Some(slot) => slot.send(outcome).is_ok(),
            None => false,
        }
    }

    /// Forgets a request (after a timeout or when the caller gave up); `true` when it was
    /// still waiting for its answer.
    pub fn forget(&self, id: &Id) -> bool {
        let Id::Number(number) = id else { return false };
        let mut slots = lock(&self.slots);
        slots.as_mut().and_then(|slots| slots.remove(number)).is_some()
    }

    /// Fails every waiting request and refuses new ones: the peer is gone.
    pub fn close(&self) {
        lock(&self.slots).take();
    }

    /// Sends a request through `outbox` and waits for its answer, at most `timeout`. The slot
    /// is forgotten however this ends (answer, timeout, or the caller dropped the future); when
    /// no answer came, the peer is told (`$/cancel_request`).
    pub async fn call(
        &self,
        outbox: &Outbox,
        method: &str,
        params: &impl Serialize,
        timeout: Duration,
    ) -> Result<Box<RawValue>, RequestFailure> {
        self.call_unless(outbox, method, params, timeout, std::future::pending())
            .await
    }

    /// [`call`](Self::call), unless `cancelled` completes first: then the peer is told
    /// (`$/cancel_request` naming the request) and the call fails with `-32800`, whatever
    /// the peer answers later. A timeout tells the peer the same way, and so does dropping
    /// this future before the answer came (from a task of its own, since a drop cannot wait).
    pub async fn call_unless(
        &self,
        outbox: &Outbox,
        method: &str,
        params: &impl Serialize,
        timeout: Duration,
        cancelled: impl Future<Output = ()>,
    ) -> Result<Box<RawValue>, RequestFailure> {
        self.call_reporting(outbox, method, params, timeout, cancelled, || {})
            .await
    }

    /// [`call_unless`](Self::call_unless), calling `sent` once the request is in `outbox`
    /// (not when it could not be put there): a line the caller sends after that reaches the
    /// peer after the request.
    pub async fn call_reporting(
        &self,
        outbox: &Outbox,
        method: &str,
        params: &impl Serialize,
        timeout: Duration,
        cancelled: impl Future<Output = ()>,
        sent: impl FnOnce(),
    ) -> Result<Box<RawValue>, RequestFailure> {
        let waiting = self.register().ok_or(RequestFailure::Closed)?;
        let id = waiting.id.clone();
        let mut forget = Forget {
            pending: self,
            id: id.clone(),
            outbox: None,
        };
        if outbox.send(super::encode_request(&id, method, params)).await.is_err() {
            return Err(RequestFailure::Closed);
        }
        // Sent: from now on the peer works on it, and a drop tells it to stop.
        forget.outbox = Some(outbox);
        sent();
        let failure = tokio::select! {
            answer = tokio::time::timeout(timeout, waiting.answer()) => match answer {
                Ok(answer) => return answer,
                Err(_) => RequestFailure::TimedOut,
            },
            () = cancelled => RequestFailure::Rpc(RpcError::new(
                super::codes::REQUEST_CANCELLED,
                format!("`{method}` was cancelled"),
            )),
        };
        forget.outbox = None;
        if self.forget(&id) {
            // The request fails either way; a closed connection needs no telling.
            let _ = outbox.send(cancel_request(&id)).await;
        }
        Err(failure)
    }
}

/// The `$/cancel_request` line that cancels our request `id`.
fn cancel_request(id: &Id) -> Vec<u8> {
    super::encode_notification(CANCEL_REQUEST, &CancelRequest { request_id: id })
}

/// The notification that cancels a request (either way).
pub const CANCEL_REQUEST: &str = "$/cancel_request";

/// The params of [`CANCEL_REQUEST`].
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CancelRequest<'a> {
    request_id: &'a Id,
}

/// The request a [`CANCEL_REQUEST`] names (its params); `None` when they name none.
pub fn cancelled_request(params: Option<&RawValue>) -> Option<Id> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Named {
        request_id: Id,
    }
    serde_json::from_str::<Named>(params.map_or("null", RawValue::get))
        .ok()
        .map(|named| named.request_id)
}

/// Forgets a request however its call ends; with `outbox` set (the request was sent, and its
/// call did not end in its own way), a request still waiting is cancelled at the peer.
struct Forget<'a> {
    pending: &'a Pending,
    id: Id,
    outbox: Option<&'a Outbox>,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        if !self.pending.forget(&self.id) {
            return;
        }
        let Some(outbox) = self.outbox else { return };
        // Dropped while waiting: tell the peer from a task of its own (outside a runtime, as
        // at its shutdown, nothing can be sent any more).
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (outbox, cancel) = (outbox.clone(), cancel_request(&self.id));
            runtime.spawn(async move {
                let _ = outbox.send(cancel).await;
            });
        }
    }
}

impl Waiting {
    /// Waits for the answer.
    pub async fn answer(self) -> Result<Box<RawValue>, RequestFailure> {
        match self.receiver.await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(error)) => Err(RequestFailure::Rpc(error)),
            Err(_) => Err(RequestFailure::Closed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn answers_reach_their_request_once() {
        let pending = Pending::new();
        let a = pending.register().unwrap();
        let b = pending.register().unwrap();
        assert_ne!(a.id, b.id);
        let result = RawValue::from_string("1".into()).unwrap();
        assert!(pending.resolve(&b.id, Ok(result.clone())));
        assert!(
            !pending.resolve(&b.id, Ok(result)),
            "a repeated answer is not delivered twice"
        );
        assert_eq!(b.answer().await.unwrap().get(), "1");
        pending.close();
        assert!(matches!(a.answer().await, Err(RequestFailure::Closed)));
        assert!(pending.register().is_none());
    }

    /// The lines the peer got, once every sender is gone.
    async fn lines_of(theirs: tokio::io::DuplexStream) -> Vec<serde_json::Value> {
        let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(theirs));
        let mut read = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            read.push(serde_json::from_str(&line).unwrap());
        }
        read
    }

    /// A call that times out, and one whose future is dropped while it waits, cancel their
    /// request at the peer; an answered call tells the peer nothing more.
    #[tokio::test]
    async fn a_request_given_up_on_is_cancelled_at_the_peer_and_an_answered_one_is_not() {
        let (ours, theirs) = tokio::io::duplex(4096);
        let (outbox, writer) = Outbox::start(ours, Duration::from_secs(5));
        let pending = Pending::starting_at(1);
        let params = serde_json::json!({});
        let timed_out = pending.call(&outbox, "slow", &params, Duration::from_millis(1)).await;
        assert!(matches!(timed_out, Err(RequestFailure::TimedOut)), "{timed_out:?}");
        // Dropped once its request is sent (the peer answers nothing).
        {
            let call = pending.call(&outbox, "dropped", &params, Duration::from_secs(30));
            tokio::pin!(call);
            assert!(futures_poll_once(call.as_mut()).await.is_none(), "still waiting");
        }
        // The drop's cancel is sent by a task of its own: let it run.
        tokio::task::yield_now().await;
        let answered = pending.call(&outbox, "answered", &params, Duration::from_secs(30));
        let answer = async {
            tokio::task::yield_now().await;
            assert!(pending.resolve(&Id::Number(3), Ok(RawValue::from_string("{}".into()).unwrap())));
        };
        let (answered, ()) = tokio::join!(answered, answer);
        assert!(answered.is_ok(), "{answered:?}");
        drop(outbox);
        writer.await.unwrap().unwrap();
        let sent: Vec<String> = lines_of(theirs)
            .await
            .iter()
            .map(|line| match line["method"].as_str() {
                Some(CANCEL_REQUEST) => format!("cancel {}", line["params"]["requestId"]),
                Some(method) => format!("{method} {}", line["id"]),
                None => format!("{line}"),
            })
            .collect();
        assert_eq!(sent, ["slow 1", "cancel 1", "dropped 2", "cancel 2", "answered 3"]);
    }

    /// Polls `future` once: its output if it is ready.
    async fn futures_poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Option<F::Output> {
        let mut future = Some(future);
        std::future::poll_fn(|cx| {
            let polled = future.take().expect("polled once").poll(cx);
            std::task::Poll::Ready(match polled {
                std::task::Poll::Ready(output) => Some(output),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }

    #[tokio::test]
    async fn a_call_cancelled_before_its_answer_tells_the_peer_and_forgets_the_request() {
        let (ours, theirs) = tokio::io::duplex(4096);
        let (outbox, _writer) = Outbox::start(ours, Duration::from_secs(5));
        let pending = Pending::starting_at(40);
        let (cancel, cancelled) = tokio::sync::oneshot::channel::<()>();
        let params = serde_json::json!({});
        let call = pending.call_unless(&outbox, "mcp/message", &params, Duration::from_secs(30), async {
            let _ = cancelled.await;
        });
        let peer = async {
            let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(theirs));
            let request = lines.next_line().await.unwrap().unwrap();
            cancel.send(()).unwrap();
            let told = lines.next_line().await.unwrap().unwrap();
            (request, told)
        };
        let (answer, (request, told)) = tokio::join!(call, peer);
        let Err(RequestFailure::Rpc(error)) = answer else {
            panic!("cancelled: {answer:?}")
        };
        assert_eq!(error.code, super::super::codes::REQUEST_CANCELLED, "{error:?}");
        assert!(request.contains(r#""id":40"#), "{request}");
        let told: serde_json::Value = serde_json::from_str(&told).unwrap();
        assert_eq!(told["method"], CANCEL_REQUEST, "{told}");
        assert_eq!(told["params"], serde_json::json!({"requestId": 40}), "{told}");
        let late = RawValue::from_string("{}".into()).unwrap();
        assert!(
            !pending.resolve(&Id::Number(40), Ok(late)),
            "a late answer reaches nothing"
        );
    }
}
