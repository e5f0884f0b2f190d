//! A turn's place in a fleet of replicas (issue #49): the lease it holds while it runs, the
//! heartbeat that renews it, and cancels that reach it from other replicas.
//!
//! Bounds (the defaults; `AGENTACP_LEASE_MS` sets the lease, the rest follows from it):
//! - a lease lasts [`DEFAULT_LEASE`] (10 s) and is renewed every third of it (3.3 s); a
//!   replica that dies mid-turn leaves a lease that expires at most one lease period after
//!   its last renewal, after which the next prompt of the session, on any replica, takes it
//!   and records the turn as interrupted;
//! - a replica that cannot renew (the database unreachable) stops its turn (as a cancel) once
//!   the lease could run out before its next attempt, so that it never runs on past its lease;
//!   one whose lease was taken over stops at its next renewal, and its writes to the session
//!   are refused from the takeover on (the fence, `lease.rs`);
//! - a `session/cancel` for a turn running on another replica is forwarded through the
//!   database: the turn's replica hears it at once on `LISTEN agentacp_cancel` (a round trip
//!   to the database), and, if that notification was missed (its listening connection was
//!   down), at its next renewal: within one renewal period.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use acp_postgres::{Database, DbError, Listener, Notice};
use tokio::sync::watch;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::lease::{Acquired, CANCEL_CHANNEL, Fences, Interrupted, Leases, Renewed};
use crate::server::SessionStore;
use crate::sync::lock;

/// The default lease: 10 s.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// The shortest lease `AGENTACP_LEASE_MS` may set: 300 ms.
pub const MIN_LEASE: Duration = Duration::from_millis(300);

/// The variable that sets the lease, in milliseconds.
pub const LEASE_VARIABLE: &str = "AGENTACP_LEASE_MS";

/// The lease `AGENTACP_LEASE_MS` sets (at least [`MIN_LEASE`]), else [`DEFAULT_LEASE`].
pub(crate) fn lease_from_env() -> Duration {
    crate::env::env_number(LEASE_VARIABLE)
        .map(|ms| Duration::from_millis(ms).max(MIN_LEASE))
        .unwrap_or(DEFAULT_LEASE)
}

/// Joins the fleet on `database` for `operator`'s sessions, as this process's replica
/// ([`crate::env::replica_name`]) with the lease [`lease_from_env`] sets; an error in a
/// sentence when the replica's name is not one, or the leases' schema cannot be applied.
pub(crate) fn join(database: &Database, operator: &str) -> std::io::Result<Arc<Fleet>> {
    let replica = crate::env::replica_name().map_err(std::io::Error::other)?;
    Fleet::open(database, operator, &replica, lease_from_env()).map_err(|error| {
        let error = std::io::Error::from(error);
        std::io::Error::new(
            error.kind(),
            format!("cannot join the fleet as replica `{replica}`: {error}"),
        )
    })
}

/// The running turns of this process, by session: how a cancel heard from another replica
/// reaches one.
type Running = Arc<Mutex<HashMap<String, watch::Sender<bool>>>>;

/// This replica's part in the fleet: its leases, and the listener of forwarded cancels.
pub(crate) struct Fleet {
    leases: Leases,
    running: Running,
    _listener: Listener,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("replica", &self.leases.replica())
            .finish_non_exhaustive()
    }
}

/// Why a turn could not start.
#[derive(Debug)]
pub(crate) enum NotTaken {
    /// Another replica (or connection) runs a turn of the session.
    Busy {
        /// That replica.
        owner: String,
    },
    /// The database could not be asked.
    Failed(DbError),
}

impl Fleet {
    /// Joins the fleet on `db` as `replica`, for `operator`'s sessions, with leases of
    /// `lease_for`: the `leases` schema migrated, the cancel channel listened to.
    pub(crate) fn open(
        db: &Database,
        operator: &str,
        replica: &str,
        lease_for: Duration,
    ) -> Result<Arc<Fleet>, DbError> {
        let leases = Leases::open(db.clone(), operator, replica, lease_for)?;
        let running: Running = Arc::default();
        let heard = running.clone();
        let listener = db.listen(&[CANCEL_CHANNEL], move |notice| {
            if let Notice::Notification { payload, .. } = notice
                && let Some(cancel) = lock(&heard).get(&payload)
            {
                tracing::info!(session = %payload, "a cancel forwarded by another replica");
                cancel.send_replace(true);
            }
        })?;
        tracing::info!(
            replica,
            lease_ms = lease_for.as_millis() as u64,
            "this replica leases its turns' sessions"
        );
        Ok(Arc::new(Fleet {
            leases,
            running,
            _listener: listener,
        }))
    }

    /// The fences of the leases this replica holds (for the session store).
    pub(crate) fn fences(&self) -> Arc<Fences> {
        self.leases.fences()
    }

    /// This replica's name.
    pub(crate) fn replica(&self) -> &str {
        self.leases.replica()
    }

