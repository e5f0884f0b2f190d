//! ACP servers: the runtime behind `#[acp_operator]` for `kind: server` manifests.
//!
//! The generated code implements [`Operator`]; [`serve`] runs it over any byte streams and
//! [`Serve::serve_stdio`] over stdin/stdout, the way editors launch agents. What the runtime
//! guarantees on the wire is in `docs/design/runtime.md`.

pub(crate) mod access;
mod connection;
mod credential;
mod dispatch;
pub mod editor;
mod elicit;
mod list_cursor;
#[cfg(feature = "mcp")]
pub mod mcp;
pub mod memory;
mod open_sessions;
pub mod operator;
pub mod sandbox;
pub mod session;
pub mod sign_in;
pub(crate) mod store;
pub mod turn;
#[cfg(feature = "websocket")]
pub mod websocket;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, BufReader};

use crate::audit::{AuditLog, FsyncPolicy};
use crate::connection::{Limits, Negotiate};
use crate::dialect::{AgentNegotiation, ServedVersions};
use crate::env::{default_state_dir, env_number, env_path, home, init_logging};
use crate::error::{Error, Result};
use crate::governance::Governance;
use crate::jsonrpc::frame::FrameReader;
use crate::jsonrpc::outbox::Outbox;
use crate::spec::OperatorSpec;
use crate::workspace::Workspace;

pub use credential::{Credential, CredentialFile};
pub use editor::{CommandOutput, Editor, EditorError, TerminalCommand};
pub use elicit::ElicitationError;
pub use memory::{Memory, MemoryError};
pub use operator::{OffersWebSocket, Operator, encode_result};
pub use session::{FileStore, MemoryStore, SessionContext, SessionStore, StoredSession};
pub use sign_in::{sign_in_for_args, sign_in_if_asked};
pub use turn::{ToolCall, ToolOutcome, Turn};

pub use crate::oversight::{Elicitation, ElicitationOutcome};

use access::{Backing, StoreBook};
pub(crate) use connection::{Access, Connection};
use dispatch::Dispatcher;

pub use crate::jsonrpc::frame::DEFAULT_MAX_FRAME_BYTES;
/// The default limit on sessions per connection.
pub const DEFAULT_MAX_SESSIONS: usize = 1024;
/// The default time a permission request waits before it counts as rejected: 5 minutes.
pub const DEFAULT_PERMISSION_TIMEOUT: Duration = Limits::DEFAULT.permission_timeout;

/// The default time one request to the editor may take: 60 s.
pub const DEFAULT_EDITOR_TIMEOUT: Duration = Duration::from_secs(60);

