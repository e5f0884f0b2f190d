//! Reading chains from the database: [`verify_database`] and [`export_database`]. A chain is
//! read a page at a time, each page a statement of its own (within the pool's deadline), up to
//! the head read first: the records up to the head were committed with it or before it and no
//! longer change, so a writer appending meanwhile does not disturb the reading.

use std::io::Write;
use std::path::{Path, PathBuf};

use acp_postgres::Database;

use super::{check_chain_name, db_error, tail_mismatch};
use crate::verify::{MAX_LINE_BYTES, check_record, short};
use crate::{AuditError, ChainFault, VerifySummary, file};

/// Records read per page at most.
const PAGE_ROWS: i64 = 256;

/// Bytes of lines read per page at most (a page holds at least one record).
const PAGE_BYTES: i64 = 8 * 1024 * 1024;

/// A page of a chain's records after a `seq`, up to a `seq`, within [`PAGE_ROWS`] and
/// [`PAGE_BYTES`].
const PAGE: &str = "select seq, line from (
        select seq, line, row_number() over w as n, sum(octet_length(line)) over w as bytes
        from (select seq, line from agentacp_audit_records
              where chain = $1 and seq > $2 and seq <= $3 order by seq limit $4) page
        window w as (order by seq)
    ) sized where n = 1 or bytes <= $5 order by seq";

/// Where a chain ends: its head's seq and hash, and its last record's seq, read at once.
const ENDS: &str = "select h.last_seq, h.last_hash,
        (select max(seq) from agentacp_audit_records where chain = $1)
    from (select $1::text as chain) c left join agentacp_audit_heads h on h.chain = c.chain";

/// One chain's verdict from [`verify_database`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainVerdict {
    /// The chain.
    pub chain: String,
    /// What the intact chain holds, or where it first breaks.
    pub result: Result<VerifySummary, ChainFault>,
}

/// One chain written by [`export_database`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Export {
    /// The chain.
    pub chain: String,
    /// The file: `<dir>/<chain>.jsonl`.
    pub path: PathBuf,
    /// How many records it holds.
    pub records: u64,
}

/// The chains in `database`, by name: every chain with a head or a record. None when the
/// database has no audit tables (nothing was ever recorded there).
pub fn database_chains(database: &Database) -> Result<Vec<String>, AuditError> {
    database
        .run(|client| {
            let exists: bool = client
                .query_one(
                    "select to_regclass('agentacp_audit_records') is not null \
                     and to_regclass('agentacp_audit_heads') is not null",
                    &[],
                )?
                .get(0);
            if !exists {
                return Ok(Vec::new());
            }
            let rows = client.query(
                "select chain from agentacp_audit_heads union select distinct chain from agentacp_audit_records \
                 order by 1",
                &[],
            )?;
            Ok(rows.iter().map(|row| row.get(0)).collect())
        })
        .map_err(db_error)
}

/// The chains to read: all of them, or `only` when it exists (`Err` with its name otherwise).
fn chosen(database: &Database, only: Option<&str>) -> Result<Result<Vec<String>, String>, AuditError> {
    let all = database_chains(database)?;
    Ok(match only {
        None => Ok(all),
        Some(name) if all.iter().any(|c| c == name) => Ok(vec![name.to_string()]),
        Some(name) => Err(name.to_string()),
    })
}

/// Verifies every chain in `database` (or only `only`), each whatever the others are: every
/// record is the one its `seq` says, without gap, its hash recomputed and linked to the record
/// before it (as [`verify`](crate::verify) checks a file), and the chain's head names its last
/// record and hash (a chain whose tail was deleted is broken at the first missing `seq`). Two
/// records with one `seq` cannot be stored (the table's key). A chain `only` names that does
/// not exist is reported as broken. [`AuditError::Io`] when the database cannot be read.
pub fn verify_database(database: &Database, only: Option<&str>) -> Result<Vec<ChainVerdict>, AuditError> {
    let names = match chosen(database, only)? {
        Ok(names) => names,
        Err(name) => {
            let reason = format!("there is no such chain in the database at {}", database.shown());
            return Ok(vec![ChainVerdict {
                chain: name.clone(),
                result: Err(ChainFault {
                    chain: name,
                    seq: None,
                    reason,
                }),
            }]);
        }
    };
    names
        .into_iter()
        .map(|chain| {
            let result = verify_chain(database, &chain)?;
            Ok(ChainVerdict { chain, result })
        })
        .collect()
}

/// Where a chain ends, as [`ENDS`] reads it.
struct Ends {
    /// The head's `(last_seq, last_hash)`.
    head: Option<(i64, String)>,
    /// The last record's `seq`.
    last: Option<i64>,
}

impl Ends {
    fn read(database: &Database, chain: &str) -> Result<Ends, AuditError> {
        let chain = chain.to_string();
        database
            .run(move |client| {
                let row = client.query_one(ENDS, &[&chain])?;
                let head = row.get::<_, Option<i64>>(0).zip(row.get::<_, Option<String>>(1));
                Ok(Ends { head, last: row.get(2) })
            })
            .map_err(db_error)
    }

    /// The last `seq` to read: the head's (records past it are reported, not read), else the
    /// last record's.
    fn bound(&self) -> i64 {
        self.head.as_ref().map(|(seq, _)| *seq).or(self.last).unwrap_or(-1)
    }
}

