//! The operator's memory (AIP-9 `memory`), as a session sees it: entries operator code
//! appends and reads through [`SessionContext::memory`](super::SessionContext::memory), changed
//! only as the memory `policy` allows, and kept in the state folder when the memory `kind` asks
//! for it.
//!
//! | `memory.kind` | kept | next seen by |
//! |---|---|---|
//! | `operator-context` | `<state>/memory/operator.jsonl` | every later session of the operator |
//! | `thread` | `<state>/memory/thread-<session>.jsonl` | the same session, after `session/load` |
//! | `none`, `external`, anything else, or no `memory` | not kept | — |
//!
//! It is written when a turn ends (if it changed), when the session is closed, and when the
//! connection ends, each write audited first (action `memory.write`); each write replaces the file atomically (a temporary file, fsynced and
//! renamed, through [`Workspace::write`]). Within one process every session shares one
//! `operator-context` memory; two processes of the same operator sharing a state folder are
//! not merged (the last write wins).
//!
//! With a database (feature `postgres`, `AGENTACP_DATABASE_URL`), each kept memory is a row
//! instead of a file (same names), replaced in one statement, with a version: a write checks
//! that nobody wrote since this process read the row. When another replica did, entries
//! only appended here are added after the other replica's (nothing is lost); a memory
//! redacted or summarised here replaces the other's (the last write wins, logged). A session
//! that starts, or is loaded, reads the newest row unless its memory has unsaved changes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::governance::{MemoryKind, MemoryPolicy, MemorySpec};
use crate::workspace::Workspace;

use crate::audit::{Actor, AuditEvent, Subject};
use crate::sync::lock;

/// Where writes of the memory are audited: the connection's log, as its operator.
pub(crate) trait MemoryAudit {
    /// The operator's id in audit records.
    fn operator_id(&self) -> &str;
    /// Appends `event` to the audit log.
    fn audit(&self, event: AuditEvent) -> crate::error::Result<()>;
}

/// The largest memory file read back (64 MiB); a larger one is left alone and reported.
const MAX_MEMORY_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// How many times a write to the database merges another replica's newer entries before it
/// gives up (reported; the entries stay unsaved for the next write).
const MAX_MERGES: usize = 8;

/// Kept memories as rows of a database rather than files (feature `postgres`).
pub(crate) trait MemoryRows: Send + Sync + std::fmt::Debug {
    /// The entries kept under `name` (JSON lines) and their version; `None` when none are.
    fn read(&self, name: &str) -> std::io::Result<Option<(String, i64)>>;
    /// Replaces the entries under `name` when they are as `expected`: their new version, or
    /// `None` when another writer changed them first (nothing written).
    fn replace(&self, name: &str, entries: &str, expected: Expected) -> std::io::Result<Option<i64>>;
}

/// What a write to [`MemoryRows`] expects to replace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expected {
    /// No row yet.
    Absent,
    /// The row at this version.
    Version(i64),
    /// Whatever is there (the last write wins).
    Any,
}

/// Why a change to the memory was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryError {
    /// The memory `policy` does not allow this change.
    NotAllowed {
        /// The policy, as written in OPERATOR.md.
        policy: String,
        /// What was tried: `redact` or `summarise`.
        operation: &'static str,
    },
    /// There is no entry at this index.
    NoSuchEntry(usize),
}

impl std::fmt::Display for MemoryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MemoryError::NotAllowed { policy, operation } => {
                write!(f, "the operator's memory is `{policy}`: it cannot {operation}")
            }
            MemoryError::NoSuchEntry(index) => write!(f, "the operator's memory has no entry {index}"),
        }
    }
}

impl std::error::Error for MemoryError {}

/// The operator's memory for one session. Cloning it gives another handle on the same entries.
#[derive(Debug, Clone)]
pub struct Memory {
    inner: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    policy: MemoryPolicy,
    /// Where it is kept; `None` when it ends with the session.
    file: Option<MemoryFile>,
    entries: Mutex<Entries>,
}

#[derive(Debug)]
struct MemoryFile {
    place: Place,
    name: String,
}