/// How a server runs. [`ServerOptions::from_env`] reads the `AGENTACP_*` variables; every
/// field left `None` takes the default described on it.
#[derive(Clone)]
pub struct ServerOptions {
    /// The authorized workspace root: every session `cwd` must be inside it
    /// (`AGENTACP_WORKSPACE_ROOT`; default: at tier sandboxed, where the sandbox mounts the
    /// workspace; otherwise the home directory).
    pub workspace_root: Option<PathBuf>,
    /// Where sessions and the default audit log are kept (`AGENTACP_STATE_DIR`; default:
    /// `$XDG_STATE_HOME/agentacp/<id>`, else `~/.local/state/agentacp/<id>`).
    pub state_dir: Option<PathBuf>,
    /// The audit log file, overriding the manifest's target (`AGENTACP_AUDIT_LOG`).
    pub audit_log: Option<PathBuf>,
    /// The largest accepted line in bytes (`AGENTACP_MAX_FRAME_BYTES`; default 4 MiB).
    pub max_frame_bytes: usize,
    /// How long a permission request waits (`AGENTACP_PERMISSION_TIMEOUT_MS`; default 5 min).
    pub permission_timeout: Duration,
    /// How long one request to the editor (`fs/*`, `terminal/*` from [`Turn::editor`]) may
    /// take before it counts as failed (`AGENTACP_EDITOR_TIMEOUT_MS`; default 60 s). A
    /// command's run in the editor's terminal has its own limit
    /// ([`TerminalCommand::timeout`]).
    pub editor_timeout: Duration,
    /// How long a write may wait for a client that stopped reading before the connection is
    /// treated as gone (`AGENTACP_WRITE_TIMEOUT_MS`; default 60 s).
    pub write_timeout: Duration,
    /// When audit records are fsynced (`AGENTACP_AUDIT_FSYNC`: `every`, `batched:N` or
    /// `never`; default: every record).
    pub fsync: FsyncPolicy,
    /// How long running turns get to answer after end of input (default 5 s).
    pub shutdown_grace: Duration,
    /// The most sessions one connection may open (`AGENTACP_MAX_SESSIONS`; default 1024): the
    /// next `session/new` is refused with a message saying so.
    pub max_sessions: usize,
    /// Replaces the manifest's governance binding.
    pub governance: Option<Arc<dyn Governance>>,
    /// Replaces the audit log chosen from the manifest.
    pub audit: Option<AuditLog>,
    /// Replaces the session store (default: files in the state folder when `loadSession` is
    /// on, else none).
    pub store: Option<Arc<dyn SessionStore>>,
    /// The ACP protocol versions served, replacing the manifest's `protocol_versions`
    /// (`AGENTACP_PROTOCOL_VERSIONS`, e.g. `1,2`; default: the manifest's, `[1]` unless it
    /// says otherwise). Serving 2 needs agentacp's feature `v2`; see docs/v2.md.
    pub protocol_versions: Option<Vec<u16>>,
    /// The PostgreSQL database that keeps sessions and the operator's memory instead of the
    /// state folder's files (`AGENTACP_DATABASE_URL`: a `postgres://` URL or `key=value`
    /// string; default: none, files). Needs agentacp's feature `postgres`: without it a
    /// database set here stops the start-up. See docs/store.md.
    pub database: Option<String>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            workspace_root: None,
            state_dir: None,
            audit_log: None,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            permission_timeout: DEFAULT_PERMISSION_TIMEOUT,
            editor_timeout: DEFAULT_EDITOR_TIMEOUT,
            write_timeout: Limits::DEFAULT.write_timeout,
            fsync: FsyncPolicy::EveryRecord,
            shutdown_grace: Limits::DEFAULT.shutdown_grace,
            max_sessions: DEFAULT_MAX_SESSIONS,
            governance: None,
            audit: None,
            store: None,
            protocol_versions: None,
            database: None,
        }
    }
}

impl std::fmt::Debug for ServerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerOptions")
            .field("workspace_root", &self.workspace_root)
            .field("state_dir", &self.state_dir)
            .field("audit_log", &self.audit_log)
            .field("max_frame_bytes", &self.max_frame_bytes)
            .field("permission_timeout", &self.permission_timeout)
            .field("editor_timeout", &self.editor_timeout)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("max_sessions", &self.max_sessions)
            .field("protocol_versions", &self.protocol_versions)
            .field("database", &self.database.as_deref().map(crate::database::shown_url))
            .finish_non_exhaustive()
    }
}

impl ServerOptions {
    /// The defaults, overridden by the `AGENTACP_*` environment variables that are set.
    /// A variable that is set but unreadable is reported on stderr and ignored.
    pub fn from_env() -> Self {
        let mut options = ServerOptions {
            workspace_root: env_path("AGENTACP_WORKSPACE_ROOT"),
            state_dir: env_path("AGENTACP_STATE_DIR"),
            audit_log: env_path("AGENTACP_AUDIT_LOG"),
            database: env_database_url(),
            ..ServerOptions::default()
        };
        let number = env_number;
        let limits = Limits::from_env();
        options.max_frame_bytes = limits.max_frame_bytes;
        options.permission_timeout = limits.permission_timeout;
        options.write_timeout = limits.write_timeout;
        if let Some(ms) = number("AGENTACP_EDITOR_TIMEOUT_MS") {
            options.editor_timeout = Duration::from_millis(ms);
        }
        if let Some(policy) = crate::env::env_fsync_policy("AGENTACP_AUDIT_FSYNC") {
            options.fsync = policy;
        }
        if let Some(sessions) = number("AGENTACP_MAX_SESSIONS") {
            options.max_sessions = usize::try_from(sessions).unwrap_or(usize::MAX);
        }
        if let Some(versions) = std::env::var("AGENTACP_PROTOCOL_VERSIONS")
            .ok()
            .filter(|text| !text.is_empty())
        {
            match ServedVersions::parse(&versions) {
                Ok(served) => options.protocol_versions = Some(served.versions().to_vec()),
                Err(error) => tracing::warn!("AGENTACP_PROTOCOL_VERSIONS is ignored: {error}"),
            }
        }
        options
    }

