//! `acp-audit`: the AIP-7 audit log shared by the `agentacp` runtime (which writes it, as
//! `agentacp::audit`) and `scaffold-aip audit verify` (which checks it); a crate of its own so
//! the CLI can verify logs without depending on the runtime.
//!
//! The audit log: AIP-7 `audit-event` records, one JSON object per line, hash-chained.
//!
//! Every record carries `seq` (0, 1, 2, … without gaps), `prevHash` (`GENESIS` for the first
//! record, else the previous record's `hash`) and `hash`, the lowercase hex SHA-256 of the
//! [canonical JSON](canonical_json) of the record without `hash`. Changing, removing, repeating
//! or reordering a record therefore breaks the chain at that line, which [`verify`] (and
//! `scaffold-aip audit verify FILE`) reports.
//!
//! [`AuditLog::record`] returns only once the line is written and, under the default
//! [`FsyncPolicy::EveryRecord`], synced to disk; the runtime records an event before it sends
//! the matching wire message. Tool calls and lifecycle transitions carry the AIP-44 mirror
//! under `metadata.aip44` ([`AuditEvent::tool_call`], [`AuditEvent::lifecycle`]).
//!
//! [`AuditLog::open`] continues an existing log only after verifying it, holds an exclusive
//! advisory lock on it while open (a second writer gets [`AuditError::Locked`]), and recovers
//! a last line torn by a crash: the torn bytes are moved aside and an `audit.recovered` record
//! continues the chain ([`AuditLog::recovery`]). Lines are capped at [`MAX_LINE_BYTES`], and
//! a record repeating a key never verifies. A record nests at most [`MAX_WRITE_DEPTH`] levels
//! (a deeper value is kept as its JSON text under [`DEEP_JSON_KEY`]), and readers accept up to
//! [`MAX_READ_DEPTH`]: read a log's lines with [`parse_record`].
//!
//! With the cargo feature `postgres`, a log can also be a chain in a PostgreSQL database, one
//! per writer (a replica of a fleet): [`AuditLog::open_database`], checked by
//! [`verify_database`] and exported to files the file verifier accepts by [`export_database`].
//!
//! `docs/audit.md` describes the format, the mirror mapping and the durability guarantees.

mod background;
mod canonical;
mod depth;
mod file;
#[cfg(feature = "postgres")]
mod postgres;
mod record;
mod recover;
mod sink;
mod strict;
mod time;
mod verify;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

pub use background::BackgroundSync;
pub use canonical::canonical_json;
pub use depth::{DEEP_JSON_KEY, MAX_READ_DEPTH, MAX_WRITE_DEPTH, PEER_READ_DEPTH, bound, bound_text, text_depth};
#[cfg(feature = "postgres")]
pub use postgres::{
    ChainVerdict, Export, HEADS_TABLE, MAX_CHAIN_NAME, RECORDS_TABLE, database_chains, export_database, verify_database,
};
pub use record::{
    Actor, Approval, AuditEvent, AuditRecord, DOCTYPE, GENESIS, HASH_ALG, Lifecycle, PolicyRef, SCHEMA_TAG, Subject,
    ToolCallMirror, ToolOutcomeRecord,
};
pub use recover::{RECOVERED_ACTION, Recovery};
pub use sink::{AuditSink, FileSink, MemorySink};
pub use strict::parse_record;
pub use time::rfc3339_millis;
pub use verify::{ChainFault, MAX_LINE_BYTES, VerifyError, VerifySummary, verify, verify_file};

/// The file name of a governance channel's log in the operator's state folder:
/// `<name>.jsonl` for the AIP-9 channel `audit:<name>` (characters other than ASCII letters,
/// digits, `-` and `_` become `_`), `audit.jsonl` without such a channel. The runtime opens it,
/// and `scaffold-aip conform` finds it, by this name.
pub fn channel_log_name(channel: Option<&str>) -> String {
    let name = channel.and_then(|c| c.strip_prefix("audit:")).unwrap_or("audit");
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{name}.jsonl")
}

