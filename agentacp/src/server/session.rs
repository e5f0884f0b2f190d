//! Sessions: what a turn knows about its session ([`SessionContext`]), and where the history
//! that `session/load` replays is kept ([`SessionStore`]: in memory, or in files that survive a
//! restart).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde_json::Value;
use serde_json::value::RawValue;

use crate::auth::Identity;
use crate::governance::{MemoryPolicy, OperatorProfile};
use crate::surface::{ConfigValue, Settings, Surface};
use crate::sync::lock;
use crate::workspace::Workspace;

use super::memory::Memory;

/// A session as operator code sees it.
#[derive(Debug, Clone)]
pub struct SessionContext {
    id: String,
    cwd: PathBuf,
    workspace: Workspace,
    mcp_servers: Value,
    /// The user's `allow_always` / `reject_always` answers, by tool, for as long as the
    /// session is open in this process.
    remembered: std::sync::Arc<Mutex<HashMap<String, Remembered>>>,
    /// The operator's AIP-9 profile (memory, skills, policies).
    operator: std::sync::Arc<OperatorProfile>,
    /// The operator's memory as this session sees it.
    memory: Memory,
    /// The manifest's session surface (modes, config options, commands).
    surface: &'static Surface,
    /// The current mode and config values.
    settings: std::sync::Arc<Mutex<Settings>>,
    /// The `additionalDirectories` the client gave, each confined like `cwd`.
    additional_directories: std::sync::Arc<[Workspace]>,
    /// Who the client authenticated as (remote connections); `None` over stdio.
    identity: Option<Identity>,
    /// The session's MCP servers (tier sandboxed), connected on first use.
    #[cfg(feature = "mcp")]
    mcp: std::sync::Arc<tokio::sync::Mutex<crate::mcp::McpClients>>,
    /// The local sandbox its programs run in (tier sandboxed).
    sandbox: Option<std::sync::Arc<crate::sandbox::Confinement>>,
    /// Where its history is kept: its identity's store, also once the connection has another.
    store: Option<KeptIn>,
}

/// The session store a session's history is kept in.
#[derive(Clone)]
pub(crate) struct KeptIn(pub(crate) std::sync::Arc<dyn SessionStore>);

impl std::fmt::Debug for KeptIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionStore")
    }
}

/// Nothing declared: the surface of a session made without a manifest's.
static NO_SURFACE: Surface = Surface::NONE;

/// An answer the user gave for the rest of the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Remembered {
    /// `allow_always`, by this approver.
    Allowed(String),
    /// `reject_always`, by this approver.
    Rejected(String),
}

impl SessionContext {
    /// A session whose `cwd` is `workspace`'s base, with the `mcpServers` the client passed.
    pub fn new(id: String, workspace: Workspace, mcp_servers: Value) -> Self {
        // Checked by `session/new` and `session/load` at the sandboxed tier, where they are used.
        #[cfg(feature = "mcp")]
        let mcp = crate::mcp::McpClients::new(
            crate::mcp::McpServerSpec::parse_all(&mcp_servers).unwrap_or_default(),
            workspace.path(),
        );
        SessionContext {
            #[cfg(feature = "mcp")]
            mcp: std::sync::Arc::new(tokio::sync::Mutex::new(mcp)),
            id,
            cwd: workspace.path(),
            workspace,
            mcp_servers,
            remembered: std::sync::Arc::default(),
            operator: std::sync::Arc::default(),
            memory: Memory::ephemeral(MemoryPolicy::Summarising),
            surface: &NO_SURFACE,
            settings: std::sync::Arc::default(),
            additional_directories: std::sync::Arc::new([]),
            identity: None,
            sandbox: None,
            store: None,
        }
    }

    /// The same session, its history kept in `store`.
    pub(crate) fn with_store(mut self, store: std::sync::Arc<dyn SessionStore>) -> Self {
        self.store = Some(KeptIn(store));
        self
    }

    /// The store its history is kept in, where one was given.
    pub(crate) fn store(&self) -> Option<&std::sync::Arc<dyn SessionStore>> {
        self.store.as_ref().map(|kept| &kept.0)
    }

    /// The same session, running its programs (the operator's commands, stdio MCP servers)
    /// in `sandbox`.
    pub(crate) fn with_sandbox(mut self, sandbox: Option<std::sync::Arc<crate::sandbox::Confinement>>) -> Self {
        #[cfg(feature = "mcp")]
        if let Some(clients) = std::sync::Arc::get_mut(&mut self.mcp) {
            clients.get_mut().confine(sandbox.clone());
        }
        self.sandbox = sandbox;
        self
    }

    /// The local sandbox the session's programs run in, when the manifest binds one.
    pub fn sandbox(&self) -> Option<&crate::sandbox::Confinement> {
        self.sandbox.as_deref()
    }

    /// The same session, with the manifest's session surface, its settings and the extra roots.
    pub(crate) fn with_surface(
        mut self,
        surface: &'static Surface,
        settings: Settings,
        additional_directories: Vec<Workspace>,
    ) -> Self {
        self.surface = surface;
        self.settings = std::sync::Arc::new(Mutex::new(settings));
        self.additional_directories = additional_directories.into();
        self
    }

    /// The session's current mode (`metadata.agentacp.modes`; `None` without modes).
    pub fn mode(&self) -> Option<String> {
        lock(&self.settings).mode.clone()
    }

    /// The current value of config option `id` (`metadata.agentacp.configOptions`; `None`
    /// when it is not declared).
    pub fn config_value(&self, id: &str) -> Option<ConfigValue> {
        lock(&self.settings).config(self.surface, id)
    }