/// Where a kept memory is written.
#[derive(Debug)]
enum Place {
    /// A file of this folder.
    Folder(Workspace),
    /// A row of the database.
    Rows(Arc<dyn MemoryRows>),
}

#[derive(Debug, Default)]
struct Entries {
    items: Vec<Value>,
    /// Changed since it was last written.
    dirty: bool,
    /// In the database: the version of the row the entries were read from or last written
    /// as (`None`: there was no row).
    version: Option<i64>,
    /// How many of `items` the row held; those after it were appended here.
    base: usize,
    /// Redacted or summarised since it was read: not an append to merge.
    rewritten: bool,
}

impl Memory {
    /// A memory that ends with the session, under `policy`.
    pub fn ephemeral(policy: MemoryPolicy) -> Self {
        Memory::with(policy, None, Vec::new())
    }

    fn with(policy: MemoryPolicy, file: Option<MemoryFile>, items: Vec<Value>) -> Self {
        Memory {
            inner: Arc::new(Shared {
                policy,
                file,
                entries: Mutex::new(Entries {
                    base: items.len(),
                    items,
                    ..Entries::default()
                }),
            }),
        }
    }

    /// The entries, oldest first.
    pub fn entries(&self) -> Vec<Value> {
        lock(&self.inner.entries).items.clone()
    }

    /// How many entries there are.
    pub fn len(&self) -> usize {
        lock(&self.inner.entries).items.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The memory `policy` the changes follow.
    pub fn policy(&self) -> &MemoryPolicy {
        &self.inner.policy
    }

    /// Whether the runtime keeps these entries after the session (`thread`, `operator-context`).
    pub fn is_persisted(&self) -> bool {
        self.inner.file.is_some()
    }

    /// Adds an entry at the end. Every policy allows it. Kept as it will be read back: within
    /// [`MAX_WRITE_DEPTH`](crate::audit::MAX_WRITE_DEPTH) levels, what nests deeper kept as its
    /// JSON text (`{"$deepJson": "…"}`, as the audit log keeps it).
    pub fn append(&self, mut entry: Value) {
        crate::audit::bound(&mut entry, 1);
        let mut entries = lock(&self.inner.entries);
        entries.items.push(entry);
        entries.dirty = true;
    }

    /// Replaces entry `index` by `{"$redacted": true, "reason": …}` (AIP-7's redaction
    /// marker). Allowed by `redactable` and `summarising`, not by `append-only`.
    pub fn redact(&self, index: usize, reason: &str) -> Result<(), MemoryError> {
        if !self.inner.policy.may_redact() {
            return Err(self.refused("redact"));
        }
        let mut entries = lock(&self.inner.entries);
        let entry = entries.items.get_mut(index).ok_or(MemoryError::NoSuchEntry(index))?;
        *entry = json!({"$redacted": true, "reason": reason});
        entries.dirty = true;
        entries.rewritten = true;
        Ok(())
    }

    /// Replaces every entry by `summary` (each kept as [`append`](Memory::append) keeps it).
    /// Allowed by `summarising` only.
    pub fn summarise(&self, mut summary: Vec<Value>) -> Result<(), MemoryError> {
        if !self.inner.policy.may_summarise() {
            return Err(self.refused("summarise"));
        }
        summary.iter_mut().for_each(|entry| crate::audit::bound(entry, 1));
        let mut entries = lock(&self.inner.entries);
        entries.items = summary;
        entries.dirty = true;
        entries.rewritten = true;
        Ok(())
    }

    fn refused(&self, operation: &'static str) -> MemoryError {
        MemoryError::NotAllowed {
            policy: self.inner.policy.as_str().to_string(),
            operation,
        }
    }

    /// Writes the entries to their file when they changed since the last write; `Ok(false)`
    /// when there was nothing to write.
    #[cfg(test)]
    fn persist(&self) -> std::io::Result<bool> {
        self.persist_after(|_, _| Ok(()))
    }

    /// Like `persist`, calling `before(file name, entry count)` first (to audit the write);
    /// when it fails nothing is written and the entries stay unsaved.
    pub(crate) fn persist_after(
        &self,
        before: impl FnOnce(&str, usize) -> std::io::Result<()>,
    ) -> std::io::Result<bool> {
        let Some(file) = &self.inner.file else {
            return Ok(false);
        };
        let mut entries = lock(&self.inner.entries);
        if !entries.dirty {
            return Ok(false);
        }
        match &file.place {
            Place::Folder(folder) => {
                before(&file.name, entries.items.len())?;
                folder.write(&file.name, &lines(&entries.items)?)?;
            }
            Place::Rows(rows) => write_rows(rows.as_ref(), &file.name, &mut entries, before)?,
        }
        entries.dirty = false;
        Ok(true)
    }

    /// Reads the newest entries of a memory kept in the database, unless it has unsaved
    /// changes (another replica may have written since).
    fn refresh(&self) {
        let Some(MemoryFile {
            place: Place::Rows(rows),
            name,
        }) = &self.inner.file
        else {
            return;
        };
        let mut entries = lock(&self.inner.entries);
        if entries.dirty {
            return;
        }
        match rows.read(name) {
            Ok(Some((text, version))) if entries.version != Some(version) => {
                entries.items = parse_entries(&text, name);
                entries.base = entries.items.len();
                entries.version = Some(version);
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(memory = name.as_str(), %error, "the operator's memory could not be read again")
            }
        }
    }
}

/// Entries as JSON lines.
fn lines(items: &[Value]) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    for entry in items {
        serde_json::to_writer(&mut bytes, entry)?;
        bytes.push(b'\n');
    }
    Ok(bytes)
}

