//! Grouped appends to the PostgreSQL session store (issue #49): a turn's `session/update`s are
//! queued by [`Appender::push`] and written by a writer thread of the store, many to a
//! transaction (one multi-row `insert`), instead of one transaction (three round trips) each.
//!
//! - **When**: the writer starts a batch once [`LINGER`] has passed since its oldest line was
//!   queued, or [`MOST_PER_BATCH`] lines wait, or somebody waits for them
//!   ([`Appender::drain`]: the end of each turn, a load, a delete), whichever comes first.
//! - **Fenced per batch**: in the batch's transaction, the lease of each leased session in it
//!   is checked once, at the epoch its lines were appended under ([`lease::check_epoch`]);
//!   a session whose lease is gone has its lines refused (none written), the others' written.
//! - **Backpressure**: at most [`MOST_QUEUED`] lines (and [`MOST_QUEUED_BYTES`]) wait; an
//!   append beyond waits for room, at most [`Appender::patience`], then fails in a sentence.
//! - **An outage**: a batch is one transaction, so it is written whole or not at all. A
//!   failed one is tried again (the database's errors that may pass) until the pool's answer
//!   deadline has passed; when its commit was sent but not answered, the database is asked
//!   whether it committed (`txid_status`) before anything is tried again, so no line is ever
//!   written twice. A batch given up on is reported, in a sentence, to the next append or
//!   drain of each of its sessions, whose lines still queued are dropped with it (no gap
//!   followed by later lines of the same turn).
//! - [`Appends::Each`] (`AGENTACP_SESSION_APPENDS=each`): each append waits until its line is
//!   written, as before the grouping (nothing lost when the replica dies, at that cost).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use acp_postgres::postgres::types::Type;
use acp_postgres::postgres::{self, Client};
use acp_postgres::{Database, DbError};

use super::lease::{self, Fenced, Fences};
use crate::sync::lock;

/// The variable choosing how appends are written: `grouped` (the default) or `each`.
pub const APPENDS_VARIABLE: &str = "AGENTACP_SESSION_APPENDS";

/// How long the oldest queued line waits for others before its batch is written.
pub const LINGER: Duration = Duration::from_millis(5);
/// The most lines one transaction writes.
pub const MOST_PER_BATCH: usize = 500;
/// The most lines queued for the writer; an append beyond waits for room.
pub const MOST_QUEUED: usize = 2_000;
/// The most bytes of lines queued (one line is always let in).
pub const MOST_QUEUED_BYTES: usize = 8 << 20;
/// The longest pause between two tries of a batch.
const MOST_PAUSE: Duration = Duration::from_secs(1);
/// How long a writer thread with nothing to write stays before it ends.
const IDLE: Duration = Duration::from_secs(2);

/// How a store writes its appends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appends {
    /// Queued, and written in batches (the default).
    Grouped,
    /// Each one written before the append returns.
    Each,
}

impl Appends {
    /// The choice of [`APPENDS_VARIABLE`]; an unknown value is an error in a sentence.
    pub fn from_env() -> Result<Appends, String> {
        match std::env::var(APPENDS_VARIABLE) {
            Err(std::env::VarError::NotPresent) => Ok(Appends::Grouped),
            Ok(value) => match value.trim() {
                "" | "grouped" => Ok(Appends::Grouped),
                "each" => Ok(Appends::Each),
                other => Err(format!(
                    "{APPENDS_VARIABLE}=`{other}` is neither `grouped` (the default: updates written in batches) nor `each` (each update written before it is sent)"
                )),
            },
            Err(std::env::VarError::NotUnicode(_)) => Err(format!(
                "{APPENDS_VARIABLE} is not UTF-8 text: set it to `grouped` or `each`"
            )),
        }
    }
}

/// Where an appender writes: the database and the key of its store's sessions.
pub(crate) struct Target {
    pub(crate) database: Database,
    pub(crate) operator: Arc<str>,
    pub(crate) identity: Arc<str>,
    pub(crate) fences: Option<Arc<Fences>>,
}

/// A queued line: an update of `session`, appended under the lease at `epoch` (if any).
struct Line {
    seq: u64,
    session: String,
    epoch: Option<i64>,
    body: String,
    queued_at: Instant,
}

/// Why lines of a session were not written, kept for its next append or drain.
#[derive(Debug, Clone)]
struct Failure {
    kind: std::io::ErrorKind,
    said: String,
}