    /// Replaces the manifest's governance binding.
    pub fn governance(mut self, governance: impl Governance) -> Self {
        self.governance = Some(Arc::new(governance));
        self
    }

    /// Sets the workspace root.
    pub fn workspace_root(mut self, root: impl Into<PathBuf>) -> Self {
        self.workspace_root = Some(root.into());
        self
    }

    /// Sets the state folder.
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.state_dir = Some(dir.into());
        self
    }

    /// Keeps sessions and the operator's memory in the PostgreSQL database at `url` (see
    /// [`database`](Self::database)).
    pub fn database(mut self, url: impl Into<String>) -> Self {
        self.database = Some(url.into());
        self
    }

    fn resolved_state_dir(&self, id: &str) -> PathBuf {
        self.state_dir.clone().unwrap_or_else(|| default_state_dir(id))
    }
}

/// `AGENTACP_DATABASE_URL` when set and not empty. Text that is not UTF-8 is kept (lossily)
/// so that opening it fails, saying so, rather than being ignored.
fn env_database_url() -> Option<String> {
    match std::env::var_os(crate::database::DATABASE_URL_VARIABLE) {
        Some(url) if !url.is_empty() => Some(url.to_string_lossy().into_owned()),
        _ => None,
    }
}

/// At tier sandboxed: where the AIP-36 sandbox mounts the workspace (`mounts[]` with
/// `source: workspace`, its `at`).
fn sandbox_root(spec: &OperatorSpec) -> Option<PathBuf> {
    let sandbox: serde_json::Value = serde_json::from_str(spec.sandbox?).ok()?;
    sandbox["mounts"]
        .as_array()?
        .iter()
        .find(|mount| mount["source"] == "workspace")
        .and_then(|mount| mount["at"].as_str())
        .map(PathBuf::from)
}

/// The workspace root, opened once for the whole connection. In order:
/// 1. at tier sandboxed, the sandbox's workspace mount — which `AGENTACP_WORKSPACE_ROOT` (or
///    [`ServerOptions::workspace_root`]) may narrow to a folder inside it, never widen: a root
///    outside the mount, or a mount that is not a folder here, stops the start-up
///    ([`root_at_start`]), the error naming the variable or SANDBOX.md;
/// 2. `AGENTACP_WORKSPACE_ROOT` / [`ServerOptions::workspace_root`];
/// 3. the home directory.
///
/// With none of them there is no root and every session is refused (never the whole file
/// system). The choice is logged at `info`, a narrowed sandbox at `warn`.
fn open_workspace_root(spec: &OperatorSpec, options: &ServerOptions) -> std::result::Result<Workspace, String> {
    let configured = options.workspace_root.as_deref();
    if let Some(mount) = sandbox_root(spec) {
        let Some(root) = configured else {
            mount.canonicalize().map_err(|error| {
                format!(
                    "the sandbox's workspace mount `{}` (SANDBOX.md, `mounts[].at`) cannot be used: {error}; with `provider: local` it is a folder of this machine",
                    mount.display()
                )
            })?;
            tracing::info!(root = %mount.display(), "the workspace root is the sandbox's workspace mount");
            return Workspace::open(&mount);
        };
        let root = Workspace::open(root).map_err(|error| format!("AGENTACP_WORKSPACE_ROOT: {error}"))?;
        let mount = mount.canonicalize().unwrap_or(mount);
        if !root.root_path().starts_with(&mount) {
            return Err(format!(
                "AGENTACP_WORKSPACE_ROOT `{}` is outside the sandbox's workspace mount `{}` (SANDBOX.md, `mounts[].at`): at tier sandboxed it may only narrow the mount",
                root.root_path().display(),
                mount.display()
            ));
        }
        tracing::warn!(
            mount = %mount.display(),
            root = %root.root_path().display(),
            "AGENTACP_WORKSPACE_ROOT narrows the sandbox's workspace mount"
        );
        return Ok(root);
    }
    let root = configured.map(Path::to_path_buf).or_else(home).ok_or_else(|| {
        "no workspace root: set AGENTACP_WORKSPACE_ROOT to the folder sessions may use (HOME is unset)".to_string()
    })?;
    Workspace::open(&root)
}

