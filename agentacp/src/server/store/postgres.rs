//! Sessions and the operator's memory in PostgreSQL (feature `postgres`): every replica that
//! opens the same database sees the same sessions of an identity and the same memory.
//!
//! Schema (component `sessions`, version 1; component `memory`, version 1; see docs/store.md):
//!
//! - `agentacp_sessions`: one row per session, keyed by `(operator, identity, id)` (`identity`
//!   is `''` for the store without an identity: stdio, an open listener), with its `cwd` and
//!   `created_at` / `updated_at`; indexed for `session/list`'s order (newest first, ties by id),
//!   with and without a `cwd`.
//! - `agentacp_session_updates`: one row per recorded `update`, in order (`n`), removed with
//!   its session.
//! - `agentacp_memory`: one row per kept memory (`operator.jsonl`, `thread-<session>.jsonl`),
//!   its entries as JSON lines, replaced whole, with a version for optimistic writes.
//!
//! Durability: [`append`](crate::server::SessionStore::append)s are queued and written in
//! batches, one transaction each (see `appender.rs`), committed with `synchronous_commit = off`:
//! visible to every replica a few milliseconds after the append and kept when this process dies
//! after that, made durable on the database's disk by the next synchronous commit (at most a
//! few hundred milliseconds later, by PostgreSQL's WAL writer), which
//! [`flush_session`](crate::server::SessionStore::flush_session) (the end of each turn) forces
//! once every queued line is written. That is what the file store promises: buffered, written
//! soon, synced at the end of a turn.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use acp_postgres::postgres;
use acp_postgres::postgres::types::{ToSql, Type};
use acp_postgres::{Database, DbError, Migration};
use serde_json::value::RawValue;

use super::appender::{Appender, Appends, Target};
use crate::server::memory::{Expected, MemoryRows};
use crate::server::session::{ListPosition, SessionStore, SessionSummary, StoredSession};

/// The steps of component `sessions`.
pub static SESSION_STEPS: &[Migration] = &[Migration {
    version: 1,
    name: "sessions and their history",
    sql: "
        create table agentacp_sessions (
            pk bigint generated always as identity primary key,
            operator text not null,
            identity text not null,
            id text not null,
            cwd text not null,
            created_at timestamptz not null default now(),
            updated_at timestamptz not null default now(),
            unique (operator, identity, id)
        );
        create index agentacp_sessions_newest
            on agentacp_sessions (operator, identity, updated_at desc, id);
        create index agentacp_sessions_newest_by_cwd
            on agentacp_sessions (operator, identity, cwd, updated_at desc, id);
        create table agentacp_session_updates (
            session bigint not null references agentacp_sessions (pk) on delete cascade,
            n bigint generated always as identity,
            body text not null,
            primary key (session, n)
        );",
}];

/// The steps of component `memory`.
pub static MEMORY_STEPS: &[Migration] = &[Migration {
    version: 1,
    name: "the operator's kept memories",
    sql: "
        create table agentacp_memory (
            operator text not null,
            name text not null,
            entries text not null,
            version bigint not null,
            updated_at timestamptz not null default now(),
            primary key (operator, name)
        );",
}];

/// Applies the schema of the sessions and the memory to `database`.
pub fn migrate(database: &Database) -> std::io::Result<()> {
    // A wrong choice of how appends are written stops the start, not the first turn.
    Appends::from_env().map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidInput, error))?;
    for (component, steps) in [("sessions", SESSION_STEPS), ("memory", MEMORY_STEPS)] {
        acp_postgres::migrate(database, component, steps)
            .map_err(|error| std::io::Error::other(format!("cannot prepare the {component} schema: {error}")))?;
    }
    tracing::info!(
        database = database.shown(),
        "sessions and memory are kept in PostgreSQL"
    );
    Ok(())
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("database", &self.database.shown())
            .field("operator", &self.operator)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

/// The sessions of one identity of one operator in PostgreSQL. Cheap to make: handles on the
/// same database share its pool; clones share the writer of their appends.
#[derive(Clone)]
pub struct PostgresStore {
    database: Database,
    operator: Arc<str>,
    /// `''`: the sessions without an identity.
    identity: Arc<str>,
    /// Writes the appends in batches, each fenced by the leases this process holds.
    appender: Arc<Appender>,
}

impl PostgresStore {
    /// The sessions of `identity` (`None`: those without one) of operator `operator` in
    /// `database` (whose schema [`migrate`] applied).
    /// Its appends are grouped unless [`APPENDS_VARIABLE`](super::appender::APPENDS_VARIABLE)
    /// says `each`.
    pub fn new(database: Database, operator: &str, identity: Option<&str>) -> Self {
        let appends = Appends::from_env().unwrap_or(Appends::Grouped);
        PostgresStore::with_appends(database, operator, identity, None, appends)
    }

