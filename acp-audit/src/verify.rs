//! Checking a chain: [`verify`] and [`verify_file`].

use std::fmt;
use std::io::{self, BufRead};
use std::path::Path;

use serde_json::Value;

use super::canonical::{canonical_object_without, legacy_object_without, sha256_hex};
use super::record::{DOCTYPE, GENESIS, HASH_ALG, SCHEMA_TAG};
use super::{AuditError, file, strict};

/// The longest line a log may hold, without its `\n`: 16 MiB. [`verify`] stops reading at a
/// longer line (a broken chain), and [`AuditLog::record`](super::AuditLog::record) refuses an
/// event whose record would be longer ([`AuditError::Invalid`]).
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// What an intact chain holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifySummary {
    /// The number of records (the next record's `seq`).
    pub records: u64,
    /// The last record's `hash` (the next record's `prevHash`); `None` for an empty log.
    pub last_hash: Option<String>,
}

/// The first place a chain is broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyError {
    /// The line, from 1.
    pub line: usize,
    /// The `seq` the line's record claims, when it could be read.
    pub seq: Option<u64>,
    /// The byte offset where the line starts.
    pub offset: u64,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.seq {
            Some(seq) => write!(f, "line {} (seq {seq}): {}", self.line, self.reason),
            None => write!(f, "line {}: {}", self.line, self.reason),
        }
    }
}

impl std::error::Error for VerifyError {}

/// The first place a chain kept in a database is broken (feature `postgres`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainFault {
    /// The chain.
    pub chain: String,
    /// The `seq` where it breaks, when one can be named.
    pub seq: Option<u64>,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for ChainFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.seq {
            Some(seq) => write!(f, "chain {}, seq {seq}: {}", self.chain, self.reason),
            None => write!(f, "chain {}: {}", self.chain, self.reason),
        }
    }
}

impl std::error::Error for ChainFault {}

/// Why [`scan`] stopped: the chain is broken, or the reader failed.
pub(crate) enum Failure {
    Broken(VerifyError),
    /// The read of this line (from 1, starting at this byte offset) failed.
    Io(usize, u64, io::Error),
}

/// Checks a whole log read from `reader`: every line is a JSON object with the AIP-7
/// `$schema` and `doctype` and no key repeated at any depth, `seq` counts from 0 without gaps,
/// the first `prevHash` is `GENESIS` and every other one is the previous record's `hash`,
/// `hashAlg` (when present) is `sha256`, each `hash` is the SHA-256 of the canonical JSON of
/// its record without `hash` (or, for a record written before issue #21, of its pre-RFC 8785
/// form, which differs only in how non-integer numbers are written), no line is longer than
/// [`MAX_LINE_BYTES`], and the last line ends with `\n`. Returns the first problem, naming its
/// line and byte offset. The reader is consumed line by line: memory stays within one line,
/// and reading stops at the first problem. A read error is reported as a problem of the line
/// being read.
pub fn verify(reader: impl BufRead) -> Result<VerifySummary, VerifyError> {
    verify_lines(reader).map_err(|failure| match failure {
        Failure::Broken(error) => error,
        Failure::Io(line, offset, error) => VerifyError {
            line,
            seq: None,
            offset,
            reason: format!("read error: {error}"),
        },
    })
}

/// [`verify`] of a file: [`AuditError::Io`] when it cannot be opened or read, or is not a
/// regular file (a FIFO, a device: refused without reading), [`AuditError::Broken`] when the
/// chain is broken.
pub fn verify_file(path: &Path) -> Result<VerifySummary, AuditError> {
    let file = file::open_for_reading(path).map_err(AuditError::Io)?;
    verify_lines(io::BufReader::new(file)).map_err(AuditError::from)
}

impl From<Failure> for AuditError {
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::Broken(error) => AuditError::Broken(error),
            Failure::Io(_, _, error) => AuditError::Io(error),
        }
    }
}

/// Abbreviates a hash for messages.
pub(crate) fn short(hash: &str) -> String {
    match hash.char_indices().nth(12) {
        Some((at, _)) => format!("{}…", &hash[..at]),
        None => hash.to_string(),
    }
}

/// A last line without its `\n`: what an interrupted write leaves.
#[derive(Debug)]
pub(crate) struct Torn {
    /// Its line number, from 1.
    pub(crate) line: usize,
    /// Where it starts in the file.
    pub(crate) offset: u64,
    /// Its bytes (at most [`MAX_LINE_BYTES`]).
    pub(crate) bytes: Vec<u8>,
}

/// What [`scan`] found: the intact records, and a torn last line after them, if any.
pub(crate) struct Scan {
    pub(crate) summary: VerifySummary,
    pub(crate) torn: Option<Torn>,
}

/// [`scan`], with a torn last line reported as a broken chain.
fn verify_lines(reader: impl BufRead) -> Result<VerifySummary, Failure> {
    let scan = scan(reader)?;
    match scan.torn {
        None => Ok(scan.summary),
        Some(torn) => Err(Failure::Broken(VerifyError {
            line: torn.line,
            seq: None,
            offset: torn.offset,
            reason: format!(
                "torn last line: {} bytes from byte {} with no trailing newline (an interrupted write; \
                 opening the log for writing moves it aside)",
                torn.bytes.len(),
                torn.offset
            ),
        })),
    }
}

/// How [`read_line`] ended a line.
enum LineEnd {
    /// At its `\n` (consumed, not kept).
    Newline,
    /// At the end of the input, with no `\n`.
    Eof,
    /// Past [`MAX_LINE_BYTES`]: reading stopped there.
    TooLong,
}

