//! Session leases (issue #49): on a fleet of replicas sharing one PostgreSQL database, a
//! running turn holds a lease on its session, so that no two replicas run turns of one
//! session at once, and a replica that died mid-turn is found out.
//!
//! A lease is one row of `agentacp_leases`: its session (operator, session id), the replica
//! that holds it, an **epoch** raised at every acquisition, whether it is held, and when it
//! expires (the database's clock alone decides: replicas' clocks may differ). A turn takes the
//! lease when it starts ([`Leases::acquire`]: refused while another holder's lease runs),
//! renews it while it runs ([`Leases::renew`], see `fleet.rs` for the heartbeat), and lets go
//! of it when it ends ([`Leases::release`]). A lease still held but expired was left by a
//! replica that died or lost the database: whoever takes it next learns so
//! ([`Acquired::Taken::interrupted`]) and records that turn as interrupted: a prompt of the
//! session, or the sweeper of every replica ([`Leases::expired`], [`Leases::take_expired`],
//! see `fleet.rs`), whichever comes first.
//!
//! Writes are **fenced** by the epoch ([`Fences`]): the appends to a session whose lease this
//! process took are checked, in the transaction of the batch that writes them
//! ([`check_epoch`], see `appender.rs`), against the lease they were appended under, whose
//! row stays locked (`FOR SHARE`) until it commits; a replica that lost its lease (paused,
//! partitioned, its lease taken over) cannot add to the session afterwards, and one taking
//! the session over waits for a batch under way and then reads it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use acp_postgres::postgres::{self, GenericClient};
use acp_postgres::{Database, DbError, Migration};

use crate::sync::lock;

/// The schema component of the leases (`acp_postgres::migrate`).
pub(crate) const COMPONENT: &str = "leases";

/// The steps of the `leases` schema.
pub(crate) static STEPS: [Migration; 2] = [
    Migration {
        version: 1,
        name: "session leases",
        sql: "create table agentacp_leases (
            operator text not null,
            session_id text not null,
            owner text not null,
            epoch bigint not null,
            held boolean not null,
            expires_at timestamptz not null,
            acquired_at timestamptz not null default now(),
            cancel_requested boolean not null default false,
            primary key (operator, session_id));
          create index agentacp_leases_held on agentacp_leases (owner) where held;",
    },
    Migration {
        version: 2,
        name: "expired leases",
        // The sweeper's query (`Leases::expired`): held leases by expiry, per operator.
        sql: "create index agentacp_leases_expiring on agentacp_leases (operator, expires_at) where held;",
    },
];

/// A replica that held a session's lease when it expired: its turn was interrupted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Interrupted {
    /// The replica.
    pub(crate) owner: String,
    /// Its lease's epoch.
    pub(crate) epoch: i64,
}

/// What [`Leases::acquire`] got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Acquired {
    /// The lease is this replica's, at `epoch`; `interrupted` when the previous holder's
    /// lease had expired while held (it died, or lost the database, mid-turn).
    Taken {
        /// The new epoch.
        epoch: i64,
        /// The turn the previous holder left unfinished.
        interrupted: Option<Interrupted>,
    },
    /// `owner` holds the lease and it has not expired: a turn of the session runs there.
    Busy {
        /// The replica running the session's turn.
        owner: String,
    },
}

/// A session whose lease is held but expired ([`Leases::expired`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Expired {
    /// The session.
    pub(crate) session: String,
    /// The identity its row is kept under; `None` without one (or no row).
    pub(crate) identity: Option<String>,
}

/// What [`Leases::renew`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Renewed {
    /// Still ours, for another lease period; `cancel_requested` when another replica asked
    /// for the turn to be cancelled ([`Leases::request_cancel`]).
    Held {
        /// A cancel was asked for.
        cancel_requested: bool,
    },
    /// Another replica took the session over (ours had expired): the turn must stop.
    Lost,
}

/// The epochs of the leases this process holds, by session: what its appends are fenced by.
/// Shared by the leases (which fill it) and the session store (which checks it).
#[derive(Debug)]
pub(crate) struct Fences {
    operator: Arc<str>,
    held: Mutex<HashMap<String, i64>>,
}

impl Fences {
    fn new(operator: Arc<str>) -> Self {
        Fences {
            operator,
            held: Mutex::default(),
        }
    }

    /// The epoch of the lease this process holds on `session`, if any.
    pub(crate) fn epoch_of(&self, session: &str) -> Option<i64> {
        lock(&self.held).get(session).copied()
    }

