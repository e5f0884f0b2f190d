//! Audit chains in PostgreSQL (feature `postgres`): one chain per writer (a replica of a
//! fleet), each record the exact line a log file would hold, keyed by `(chain, seq)`, and a
//! head row per chain that says where the chain ends, updated in the same transaction as the
//! records, so that a chain cut short is told from one that is whole.
//!
//! - [`open`]: the writer's side (`AuditLog::open_database`): the schema, the chain's lock,
//!   the check of its tail, and the sink ([`sink`]).
//! - [`read`]: [`verify_database`] and [`export_database`].

mod read;
mod sink;

use std::time::{Duration, Instant};

use acp_postgres::postgres::Client;
use acp_postgres::{Database, DbError, Migration};

use super::verify::{check_record, short};
use super::{AuditError, ChainFault, FsyncPolicy, GENESIS};

pub use read::{ChainVerdict, Export, database_chains, export_database, verify_database};
pub(crate) use sink::DatabaseSink;

/// The table of records: `(chain text, seq bigint, line text)`, primary key `(chain, seq)`
/// (two records with one `seq` cannot be stored: a chain cannot fork). `line` is the record's
/// JSON line without its `\n`.
pub const RECORDS_TABLE: &str = "agentacp_audit_records";

/// The table of heads: `(chain text primary key, last_seq bigint, last_hash text,
/// updated_at timestamptz)`, the last record of each chain, written in the transaction that
/// writes the records.
pub const HEADS_TABLE: &str = "agentacp_audit_heads";

/// The longest chain name.
pub const MAX_CHAIN_NAME: usize = 128;

/// The component name of the audit schema in `agentacp_schema`.
const COMPONENT: &str = "audit";

/// The audit schema's steps ([`acp_postgres::migrate`]).
static STEPS: [Migration; 1] = [Migration {
    version: 1,
    name: "audit chains: records, heads and the append function",
    sql: SCHEMA_V1,
}];

/// Version 1: the tables, and the one statement that appends to a chain. Appending checks
/// that the head is where the writer believes it is (a second writer, had the lock been lost,
/// fails instead of forking the chain), moves the head and inserts the records, in the
/// statement's own transaction; `p_durable = false` commits it with `synchronous_commit =
/// off`. Empty arrays only touch the head: a synchronous commit that makes every earlier one
/// durable.
const SCHEMA_V1: &str = r#"
create table agentacp_audit_records (
    chain text not null,
    seq bigint not null check (seq >= 0),
    line text not null,
    primary key (chain, seq)
);
create table agentacp_audit_heads (
    chain text primary key,
    last_seq bigint not null check (last_seq >= 0),
    last_hash text not null,
    updated_at timestamptz not null default now()
);
create function agentacp_audit_append(
    p_chain text, p_prev bigint, p_seqs bigint[], p_lines text[], p_last_hash text, p_durable boolean
) returns void language plpgsql as $$
begin
    if not p_durable then
        perform set_config('synchronous_commit', 'off', true);
    end if;
    if cardinality(p_seqs) = 0 then
        update agentacp_audit_heads set updated_at = now() where chain = p_chain;
        return;
    end if;
    if p_prev < 0 then
        insert into agentacp_audit_heads (chain, last_seq, last_hash)
            values (p_chain, p_seqs[cardinality(p_seqs)], p_last_hash);
    else
        update agentacp_audit_heads
            set last_seq = p_seqs[cardinality(p_seqs)], last_hash = p_last_hash, updated_at = now()
            where chain = p_chain and last_seq = p_prev;
        if not found then
            raise exception 'the head of audit chain % is no longer at seq %: another writer appended to it',
                p_chain, p_prev;
        end if;
    end if;
    insert into agentacp_audit_records (chain, seq, line)
        select p_chain, s, l from unnest(p_seqs, p_lines) as t (s, l);
end
$$;
"#;

/// How long a new writer waits for a chain's lock held by another: time for a replica that is
/// exiting (restarted at once) to be gone.
const LOCK_GRACE: Duration = Duration::from_secs(1);

/// The advisory lock of a chain: the two-key form, (audit, the chain name's hash).
const TRY_LOCK: &str = "select pg_try_advisory_lock(hashtext('agentacp_audit'), hashtext($1))";

