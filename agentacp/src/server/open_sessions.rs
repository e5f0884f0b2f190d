//! The sessions open on one connection, and what each is doing: the dispatcher's table. A
//! session takes a prompt, a load, a close or a delete only when idle; a `session/load` takes
//! its session when it starts ([`LoadInFlight`]) and gives it back, loaded or as it was, however
//! it ends.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::connection::Connection;
use super::memory::MemoryBook;
use super::session::SessionContext;
use crate::jsonrpc::{RpcError, codes};
use crate::sync::lock;

/// One open session.
pub(super) struct SessionEntry {
    pub(super) context: Arc<SessionContext>,
    pub(super) activity: Activity,
}

/// What an open session is doing.
pub(super) enum Activity {
    Idle,
    /// A prompt runs; sending `true` cancels it.
    Prompting(watch::Sender<bool>),
    /// A `session/load` is replaying its history; the entry holds the loaded context already
    /// (so it counts against the session limit) and becomes idle when the load ends.
    Loading,
}

/// The open sessions, by id.
pub(super) type Sessions = Arc<Mutex<HashMap<String, SessionEntry>>>;

impl SessionEntry {
    pub(super) fn idle(context: Arc<SessionContext>) -> Self {
        SessionEntry {
            context,
            activity: Activity::Idle,
        }
    }

    /// `-32602` saying why the session cannot `act` now (e.g. "closing the session"), or
    /// nothing when it is idle.
    pub(super) fn busy(&self, act: &str) -> Result<(), RpcError> {
        let why = match self.activity {
            Activity::Idle => return Ok(()),
            Activity::Prompting(_) => "a prompt is running in this session; cancel it or wait for its answer",
            Activity::Loading => "this session is being loaded; wait for the answer to `session/load`",
        };
        Err(RpcError::new(codes::INVALID_PARAMS, format!("{why} before {act}")))
    }

    /// Cancels the running prompt, if any; true when there was one.
    pub(super) fn cancel(&self) -> bool {
        match &self.activity {
            Activity::Prompting(cancel) => {
                cancel.send_replace(true);
                true
            }
            Activity::Idle | Activity::Loading => false,
        }
    }
}

/// Ends an open session here: its MCP servers stopped, its operator memory closed (kept where
/// its kind asks for it), its history made durable.
pub(super) async fn retire(context: &SessionContext, memory: &MemoryBook, connection: &Connection) {
    let session_id = context.id();
    context.close_mcp().await;
    memory.close(session_id, context.memory(), Some(connection));
    if connection.record_history
        && let Err(error) = connection.store().flush_session(session_id)
    {
        tracing::error!(%error, session = session_id, "saving the session failed");
    }
}

/// A `session/load` under way: its session's entry is the loading one (holding `context`)
/// until [`settle`](Self::settle) puts the loaded context, or on failure what was there before,
/// in its place. Dropped unsettled (its task aborted by `$/cancel_request`, or the operator's
/// `load_session` panicked), it settles as a failure.
pub(super) struct LoadInFlight {
    pub(super) sessions: Sessions,
    pub(super) context: Arc<SessionContext>,
    /// The entry the load replaced (the session was open already).
    pub(super) previous: Option<SessionEntry>,
    pub(super) memory: Arc<MemoryBook>,
    pub(super) connection: Arc<Connection>,
    settled: bool,
}

/// How a load ended for the table.
pub(super) enum Settled {
    /// The loaded context is open, in place of `replaced`.
    Opened { replaced: Option<SessionEntry> },
    /// The load failed: the session is as it was.
    Restored,
    /// `logout` took the sessions while it loaded: nothing of it is open.
    Gone { replaced: Option<SessionEntry> },
}

impl LoadInFlight {
    /// Takes `context`'s session for its load (see [`LoadInFlight`]); the entry it replaces
    /// is `previous`.
    pub(super) fn new(
        sessions: Sessions,
        context: Arc<SessionContext>,
        previous: Option<SessionEntry>,
        memory: Arc<MemoryBook>,
        connection: Arc<Connection>,
    ) -> Self {
        LoadInFlight {
            sessions,
            context,
            previous,
            memory,
            connection,
            settled: false,
        }
    }

    /// Puts the loaded context in place (`loaded`), or what was there before.
    pub(super) fn settle(&mut self, loaded: bool) -> Settled {
        self.settled = true;
        let id = self.context.id();
        let mut sessions = lock(&self.sessions);
        let ours = sessions.get(id).is_some_and(|entry| {
            Arc::ptr_eq(&entry.context, &self.context) && matches!(entry.activity, Activity::Loading)
        });
        if !ours {
            return Settled::Gone {
                replaced: self.previous.take(),
            };
        }
        if loaded {
            sessions.insert(id.to_string(), SessionEntry::idle(self.context.clone()));
            return Settled::Opened {
                replaced: self.previous.take(),
            };
        }
        match self.previous.take() {
            Some(previous) => sessions.insert(id.to_string(), previous),
            None => sessions.remove(id),
        };
        Settled::Restored
    }

    /// Lets go of what the load did not keep: the MCP servers of the context it replaced, or
    /// of the context it loaded in vain; after a `logout`, the session as `logout` closes them.
    pub(super) fn let_go(&self, settled: Settled) -> impl Future<Output = ()> + Send + 'static {
        let (context, memory, connection) = (self.context.clone(), self.memory.clone(), self.connection.clone());
        async move {
            match settled {
                Settled::Opened { replaced } => {
                    if let Some(replaced) = replaced {
                        replaced.context.close_mcp().await;
                    }
                }
                Settled::Restored => context.close_mcp().await,
                Settled::Gone { replaced } => {
                    if let Some(replaced) = replaced {
                        replaced.context.close_mcp().await;
                    }
                    retire(&context, &memory, &connection).await;
                }
            }
        }
    }
}

impl Drop for LoadInFlight {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let settled = self.settle(false);
        // Outside a runtime (its shutdown) there is nothing left to stop.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(self.let_go(settled));
        }
    }
}