    /// In the transaction that appends to `session` of `operator`: `Ok(())` when this
    /// process holds no lease on it, or still holds the one it took; else the refusal, in a
    /// sentence. Locks the lease row until the transaction ends, so a replica taking the
    /// session over waits for this append and reads it.
    #[cfg(test)]
    pub(crate) fn check(&self, client: &mut impl GenericClient, operator: &str, session: &str) -> Result<(), Fenced> {
        match self.epoch_of(session) {
            Some(epoch) => check_epoch(client, operator, session, epoch),
            None => Ok(()),
        }
    }

    /// The operator whose sessions these leases are of.
    pub(crate) fn operator(&self) -> &str {
        &self.operator
    }

    fn hold(&self, session: &str, epoch: i64) {
        lock(&self.held).insert(session.to_string(), epoch);
    }

    fn let_go(&self, session: &str, epoch: i64) {
        let mut held = lock(&self.held);
        if held.get(session) == Some(&epoch) {
            held.remove(session);
        }
    }
}

/// In the transaction that appends to `session` of `operator`: `Ok(())` when the lease taken
/// at `epoch` is still held (and the row locked `FOR SHARE` until the transaction ends, so a
/// replica taking the session over waits for this append and reads it); else the refusal.
pub(crate) fn check_epoch(
    client: &mut impl GenericClient,
    operator: &str,
    session: &str,
    epoch: i64,
) -> Result<(), Fenced> {
    let row = client
        .query_opt(
            "select 1 from agentacp_leases
             where operator = $1 and session_id = $2 and epoch = $3 and held
             for share",
            &[&operator, &session, &epoch],
        )
        .map_err(Fenced::Query)?;
    match row {
        Some(_) => Ok(()),
        None => Err(Fenced::Lost {
            session: session.to_string(),
            epoch,
        }),
    }
}

/// Why a fenced append was refused.
#[derive(Debug)]
pub(crate) enum Fenced {
    /// The lease at `epoch` is no longer this process's.
    Lost {
        /// The session.
        session: String,
        /// The epoch this process held.
        epoch: i64,
    },
    /// The check itself failed.
    Query(postgres::Error),
}

impl std::fmt::Display for Fenced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fenced::Lost { session, epoch } => write!(
                f,
                "this replica no longer holds the lease of session `{session}` (epoch {epoch}): another replica took the session over, so this write was refused"
            ),
            Fenced::Query(error) => write!(f, "checking the session's lease failed: {error}"),
        }
    }
}

impl std::error::Error for Fenced {}

/// The leases of one operator's sessions, taken by one replica.
#[derive(Debug, Clone)]
pub(crate) struct Leases {
    db: Database,
    operator: Arc<str>,
    replica: Arc<str>,
    lease_for: Duration,
    fences: Arc<Fences>,
}

impl Leases {
    /// The leases of `operator`'s sessions on `db`, taken as `replica` for `lease_for` at a
    /// time; the schema is migrated here.
    pub(crate) fn open(db: Database, operator: &str, replica: &str, lease_for: Duration) -> Result<Leases, DbError> {
        acp_postgres::migrate(&db, COMPONENT, &STEPS)?;
        let operator: Arc<str> = operator.into();
        Ok(Leases {
            db,
            fences: Arc::new(Fences::new(operator.clone())),
            operator,
            replica: replica.into(),
            lease_for,
        })
    }

    /// The fences of the leases this process holds (for the session store's appends).
    pub(crate) fn fences(&self) -> Arc<Fences> {
        self.fences.clone()
    }

    /// This replica's name (the leases' owner).
    pub(crate) fn replica(&self) -> &str {
        &self.replica
    }

    /// How long a lease lasts without being renewed.
    pub(crate) fn lease_for(&self) -> Duration {
        self.lease_for
    }

    /// Takes `session`'s lease, unless another holder's runs (see [`Acquired`]). Blocking.
    pub(crate) fn acquire(&self, session: &str) -> Result<Acquired, DbError> {
        self.take(session, false)?.ok_or_else(|| {
            DbError::Schema(format!(
                "the lease of session `{session}` was not found after it was made"
            ))
        })
    }