/// When the log makes written records durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncPolicy {
    /// Sync after every record, before [`AuditLog::record`] returns. A crash loses nothing
    /// that was recorded.
    #[default]
    EveryRecord,
    /// Sync after every `every` records (0 counts as 1), on [`AuditLog::flush`] and when the
    /// last handle is dropped. A crash can lose up to `every - 1` records; the records before
    /// them stay intact and verifiable. From a batch of 4, with a sink that offers it
    /// ([`AuditSink::background_sync`]; a file does), the syncs are made by a thread of the
    /// log's own, asked for once half a batch waits: a writer waits for the disk only when
    /// its record would leave a whole batch unsynced.
    Batched {
        /// How many records to write between syncs.
        every: usize,
    },
    /// Never sync on its own (only on [`AuditLog::flush`]); the OS decides when data reaches
    /// the disk.
    Never,
}

/// Why the log could not record (or open).
#[derive(Debug)]
#[non_exhaustive]
pub enum AuditError {
    /// Reading, writing or syncing the log failed.
    Io(std::io::Error),
    /// The existing log's chain is broken; nothing is appended to it.
    Broken(VerifyError),
    /// The event would not be a valid AIP-7 `audit-event` (e.g. a malformed `action`).
    Invalid(String),
    /// An earlier write or sync failed, so the log's end is unknown and it records no more (a
    /// database chain goes on once it has found its end again: [`AuditSink::resume`]).
    Failed(String),
    /// Another open handle holds the log's write lock: a second writer would fork the chain.
    Locked {
        /// The log.
        path: PathBuf,
        /// The pid of the holder, when it could be told (Linux: from `/proc/locks`).
        holder: Option<u32>,
    },
    /// A database chain is broken (feature `postgres`); nothing is appended to it.
    ChainBroken(ChainFault),
    /// Another writer holds the database chain's lock (feature `postgres`): a second writer
    /// would fork the chain.
    ChainLocked {
        /// The chain.
        chain: String,
        /// The database, without its password.
        database: String,
        /// Who holds it, when it could be told (the holder's connection: its application
        /// name, which says its pid, and its client address).
        holder: Option<String>,
    },
}

impl fmt::Display for AuditError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuditError::Io(error) => write!(f, "audit log I/O error: {error}"),
            AuditError::Broken(error) => write!(f, "audit log chain is broken, refusing to append: {error}"),
            AuditError::Invalid(reason) => write!(f, "invalid audit event: {reason}"),
            AuditError::Failed(reason) => write!(f, "audit log unusable after an earlier failure: {reason}"),
            AuditError::Locked { path, holder } => {
                let who = match holder {
                    Some(pid) if *pid == std::process::id() => format!("another handle in this process (pid {pid})"),
                    Some(pid) => format!("another process (pid {pid})"),
                    None => "another process".to_string(),
                };
                write!(
                    f,
                    "the audit log {} is locked for writing by {who}; a second writer would fork its \
                     chain, so this one does not start (stop the other writer, or give this one its own log)",
                    path.display()
                )
            }
            AuditError::ChainBroken(fault) => write!(f, "audit chain is broken, refusing to append: {fault}"),
            AuditError::ChainLocked {
                chain,
                database,
                holder,
            } => {
                let who = holder
                    .as_deref()
                    .map_or_else(|| "another writer".to_string(), |h| format!("another writer ({h})"));
                write!(
                    f,
                    "the audit chain {chain} in the database at {database} is held by {who}; a second writer \
                     would fork the chain, so this one does not start (stop the other replica, or give this one \
                     its own name with AGENTACP_REPLICA)"
                )
            }
        }
    }
}

impl std::error::Error for AuditError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AuditError::Io(error) => Some(error),
            AuditError::Broken(error) => Some(error),
            AuditError::Invalid(_)
            | AuditError::Failed(_)
            | AuditError::Locked { .. }
            | AuditError::ChainBroken(_)
            | AuditError::ChainLocked { .. } => None,
        }
    }
}

/// A handle on one audit chain. Clones share the chain; records from several threads are
/// serialised. `record` blocks for the write (and sync): async code should call it where
/// blocking is acceptable.
#[derive(Clone)]
pub struct AuditLog {
    chain: Option<Arc<Mutex<Chain>>>,
    recovery: Option<Arc<Recovery>>,
    /// Fields added to every record's `metadata` ([`AuditLog::stamped`]).
    stamp: Option<Arc<Stamp>>,
}

/// Fields merged into `metadata.<namespace>` of every record a stamped handle writes.
struct Stamp {
    namespace: String,
    fields: serde_json::Map<String, serde_json::Value>,
}

