//! Tokens kept in PostgreSQL (feature `postgres`, `AGENTACP_TOKENS=database`): the token
//! store of a fleet of replicas, which must agree on revocations.
//!
//! - A token shown by a new connection (upgrade, HTTP request, `authenticate`) is looked up in
//!   the database ([`acp_tokens::database::lookup`]): a token issued on any replica is taken
//!   at once, a revoked one refused at once, and a database that cannot be reached refuses it
//!   ([`Unchecked`]), never admits it.
//! - A live connection's token is checked again (at each request, every 2 s) against what
//!   this replica knows of revocations, without a round trip: the revoked hashes, learned from
//!   `pg_notify` on [`acp_tokens::database::CHANNEL`] (sent in the revoking transaction), all
//!   of them read again whenever the listening connection is (re)opened (notifications sent
//!   meanwhile are lost) and every poll period besides. A hash once revoked is never in force
//!   again, so what is learned is never unlearned.

use std::collections::{HashMap, HashSet};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use acp_postgres::{Database, DbError, Listener, Notice};
use acp_tokens::database as tokens;

use super::identity::{Identity, Unchecked};
use crate::sync::lock;

/// How often revocations are read again when no notification came: the bound on a
/// revocation whose notification was lost (`AGENTACP_TOKENS_POLL_MS`).
pub(super) const DEFAULT_POLL: Duration = Duration::from_secs(5);

/// The shortest poll period taken.
const MIN_POLL: Duration = Duration::from_millis(100);

/// The tokens of one database, as one replica knows them.
pub(super) struct DatabaseSource {
    database: Database,
    known: Arc<Known>,
    /// How often every revocation is read again (at least [`MIN_POLL`]).
    poll: Duration,
    /// Listens while it lives.
    _listener: Listener,
    /// Dropped with the source: the poll thread sees it and ends.
    _poll: mpsc::Sender<()>,
}

/// What a replica has learned: shared by the store, its listener and its poll.
struct Known {
    state: Mutex<State>,
    /// Bumped when a revocation is learned, for whoever waits on one.
    learned: tokio::sync::watch::Sender<u64>,
}

#[derive(Default)]
struct State {
    /// The hashes known revoked.
    revoked: HashSet<[u8; 32]>,
    /// The identity of each hash this replica found in force.
    found: HashMap<[u8; 32], Identity>,
}

impl DatabaseSource {
    /// Applies the tokens' schema, reads the revocations, listens for new ones, and polls every
    /// `poll`. An error (a sentence) when the database cannot be reached or migrated.
    pub(super) fn open(database: Database, poll: Duration) -> Result<DatabaseSource, String> {
        let at = database.shown().to_string();
        let failed = |error: DbError| format!("the token store in the database at {at}: {error}");
        tokens::prepare(&database).map_err(failed)?;
        let known = Arc::new(Known {
            state: Mutex::default(),
            learned: tokio::sync::watch::Sender::new(0),
        });
        known.learn(&database, None).map_err(failed)?;
        let listener = {
            let (listening, known) = (database.clone(), known.clone());
            // On a thread of its own: the client's connect starts a runtime, which a thread
            // of the caller's runtime (a server starting up) may not.
            std::thread::scope(|scope| {
                scope
                    .spawn(|| database.listen(&[tokens::CHANNEL], move |notice| known.on_notice(&listening, notice)))
                    .join()
            })
            .map_err(|_| "the token store's listener could not start".to_string())?
            .map_err(failed)?
        };
        let (stop, stopped) = mpsc::channel();
        let (polled, known_too) = (database.clone(), known.clone());
        let poll = poll.max(MIN_POLL);
        std::thread::Builder::new()
            .name("agentacp-tokens-poll".into())
            .spawn(move || poll_until_dropped(&polled, &known_too, poll, &stopped))
            .map_err(|error| format!("the token store cannot start its poll: {error}"))?;
        tracing::info!(database = %at, poll_ms = poll.as_millis() as u64, "tokens are read from the database");
        Ok(DatabaseSource {
            database,
            known,
            poll,
            _listener: listener,
            _poll: stop,
        })
    }

