//! A turn's place in a fleet of replicas (issue #49): the lease it holds while it runs, the
//! heartbeat that renews it, and cancels that reach it from other replicas.
//!
//! Bounds (the defaults; `AGENTACP_LEASE_MS` sets the lease, the rest follows from it):
//! - a lease lasts [`DEFAULT_LEASE`] (10 s) and is renewed every third of it (3.3 s); a
//!   replica that dies mid-turn leaves a lease that expires at most one lease period after
//!   its last renewal; every replica sweeps the expired leases every lease period (± a
//!   quarter, at random: [`Fleet::sweep`]), so the turn is recorded as interrupted, without
//!   waiting for a prompt, within 2¼ lease periods of the replica's death (22.5 s), as long
//!   as one replica runs and the database answers; a prompt of the session that comes first
//!   records it the same way;
//! - a replica that cannot renew (the database unreachable) stops its turn (as a cancel) once
//!   the lease could run out before its next attempt, so that it never runs on past its lease;
//!   one whose lease was taken over stops at its next renewal, and its writes to the session
//!   are refused from the takeover on (the fence, `lease.rs`);
//! - a `session/cancel` for a turn running on another replica is forwarded through the
//!   database: the turn's replica hears it at once on `LISTEN agentacp_cancel` (a round trip
//!   to the database), and, if that notification was missed (its listening connection was
//!   down), at its next renewal: within one renewal period.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use acp_postgres::{Database, DbError, Listener, Notice};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::Instant;

use super::lease::{Acquired, CANCEL_CHANNEL, Expired, Fences, Interrupted, Leases, Renewed};
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

/// Records the turn a dead replica left unfinished in a session (audit and history): the
/// session and its identity, that turn, and the replica recording it. Blocking; an error in
/// a sentence.
pub(crate) type Record = Arc<dyn Fn(&Expired, &Interrupted, &str) -> Result<(), String> + Send + Sync>;

/// How many expired leases one sweep takes at most (the rest wait for the next).
const SWEEP_BATCH: i64 = 100;

/// How long [`Sweeper::stop`] waits for a sweep under way (a database call is bounded by the
/// pool's 10 s; a sweep stops between sessions).
const STOP_WITHIN: Duration = Duration::from_secs(25);

impl Fleet {
    /// Starts this replica's sweeper of expired leases: every lease period (± a quarter, at
    /// random, so replicas spread out), it takes each session whose lease is held but expired
    /// (its replica died or lost the database mid-turn), records that turn with `record`, and
    /// lets go. Taking a lease raises its epoch in one transaction, so of several replicas
    /// sweeping at once exactly one records each turn. A failing database only delays it
    /// (logged). Runs until [`Sweeper::stop`], or until dropped.
    pub(crate) fn sweep(self: &Arc<Self>, record: Record) -> Sweeper {
        let (stop, stopped) = watch::channel(false);
        let stopping = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(sweeping(self.leases.clone(), record, stopped, stopping.clone()));
        Sweeper { stop, stopping, task }
    }
}

/// A replica's running sweeper of expired leases ([`Fleet::sweep`]).
pub(crate) struct Sweeper {
    stop: watch::Sender<bool>,
    /// Read between the sessions of a sweep under way.
    stopping: Arc<AtomicBool>,
    task: JoinHandle<()>,
}

impl Sweeper {
    /// Stops the sweeper: a sweep under way ends after the session it is recording (within
    /// [`STOP_WITHIN`]; past that its task is aborted, saying so).
    pub(crate) async fn stop(mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.stop.send_replace(true);
        if tokio::time::timeout(STOP_WITHIN, &mut self.task).await.is_err() {
            tracing::warn!("the sweeper of expired leases did not stop in {STOP_WITHIN:?}: stopped without its sweep");
            self.task.abort();
        }
    }
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.task.abort();
    }
}

/// The sweeper's loop: a jittered lease period, then one sweep, until `stop` says so.
async fn sweeping(leases: Leases, record: Record, mut stop: watch::Receiver<bool>, stopping: Arc<AtomicBool>) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(jittered(leases.lease_for())) => {}
            // Told to stop, or the sweeper is gone.
            _ = stop.changed() => return,
        }
        let (sweeper, record, stopping) = (leases.clone(), record.clone(), stopping.clone());
        match blocking(move || sweep_once(&sweeper, &record, &stopping)).await {
            Ok(0) => {}
            Ok(recorded) => tracing::info!(
                recorded,
                "turns left unfinished by stopped replicas recorded as interrupted"
            ),
            Err(error) => {
                tracing::warn!(%error, "sweeping the expired leases failed; trying again at the next sweep")
            }
        }
        if *stop.borrow() {
            return;
        }
    }
}