    /// The manifest's session surface.
    pub fn surface(&self) -> &'static Surface {
        self.surface
    }

    /// A copy of the current settings.
    pub(crate) fn settings(&self) -> Settings {
        lock(&self.settings).clone()
    }

    /// Changes the settings under the lock; returns what `change` returns.
    pub(crate) fn change_settings<R>(&self, change: impl FnOnce(&mut Settings) -> R) -> R {
        change(&mut lock(&self.settings))
    }

    /// The extra roots the client gave in `additionalDirectories`
    /// (`metadata.agentacp.sessions.additionalDirectories`), each canonical and inside the
    /// workspace root, like [`workspace`](Self::workspace).
    pub fn additional_directories(&self) -> &[Workspace] {
        &self.additional_directories
    }

    /// The same session, with the operator's profile and the memory it sees.
    pub(crate) fn with_operator(mut self, operator: std::sync::Arc<OperatorProfile>, memory: Memory) -> Self {
        self.operator = operator;
        self.memory = memory;
        self
    }

    /// What the AIP-9 operator document says of the operator: its `memory`, `skills` and
    /// `governance.policies`, as typed data (empty when the manifest names no operator).
    pub fn operator(&self) -> &OperatorProfile {
        &self.operator
    }

    /// The operator's memory: entries to append and read back, changed only as the memory
    /// `policy` allows, and kept after the session when the memory `kind` asks for it
    /// (`operator-context`: for every later session; `thread`: for this session when it is
    /// loaded again). See [`Memory`].
    pub fn memory(&self) -> &Memory {
        &self.memory
    }

    /// The user's answer for the rest of the session about `tool`, if any.
    pub(crate) fn remembered(&self, tool: &str) -> Option<Remembered> {
        lock(&self.remembered).get(tool).cloned()
    }

    /// Keeps the user's answer about `tool` for the rest of the session.
    pub(crate) fn remember(&self, tool: &str, answer: Remembered) {
        lock(&self.remembered).insert(tool.to_string(), answer);
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The session's working directory (canonical when the session began, inside the
    /// workspace root). For display and for starting processes; read and write files through
    /// [`workspace`](Self::workspace).
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// The session's files: paths relative to `cwd` (or absolute inside it), opened beneath the
    /// workspace root's handle, no symlinks followed (see [`Workspace`]).
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// `path` made absolute inside one of the session's roots: relative to `cwd`, or absolute
    /// inside `cwd` or one of the [`additional_directories`](Self::additional_directories).
    pub fn resolve_in_roots(&self, path: &str) -> std::io::Result<PathBuf> {
        match self.workspace.resolve(path) {
            Ok(resolved) => Ok(resolved),
            Err(error) if !Path::new(path).is_absolute() => Err(error),
            Err(error) => self
                .additional_directories
                .iter()
                .find_map(|root| root.resolve(path).ok())
                .ok_or(error),
        }
    }

    /// The identity the client authenticated as, on a connection that needs authentication
    /// (WebSocket with tokens); `None` over stdio, where whoever started the server is the
    /// user.
    pub fn identity(&self) -> Option<&Identity> {
        self.identity.as_ref()
    }

    pub(crate) fn with_identity(mut self, identity: Option<Identity>) -> Self {
        self.identity = identity;
        self
    }

    /// The MCP servers from `session/new` / `session/load`, as JSON.
    pub(crate) fn mcp_servers(&self) -> &Value {
        &self.mcp_servers
    }

    /// The session's MCP servers (`Turn::mcp`).
    #[cfg(feature = "mcp")]
    pub(crate) fn mcp_clients(&self) -> &tokio::sync::Mutex<crate::mcp::McpClients> {
        &self.mcp
    }

    /// Stops the session's MCP servers (bounded); nothing to do without feature `mcp`.
    pub(crate) async fn close_mcp(&self) {
        #[cfg(feature = "mcp")]
        self.mcp.lock().await.close().await;
    }
}

/// A stored session: where it ran and every `session/update` it produced, in order.
#[derive(Debug, Clone, Default)]
pub struct StoredSession {
    /// The `cwd` it was created with.
    pub cwd: PathBuf,
    /// The `update` objects, oldest first.
    pub history: Vec<Box<RawValue>>,
}

/// A stored session as `session/list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    /// The session's id.
    pub id: String,
    /// The `cwd` it was created with.
    pub cwd: PathBuf,
    /// When it was last written, if known.
    pub updated_at: Option<std::time::SystemTime>,
}

/// `session/list`'s order: the most recently written first, ties by id.
fn newest_first(a: &SessionSummary, b: &SessionSummary) -> std::cmp::Ordering {
    ordered(&a.updated_at, &a.id, &b.updated_at, &b.id)
}

/// `session/list`'s order of two positions (`updated_at`, id): newest first, ties by id.
fn ordered(
    a_at: &Option<std::time::SystemTime>,
    a_id: &str,
    b_at: &Option<std::time::SystemTime>,
    b_id: &str,
) -> std::cmp::Ordering {
    b_at.cmp(a_at).then_with(|| a_id.cmp(b_id))
}

/// Where a page of `session/list` ended: the last session it listed, by what the list is
/// ordered by. The next page starts after it (a keyset: it costs the page, however deep).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListPosition {
    /// That session's `updated_at`.
    pub updated_at: Option<std::time::SystemTime>,
    /// That session's id.
    pub id: String,
}