/// Who holds a chain's lock: the application name (which says the pid) and the client
/// address of the connection.
const HOLDER: &str = "select a.application_name, coalesce(host(a.client_addr), 'a local socket')
    from pg_locks l join pg_stat_activity a on a.pid = l.pid
    where l.locktype = 'advisory' and l.granted and l.objsubid = 2
      and l.classid = hashtext('agentacp_audit')::oid and l.objid = hashtext($1)::oid
      and l.database = (select oid from pg_database where datname = current_database())";

/// A chain opened for writing: its sink, and where it continues.
pub(crate) struct Opened {
    pub(crate) sink: DatabaseSink,
    pub(crate) next_seq: u64,
    pub(crate) prev_hash: String,
}

/// `name` when it is a chain name; else why not, in a sentence.
pub(crate) fn check_chain_name(name: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@');
    if name.is_empty() || name.len() > MAX_CHAIN_NAME || !name.chars().all(allowed) || name.starts_with('.') {
        return Err(format!(
            "`{name}` is not an audit chain name: use 1 to {MAX_CHAIN_NAME} ASCII letters, digits, `.`, `_`, `-` or `@`, \
             not starting with `.`"
        ));
    }
    Ok(())
}

/// A database error as the log's error.
pub(crate) fn db_error(error: DbError) -> AuditError {
    AuditError::Io(error.into())
}

/// Opens `chain` in `database` for writing: applies the schema, takes the chain's lock on a
/// connection of its own (`Database::dedicated`, whose thread keeps it), checks the tail, and
/// hands the connection to the sink.
pub(crate) fn open(database: &Database, chain: &str, policy: FsyncPolicy) -> Result<Opened, AuditError> {
    check_chain_name(chain).map_err(AuditError::Invalid)?;
    migrate(database)?;
    let connection = database.dedicated().map_err(db_error)?;
    let (next_seq, prev_hash) = attach(&connection, chain)?;
    let durable_each = matches!(policy, FsyncPolicy::EveryRecord | FsyncPolicy::Batched { every: 0 | 1 });
    Ok(Opened {
        sink: DatabaseSink::new(database, connection, chain, next_seq, durable_each),
        next_seq,
        prev_hash,
    })
}

/// Makes `connection` the writer of `chain`: names it, makes its synchronous commits durable,
/// takes the chain's lock, and checks the tail; where the chain goes on.
pub(crate) fn attach(connection: &Database, chain: &str) -> Result<(u64, String), AuditError> {
    let name = format!("agentacp audit {chain} pid {}", std::process::id());
    connection
        .run(move |client| {
            client.execute("select set_config('application_name', $1, false)", &[&name])?;
            // A record acknowledged under EveryRecord is on the server's disk, whatever the
            // database's default (a stronger one, such as `remote_apply`, is kept).
            let commit: String = client
                .query_one("select current_setting('synchronous_commit')", &[])?
                .get(0);
            if commit == "off" || commit == "local" {
                client.batch_execute("set synchronous_commit = on")?;
            }
            Ok(())
        })
        .map_err(db_error)?;
    lock(connection, chain)?;
    tail(connection, chain)
}

/// Where `chain` goes on, read on `connection` and checked.
pub(crate) fn tail(connection: &Database, chain: &str) -> Result<(u64, String), AuditError> {
    let owned = chain.to_string();
    let tail = connection
        .run(move |client| read_tail(client, &owned))
        .map_err(db_error)?;
    check_tail(chain, tail)
}

/// Applies the audit schema. A pool connection cut by an outage may fail the first job given
/// to it: the schema, whose steps apply once, is tried again on a transient error, as many
/// times as the pool has connections.
fn migrate(database: &Database) -> Result<(), AuditError> {
    let mut tries = database.options().connections.max(1) + 1;
    loop {
        tries -= 1;
        match acp_postgres::migrate(database, COMPONENT, &STEPS) {
            Ok(_) => return Ok(()),
            Err(error) if error.is_transient() && tries > 0 => drop(error),
            Err(error) => return Err(db_error(error)),
        }
    }
}