/// Calls `each(seq, line)` for the records of `chain` up to `seq` `bound`, in `seq` order, a
/// page at a time, until it returns `Some`; that value, or `None` when every record was seen.
fn each_record<T>(
    database: &Database,
    chain: &str,
    bound: i64,
    mut each: impl FnMut(i64, &str) -> Option<T>,
) -> Result<Option<T>, AuditError> {
    let mut after = -1i64;
    while after < bound {
        let owned = chain.to_string();
        let page: Vec<(i64, String)> = database
            .run(move |client| {
                let rows = client.query(PAGE, &[&owned, &after, &bound, &PAGE_ROWS, &PAGE_BYTES])?;
                Ok(rows.iter().map(|row| (row.get(0), row.get(1))).collect())
            })
            .map_err(db_error)?;
        let Some((last, _)) = page.last() else {
            return Ok(None);
        };
        after = *last;
        for (seq, line) in &page {
            if let Some(stop) = each(*seq, line) {
                return Ok(Some(stop));
            }
        }
    }
    Ok(None)
}

/// One chain's verdict.
fn verify_chain(database: &Database, chain: &str) -> Result<Result<VerifySummary, ChainFault>, AuditError> {
    let fault = |seq: Option<u64>, reason: String| ChainFault {
        chain: chain.to_string(),
        seq,
        reason,
    };
    let ends = Ends::read(database, chain)?;
    let mut count: u64 = 0;
    let mut last_hash: Option<String> = None;
    let broken = each_record(database, chain, ends.bound(), |seq, line| {
        if seq as u64 != count {
            let reason = match count {
                0 => format!("the chain starts at seq {seq}: records 0 to {} are missing", seq - 1),
                _ => format!(
                    "seq {seq} follows seq {}: records {count} to {} are missing (a gap)",
                    count - 1,
                    seq - 1
                ),
            };
            return Some(fault(Some(count), reason));
        }
        if line.len() > MAX_LINE_BYTES {
            let reason = format!("the line is longer than {MAX_LINE_BYTES} bytes (16 MiB), the limit for one record");
            return Some(fault(Some(count), reason));
        }
        if line.contains('\n') {
            return Some(fault(Some(count), "the line holds a line break".into()));
        }
        match check_record(line.as_bytes(), count, last_hash.as_deref()) {
            Ok(hash) => {
                last_hash = Some(hash);
                count += 1;
                None
            }
            Err((_, reason)) => Some(fault(Some(count), reason)),
        }
    })?;
    if let Some(broken) = broken {
        return Ok(Err(broken));
    }
    let read = count as i64 - 1;
    let verdict = match (ends.head, &last_hash) {
        (None, None) => Ok(()),
        (None, Some(_)) => Err(fault(
            Some(read as u64),
            "the chain has records but no head row (the head was deleted)".into(),
        )),
        (Some((head_seq, _)), _) if head_seq != read => {
            let (seq, reason) = tail_mismatch(head_seq, read);
            Err(fault(Some(seq as u64), reason))
        }
        (Some((head_seq, _)), _) if ends.last.is_some_and(|last| last > head_seq) => {
            let (seq, reason) = tail_mismatch(head_seq, ends.last.unwrap_or(head_seq));
            Err(fault(Some(seq as u64), reason))
        }
        (Some((_, head_hash)), Some(hash)) if &head_hash != hash => Err(fault(
            Some(read as u64),
            format!(
                "the head's hash {} is not the last record's hash {}",
                short(&head_hash),
                short(hash)
            ),
        )),
        (Some(_), _) => Ok(()),
    };
    Ok(verdict.map(|()| VerifySummary {
        records: count,
        last_hash,
    }))
}

/// Writes every chain of `database` (or only `only`) to `dir` (created when absent), one file
/// `<chain>.jsonl` each, holding its records' lines in `seq` order up to its head, as a log
/// file holds them: `verify_file` checks it as it checks the log of a single process. Each
/// file is written aside, synced and renamed into place (an earlier export of the chain is
/// replaced whole). The records are written as stored, whether the chain verifies or not:
/// verify the files, or the database ([`verify_database`]).
pub fn export_database(database: &Database, dir: &Path, only: Option<&str>) -> Result<Vec<Export>, AuditError> {
    let names = chosen(database, only)?.map_err(|name| {
        AuditError::Invalid(format!(
            "there is no audit chain {name} in the database at {}",
            database.shown()
        ))
    })?;
    std::fs::create_dir_all(dir).map_err(AuditError::Io)?;
    names
        .into_iter()
        .map(|chain| export_chain(database, &chain, dir))
        .collect()
}

fn export_chain(database: &Database, chain: &str, dir: &Path) -> Result<Export, AuditError> {
    check_chain_name(chain).map_err(|why| AuditError::Invalid(format!("cannot export a chain to a file: {why}")))?;
    let path = dir.join(format!("{chain}.jsonl"));
    let aside = dir.join(format!(".{chain}.jsonl.export-{}", std::process::id()));
    let written = write_chain(database, chain, &aside).and_then(|records| {
        std::fs::rename(&aside, &path)
            .and_then(|()| file::sync_dir(dir))
            .map_err(AuditError::Io)?;
        Ok(records)
    });
    if written.is_err() {
        let _ = std::fs::remove_file(&aside);
    }
    Ok(Export {
        chain: chain.to_string(),
        path,
        records: written?,
    })
}

/// Writes `chain`'s lines to a new file at `path`, synced; how many.
fn write_chain(database: &Database, chain: &str, path: &Path) -> Result<u64, AuditError> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).map_err(AuditError::Io)?);
    let mut records = 0u64;
    let bound = Ends::read(database, chain)?.bound();
    let failed = each_record(database, chain, bound, |_, line| {
        records += 1;
        out.write_all(line.as_bytes()).and_then(|()| out.write_all(b"\n")).err()
    })?;
    if let Some(error) = failed {
        return Err(AuditError::Io(error));
    }
    out.into_inner()
        .map_err(|e| e.into_error())
        .and_then(|file| file.sync_all())
        .map_err(AuditError::Io)?;
    Ok(records)
}