impl ListPosition {
    /// The position of `session`, the last of a page.
    pub fn of(session: &SessionSummary) -> Self {
        ListPosition {
            updated_at: session.updated_at,
            id: session.id.clone(),
        }
    }

    /// Whether `session` comes after this position in `session/list`'s order.
    pub fn precedes(&self, session: &SessionSummary) -> bool {
        self.precedes_at(&session.updated_at, &session.id)
    }

    /// Whether the session `id` written at `updated_at` comes after this position.
    fn precedes_at(&self, updated_at: &Option<std::time::SystemTime>, id: &str) -> bool {
        ordered(&self.updated_at, &self.id, updated_at, id).is_lt()
    }
}

/// The error of a store that cannot do what a manifest offers (the default of the optional
/// [`SessionStore`] methods).
fn unsupported(what: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        format!("this session store cannot {what}"),
    )
}

/// Keeps session history for `session/load` (and `session/list`, `resume`, `delete`).
pub trait SessionStore: Send + Sync + 'static {
    /// Records a new session.
    fn create(&self, id: &str, cwd: &Path) -> std::io::Result<()>;
    /// Appends one `update` object (JSON) to a session's history.
    fn append(&self, id: &str, update: &str) -> std::io::Result<()>;
    /// Reads a session back; `None` when there is no such session.
    fn load(&self, id: &str) -> std::io::Result<Option<StoredSession>>;
    /// Makes everything appended so far durable (called at exit).
    fn flush(&self) -> std::io::Result<()>;
    /// Makes everything appended to one session durable (called at the end of each of its
    /// turns). The default flushes everything.
    fn flush_session(&self, id: &str) -> std::io::Result<()> {
        let _ = id;
        self.flush()
    }
    /// One stored session's summary, without its history (for `session/resume` and
    /// `session/delete`); `None` when there is no such session. The default reads it whole.
    fn summary(&self, id: &str) -> std::io::Result<Option<SessionSummary>> {
        Ok(self.load(id)?.map(|stored| SessionSummary {
            id: id.to_string(),
            cwd: stored.cwd,
            updated_at: None,
        }))
    }
    /// Every stored session, in any order (what the default [`list_page`](Self::list_page)
    /// pages through for `session/list`). The default cannot list.
    fn list(&self) -> std::io::Result<Vec<SessionSummary>> {
        Err(unsupported("list sessions"))
    }
    /// One page of `session/list`: the stored sessions whose `cwd` is `cwd` (all when `None`),
    /// newest first (by `updated_at`, ties by id), `len` of them from the first that comes
    /// `after` the previous page's last (from the start when `None`), and whether any come
    /// after the page. The default sorts the whole [`list`](Self::list); a store can answer
    /// without reading every session (a [`FileStore`] reads the headers of the page only, and
    /// remembers them; the PostgreSQL store reads an index range from `after`).
    fn list_page(
        &self,
        cwd: Option<&Path>,
        after: Option<&ListPosition>,
        len: usize,
    ) -> std::io::Result<(Vec<SessionSummary>, bool)> {
        let mut sessions = self.list()?;
        sessions.retain(|session| {
            cwd.is_none_or(|cwd| session.cwd == cwd) && after.is_none_or(|after| after.precedes(session))
        });
        sessions.sort_by(newest_first);
        let more = len < sessions.len();
        sessions.truncate(len);
        Ok((sessions, more))
    }
    /// Removes a stored session; `false` when there was none (for `session/delete`). The
    /// default cannot delete.
    fn delete(&self, id: &str) -> std::io::Result<bool> {
        let _ = id;
        Err(unsupported("delete sessions"))
    }
}

/// Sessions in memory: `session/load` works until the process exits.
#[derive(Debug, Default)]
pub struct MemoryStore {
    sessions: Mutex<HashMap<String, (PathBuf, Vec<String>)>>,
}

impl SessionStore for MemoryStore {
    fn create(&self, id: &str, cwd: &Path) -> std::io::Result<()> {
        lock(&self.sessions).insert(id.to_string(), (cwd.to_path_buf(), Vec::new()));
        Ok(())
    }

    fn append(&self, id: &str, update: &str) -> std::io::Result<()> {
        if let Some((_, history)) = lock(&self.sessions).get_mut(id) {
            history.push(update.to_string());
        }
        Ok(())
    }

    fn load(&self, id: &str) -> std::io::Result<Option<StoredSession>> {
        let sessions = lock(&self.sessions);
        let Some((cwd, history)) = sessions.get(id) else {
            return Ok(None);
        };
        Ok(Some(StoredSession {
            cwd: cwd.clone(),
            history: history
                .iter()
                .filter_map(|u| RawValue::from_string(u.clone()).ok())
                .collect(),
        }))
    }

    fn flush(&self) -> std::io::Result<()> {
        Ok(())
    }

    fn list(&self) -> std::io::Result<Vec<SessionSummary>> {
        Ok(lock(&self.sessions)
            .iter()
            .map(|(id, (cwd, _))| SessionSummary {
                id: id.clone(),
                cwd: cwd.clone(),
                updated_at: None,
            })
            .collect())
    }

    fn delete(&self, id: &str) -> std::io::Result<bool> {
        Ok(lock(&self.sessions).remove(id).is_some())
    }
}