/// Writes `entries` to their row, audited once first (`before`): when another replica wrote
/// since they were read, its entries come first and those appended here after them; a
/// memory redacted or summarised here replaces the other's (the last write wins).
fn write_rows(
    rows: &dyn MemoryRows,
    name: &str,
    entries: &mut Entries,
    before: impl FnOnce(&str, usize) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut before = Some(before);
    let mut expected = entries.version.map_or(Expected::Absent, Expected::Version);
    for _ in 0..MAX_MERGES {
        if let Some(before) = before.take() {
            before(name, entries.items.len())?;
        }
        let text = String::from_utf8(lines(&entries.items)?).map_err(std::io::Error::other)?;
        if let Some(version) = rows.replace(name, &text, expected)? {
            entries.version = Some(version);
            entries.base = entries.items.len();
            entries.rewritten = false;
            return Ok(());
        }
        if entries.rewritten {
            tracing::warn!(
                memory = name,
                "another replica wrote the operator's memory since it was read; this redacted or summarised memory replaces it"
            );
            expected = Expected::Any;
            continue;
        }
        let (theirs, version) = match rows.read(name)? {
            Some((text, version)) => (parse_entries(&text, name), Some(version)),
            None => (Vec::new(), None),
        };
        let base = entries.base.min(entries.items.len());
        let mine = entries.items.split_off(base);
        entries.items = theirs;
        entries.base = entries.items.len();
        entries.items.extend(mine);
        entries.version = version;
        expected = version.map_or(Expected::Absent, Expected::Version);
    }
    Err(std::io::Error::other(
        "other replicas kept writing the operator's memory; this write was given up and is tried again at the next one",
    ))
}

/// The entries in `text` (JSON lines), an unreadable line skipped (a warning).
fn parse_entries(text: &str, name: &str) -> Vec<Value> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        // As deep as the audit's readers read: entries written before they were kept
        // within the bound nest up to about 130 levels.
        .filter_map(|(index, line)| match crate::audit::parse_record(line) {
            Ok(mut entry) => {
                crate::audit::bound(&mut entry, 1);
                Some(entry)
            }
            Err(error) => {
                tracing::warn!(
                    file = name,
                    line = index + 1,
                    error,
                    "skipping an unreadable memory entry"
                );
                None
            }
        })
        .collect()
}

