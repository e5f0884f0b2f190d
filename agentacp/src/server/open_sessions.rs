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
            Activity::Prompting(_) => return Err(prompt_running(act)),
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

/// `-32602`: a prompt runs in the session (on this connection, or on another connection or
/// replica: its lease is held), so it cannot `act` now.
pub(super) fn prompt_running(act: &str) -> RpcError {
    RpcError::new(
        codes::INVALID_PARAMS,
        format!("a prompt is running in this session; cancel it or wait for its answer before {act}"),
    )
}

/// Ends an open session here: its MCP servers stopped, its operator memory closed (kept where
/// its kind asks for it), its history made durable.
pub(super) async fn retire(context: &SessionContext, memory: &MemoryBook, connection: &Connection) {
    let session_id = context.id();
    context.close_mcp().await;
    memory.close(session_id, context.memory(), Some(&connection.records_of(context)));
    if connection.record_history
        && let Err(error) = connection.store_of(context).flush_session(session_id)
    {
        tracing::error!(%error, session = session_id, "saving the session failed");
    }
}

/// A `session/load` under way (cheap to clone: one load): its session's entry is the loading
/// one (holding `context`) until [`settle`](Self::settle) puts the loaded context, or on
/// failure what was there before, in its place. A load that ends otherwise — its request
/// cancelled (`$/cancel_request`, which calls [`abandon`](Self::abandon) before the next
/// message is read), its task aborted or panicking ([`AbandonOnDrop`]) — settles as a failure.
#[derive(Clone)]
pub(super) struct LoadInFlight {
    state: Arc<Mutex<LoadState>>,
}

struct LoadState {
    sessions: Sessions,
    context: Arc<SessionContext>,
    /// The entry the load replaced (the session was open already).
    previous: Option<SessionEntry>,
    memory: Arc<MemoryBook>,
    connection: Arc<Connection>,
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
    /// It was settled before (abandoned): nothing more to do.
    Already,
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
        let state = LoadState {
            sessions,
            context,
            previous,
            memory,
            connection,
            settled: false,
        };
        LoadInFlight {
            state: Arc::new(Mutex::new(state)),
        }
    }

    /// Puts the loaded context in place (`loaded`), or what was there before.
    pub(super) fn settle(&self, loaded: bool) -> Settled {
        let mut state = lock(&self.state);
        if std::mem::replace(&mut state.settled, true) {
            return Settled::Already;
        }
        let previous = state.previous.take();
        let id = state.context.id();
        let mut sessions = lock(&state.sessions);
        let ours = sessions.get(id).is_some_and(|entry| {
            Arc::ptr_eq(&entry.context, &state.context) && matches!(entry.activity, Activity::Loading)
        });
        if !ours {
            return Settled::Gone { replaced: previous };
        }
        if loaded {
            sessions.insert(id.to_string(), SessionEntry::idle(state.context.clone()));
            return Settled::Opened { replaced: previous };
        }
        match previous {
            Some(previous) => sessions.insert(id.to_string(), previous),
            None => sessions.remove(id),
        };
        Settled::Restored
    }

    /// Settles the load as failed, unless it was settled, and lets go of what it loaded (in a
    /// task of its own; outside a runtime, at its shutdown, there is nothing left to stop).
    pub(super) fn abandon(&self) {
        let settled = self.settle(false);
        if matches!(settled, Settled::Already) {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(self.let_go(settled));
        }
    }

    /// Lets go of what the load did not keep: the MCP servers of the context it replaced, or
    /// of the context it loaded in vain; after a `logout`, the session as `logout` closes them.
    pub(super) fn let_go(&self, settled: Settled) -> impl Future<Output = ()> + Send + 'static {
        let (context, memory, connection) = {
            let state = lock(&self.state);
            (state.context.clone(), state.memory.clone(), state.connection.clone())
        };
        async move {
            match settled {
                Settled::Already => {}
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

/// Held by a load's task: dropped before the load settled (the task aborted, or the
/// operator's `load_session` panicked), it abandons the load.
pub(super) struct AbandonOnDrop(pub(super) LoadInFlight);

impl Drop for AbandonOnDrop {
    fn drop(&mut self) {
        self.0.abandon();
    }
}