    /// Takes `session`'s lease only if it is held and expired (its holder stopped mid-turn):
    /// the new epoch and the turn left unfinished; `None` when the lease is free, running, or
    /// was taken by another replica first (it then records the turn). Blocking.
    pub(crate) fn take_expired(&self, session: &str) -> Result<Option<(i64, Interrupted)>, DbError> {
        Ok(match self.take(session, true)? {
            Some(Acquired::Taken {
                epoch,
                interrupted: Some(interrupted),
            }) => Some((epoch, interrupted)),
            _ => None,
        })
    }

    /// Up to `limit` of this operator's sessions whose lease is held but expired, oldest
    /// expiry first, with the identity each is kept under (`None`: none, or not stored).
    /// Blocking.
    pub(crate) fn expired(&self, limit: i64) -> Result<Vec<Expired>, DbError> {
        let operator = self.operator.clone();
        self.db.run(move |client| {
            let rows = client.query(
                "select l.session_id,
                        (select s.identity from agentacp_sessions s
                         where s.operator = l.operator and s.id = l.session_id limit 1)
                 from agentacp_leases l
                 where l.operator = $1 and l.held and l.expires_at <= clock_timestamp()
                 order by l.expires_at limit $2",
                &[&&*operator, &limit],
            )?;
            Ok(rows
                .iter()
                .map(|row| Expired {
                    session: row.get(0),
                    identity: row.get::<_, Option<String>>(1).filter(|identity| !identity.is_empty()),
                })
                .collect())
        })
    }

    /// Takes `session`'s lease (only a held, expired one when `expired_only`): `None` when
    /// there is none to take that way.
    fn take(&self, session: &str, expired_only: bool) -> Result<Option<Acquired>, DbError> {
        let (operator, session_id, replica) = (self.operator.clone(), session.to_string(), self.replica.clone());
        let seconds = self.lease_for.as_secs_f64();
        let acquired = self.db.run(move |client| {
            let mut tx = client.transaction()?;
            if !expired_only {
                tx.execute(
                    "insert into agentacp_leases (operator, session_id, owner, epoch, held, expires_at)
                     values ($1, $2, '', 0, false, now()) on conflict do nothing",
                    &[&&*operator, &session_id],
                )?;
            }
            let row = tx.query_opt(
                "select owner, epoch, held, expires_at <= clock_timestamp() from agentacp_leases
                 where operator = $1 and session_id = $2 for update",
                &[&&*operator, &session_id],
            )?;
            let Some(row) = row else {
                tx.commit()?;
                return Ok(None);
            };
            let (owner, epoch, held, expired): (String, i64, bool, bool) =
                (row.get(0), row.get(1), row.get(2), row.get(3));
            if held && !expired {
                tx.commit()?;
                return Ok(Some(Acquired::Busy { owner }));
            }
            if expired_only && !held {
                tx.commit()?;
                return Ok(None);
            }
            let row = tx.query_one(
                "update agentacp_leases
                 set owner = $3, epoch = epoch + 1, held = true, cancel_requested = false,
                     acquired_at = clock_timestamp(),
                     expires_at = clock_timestamp() + make_interval(secs => $4)
                 where operator = $1 and session_id = $2 returning epoch",
                &[&&*operator, &session_id, &&*replica, &seconds],
            )?;
            tx.commit()?;
            Ok(Some(Acquired::Taken {
                epoch: row.get(0),
                interrupted: held.then_some(Interrupted { owner, epoch }),
            }))
        })?;
        if let Some(Acquired::Taken { epoch, .. }) = &acquired {
            self.fences.hold(session, *epoch);
        }
        Ok(acquired)
    }

    /// Hands `session`'s lease, taken at `epoch` to record the turn `interrupted` left
    /// unfinished, back to that replica, expired, when recording failed: whoever takes it
    /// next records the turn (under the later epoch). Blocking.
    pub(crate) fn hand_back(&self, session: &str, epoch: i64, interrupted: &Interrupted) -> Result<(), DbError> {
        self.fences.let_go(session, epoch);
        let (operator, session_id, owner) = (self.operator.clone(), session.to_string(), interrupted.owner.clone());
        self.db.run(move |client| {
            client
                .execute(
                    "update agentacp_leases set owner = $4, expires_at = clock_timestamp()
                     where operator = $1 and session_id = $2 and epoch = $3 and held",
                    &[&&*operator, &session_id, &epoch, &owner],
                )
                .map(drop)
        })
    }