struct Chain {
    sink: Box<dyn AuditSink>,
    policy: FsyncPolicy,
    next_seq: u64,
    prev_hash: String,
    /// Records appended since the last sync (made in line; see `syncer`).
    unsynced: usize,
    /// Set once a write or sync fails: the log then refuses every call.
    failed: Option<String>,
    /// The thread that makes a batched log's syncs, which then counts what is unsynced.
    syncer: Option<background::Syncer>,
}

impl Chain {
    /// A chain that continues after record `next_seq - 1` (hash `prev_hash`) in `sink`.
    fn new(sink: Box<dyn AuditSink>, policy: FsyncPolicy, next_seq: u64, prev_hash: String) -> Chain {
        let syncer = match policy {
            FsyncPolicy::Batched { every } if every >= background::LEAST_BATCH => sink
                .background_sync()
                // Without a thread, the syncs are made in line, as for a smaller batch.
                .and_then(|sync| background::Syncer::start(sync).ok()),
            _ => None,
        };
        Chain {
            sink,
            policy,
            next_seq,
            prev_hash,
            unsynced: 0,
            failed: None,
            syncer,
        }
    }

    /// `Ok` when the log may append: it has not failed, or its sink found its end again
    /// ([`AuditSink::resume`]; a database chain after an outage), and it goes on from there.
    fn usable(&mut self) -> Result<(), AuditError> {
        let Some(reason) = &self.failed else {
            return Ok(());
        };
        match self.sink.resume() {
            None => Err(AuditError::Failed(reason.clone())),
            Some(Err(error)) => Err(AuditError::Failed(format!("{reason}; not resumed: {error}"))),
            Some(Ok((next_seq, prev_hash))) => {
                self.next_seq = next_seq;
                self.prev_hash = prev_hash;
                self.unsynced = 0;
                self.failed = None;
                Ok(())
            }
        }
    }

    /// How many records are not known to be durable.
    fn unsynced(&mut self) -> Result<u64, AuditError> {
        let Some(syncer) = &self.syncer else {
            return Ok(self.unsynced as u64);
        };
        syncer.unsynced().map_err(|reason| {
            self.failed = Some(reason.clone());
            AuditError::Failed(reason)
        })
    }

    fn sync(&mut self) -> Result<(), AuditError> {
        match self.sink.sync() {
            Ok(()) => {
                self.unsynced = 0;
                if let Some(syncer) = &self.syncer {
                    syncer.synced_all();
                }
                Ok(())
            }
            Err(error) => {
                self.failed = Some(format!(
                    "sync after record {} failed: {error}",
                    self.next_seq.saturating_sub(1)
                ));
                Err(AuditError::Io(error))
            }
        }
    }
}

impl Drop for Chain {
    fn drop(&mut self) {
        let unsynced = match self.syncer.take() {
            Some(syncer) => syncer.stop(),
            None => self.unsynced as u64,
        };
        if unsynced > 0 && self.failed.is_none() {
            let _ = self.sink.sync();
        }
    }
}

impl fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(chain) = &self.chain else {
            return f.write_str("AuditLog(off)");
        };
        match chain.lock() {
            Ok(chain) => f
                .debug_struct("AuditLog")
                .field("policy", &chain.policy)
                .field("next_seq", &chain.next_seq)
                .field("failed", &chain.failed)
                .field("recovery", &self.recovery)
                .finish_non_exhaustive(),
            Err(_) => f.write_str("AuditLog(poisoned)"),
        }
    }
}