/// Hands each session its memory, as the operator's `memory` says, and keeps what is shared.
#[derive(Debug)]
pub(crate) struct MemoryBook {
    spec: Option<MemorySpec>,
    /// `<state>/memory`.
    folder: PathBuf,
    /// The `operator-context` memory, once a session asked for it.
    operator: Mutex<Option<Memory>>,
    /// `thread` memories of the sessions open in this process.
    threads: Mutex<HashMap<String, Memory>>,
    /// Where kept memories go instead of the folder: the database's rows.
    rows: Option<Arc<dyn MemoryRows>>,
}

impl MemoryBook {
    pub(crate) fn new(spec: Option<MemorySpec>, state_dir: &Path) -> Self {
        MemoryBook {
            spec,
            folder: state_dir.join("memory"),
            operator: Mutex::default(),
            threads: Mutex::default(),
            rows: None,
        }
    }

    /// The same book, keeping memories in `rows` instead of files.
    pub(crate) fn with_rows(mut self, rows: Option<Arc<dyn MemoryRows>>) -> Self {
        self.rows = rows;
        self
    }

    fn policy(&self) -> MemoryPolicy {
        self.spec
            .as_ref()
            .map_or(MemoryPolicy::Summarising, |spec| spec.policy.clone())
    }

    /// The memory of session `session`: the operator's (loaded once), the session's own
    /// (loaded from an earlier run of that session), or a fresh one that ends with it.
    /// In the database, one already loaded is read again unless it has unsaved changes.
    pub(crate) fn for_session(&self, session: &str) -> Memory {
        let held = |memory: Option<&Memory>| {
            if let Some(memory) = memory {
                memory.refresh();
            }
        };
        match self.spec.as_ref().map(|spec| &spec.kind) {
            Some(MemoryKind::OperatorContext) => {
                let mut operator = lock(&self.operator);
                held(operator.as_ref());
                operator.get_or_insert_with(|| self.load("operator.jsonl")).clone()
            }
            Some(MemoryKind::Thread) if valid_name(session) => {
                let mut threads = lock(&self.threads);
                held(threads.get(session));
                threads
                    .entry(session.to_string())
                    .or_insert_with(|| self.load(&format!("thread-{session}.jsonl")))
                    .clone()
            }
            _ => Memory::ephemeral(self.policy()),
        }
    }

    /// The memory kept in row `name` of the database, or — when it cannot be read — one that
    /// is not kept (reported).
    fn load_row(&self, rows: &Arc<dyn MemoryRows>, name: &str) -> Memory {
        let (items, version) = match rows.read(name) {
            Ok(Some((text, version))) => (parse_entries(&text, name), Some(version)),
            Ok(None) => (Vec::new(), None),
            Err(error) => {
                tracing::error!(memory = name, %error, "the operator's memory cannot be read; this memory will not be kept");
                return Memory::ephemeral(self.policy());
            }
        };
        let file = MemoryFile {
            place: Place::Rows(rows.clone()),
            name: name.to_string(),
        };
        let memory = Memory::with(self.policy(), Some(file), items);
        lock(&memory.inner.entries).version = version;
        memory
    }

    /// The memory kept in `name`, or — when the folder cannot be used — one that is not kept
    /// (reported).
    fn load(&self, name: &str) -> Memory {
        if let Some(rows) = &self.rows {
            return self.load_row(rows, name);
        }
        let folder = crate::workspace::create_private_folder(&self.folder)
            .map_err(|error| error.to_string())
            .and_then(|()| Workspace::open(&self.folder));
        let folder = match folder {
            Ok(folder) => folder,
            Err(error) => {
                tracing::error!(folder = %self.folder.display(), %error, "the memory folder cannot be used; this memory will not be kept");
                return Memory::ephemeral(self.policy());
            }
        };
        let items = match folder.read(name, MAX_MEMORY_FILE_BYTES) {
            Ok(bytes) => parse_entries(&String::from_utf8_lossy(&bytes), name),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(error) => {
                // Writing would replace entries that could not be read: keep nothing instead.
                tracing::error!(file = name, %error, "the operator's memory cannot be read; this memory will not be kept");
                return Memory::ephemeral(self.policy());
            }
        };
        let file = MemoryFile {
            place: Place::Folder(folder),
            name: name.to_string(),
        };
        Memory::with(self.policy(), Some(file), items)
    }

