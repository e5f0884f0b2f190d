//! Tokens in PostgreSQL (feature `postgres`), for a fleet of replicas that must agree on them:
//! the schema (component [`COMPONENT`], applied with [`prepare`]), the changes `scaffold-aip
//! token --database` makes ([`issue`], [`revoke`]), and the reads a server makes ([`lookup`],
//! [`revoked`], [`list`]).
//!
//! Table `agentacp_tokens` holds, per token, its SHA-256 (never the token), its identity, when
//! it was issued and when it was revoked. A revoked row stays (with `revoked_at`): a hash once
//! revoked is never accepted again, so a replica may remember revocations without asking
//! twice. Every change that revokes sends `pg_notify(`[`CHANNEL`]`, identity)` in the same
//! transaction, so the replicas that listen learn of it when it commits, and only then.

use acp_postgres::postgres::{self, Client};
use acp_postgres::{Database, DbError, Migration};

pub use crate::Others;
use crate::check_identity;

/// The component name of the tokens' schema in `agentacp_schema`.
pub const COMPONENT: &str = "tokens";

/// The channel a revocation is announced on; the payload is the identity.
pub const CHANNEL: &str = "agentacp_tokens";

/// The table.
pub const TABLE: &str = "agentacp_tokens";

/// The steps of the tokens' schema.
pub static MIGRATIONS: [Migration; 1] = [Migration {
    version: 1,
    name: "tokens: sha256, identity, issued and revoked times",
    sql: "create table agentacp_tokens (
            sha256 bytea primary key check (octet_length(sha256) = 32),
            identity text not null check (identity ~ '^[A-Za-z0-9._@:-]{1,128}$'),
            created_at timestamptz not null default now(),
            revoked_at timestamptz,
            check (revoked_at is null or revoked_at >= created_at));
          create index agentacp_tokens_identity on agentacp_tokens (identity);",
}];

/// Applies the tokens' schema steps the database lacks (see [`acp_postgres::migrate`]).
pub fn prepare(database: &Database) -> Result<(), DbError> {
    acp_postgres::migrate(database, COMPONENT, &MIGRATIONS).map(drop)
}

/// Adds the token whose SHA-256 is `hash` for `identity`; with [`Others::Revoke`], revokes the
/// identity's other tokens in the same transaction (announced on [`CHANNEL`]). The number of
/// tokens revoked. Changes of one identity take turns (an advisory lock), so two rotations at
/// once leave one token in force. An error is a sentence.
pub fn issue(database: &Database, identity: &str, hash: [u8; 32], others: Others) -> Result<u64, String> {
    check_identity(identity)?;
    let shown = database.shown().to_string();
    let id = identity.to_string();
    database
        .run_raw(move |client| {
            issue_in(client, &id, &hash, others).map_err(|error| match error {
                Refusal::Said(why) => DbError::Schema(why),
                Refusal::Sql(error) => DbError::query(&shown, &error),
            })
        })
        .map_err(|error| error.to_string())
}

/// Why a change was not made.
enum Refusal {
    /// A refusal of ours, in words.
    Said(String),
    /// A statement failed.
    Sql(postgres::Error),
}

impl From<postgres::Error> for Refusal {
    fn from(error: postgres::Error) -> Refusal {
        Refusal::Sql(error)
    }
}

fn issue_in(client: &mut Client, identity: &str, hash: &[u8; 32], others: Others) -> Result<u64, Refusal> {
    let mut tx = client.transaction()?;
    lock_identity(&mut tx, identity)?;
    let in_force: i64 = tx
        .query_one(
            "select count(*) from agentacp_tokens where identity = $1 and revoked_at is null",
            &[&identity],
        )?
        .get(0);
    if in_force > 0 && others == Others::Refuse {
        return Err(Refusal::Said(format!(
            "`{identity}` already has a token; pass --replace to rotate it, --add to give it another, or `token revoke` first"
        )));
    }
    let revoked = match others {
        Others::Revoke => revoke_in(&mut tx, identity)?,
        Others::Refuse | Others::Keep => 0,
    };
    let inserted = tx.execute(
        "insert into agentacp_tokens (sha256, identity) values ($1, $2) on conflict (sha256) do nothing",
        &[&hash.as_slice(), &identity],
    )?;
    if inserted == 0 {
        return Err(Refusal::Said("this token is already in the database".to_string()));
    }
    tx.commit()?;
    Ok(revoked)
}