impl Failure {
    fn error(&self) -> std::io::Error {
        std::io::Error::new(self.kind, self.said.clone())
    }
}

/// What the writer and the appenders share.
#[derive(Default)]
struct Queue {
    lines: VecDeque<Line>,
    bytes: usize,
    next_seq: u64,
    /// The first line of the batch being written.
    writing_from: Option<u64>,
    /// Whether a writer thread runs.
    writer: bool,
    /// Callers waiting for lines to be written: no lingering.
    hurry: usize,
    failed: HashMap<String, Failure>,
    /// Transactions that wrote a batch.
    commits: u64,
}

impl Queue {
    /// Whether every line queued before `seq` is written (or dropped).
    fn done_before(&self, seq: u64) -> bool {
        self.writing_from.is_none_or(|from| from >= seq) && self.lines.front().is_none_or(|line| line.seq >= seq)
    }

    fn full(&self, adding: usize) -> bool {
        self.lines.len() >= MOST_QUEUED || (!self.lines.is_empty() && self.bytes + adding > MOST_QUEUED_BYTES)
    }
}

/// A step of a batch's transaction where a test acts (cuts the connection, fails).
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    BeforeCommit,
    AfterCommit,
}

/// What a test runs at a [`Stage`].
#[cfg(test)]
pub(crate) type Hook = Box<dyn FnMut(Stage, &mut Client) -> Result<(), postgres::Error> + Send>;

/// The grouped writer of one session store.
pub(crate) struct Appender {
    target: Target,
    appends: Appends,
    queue: Mutex<Queue>,
    changed: Condvar,
    #[cfg(test)]
    hook: Arc<Mutex<Option<Hook>>>,
}

/// What one attempt at a batch got to before it failed: its transaction id once its rows
/// were inserted (the commit may have happened), and the sessions it refused.
#[derive(Default)]
struct Seen {
    xid: Option<i64>,
    refused: Vec<(String, i64)>,
    /// Set by the writer when it stops waiting: the attempt must not commit any more.
    abandoned: bool,
}

/// The batch's lines, one multi-row insert in their order, and the sessions' time touched at
/// most once a second (the time `session/list` orders by); `txid_current()` names the
/// transaction for [`Appender::committed`].
const INSERT: &str = "
    with batch as (
        select u.id, u.body, u.ord from unnest($3::text[], $4::text[]) with ordinality as u(id, body, ord)
    ), touched as (
        update agentacp_sessions set updated_at = now()
        where operator = $1 and identity = $2 and id in (select id from batch)
          and updated_at < now() - interval '1 second'
    ), inserted as (
        insert into agentacp_session_updates (session, body)
        select s.pk, b.body from batch b
        join agentacp_sessions s on s.operator = $1 and s.identity = $2 and s.id = b.id
        order by b.ord
        returning 1
    )
    select txid_current(), (select count(*) from inserted)";

impl Appender {
    pub(crate) fn new(target: Target, appends: Appends) -> Appender {
        Appender {
            target,
            appends,
            queue: Mutex::default(),
            changed: Condvar::new(),
            #[cfg(test)]
            hook: Arc::default(),
        }
    }

    /// Queues `body` for `session` (waiting for room while the queue is full). An earlier
    /// failure to write the session's lines is the error, once. With [`Appends::Each`], also
    /// waits until the line is written.
    pub(crate) fn push(self: &Arc<Self>, session: &str, body: &str) -> std::io::Result<()> {
        let epoch = self.target.fences.as_ref().and_then(|fences| fences.epoch_of(session));
        let mut queue = lock(&self.queue);
        take_failure(&mut queue, Some(session))?;
        queue = self.wait(queue, "room for the session's update", |queue| !queue.full(body.len()))?;
        let seq = queue.next_seq;
        queue.next_seq += 1;
        queue.bytes += body.len();
        queue.lines.push_back(Line {
            seq,
            session: session.to_string(),
            epoch,
            body: body.to_string(),
            queued_at: Instant::now(),
        });
        self.start_writer(&mut queue)?;
        // The writer waits for a first line, or lingers until a batch is full or due: only
        // those wake it (a wake-up per line costs more than the line).
        if queue.lines.len() == 1 || queue.lines.len() == MOST_PER_BATCH {
            self.changed.notify_all();
        }
        if self.appends == Appends::Each {
            queue = self.until_written(queue, seq + 1)?;
            take_failure(&mut queue, Some(session))?;
        }
        Ok(())
    }