/// The workspace root a server starts with: at tier sandboxed, one that cannot be used stops
/// the start-up (the sandbox has nothing to confine programs to); otherwise the server
/// starts and refuses every session, saying why.
fn root_at_start(spec: &OperatorSpec, options: &ServerOptions) -> Result<std::result::Result<Workspace, String>> {
    match (open_workspace_root(spec, options), sandbox_root(spec)) {
        (Err(reason), Some(_)) => Err(Error::Io(std::io::Error::other(reason))),
        (root, _) => Ok(root),
    }
}

/// The audit log the manifest asks for (or the options' override): with a database and no
/// `AGENTACP_AUDIT_LOG`, this replica's chain in the database instead of the target's file (a
/// target `off` stays off); see docs/audit.md.
fn open_audit(
    spec: &OperatorSpec,
    options: &ServerOptions,
    state_dir: &Path,
    database: Option<&crate::database::Shared>,
) -> Result<AuditLog> {
    if let Some(audit) = &options.audit {
        return Ok(audit.clone());
    }
    #[cfg(feature = "postgres")]
    if let Some(database) = database
        && options.audit_log.is_none()
        && spec.audit_path(None, state_dir).is_some()
    {
        return open_audit_chain(spec, database, options.fsync);
    }
    #[cfg(not(feature = "postgres"))]
    let _ = database;
    spec.open_audit(options.audit_log.as_deref(), options.fsync, state_dir)
}

/// Opens this replica's audit chain in `database`: `<operator id>@<replica>` (the replica's
/// name from `AGENTACP_REPLICA`, else the host name), continued after its tail is checked.
#[cfg(feature = "postgres")]
fn open_audit_chain(
    spec: &OperatorSpec,
    database: &acp_postgres::Database,
    fsync: crate::audit::FsyncPolicy,
) -> Result<AuditLog> {
    let replica = crate::env::replica_name().map_err(Error::Audit)?;
    let id: String = spec
        .id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let chain = format!("{id}@{replica}");
    let log = AuditLog::open_database(database, &chain, fsync).map_err(|error| match error {
        // Names the chain and who holds it already.
        crate::audit::AuditError::ChainLocked { .. } => Error::Audit(error.to_string()),
        error => Error::Audit(format!(
            "cannot open the audit chain {chain} in the database at {}: {error}",
            database.shown()
        )),
    })?;
    tracing::info!(
        operator = spec.id,
        chain,
        database = database.shown(),
        "writing the audit log to the database"
    );
    Ok(log)
}

/// Starts `fleet`'s sweeper of expired leases (issue #49), recording each turn a dead
/// replica left unfinished as a prompt taking the session over would: in the audit log, with
/// the session's identity, and in the session's history. `None` outside a Tokio runtime.
#[cfg(feature = "postgres")]
fn sweep(
    fleet: &Arc<crate::server::store::fleet::Fleet>,
    spec: &'static OperatorSpec,
    audit: &AuditLog,
    stores: &Arc<StoreBook>,
) -> Option<crate::server::store::fleet::Sweeper> {
    if tokio::runtime::Handle::try_current().is_err() {
        tracing::warn!("no async runtime: expired leases are recorded only when their sessions are prompted");
        return None;
    }
    let (audit, stores, operator_id) = (audit.clone(), stores.clone(), spec.operator_id());
    let record = move |expired: &crate::server::store::lease::Expired,
                       interrupted: &crate::server::store::lease::Interrupted,
                       replica: &str| {
        let identity = (expired.identity.clone()).map(crate::auth::Identity::new).transpose()?;
        let store = stores
            .for_identity(identity.as_ref())
            .map_err(|error| error.to_string())?;
        let history = spec.stores_sessions().then_some(&*store);
        dispatch::record_interrupted(
            |event| crate::oversight::record::write_ahead(&audit, identity.as_ref(), event).map_err(Error::Audit),
            &operator_id,
            history,
            &expired.session,
            interrupted,
            replica,
        )
        .map_err(|error| error.to_string())?;
        // Written before the lease is let go (the append is fenced by it).
        history
            .map_or(Ok(()), |store| store.flush_session(&expired.session))
            .map_err(|error| format!("the history's marker could not be saved: {error}"))
    };
    Some(fleet.sweep(Arc::new(record)))
}