    /// Keeps `memory` if its kind asks for it, audited first (action `memory.write`) when
    /// `connection` is given; failures are logged.
    pub(crate) fn persist(&self, session: &str, memory: &Memory, connection: Option<&dyn MemoryAudit>) {
        let audit = |file: &str, entries: usize| {
            let Some(connection) = connection else { return Ok(()) };
            let mut event = AuditEvent::new(
                Actor {
                    id: format!("operator:{}", connection.operator_id()),
                    role: Some("operator".into()),
                },
                "memory.write",
                Subject {
                    kind: "memory".into(),
                    reference: Some(session.to_string()),
                    path: Some(format!("memory/{file}")),
                },
            );
            event.output = Some(json!({"entries": entries, "policy": memory.policy().as_str()}));
            connection.audit(event).map_err(std::io::Error::other)
        };
        match memory.persist_after(audit) {
            Ok(true) => tracing::debug!(session, "operator memory saved"),
            Ok(false) => {}
            Err(error) => tracing::error!(session, %error, "saving the operator's memory failed"),
        }
    }

    /// The session ended for good (`session/close`): its memory is kept, and its `thread`
    /// memory is no longer held here.
    pub(crate) fn close(&self, session: &str, memory: &Memory, connection: Option<&dyn MemoryAudit>) {
        self.persist(session, memory, connection);
        lock(&self.threads).remove(session);
    }
}

