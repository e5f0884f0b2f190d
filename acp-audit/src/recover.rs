//! Recovering a log whose last line was torn by an interrupted write (a crash, a `kill -9`
//! during a multi-page record): the torn bytes are copied to a file next to the log, and an
//! `audit.recovered` record is written over them, continuing the chain.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde_json::json;

use super::canonical::sha256_hex_bytes;
use super::verify::Torn;
use super::{Actor, AuditError, AuditEvent, AuditRecord, Subject, file, rfc3339_millis};

/// The action of the record that replaces a torn last line.
pub const RECOVERED_ACTION: &str = "audit.recovered";

/// What [`AuditLog::open`](super::AuditLog::open) did with a torn last line; see
/// [`AuditLog::recovery`](super::AuditLog::recovery).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// The torn line, from 1.
    pub line: usize,
    /// The byte offset where the torn line started (the log now holds the recovery record
    /// from there).
    pub offset: u64,
    /// The torn line's length in bytes.
    pub bytes: u64,
    /// The file, next to the log, that holds the torn bytes.
    pub moved_to: PathBuf,
    /// The `seq` of the `audit.recovered` record written in the torn line's place.
    pub seq: u64,
}

impl fmt::Display for Recovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {} was torn by an interrupted write ({} bytes from byte {}): moved to {}, and \
             recorded as seq {} ({RECOVERED_ACTION})",
            self.line,
            self.bytes,
            self.offset,
            self.moved_to.display(),
            self.seq
        )
    }
}

/// Recovers the log `log` (open, locked, at `path`) whose last line is `torn`: copies the
/// torn bytes aside (synced), then writes the `audit.recovered` record (`seq`, linked to
/// `prev_hash`) from the torn line's offset and cuts the file after it, and syncs. A crash at
/// any point leaves the log as it was, or ending in a torn line again (recovered the same way
/// on the next open), or recovered.
pub(crate) fn recover(
    log: &File,
    path: &Path,
    torn: Torn,
    seq: u64,
    prev_hash: &str,
) -> Result<(Recovery, AuditRecord), AuditError> {
    let moved_to = save_aside(path, seq, &torn.bytes).map_err(AuditError::Io)?;
    let name = |path: &Path| {
        path.file_name()
            .map_or_else(String::new, |name| name.to_string_lossy().into_owned())
    };
    let mut event = AuditEvent::new(
        Actor {
            id: "system:acp-audit".into(),
            role: Some("system".into()),
        },
        RECOVERED_ACTION,
        Subject {
            kind: "audit-log".into(),
            reference: Some(name(path)),
            path: None,
        },
    );
    event.output = Some(json!({
        "reason": "the last line was torn (an interrupted write); it was moved aside",
        "line": torn.line,
        "offset": torn.offset,
        "bytes": torn.bytes.len(),
        "movedTo": name(&moved_to),
        "sha256": sha256_hex_bytes(&torn.bytes),
    }));
    event.validate().map_err(AuditError::Invalid)?;
    let record = AuditRecord::build(event, seq, rfc3339_millis(SystemTime::now()), prev_hash);
    let line = record.line();
    // The locked handle appends (O_APPEND): write in place through a second handle on the
    // same file.
    let mut writer = OpenOptions::new().write(true).open(path).map_err(AuditError::Io)?;
    if !file::same_file(log, &writer).map_err(AuditError::Io)? {
        return Err(AuditError::Io(io::Error::other(
            "the log was replaced while it was being opened",
        )));
    }
    let end = torn.offset + line.len() as u64;
    writer
        .seek(SeekFrom::Start(torn.offset))
        .and_then(|_| writer.write_all(line.as_bytes()))
        .and_then(|()| writer.set_len(end))
        .and_then(|()| writer.sync_data())
        .map_err(AuditError::Io)?;
    let recovery = Recovery {
        line: torn.line,
        offset: torn.offset,
        bytes: torn.bytes.len() as u64,
        moved_to,
        seq,
    };
    Ok((recovery, record))
}

/// Writes `bytes` to a new file next to `path`: `NAME.torn-SEQ`, or `NAME.torn-SEQ-2`, … when
/// that exists (an earlier copy is never overwritten); synced, with its folder.
fn save_aside(path: &Path, seq: u64, bytes: &[u8]) -> io::Result<PathBuf> {
    let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
    for attempt in 1..=1000u32 {
        let suffix = match attempt {
            1 => format!("{name}.torn-{seq}"),
            n => format!("{name}.torn-{seq}-{n}"),
        };
        let target = path.with_file_name(suffix);
        let mut copy = match OpenOptions::new().write(true).create_new(true).open(&target) {
            Ok(copy) => copy,
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(error),
        };
        copy.write_all(bytes)?;
        copy.sync_all()?;
        let dir = target.parent().filter(|p| !p.as_os_str().is_empty());
        file::sync_dir(dir.unwrap_or(Path::new(".")))?;
        return Ok(target);
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("1000 copies of torn lines at seq {seq} already exist next to the log"),
    ))
}
