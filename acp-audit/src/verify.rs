//! Checking a chain: [`verify`] and [`verify_file`].

use std::fmt;
use std::io::{self, BufRead};
use std::path::Path;

use serde_json::Value;

use super::AuditError;
use super::canonical::{canonical_object_without, sha256_hex};
use super::record::{DOCTYPE, GENESIS, HASH_ALG, SCHEMA_TAG};

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

/// Why [`verify_lines`] stopped: the chain is broken, or the reader failed.
pub(crate) enum Failure {
    Broken(VerifyError),
    /// The read of this line (from 1) failed.
    Io(usize, io::Error),
}

/// Checks a whole log read from `reader`: every line is a JSON object with the AIP-7
/// `$schema` and `doctype`, `seq` counts from 0 without gaps, the first `prevHash` is
/// `GENESIS` and every other one is the previous record's `hash`, `hashAlg` (when present) is
/// `sha256`, each `hash` is the SHA-256 of the canonical JSON of its record without `hash`,
/// and the last line ends with `\n`. Returns the first problem, naming its line. A read error
/// is reported as a problem of the line being read.
pub fn verify(reader: impl BufRead) -> Result<VerifySummary, VerifyError> {
    verify_lines(reader).map_err(|failure| match failure {
        Failure::Broken(error) => error,
        Failure::Io(line, error) => VerifyError {
            line,
            seq: None,
            reason: format!("read error: {error}"),
        },
    })
}

/// [`verify`] of a file: [`AuditError::Io`] when it cannot be opened or read,
/// [`AuditError::Broken`] when the chain is broken.
pub fn verify_file(path: &Path) -> Result<VerifySummary, AuditError> {
    let file = std::fs::File::open(path).map_err(AuditError::Io)?;
    verify_lines(io::BufReader::new(file)).map_err(AuditError::from)
}

impl From<Failure> for AuditError {
    fn from(failure: Failure) -> Self {
        match failure {
            Failure::Broken(error) => AuditError::Broken(error),
            Failure::Io(_, error) => AuditError::Io(error),
        }
    }
}

/// Abbreviates a hash for messages.
fn short(hash: &str) -> String {
    match hash.char_indices().nth(12) {
        Some((at, _)) => format!("{}…", &hash[..at]),
        None => hash.to_string(),
    }
}

pub(crate) fn verify_lines(mut reader: impl BufRead) -> Result<VerifySummary, Failure> {
    let mut buffer = Vec::new();
    let mut line = 0usize;
    let mut last_hash: Option<String> = None;
    loop {
        buffer.clear();
        if reader
            .read_until(b'\n', &mut buffer)
            .map_err(|e| Failure::Io(line + 1, e))?
            == 0
        {
            break;
        }
        line += 1;
        let expected = line as u64 - 1;
        let broken = |seq: Option<u64>, reason: String| Failure::Broken(VerifyError { line, seq, reason });
        let Some(content) = buffer.strip_suffix(b"\n") else {
            return Err(broken(
                None,
                "the last line has no trailing newline (a torn write?)".into(),
            ));
        };
        let Ok(text) = std::str::from_utf8(content) else {
            return Err(broken(None, "not UTF-8".into()));
        };
        if text.trim().is_empty() {
            return Err(broken(None, "empty line".into()));
        }
        let record: Value = serde_json::from_str(text).map_err(|e| broken(None, format!("not JSON: {e}")))?;
        let Value::Object(record) = record else {
            return Err(broken(None, "not a JSON object".into()));
        };
        let seq = record.get("seq").and_then(Value::as_u64);
        let field = |name: &str| record.get(name).and_then(Value::as_str);
        if field("$schema") != Some(SCHEMA_TAG) {
            return Err(broken(seq, format!("$schema is not \"{SCHEMA_TAG}\"")));
        }
        if field("doctype") != Some(DOCTYPE) {
            return Err(broken(seq, format!("doctype is not \"{DOCTYPE}\"")));
        }
        let Some(seq) = seq else {
            return Err(broken(None, "seq is missing or not a non-negative integer".into()));
        };
        if seq != expected {
            return Err(broken(
                Some(seq),
                format!("seq {seq} where {expected} was expected (a record is missing, repeated or out of order)"),
            ));
        }
        match record.get("hashAlg") {
            None => {}
            Some(alg) if alg.as_str() == Some(HASH_ALG) => {}
            Some(alg) => {
                return Err(broken(
                    Some(seq),
                    format!("unsupported hashAlg {alg} (only \"{HASH_ALG}\")"),
                ));
            }
        }
        let Some(recorded) = field("hash") else {
            return Err(broken(Some(seq), "hash is missing or not a string".into()));
        };
        let computed = sha256_hex(&canonical_object_without(&record, "hash"));
        if recorded != computed {
            return Err(broken(
                Some(seq),
                format!(
                    "hash mismatch: recorded {}, computed {}",
                    short(recorded),
                    short(&computed)
                ),
            ));
        }
        let want = last_hash.as_deref().unwrap_or(GENESIS);
        match field("prevHash") {
            Some(prev) if prev == want => {}
            Some(prev) if seq == 0 => {
                return Err(broken(
                    Some(seq),
                    format!("prevHash {} of the first record is not {GENESIS}", short(prev)),
                ));
            }
            Some(prev) => {
                return Err(broken(
                    Some(seq),
                    format!(
                        "prevHash {} does not link to the previous record's hash {}",
                        short(prev),
                        short(want)
                    ),
                ));
            }
            None => return Err(broken(Some(seq), "prevHash is missing or not a string".into())),
        }
        last_hash = Some(computed);
    }
    Ok(VerifySummary {
        records: line as u64,
        last_hash,
    })
}
