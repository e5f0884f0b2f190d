//! The state one agent connection shares between the [`Client`](super::Client), its prompt
//! streams and the reader loop: the outbox, the requests waiting for an answer, each session's
//! subscriber, the agent process, and what the handlers and governance see.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::context::ClientContext;
use super::error::ClientError;
use super::events::Update;
use super::options::ClientOptions;
use super::queue::{Flushes, UpdateQueue};
use super::session::Sessions;
use crate::jsonrpc;
use crate::jsonrpc::outbox::Outbox;
use crate::jsonrpc::pending::{Pending, RequestFailure};
use crate::oversight::{Oversight, PermissionHandler};
use crate::subprocess::{AgentProcess, ExitState};
use crate::sync::lock;

/// Where a session's updates go while a prompt (or a load) runs: tagged with the request id,
/// so a stream only removes its own entry.
pub(crate) struct Subscriber {
    pub(crate) tag: i64,
    pub(crate) sender: Arc<UpdateQueue>,
    /// A `session/load` is replaying history: its updates are not live tool calls.
    pub(crate) replay: bool,
}

pub(crate) struct Shared {
    /// `None` once the client closed its side (stdin closes when the last clone is gone).
    outbox: RwLock<Option<Outbox>>,
    pub(crate) pending: Pending,
    pub(crate) subscribers: Mutex<HashMap<String, Subscriber>>,
    /// The subscribers' queues whose stream is still to be woken (see `queue.rs`).
    pub(crate) flushes: Arc<Flushes>,
    /// Per session: bumped by `cancel`, so waiting permission requests end.
    pub(super) cancels: Mutex<HashMap<String, watch::Sender<u64>>>,
    /// The agent's requests being answered, which its `$/cancel_request` may cancel.
    pub(super) answering: Arc<crate::jsonrpc::cancels::Cancels>,
    pub(super) permission: Arc<dyn PermissionHandler>,
    pub(crate) options: ClientOptions,
    pub(crate) process: AgentProcess,
    /// Why the connection ended, once it has.
    pub(super) ended: Mutex<Option<Ended>>,
    /// What the `fs/*` and `terminal/*` handlers see.
    pub(crate) context: ClientContext,
    /// Governance of permission requests, audit of tool calls.
    pub(crate) oversight: Oversight,
    /// What the agent said about each session (modes, config options, commands).
    pub(crate) sessions: Sessions,
    /// The URL elicitations this client accepted and the agent has not completed.
    pub(super) elicitations: crate::oversight::elicitation::Outstanding,
    /// The open MCP-over-ACP connections to the MCP servers this client provides.
    #[cfg(feature = "mcp")]
    pub(crate) mcp: super::mcp::McpHost,
}

#[derive(Clone, Copy)]
pub(super) enum Ended {
    /// We closed it.
    ByUs,
    /// The agent closed its stdout (or exited).
    ByAgent,
}

impl Shared {
    pub(crate) fn new(
        outbox: Outbox,
        permission: Arc<dyn PermissionHandler>,
        options: ClientOptions,
        process: AgentProcess,
        context: ClientContext,
        oversight: Oversight,
    ) -> Self {
        Shared {
            outbox: RwLock::new(Some(outbox)),
            pending: Pending::new(),
            subscribers: Mutex::default(),
            flushes: Arc::default(),
            cancels: Mutex::default(),
            answering: Arc::default(),
            permission,
            options,
            process,
            ended: Mutex::new(None),
            context,
            oversight,
            sessions: Sessions::default(),
            elicitations: Default::default(),
            #[cfg(feature = "mcp")]
            mcp: super::mcp::McpHost::default(),
        }
    }

    pub(crate) fn outbox(&self) -> Result<Outbox, ClientError> {
        self.outbox
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| self.closed_error())
    }

    /// Closes our side: no more writes; the agent's stdin closes once queued lines are out.
    pub(crate) fn close_outbox(&self) {
        lock(&self.ended).get_or_insert(Ended::ByUs);
        self.outbox.write().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// The error for a request that failed because the connection is gone.
    pub(crate) fn closed_error(&self) -> ClientError {
        match *lock(&self.ended) {
            Some(Ended::ByUs) => ClientError::Closed,
            _ => ClientError::AgentExited {
                status: match self.process.state() {
                    ExitState::Exited(status) => status,
                    ExitState::Running => None,
                },
                stderr: self.process.stderr.lines(),
            },
        }
    }

    pub(crate) fn timeout_error(&self, what: &str, after: Duration) -> ClientError {
        ClientError::Timeout {
            what: what.to_string(),
            after,
            stderr: self.process.stderr.lines(),
        }
    }

    /// The error for a failed request of ours.
    pub(crate) fn failure(&self, method: &str, failure: RequestFailure, timeout: Duration) -> ClientError {
        match failure {
            RequestFailure::Rpc(error) => ClientError::Rpc {
                method: method.to_string(),
                error: Box::new(error),
            },
            RequestFailure::Closed => self.closed_error(),
            RequestFailure::TimedOut => self.timeout_error(method, timeout),
        }
    }

    /// Sends a request and reads its result as `T`, at most `timeout`.
    pub(crate) async fn request<T: for<'de> Deserialize<'de>>(
        &self,
        method: &str,
        params: &impl Serialize,
        timeout: Duration,
    ) -> Result<T, ClientError> {
        let outbox = self.outbox()?;
        let raw = self
            .pending
            .call(&outbox, method, params, timeout)
            .await
            .map_err(|failure| self.failure(method, failure, timeout))?;
        serde_json::from_str(raw.get()).map_err(|error| ClientError::InvalidResponse {
            method: method.to_string(),
            reason: error.to_string(),
        })
    }

    pub(crate) async fn notify(&self, method: &str, params: &impl Serialize) -> Result<(), ClientError> {
        let outbox = self.outbox()?;
        outbox
            .send(jsonrpc::encode_notification(method, params))
            .await
            .map_err(|_| self.closed_error())
    }

    pub(super) async fn send_line(&self, line: Vec<u8>) {
        if let Ok(outbox) = self.outbox()
            && outbox.send(line).await.is_err()
        {
            tracing::debug!("the agent stopped reading");
        }
    }

    pub(super) fn cancel_receiver(&self, session: &str) -> watch::Receiver<u64> {
        lock(&self.cancels)
            .entry(session.to_string())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe()
    }

    /// Ends the permission requests waiting in `session`.
    pub(crate) fn cancel_permissions(&self, session: &str) {
        if let Some(sender) = lock(&self.cancels).get(session) {
            sender.send_modify(|generation| *generation += 1);
        }
    }

    /// The subscriber of `session` (its tag, its queue, and whether it is a replay).
    pub(super) fn subscriber(&self, session: &str) -> Option<(i64, Arc<UpdateQueue>, bool)> {
        lock(&self.subscribers)
            .get(session)
            .map(|s| (s.tag, s.sender.clone(), s.replay))
    }

    /// Delivers an update to its session's subscriber (waiting while its queue is full).
    pub(super) async fn deliver(&self, session: &str, (tag, sender): (i64, Arc<UpdateQueue>), update: Update) {
        if sender.push(update, &self.flushes).await.is_err() {
            let mut subscribers = lock(&self.subscribers);
            if subscribers.get(session).is_some_and(|s| s.tag == tag) {
                subscribers.remove(session);
            }
        }
    }
}