    /// Waits until every line queued so far is written (at once: no lingering); then the
    /// failure to write one of `session`'s (any session's: `None`), if any, is the error
    /// (once). `Ok` when there was nothing to wait for.
    pub(crate) fn drain(&self, session: Option<&str>) -> std::io::Result<()> {
        let mut queue = self.written()?;
        take_failure(&mut queue, session)
    }

    /// Waits until every line queued so far is written, leaving any failure for its session's
    /// turn (for a reader); then forgets `session`'s failure when `forget` names it (deleted).
    pub(crate) fn settle(&self, forget: Option<&str>) -> std::io::Result<()> {
        let written = self.written().map(drop);
        if let Some(session) = forget {
            lock(&self.queue).failed.remove(session);
        }
        written
    }

    /// Waits, in a hurry, until every line queued so far is written.
    fn written(&self) -> std::io::Result<MutexGuard<'_, Queue>> {
        let queue = lock(&self.queue);
        let upto = queue.next_seq;
        self.until_written(queue, upto)
    }

    /// Transactions that wrote a batch so far.
    #[cfg(test)]
    pub(crate) fn commits(&self) -> u64 {
        lock(&self.queue).commits
    }

    /// Lines queued now (not the batch being written).
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        lock(&self.queue).lines.len()
    }

    /// Runs `hook` at each stage of the next batches' transactions.
    #[cfg(test)]
    pub(crate) fn set_hook(&self, hook: Option<Hook>) {
        *lock(&self.hook) = hook;
    }

    /// How long a caller waits for the writer: a batch given up on after its retries (until
    /// the answer deadline, the last call waited on in full, the last pause), and its own.
    fn patience(&self) -> Duration {
        let options = self.target.database.options();
        (options.answer_within * 2 + options.connect_within + MOST_PAUSE) * 2
    }

    /// Waits, in a hurry, until the lines before `upto` are written.
    fn until_written<'a>(
        &'a self,
        mut queue: MutexGuard<'a, Queue>,
        upto: u64,
    ) -> std::io::Result<MutexGuard<'a, Queue>> {
        queue.hurry += 1;
        self.changed.notify_all();
        let waited = self.wait(queue, "the session's updates to be written", |queue| {
            queue.done_before(upto)
        });
        let mut queue = match waited {
            Ok(queue) => queue,
            Err(error) => {
                lock(&self.queue).hurry -= 1;
                return Err(error);
            }
        };
        queue.hurry -= 1;
        Ok(queue)
    }

    /// Waits until `ready`, at most [`patience`](Self::patience); else an error saying it
    /// waited for `what`.
    fn wait<'a>(
        &'a self,
        queue: MutexGuard<'a, Queue>,
        what: &str,
        ready: impl Fn(&Queue) -> bool,
    ) -> std::io::Result<MutexGuard<'a, Queue>> {
        let patience = self.patience();
        let (queue, _) = self
            .changed
            .wait_timeout_while(queue, patience, |queue| !ready(queue))
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if ready(&queue) {
            return Ok(queue);
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "cannot record an update of the session: waited {} s for {what}, but the database at {} has not taken the {} updates queued before it",
                patience.as_secs(),
                self.target.database.shown(),
                queue.lines.len()
            ),
        ))
    }

    fn start_writer(self: &Arc<Self>, queue: &mut Queue) -> std::io::Result<()> {
        if queue.writer {
            return Ok(());
        }
        let appender = self.clone();
        std::thread::Builder::new()
            .name("agentacp-appends".to_string())
            .spawn(move || appender.run())
            .map_err(|error| {
                std::io::Error::other(format!(
                    "cannot record an update of the session: no thread to write it: {error}"
                ))
            })?;
        queue.writer = true;
        Ok(())
    }

    /// The writer thread: batches until it has been idle for [`IDLE`].
    fn run(self: Arc<Self>) {
        while let Some(batch) = self.next_batch() {
            let batch = Arc::new(batch);
            let written = self.write(&batch);
            let mut queue = lock(&self.queue);
            queue.writing_from = None;
            match written {
                Ok(refused) => {
                    queue.commits += 1;
                    for (session, epoch) in refused {
                        let lost = Fenced::Lost {
                            session: session.clone(),
                            epoch,
                        };
                        tracing::warn!(%lost, "updates of a session this replica lost were refused");
                        let failure = Failure {
                            kind: std::io::ErrorKind::PermissionDenied,
                            said: "the update was not recorded: another replica holds the session now".to_string(),
                        };
                        queue.failed.insert(session, failure);
                    }
                }
                Err(error) => fail(&mut queue, &batch, &std::io::Error::from(error)),
            }
            self.changed.notify_all();
        }
    }

    /// The next batch, once due; `None` when nothing came for [`IDLE`] (the thread ends).
    fn next_batch(&self) -> Option<Vec<Line>> {
        let queue = lock(&self.queue);
        let (mut queue, _) = self
            .changed
            .wait_timeout_while(queue, IDLE, |queue| queue.lines.is_empty())
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if queue.lines.is_empty() {
            queue.writer = false;
            return None;
        }
        loop {
            let due = queue
                .lines
                .front()
                .map_or(Instant::now(), |line| line.queued_at + LINGER);
            let now = Instant::now();
            if queue.lines.len() >= MOST_PER_BATCH || queue.hurry > 0 || now >= due {
                break;
            }
            queue = self
                .changed
                .wait_timeout(queue, due - now)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
        let count = queue.lines.len().min(MOST_PER_BATCH);
        let batch: Vec<Line> = queue.lines.drain(..count).collect();
        queue.bytes -= batch.iter().map(|line| line.body.len()).sum::<usize>();
        queue.writing_from = batch.first().map(|line| line.seq);
        self.changed.notify_all();
        Some(batch)
    }

    /// Writes `batch` in one transaction, tried again while the database's error may pass;
    /// the sessions whose lease was gone (their lines not written).
    fn write(&self, batch: &Arc<Vec<Line>>) -> Result<Vec<(String, i64)>, DbError> {
        let deadline = Instant::now() + self.target.database.options().answer_within;
        let mut pause = Duration::from_millis(20);
        loop {
            let seen = Arc::new(Mutex::new(Seen::default()));
            let error = match self.attempt(batch, &seen) {
                Ok(refused) => return Ok(refused),
                Err(error) => error,
            };
            let xid = {
                let mut seen = lock(&seen);
                seen.abandoned = true;
                seen.xid
            };
            // Its rows were inserted: the commit may have been made, unanswered.
            if let Some(xid) = xid
                && self.committed(xid, deadline)?
            {
                return Ok(std::mem::take(&mut lock(&seen).refused));
            }
            if !error.is_transient() || Instant::now() + pause > deadline {
                return Err(error);
            }
            tracing::warn!(%error, lines = batch.len(), "writing the session updates failed; trying again");
            std::thread::sleep(pause);
            pause = (pause * 2).min(MOST_PAUSE);
        }
    }

    /// One transaction writing `batch`, what it got to kept in `seen`.
    fn attempt(&self, batch: &Arc<Vec<Line>>, seen: &Arc<Mutex<Seen>>) -> Result<Vec<(String, i64)>, DbError> {
        let (batch, seen) = (batch.clone(), seen.clone());
        let (operator, identity) = (self.target.operator.clone(), self.target.identity.clone());
        let lease_operator: Arc<str> = match &self.target.fences {
            Some(fences) => fences.operator().into(),
            None => operator.clone(),
        };
        let shown = self.target.database.shown().to_string();
        #[cfg(test)]
        let hook = self.hook.clone();
        self.target.database.run_raw(move |client| {
            #[cfg(test)]
            let act = |stage, client: &mut Client| match lock(&hook).as_mut() {
                Some(hook) => hook(stage, client),
                None => Ok(()),
            };
            let done = (|| -> Result<Vec<(String, i64)>, postgres::Error> {
                client.batch_execute("begin; set local synchronous_commit = off")?;
                let refused = refusals(client, &lease_operator, &batch)?;
                let kept = batch
                    .iter()
                    .filter(|line| !line.epoch.is_some_and(|epoch| listed(&refused, &line.session, epoch)));
                let (ids, bodies): (Vec<&str>, Vec<&str>) =
                    kept.map(|line| (line.session.as_str(), line.body.as_str())).unzip();
                if !ids.is_empty() {
                    let row = client.query_typed_one(
                        INSERT,
                        &[
                            (&&*operator, Type::TEXT),
                            (&&*identity, Type::TEXT),
                            (&ids, Type::TEXT_ARRAY),
                            (&bodies, Type::TEXT_ARRAY),
                        ],
                    )?;
                    let mut seen = lock(&seen);
                    if seen.abandoned {
                        // The writer stopped waiting and may write the batch again.
                        drop(seen);
                        client.batch_execute("rollback")?;
                        return Ok(refused);
                    }
                    seen.xid = Some(row.get(0));
                    seen.refused = refused.clone();
                }
                #[cfg(test)]
                act(Stage::BeforeCommit, client)?;
                client.batch_execute("commit")?;
                #[cfg(test)]
                act(Stage::AfterCommit, client)?;
                Ok(refused)
            })();
            done.map_err(|error| {
                if !client.is_closed() {
                    let _ = client.batch_execute("rollback");
                }
                DbError::query(&shown, &error)
            })
        })
    }

    /// Whether the transaction `xid` committed, asked until `deadline` while the database
    /// cannot say; an error when it never could.
    fn committed(&self, xid: i64, deadline: Instant) -> Result<bool, DbError> {
        let mut pause = Duration::from_millis(20);
        loop {
            let status = self.target.database.run(move |client| {
                let row = client.query_typed_one("select txid_status($1)::text", &[(&xid, Type::INT8)])?;
                Ok(row.get::<_, Option<String>>(0))
            });
            let error = match status {
                Ok(Some(status)) if status == "committed" => return Ok(true),
                Ok(Some(status)) if status == "in progress" => None,
                // Aborted, or too old to be known (it then cannot have been ours unanswered).
                Ok(_) => return Ok(false),
                Err(error) => Some(error),
            };
            if Instant::now() + pause > deadline || error.as_ref().is_some_and(|error| !error.is_transient()) {
                return Err(error.unwrap_or_else(|| DbError::Timeout {
                    database: self.target.database.shown().to_string(),
                    after: self.target.database.options().answer_within,
                }));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(MOST_PAUSE);
        }
    }
}

/// In a batch's transaction: the (session, epoch) of each lease its lines were appended under
/// that is no longer held (checked once per session and epoch, the row locked `FOR SHARE`).
fn refusals(client: &mut Client, operator: &str, batch: &[Line]) -> Result<Vec<(String, i64)>, postgres::Error> {
    let mut checked: Vec<(String, i64)> = Vec::new();
    let mut refused = Vec::new();
    for line in batch {
        let Some(epoch) = line.epoch else { continue };
        if listed(&checked, &line.session, epoch) {
            continue;
        }
        let key = (line.session.clone(), epoch);
        match lease::check_epoch(client, operator, &line.session, epoch) {
            Ok(()) => {}
            Err(Fenced::Lost { .. }) => refused.push(key.clone()),
            Err(Fenced::Query(error)) => return Err(error),
        }
        checked.push(key);
    }
    Ok(refused)
}

/// Whether `session` at `epoch` is in `leases`.
fn listed(leases: &[(String, i64)], session: &str, epoch: i64) -> bool {
    leases.iter().any(|(listed, at)| *at == epoch && listed == session)
}

/// `batch` could not be written: each of its sessions learns so at its next append or drain,
/// and its lines still queued are dropped (none written after the gap).
fn fail(queue: &mut Queue, batch: &[Line], error: &std::io::Error) {
    let mut lost: HashMap<&str, usize> = HashMap::new();
    for line in batch {
        *lost.entry(line.session.as_str()).or_default() += 1;
    }
    queue.lines.retain(|line| match lost.get_mut(line.session.as_str()) {
        Some(count) => {
            *count += 1;
            false
        }
        None => true,
    });
    queue.bytes = queue.lines.iter().map(|line| line.body.len()).sum();
    let kind = error.kind();
    for (session, count) in lost {
        tracing::error!(%error, session, updates = count, "session updates could not be recorded");
        let said = format!(
            "cannot record an update of the session ({count} of its latest updates were not recorded): {error}"
        );
        queue.failed.insert(session.to_string(), Failure { kind, said });
    }
}

/// The failure kept for `session` (any: `None`), taken.
fn take_failure(queue: &mut Queue, session: Option<&str>) -> std::io::Result<()> {
    let failure = match session {
        Some(session) => queue.failed.remove(session),
        None => {
            let first = queue.failed.keys().next().cloned();
            first.and_then(|session| queue.failed.remove(&session))
        }
    };
    failure.map_or(Ok(()), |failure| Err(failure.error()))
}