/// Sessions in files, one `<id>.jsonl` per session in a folder: a header line
/// (`{"sessionId", "cwd"}`) and then one `update` object per line. Survives a restart; a
/// torn last line (a crash mid-write) is skipped on load.
///
/// At most [`MAX_OPEN_SESSION_FILES`] files are open at once (the least recently used is
/// flushed, synced and closed to make room, and reopened when its session is used again), and
/// only files written since their last sync are synced: a connection with thousands of
/// sessions costs neither thousands of file descriptors nor thousands of fsyncs per turn.
///
/// `session/list` reads the folder and each file's metadata (its time) at every call, so
/// files other processes write or remove show as they are now; it reads a file's header line
/// only for sessions it shows (or filters by `cwd`) and remembers it for as long as that file
/// exists: a header never changes once written (files are only appended to), and a file
/// replaced under the same name (another inode or birth time) is read again.
#[derive(Debug)]
pub struct FileStore {
    dir: PathBuf,
    writers: Mutex<Writers>,
    /// The `cwd` in each session file's header, by id, with the file it was read from.
    headers: Mutex<HashMap<String, CachedHeader>>,
}

/// Which file a header was read from: a file replaced under the same name is another one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileKey {
    #[cfg(unix)]
    dev: u64,
    #[cfg(unix)]
    ino: u64,
    /// The volume serial and file index (`None`: the file is gone, as the caller finds next).
    #[cfg(not(unix))]
    id: Option<acp_process::file::FileId>,
    born: Option<std::time::SystemTime>,
}

impl FileKey {
    /// The key of the file `path` whose `metadata` was just read.
    #[cfg(unix)]
    fn of(_path: &Path, metadata: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        FileKey {
            dev: metadata.dev(),
            ino: metadata.ino(),
            born: metadata.created().ok(),
        }
    }

    /// The key of the file `path` whose `metadata` was just read: std's metadata has no file
    /// index off Unix (unstable), so the file is asked for it by path.
    #[cfg(not(unix))]
    fn of(path: &Path, metadata: &std::fs::Metadata) -> Self {
        FileKey {
            id: acp_process::file::identity_of_path(path).ok(),
            born: metadata.created().ok(),
        }
    }
}

#[derive(Debug, Clone)]
struct CachedHeader {
    file: FileKey,
    cwd: PathBuf,
}

/// A session file as the folder shows it, before its header is read.
struct Listed {
    id: String,
    updated_at: Option<std::time::SystemTime>,
    file: FileKey,
}

/// How many session files a [`FileStore`] keeps open at most.
pub const MAX_OPEN_SESSION_FILES: usize = 32;

/// The open session files, with what an LRU needs.
#[derive(Debug, Default)]
struct Writers {
    open: HashMap<String, OpenFile>,
    /// Bumped at every use; the smallest `used` is the least recently used.
    clock: u64,
}

#[derive(Debug)]
struct OpenFile {
    writer: BufWriter<File>,
    /// Written since it was last synced.
    dirty: bool,
    used: u64,
}

impl OpenFile {
    fn sync(&mut self) -> std::io::Result<()> {
        self.writer.flush()?;
        if self.dirty {
            self.writer.get_ref().sync_data()?;
            self.dirty = false;
        }
        Ok(())
    }
}

impl Writers {
    /// Keeps `file` open for `id`, closing the least recently used file first when full.
    fn insert(&mut self, id: &str, writer: BufWriter<File>, dirty: bool) -> std::io::Result<&mut OpenFile> {
        if self.open.len() >= MAX_OPEN_SESSION_FILES
            && let Some(oldest) = self
                .open
                .iter()
                .min_by_key(|(_, file)| file.used)
                .map(|(id, _)| id.clone())
            && let Some(mut file) = self.open.remove(&oldest)
        {
            file.sync()?;
        }
        self.clock += 1;
        let used = self.clock;
        Ok(self
            .open
            .entry(id.to_string())
            .or_insert(OpenFile { writer, dirty, used }))
    }

    fn touch(&mut self, id: &str) -> Option<&mut OpenFile> {
        self.clock += 1;
        let clock = self.clock;
        let file = self.open.get_mut(id)?;
        file.used = clock;
        Some(file)
    }
}

impl FileStore {
    /// A store in `dir` (created when missing, with its missing parents, as its user's alone:
    /// `0700`, since sessions hold what was said in them).
    pub fn open(dir: impl Into<PathBuf>) -> std::io::Result<Self> {
        let dir = dir.into();
        crate::workspace::create_private_folder(&dir)?;
        Ok(FileStore {
            dir,
            writers: Mutex::new(Writers::default()),
            headers: Mutex::new(HashMap::new()),
        })
    }

    fn path(&self, id: &str) -> Option<PathBuf> {
        valid_id(id).then(|| self.dir.join(format!("{id}.jsonl")))
    }

