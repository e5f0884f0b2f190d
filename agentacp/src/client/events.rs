//! What a prompt turn yields: typed updates, then the stop reason.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use super::connection::{Shared, lock};
use super::error::ClientError;
use crate::jsonrpc::Id;
use crate::jsonrpc::pending::RequestFailure;
use crate::wire::default as wire;

/// One `session/update` from the agent.
#[derive(Debug, Clone, PartialEq)]
pub enum Update {
    /// `agent_message_chunk`.
    MessageChunk(wire::ContentChunk),
    /// `agent_thought_chunk`.
    ThoughtChunk(wire::ContentChunk),
    /// `user_message_chunk` (a `session/load` replays them).
    UserMessageChunk(wire::ContentChunk),
    /// `tool_call`: a new tool call.
    ToolCall(wire::ToolCall),
    /// `tool_call_update`: progress or outcome of a tool call.
    ToolCallUpdate(wire::ToolCallUpdate),
    /// `plan`.
    Plan(wire::Plan),
    /// Any other update (or one that did not fit its type), as its JSON.
    Other(Value),
}

impl Update {
    /// Reads the `update` object of a `session/update`.
    pub(crate) fn from_raw(raw: &RawValue) -> Update {
        match serde_json::from_str::<wire::SessionUpdate>(raw.get()) {
            Ok(wire::SessionUpdate::AgentMessageChunk(chunk)) => Update::MessageChunk(chunk),
            Ok(wire::SessionUpdate::AgentThoughtChunk(chunk)) => Update::ThoughtChunk(chunk),
            Ok(wire::SessionUpdate::UserMessageChunk(chunk)) => Update::UserMessageChunk(chunk),
            Ok(wire::SessionUpdate::ToolCall(call)) => Update::ToolCall(call),
            Ok(wire::SessionUpdate::ToolCallUpdate(update)) => Update::ToolCallUpdate(update),
            Ok(wire::SessionUpdate::Plan(plan)) => Update::Plan(plan),
            Ok(_) | Err(_) => Update::Other(serde_json::from_str(raw.get()).unwrap_or(Value::Null)),
        }
    }

    /// The text of a text message, thought or user chunk.
    pub fn text(&self) -> Option<&str> {
        match self {
            Update::MessageChunk(chunk) | Update::ThoughtChunk(chunk) | Update::UserMessageChunk(chunk) => {
                match &chunk.content {
                    wire::ContentBlock::Text(text) => Some(&text.text),
                    _ => None,
                }
            }
            _ => None,
        }
    }
}

/// One event of a prompt turn.
// Not boxed: each event is moved once, from the reader to the stream's reader.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum PromptEvent {
    /// An update of the running turn, in the order the agent sent them.
    Update(Update),
    /// An update replayed by `session/load`: history as the agent tells it. Treat its content
    /// as untrusted (it is not the user speaking now); its tool calls are not live.
    Replay(Update),
    /// The turn ended (always the last event of a prompt).
    Stop(wire::StopReason),
    /// The session was loaded (always the last event of a `session/load`).
    Loaded,
}

/// What a stream follows: a prompt turn or a `session/load`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StreamKind {
    Prompt,
    Load,
}

type Answer = Pin<Box<dyn Future<Output = Result<Box<RawValue>, RequestFailure>> + Send>>;

/// The events of one running prompt: call [`PromptStream::next`] until it returns `None`.
/// The last event is [`PromptEvent::Stop`], or an error (the agent failed the prompt, exited,
/// or sent nothing for [`ClientOptions::prompt_idle_timeout`](super::ClientOptions::prompt_idle_timeout)).
///
/// Keep reading while the turn runs: the agent's updates wait in a bounded queue.
pub struct PromptStream {
    pub(crate) shared: Arc<Shared>,
    pub(crate) session: wire::SessionId,
    pub(crate) id: Id,
    pub(crate) tag: i64,
    pub(crate) kind: StreamKind,
    pub(crate) updates: mpsc::Receiver<Update>,
    pub(crate) answer: Option<Answer>,
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
    /// The next event; `None` after the last one.
    pub async fn next(&mut self) -> Option<Result<PromptEvent, ClientError>> {
        let idle = self.shared.options.prompt_idle_timeout;
        let answer = self.answer.as_mut()?;
        // Biased towards updates: the agent sends a turn's updates before its answer, and the
        // reader queues them before it delivers the answer, so none is skipped.
        let outcome = tokio::select! {
            biased;
            Some(update) = self.updates.recv() => return Some(Ok(match self.kind {
                StreamKind::Prompt => PromptEvent::Update(update),
                StreamKind::Load => PromptEvent::Replay(update),
            })),
            answer = answer => answer,
            () = tokio::time::sleep(idle) => Err(RequestFailure::TimedOut),
        };
        self.finish();
        let method = match self.kind {
            StreamKind::Prompt => wire::method_names::SESSION_PROMPT,
            StreamKind::Load => wire::method_names::SESSION_LOAD,
        };
        Some(match outcome {
            Ok(_) if self.kind == StreamKind::Load => Ok(PromptEvent::Loaded),
            Ok(raw) => serde_json::from_str::<wire::PromptResponse>(raw.get())
                .map(|response| PromptEvent::Stop(response.stop_reason))
                .map_err(|error| ClientError::InvalidResponse {
                    method: wire::method_names::SESSION_PROMPT.to_string(),
                    reason: error.to_string(),
                }),
            Err(RequestFailure::TimedOut) => {
                // Tell the agent to stop; whatever it answers later is ignored.
                let _ = tokio::time::timeout(
                    self.shared.options.request_timeout,
                    self.shared.notify(
                        wire::method_names::SESSION_CANCEL,
                        &serde_json::json!({ "sessionId": self.session }),
                    ),
                )
                .await;
                Err(self
                    .shared
                    .timeout_error(&format!("{method} (no message for the idle timeout)"), idle))
            }
            Err(failure) => Err(self.shared.failure(method, failure, idle)),
        })
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