/// `period` ± a quarter, at random (exactly `period` if the random source fails).
fn jittered(period: Duration) -> Duration {
    let spread = period / 2;
    let at = getrandom::u32().map_or(0.5, |n| f64::from(n) / f64::from(u32::MAX));
    period - period / 4 + spread.mul_f64(at)
}

/// One sweep: takes every expired lease it finds (up to [`SWEEP_BATCH`]), records the turn
/// each left unfinished, and lets go; how many it recorded. Stops between sessions once
/// `stopping`. Blocking.
fn sweep_once(leases: &Leases, record: &Record, stopping: &AtomicBool) -> Result<usize, DbError> {
    let mut recorded = 0;
    for expired in leases.expired(SWEEP_BATCH)? {
        if stopping.load(Ordering::SeqCst) {
            break;
        }
        // Another replica may have taken it since (and records it): then nothing here.
        let Some((epoch, interrupted)) = leases.take_expired(&expired.session)? else {
            continue;
        };
        match record(&expired, &interrupted, leases.replica()) {
            Ok(()) => {
                recorded += 1;
                leases.release(&expired.session, epoch)?;
            }
            Err(error) => {
                tracing::warn!(session = expired.session, %error, "recording an interrupted turn failed; its lease is handed back for the next sweep");
                leases.hand_back(&expired.session, epoch, &interrupted)?;
            }
        }
    }
    Ok(recorded)
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

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use acp_postgres::Options;

    use super::*;

    /// The lease of the tests: short, so that leases expire quickly.
    const LEASE: Duration = Duration::from_millis(300);

    /// How long a test waits for a record: far past the bound (2¼ leases), never a target.
    const WAIT: Duration = Duration::from_secs(20);

    /// A fresh database with the sessions' and leases' schemas; `None` (skipped) without
    /// PostgreSQL.
    fn database(test: &str) -> Option<Database> {
        let cluster = test_support::postgres::cluster()?;
        let db = Database::connect(&cluster.database(test), Options::default()).expect("connects");
        super::super::postgres::migrate(&db).unwrap();
        Leases::open(db.clone(), "op", "setup", LEASE).unwrap();
        Some(db)
    }

    /// What a sweeper recorded: (session, identity, the interrupted replica and epoch, the
    /// recording replica).
    type Seen = (String, Option<String>, Interrupted, String);

    /// A [`Record`] sending what it records on a channel.
    fn recorder() -> (Record, mpsc::Receiver<Seen>) {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let record: Record = Arc::new(move |expired: &Expired, interrupted: &Interrupted, replica: &str| {
            let seen = (
                expired.session.clone(),
                expired.identity.clone(),
                interrupted.clone(),
                replica.to_string(),
            );
            lock(&tx).send(seen).map_err(|_| "the test is gone".to_string())
        });
        (record, rx)
    }

    /// A replica that takes `sessions`' leases and dies: it never renews nor releases them.
    fn die_holding(db: &Database, sessions: &[&str]) {
        let dead = Leases::open(db.clone(), "op", "dead", LEASE).unwrap();
        for session in sessions {
            assert!(matches!(
                dead.acquire(session).unwrap(),
                Acquired::Taken { epoch: 1, .. }
            ));
        }
    }

    /// Issue #49: a replica dies mid-turn; with no prompt of the session, another replica's
    /// sweeper records the turn as interrupted (with the session's identity) and lets the
    /// lease go, so that the next prompt has nothing left to record.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dead_replicas_lease_is_recorded_interrupted_by_a_sweeper_without_a_prompt() {
        let Some(db) = database("sweep_dead") else {
            return;
        };
        db.run(|c| {
            c.execute(
                "insert into agentacp_sessions (operator, identity, id, cwd) values ('op', 'alice', 's1', '/w')",
                &[],
            )
        })
        .unwrap();
        die_holding(&db, &["s1"]);
        let b = Fleet::open(&db, "op", "b", LEASE).unwrap();
        let (record, seen) = recorder();
        let sweeper = b.sweep(record);
        let recorded = tokio::task::spawn_blocking(move || seen.recv_timeout(WAIT))
            .await
            .unwrap();
        sweeper.stop().await;
        let interrupted = Interrupted {
            owner: "dead".into(),
            epoch: 1,
        };
        assert_eq!(
            recorded,
            Ok(("s1".into(), Some("alice".into()), interrupted, "b".into()))
        );
        // Released: a prompt takes the session with nothing more to record.
        let c = Leases::open(db.clone(), "op", "c", LEASE).unwrap();
        assert_eq!(
            c.acquire("s1").unwrap(),
            Acquired::Taken {
                epoch: 3,
                interrupted: None
            }
        );
    }

    /// Issue #49: three replicas sweeping the same expired leases at the same moment record
    /// each interrupted turn exactly once, and leave every lease free.
    #[test]
    fn three_sweepers_at_once_record_each_interrupted_turn_exactly_once() {
        let Some(db) = database("sweep_three") else {
            return;
        };
        let sessions: Vec<String> = (0..20).map(|n| format!("s{n}")).collect();
        die_holding(&db, &sessions.iter().map(String::as_str).collect::<Vec<_>>());
        let (record, seen) = recorder();
        let expired = Leases::open(db.clone(), "op", "check", LEASE).unwrap();
        let deadline = std::time::Instant::now() + WAIT;
        while expired.expired(SWEEP_BATCH).unwrap().len() < sessions.len() {
            assert!(std::time::Instant::now() < deadline, "the leases never expired");
            std::thread::sleep(Duration::from_millis(20));
        }
        let start = Arc::new(std::sync::Barrier::new(3));
        let sweepers: Vec<_> = ["a", "b", "c"]
            .into_iter()
            .map(|replica| {
                let leases = Leases::open(db.clone(), "op", replica, LEASE).unwrap();
                let (record, start) = (record.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    sweep_once(&leases, &record, &AtomicBool::new(false)).unwrap()
                })
            })
            .collect();
        let counted: usize = sweepers.into_iter().map(|sweeper| sweeper.join().unwrap()).sum();
        drop(record);
        let mut recorded: Vec<String> = seen.iter().map(|(session, ..)| session).collect();
        recorded.sort_by_key(|session| session[1..].parse::<u32>().unwrap());
        assert_eq!(recorded, sessions, "each session once");
        assert_eq!(counted, sessions.len());
        let held = db
            .run(|c| c.query_one("select count(*) from agentacp_leases where held", &[]))
            .unwrap()
            .get::<_, i64>(0);
        assert_eq!(held, 0, "every lease let go");
    }

    /// Issue #49: at shutdown the sweeper stops at once, between sweeps: its task ends (no
    /// wait for the next sweep, nothing left running).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_sweeper_stops_at_once_at_shutdown() {
        let Some(db) = database("sweep_stop") else {
            return;
        };
        let fleet = Fleet::open(&db, "op", "a", Duration::from_secs(60)).unwrap();
        let (record, _seen) = recorder();
        let sweeper = fleet.sweep(record);
        let task = sweeper.task.abort_handle();
        tokio::time::timeout(Duration::from_secs(10), sweeper.stop())
            .await
            .expect("stopped long before the first sweep (45 s at the earliest)");
        assert!(task.is_finished());
    }

    /// Issue #49: a lease its turn keeps renewing is never swept, however long the turn runs;
    /// meanwhile the sweeper records the leases dead replicas leave, one after another.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lease_being_renewed_is_never_swept() {
        let Some(db) = database("sweep_live") else {
            return;
        };
        let a = Fleet::open(&db, "op", "a", LEASE).unwrap();
        let (cancel, cancelled) = watch::channel(false);
        let (lease, _) = a.take("live", cancel).await.unwrap();
        let b = Fleet::open(&db, "op", "b", LEASE).unwrap();
        let (record, seen) = recorder();
        let sweeper = b.sweep(record);
        let started = std::time::Instant::now();
        // Dead replicas' leases, recorded one by one, until the live turn has run for more
        // than three lease periods (it would have expired three times over unrenewed).
        let mut round = 0;
        let seen = Arc::new(Mutex::new(seen));
        while started.elapsed() < 3 * LEASE {
            let session = format!("dead{round}");
            die_holding(&db, &[&session]);
            let seen = seen.clone();
            let recorded = tokio::task::spawn_blocking(move || lock(&seen).recv_timeout(WAIT))
                .await
                .unwrap()
                .expect("the sweeper records a dead replica's lease");
            assert_eq!(recorded.0, session, "only the dead replicas' leases are swept");
            round += 1;
        }
        sweeper.stop().await;
        assert!(lock(&seen).try_recv().is_err(), "nothing else recorded");
        assert!(!*cancelled.borrow(), "the live turn was never stopped");
        let renewed = Leases::open(db.clone(), "op", "a", LEASE)
            .unwrap()
            .renew("live", 1)
            .unwrap();
        assert_eq!(
            renewed,
            Renewed::Held {
                cancel_requested: false
            },
            "still held at epoch 1"
        );
        lease.release().await;
    }
}