    /// The identity whose token in force has the SHA-256 `hash`, read from the database.
    pub(super) fn check(&self, hash: [u8; 32]) -> Result<Option<Identity>, Unchecked> {
        let found = blocking(|| tokens::lookup(&self.database, hash)).map_err(|error| {
            tracing::warn!(%error, "a token could not be checked: the database cannot be reached");
            Unchecked(format!("the token cannot be checked now ({error}); try again later"))
        })?;
        let Some(identity) = found else { return Ok(None) };
        let identity = Identity::new(identity).map_err(|error| {
            Unchecked(format!(
                "the token store holds an identity this server cannot take: {error}"
            ))
        })?;
        let mut state = lock(&self.known.state);
        if state.revoked.contains(&hash) {
            // Revoked since it was read: the notification overtook the answer.
            return Ok(None);
        }
        state.found.insert(hash, identity.clone());
        Ok(Some(identity))
    }

    /// Whether the token whose SHA-256 is `hash`, found in force for `identity` by
    /// [`check`](Self::check), is not known to be revoked since. No round trip.
    pub(super) fn still_in_force(&self, identity: &Identity, hash: &[u8; 32]) -> bool {
        let state = lock(&self.known.state);
        !state.revoked.contains(hash) && state.found.get(hash) == Some(identity)
    }

    /// How often every revocation is read again.
    pub(super) fn poll(&self) -> Duration {
        self.poll
    }

    /// Changes each time a revocation is learned.
    pub(super) fn revocations(&self) -> tokio::sync::watch::Receiver<u64> {
        self.known.learned.subscribe()
    }
}

impl Known {
    /// Reads the revoked hashes (of `identity`, or all) and remembers them; an error when the
    /// database cannot be read (what was known stays).
    fn learn(&self, database: &Database, identity: Option<&str>) -> Result<(), DbError> {
        let revoked = tokens::revoked(database, identity)?;
        let mut state = lock(&self.state);
        let before = state.revoked.len();
        for hash in revoked {
            if state.revoked.insert(hash)
                && let Some(identity) = state.found.remove(&hash)
            {
                tracing::info!(identity = identity.as_str(), "a token was revoked in the database");
            }
        }
        if state.revoked.len() > before {
            drop(state);
            self.learned.send_modify(|n| *n += 1);
        }
        Ok(())
    }

    /// A notification re-reads its identity's revocations; a (re)opened listening connection
    /// re-reads them all, for notifications sent while it was down are lost.
    fn on_notice(&self, database: &Database, notice: Notice) {
        let (identity, why) = match &notice {
            Notice::Notification { payload, .. } => (Some(payload.as_str()), "a revocation was announced"),
            Notice::Listening => (None, "listening for revocations"),
        };
        if let Err(error) = self.learn(database, identity) {
            tracing::warn!(%error, "{why}, but the revoked tokens could not be read; the next poll tries again");
        }
    }
}

/// Re-reads every revocation each `period` until the sender of `stopped` is dropped. A failed
/// read is logged once per outage.
fn poll_until_dropped(database: &Database, known: &Known, period: Duration, stopped: &mpsc::Receiver<()>) {
    let mut failing = false;
    while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(period) {
        match known.learn(database, None) {
            Ok(()) if failing => {
                failing = false;
                tracing::info!("the revoked tokens can be read again");
            }
            Ok(()) => {}
            Err(error) if !failing => {
                failing = true;
                tracing::warn!(%error, "the revoked tokens cannot be read; new connections are refused until the database answers");
            }
            Err(_) => {}
        }
    }
}

/// Runs `job`, which blocks on the database, letting the runtime's other tasks move to other
/// threads meanwhile where it can (a multi-threaded runtime).
fn blocking<T>(job: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(job)
        }
        _ => job(),
    }
}

/// The poll period `AGENTACP_TOKENS_POLL_MS` sets, or [`DEFAULT_POLL`].
pub(super) fn poll_period(setting: Option<String>) -> Result<Duration, String> {
    match setting.filter(|text| !text.is_empty()) {
        None => Ok(DEFAULT_POLL),
        Some(text) => match text.parse::<u64>() {
            Ok(ms) if Duration::from_millis(ms) >= MIN_POLL => Ok(Duration::from_millis(ms)),
            _ => Err(format!(
                "`{text}` is not a number of milliseconds of at least {}",
                MIN_POLL.as_millis()
            )),
        },
    }
}
