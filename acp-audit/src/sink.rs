//! Where record lines go: the [`AuditSink`] trait, a file and an in-memory sink.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{AuditError, file};

/// A destination for audit lines. The log calls [`append`](AuditSink::append) once per record
/// and [`sync`](AuditSink::sync) when its [`FsyncPolicy`](super::FsyncPolicy) asks for
/// durability; both are called with the log's lock held, one at a time. A
/// [`background_sync`](AuditSink::background_sync) runs on a thread of its own, at the same
/// time as `append` and `sync`: what it shares with the sink must allow that.
pub trait AuditSink: Send + 'static {
    /// Writes one whole line (a record's JSON and its terminating `\n`).
    fn append(&mut self, line: &str) -> io::Result<()>;

    /// Writes the line of the record `seq` whose hash is `hash`: what the log calls. Default:
    /// [`append`](AuditSink::append); a sink that keys its records (a database) uses them.
    fn append_record(&mut self, seq: u64, hash: &str, line: &str) -> io::Result<()> {
        let _ = (seq, hash);
        self.append(line)
    }
    /// Makes everything appended so far durable (fsync, for a file).
    fn sync(&mut self) -> io::Result<()>;

    /// After a failed [`append`](AuditSink::append) or [`sync`](AuditSink::sync), called before
    /// the next record: whether the sink knows its end again. `None` (the default): it cannot
    /// tell, and the log records no more (a file's end is unknown after a failed write).
    /// `Some(Ok((next_seq, prev_hash)))`: the chain goes on there (a database chain, once its
    /// connection is back, its lock retaken and its tail checked); `Some(Err(_))`: not now,
    /// asked again at the next record.
    fn resume(&mut self) -> Option<io::Result<(u64, String)>> {
        None
    }

    /// What makes everything appended so far durable from another thread, while appends go
    /// on, for a batched log's syncs (see [`FsyncPolicy::Batched`](super::FsyncPolicy::Batched)).
    /// Default `None`: every sync is [`sync`](AuditSink::sync), made in line. One that errs or
    /// panics stops the log ([`AuditError::Failed`](super::AuditError::Failed)), and is not
    /// called again.
    fn background_sync(&self) -> Option<super::BackgroundSync> {
        None
    }
}

/// Appends to a file; [`sync`](AuditSink::sync) is `fdatasync`.
#[derive(Debug)]
pub struct FileSink {
    file: File,
}

impl FileSink {
    /// Opens `path` for appending, creating it (and its parent folders) when absent, and
    /// locks it for writing like [`AuditLog::open`](super::AuditLog::open) does
    /// ([`AuditError::Locked`] when another handle holds it). A new file's directory entry is
    /// made durable too, so a record synced later cannot vanish with the file.
    pub fn open(path: &Path) -> Result<FileSink, AuditError> {
        let file = file::open_for_append(path).map_err(AuditError::Io)?;
        file::lock_exclusive(&file, path)?;
        Ok(FileSink { file })
    }

    /// Wraps a file already opened for appending (and, so that no other writer forks the
    /// chain, locked by the caller).
    pub fn from_file(file: File) -> FileSink {
        FileSink { file }
    }
}

impl AuditSink for FileSink {
    fn append(&mut self, line: &str) -> io::Result<()> {
        // One unbuffered write (retried only if the OS takes part of it), so the line reaches
        // the OS whole or as a torn tail that the next open recovers.
        self.file.write_all(line.as_bytes())
    }

    fn sync(&mut self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// `fdatasync` through a second handle on the same file: it covers what was written
    /// through this one before it started.
    fn background_sync(&self) -> Option<super::BackgroundSync> {
        let file = self.file.try_clone().ok()?;
        Some(Box::new(move || file.sync_data()))
    }
}

/// Keeps lines in memory; clones share them, so a test can keep one handle and give the log
/// another.
#[derive(Debug, Clone, Default)]
pub struct MemorySink {
    shared: Arc<Mutex<MemoryState>>,
}

#[derive(Debug, Default)]
struct MemoryState {
    lines: Vec<String>,
    synced: usize,
    syncs: usize,
}

impl MemorySink {
    /// An empty sink.
    pub fn new() -> MemorySink {
        MemorySink::default()
    }

    fn state(&self) -> MutexGuard<'_, MemoryState> {
        self.shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The lines appended so far, each without its `\n`.
    pub fn lines(&self) -> Vec<String> {
        self.state()
            .lines
            .iter()
            .map(|l| l.strip_suffix('\n').unwrap_or(l).to_string())
            .collect()
    }

    /// Everything appended so far, as a log file would hold it.
    pub fn contents(&self) -> String {
        self.state().lines.concat()
    }

    /// How many lines had been appended at the last [`sync`](AuditSink::sync) (what a crash
    /// would keep).
    pub fn synced_lines(&self) -> usize {
        self.state().synced
    }

    /// How many times [`sync`](AuditSink::sync) was called.
    pub fn syncs(&self) -> usize {
        self.state().syncs
    }
}

impl AuditSink for MemorySink {
    fn append(&mut self, line: &str) -> io::Result<()> {
        self.state().lines.push(line.to_string());
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        let mut state = self.state();
        state.synced = state.lines.len();
        state.syncs += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sink_clones_share_lines_and_count_syncs() {
        let reader = MemorySink::new();
        let mut writer: Box<dyn AuditSink> = Box::new(reader.clone());
        writer.append("{\"a\":1}\n").unwrap();
        writer.append("{\"b\":2}\n").unwrap();
        assert_eq!(reader.lines(), ["{\"a\":1}", "{\"b\":2}"]);
        assert_eq!(reader.contents(), "{\"a\":1}\n{\"b\":2}\n");
        assert_eq!((reader.syncs(), reader.synced_lines()), (0, 0));
        writer.sync().unwrap();
        writer.append("{\"c\":3}\n").unwrap();
        assert_eq!((reader.syncs(), reader.synced_lines()), (1, 2));
    }
}