    /// The store, its appends written as `appends` says, each to a session whose lease this
    /// process holds (in `fences`) checked against the lease's epoch in the transaction of
    /// its batch (issue #49's fencing).
    pub(crate) fn with_appends(
        database: Database,
        operator: &str,
        identity: Option<&str>,
        fences: Option<Arc<super::lease::Fences>>,
        appends: Appends,
    ) -> Self {
        let (operator, identity): (Arc<str>, Arc<str>) = (operator.into(), identity.unwrap_or_default().into());
        let target = Target {
            database: database.clone(),
            operator: operator.clone(),
            identity: identity.clone(),
            fences,
        };
        PostgresStore {
            database,
            operator,
            identity,
            appender: Arc::new(Appender::new(target, appends)),
        }
    }

    /// The same store, its appends fenced by `fences`.
    pub(crate) fn with_fences(self, fences: Option<Arc<super::lease::Fences>>) -> Self {
        let appends = Appends::from_env().unwrap_or(Appends::Grouped);
        PostgresStore::with_appends(self.database, &self.operator, Some(&self.identity), fences, appends)
    }

    fn key(&self) -> (String, String) {
        (self.operator.to_string(), self.identity.to_string())
    }

    /// Runs `query` with the key (`$1`, `$2`) and `more` parameters; its rows.
    fn rows(&self, what: &str, query: &'static str, more: Vec<Arg>) -> std::io::Result<Vec<postgres::Row>> {
        let (operator, identity) = self.key();
        self.database
            .run(move |client| {
                let mut params: Vec<(&(dyn ToSql + Sync), Type)> =
                    vec![(&operator, Type::TEXT), (&identity, Type::TEXT)];
                params.extend(more.iter().map(Arg::param));
                client.query_typed(query, &params)
            })
            .map_err(|error| failed(what, error))
    }
}

/// A parameter of a query after the key.
enum Arg {
    Text(String),
    Int(i64),
    Time(SystemTime),
}

impl Arg {
    fn param(&self) -> (&(dyn ToSql + Sync), Type) {
        match self {
            Arg::Text(text) => (text, Type::TEXT),
            Arg::Int(number) => (number, Type::INT8),
            Arg::Time(time) => (time, Type::TIMESTAMPTZ),
        }
    }
}

/// `error` as an I/O error saying what could not be done (the database named, without its
/// password).
fn failed(what: &str, error: DbError) -> std::io::Error {
    let error = std::io::Error::from(error);
    std::io::Error::new(error.kind(), format!("cannot {what}: {error}"))
}

/// A `cwd` as the database keeps it: UTF-8 text.
fn cwd_text(cwd: &Path) -> std::io::Result<String> {
    cwd.to_str().map(str::to_string).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("the session's cwd `{}` is not UTF-8 text", cwd.display()),
        )
    })
}

/// A row of `id, cwd, updated_at`.
fn summary(row: &postgres::Row) -> SessionSummary {
    SessionSummary {
        id: row.get(0),
        cwd: PathBuf::from(row.get::<_, String>(1)),
        updated_at: Some(row.get::<_, SystemTime>(2)),
    }
}