/// Runs `operator` over `input`/`output` until end of input. Returns an error when the server
/// cannot start (the audit log or the session store cannot be opened), or when the client
/// stopped reading for longer than [`ServerOptions::write_timeout`] (the connection is then
/// closed rather than left reading requests it can never answer).
pub async fn serve<O, R, W>(operator: O, options: ServerOptions, input: R, output: W) -> Result<()>
where
    O: Operator,
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let served = Served::open::<O>(options)?;
    let served_connection = served
        .connection(Arc::new(operator), Arc::default(), input, output)
        .await;
    served.stop().await;
    served_connection
}

/// What every connection to one server shares, opened once: the audit log, the session
/// stores, governance, the workspace root.
pub(crate) struct Served {
    spec: &'static OperatorSpec,
    pub(crate) options: ServerOptions,
    /// This replica's part in a fleet on that database: its turns' leases, forwarded cancels.
    #[cfg(feature = "postgres")]
    fleet: Option<Arc<crate::server::store::fleet::Fleet>>,
    audit: AuditLog,
    stores: Arc<StoreBook>,
    governance: Arc<dyn Governance>,
    workspace_root: std::result::Result<Workspace, String>,
    profile: Arc<crate::governance::OperatorProfile>,
    /// The local sandbox (SANDBOX.md), planned for this kernel.
    sandbox: Option<Arc<crate::sandbox::Confinement>>,
    /// The operator's memory: one for the process, so connections do not overwrite each
    /// other's `operator-context` entries.
    memory: Arc<memory::MemoryBook>,
    /// The protocol versions served; `Some` when a connection may need translating.
    negotiation: Option<Arc<dyn Negotiate>>,
    /// This replica's sweeper of expired leases (issue #49), until [`Served::stop`].
    #[cfg(feature = "postgres")]
    sweeper: std::sync::Mutex<Option<crate::server::store::fleet::Sweeper>>,
}

impl Served {
    /// Opens what `O`'s connections share; an error when the database, the audit log or the
    /// session store cannot be opened.
    pub(crate) fn open<O: Operator>(options: ServerOptions) -> Result<Served> {
        let spec = O::spec();
        let state_dir = options.resolved_state_dir(spec.id);
        // Before anything is opened or made: a start the sandbox refuses leaves no database
        // connection, no audit log and no session folder behind.
        let workspace_root = root_at_start(spec, &options)?;
        // A sandbox the runtime cannot enforce stops the start-up, never a silent run without it.
        let sandbox = crate::sandbox::from_spec(
            spec,
            workspace_root.as_ref().ok().map(Workspace::root_path),
            (&state_dir, options.audit_log.as_deref()),
        )
        .map_err(|message| Error::Io(std::io::Error::other(message)))?
        .map(Arc::new);
        // Then the database: the stores opened after it may keep their records there.
        let database = crate::database::open_database(options.database.as_deref())?;
        #[cfg(feature = "postgres")]
        if let Some(database) = &database {
            store::postgres::migrate(database)?;
        }
        // A fleet's leases (issue #49), before the stores, whose appends they fence.
        #[cfg(feature = "postgres")]
        let fleet = database
            .as_ref()
            .map(|database| crate::server::store::fleet::join(database, spec.id))
            .transpose()?;
        #[cfg(feature = "postgres")]
        let fences = fleet.as_ref().map(|fleet| fleet.fences());
        #[cfg(not(feature = "postgres"))]
        let fences = None;
        let audit = open_audit(spec, &options, &state_dir, database.as_ref())?;
        let sessions_dir = state_dir.join("sessions");
        let (store, backing): (Arc<dyn SessionStore>, _) = match (&options.store, spec.stores_sessions(), &database) {
            (Some(store), _, _) => (store.clone(), Backing::Memory),
            (None, true, Some(database)) => {
                let place = crate::server::store::InDatabase {
                    database: database.clone(),
                    operator: spec.id.to_string(),
                    fences: fences.clone(),
                };
                (
                    crate::server::store::session_store(&place, None),
                    Backing::Database(place),
                )
            }
            (None, true, None) => (
                Arc::new(FileStore::open(&sessions_dir).map_err(|error| {
                    Error::Io(std::io::Error::new(
                        error.kind(),
                        format!("cannot open the session store in {}: {error}", state_dir.display()),
                    ))
                })?),
                Backing::Files(sessions_dir.join("identities")),
            ),
            (None, false, _) => (Arc::new(MemoryStore::default()), Backing::Memory),
        };
        let stores = Arc::new(StoreBook::new(store, backing, options.store.is_some()));
        let governance = options
            .governance
            .clone()
            .unwrap_or_else(|| Arc::new(spec.governance()));
        match &workspace_root {
            Ok(root) => tracing::info!(
                operator = spec.id,
                tier = spec.tier,
                root = %root.root_path().display(),
                state = %state_dir.display(),
                "serving ACP"
            ),
            Err(reason) => {
                tracing::error!(operator = spec.id, %reason, "serving ACP, but every session will be refused")
            }
        }
        let profile = Arc::new(spec.operator_profile());
        let memory_rows = database
            .as_ref()
            .map(|database| crate::server::store::memory_rows(database, spec.id));
        let memory = Arc::new(memory::MemoryBook::new(profile.memory.clone(), &state_dir).with_rows(memory_rows));
        let served = ServedVersions::new(options.protocol_versions.as_deref().unwrap_or(spec.protocol_versions))
            .map_err(|error| Error::Io(std::io::Error::other(format!("cannot serve: {error}"))))?;
        let negotiation = served
            .translates()
            .then(|| Arc::new(AgentNegotiation(served)) as Arc<dyn Negotiate>);
        #[cfg(feature = "postgres")]
        let sweeper = fleet.as_ref().and_then(|fleet| sweep(fleet, spec, &audit, &stores));
        Ok(Served {
            spec,
            #[cfg(feature = "postgres")]
            sweeper: std::sync::Mutex::new(sweeper),
            #[cfg(feature = "postgres")]
            fleet,
            profile,
            memory,
            options,
            audit,
            stores,
            governance,
            workspace_root,
            sandbox,
            negotiation,
        })
    }