    /// Renews `session`'s lease at `epoch` for another lease period. Blocking.
    pub(crate) fn renew(&self, session: &str, epoch: i64) -> Result<Renewed, DbError> {
        let (operator, session_id) = (self.operator.clone(), session.to_string());
        let seconds = self.lease_for.as_secs_f64();
        self.db.run(move |client| {
            let row = client.query_opt(
                "update agentacp_leases set expires_at = clock_timestamp() + make_interval(secs => $4)
                 where operator = $1 and session_id = $2 and epoch = $3 and held
                 returning cancel_requested",
                &[&&*operator, &session_id, &epoch, &seconds],
            )?;
            Ok(match row {
                Some(row) => Renewed::Held {
                    cancel_requested: row.get(0),
                },
                None => Renewed::Lost,
            })
        })
    }

    /// Lets go of `session`'s lease at `epoch` (nothing when it is no longer ours). Blocking.
    pub(crate) fn release(&self, session: &str, epoch: i64) -> Result<(), DbError> {
        self.fences.let_go(session, epoch);
        let (operator, session_id) = (self.operator.clone(), session.to_string());
        self.db.run(move |client| {
            client
                .execute(
                    "update agentacp_leases set held = false, expires_at = clock_timestamp()
                     where operator = $1 and session_id = $2 and epoch = $3 and held",
                    &[&&*operator, &session_id, &epoch],
                )
                .map(drop)
        })
    }

    /// Asks the replica running `session`'s turn, whichever it is, to cancel it: marks the
    /// held lease (its heartbeat reads the mark) and notifies channel
    /// [`CANCEL_CHANNEL`] (its listener acts at once). Whether a turn was running. Blocking.
    pub(crate) fn request_cancel(&self, session: &str) -> Result<bool, DbError> {
        let (operator, session_id) = (self.operator.clone(), session.to_string());
        self.db.run(move |client| {
            let rows = client.query(
                "with marked as (
                   update agentacp_leases set cancel_requested = true
                   where operator = $1 and session_id = $2 and held
                   returning session_id)
                 select pg_notify('agentacp_cancel', session_id) from marked",
                &[&&*operator, &session_id],
            )?;
            Ok(!rows.is_empty())
        })
    }
}