impl AuditLog {
    /// Opens the log file at `path` for writing (creating it and its parent folders when
    /// absent) and continues its chain: the next record gets the next `seq` and links to the
    /// last `hash`.
    ///
    /// - The file is locked (an exclusive advisory `flock`, held until the last handle is
    ///   dropped): when another handle, in this process or another, has it open for writing,
    ///   this is [`AuditError::Locked`], naming the file and the holder's pid when known.
    /// - The existing records are verified first. A broken chain is [`AuditError::Broken`],
    ///   naming the line, and the file is left untouched; so is a line over
    ///   [`MAX_LINE_BYTES`] and a repeated key.
    /// - A last line without its `\n` (a write interrupted by a crash) is recovered: its
    ///   bytes are copied to `FILE.torn-SEQ` next to the log, and an `audit.recovered` record
    ///   (saying which line, offset and size, where the bytes went and their SHA-256) is
    ///   written in its place, synced whatever the policy. [`AuditLog::recovery`] says so.
    /// - Anything but a regular file (a FIFO, a device) is refused ([`AuditError::Io`]).
    pub fn open(path: &Path, policy: FsyncPolicy) -> Result<AuditLog, AuditError> {
        let file = file::open_for_append(path).map_err(AuditError::Io)?;
        file::lock_exclusive(&file, path)?;
        let verify::Scan { summary, torn } = verify::scan(std::io::BufReader::new(&file))?;
        let mut next_seq = summary.records;
        let mut prev_hash = summary.last_hash.unwrap_or_else(|| GENESIS.to_string());
        let recovery = match torn {
            None => None,
            Some(torn) => {
                let (recovery, record) = recover::recover(&file, path, torn, next_seq, &prev_hash)?;
                next_seq = record.seq + 1;
                prev_hash = record.hash;
                Some(Arc::new(recovery))
            }
        };
        let chain = Chain::new(Box::new(FileSink::from_file(file)), policy, next_seq, prev_hash);
        Ok(AuditLog {
            chain: Some(Arc::new(Mutex::new(chain))),
            recovery,
            stamp: None,
        })
    }

    /// Opens the chain `chain` in `database` for writing (feature `postgres`), creating the
    /// audit tables when absent, and continues it: the next record gets the next `seq`.
    ///
    /// - One writer per chain: a session-level advisory lock on a connection of the log's own,
    ///   held while the log is open (released when the last handle is dropped, or the process
    ///   or its connection dies). Another holder is [`AuditError::ChainLocked`] after a grace
    ///   of a second.
    /// - The chain's tail is checked first: its head row names the last record, whose hash is
    ///   recomputed and linked to the one before it ([`AuditError::ChainBroken`] otherwise,
    ///   naming the chain and `seq`). [`verify_database`] checks the whole chain.
    /// - Every record is committed before [`record`](AuditLog::record) returns: synchronously
    ///   under [`FsyncPolicy::EveryRecord`]; under `Batched` and `Never` with
    ///   `synchronous_commit = off`, made durable on the server by every `every`-th record and
    ///   by [`flush`](AuditLog::flush) (a replica killed loses nothing; a crash of the database
    ///   server may lose what was not yet durable).
    /// - When the database goes away, the record being written fails, and later ones are
    ///   refused ([`AuditError::Failed`]) until the log's connection is back: it then retakes
    ///   the lock, checks the tail and goes on from it by itself ([`AuditSink::resume`]).
    /// - `chain` is 1 to [`MAX_CHAIN_NAME`] ASCII letters, digits, `.`, `_`, `-` or `@`, not
    ///   starting with `.` (an export writes `<chain>.jsonl`).
    #[cfg(feature = "postgres")]
    pub fn open_database(
        database: &acp_postgres::Database,
        chain: &str,
        policy: FsyncPolicy,
    ) -> Result<AuditLog, AuditError> {
        let opened = postgres::open(database, chain, policy)?;
        let chain = Chain::new(Box::new(opened.sink), policy, opened.next_seq, opened.prev_hash);
        Ok(AuditLog {
            chain: Some(Arc::new(Mutex::new(chain))),
            recovery: None,
            stamp: None,
        })
    }

    /// A new chain (from `GENESIS`) written to `sink`, synced after every record.
    pub fn with_sink(sink: Box<dyn AuditSink>) -> AuditLog {
        AuditLog::with_sink_and_policy(sink, FsyncPolicy::EveryRecord)
    }

    /// A new chain (from `GENESIS`) written to `sink`, synced as `policy` says.
    pub fn with_sink_and_policy(sink: Box<dyn AuditSink>, policy: FsyncPolicy) -> AuditLog {
        let chain = Chain::new(sink, policy, 0, GENESIS.to_string());
        AuditLog {
            chain: Some(Arc::new(Mutex::new(chain))),
            recovery: None,
            stamp: None,
        }
    }

    /// A log that records nothing (`audit.kind: off`).
    pub fn off() -> AuditLog {
        AuditLog {
            chain: None,
            recovery: None,
            stamp: None,
        }
    }