    /// Stops what runs in the background for every connection (a fleet's sweeper of
    /// expired leases), waiting for it to end.
    pub(crate) async fn stop(&self) {
        #[cfg(feature = "postgres")]
        {
            let sweeper = crate::sync::lock(&self.sweeper).take();
            if let Some(sweeper) = sweeper {
                sweeper.stop().await;
            }
        }
    }

    /// Serves one connection until end of input (see [`serve`]).
    pub(crate) async fn connection<O, R, W>(
        &self,
        operator: Arc<O>,
        access: Arc<Access>,
        input: R,
        output: W,
    ) -> Result<()>
    where
        O: Operator,
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (spec, options) = (self.spec, &self.options);
        let store = self.stores.for_identity(access.identity().as_ref())?;
        let (outbox, writer) = Outbox::start(output, options.write_timeout);
        let connection = Connection::new(
            outbox,
            self.audit.clone(),
            store,
            spec.stores_sessions(),
            self.governance.clone(),
            spec.operator_id(),
            options.permission_timeout,
            options.editor_timeout,
            spec.editor,
            access,
        )
        .with_sandbox(self.sandbox.clone())
        .with_seam(self.negotiation.clone());
        #[cfg(feature = "postgres")]
        let connection = connection.with_fleet(self.fleet.clone());
        let connection = Arc::new(connection);
        access::admitted_on_upgrade(&connection)?;
        let frames = FrameReader::new(BufReader::with_capacity(64 * 1024, input), options.max_frame_bytes);
        Dispatcher::new(
            operator,
            (connection, self.stores.clone()),
            (self.profile.clone(), self.memory.clone()),
            self.workspace_root.clone(),
            options.shutdown_grace,
            options.max_sessions,
        )
        .run(frames)
        .await;
        // Every clone of the outbox is gone now; the writer drains what is queued and ends.
        match tokio::time::timeout(options.shutdown_grace, writer).await {
            Ok(Ok(Ok(()))) => Ok(()),
            // A client that stopped reading without closing: the connection was given up.
            Ok(Ok(Err(error))) if error.kind() == std::io::ErrorKind::TimedOut => Err(Error::Io(std::io::Error::new(
                error.kind(),
                format!("the client stopped reading ({error}); the connection was closed"),
            ))),
            Ok(Ok(Err(error))) => {
                tracing::debug!(%error, "the client closed its end first");
                Ok(())
            }
            Ok(Err(error)) => {
                tracing::error!(%error, "the writer task failed");
                Ok(())
            }
            Err(_) => {
                tracing::warn!("the client stopped reading; unsent messages were dropped");
                Ok(())
            }
        }
    }
}

