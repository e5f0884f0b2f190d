//! The sink of a database chain: the connection that holds the chain's lock (a dedicated
//! [`Database`] of one connection on a thread of its own, never opened again once lost), so
//! every statement is waited for at most the pool's deadline, and a lost connection (and with
//! it the lock) stops the log instead of letting it go on unlocked.

use std::io;
use std::time::{Duration, Instant};

use acp_postgres::Database;

use crate::AuditSink;

/// How often a chain whose connection was lost tries to attach again: the records refused
/// meanwhile are refused at once, not after a connection attempt each.
const RESUME_EVERY: Duration = Duration::from_secs(1);

/// Appends to one chain through its locked connection.
pub(crate) struct DatabaseSink {
    /// The pool, for a new connection after an outage.
    pool: Database,
    connection: Database,
    /// When the sink last tried to resume.
    tried: Option<Instant>,
    chain: String,
    /// The last `seq` committed, `-1` for an empty chain.
    last_seq: i64,
    /// Commit every record synchronously (EveryRecord), else with `synchronous_commit = off`.
    durable_each: bool,
    /// Records committed since the last synchronous commit.
    undurable: bool,
}

impl DatabaseSink {
    /// A sink on `connection` (holding the chain's lock); the chain continues at `next_seq`.
    pub(crate) fn new(
        pool: &Database,
        connection: Database,
        chain: &str,
        next_seq: u64,
        durable_each: bool,
    ) -> DatabaseSink {
        DatabaseSink {
            pool: pool.clone(),
            connection,
            tried: None,
            chain: chain.to_string(),
            last_seq: next_seq as i64 - 1,
            durable_each,
            undurable: false,
        }
    }

    /// Runs the append function: `lines` (with their `seq`s) after the head at
    /// `self.last_seq`, the head then at `last_hash`.
    fn append_rows(&self, seqs: Vec<i64>, lines: Vec<String>, last_hash: String, durable: bool) -> io::Result<()> {
        let (chain, prev) = (self.chain.clone(), self.last_seq);
        self.connection
            .run(move |client| {
                client.execute(
                    "select agentacp_audit_append($1, $2, $3, $4, $5, $6)",
                    &[&chain, &prev, &seqs, &lines, &last_hash, &durable],
                )
            })
            .map(|_| ())
            .map_err(io::Error::from)
    }
}

impl AuditSink for DatabaseSink {
    /// A line without its `seq` and `hash` given: read from the line itself.
    fn append(&mut self, line: &str) -> io::Result<()> {
        let record = crate::parse_record(line.trim_end_matches('\n')).map_err(io::Error::other)?;
        let seq = record.get("seq").and_then(serde_json::Value::as_u64);
        let hash = record.get("hash").and_then(serde_json::Value::as_str);
        match (seq, hash) {
            (Some(seq), Some(hash)) => self.append_record(seq, hash, line),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "an audit line without a seq and a hash cannot be appended to a database chain",
            )),
        }
    }

    fn append_record(&mut self, seq: u64, hash: &str, line: &str) -> io::Result<()> {
        if seq as i64 != self.last_seq + 1 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "record {seq} does not follow record {} of audit chain {}",
                    self.last_seq, self.chain
                ),
            ));
        }
        let line = line.strip_suffix('\n').unwrap_or(line).to_string();
        self.append_rows(vec![seq as i64], vec![line], hash.to_string(), self.durable_each)?;
        self.last_seq = seq as i64;
        self.undurable = !self.durable_each;
        Ok(())
    }

    /// Finds the chain's end again after a failure: on the same connection when it still
    /// works (it still holds the lock), else on a new one that takes the lock and checks the
    /// tail (a replica on the other side of an outage). At most once per [`RESUME_EVERY`].
    fn resume(&mut self) -> Option<io::Result<(u64, String)>> {
        if self.tried.is_some_and(|at| at.elapsed() < RESUME_EVERY) {
            return Some(Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the database was unreachable less than a second ago",
            )));
        }
        self.tried = Some(Instant::now());
        let resumed = super::tail(&self.connection, &self.chain).or_else(|_| {
            let connection = self.pool.dedicated().map_err(super::db_error)?;
            let end = super::attach(&connection, &self.chain)?;
            self.connection = connection;
            Ok(end)
        });
        Some(match resumed {
            Ok((next_seq, prev_hash)) => {
                self.last_seq = next_seq as i64 - 1;
                self.undurable = false;
                self.tried = None;
                Ok((next_seq, prev_hash))
            }
            Err(crate::AuditError::Io(error)) => Err(error),
            Err(error) => Err(io::Error::other(error.to_string())),
        })
    }

    /// A synchronous commit (touching the head), which makes every earlier commit durable.
    fn sync(&mut self) -> io::Result<()> {
        if !self.undurable {
            return Ok(());
        }
        self.append_rows(Vec::new(), Vec::new(), String::new(), true)?;
        self.undurable = false;
        Ok(())
    }
}