/// The channel a cancel for a session whose turn runs on another replica is sent on; the
/// payload is the session id.
pub(crate) const CANCEL_CHANNEL: &str = "agentacp_cancel";

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use acp_postgres::{Database, Options};

    use super::*;

    fn two_replicas(test: &str, lease_for: Duration) -> Option<(Leases, Leases, Database)> {
        let cluster = test_support::postgres::cluster()?;
        let db = Database::connect(&cluster.database(test), Options::default()).expect("connects");
        let a = Leases::open(db.clone(), "op", "a", lease_for).unwrap();
        let b = Leases::open(db.clone(), "op", "b", lease_for).unwrap();
        Some((a, b, db))
    }

    /// Issue #49: one replica's running turn makes the session busy for every other; when it
    /// lets go the next takes it at a higher epoch, with nothing interrupted.
    #[test]
    fn a_held_lease_is_busy_elsewhere_and_free_once_released() {
        let Some((a, b, _db)) = two_replicas("lease_busy", Duration::from_secs(30)) else {
            return;
        };
        let Acquired::Taken { epoch, interrupted } = a.acquire("s1").unwrap() else {
            panic!("free at first")
        };
        assert_eq!((epoch, interrupted), (1, None));
        assert_eq!(b.acquire("s1").unwrap(), Acquired::Busy { owner: "a".into() });
        assert_eq!(a.acquire("s1").unwrap(), Acquired::Busy { owner: "a".into() });
        a.release("s1", 1).unwrap();
        assert_eq!(
            b.acquire("s1").unwrap(),
            Acquired::Taken {
                epoch: 2,
                interrupted: None
            }
        );
    }

    /// Issue #49: a replica that stops renewing (dead) leaves a held lease that expires; the
    /// next taker learns whose turn was interrupted, and the old holder can neither renew
    /// nor append any more (fenced).
    #[test]
    fn an_expired_lease_is_taken_over_as_interrupted_and_fences_the_old_holder() {
        let Some((a, b, db)) = two_replicas("lease_expiry", Duration::from_millis(300)) else {
            return;
        };
        assert!(matches!(a.acquire("s1").unwrap(), Acquired::Taken { epoch: 1, .. }));
        let fences = a.fences();
        let append = move |db: &Database| {
            let fences = fences.clone();
            db.run_raw(move |client| {
                let mut tx = client.transaction().map_err(|e| DbError::query("test", &e))?;
                let checked = fences.check(&mut tx, "op", "s1").map_err(|e| e.to_string());
                tx.commit().map_err(|e| DbError::query("test", &e))?;
                Ok(checked)
            })
            .unwrap()
        };
        assert_eq!(append(&db), Ok(()), "the holder appends");
        assert_eq!(
            a.renew("s1", 1).unwrap(),
            Renewed::Held {
                cancel_requested: false
            }
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let taken = loop {
            match b.acquire("s1").unwrap() {
                Acquired::Busy { .. } if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                other => break other,
            }
        };
        assert_eq!(
            taken,
            Acquired::Taken {
                epoch: 2,
                interrupted: Some(Interrupted {
                    owner: "a".into(),
                    epoch: 1
                })
            }
        );
        assert_eq!(a.renew("s1", 1).unwrap(), Renewed::Lost);
        let refused = append(&db).unwrap_err();
        assert!(
            refused.contains("no longer holds the lease of session `s1` (epoch 1)"),
            "{refused}"
        );
        // The old holder's release does not free the new holder's lease.
        a.release("s1", 1).unwrap();
        assert_eq!(b.acquire("s1").unwrap(), Acquired::Busy { owner: "b".into() });
    }

    /// Issue #49: a cancel asked for on any replica marks the running turn's lease (its
    /// heartbeat reads it) and is notified on `agentacp_cancel`; with no turn running, nothing.
    #[test]
    fn a_cancel_request_marks_the_held_lease_and_notifies() {
        let Some((a, b, db)) = two_replicas("lease_cancel", Duration::from_secs(30)) else {
            return;
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let _listener = db
            .listen(&[CANCEL_CHANNEL], move |notice| drop(tx.send(notice)))
            .unwrap();
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(10)).unwrap(),
            acp_postgres::Notice::Listening
        );
        assert!(!b.request_cancel("s1").unwrap(), "no turn runs");
        assert!(matches!(a.acquire("s1").unwrap(), Acquired::Taken { epoch: 1, .. }));
        assert!(b.request_cancel("s1").unwrap());
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(10)).unwrap(),
            acp_postgres::Notice::Notification {
                channel: CANCEL_CHANNEL.into(),
                payload: "s1".into()
            }
        );
        assert_eq!(a.renew("s1", 1).unwrap(), Renewed::Held { cancel_requested: true });
        a.release("s1", 1).unwrap();
        assert!(matches!(a.acquire("s1").unwrap(), Acquired::Taken { epoch: 2, .. }));
        assert_eq!(
            a.renew("s1", 2).unwrap(),
            Renewed::Held {
                cancel_requested: false
            }
        );
    }

    /// Waits (10 s at most) until `sql`, one boolean, is true.
    fn until(db: &Database, sql: &'static str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !db.run(move |c| c.query_one(sql, &[])).unwrap().get::<_, bool>(0) {
            assert!(std::time::Instant::now() < deadline, "never true: {sql}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Issue #49: a takeover waits for an append under way in the old holder's transaction
    /// (the row lock of the fence check), so that append is never lost behind it.
    #[test]
    fn a_takeover_waits_for_an_append_under_way() {
        let Some((a, b, db)) = two_replicas("lease_append_race", Duration::from_millis(200)) else {
            return;
        };
        assert!(matches!(a.acquire("s1").unwrap(), Acquired::Taken { epoch: 1, .. }));
        // The old holder's append: its transaction open on a connection of its own.
        let holder = db.dedicated().unwrap();
        holder.run(|c| c.batch_execute("begin")).unwrap();
        let fences = a.fences();
        holder
            .run_raw(move |c| fences.check(c, "op", "s1").map_err(|e| DbError::Schema(e.to_string())))
            .expect("still held");
        // The lease expires with the append's transaction open.
        until(
            &db,
            "select expires_at < clock_timestamp() from agentacp_leases where session_id = 's1'",
        );
        let taker = std::thread::spawn(move || b.acquire("s1").unwrap());
        until(
            &db,
            "select count(*) > 0 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
        );
        assert!(!taker.is_finished(), "the takeover waits for the append's transaction");
        holder.run(|c| c.batch_execute("commit")).unwrap();
        let taken = taker.join().unwrap();
        assert!(
            matches!(
                taken,
                Acquired::Taken {
                    epoch: 2,
                    interrupted: Some(_)
                }
            ),
            "{taken:?}"
        );
    }
}