/// Running an operator over stdio. Implemented for every [`Operator`].
pub trait Serve: Operator + Sized {
    /// Serves over stdin/stdout with [`ServerOptions::from_env`], logging to stderr.
    fn serve_stdio(self) -> impl Future<Output = Result<()>> + Send {
        self.serve_stdio_with(ServerOptions::from_env())
    }

    /// Serves over stdin/stdout with the given options, logging to stderr.
    fn serve_stdio_with(self, options: ServerOptions) -> impl Future<Output = Result<()>> + Send {
        init_logging();
        // The streams are made when the future first runs: on the runtime's reactor.
        async move {
            // Started by the editor for a terminal sign-in: that, and nothing else.
            if let Some(signed_in) = sign_in::sign_in_if_asked(&self).await {
                return signed_in;
            }
            serve(
                self,
                options,
                crate::jsonrpc::stdio::stdin(),
                crate::jsonrpc::stdio::stdout(),
            )
            .await
        }
    }

    /// Like [`serve_stdio`](Serve::serve_stdio), on a runtime of its own, for a plain `main`.
    /// Returns as soon as serving ends, even when a read of stdin is still blocked (a client
    /// that stopped reading our output but kept stdin open): the runtime is shut down without
    /// waiting for that read. With your own runtime, exit the process after `serve_stdio` for
    /// the same effect.
    fn run_stdio(self) -> Result<()> {
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
        let result = runtime.block_on(self.serve_stdio());
        runtime.shutdown_timeout(Duration::from_millis(100));
        result
    }
}

impl<O: Operator> Serve for O {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::methods::ClientMethods;
    use crate::spec::AuditTarget;