/// Session ids name files only when they cannot name another one.
fn valid_name(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: MemoryKind, policy: MemoryPolicy) -> Option<MemorySpec> {
        Some(MemorySpec {
            kind,
            policy,
            share_with: Vec::new(),
            external: None,
        })
    }

    #[test]
    fn operator_context_memory_is_shared_kept_and_read_back() {
        let state = tempfile::tempdir().unwrap();
        let book = MemoryBook::new(
            spec(MemoryKind::OperatorContext, MemoryPolicy::AppendOnly),
            state.path(),
        );
        let first = book.for_session("sess_a");
        first.append(json!({"note": "one"}));
        assert_eq!(book.for_session("sess_b").len(), 1, "one memory for every session");
        book.persist("sess_a", &first, None);
        let again = MemoryBook::new(
            spec(MemoryKind::OperatorContext, MemoryPolicy::AppendOnly),
            state.path(),
        );
        assert_eq!(again.for_session("sess_c").entries(), [json!({"note": "one"})]);
    }

    #[test]
    fn thread_memory_belongs_to_its_session() {
        let state = tempfile::tempdir().unwrap();
        let book = MemoryBook::new(spec(MemoryKind::Thread, MemoryPolicy::Summarising), state.path());
        let memory = book.for_session("sess_a");
        memory.append(json!("a"));
        book.close("sess_a", &memory, None);
        assert!(book.for_session("sess_b").is_empty());
        let later = MemoryBook::new(spec(MemoryKind::Thread, MemoryPolicy::Summarising), state.path());
        assert_eq!(later.for_session("sess_a").entries(), [json!("a")]);
        // An id that could name another file is never kept.
        assert!(!later.for_session("../x").is_persisted());
    }

    #[test]
    fn other_kinds_are_dropped_and_write_nothing() {
        let state = tempfile::tempdir().unwrap();
        for memory in [
            None,
            spec(MemoryKind::None, MemoryPolicy::Summarising),
            spec(MemoryKind::External, MemoryPolicy::Summarising),
            spec(MemoryKind::Other("ephemeral".into()), MemoryPolicy::Summarising),
        ] {
            let book = MemoryBook::new(memory, state.path());
            let session = book.for_session("sess_a");
            session.append(json!(1));
            assert!(!session.is_persisted());
            book.close("sess_a", &session, None);
            assert!(book.for_session("sess_a").is_empty());
        }
        assert!(!state.path().join("memory").exists());
    }

    #[test]
    fn the_policy_decides_what_may_change() {
        let append_only = Memory::ephemeral(MemoryPolicy::AppendOnly);
        append_only.append(json!("kept"));
        assert!(matches!(
            append_only.redact(0, "x"),
            Err(MemoryError::NotAllowed { .. })
        ));
        assert!(append_only.summarise(vec![]).is_err());
        assert!(
            Memory::ephemeral(MemoryPolicy::Other("new".into()))
                .redact(0, "x")
                .is_err()
        );
        let redactable = Memory::ephemeral(MemoryPolicy::Redactable);
        redactable.append(json!("secret"));
        redactable.redact(0, "personal data").unwrap();
        assert_eq!(redactable.entries()[0]["$redacted"], true);
        assert_eq!(redactable.redact(5, "x"), Err(MemoryError::NoSuchEntry(5)));
        assert!(redactable.summarise(vec![]).is_err());
        let summarising = Memory::ephemeral(MemoryPolicy::Summarising);
        summarising.append(json!(1));
        summarising.append(json!(2));
        summarising.summarise(vec![json!("1 and 2")]).unwrap();
        assert_eq!(summarising.entries(), [json!("1 and 2")]);
    }

    /// `levels` nested arrays around `"x"`, as JSON text.
    fn nested_text(levels: usize) -> String {
        format!("{}\"x\"{}", "[".repeat(levels), "]".repeat(levels))
    }

    /// An entry nested deeper than JSON readers read is written within the bound (its deep
    /// part kept as text) and read back; one written deeper before (up to the audit readers'
    /// limit) is read too, and written back within the bound. Before, both were skipped on
    /// reading, with a warning.
    #[test]
    fn a_deep_entry_is_written_within_the_bound_and_read_back_whole() {
        let state = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(state.path().join("memory")).unwrap();
        let earlier = nested_text(130);
        std::fs::write(state.path().join("memory/operator.jsonl"), format!("{earlier}\n")).unwrap();
        let kind = || spec(MemoryKind::OperatorContext, MemoryPolicy::AppendOnly);
        let book = MemoryBook::new(kind(), state.path());
        let memory = book.for_session("sess_a");
        assert_eq!(memory.len(), 1, "the entry written before is read");
        let deep: Value = {
            let mut deserializer = serde_json::Deserializer::from_str(&earlier);
            deserializer.disable_recursion_limit();
            serde::Deserialize::deserialize(&mut deserializer).unwrap()
        };
        memory.append(deep);
        assert!(memory.persist().unwrap());
        let text = std::fs::read_to_string(state.path().join("memory/operator.jsonl")).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for line in &lines {
            assert!(serde_json::from_str::<Value>(line).is_ok(), "any reader reads {line}");
        }
        let again = MemoryBook::new(kind(), state.path()).for_session("sess_b");
        assert_eq!(again.len(), 2, "nothing is skipped");
        let kept = again.entries()[1].to_string();
        assert!(kept.contains(crate::audit::DEEP_JSON_KEY), "{kept}");
        assert_eq!(kept.matches('[').count(), 130, "all of it is kept: {kept}");
    }

    #[test]
    fn a_torn_or_unreadable_line_is_skipped_and_an_unchanged_memory_is_not_rewritten() {
        let state = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(state.path().join("memory")).unwrap();
        std::fs::write(state.path().join("memory/operator.jsonl"), "{\"a\":1}\n{\"torn\n").unwrap();
        let book = MemoryBook::new(
            spec(MemoryKind::OperatorContext, MemoryPolicy::AppendOnly),
            state.path(),
        );
        let memory = book.for_session("sess_a");
        assert_eq!(memory.entries(), [json!({"a": 1})]);
        assert!(!memory.persist().unwrap(), "nothing changed");
        memory.append(json!({"b": 2}));
        assert!(memory.persist().unwrap());
        let text = std::fs::read_to_string(state.path().join("memory/operator.jsonl")).unwrap();
        assert_eq!(text, "{\"a\":1}\n{\"b\":2}\n");
    }
}