    /// What [`open`](AuditLog::open) recovered: `Some` when the log's last line was torn and
    /// has been moved aside and replaced by an `audit.recovered` record. The caller should
    /// report it (the runtime logs it as a warning).
    pub fn recovery(&self) -> Option<&Recovery> {
        self.recovery.as_deref()
    }

    /// A handle on the same chain whose every record carries `fields` in
    /// `metadata.<namespace>` (a field the event sets itself is kept; a stamp on this handle
    /// is replaced). E.g. the identity of the client a connection serves, on every record made
    /// for it.
    pub fn stamped(&self, namespace: &str, fields: serde_json::Map<String, serde_json::Value>) -> AuditLog {
        AuditLog {
            stamp: Some(Arc::new(Stamp {
                namespace: namespace.to_string(),
                fields,
            })),
            ..self.clone()
        }
    }

    /// Whether this is [`AuditLog::off`].
    pub fn is_off(&self) -> bool {
        self.chain.is_none()
    }

    /// Appends `event` as the next record: fills in `seq`, `ts`, `prevHash`, `hash` and
    /// `hashAlg`, writes the line, and syncs it if the policy says so, all before returning.
    ///
    /// An event the AIP-7 schema would reject, or whose record would be longer than
    /// [`MAX_LINE_BYTES`], is [`AuditError::Invalid`] and writes nothing.
    /// After a failed write or sync every later call is [`AuditError::Failed`]: the log never
    /// appends after a line it is unsure of. On an [`off`](AuditLog::off) log nothing is
    /// written, and the record returned is the one that would start a chain.
    pub fn record(&self, mut event: AuditEvent) -> Result<AuditRecord, AuditError> {
        if let Some(stamp) = &self.stamp {
            let metadata = event.metadata.get_or_insert_with(Default::default);
            let namespace = metadata
                .entry(stamp.namespace.clone())
                .or_insert_with(|| serde_json::Value::Object(Default::default()));
            if let Some(namespace) = namespace.as_object_mut() {
                for (key, value) in &stamp.fields {
                    namespace.entry(key.clone()).or_insert_with(|| value.clone());
                }
            }
        }
        event.validate().map_err(AuditError::Invalid)?;
        let Some(chain) = &self.chain else {
            return Ok(AuditRecord::build(event, 0, rfc3339_millis(SystemTime::now()), GENESIS));
        };
        let mut chain = chain
            .lock()
            .map_err(|_| AuditError::Failed("a writer panicked".into()))?;
        chain.usable()?;
        // A background sync that failed stops the log before its next record.
        chain.unsynced()?;
        let record = AuditRecord::build(
            event,
            chain.next_seq,
            rfc3339_millis(SystemTime::now()),
            &chain.prev_hash,
        );
        let line = record.line();
        if line.len() - 1 > MAX_LINE_BYTES {
            return Err(AuditError::Invalid(format!(
                "record {} would be {} bytes long, over the 16 MiB limit of one line (MAX_LINE_BYTES)",
                record.seq,
                line.len() - 1
            )));
        }
        if let Err(error) = chain.sink.append_record(record.seq, &record.hash, &line) {
            chain.failed = Some(format!("writing record {} failed: {error}", record.seq));
            return Err(AuditError::Io(error));
        }
        chain.next_seq += 1;
        chain.prev_hash.clone_from(&record.hash);
        if let (Some(syncer), FsyncPolicy::Batched { every }) = (&chain.syncer, chain.policy) {
            if let Err(reason) = syncer.appended(every) {
                chain.failed = Some(reason.clone());
                return Err(AuditError::Failed(reason));
            }
            return Ok(record);
        }
        chain.unsynced += 1;
        let due = match chain.policy {
            FsyncPolicy::EveryRecord => true,
            FsyncPolicy::Batched { every } => chain.unsynced >= every.max(1),
            FsyncPolicy::Never => false,
        };
        if due {
            chain.sync()?;
        }
        Ok(record)
    }

    /// Syncs the records written since the last sync (under any policy).
    pub fn flush(&self) -> Result<(), AuditError> {
        let Some(chain) = &self.chain else {
            return Ok(());
        };
        let mut chain = chain
            .lock()
            .map_err(|_| AuditError::Failed("a writer panicked".into()))?;
        chain.usable()?;
        if chain.unsynced()? > 0 { chain.sync() } else { Ok(()) }
    }
}

#[cfg(test)]
mod tests;