    /// A sandboxed spec whose SANDBOX.md mounts the workspace at `mount`.
    fn sandboxed(mount: &Path) -> &'static OperatorSpec {
        sandboxed_by(serde_json::json!({"mounts": [{"source": "workspace", "at": mount}]}))
    }

    /// A sandboxed spec with this SANDBOX.md frontmatter.
    fn sandboxed_by(sandbox: serde_json::Value) -> &'static OperatorSpec {
        let sandbox = sandbox.to_string();
        Box::leak(Box::new(OperatorSpec {
            manifest_path: "ACP.md",
            name: "s",
            id: "s",
            version: "0.1.0",
            tier: "sandboxed",
            acp_rev: "0fc18323",
            protocol_version: 1,
            kind: crate::spec::OperatorKind::Server,
            agent: None,
            client: None,
            bindings: crate::spec::Bindings::default(),
            operator: None,
            governance: None,
            sandbox: Some(Box::leak(sandbox.into_boxed_str())),
            audit: AuditTarget::Off,
            editor: ClientMethods::NONE,
            policies: &[],
            surface: crate::surface::Surface::NONE,
            websocket: false,
            elicitation: crate::methods::ElicitationModes::NONE,
            protocol_versions: &[1],
        }))
    }

    /// Issue #18: a sandbox provider the runtime does not implement stops the start-up,
    /// naming it; `local`, or no provider field, does not.
    #[test]
    fn a_sandbox_provider_other_than_local_refuses_to_start() {
        let hosted = sandboxed_by(serde_json::json!({"provider": "mastra-e2b", "config": {}}));
        let error = crate::sandbox::from_spec(hosted, None, (std::path::Path::new("/no-state"), None)).unwrap_err();
        assert!(
            error.contains("provider is `mastra-e2b`") && error.contains("runs `provider: local`"),
            "{error}"
        );
        let best_effort = serde_json::json!({"metadata": {"agentacp": {"enforcement": "best-effort"}}});
        let local = serde_json::json!({"provider": "local", "config": {}, "metadata": best_effort["metadata"]});
        let no_state = (std::path::Path::new("/no-state"), None);
        assert!(crate::sandbox::from_spec(sandboxed_by(local), None, no_state).is_ok());
    }

    /// Issue #44: a sandboxed program could write the runtime's own audit log and state
    /// folder (`chmod 0666`, or rewrite them) when they were inside a read-write mount. The
    /// start is refused, naming both.
    #[test]
    fn a_state_folder_or_audit_log_inside_a_writable_mount_refuses_to_start() {
        let sandbox = serde_json::json!({
            "provider": "local", "config": {},
            "mounts": [{"source": "workspace", "at": "/srv/work"}],
            "metadata": {"agentacp": {"enforcement": "best-effort"}},
        });
        let spec = sandboxed_by(sandbox);
        let (state, log) = (
            std::path::Path::new("/var/lib/s"),
            std::path::Path::new("/var/log/s.jsonl"),
        );
        assert!(crate::sandbox::from_spec(spec, None, (state, Some(log))).is_ok());
        for (state, log) in [
            (std::path::Path::new("/srv/work/.state"), log),
            (state, std::path::Path::new("/srv/work/audit.jsonl")),
        ] {
            let error = crate::sandbox::from_spec(spec, None, (state, Some(log))).unwrap_err();
            // Named as absolute paths (on Windows, on the current drive).
            let (state, log) = (std::path::absolute(state).unwrap(), std::path::absolute(log).unwrap());
            let (state, log) = (state.display(), log.display());
            assert!(
                error.contains(&format!("state folder `{state}` and its audit log `{log}`")),
                "{error}"
            );
        }
    }

    /// Issue #13.5: at tier sandboxed, `AGENTACP_WORKSPACE_ROOT` replaced the sandbox's mount,
    /// widening the sandbox unseen. It may narrow the mount, never widen it.
    #[test]
    fn the_workspace_root_may_narrow_a_sandbox_mount_but_never_widen_it() {
        let dir = tempfile::tempdir().unwrap();
        let mount = dir.path().join("mount");
        std::fs::create_dir_all(mount.join("project")).unwrap();
        let spec = sandboxed(&mount);
        let root = |configured: Option<PathBuf>| {
            let options = ServerOptions {
                workspace_root: configured,
                ..ServerOptions::default()
            };
            open_workspace_root(spec, &options)
        };
        let mount = mount.canonicalize().unwrap();
        assert_eq!(root(None).unwrap().root_path(), mount);
        assert_eq!(
            root(Some(mount.join("project"))).unwrap().root_path(),
            mount.join("project")
        );
        let error = root(Some(dir.path().to_path_buf())).unwrap_err();
        assert!(error.contains("outside the sandbox's workspace mount"), "{error}");
    }

    /// Issue #45.8: a sandbox mounting a folder this machine lacks (`/workspace`) served and
    /// refused every session, and with `AGENTACP_WORKSPACE_ROOT` set the error blamed the
    /// mount. The server now refuses to start, naming SANDBOX.md — or the variable, when it
    /// is the variable that lies outside the mount.
    #[test]
    fn a_sandbox_mount_that_cannot_be_used_stops_the_start_naming_its_cause() {
        let dir = tempfile::tempdir().unwrap();
        let spec = sandboxed(&dir.path().join("no-such-mount"));
        let start = |configured: Option<PathBuf>| {
            let options = ServerOptions {
                workspace_root: configured,
                ..ServerOptions::default()
            };
            root_at_start(spec, &options).map(|_| ()).unwrap_err().to_string()
        };
        let error = start(None);
        assert!(
            error.starts_with("the sandbox's workspace mount `")
                && error.contains("(SANDBOX.md, `mounts[].at`) cannot be used"),
            "{error}"
        );
        let error = start(Some(dir.path().to_path_buf()));
        assert!(
            error.starts_with("AGENTACP_WORKSPACE_ROOT `")
                && error.contains("is outside the sandbox's workspace mount"),
            "{error}"
        );
        // Outside a sandbox a root that cannot be used still lets the server start.
        let plain = ServerOptions {
            workspace_root: Some(dir.path().join("missing")),
            ..ServerOptions::default()
        };
        let mut unsandboxed = *spec;
        unsandboxed.sandbox = None;
        assert!(root_at_start(&unsandboxed, &plain).unwrap().is_err());
    }
}