    /// Takes `session`'s lease for a turn that `cancel` cancels, and keeps it renewed until
    /// the [`TurnLease`] is released or dropped; the turn the previous holder left
    /// unfinished, if any.
    pub(crate) async fn take(
        self: &Arc<Self>,
        session: &str,
        cancel: watch::Sender<bool>,
    ) -> Result<(TurnLease, Option<Interrupted>), NotTaken> {
        let (leases, id) = (self.leases.clone(), session.to_string());
        let acquired = blocking(move || leases.acquire(&id)).await.map_err(NotTaken::Failed)?;
        let (epoch, interrupted) = match acquired {
            Acquired::Taken { epoch, interrupted } => (epoch, interrupted),
            Acquired::Busy { owner } => return Err(NotTaken::Busy { owner }),
        };
        lock(&self.running).insert(session.to_string(), cancel.clone());
        let beat = heartbeat(self.leases.clone(), session.to_string(), epoch, cancel.clone());
        let heartbeat = tokio::spawn(beat).abort_handle();
        let lease = TurnLease {
            fleet: self.clone(),
            session: session.to_string(),
            epoch,
            cancel: cancel.clone(),
            heartbeat,
            released: false,
        };
        Ok((lease, interrupted))
    }

    /// Forwards a `session/cancel` for `session`, which runs no turn on this connection, to
    /// the replica whose turn holds its lease, if any (in a task: the caller does not wait).
    /// With `owned_in`, the session must be in that store (the caller's identity's) first:
    /// nobody cancels another identity's turn.
    pub(crate) fn forward_cancel(&self, session: &str, owned_in: Option<Arc<dyn SessionStore>>) {
        let (leases, session) = (self.leases.clone(), session.to_string());
        tokio::spawn(async move {
            let id = session.clone();
            let forwarded = tokio::task::spawn_blocking(move || {
                if let Some(store) = owned_in
                    && store.summary(&id).map_err(|error| error.to_string())?.is_none()
                {
                    return Ok(false);
                }
                leases.request_cancel(&id).map_err(|error| error.to_string())
            })
            .await
            .unwrap_or_else(|_| Err("its task failed".to_string()));
            match forwarded {
                Ok(true) => tracing::info!(session, "session/cancel forwarded to the replica running the turn"),
                Ok(false) => tracing::debug!(session, "session/cancel with no prompt running on any replica"),
                Err(error) => tracing::warn!(session, %error, "forwarding session/cancel failed"),
            }
        });
    }
}

/// The lease a running turn holds. [`release`](Self::release) it when the turn ends; dropped
/// unreleased (the turn's task aborted), it is released in the background.
pub(crate) struct TurnLease {
    fleet: Arc<Fleet>,
    session: String,
    epoch: i64,
    /// The turn's cancel (its entry among the running turns).
    cancel: watch::Sender<bool>,
    heartbeat: AbortHandle,
    released: bool,
}

impl TurnLease {
    /// Stops the heartbeat and lets go of the lease (after the turn's last write).
    pub(crate) async fn release(mut self) {
        self.released = true;
        let release = self.stop();
        if let Err(error) = blocking(release).await {
            tracing::warn!(session = self.session, %error, "releasing the session's lease failed; it expires on its own");
        }
    }

    /// Stops the heartbeat and forgets the turn; the release to run.
    fn stop(&self) -> impl FnOnce() -> Result<(), DbError> + Send + 'static {
        self.heartbeat.abort();
        {
            let mut running = lock(&self.fleet.running);
            // Another turn of the session (a newer one, on another connection) keeps its entry.
            if running
                .get(&self.session)
                .is_some_and(|cancel| cancel.same_channel(&self.cancel))
            {
                running.remove(&self.session);
            }
        }
        let (leases, session, epoch) = (self.fleet.leases.clone(), self.session.clone(), self.epoch);
        move || leases.release(&session, epoch)
    }
}

impl Drop for TurnLease {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let release = self.stop();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn_blocking(move || drop(release()));
        }
    }
}

/// Renews `session`'s lease at `epoch` every third of the lease period, each attempt bounded
/// by that period. Cancels the turn (`cancel`) when the lease was taken over, when a renewal
/// reads a cancel forwarded by another replica, or when renewals fail for so long that the
/// lease could expire before the next one.
async fn heartbeat(leases: Leases, session: String, epoch: i64, cancel: watch::Sender<bool>) {
    let lease_for = leases.lease_for();
    let every = lease_for / 3;
    let mut held_at = Instant::now();
    let mut ticks = tokio::time::interval_at(held_at + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let asked = Instant::now();
        let (renewing, id) = (leases.clone(), session.clone());
        let renewed = tokio::time::timeout(every, blocking(move || renewing.renew(&id, epoch))).await;
        let why = match renewed {
            Ok(Ok(Renewed::Held { cancel_requested })) => {
                held_at = asked;
                if cancel_requested && !cancel.send_replace(true) {
                    tracing::info!(session, "a cancel forwarded by another replica (read at renewal)");
                }
                continue;
            }
            Ok(Ok(Renewed::Lost)) => {
                tracing::warn!(session, epoch, "another replica took this session over: the turn stops");
                cancel.send_replace(true);
                return;
            }
            Ok(Err(error)) => error.to_string(),
            Err(_) => format!("no answer within {} ms", every.as_millis()),
        };
        // The lease runs until `held_at + lease_for` at the earliest; the next attempt may
        // end `2 * every` from now.
        if asked + 2 * every >= held_at + lease_for {
            tracing::error!(session, epoch, %why, "the session's lease could not be renewed in time: the turn stops");
            cancel.send_replace(true);
            return;
        }
        tracing::warn!(session, epoch, %why, "renewing the session's lease failed; trying again");
    }
}

/// Runs a blocking database call on the blocking pool; a task that panicked is an error.
async fn blocking<T: Send + 'static>(call: impl FnOnce() -> Result<T, DbError> + Send + 'static) -> Result<T, DbError> {
    tokio::task::spawn_blocking(call).await.unwrap_or(Err(DbError::Closed))
}