/// Revokes every token of `identity` in force, announcing it on [`CHANNEL`] in the same
/// transaction; how many were revoked. None is an error naming the identity.
pub fn revoke(database: &Database, identity: &str) -> Result<u64, String> {
    check_identity(identity)?;
    let shown = database.shown().to_string();
    let id = identity.to_string();
    let revoked = database
        .run(move |client| {
            let mut tx = client.transaction()?;
            lock_identity(&mut tx, &id)?;
            let revoked = revoke_in(&mut tx, &id)?;
            tx.commit()?;
            Ok(revoked)
        })
        .map_err(|error| error.to_string())?;
    if revoked == 0 {
        return Err(format!(
            "the database at {shown} has no token in force for `{identity}`"
        ));
    }
    Ok(revoked)
}

/// One change of an identity's tokens at a time, until the transaction ends.
fn lock_identity(tx: &mut postgres::Transaction<'_>, identity: &str) -> Result<(), postgres::Error> {
    tx.execute(
        "select pg_advisory_xact_lock(hashtext('agentacp_tokens'), hashtext($1))",
        &[&identity],
    )
    .map(drop)
}

/// Marks `identity`'s tokens in force revoked and, if there were any, notifies [`CHANNEL`].
fn revoke_in(tx: &mut postgres::Transaction<'_>, identity: &str) -> Result<u64, postgres::Error> {
    let revoked = tx.execute(
        "update agentacp_tokens set revoked_at = now() where identity = $1 and revoked_at is null",
        &[&identity],
    )?;
    if revoked > 0 {
        tx.execute(&format!("select pg_notify('{CHANNEL}', $1)"), &[&identity])?;
    }
    Ok(revoked)
}

/// The identity whose token in force has the SHA-256 `hash`, if any.
pub fn lookup(database: &Database, hash: [u8; 32]) -> Result<Option<String>, DbError> {
    database.run(move |client| {
        client
            .query_opt(
                "select identity from agentacp_tokens where sha256 = $1 and revoked_at is null",
                &[&hash.as_slice()],
            )
            .map(|row| row.map(|row| row.get(0)))
    })
}

/// The SHA-256 of every revoked token (of `identity` only, when given).
pub fn revoked(database: &Database, identity: Option<&str>) -> Result<Vec<[u8; 32]>, DbError> {
    let identity = identity.map(str::to_string);
    database.run(move |client| {
        let rows = client.query(
            "select sha256 from agentacp_tokens where revoked_at is not null and ($1::text is null or identity = $1)",
            &[&identity],
        )?;
        Ok(rows.iter().filter_map(|row| hash_of(row.get(0))).collect())
    })
}

fn hash_of(bytes: &[u8]) -> Option<[u8; 32]> {
    bytes.try_into().ok()
}

/// One token as [`list`] shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its identity.
    pub identity: String,
    /// Its SHA-256.
    pub hash: [u8; 32],
    /// When it was issued (UTC, `YYYY-MM-DDTHH:MM:SSZ`).
    pub created: String,
    /// When it was revoked, if it was.
    pub revoked: Option<String>,
}