/// Reads the next line into `buffer` (without its `\n`), keeping at most [`MAX_LINE_BYTES`];
/// `None` at the end of the input.
fn read_line(reader: &mut impl BufRead, buffer: &mut Vec<u8>) -> io::Result<Option<LineEnd>> {
    buffer.clear();
    loop {
        let available = match reader.fill_buf() {
            Ok(available) => available,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        if available.is_empty() {
            return Ok((!buffer.is_empty()).then_some(LineEnd::Eof));
        }
        let newline = available.iter().position(|&b| b == b'\n');
        let take = newline.unwrap_or(available.len());
        if buffer.len() + take > MAX_LINE_BYTES {
            return Ok(Some(LineEnd::TooLong));
        }
        buffer.extend_from_slice(&available[..take]);
        match newline {
            Some(at) => {
                reader.consume(at + 1);
                return Ok(Some(LineEnd::Newline));
            }
            None => reader.consume(take),
        }
    }
}

/// Verifies the complete lines of `reader` and returns what they hold; a last line without
/// its `\n` is returned as [`Torn`], for [`AuditLog::open`](super::AuditLog::open) to recover.
pub(crate) fn scan(mut reader: impl BufRead) -> Result<Scan, Failure> {
    let mut buffer = Vec::new();
    let mut line = 0usize;
    let mut offset = 0u64;
    let mut last_hash: Option<String> = None;
    while let Some(end) = read_line(&mut reader, &mut buffer).map_err(|e| Failure::Io(line + 1, offset, e))? {
        line += 1;
        let broken = |seq: Option<u64>, reason: String| {
            Failure::Broken(VerifyError {
                line,
                seq,
                offset,
                reason,
            })
        };
        match end {
            LineEnd::Newline => {}
            LineEnd::Eof => {
                return Ok(Scan {
                    summary: VerifySummary {
                        records: line as u64 - 1,
                        last_hash,
                    },
                    torn: Some(Torn {
                        line,
                        offset,
                        bytes: buffer,
                    }),
                });
            }
            LineEnd::TooLong => {
                return Err(broken(
                    None,
                    format!("the line is longer than {MAX_LINE_BYTES} bytes (16 MiB), the limit for one record"),
                ));
            }
        }
        let hash = check_record(&buffer, line as u64 - 1, last_hash.as_deref())
            .map_err(|(seq, reason)| broken(seq, reason))?;
        last_hash = Some(hash);
        offset += buffer.len() as u64 + 1;
    }
    Ok(Scan {
        summary: VerifySummary {
            records: line as u64,
            last_hash,
        },
        torn: None,
    })
}

/// Checks one complete line (without its `\n`), the record `expected` of the chain, whose
/// previous record's hash is `prev` (`None` for the first). Returns its hash, or the `seq` it
/// claims and what is wrong.
pub(crate) fn check_record(content: &[u8], expected: u64, prev: Option<&str>) -> Result<String, (Option<u64>, String)> {
    let Ok(text) = std::str::from_utf8(content) else {
        return Err((None, "not UTF-8".into()));
    };
    if text.trim().is_empty() {
        return Err((None, "empty line".into()));
    }
    let Value::Object(record) = strict::parse_record(text).map_err(|reason| (None, reason))? else {
        return Err((None, "not a JSON object".into()));
    };
    let seq = record.get("seq").and_then(Value::as_u64);
    let field = |name: &str| record.get(name).and_then(Value::as_str);
    if field("$schema") != Some(SCHEMA_TAG) {
        return Err((seq, format!("$schema is not \"{SCHEMA_TAG}\"")));
    }
    if field("doctype") != Some(DOCTYPE) {
        return Err((seq, format!("doctype is not \"{DOCTYPE}\"")));
    }
    let Some(seq) = seq else {
        return Err((None, "seq is missing or not a non-negative integer".into()));
    };
    let fail = |reason: String| Err((Some(seq), reason));
    if seq != expected {
        return fail(format!(
            "seq {seq} where {expected} was expected (a record is missing, repeated or out of order)"
        ));
    }
    match record.get("hashAlg") {
        None => {}
        Some(alg) if alg.as_str() == Some(HASH_ALG) => {}
        Some(alg) => return fail(format!("unsupported hashAlg {alg} (only \"{HASH_ALG}\")")),
    }
    let Some(recorded) = field("hash") else {
        return fail("hash is missing or not a string".into());
    };
    let canonical = canonical_object_without(&record, "hash");
    let computed = sha256_hex(&canonical);
    // A record written before issue #21 was hashed with non-integer numbers in serde_json's
    // form; it is accepted in that form too. Both forms write every number so that it reads
    // back as the same value, so this admits no record that differs in anything but the
    // spelling of its numbers (docs/audit.md, "The chain").
    if recorded != computed && !legacy_matches(&record, &canonical, recorded) {
        return fail(format!(
            "hash mismatch: recorded {}, computed {}",
            short(recorded),
            short(&computed)
        ));
    }
    let want = prev.unwrap_or(GENESIS);
    match field("prevHash") {
        Some(prev) if prev == want => Ok(recorded.to_string()),
        Some(prev) if seq == 0 => fail(format!("prevHash {} of the first record is not {GENESIS}", short(prev))),
        Some(prev) => fail(format!(
            "prevHash {} does not link to the previous record's hash {}",
            short(prev),
            short(want)
        )),
        None => fail("prevHash is missing or not a string".into()),
    }
}

/// Whether `recorded` is the hash of `record`'s pre-RFC 8785 canonical form, when that form
/// differs from `canonical` (the record holds a non-integer number the two forms write
/// differently).
fn legacy_matches(record: &serde_json::Map<String, Value>, canonical: &str, recorded: &str) -> bool {
    let legacy = legacy_object_without(record, "hash");
    legacy != canonical && sha256_hex(&legacy) == recorded
}
