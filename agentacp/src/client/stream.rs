//! The stream of one running prompt (or `session/load`): the session's updates as the reader
//! delivers them, then the answer, bounded by the idle timeout.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use serde_json::value::RawValue;

use super::error::ClientError;
use super::events::{PromptEvent, Update};
use super::queue::Updates;
use super::state::Shared;
use crate::jsonrpc::Id;
use crate::jsonrpc::pending::RequestFailure;
use crate::sync::lock;
use crate::wire::default as wire;

/// What a stream follows: a prompt turn or a `session/load`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamKind {
    Prompt,
    Load,
}

type Answer = Pin<Box<dyn Future<Output = Result<Box<RawValue>, RequestFailure>> + Send>>;

/// The events of one running prompt: call [`PromptStream::next`] until it returns `None`.
/// The last event is [`PromptEvent::Stop`], or an error (the agent failed the prompt, exited,
/// or sent nothing for [`ClientOptions::prompt_idle_timeout`](super::options::ClientOptions::prompt_idle_timeout)).
///
/// Keep reading while the turn runs: the agent's updates wait in a bounded queue.
pub struct PromptStream {
    pub(crate) shared: Arc<Shared>,
    pub(crate) session: wire::SessionId,
    pub(crate) id: Id,
    pub(crate) tag: i64,
    pub(crate) kind: StreamKind,
    pub(crate) updates: Updates,
    pub(crate) answer: Option<Answer>,
    /// Fires at the idle deadline; when it does, the deadline is moved to the idle timeout
    /// after `last_message` if that is later (cheaper than resetting a timer per update).
    pub(crate) idle: Pin<Box<tokio::time::Sleep>>,
    /// When the last update arrived (or the stream started).
    pub(crate) last_message: tokio::time::Instant,
}

impl std::fmt::Debug for PromptStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptStream")
            .field("session", &self.session)
            .field("id", &self.id)
            .field("done", &self.answer.is_none())
            .finish()
    }
}

impl PromptStream {
    /// The next event; `None` after the last one. (The stream is also a
    /// [`futures_core::Stream`].)
    pub async fn next(&mut self) -> Option<Result<PromptEvent, ClientError>> {
        std::future::poll_fn(|cx| futures_core::Stream::poll_next(Pin::new(&mut *self), cx)).await
    }

    /// The stream's end: the answer (or the failure) read as the last event.
    fn end(&mut self, outcome: Result<Box<RawValue>, RequestFailure>) -> Result<PromptEvent, ClientError> {
        self.finish();
        let idle = self.shared.options.prompt_idle_timeout;
        let method = match self.kind {
            StreamKind::Prompt => wire::method_names::SESSION_PROMPT,
            StreamKind::Load => wire::method_names::SESSION_LOAD,
        };
        match outcome {
            Ok(raw) if self.kind == StreamKind::Load => {
                // Its modes and config options are the session's now (`null` counts as none).
                let loaded: wire::LoadSessionResponse = serde_json::from_str(raw.get()).unwrap_or_default();
                let session = self.session.as_str();
                (self.shared.sessions).answered(session, loaded.modes, loaded.config_options, loaded.meta);
                Ok(PromptEvent::Loaded)
            }
            Ok(raw) => serde_json::from_str::<wire::PromptResponse>(raw.get())
                .map(|response| PromptEvent::Stop(response.stop_reason))
                .map_err(|error| ClientError::InvalidResponse {
                    method: method.to_string(),
                    reason: error.to_string(),
                }),
            Err(RequestFailure::TimedOut) => {
                // Tell the agent to stop; whatever it answers later is ignored.
                let shared = Arc::clone(&self.shared);
                let session = self.session.clone();
                tokio::spawn(async move {
                    let cancel = serde_json::json!({ "sessionId": session });
                    let notify = shared.notify(wire::method_names::SESSION_CANCEL, &cancel);
                    let _ = tokio::time::timeout(shared.options.request_timeout, notify).await;
                });
                Err(self
                    .shared
                    .timeout_error(&format!("{method} (no message for the idle timeout)"), idle))
            }
            Err(failure) => Err(self.shared.failure(method, failure, idle)),
        }
    }