    /// The open file of session `id`, reopened when it was closed to make room; `None` for a
    /// session this store does not have.
    fn writer<'a>(&self, writers: &'a mut Writers, id: &str) -> std::io::Result<Option<&'a mut OpenFile>> {
        if writers.touch(id).is_none() {
            let Some(path) = self.path(id) else { return Ok(None) };
            let Some(mut file) = open_session_file(OpenOptions::new().read(true).append(true), &path)? else {
                return Ok(None);
            };
            end_with_newline(&mut file)?;
            writers.insert(id, BufWriter::new(file), false)?;
        }
        Ok(writers.open.get_mut(id))
    }

    /// A session file's header line and time, its history not read; `None` when there is no
    /// such session (or `id` could name another file).
    fn header(&self, id: &str) -> std::io::Result<Option<SessionSummary>> {
        Ok(self.read_header(id)?.map(|(summary, _)| summary))
    }

    /// [`header`](Self::header), and which file it was read from.
    fn read_header(&self, id: &str) -> std::io::Result<Option<(SessionSummary, FileKey)>> {
        let Some(path) = self.path(id) else { return Ok(None) };
        let Some(file) = open_session_file(OpenOptions::new().read(true), &path)? else {
            return Ok(None);
        };
        let metadata = file.metadata()?;
        let updated_at = metadata.modified().ok();
        let mut header = String::new();
        BufReader::new(file).take(64 * 1024).read_line(&mut header)?;
        let cwd = serde_json::from_str::<Value>(&header)
            .ok()
            .and_then(|h| h.get("cwd").and_then(Value::as_str).map(PathBuf::from))
            .ok_or_else(|| std::io::Error::other("the header line has no `cwd`"))?;
        let summary = SessionSummary {
            id: id.to_string(),
            cwd,
            updated_at,
        };
        Ok(Some((summary, FileKey::of(&path, &metadata))))
    }

    /// Writes out what this process buffers, so that each file's time is its last write's.
    fn flush_buffers(&self) -> std::io::Result<()> {
        for file in lock(&self.writers).open.values_mut() {
            file.writer.flush()?;
        }
        Ok(())
    }

    /// The session files in the folder now, newest first (ties by id), from the folder and
    /// each file's metadata: no file is opened (on Windows each is, for its attributes only:
    /// its file index).
    fn scan(&self) -> std::io::Result<Vec<Listed>> {
        self.flush_buffers()?;
        let mut listed = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".jsonl")) else {
                continue;
            };
            if !valid_id(id) {
                continue;
            }
            let metadata = match entry.metadata() {
                Ok(metadata) => metadata,
                // Removed since the folder was read.
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
                Err(error) => {
                    tracing::warn!(session = id, %error, "skipping a session file without readable metadata");
                    continue;
                }
            };
            // A FIFO, socket, device, folder or symbolic link is no session's file.
            if !metadata.is_file() {
                tracing::warn!(session = id, path = %entry.path().display(), "skipping a session store entry that is not a regular file");
                continue;
            }
            listed.push(Listed {
                id: id.to_string(),
                updated_at: metadata.modified().ok(),
                file: FileKey::of(&entry.path(), &metadata),
            });
        }
        listed.sort_by(|a, b| ordered(&a.updated_at, &a.id, &b.updated_at, &b.id));
        // Forget the headers of files no longer there.
        let mut headers = lock(&self.headers);
        if headers.len() > listed.len() {
            let present: std::collections::HashSet<&str> = listed.iter().map(|l| l.id.as_str()).collect();
            headers.retain(|id, _| present.contains(id.as_str()));
        }
        Ok(listed)
    }

    /// The `cwd` in `file`'s header: remembered, or read (and remembered); `None` when the file
    /// is gone or its header unreadable (a warning).
    fn cwd_of(&self, headers: &mut HashMap<String, CachedHeader>, file: &Listed) -> Option<PathBuf> {
        if let Some(cached) = headers.get(&file.id)
            && cached.file == file.file
        {
            return Some(cached.cwd.clone());
        }
        match self.read_header(&file.id) {
            Ok(Some((summary, key))) => {
                headers.insert(
                    file.id.clone(),
                    CachedHeader {
                        file: key,
                        cwd: summary.cwd.clone(),
                    },
                );
                Some(summary.cwd)
            }
            Ok(None) => None,
            Err(error) => {
                tracing::warn!(session = file.id, %error, "skipping a session file without a readable header");
                None
            }
        }
    }

    /// How many session files are open now (at most [`MAX_OPEN_SESSION_FILES`]).
    pub fn open_files(&self) -> usize {
        lock(&self.writers).open.len()
    }
}

/// Opens the session file at `path` with `options`, without ever blocking: the open does not
/// wait (`O_NONBLOCK`: a FIFO put in the store would otherwise hang the open, and with it
/// `session/list` and the connection), and only a regular file is kept (checked on the open
/// file, so it cannot be swapped between the check and the use). `None` when there is no
/// file, or (a warning) when it is not a regular file; then blocking I/O as usual.
fn open_session_file(options: &mut OpenOptions, path: &Path) -> std::io::Result<Option<File>> {
    use acp_process::file::{Refused, open_regular};
    match open_regular(path, options) {
        Ok(file) => Ok(Some(file)),
        Err(Refused::Io(error)) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(Refused::Io(error)) => Err(error),
        Err(Refused::NotRegular(_) | Refused::TooLarge(_)) => {
            tracing::warn!(path = %path.display(), "ignoring a session store entry that is not a regular file");
            Ok(None)
        }
    }
}