impl SessionStore for PostgresStore {
    fn create(&self, id: &str, cwd: &Path) -> std::io::Result<()> {
        let cwd = cwd_text(cwd)?;
        let rows = self.rows(
            "record the session",
            "insert into agentacp_sessions (operator, identity, id, cwd) values ($1, $2, $3, $4)
             on conflict do nothing returning pk",
            vec![Arg::Text(id.to_string()), Arg::Text(cwd)],
        )?;
        if rows.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("a session `{id}` is stored already"),
            ));
        }
        Ok(())
    }

    fn append(&self, id: &str, update: &str) -> std::io::Result<()> {
        self.appender.push(id, update)
    }

    fn load(&self, id: &str) -> std::io::Result<Option<StoredSession>> {
        // What this store still queues for the session is written first (read your writes);
        // a failure to is for the turn that appended, not for this reader.
        if let Err(error) = self.appender.settle(None) {
            tracing::warn!(%error, session = id, "reading a session whose latest updates were not written");
        }
        let rows = self.rows(
            "read the session",
            "select s.cwd, u.body from agentacp_sessions s
             left join agentacp_session_updates u on u.session = s.pk
             where s.operator = $1 and s.identity = $2 and s.id = $3
             order by u.n",
            vec![Arg::Text(id.to_string())],
        )?;
        let Some(first) = rows.first() else { return Ok(None) };
        let cwd = PathBuf::from(first.get::<_, String>(0));
        let mut history = Vec::with_capacity(rows.len());
        for (index, row) in rows.iter().enumerate() {
            let Some(body) = row.get::<_, Option<String>>(1) else {
                continue;
            };
            match RawValue::from_string(body) {
                Ok(update) => history.push(update),
                Err(error) => {
                    tracing::warn!(session = id, update = index + 1, %error, "skipping an unreadable history update");
                }
            }
        }
        Ok(Some(StoredSession { cwd, history }))
    }

    fn flush(&self) -> std::io::Result<()> {
        // Once every queued append is committed, a synchronous commit that writes (a
        // transaction id makes it write its commit record) makes every earlier one durable.
        self.appender.drain(None)?;
        self.database
            .run(|client| client.batch_execute("select txid_current()"))
            .map_err(|error| failed("save the sessions", error))
    }

    fn flush_session(&self, id: &str) -> std::io::Result<()> {
        // Once its queued appends are committed, a synchronous commit that writes: the WAL is
        // flushed up to it, with every append before it. Its time is the turn's end, which
        // `session/list` orders by.
        self.appender.drain(Some(id))?;
        self.rows(
            "save the session",
            "update agentacp_sessions set updated_at = now()
             where operator = $1 and identity = $2 and id = $3 returning pk",
            vec![Arg::Text(id.to_string())],
        )
        .map(drop)
    }

    fn summary(&self, id: &str) -> std::io::Result<Option<SessionSummary>> {
        let rows = self.rows(
            "read the session",
            "select id, cwd, updated_at from agentacp_sessions where operator = $1 and identity = $2 and id = $3",
            vec![Arg::Text(id.to_string())],
        )?;
        Ok(rows.first().map(summary))
    }

    fn list(&self) -> std::io::Result<Vec<SessionSummary>> {
        let rows = self.rows(
            "list the sessions",
            "select id, cwd, updated_at from agentacp_sessions
             where operator = $1 and identity = $2 order by updated_at desc, id",
            Vec::new(),
        )?;
        Ok(rows.iter().map(summary).collect())
    }

    fn list_page(
        &self,
        cwd: Option<&Path>,
        after: Option<&ListPosition>,
        len: usize,
    ) -> std::io::Result<(Vec<SessionSummary>, bool)> {
        // The index range from `after` on (updated_at desc, id), as many as the page and
        // one more: whether any come after.
        let mut args = Vec::new();
        if let Some(cwd) = cwd {
            args.push(Arg::Text(cwd_text(cwd)?));
        }
        if let Some(after) = after {
            // Every row has a time; a position without one is past them all.
            let Some(at) = after.updated_at else {
                return Ok((Vec::new(), false));
            };
            args.extend([Arg::Time(at), Arg::Text(after.id.clone())]);
        }
        args.push(Arg::Int(i64::try_from(len.saturating_add(1)).unwrap_or(i64::MAX)));
        let query = match (cwd.is_some(), after.is_some()) {
            (false, false) => {
                "select id, cwd, updated_at from agentacp_sessions
                 where operator = $1 and identity = $2
                 order by updated_at desc, id limit $3"
            }
            (true, false) => {
                "select id, cwd, updated_at from agentacp_sessions
                 where operator = $1 and identity = $2 and cwd = $3
                 order by updated_at desc, id limit $4"
            }
            (false, true) => {
                "select id, cwd, updated_at from agentacp_sessions
                 where operator = $1 and identity = $2
                   and updated_at <= $3 and (updated_at < $3 or id > $4)
                 order by updated_at desc, id limit $5"
            }
            (true, true) => {
                "select id, cwd, updated_at from agentacp_sessions
                 where operator = $1 and identity = $2 and cwd = $3
                   and updated_at <= $4 and (updated_at < $4 or id > $5)
                 order by updated_at desc, id limit $6"
            }
        };
        let rows = self.rows("list the sessions", query, args)?;
        let more = rows.len() > len;
        Ok((rows.iter().take(len).map(summary).collect(), more))
    }

    fn delete(&self, id: &str) -> std::io::Result<bool> {
        // Nothing queued for it is written after its rows are gone.
        if let Err(error) = self.appender.settle(Some(id)) {
            tracing::warn!(%error, session = id, "deleting a session whose latest updates were not written");
        }
        let rows = self.rows(
            "delete the session",
            "delete from agentacp_sessions where operator = $1 and identity = $2 and id = $3 returning pk",
            vec![Arg::Text(id.to_string())],
        )?;
        Ok(!rows.is_empty())
    }
}

/// The kept memories of one operator in PostgreSQL.
#[derive(Debug, Clone)]
pub(crate) struct PostgresMemory {
    database: Database,
    operator: String,
}