/// Takes `chain`'s lock on `connection`, waiting at most [`LOCK_GRACE`] for another holder.
fn lock(connection: &Database, chain: &str) -> Result<(), AuditError> {
    let deadline = Instant::now() + LOCK_GRACE;
    loop {
        let owned = chain.to_string();
        let taken: bool = connection
            .run(move |client| Ok(client.query_one(TRY_LOCK, &[&owned])?.get(0)))
            .map_err(db_error)?;
        if taken {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let owned = chain.to_string();
            let holder = connection
                .run(move |client| client.query_opt(HOLDER, &[&owned]))
                .ok()
                .flatten()
                .map(|row| format!("{}, from {}", row.get::<_, String>(0), row.get::<_, String>(1)));
            return Err(AuditError::ChainLocked {
                chain: chain.to_string(),
                database: connection.shown().to_string(),
                holder,
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The end of a chain as stored: its head row, and its last two records.
struct Tail {
    /// `(last_seq, last_hash)`.
    head: Option<(i64, String)>,
    /// `(seq, line)`, the last one first.
    last: Vec<(i64, String)>,
}

fn read_tail(client: &mut Client, chain: &str) -> Result<Tail, acp_postgres::postgres::Error> {
    let mut tx = client
        .build_transaction()
        .isolation_level(acp_postgres::postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()?;
    let head = tx
        .query_opt(
            "select last_seq, last_hash from agentacp_audit_heads where chain = $1",
            &[&chain],
        )?
        .map(|row| (row.get(0), row.get(1)));
    let last = tx
        .query(
            "select seq, line from agentacp_audit_records where chain = $1 order by seq desc limit 2",
            &[&chain],
        )?
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect();
    tx.commit()?;
    Ok(Tail { head, last })
}

/// Where a chain whose end is `tail` continues: `(next seq, prev hash)`, or why it is broken.
/// The last record's hash is recomputed and linked to the record before it, and the head must
/// name that record.
fn check_tail(chain: &str, tail: Tail) -> Result<(u64, String), AuditError> {
    let fault = |seq: Option<i64>, reason: String| {
        AuditError::ChainBroken(ChainFault {
            chain: chain.to_string(),
            seq: seq.map(|s| s as u64),
            reason,
        })
    };
    let (last_seq, last_line) = match (&tail.head, tail.last.first()) {
        (None, None) => return Ok((0, GENESIS.to_string())),
        (None, Some((seq, _))) => {
            return Err(fault(
                Some(*seq),
                "the chain has records but no head row (the head was deleted)".into(),
            ));
        }
        (Some((head_seq, _)), None) => {
            return Err(fault(
                Some(*head_seq),
                format!("the head names seq {head_seq} but the chain has no records (they were deleted)"),
            ));
        }
        (Some(_), Some(last)) => last,
    };
    let (head_seq, head_hash) = tail.head.as_ref().expect("matched above");
    if last_seq != head_seq {
        let (seq, reason) = tail_mismatch(*head_seq, *last_seq);
        return Err(fault(Some(seq), reason));
    }
    // The record before the last: its own hash (checked against its own prevHash link), to
    // which the last must link.
    let prev = match tail.last.get(1) {
        Some((seq, line)) if *seq == last_seq - 1 => {
            let own_prev = super::parse_record(line)
                .ok()
                .and_then(|v| v.get("prevHash").and_then(|p| p.as_str()).map(str::to_string));
            let hash = check_record(line.as_bytes(), *seq as u64, own_prev.as_deref())
                .map_err(|(_, reason)| fault(Some(*seq), reason))?;
            Some(hash)
        }
        Some((seq, _)) => {
            return Err(fault(
                Some(*seq + 1),
                format!("records {} to {} are missing (a gap)", seq + 1, last_seq - 1),
            ));
        }
        None if *last_seq == 0 => None,
        None => return Err(fault(Some(0), format!("records 0 to {} are missing", last_seq - 1))),
    };
    let hash = check_record(last_line.as_bytes(), *last_seq as u64, prev.as_deref())
        .map_err(|(_, reason)| fault(Some(*last_seq), reason))?;
    if &hash != head_hash {
        return Err(fault(
            Some(*last_seq),
            format!(
                "the head's hash {} is not the last record's hash {}",
                short(head_hash),
                short(&hash)
            ),
        ));
    }
    Ok((*last_seq as u64 + 1, hash))
}

/// Why a head at `head_seq` does not fit a chain whose last record is `last_seq`: the first
/// `seq` concerned (the first missing, or the first past the head), and a sentence.
pub(crate) fn tail_mismatch(head_seq: i64, last_seq: i64) -> (i64, String) {
    if head_seq > last_seq {
        let reason = format!(
            "the head names seq {head_seq} but the last record is seq {last_seq}: records {} to {head_seq} were \
             deleted (the tail was cut)",
            last_seq + 1
        );
        (last_seq + 1, reason)
    } else {
        let reason = format!(
            "the head names seq {head_seq} but records go on to seq {last_seq}: records were added without \
             moving the head"
        );
        (head_seq + 1, reason)
    }
}