/// After a crash mid-write the file may end inside a line; start the next record on a line of
/// its own so that only the torn one is lost.
fn end_with_newline(file: &mut File) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    if file.metadata()?.len() == 0 {
        return Ok(());
    }
    file.seek(SeekFrom::End(-1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    if last[0] != b'\n' {
        file.write_all(b"\n")?;
    }
    Ok(())
}

/// Session ids the runtime makes are `sess_` + hex; anything that could name another file is
/// refused before touching the disk.
fn valid_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl SessionStore for FileStore {
    fn create(&self, id: &str, cwd: &Path) -> std::io::Result<()> {
        let path = self
            .path(id)
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "bad session id"))?;
        let header = serde_json::json!({"sessionId": id, "cwd": cwd});
        let mut file = OpenOptions::new().create_new(true).write(true).open(&path)?;
        writeln!(file, "{header}")?;
        file.sync_data()?;
        let key = FileKey::of(&path, &file.metadata()?);
        lock(&self.headers).insert(
            id.to_string(),
            CachedHeader {
                file: key,
                cwd: cwd.to_path_buf(),
            },
        );
        lock(&self.writers).insert(id, BufWriter::new(file), false)?;
        Ok(())
    }

    fn append(&self, id: &str, update: &str) -> std::io::Result<()> {
        let mut writers = lock(&self.writers);
        if let Some(file) = self.writer(&mut writers, id)? {
            file.writer.write_all(update.as_bytes())?;
            file.writer.write_all(b"\n")?;
            file.dirty = true;
        }
        Ok(())
    }

    fn load(&self, id: &str) -> std::io::Result<Option<StoredSession>> {
        let Some(path) = self.path(id) else { return Ok(None) };
        // Whatever this process still buffers for the session goes to the file first.
        if let Some(file) = lock(&self.writers).open.get_mut(id) {
            file.writer.flush()?;
        }
        let Some(file) = open_session_file(OpenOptions::new().read(true), &path)? else {
            return Ok(None);
        };
        let mut lines = BufReader::new(file).lines();
        let Some(header) = lines.next().transpose()? else {
            return Ok(None);
        };
        let header: Value = serde_json::from_str(&header).map_err(std::io::Error::other)?;
        let cwd = header
            .get("cwd")
            .and_then(Value::as_str)
            .map(PathBuf::from)
            .unwrap_or_default();
        let mut history = Vec::new();
        for (index, line) in lines.enumerate() {
            let line = line?;
            match RawValue::from_string(line) {
                Ok(update) => history.push(update),
                Err(error) => {
                    tracing::warn!(session = id, line = index + 2, %error, "skipping an unreadable history line");
                }
            }
        }
        Ok(Some(StoredSession { cwd, history }))
    }

    fn flush(&self) -> std::io::Result<()> {
        for file in lock(&self.writers).open.values_mut() {
            file.sync()?;
        }
        Ok(())
    }

    fn list(&self) -> std::io::Result<Vec<SessionSummary>> {
        let listed = self.scan()?;
        let mut headers = lock(&self.headers);
        Ok(listed
            .into_iter()
            .filter_map(|file| {
                let cwd = self.cwd_of(&mut headers, &file)?;
                Some(SessionSummary {
                    id: file.id,
                    cwd,
                    updated_at: file.updated_at,
                })
            })
            .collect())
    }

    fn list_page(
        &self,
        cwd: Option<&Path>,
        after: Option<&ListPosition>,
        len: usize,
    ) -> std::io::Result<(Vec<SessionSummary>, bool)> {
        let listed = self.scan()?;
        let mut headers = lock(&self.headers);
        let mut page = Vec::new();
        for file in listed {
            // The files are in the list's order: those up to `after` are passed unread.
            if after.is_some_and(|after| !after.precedes_at(&file.updated_at, &file.id)) {
                continue;
            }
            // Every header of the page is read (when not remembered): a file without a
            // readable one is not counted, as `list` does not list it.
            let Some(session_cwd) = self.cwd_of(&mut headers, &file) else {
                continue;
            };
            if cwd.is_some_and(|cwd| cwd != session_cwd) {
                continue;
            }
            if page.len() >= len {
                return Ok((page, true));
            }
            page.push(SessionSummary {
                id: file.id,
                cwd: session_cwd,
                updated_at: file.updated_at,
            });
        }
        Ok((page, false))
    }

    fn summary(&self, id: &str) -> std::io::Result<Option<SessionSummary>> {
        if let Some(file) = lock(&self.writers).open.get_mut(id) {
            file.writer.flush()?;
        }
        self.header(id)
    }

    fn delete(&self, id: &str) -> std::io::Result<bool> {
        let Some(path) = self.path(id) else { return Ok(false) };
        lock(&self.writers).open.remove(id);
        lock(&self.headers).remove(id);
        match std::fs::remove_file(path) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(error) => Err(error),
        }
    }

    fn flush_session(&self, id: &str) -> std::io::Result<()> {
        match lock(&self.writers).open.get_mut(id) {
            Some(file) => file.sync(),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The folders a store creates are its user's alone: sessions hold what was said in them.
    /// Before, they got the umask's mode (`0755`), readable by every user of the machine.
    #[cfg(unix)] // mode bits
    #[test]
    fn a_store_creates_its_folders_for_its_user_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        FileStore::open(state.join("sessions")).unwrap();
        for folder in [&state, &state.join("sessions")] {
            let mode = std::fs::metadata(folder).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{}", folder.display());
        }
    }

    /// The contract every store keeps (the file store, the memory store, and PostgreSQL's in
    /// `store::postgres`): history in order, an unknown session's append ignored.
    pub(crate) fn roundtrip(store: &dyn SessionStore) {
        store.create("sess_1", Path::new("/w")).unwrap();
        store
            .append("sess_1", r#"{"sessionUpdate":"user_message_chunk"}"#)
            .unwrap();
        store
            .append("sess_1", r#"{"sessionUpdate":"agent_message_chunk"}"#)
            .unwrap();
        store.append("unknown", r#"{}"#).unwrap();
        store.flush().unwrap();
        let loaded = store.load("sess_1").unwrap().unwrap();
        assert_eq!(loaded.cwd, Path::new("/w"));
        let kinds: Vec<&str> = loaded.history.iter().map(|u| u.get()).collect();
        assert_eq!(
            kinds,
            [
                r#"{"sessionUpdate":"user_message_chunk"}"#,
                r#"{"sessionUpdate":"agent_message_chunk"}"#
            ]
        );
        assert!(store.load("sess_2").unwrap().is_none());
    }

    #[test]
    fn memory_store_keeps_history_in_order() {
        roundtrip(&MemoryStore::default());
    }

    /// Runs `check` on a file store in `dir`, then on a memory store; the file store is
    /// returned, with what it remembers.
    fn on_both(dir: &Path, check: impl Fn(&dyn SessionStore)) -> FileStore {
        let file = FileStore::open(dir).unwrap();
        check(&file);
        check(&MemoryStore::default());
        file
    }

    /// A store lists, summarises and deletes what it holds.
    pub(crate) fn lists_and_deletes(store: &dyn SessionStore) {
        store.create("sess_a", Path::new("/w/a")).unwrap();
        store.create("sess_b", Path::new("/w/b")).unwrap();
        store
            .append("sess_b", r#"{"sessionUpdate":"user_message_chunk"}"#)
            .unwrap();
        let mut listed: Vec<(String, PathBuf)> = store.list().unwrap().into_iter().map(|s| (s.id, s.cwd)).collect();
        listed.sort();
        assert_eq!(
            listed,
            [
                ("sess_a".into(), PathBuf::from("/w/a")),
                ("sess_b".into(), PathBuf::from("/w/b"))
            ]
        );
        let summary = store.summary("sess_b").unwrap().expect("stored");
        assert_eq!(summary.cwd, PathBuf::from("/w/b"));
        assert!(store.summary("sess_none").unwrap().is_none());
        assert!(store.delete("sess_a").unwrap());
        assert!(!store.delete("sess_a").unwrap(), "deleted once");
        assert!(store.load("sess_a").unwrap().is_none());
        assert_eq!(store.list().unwrap().len(), 1);
    }

    #[test]
    fn stores_list_and_delete_what_they_hold() {
        let dir = tempfile::tempdir().unwrap();
        on_both(dir.path(), lists_and_deletes);
        // A file store names its files' times, and a new instance lists what is on disk.
        let again = FileStore::open(dir.path()).unwrap().list().unwrap();
        assert_eq!(again.len(), 1);
        assert!(again[0].updated_at.is_some());
        assert!(!FileStore::open(dir.path()).unwrap().delete("../etc").unwrap());
    }

    /// `list_page` answers as the whole `list` sorted would, and sees what another process
    /// writes, removes or replaces in the folder, though it remembers the headers it read.
    /// `list_page` answers as the whole `list` sorted would.
    pub(crate) fn pages_match_the_sorted_list(store: &dyn SessionStore) {
        for n in 0..7 {
            let cwd = if n % 2 == 0 { "/w/even" } else { "/w/odd" };
            store.create(&format!("sess_{n}"), Path::new(cwd)).unwrap();
        }
        let mut all = store.list().unwrap();
        all.sort_by(newest_first);
        let after = |n: usize| ListPosition::of(&all[n]);
        let (first, more) = store.list_page(None, None, 3).unwrap();
        assert_eq!((first.as_slice(), more), (&all[..3], true));
        let (next, more) = store.list_page(None, Some(&after(2)), 3).unwrap();
        assert_eq!((next.as_slice(), more), (&all[3..6], true));
        let (last, more) = store.list_page(None, Some(&after(5)), 3).unwrap();
        assert_eq!((last.as_slice(), more), (&all[6..], false));
        assert_eq!(store.list_page(None, Some(&after(6)), 3).unwrap(), (Vec::new(), false));
        let odd: Vec<SessionSummary> = all.iter().filter(|s| s.cwd == Path::new("/w/odd")).cloned().collect();
        assert_eq!(
            store.list_page(Some(Path::new("/w/odd")), None, 3).unwrap(),
            (odd, false)
        );
        let even: Vec<SessionSummary> = all.iter().filter(|s| s.cwd == Path::new("/w/even")).cloned().collect();
        let page = store
            .list_page(Some(Path::new("/w/even")), Some(&ListPosition::of(&even[0])), 2)
            .unwrap();
        assert_eq!((page.0.as_slice(), page.1), (&even[1..3], true));
    }

    #[test]
    #[cfg_attr(
        windows,
        ignore = "Wine keeps a deleted file's name while another handle holds it open, so the name cannot be created again (Windows 10's NTFS frees it at once)"
    )]
    fn a_page_matches_the_sorted_list_and_follows_other_writers() {
        let dir = tempfile::tempdir().unwrap();
        let file = on_both(dir.path(), pages_match_the_sorted_list);
        // Another process: a new session, one removed, one replaced with another `cwd`.
        let other = FileStore::open(dir.path()).unwrap();
        other.create("sess_new", Path::new("/w/new")).unwrap();
        assert!(other.delete("sess_0").unwrap());
        assert!(other.delete("sess_1").unwrap());
        other.create("sess_1", Path::new("/w/moved")).unwrap();
        // And a file that is not a session's.
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        let (page, more) = file.list_page(None, None, 50).unwrap();
        assert!(!more);
        let mut seen: Vec<(String, PathBuf)> = page.into_iter().map(|s| (s.id, s.cwd)).collect();
        seen.sort();
        assert_eq!(seen.len(), 7, "{seen:?}");
        assert!(!seen.iter().any(|(id, _)| id == "sess_0"), "{seen:?}");
        assert!(seen.contains(&("sess_new".into(), PathBuf::from("/w/new"))), "{seen:?}");
        assert!(seen.contains(&("sess_1".into(), PathBuf::from("/w/moved"))), "{seen:?}");
        assert_eq!(
            file.list_page(Some(Path::new("/w/odd")), None, 50).unwrap().0.len(),
            2,
            "sess_3 and sess_5"
        );
    }

    #[test]
    fn file_store_survives_a_new_instance_and_skips_a_torn_line() {
        let dir = std::env::temp_dir().join(format!("agentacp-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        roundtrip(&FileStore::open(&dir).unwrap());
        // A crash mid-write leaves half a line.
        let mut file = OpenOptions::new().append(true).open(dir.join("sess_1.jsonl")).unwrap();
        file.write_all(b"{\"sessionUpdate\":\"agent_mes").unwrap();
        let reopened = FileStore::open(&dir).unwrap();
        assert_eq!(reopened.load("sess_1").unwrap().unwrap().history.len(), 2);
        // The next record after the torn one is kept.
        reopened.append("sess_1", r#"{"sessionUpdate":"plan"}"#).unwrap();
        reopened.flush().unwrap();
        let history = FileStore::open(&dir).unwrap().load("sess_1").unwrap().unwrap().history;
        assert_eq!(history.len(), 3);
        assert_eq!(history[2].get(), r#"{"sessionUpdate":"plan"}"#);
        // Its files closed first: Windows deletes an open file only once it is closed.
        drop((file, reopened));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Issue #23.16: every session kept its file open for good (session 247 failed at
    /// `RLIMIT_NOFILE=256`). Files beyond the bound are closed and reopened on use, and no
    /// record is lost on the way.
    #[test]
    fn the_file_store_keeps_a_bounded_number_of_files_open_and_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::open(dir.path()).unwrap();
        let sessions = 3 * MAX_OPEN_SESSION_FILES;
        for n in 0..sessions {
            store.create(&format!("sess_{n}"), Path::new("/w")).unwrap();
            store.append(&format!("sess_{n}"), &format!(r#"{{"n":{n}}}"#)).unwrap();
            assert!(store.open_files() <= MAX_OPEN_SESSION_FILES);
        }
        // Touch every session again (each reopens one and closes another), then flush one.
        for n in 0..sessions {
            store.append(&format!("sess_{n}"), r#"{"again":true}"#).unwrap();
            store.flush_session(&format!("sess_{n}")).unwrap();
        }
        assert!(store.open_files() <= MAX_OPEN_SESSION_FILES);
        let reopened = FileStore::open(dir.path()).unwrap();
        for n in 0..sessions {
            let history = reopened.load(&format!("sess_{n}")).unwrap().unwrap().history;
            let lines: Vec<&str> = history.iter().map(|u| u.get()).collect();
            assert_eq!(
                lines,
                [format!(r#"{{"n":{n}}}"#).as_str(), r#"{"again":true}"#],
                "sess_{n}"
            );
        }
    }

    #[test]
    fn flush_syncs_only_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStore::open(dir.path()).unwrap();
        for n in 0..4 {
            store.create(&format!("sess_{n}"), Path::new("/w")).unwrap();
        }
        store.append("sess_2", "{}").unwrap();
        let dirty = |store: &FileStore| -> Vec<String> {
            let writers = lock(&store.writers);
            let mut ids: Vec<String> = writers
                .open
                .iter()
                .filter(|(_, f)| f.dirty)
                .map(|(id, _)| id.clone())
                .collect();
            ids.sort();
            ids
        };
        assert_eq!(dirty(&store), ["sess_2"]);
        store.flush_session("sess_1").unwrap();
        assert_eq!(dirty(&store), ["sess_2"], "another session's flush leaves it alone");
        store.flush_session("sess_2").unwrap();
        assert!(dirty(&store).is_empty());
    }

    /// Issue #44.11: a FIFO named like a session file hung `session/list` (and `session/load`
    /// of its id) in its open, and with it the connection. Each call here runs on a thread and
    /// must answer within the bound: listing what else is there, loading nothing.
    #[cfg(unix)] // a FIFO is Unix's
    #[test]
    fn a_fifo_in_the_store_is_skipped_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let store = std::sync::Arc::new(FileStore::open(dir.path()).unwrap());
        store.create("sess_real", Path::new("/w")).unwrap();
        let fifo = dir.path().join("sess_fifo.jsonl");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let within = |what: &str, call: fn(&FileStore) -> String| {
            let (done, answer) = std::sync::mpsc::channel();
            let store = std::sync::Arc::clone(&store);
            std::thread::spawn(move || done.send(call(&store)));
            answer
                .recv_timeout(std::time::Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("{what} blocked on the FIFO in the session store"))
        };
        let listed = within("list", |store| {
            let ids: Vec<String> = store.list().unwrap().into_iter().map(|s| s.id).collect();
            ids.join(",")
        });
        assert_eq!(listed, "sess_real");
        let page = within("list_page", |store| {
            store.list_page(None, None, 10).unwrap().0.len().to_string()
        });
        assert_eq!(page, "1");
        let loaded = within("load", |store| {
            format!("{:?}", store.load("sess_fifo").unwrap().map(|s| s.cwd))
        });
        assert_eq!(loaded, "None");
        let summary = within("summary", |store| format!("{:?}", store.summary("sess_fifo").unwrap()));
        assert_eq!(summary, "None");
        within("append", |store| {
            format!("{:?}", store.append("sess_fifo", "{}").unwrap())
        });
    }

    #[test]
    fn ids_that_could_name_other_files_are_refused() {
        let dir = std::env::temp_dir().join(format!("agentacp-ids-{}", std::process::id()));
        let store = FileStore::open(&dir).unwrap();
        for bad in ["../x", "a/b", "", "x.y"] {
            assert!(store.load(bad).unwrap().is_none(), "{bad}");
            assert!(store.create(bad, Path::new("/")).is_err(), "{bad}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