    /// Reads a prompt to the end: every update, and the stop reason.
    pub async fn collect(mut self) -> Result<(Vec<Update>, wire::StopReason), ClientError> {
        let mut updates = Vec::new();
        while let Some(event) = self.next().await {
            match event? {
                PromptEvent::Update(update) | PromptEvent::Replay(update) => updates.push(update),
                PromptEvent::Stop(reason) => return Ok((updates, reason)),
                PromptEvent::Loaded => {
                    return Err(ClientError::InvalidState(
                        "a `session/load` stream has no stop reason: read it with `replayed`".into(),
                    ));
                }
            }
        }
        Err(ClientError::InvalidState("the stream was already finished".into()))
    }

    /// Reads a `session/load` to the end: the replayed history (untrusted, see
    /// [`PromptEvent::Replay`]).
    pub async fn replayed(mut self) -> Result<Vec<Update>, ClientError> {
        let mut updates = Vec::new();
        while let Some(event) = self.next().await {
            match event? {
                PromptEvent::Replay(update) | PromptEvent::Update(update) => updates.push(update),
                PromptEvent::Loaded => return Ok(updates),
                PromptEvent::Stop(_) => {
                    return Err(ClientError::InvalidState(
                        "a prompt stream is not a replay: read it with `collect`".into(),
                    ));
                }
            }
        }
        Err(ClientError::InvalidState("the stream was already finished".into()))
    }

    /// Cancels the turn (`session/cancel`); the stream then ends with `cancelled`, as the
    /// agent says. Permission requests waiting in the session are answered `cancelled`.
    pub async fn cancel(&self) -> Result<(), ClientError> {
        cancel(&self.shared, &self.session).await
    }

    /// The session of this turn.
    pub fn session(&self) -> &wire::SessionId {
        &self.session
    }

    fn finish(&mut self) {
        self.answer = None;
        if self.kind == StreamKind::Prompt {
            self.shared.oversight.turn_ended(self.session.as_str());
        }
        self.shared.pending.forget(&self.id);
        let mut subscribers = lock(&self.shared.subscribers);
        if subscribers
            .get(self.session.as_str())
            .is_some_and(|s| s.tag == self.tag)
        {
            subscribers.remove(self.session.as_str());
        }
    }
}

impl futures_core::Stream for PromptStream {
    type Item = Result<PromptEvent, ClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let Some(answer) = this.answer.as_mut() else {
            return Poll::Ready(None);
        };
        // Updates first: the reader queues a turn's updates before it delivers the answer, so
        // none is skipped.
        if let Poll::Ready(Some(update)) = this.updates.poll_recv(cx) {
            this.last_message = tokio::time::Instant::now();
            return Poll::Ready(Some(Ok(match this.kind {
                StreamKind::Prompt => PromptEvent::Update(update),
                StreamKind::Load => PromptEvent::Replay(update),
            })));
        }
        let outcome = match answer.as_mut().poll(cx) {
            Poll::Ready(outcome) => outcome,
            Poll::Pending => loop {
                match this.idle.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(()) => {
                        let deadline = this.last_message + this.shared.options.prompt_idle_timeout;
                        if deadline <= tokio::time::Instant::now() {
                            break Err(RequestFailure::TimedOut);
                        }
                        this.idle.as_mut().reset(deadline);
                    }
                }
            },
        };
        Poll::Ready(Some(this.end(outcome)))
    }
}

impl Drop for PromptStream {
    fn drop(&mut self) {
        if self.answer.is_some() {
            self.finish();
        }
    }
}

pub(crate) async fn cancel(shared: &Shared, session: &wire::SessionId) -> Result<(), ClientError> {
    shared.cancel_permissions(session.as_str());
    let timeout = shared.options.request_timeout;
    tokio::time::timeout(
        timeout,
        shared.notify(
            wire::method_names::SESSION_CANCEL,
            &serde_json::json!({ "sessionId": session }),
        ),
    )
    .await
    .map_err(|_| shared.timeout_error(wire::method_names::SESSION_CANCEL, timeout))?
}