/// The tokens, by identity then issue time: those in force, and with `all` the revoked ones too.
pub fn list(database: &Database, all: bool) -> Result<Vec<Listed>, DbError> {
    database.run(move |client| {
        let rows = client.query(
            "select identity, sha256,
                    to_char(created_at at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),
                    to_char(revoked_at at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')
             from agentacp_tokens where $1 or revoked_at is null
             order by identity, created_at, sha256",
            &[&all],
        )?;
        Ok(rows
            .iter()
            .filter_map(|row| {
                Some(Listed {
                    identity: row.get(0),
                    hash: hash_of(row.get(1))?,
                    created: row.get(2),
                    revoked: row.get(3),
                })
            })
            .collect())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest;
    use acp_postgres::Options;

    fn database(test: &str) -> Option<Database> {
        let cluster = test_support::postgres::cluster()?;
        let database = Database::connect(&cluster.database(test), Options::default()).expect("connects");
        prepare(&database).expect("migrates");
        Some(database)
    }

    #[test]
    fn issue_lookup_rotate_and_revoke() {
        let Some(db) = database("tokens_cycle") else { return };
        assert_eq!(issue(&db, "alice", digest("a1"), Others::Refuse), Ok(0));
        assert_eq!(lookup(&db, digest("a1")).unwrap().as_deref(), Some("alice"));
        assert_eq!(lookup(&db, digest("nope")).unwrap(), None);

        let error = issue(&db, "alice", digest("a2"), Others::Refuse).unwrap_err();
        assert!(error.contains("`alice` already has a token; pass --replace"), "{error}");
        assert_eq!(issue(&db, "alice", digest("a2"), Others::Keep), Ok(0));
        assert_eq!(
            issue(&db, "alice", digest("a3"), Others::Revoke),
            Ok(2),
            "a1 and a2 rotated out"
        );
        assert_eq!(lookup(&db, digest("a1")).unwrap(), None);
        assert_eq!(lookup(&db, digest("a3")).unwrap().as_deref(), Some("alice"));

        let error = issue(&db, "bob", digest("a1"), Others::Refuse).unwrap_err();
        assert!(
            error.contains("already in the database"),
            "a revoked hash is not issued again: {error}"
        );

        assert_eq!(revoke(&db, "alice"), Ok(1));
        let error = revoke(&db, "alice").unwrap_err();
        assert!(error.contains("no token in force for `alice`"), "{error}");
        let mut gone = revoked(&db, Some("alice")).unwrap();
        gone.sort();
        let mut expected = vec![digest("a1"), digest("a2"), digest("a3")];
        expected.sort();
        assert_eq!(gone, expected);
        assert!(revoked(&db, Some("bob")).unwrap().is_empty());
    }

    #[test]
    fn list_shows_tokens_in_force_or_all() {
        let Some(db) = database("tokens_list") else { return };
        issue(&db, "bob", digest("b"), Others::Refuse).unwrap();
        issue(&db, "alice", digest("a"), Others::Refuse).unwrap();
        revoke(&db, "bob").unwrap();
        let shown = list(&db, false).unwrap();
        assert_eq!(shown.len(), 1);
        assert_eq!((shown[0].identity.as_str(), shown[0].hash), ("alice", digest("a")));
        assert!(
            shown[0].created.ends_with('Z') && shown[0].revoked.is_none(),
            "{shown:?}"
        );
        let all = list(&db, true).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[1].identity, "bob");
        assert!(all[1].revoked.is_some(), "{all:?}");
    }

    #[test]
    fn a_revocation_is_announced_once_committed() {
        let Some(db) = database("tokens_notify") else { return };
        let (tx, rx) = std::sync::mpsc::channel();
        let _listener = db.listen(&[CHANNEL], move |notice| drop(tx.send(notice))).unwrap();
        let within = std::time::Duration::from_secs(10);
        assert_eq!(rx.recv_timeout(within).unwrap(), acp_postgres::Notice::Listening);
        issue(&db, "carol", digest("c"), Others::Refuse).unwrap();
        issue(&db, "carol", digest("c2"), Others::Revoke).unwrap();
        let rotated = acp_postgres::Notice::Notification {
            channel: CHANNEL.to_string(),
            payload: "carol".to_string(),
        };
        assert_eq!(
            rx.recv_timeout(within).unwrap(),
            rotated,
            "a rotation revokes, and says so"
        );
        revoke(&db, "carol").unwrap();
        assert_eq!(rx.recv_timeout(within).unwrap(), rotated);
    }

    #[test]
    fn bad_identities_are_refused_before_the_database() {
        let Some(db) = database("tokens_bad") else { return };
        let error = issue(&db, "a b", digest("x"), Others::Refuse).unwrap_err();
        assert!(error.contains("identity"), "{error}");
    }
}