impl PostgresMemory {
    pub(crate) fn new(database: Database, operator: &str) -> Self {
        PostgresMemory {
            database,
            operator: operator.to_string(),
        }
    }
}

impl MemoryRows for PostgresMemory {
    fn read(&self, name: &str) -> std::io::Result<Option<(String, i64)>> {
        let (operator, name) = (self.operator.clone(), name.to_string());
        let row = self
            .database
            .run(move |client| {
                client.query_typed_opt(
                    "select entries, version from agentacp_memory where operator = $1 and name = $2",
                    &[(&operator, Type::TEXT), (&name, Type::TEXT)],
                )
            })
            .map_err(|error| failed("read the operator's memory", error))?;
        Ok(row.map(|row| (row.get(0), row.get(1))))
    }

    fn replace(&self, name: &str, entries: &str, expected: Expected) -> std::io::Result<Option<i64>> {
        let (operator, name, entries) = (self.operator.clone(), name.to_string(), entries.to_string());
        let row = self
            .database
            .run(move |client| {
                let version = match expected {
                    Expected::Version(version) => version,
                    Expected::Absent | Expected::Any => 0,
                };
                let key: [(&(dyn ToSql + Sync), Type); 4] = [
                    (&operator, Type::TEXT),
                    (&name, Type::TEXT),
                    (&entries, Type::TEXT),
                    (&version, Type::INT8),
                ];
                match expected {
                    Expected::Absent => client.query_typed_opt(
                        "insert into agentacp_memory (operator, name, entries, version) values ($1, $2, $3, 1)
                         on conflict do nothing returning version",
                        &key[..3],
                    ),
                    Expected::Version(_) => client.query_typed_opt(
                        "update agentacp_memory set entries = $3, version = version + 1, updated_at = now()
                         where operator = $1 and name = $2 and version = $4 returning version",
                        &key,
                    ),
                    Expected::Any => client.query_typed_opt(
                        "insert into agentacp_memory (operator, name, entries, version) values ($1, $2, $3, 1)
                         on conflict (operator, name) do update
                         set entries = excluded.entries, version = agentacp_memory.version + 1, updated_at = now()
                         returning version",
                        &key[..3],
                    ),
                }
            })
            .map_err(|error| failed("save the operator's memory", error))?;
        Ok(row.map(|row| row.get(0)))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::*;
    use crate::governance::{MemoryKind, MemoryPolicy, MemorySpec};
    use crate::server::memory::MemoryBook;
    use crate::server::session::tests::{lists_and_deletes, pages_match_the_sorted_list, roundtrip};
    use crate::server::store::appender::Stage;

    /// A pool of its own on `url` (as another replica's), with the schema applied.
    fn open(url: &str) -> std::io::Result<Database> {
        let database = Database::connect(url, acp_postgres::Options::default())?;
        migrate(&database)?;
        Ok(database)
    }

    /// A fresh database with the schema, or `None` (skipped) without PostgreSQL.
    fn database(test: &str) -> Option<(Database, String)> {
        let cluster = test_support::postgres::cluster()?;
        let url = cluster.database(test);
        Some((open(&url).expect("opens"), url))
    }

    /// The store of `identity` of operator `op`.
    fn store(database: &Database, identity: Option<&str>) -> PostgresStore {
        PostgresStore::new(database.clone(), "op", identity)
    }

    #[test]
    fn the_store_keeps_the_contract_of_the_file_store() {
        let Some((db, _)) = database("contract") else { return };
        roundtrip(&store(&db, Some("roundtrip")));
        lists_and_deletes(&store(&db, Some("lists")));
        pages_match_the_sorted_list(&store(&db, Some("pages")));
        let twice = store(&db, None)
            .create("sess_1", Path::new("/w"))
            .and_then(|()| store(&db, None).create("sess_1", Path::new("/w")));
        assert_eq!(twice.unwrap_err().kind(), std::io::ErrorKind::AlreadyExists);
        // Applied once: a second start finds the schema in place.
        migrate(&db).unwrap();
    }

    /// Sessions are per identity (and per operator), as the file store's folders keep them.
    #[test]
    fn one_identity_never_sees_another_identitys_sessions() {
        let Some((db, _)) = database("identities") else { return };
        let alice = store(&db, Some("alice"));
        alice.create("sess_a", Path::new("/w")).unwrap();
        alice.append("sess_a", r#"{"n":1}"#).unwrap();
        let others = [
            store(&db, Some("bob")),
            store(&db, None),
            PostgresStore::new(db.clone(), "another-operator", Some("alice")),
        ];
        for other in &others {
            assert!(other.load("sess_a").unwrap().is_none(), "{other:?}");
            assert!(other.summary("sess_a").unwrap().is_none(), "{other:?}");
            assert!(other.list().unwrap().is_empty(), "{other:?}");
            assert_eq!(other.list_page(None, None, 10).unwrap(), (Vec::new(), false));
            other.append("sess_a", r#"{"n":2}"#).unwrap();
            assert!(!other.delete("sess_a").unwrap(), "{other:?}");
            // The same id is free for another identity.
            other.create("sess_a", Path::new("/elsewhere")).unwrap();
        }
        let history = alice.load("sess_a").unwrap().unwrap();
        assert_eq!(history.cwd, Path::new("/w"));
        assert_eq!(
            history.history.iter().map(|u| u.get()).collect::<Vec<_>>(),
            [r#"{"n":1}"#]
        );
    }

    /// Two replicas: two pools on one database see one another's sessions and history.
    #[test]
    fn a_session_made_through_one_pool_is_seen_through_another() {
        let Some((db, url)) = database("replicas") else { return };
        let (a, b) = (store(&db, Some("alice")), store(&open(&url).unwrap(), Some("alice")));
        a.create("sess_x", Path::new("/w/x")).unwrap();
        a.append("sess_x", r#"{"from":"a"}"#).unwrap();
        a.flush_session("sess_x").unwrap();
        assert_eq!(b.summary("sess_x").unwrap().unwrap().cwd, Path::new("/w/x"));
        b.append("sess_x", r#"{"from":"b"}"#).unwrap();
        // Another replica's updates are seen once written: at the latest, its turn's end.
        b.flush_session("sess_x").unwrap();
        let history = a.load("sess_x").unwrap().unwrap().history;
        assert_eq!(
            history.iter().map(|u| u.get()).collect::<Vec<_>>(),
            [r#"{"from":"a"}"#, r#"{"from":"b"}"#]
        );
        assert_eq!(b.list_page(Some(Path::new("/w/x")), None, 5).unwrap().0.len(), 1);
        assert!(b.delete("sess_x").unwrap());
        assert!(a.load("sess_x").unwrap().is_none());
    }

    /// `session/list` over 100,000 sessions: the pages are right, and every query (with and
    /// without a `cwd`, the first page and one after a cursor) reads an index range in order:
    /// no sort, and a deep page starts at its cursor rather than counting the rows before it.
    #[test]
    fn pages_over_a_hundred_thousand_sessions_read_an_index_range() {
        let Some((db, _)) = database("many") else { return };
        db.run(|client| {
            client.batch_execute(
                "insert into agentacp_sessions (operator, identity, id, cwd, updated_at)
                 select 'op', 'many', 'sess_' || lpad(n::text, 6, '0'), '/w/' || (n % 10),
                        timestamptz '2026-01-01' + n * interval '1 second'
                 from generate_series(1, 100000) n;
                 analyze agentacp_sessions",
            )
        })
        .unwrap();
        let many = store(&db, Some("many"));
        let (first, more) = many.list_page(None, None, 50).unwrap();
        assert!(more);
        assert_eq!(first[0].id, "sess_100000");
        assert_eq!(first[49].id, "sess_099951");
        let (second, _) = many.list_page(None, Some(&ListPosition::of(&first[49])), 50).unwrap();
        assert_eq!(
            (second[0].id.as_str(), second[49].id.as_str()),
            ("sess_099950", "sess_099901")
        );
        // The 9,990th of the 10,000 sessions in /w/3 is sess_000103: 10 come after it.
        let deep_after = ListPosition::of(&many.summary("sess_000103").unwrap().unwrap());
        let (deep, more) = many.list_page(Some(Path::new("/w/3")), Some(&deep_after), 50).unwrap();
        assert_eq!((deep.len(), more), (10, false), "{deep:?}");
        assert_eq!(
            (deep[0].id.as_str(), deep[9].id.as_str()),
            ("sess_000093", "sess_000003")
        );
        let at: String = db
            .run(|client| {
                client.query_one(
                    "select updated_at::text from agentacp_sessions where id = 'sess_000103'",
                    &[],
                )
            })
            .unwrap()
            .get(0);
        let select = "select id, cwd, updated_at from agentacp_sessions where operator = 'op' and identity = 'many'";
        let after = format!("and updated_at <= '{at}' and (updated_at < '{at}' or id > 'sess_000103')");
        for (query, index) in [
            (
                format!("{select} order by updated_at desc, id limit 51"),
                "agentacp_sessions_newest on",
            ),
            (
                format!("{select} and cwd = '/w/3' order by updated_at desc, id limit 51"),
                "agentacp_sessions_newest_by_cwd on",
            ),
            (
                format!("{select} {after} order by updated_at desc, id limit 51"),
                "agentacp_sessions_newest on",
            ),
            (
                format!("{select} and cwd = '/w/3' {after} order by updated_at desc, id limit 51"),
                "agentacp_sessions_newest_by_cwd on",
            ),
        ] {
            let index_range = query.contains("id >");
            let plan: String = db
                .run(move |client| {
                    let rows = client.query(&format!("explain (analyze, costs off) {query}"), &[])?;
                    Ok(rows
                        .iter()
                        .map(|row| row.get::<_, String>(0))
                        .collect::<Vec<_>>()
                        .join("\n"))
                })
                .unwrap();
            assert!(plan.contains(&format!("Scan using {index}")), "{plan}");
            assert!(!plan.contains("Sort"), "{plan}");
            // After a cursor the index is read from it on (an index condition on the time),
            // not from the top with the rows before it dropped.
            if index_range {
                let condition = plan
                    .lines()
                    .find(|line| line.contains("Index Cond"))
                    .unwrap_or_default();
                assert!(condition.contains("updated_at <="), "{plan}");
            }
        }
    }

    /// The bodies of `id`'s history, in order.
    fn bodies(sessions: &PostgresStore, id: &str) -> Vec<String> {
        let history = sessions.load(id).unwrap().unwrap().history;
        history.iter().map(|update| update.get().to_string()).collect()
    }

    /// `{"n":N}` for each N of `range`.
    fn numbered(range: std::ops::Range<u32>) -> Vec<String> {
        range.map(|n| format!(r#"{{"n":{n}}}"#)).collect()
    }

    /// Issue #49: a turn's updates are written in batches, not a transaction each: a turn of
    /// 1,000 updates takes a few transactions, and its history is every update once, in order.
    #[test]
    fn a_turn_of_a_thousand_updates_is_written_in_a_few_transactions() {
        let Some((db, _)) = database("grouped") else { return };
        let sessions = store(&db, None);
        sessions.create("sess_g", Path::new("/w")).unwrap();
        sessions.create("sess_h", Path::new("/w")).unwrap();
        let lines = numbered(0..1000);
        for (n, line) in lines.iter().enumerate() {
            sessions.append("sess_g", line).unwrap();
            if n % 100 == 0 {
                // Another session's turn side by side, in the same batches.
                sessions.append("sess_h", line).unwrap();
            }
        }
        sessions.flush_session("sess_g").unwrap();
        sessions.flush_session("sess_h").unwrap();
        let commits = sessions.appender.commits();
        assert!(commits <= 100, "{commits} transactions for 1,010 updates");
        assert_eq!(bodies(&sessions, "sess_g"), lines);
        assert_eq!(
            bodies(&sessions, "sess_h"),
            numbered(0..1000).into_iter().step_by(100).collect::<Vec<_>>()
        );
        // An update of a session not stored is dropped, as before.
        sessions.append("sess_unknown", "{}").unwrap();
        sessions.flush().unwrap();
    }

    /// `AGENTACP_SESSION_APPENDS=each`: each append is written before it returns.
    #[test]
    fn appends_written_each_are_visible_at_once_to_another_replica() {
        let Some((db, url)) = database("each") else { return };
        let sessions = PostgresStore::with_appends(db.clone(), "op", None, None, Appends::Each);
        let other = store(&open(&url).unwrap(), None);
        sessions.create("sess_e", Path::new("/w")).unwrap();
        for line in numbered(0..5) {
            sessions.append("sess_e", &line).unwrap();
        }
        assert_eq!(bodies(&other, "sess_e"), numbered(0..5));
        assert_eq!(sessions.appender.commits(), 5);
    }

    /// A batch cut by the database before its commit is written again, and one whose commit
    /// was made but not answered is not: every update once, in order.
    #[test]
    fn a_batch_cut_mid_transaction_is_written_once() {
        let Some((db, _)) = database("retried") else { return };
        let sessions = store(&db, None);
        sessions.create("sess_r", Path::new("/w")).unwrap();
        let lines = numbered(0..60);
        for (stage, part) in [(Stage::BeforeCommit, &lines[..30]), (Stage::AfterCommit, &lines[30..])] {
            let mut once = true;
            sessions.appender.set_hook(Some(Box::new(move |at, client| {
                if at == stage && std::mem::take(&mut once) {
                    // The connection ends under the transaction.
                    client.batch_execute("select pg_terminate_backend(pg_backend_pid())")?;
                }
                Ok(())
            })));
            for line in part {
                sessions.append("sess_r", line).unwrap();
            }
            sessions.flush_session("sess_r").unwrap();
        }
        assert_eq!(bodies(&sessions, "sess_r"), lines);
    }

    /// The database goes away in the middle of a batch for longer than the pool's answer
    /// deadline: the turn's next call fails in a sentence naming the database, nothing of the
    /// batch is written, and the store works again once the database is back.
    #[test]
    fn an_outage_mid_batch_is_an_error_in_a_sentence_and_the_store_recovers() {
        let Some((_, url)) = database("outage") else { return };
        let options = acp_postgres::Options {
            answer_within: std::time::Duration::from_millis(500),
            connect_within: std::time::Duration::from_millis(500),
            ..acp_postgres::Options::default()
        };
        let db = Database::connect(&url, options).unwrap();
        let name = url.rsplit('/').next().unwrap().to_string();
        let sessions = store(&db, None);
        sessions.create("sess_o", Path::new("/w")).unwrap();
        sessions.append("sess_o", r#"{"n":1}"#).unwrap();
        sessions.flush_session("sess_o").unwrap();
        // The batch's connection is cut inside its transaction (by another connection, which
        // waits until it is gone), and no new one is let in.
        let cluster = test_support::postgres::cluster().unwrap();
        let mut admin = postgres::Client::connect(&cluster.url("postgres"), postgres::NoTls).unwrap();
        let refuse = format!("alter database {name} allow_connections false");
        let database_name = name.clone();
        let mut once = true;
        sessions.appender.set_hook(Some(Box::new(move |stage, _| {
            if stage == Stage::BeforeCommit && std::mem::take(&mut once) {
                admin.batch_execute(&refuse)?;
                admin.execute(
                    "select pg_terminate_backend(pid, 60000) from pg_stat_activity where datname = $1",
                    &[&database_name],
                )?;
            }
            Ok(())
        })));
        sessions.append("sess_o", r#"{"n":2}"#).unwrap();
        sessions.append("sess_o", r#"{"n":3}"#).unwrap();
        let error = sessions.flush_session("sess_o").unwrap_err();
        let said = error.to_string();
        let shown = format!(
            "the database at postgres://postgres@127.0.0.1:{}/{name}",
            cluster.port()
        );
        assert!(
            said.starts_with("cannot record an update of the session (2 of its latest updates were not recorded): ")
                && said.contains(&shown),
            "{said}"
        );
        // Said once: the turn that failed is over.
        let allow = format!("alter database {name} allow_connections true");
        cluster.psql(&cluster.url("postgres"), &allow).unwrap();
        sessions.append("sess_o", r#"{"n":4}"#).unwrap();
        sessions.flush_session("sess_o").unwrap();
        assert_eq!(bodies(&sessions, "sess_o"), [r#"{"n":1}"#, r#"{"n":4}"#]);
    }

    /// A database slower than the stream: the queue stops at its bound and the turn waits
    /// (no memory grows without bound), then every update is written once, in order.
    #[test]
    fn a_stalled_database_makes_the_turn_wait_at_the_queues_bound() {
        use crate::server::store::appender::{MOST_PER_BATCH, MOST_QUEUED};
        let Some((db, url)) = database("backpressure") else {
            return;
        };
        let sessions = store(&db, None);
        sessions.create("sess_b", Path::new("/w")).unwrap();
        // Another connection holds the history table: the batches wait for it.
        let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        admin
            .batch_execute("begin; lock table agentacp_session_updates in exclusive mode")
            .unwrap();
        let total = MOST_QUEUED + MOST_PER_BATCH + 100;
        let lines: Vec<String> = numbered(0..u32::try_from(total).unwrap());
        let pushed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let turn = {
            let (sessions, lines, pushed) = (sessions.clone(), lines.clone(), pushed.clone());
            std::thread::spawn(move || {
                for line in &lines {
                    sessions.append("sess_b", line).unwrap();
                    pushed.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            })
        };
        while sessions.appender.queued() < MOST_QUEUED {
            std::thread::yield_now();
        }
        assert_eq!(sessions.appender.queued(), MOST_QUEUED);
        assert!(pushed.load(std::sync::atomic::Ordering::SeqCst) <= MOST_QUEUED + MOST_PER_BATCH);
        assert!(!turn.is_finished(), "the turn waits for room");
        admin.batch_execute("commit").unwrap();
        turn.join().unwrap();
        sessions.flush_session("sess_b").unwrap();
        assert_eq!(bodies(&sessions, "sess_b"), lines);
    }

    /// Issue #49's fence, per batch: once another replica holds the session's lease, the
    /// updates this replica appended under its old lease are refused (none written, the turn
    /// told so), while another session's in the same batches are written.
    #[test]
    fn a_lost_lease_refuses_its_sessions_updates_in_the_batch() {
        let Some((db, _)) = database("fence") else { return };
        let leases =
            super::super::lease::Leases::open(db.clone(), "op", "a", std::time::Duration::from_secs(60)).unwrap();
        let sessions = PostgresStore::new(db.clone(), "op", None).with_fences(Some(leases.fences()));
        for id in ["sess_f", "sess_free"] {
            sessions.create(id, Path::new("/w")).unwrap();
        }
        assert!(matches!(
            leases.acquire("sess_f").unwrap(),
            super::super::lease::Acquired::Taken { epoch: 1, .. }
        ));
        let lines = numbered(0..20);
        for line in &lines[..10] {
            sessions.append("sess_f", line).unwrap();
        }
        sessions.flush_session("sess_f").unwrap();
        // Another replica takes the session over (this one's lease had run out).
        db.run(|client| client.batch_execute("update agentacp_leases set owner = 'b', epoch = 2"))
            .unwrap();
        // The turn is told at its next append once a batch was refused, else at its end.
        let mut told = Vec::new();
        for line in &lines[10..] {
            told.extend(sessions.append("sess_f", line).err());
            sessions.append("sess_free", line).unwrap();
        }
        told.extend(sessions.flush_session("sess_f").err());
        assert!(!told.is_empty(), "the turn is told");
        for error in told {
            assert_eq!(error.kind(), std::io::ErrorKind::PermissionDenied);
            assert_eq!(
                error.to_string(),
                "the update was not recorded: another replica holds the session now"
            );
        }
        sessions.flush_session("sess_free").unwrap();
        assert_eq!(bodies(&sessions, "sess_f"), lines[..10]);
        assert_eq!(bodies(&sessions, "sess_free"), lines[10..]);
    }

    fn book(db: &Database, kind: MemoryKind, policy: MemoryPolicy) -> MemoryBook {
        let spec = MemorySpec {
            kind,
            policy,
            share_with: Vec::new(),
            external: None,
        };
        let rows: Arc<dyn MemoryRows> = Arc::new(PostgresMemory::new(db.clone(), "op"));
        // The folder is never used: memories are rows.
        MemoryBook::new(Some(spec), Path::new("/nonexistent-state")).with_rows(Some(rows))
    }

    /// Two replicas appending to the operator's memory: both entries are kept (the second
    /// writer adds its own after the first's), and a later session of either sees them.
    #[test]
    fn two_replicas_appending_to_the_operator_memory_lose_nothing() {
        let Some((db, url)) = database("memory_merge") else {
            return;
        };
        let other = open(&url).unwrap();
        let (a, b) = (
            book(&db, MemoryKind::OperatorContext, MemoryPolicy::AppendOnly),
            book(&other, MemoryKind::OperatorContext, MemoryPolicy::AppendOnly),
        );
        let (on_a, on_b) = (a.for_session("sess_1"), b.for_session("sess_2"));
        on_a.append(json!("from a"));
        on_b.append(json!("from b"));
        a.persist("sess_1", &on_a, None);
        b.persist("sess_2", &on_b, None);
        assert_eq!(on_b.entries(), [json!("from a"), json!("from b")]);
        assert_eq!(
            a.for_session("sess_3").entries(),
            [json!("from a"), json!("from b")],
            "read again"
        );
        let fresh = book(&db, MemoryKind::OperatorContext, MemoryPolicy::AppendOnly);
        assert_eq!(fresh.for_session("sess_4").len(), 2);
        assert!(!Path::new("/nonexistent-state").exists());
    }

    /// A memory summarised on one replica replaces what another wrote meanwhile (the last
    /// write wins); a thread memory comes back with its session on another replica.
    #[test]
    fn a_summarised_memory_wins_and_a_thread_follows_its_session() {
        let Some((db, url)) = database("memory_lww") else {
            return;
        };
        let other = open(&url).unwrap();
        let (a, b) = (
            book(&db, MemoryKind::OperatorContext, MemoryPolicy::Summarising),
            book(&other, MemoryKind::OperatorContext, MemoryPolicy::Summarising),
        );
        let (on_a, on_b) = (a.for_session("sess_1"), b.for_session("sess_2"));
        on_a.append(json!(1));
        a.persist("sess_1", &on_a, None);
        on_b.summarise(vec![json!("summary")]).unwrap();
        b.persist("sess_2", &on_b, None);
        assert_eq!(a.for_session("sess_3").entries(), [json!("summary")]);
        let (ta, tb) = (
            book(&db, MemoryKind::Thread, MemoryPolicy::Summarising),
            book(&other, MemoryKind::Thread, MemoryPolicy::Summarising),
        );
        let thread = ta.for_session("sess_t");
        thread.append(json!("t"));
        ta.close("sess_t", &thread, None);
        assert_eq!(tb.for_session("sess_t").entries(), [json!("t")]);
        assert!(tb.for_session("sess_u").is_empty());
    }
}
