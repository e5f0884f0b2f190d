//! The plan: what this kernel enforces of a [`SandboxProfile`], decided once at start-up.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::kernel::KernelSupport;
use super::profile::{MountSource, SandboxProfile};

/// The lowest Landlock ABI that confines TCP.
pub(super) const LANDLOCK_TCP_ABI: u32 = 4;

/// The lowest Landlock ABI that confines truncating a file (Linux 6.2).
const LANDLOCK_TRUNCATE_ABI: u32 = 3;

/// The lowest Landlock ABI that scopes signals and abstract Unix sockets (Linux 6.12).
const LANDLOCK_SCOPE_ABI: u32 = 6;

/// The lowest Landlock ABI that confines connecting to a pathname Unix socket (Linux 7.1).
pub(super) const LANDLOCK_UNIX_ABI: u32 = 9;

/// What a program is granted on a path beyond the mounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// Read (and execute) it.
    Read,
    /// Read and write it.
    ReadWrite,
    /// Connect to the Unix sockets beneath it, and nothing else (where Landlock confines
    /// that; elsewhere connecting is not confined at all).
    ConnectUnix,
}

/// How a confined program's network is cut off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkConfinement {
    /// Not at all (egress to named hosts, or nothing this kernel offers).
    Open,
    /// A network namespace of its own: no network at all.
    Namespace,
    /// Landlock TCP rules: no TCP connect or bind; UDP is not confined.
    LandlockTcp,
}

/// What the runtime enforces of a [`SandboxProfile`] on this kernel: decided once, then
/// applied to every program it starts for the operator.
#[derive(Debug, Clone)]
pub struct Confinement {
    pub(super) profile: SandboxProfile,
    pub(super) kernel: KernelSupport,
    /// The mounts as folders of this machine, and whether each is read-only.
    pub(super) paths: Vec<(PathBuf, bool)>,
    /// The default working folder: the workspace root.
    pub(super) workspace: PathBuf,
    pub(super) network: NetworkConfinement,
    pub(super) gaps: Vec<String>,
    /// Paths the runtime lets one program use beyond the mounts, and how (a bridge's agent:
    /// the stdio shim and its socket's folder, what the bridge's code grants).
    pub(super) granted: Vec<(PathBuf, Grant)>,
}

impl Confinement {
    /// Decides how `profile` is enforced with `kernel`'s support; the workspace mount is
    /// `workspace_root` when given (the mount narrowed by `AGENTACP_WORKSPACE_ROOT`).
    ///
    /// An error when the profile cannot be run locally (another provider, a storage mount,
    /// a remapped mount), or when a restriction it declares cannot be enforced here and the
    /// profile does not accept best effort: the error lists what is missing.
    pub fn plan(
        profile: SandboxProfile,
        workspace_root: Option<&Path>,
        kernel: KernelSupport,
    ) -> Result<Confinement, String> {
        Self::plan_on(std::env::consts::OS, profile, workspace_root, kernel)
    }

    /// [`plan`](Self::plan) for a build for the system `os` (`std::env::consts::OS`).
    fn plan_on(
        os: &str,
        profile: SandboxProfile,
        workspace_root: Option<&Path>,
        kernel: KernelSupport,
    ) -> Result<Confinement, String> {
        if profile.provider != "local" {
            return Err(format!(
                "the sandbox's provider is `{}`; agentacp runs `provider: local` sandboxes",
                profile.provider
            ));
        }
        let (paths, workspace) = mounted(&profile, workspace_root)?;
        let workspace = workspace
            .or_else(|| workspace_root.map(Path::to_path_buf))
            .or_else(|| paths.first().map(|(path, _)| path.clone()))
            .unwrap_or_else(|| PathBuf::from("/"));

        let (kernel, network, gaps) = gaps(&profile, kernel, os);
        if !gaps.is_empty() && !profile.best_effort {
            return Err(format!(
                "the sandbox cannot be enforced on this {}: {}. Refusing to run unconfined; a profile that accepts this says `metadata: {{agentacp: {{enforcement: best-effort}}}}` in SANDBOX.md",
                if os == "linux" { "kernel" } else { "system" },
                gaps.join("; ")
            ));
        }
        Ok(Confinement {
            profile,
            kernel,
            paths,
            workspace,
            network,
            gaps,
            granted: Vec::new(),
        })
    }

    /// This confinement, with `granted` usable too (each path and how): for one program that
    /// needs more than the mounts (a bridge's agent). A path that does not exist is left
    /// out: Landlock could not grant it, so it is not reported either.
    pub fn granting(&self, granted: &[(PathBuf, Grant)]) -> Confinement {
        let mut confinement = self.clone();
        let existing = granted.iter().filter(|(path, _)| path.exists()).cloned();
        confinement.granted.extend(existing);
        confinement
    }

    /// The profile this confinement enforces.
    pub fn profile(&self) -> &SandboxProfile {
        &self.profile
    }

    /// What the profile declares but this kernel does not enforce (empty unless best effort).
    pub fn gaps(&self) -> &[String] {
        &self.gaps
    }

    /// How the network is cut off.
    pub fn network(&self) -> NetworkConfinement {
        self.network
    }

    /// Whether a program runs in a PID namespace of its own, so that every process it
    /// starts ends with it.
    pub fn contains_processes(&self) -> bool {
        self.kernel.pid_namespace
    }

    /// Whether a program's PID namespace gets a `/proc` of its own, where it sees its own
    /// processes and no others (else `/proc` is the runtime's).
    pub fn has_own_proc(&self) -> bool {
        self.kernel.pid_namespace && self.kernel.own_proc
    }

    /// Whether a program gets a root of its own: only its mounts, the system's folders
    /// (read-only), what it needs to run, a few devices and its own `/proc` exist for it, so
    /// it cannot change the mode, times, extended attributes or owner of anything else, nor
    /// reach a Unix socket outside its mounts.
    pub fn has_own_root(&self) -> bool {
        self.has_own_proc() && self.kernel.own_root
    }

    /// Whether `metadata.agentacp.processes` is enforced: by a cgroup of each run's own
    /// (`pids.max`), or `RLIMIT_NPROC` in the program's user namespace, or both.
    pub fn limits_processes(&self) -> bool {
        self.kernel.cgroup.pids.is_some() || self.rlimits_processes()
    }

    /// Whether `RLIMIT_NPROC` in the program's user namespace limits its processes.
    pub(super) fn rlimits_processes(&self) -> bool {
        process_rlimit(self.kernel).is_ok()
    }

    /// What a cgroup of each run's own limits ([`acp_process::cgroup`]), where this kernel
    /// lets the runtime make one: the processes (`extra` more, the processes above the
    /// program that the run needs) and the memory of all of them together.
    #[cfg_attr(
        not(all(target_os = "linux", feature = "enforce")),
        allow(dead_code, reason = "applied where the sandbox confines (Linux, feature `enforce`)")
    )]
    pub(super) fn cgroup_limits(&self, extra: u64) -> acp_process::cgroup::Limits {
        let (limits, cgroup) = (self.profile.limits, self.kernel.cgroup);
        acp_process::cgroup::Limits {
            processes: (limits.processes)
                .filter(|_| cgroup.pids.is_some())
                .map(|n| n.saturating_add(extra)),
            memory_bytes: (limits.memory_mb)
                .filter(|_| cgroup.memory.is_some())
                .map(|mb| mb.saturating_mul(1024 * 1024)),
        }
    }

    /// Which mechanism enforces each limit, as reported (`limits.enforced_by`).
    fn enforced_by(&self) -> Value {
        let (limits, cgroup) = (self.profile.limits, self.kernel.cgroup);
        let mut processes = Vec::new();
        if let Some(version) = cgroup.pids.filter(|_| limits.processes.is_some()) {
            processes.push(format!("{} pids.max (all its processes together)", version.name()));
        }
        if limits.processes.is_some() && self.rlimits_processes() {
            processes.push("RLIMIT_NPROC in its user namespace".to_string());
        }
        let mut memory = Vec::new();
        if limits.memory_mb.is_some() {
            memory.push("RLIMIT_DATA (each process's heap and private mappings)".to_string());
            if let Some(version) = cgroup.memory {
                let swap = if cgroup.swap { ", swap too" } else { "" };
                memory.push(format!(
                    "{} memory limit (all its processes together, shared memory and tmpfs files included{swap})",
                    version.name()
                ));
            }
        }
        json!({
            "timeout_ms": limits.timeout.map(|_| "timer (its process group, or PID namespace, killed)"),
            "cpu_ms": limits.cpu.map(|_| "RLIMIT_CPU (each process)"),
            "memory_mb": memory,
            "processes": processes,
        })
    }

    /// Refuses a sandbox in which a program could write the runtime's own files: its state
    /// folder (sessions, a governance channel's audit log) and its audit log (`None`: off)
    /// must be outside every mount it may write, and no such mount inside the state folder.
    /// The error names both. (What the operator's code grants one program, such as a
    /// bridge's agent its own folder inside the state folder, is its code's decision.)
    pub fn keep_out(&self, state_dir: &Path, audit_log: Option<&Path>) -> Result<(), String> {
        let absolute = |path: &Path| std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let (state_dir, audit_log) = (absolute(state_dir), audit_log.map(absolute));
        let writable = self
            .paths
            .iter()
            .filter(|(_, read_only)| !read_only)
            .map(|(path, _)| absolute(path));
        for mount in writable {
            let inside = if within(&state_dir, &mount) || within(&mount, &state_dir) {
                &state_dir
            } else if let Some(log) = audit_log.as_ref().filter(|log| within(log, &mount)) {
                log
            } else {
                continue;
            };
            let log = match &audit_log {
                Some(log) => format!("audit log `{}`", log.display()),
                None => "audit log (off here)".to_string(),
            };
            return Err(format!(
                "the runtime's state folder `{}` and its {log} must be outside every folder a sandboxed program may write, and `{}` meets the sandbox's read-write mount `{}`: a program could rewrite the sessions and the audit trail. Move them (AGENTACP_STATE_DIR, AGENTACP_AUDIT_LOG) or the mount",
                state_dir.display(),
                inside.display(),
                mount.display()
            ));
        }
        Ok(())
    }

    /// What the profile's limits do not cover here, each a `key: sentence` (reported; not a
    /// gap: each limit is enforced as documented, and these are its bounds).
    pub fn not_enforced(&self) -> Vec<String> {
        let limits = self.profile.limits;
        let mut unlimited = Vec::new();
        let cgroup = self.kernel.cgroup;
        if limits.memory_mb.is_some() && cgroup.memory.is_none() {
            unlimited.push(format!(
                "memory.shared: memory_mb (RLIMIT_DATA) does not count shared memory (MAP_SHARED, memfd, tmpfs files), and no cgroup can count it here ({})",
                cgroup_why_not("memory")
            ));
            unlimited.push(
                "memory.per-process: memory_mb applies to each process a program starts, not to all of them together"
                    .to_string(),
            );
        }
        if limits.memory_mb.is_some() && cgroup.memory.is_some() && !cgroup.swap {
            unlimited.push("memory.swap: this kernel does not account swap to cgroups, so where the machine has swap a program's pages may be swapped out past memory_mb".to_string());
        }
        if limits.cpu.is_some() {
            unlimited.push(
                "cpu.per-process: cpu_ms applies to each process a program starts; timeout_ms bounds the whole"
                    .to_string(),
            );
        }
        if limits.processes.is_none() {
            unlimited.push("processes: no process limit is declared (metadata.agentacp.processes)".to_string());
        }
        unlimited
    }

    /// Whether Landlock confines the file system.
    pub fn confines_files(&self) -> bool {
        self.kernel.landlock_abi > 0
    }

    /// Whether Landlock confines connecting to pathname Unix sockets to the read-write mounts
    /// and grants (Landlock ABI 9, Linux 7.1). Before it, such a connection is not confined.
    pub fn confines_unix_sockets(&self) -> bool {
        self.kernel.landlock_abi >= LANDLOCK_UNIX_ABI
    }

    /// The places through which a program reaches services that act for the user outside
    /// any sandbox — the user's runtime folder (the session bus, where `systemd-run --user`
    /// starts a program unconfined; systemd's user manager; ssh and gpg agents), tmux's
    /// sockets (`/tmp/tmux-UID`), X11's sockets, Docker's — hidden from a confined program (an empty folder, or `/dev/null`,
    /// mounted over them in its own mount namespace) where Landlock does not confine
    /// connecting to pathname Unix sockets (before ABI 9) and the program gets a mount
    /// namespace of its own ([`has_own_proc`](Self::has_own_proc)). Those that exist now and
    /// hold none of the program's mounts and grants.
    pub fn hidden_sockets(&self) -> Vec<PathBuf> {
        self.hidden_sockets_keeping(&[])
    }

    /// [`hidden_sockets`](Self::hidden_sockets) but those holding one of `keep` too (the
    /// program's file, the folders of its `PATH`).
    pub fn hidden_sockets_keeping(&self, keep: &[PathBuf]) -> Vec<PathBuf> {
        if self.confines_unix_sockets() || !self.has_own_proc() {
            return Vec::new();
        }
        self.sockets_to_hide(keep)
    }

    /// No mount namespace elsewhere than Linux, so nothing to hide (and `has_own_proc` is
    /// false there).
    #[cfg(not(unix))]
    fn sockets_to_hide(&self, _keep: &[PathBuf]) -> Vec<PathBuf> {
        Vec::new()
    }

    /// The places of [`hidden_sockets_keeping`](Self::hidden_sockets_keeping), found.
    #[cfg(unix)]
    fn sockets_to_hide(&self, keep: &[PathBuf]) -> Vec<PathBuf> {
        let uid = rustix::process::getuid().as_raw();
        // tmux's server takes commands from any client of its socket (`run-shell`).
        let tmux = std::env::var_os("TMUX_TMPDIR").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
        let runtime_folders = [
            Some(PathBuf::from(format!("/run/user/{uid}"))),
            std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from),
            Some(tmux.join(format!("tmux-{uid}"))),
        ];
        let places = (runtime_folders.into_iter().flatten()).chain(SERVICE_SOCKETS.iter().map(PathBuf::from));
        let kept: Vec<&Path> = (self.paths.iter().map(|(path, _)| path.as_path()))
            .chain(self.granted.iter().map(|(path, _)| path.as_path()))
            .chain(keep.iter().map(PathBuf::as_path))
            .collect();
        let mut hidden: Vec<PathBuf> = Vec::new();
        for place in places {
            let Ok(place) = std::fs::canonicalize(&place) else {
                continue;
            };
            let hideable = std::fs::metadata(&place).is_ok_and(|found| {
                use std::os::unix::fs::FileTypeExt;
                found.is_dir() || found.file_type().is_socket()
            });
            if hideable && !hidden.contains(&place) && !kept.iter().any(|path| within(path, &place)) {
                hidden.push(place);
            }
        }
        hidden
    }

    /// The folders granted [`Grant::ConnectUnix`]: where a Unix socket the program is meant
    /// to reach is made.
    pub fn unix_socket_folders(&self) -> impl Iterator<Item = &Path> {
        self.granted
            .iter()
            .filter(|(_, grant)| *grant == Grant::ConnectUnix)
            .map(|(path, _)| path.as_path())
    }

    /// The mounts as folders of this machine, and whether each is read-only.
    pub fn mounts(&self) -> &[(PathBuf, bool)] {
        &self.paths
    }

    /// What is enforced, as `initialize` reports it (`_meta.aip44.sandbox_enforcement`).
    pub fn report(&self) -> Value {
        let limits = self.profile.limits;
        let millis =
            |duration: Option<std::time::Duration>| duration.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        json!({
            "provider": "local",
            "enforcement": if self.profile.best_effort { "best-effort" } else { "required" },
            "files": if self.confines_files() {
                let mut files = json!({
                    "mechanism": "landlock",
                    "abi": self.kernel.landlock_abi,
                    "mounts": mount_modes(&self.paths),
                    "unix_sockets": if self.confines_unix_sockets() {
                        "confined"
                    } else if self.has_own_root() {
                        "only in the mounts"
                    } else {
                        "not confined"
                    },
                });
                let hidden = self.hidden_sockets();
                if !hidden.is_empty() {
                    files["hidden"] = json!(hidden);
                }
                if !self.granted.is_empty() {
                    files["granted"] = Value::Array(grant_modes(&self.granted));
                }
                files
            } else {
                Value::Null
            },
            "limits": {
                "timeout_ms": millis(limits.timeout),
                "memory_mb": limits.memory_mb,
                "cpu_ms": millis(limits.cpu),
                "processes": limits.processes.filter(|_| self.limits_processes()),
                "enforced_by": self.enforced_by(),
            },
            "env": { "passthrough": self.profile.env_passthrough },
            "network": match self.network {
                NetworkConfinement::Open => Value::Null,
                NetworkConfinement::Namespace => "namespace".into(),
                NetworkConfinement::LandlockTcp => "landlock-tcp".into(),
            },
            "processes": if self.contains_processes() { "pid-namespace".into() } else { Value::Null },
            "proc": if self.has_own_proc() { "own" } else { "host" },
            "root": if self.has_own_root() { "own" } else { "host" },
            "read_only": self.profile.read_only,
            "gaps": self.gaps,
            "not_enforced": self.not_enforced(),
        })
    }

    /// [`report`](Self::report) without the machine's paths (the mounts' and grants' modes
    /// stay): what a client that has not authenticated yet is told. The paths would show a
    /// stranger how the machine is laid out.
    pub fn report_without_paths(&self) -> Value {
        let mut report = self.report();
        if let Some(files) = report.get_mut("files").and_then(Value::as_object_mut) {
            for key in ["mounts", "granted"] {
                if let Some(Value::Array(entries)) = files.get_mut(key) {
                    for entry in entries.iter_mut().filter_map(Value::as_object_mut) {
                        entry.remove("path");
                    }
                }
            }
            if let Some(hidden) = files.get("hidden").and_then(Value::as_array).map(Vec::len) {
                files.insert("hidden".into(), hidden.into());
            }
            files.insert("paths".into(), "withheld until the client authenticates".into());
        }
        report
    }

    /// What the program this confinement was made for is granted beyond the mounts, as the
    /// log reports it.
    pub fn report_granted(&self) -> Value {
        Value::Array(grant_modes(&self.granted))
    }

    /// The environment a confined program gets from ours: `env.passthrough`, where set.
    pub fn passed_env(&self) -> impl Iterator<Item = (&str, std::ffi::OsString)> {
        self.profile
            .env_passthrough
            .iter()
            .filter_map(|key| std::env::var_os(key).map(|value| (key.as_str(), value)))
    }
}

/// Mounts with their mode, as reported.
fn mount_modes(paths: &[(PathBuf, bool)]) -> Vec<Value> {
    let grants: Vec<(PathBuf, Grant)> = paths
        .iter()
        .map(|(path, read_only)| (path.clone(), if *read_only { Grant::Read } else { Grant::ReadWrite }))
        .collect();
    grant_modes(&grants)
}

/// Grants with their mode, as reported.
fn grant_modes(paths: &[(PathBuf, Grant)]) -> Vec<Value> {
    paths
        .iter()
        .map(|(path, grant)| {
            let mode = match grant {
                Grant::Read => "read-only",
                Grant::ReadWrite => "read-write",
                Grant::ConnectUnix => "connect-unix",
            };
            json!({"path": path, "mode": mode})
        })
        .collect()
}

/// What Landlock does not confine (the operation, what it does): outside a root of its own,
/// a program may do it to any file its user may.
const UNCONFINED_BY_LANDLOCK: [(&str, &str); 4] = [
    ("chmod", "changing a file's mode"),
    ("utime", "changing a file's times"),
    ("xattr", "changing a file's extended attributes"),
    ("chown", "changing a file's owner or group"),
];

/// Whether `RLIMIT_NPROC` can enforce `metadata.agentacp.processes` with this kernel: set in
/// the program's own user namespace, it counts the processes of that namespace (the kernel
/// counts them per user and user namespace), so only the sandbox's. Else why not (a cgroup
/// neither: [`Confinement::plan`] asks this only then).
fn process_rlimit(kernel: KernelSupport) -> Result<(), String> {
    if !kernel.pid_namespace {
        return Err(format!(
            "no user namespaces here, in which RLIMIT_NPROC would count only the sandbox's processes, and no cgroup can be made ({})",
            cgroup_why_not("pids")
        ));
    }
    #[cfg(unix)]
    if rustix::process::getuid().is_root() {
        return Err(format!(
            "the runtime runs as root, whose processes RLIMIT_NPROC does not limit, and no cgroup can be made here ({})",
            cgroup_why_not("pids")
        ));
    }
    Ok(())
}

/// Why no cgroup with `controller` can be made here, as the probe found.
fn cgroup_why_not(controller: &str) -> String {
    let found = acp_process::cgroup::probe().why_not().iter();
    let why: Vec<&str> = found
        .filter_map(|why| why.strip_prefix(controller)?.strip_prefix(": "))
        .collect();
    match why.is_empty() {
        true => "none was found".to_string(),
        false => why.join("; "),
    }
}

/// Service sockets, and folders of them, hidden besides the user's runtime folder (see
/// [`Confinement::hidden_sockets`]).
#[cfg(unix)]
const SERVICE_SOCKETS: &[&str] = &["/tmp/.X11-unix", "/run/docker.sock", "/var/run/docker.sock"];

/// Whether `inner` is `outer` or inside it, as the file system resolves both (symbolic
/// links followed as far as each exists: a folder not made yet is placed under its nearest
/// existing one, resolved).
fn within(inner: &Path, outer: &Path) -> bool {
    resolved(inner).starts_with(resolved(outer))
}

/// `path` as the file system resolves it: canonical where it exists; else its nearest
/// existing ancestor canonical, followed by the rest (`.` and `..` taken as written).
fn resolved(path: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    let mut plain = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::ParentDir => {
                plain.pop();
            }
            std::path::Component::CurDir => {}
            other => plain.push(other),
        }
    }
    for ancestor in plain.ancestors().skip(1) {
        if let (Ok(real), Ok(rest)) = (std::fs::canonicalize(ancestor), plain.strip_prefix(ancestor)) {
            return real.join(rest);
        }
    }
    plain
}

/// Each folder a sandbox mounts, with whether it is read-only.
type Mounted = Vec<(PathBuf, bool)>;

/// The folders `profile` mounts, each with whether it is read-only, and the workspace mount
/// (`workspace_root` when given, which may only narrow it); an error for a mount a local
/// sandbox cannot make.
fn mounted(profile: &SandboxProfile, workspace_root: Option<&Path>) -> Result<(Mounted, Option<PathBuf>), String> {
    let mut paths = Vec::new();
    let mut workspace = None;
    for mount in &profile.mounts {
        let path = match &mount.source {
            MountSource::Workspace => {
                let path = match workspace_root {
                    Some(root) if !within(root, &mount.at) => {
                        return Err(format!(
                            "the workspace root `{}` is outside the sandbox's workspace mount `{}`: it may only narrow the mount (AGENTACP_WORKSPACE_ROOT)",
                            root.display(),
                            mount.at.display()
                        ));
                    }
                    Some(root) => root.to_path_buf(),
                    None => mount.at.clone(),
                };
                workspace.get_or_insert_with(|| path.clone());
                path
            }
            MountSource::File(file) if file == &mount.at => file.clone(),
            MountSource::File(file) => {
                return Err(format!(
                    "the sandbox mounts `{}` at `{}`: a local sandbox cannot move a folder, so `at` must be the folder itself",
                    file.display(),
                    mount.at.display()
                ));
            }
            MountSource::Storage(what) => {
                return Err(format!(
                    "the sandbox mounts {what} at `{}`: storage backings need a provider that mounts them; a local sandbox mounts folders (`source: workspace` or `{{file: …}}`)",
                    mount.at.display()
                ));
            }
        };
        paths.push((path, mount.read_only));
    }
    // Landlock's rules add up: a read-only folder inside a read-write one would be
    // writable all the same.
    for (inner, _) in paths.iter().filter(|(_, read_only)| *read_only) {
        if let Some((outer, _)) = paths
            .iter()
            .find(|(outer, read_only)| !read_only && within(inner, outer))
        {
            return Err(format!(
                "the sandbox mounts `{}` read-only inside the read-write mount `{}`: a local sandbox cannot make part of a writable folder read-only (Landlock's rules add up); mount the writable folders beside it instead",
                inner.display(),
                outer.display()
            ));
        }
    }
    Ok((paths, workspace))
}

/// Why a build for the system `os` (`std::env::consts::OS`), with feature `enforce` or not,
/// confines nothing; `None` when it can (Linux with `enforce`).
fn unconfining_build(os: &str, enforce: bool) -> Option<String> {
    let system = match os {
        "linux" if enforce => return None,
        "linux" => {
            return Some(
                "agentacp is built without its `sandbox` feature (agentacp-sandbox's `enforce`; Linux only), so nothing is confined".to_string(),
            );
        }
        "windows" => "Windows",
        "macos" => "macOS",
        other => other,
    };
    let timeout = match os {
        "windows" => "it ends the program, not what the program started",
        _ => "it ends the program's process group",
    };
    Some(format!(
        "agentacp's local sandbox confines programs only on Linux (Landlock, namespaces, rlimits, cgroups), and this system is {system}: nothing is confined (not the files, the network, the processes, the memory or the CPU time); only limits.timeout_ms holds, and {timeout}"
    ))
}

/// What of `profile` this build (for the system `os`) and `kernel` cannot enforce (the
/// gaps), with the kernel support this build uses and how the network is confined.
fn gaps(profile: &SandboxProfile, kernel: KernelSupport, os: &str) -> (KernelSupport, NetworkConfinement, Vec<String>) {
    let mut gaps = Vec::new();
    // Confining needs this build's mechanisms as much as the kernel's.
    let unconfining = unconfining_build(os, cfg!(feature = "enforce"));
    let confines = unconfining.is_none();
    let kernel = match unconfining {
        None => kernel,
        Some(why) => {
            gaps.push(why);
            KernelSupport::NONE
        }
    };
    if kernel.landlock_abi == 0 && gaps.is_empty() {
        gaps.push("files: this kernel has no Landlock, so programs are not confined to the mounts".to_string());
    }
    let network = if !profile.egress.is_empty() {
        gaps.push(format!(
            "network: egress to named hosts ({}) cannot be enforced by a local sandbox, so the network is open",
            profile.egress.join(", ")
        ));
        NetworkConfinement::Open
    } else if kernel.network_namespace {
        NetworkConfinement::Namespace
    } else if kernel.landlock_abi >= LANDLOCK_TCP_ABI {
        gaps.push("network: no user namespaces here, so only TCP is cut off (Landlock); UDP is not".to_string());
        NetworkConfinement::LandlockTcp
    } else {
        // A build that confines nothing named the network in its one gap (no Linux mechanism
        // to name here: on Windows or macOS there are no namespaces to lack).
        if confines {
            gaps.push("network: neither user namespaces nor Landlock TCP rules here, so the network is open".into());
        }
        NetworkConfinement::Open
    };
    if !kernel.pid_namespace && confines {
        gaps.push(
            "processes: no PID namespaces here (unprivileged user namespaces are off), so processes a program starts outside its process group (`setsid`, a double fork) can outlive its timeout and its session".to_string(),
        );
    }
    // An older Landlock enforces less of the same rules, silently: each part it lacks is
    // a gap like the others. A root of its own leaves nothing outside the mounts to
    // truncate, change the mode of, …: the system's folders are bound read-only.
    let abi = kernel.landlock_abi;
    let own_root = kernel.pid_namespace && kernel.own_proc && kernel.own_root;
    if abi > 0 && !own_root {
        for (operation, what) in UNCONFINED_BY_LANDLOCK {
            gaps.push(format!(
                "files: {what} ({operation}) is not confined outside the mounts: Landlock does not cover it, and the program gets no root of its own here (a mount namespace where only its mounts and the system's folders, read-only, exist: unprivileged user namespaces are off, the container refuses the mounts, or this runtime is itself confined, where Landlock forbids mounting)"
            ));
        }
    }
    if let Some(processes) = profile.limits.processes
        && kernel.cgroup.pids.is_none()
        && let Err(why) = process_rlimit(kernel)
    {
        gaps.push(format!(
            "limits: the process limit ({processes}, metadata.agentacp.processes) cannot be enforced: {why}"
        ));
    }
    if abi > 0 && abi < LANDLOCK_TRUNCATE_ABI && !own_root {
        gaps.push(format!(
            "files: this kernel's Landlock (ABI {abi}) does not confine truncating a file, so a program may empty files outside the mounts"
        ));
    }
    if abi > 0 && abi < LANDLOCK_SCOPE_ABI {
        let sockets = if network == NetworkConfinement::Namespace {
            ""
        } else {
            " and reach their abstract Unix sockets"
        };
        gaps.push(format!(
            "processes: this kernel's Landlock (ABI {abi}) does not scope signals, so a program may signal this user's other processes (this one among them){sockets}"
        ));
    }
    (kernel, network, gaps)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(extra: Value) -> SandboxProfile {
        let mut doc = json!({"provider": "local", "config": {}, "mounts": [{"source": "workspace", "at": "/srv"}]});
        doc.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        SandboxProfile::from_frontmatter(&doc).unwrap()
    }

    const FULL: KernelSupport = KernelSupport {
        landlock_abi: 6,
        network_namespace: true,
        pid_namespace: true,
        own_proc: true,
        own_root: true,
        cgroup: acp_process::cgroup::Available::NONE,
    };

    #[test]
    fn what_is_granted_beyond_the_mounts_is_reported_when_it_exists() {
        let confinement = Confinement::plan(profile(json!({})), None, FULL).unwrap();
        let here = std::env::temp_dir();
        let missing = here.join("agentacp-no-such-folder-for-this-test");
        let granted = confinement.granting(&[
            (here.clone(), Grant::Read),
            (missing, Grant::ReadWrite),
            (here.clone(), Grant::ConnectUnix),
        ]);
        assert_eq!(
            granted.report()["files"]["granted"],
            json!([{"path": here, "mode": "read-only"}, {"path": here, "mode": "connect-unix"}])
        );
        assert_eq!(granted.unix_socket_folders().collect::<Vec<_>>(), [here.as_path()]);
        // Nothing granted: no `granted` key.
        assert!(confinement.report()["files"].get("granted").is_none());
    }

    /// The workspace root may narrow the workspace mount, never widen it (a bridge did not
    /// check: `AGENTACP_WORKSPACE_ROOT=/` gave its agent the whole file system, writable).
    #[test]
    fn a_workspace_root_outside_the_workspace_mount_is_refused() {
        let inside = Confinement::plan(profile(json!({})), Some(Path::new("/srv/project")), FULL).unwrap();
        assert_eq!(inside.mounts(), [(PathBuf::from("/srv/project"), false)]);
        for outside in ["/", "/home", "/srv/../etc", "/no-such-folder/../srv/../etc"] {
            let error = Confinement::plan(profile(json!({})), Some(Path::new(outside)), FULL).unwrap_err();
            assert!(
                error.contains("outside the sandbox's workspace mount `/srv`"),
                "{error}"
            );
        }
    }

    /// A read-only mount inside a read-write one would be writable (Landlock's rules add up):
    /// refused, naming both. Beside it, or read-write inside read-only, it is kept.
    #[test]
    fn a_read_only_mount_inside_a_read_write_one_is_refused() {
        let mounts = |inner: &str, mode: &str| {
            json!({"mounts": [
                {"source": "workspace", "at": "/srv"},
                {"source": {"file": inner}, "at": inner, "mode": mode},
            ]})
        };
        let error = Confinement::plan(profile(mounts("/srv/vendor", "read-only")), None, FULL).unwrap_err();
        assert!(
            error.contains("`/srv/vendor` read-only inside the read-write mount `/srv`"),
            "{error}"
        );
        assert!(Confinement::plan(profile(mounts("/opt/vendor", "read-only")), None, FULL).is_ok());
        assert!(Confinement::plan(profile(mounts("/srv/cache", "read-write")), None, FULL).is_ok());
    }

    /// A place that holds the program's own file or a folder of its `PATH` (a Node installed
    /// by fnm lives in the user's runtime folder) is not hidden: the program would not start.
    #[test]
    fn a_place_holding_the_programs_file_or_path_is_not_hidden() {
        let confinement = Confinement::plan(profile(json!({})), None, FULL).unwrap();
        let folder = Path::new("/tmp/.X11-unix");
        let made = !folder.exists() && std::fs::create_dir(folder).is_ok();
        let place = folder.canonicalize().unwrap();
        let hidden = confinement.hidden_sockets();
        let keeping = confinement.hidden_sockets_keeping(&[place.join("bin")]);
        if made {
            let _ = std::fs::remove_dir(folder);
        }
        assert!(hidden.contains(&place), "{hidden:?}");
        assert!(!keeping.contains(&place), "{keeping:?}");
    }

    /// On Windows (and macOS) nothing can be confined: a sandbox that requires confinement is
    /// refused in a sentence naming the system, and a best-effort one runs with that as its
    /// first gap. The Linux build is not affected.
    #[test]
    fn a_system_other_than_linux_refuses_a_required_sandbox_unless_best_effort() {
        let error = Confinement::plan_on("windows", profile(json!({})), None, FULL).unwrap_err();
        assert!(
            error.starts_with(
                "the sandbox cannot be enforced on this system: agentacp's local sandbox confines programs only on Linux (Landlock, namespaces, rlimits, cgroups), and this system is Windows: nothing is confined"
            ) && error.contains("it ends the program, not what the program started")
                && error.contains("Refusing to run unconfined"),
            "{error}"
        );
        let best_effort = profile(json!({"metadata": {"agentacp": {"enforcement": "best-effort"}}}));
        let lenient = Confinement::plan_on("windows", best_effort.clone(), None, FULL).unwrap();
        // One gap, the system's: no Linux mechanism (namespaces, Landlock) named as missing.
        assert_eq!(lenient.gaps().len(), 1, "{:?}", lenient.gaps());
        assert!(
            lenient.gaps()[0].contains("this system is Windows"),
            "{:?}",
            lenient.gaps()
        );
        assert_eq!(lenient.network(), NetworkConfinement::Open);
        let mac = Confinement::plan_on("macos", best_effort, None, FULL).unwrap();
        assert!(mac.gaps()[0].contains("this system is macOS"), "{:?}", mac.gaps());
        let linux = Confinement::plan_on("linux", profile(json!({})), None, FULL);
        assert_eq!(linux.is_ok(), cfg!(feature = "enforce"));
    }

    #[test]
    fn a_kernel_without_landlock_refuses_a_required_sandbox_and_names_the_gap() {
        let error = Confinement::plan(profile(json!({})), None, KernelSupport::NONE).unwrap_err();
        assert!(
            error.contains("no Landlock") && error.contains("Refusing to run unconfined"),
            "{error}"
        );
        let lenient = Confinement::plan(
            profile(json!({"metadata": {"agentacp": {"enforcement": "best-effort"}}})),
            None,
            KernelSupport::NONE,
        )
        .unwrap();
        assert_eq!(
            lenient.gaps().len(),
            3,
            "files, network and processes: {:?}",
            lenient.gaps()
        );
        assert_eq!(lenient.report()["files"], Value::Null);
    }

    /// An older Landlock silently enforces less of the same rules: before ABI 3 it does not
    /// confine truncating, before ABI 6 it does not scope signals. Each is a gap, so a
    /// required sandbox refuses to start there. Before, it started without saying.
    #[test]
    fn what_an_older_landlock_cannot_enforce_is_a_gap() {
        let plan = |landlock_abi, own_root| {
            let kernel = KernelSupport {
                landlock_abi,
                network_namespace: true,
                pid_namespace: true,
                own_proc: true,
                own_root,
                cgroup: acp_process::cgroup::Available::NONE,
            };
            Confinement::plan(profile(json!({})), None, kernel)
        };
        let error = plan(2, false).unwrap_err();
        assert!(error.contains("truncating") && error.contains("signal"), "{error}");
        // In a root of its own nothing outside the mounts is writable: nothing to truncate.
        let error = plan(2, true).unwrap_err();
        assert!(!error.contains("truncating") && error.contains("signal"), "{error}");
        let error = plan(5, true).unwrap_err();
        assert!(!error.contains("truncating") && error.contains("signal"), "{error}");
        assert!(plan(6, true).unwrap().gaps().is_empty());
    }

    /// Issue #44: Landlock does not confine `chmod`, `utime`, `setxattr` nor `chown`, and a
    /// program changed files outside its mounts that way while the report said `"gaps": []`.
    /// Without a root of its own (no mount namespace) each is a gap, so a required profile
    /// refuses to start; with one, none is, and the report says `"root": "own"`.
    #[test]
    fn what_landlock_does_not_confine_is_a_gap_without_a_root_of_its_own() {
        for kernel in [
            KernelSupport {
                own_root: false,
                ..FULL
            },
            KernelSupport {
                own_proc: false,
                ..FULL
            },
        ] {
            let error = Confinement::plan(profile(json!({})), None, kernel).unwrap_err();
            for operation in ["(chmod)", "(utime)", "(xattr)", "(chown)"] {
                assert!(error.contains(operation), "{operation}: {error}");
            }
        }
        let confinement = Confinement::plan(profile(json!({})), None, FULL).unwrap();
        assert!(confinement.gaps().is_empty());
        assert_eq!(confinement.report()["root"], "own");
        assert_eq!(confinement.report()["files"]["unix_sockets"], "only in the mounts");
    }

    /// Issue #44: a program may not write the runtime's state folder or audit log; a mount
    /// that lets it is refused, naming both.
    #[test]
    fn the_runtimes_state_folder_and_audit_log_must_be_outside_a_writable_mount() {
        let confinement = Confinement::plan(profile(json!({})), None, FULL).unwrap();
        let (state, log) = (Path::new("/var/lib/agent"), Path::new("/var/log/agent.jsonl"));
        assert!(confinement.keep_out(state, Some(log)).is_ok());
        for (state, log) in [
            (Path::new("/srv/.agentacp"), log),
            (state, Path::new("/srv/audit.jsonl")),
            // The whole mount inside the state folder: its sessions are writable.
            (Path::new("/"), log),
        ] {
            let error = confinement.keep_out(state, Some(log)).unwrap_err();
            let both = format!(
                "state folder `{}` and its audit log `{}`",
                state.display(),
                log.display()
            );
            assert!(error.contains(&both) && error.contains("mount `/srv`"), "{error}");
        }
        // A read-only mount is not the program's to write.
        let read_only = json!({"mounts": [{"source": "workspace", "at": "/srv", "mode": "read-only"}]});
        let confinement = Confinement::plan(profile(read_only), None, FULL).unwrap();
        assert!(confinement.keep_out(Path::new("/srv/.agentacp"), None).is_ok());
    }

    /// A state folder not made yet (the runtime plans the sandbox before it opens anything)
    /// is still seen inside a writable mount through a symbolic link above it.
    #[cfg(unix)]
    #[test]
    fn a_state_folder_not_made_yet_is_seen_inside_a_mount_through_a_link() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        let state = dir.path().join("link/not-yet/state");
        assert!(
            within(&state, &real),
            "{} is inside {}",
            state.display(),
            real.display()
        );
        assert!(!within(&dir.path().join("elsewhere/state"), &real));
        let mount = json!({"mounts": [{"source": "workspace", "at": real}]});
        let confinement = Confinement::plan(profile(mount), None, FULL).unwrap();
        let error = confinement.keep_out(&state, None).unwrap_err();
        assert!(error.contains("must be outside every folder"), "{error}");
    }

    #[test]
    fn the_report_without_paths_keeps_the_modes_and_names_no_folder() {
        let confinement = Confinement::plan(profile(json!({})), Some(Path::new("/srv/secret-project")), FULL)
            .unwrap()
            .granting(&[(std::env::temp_dir(), Grant::Read)]);
        let report = confinement.report_without_paths().to_string();
        assert!(!report.contains("secret-project"), "{report}");
        assert!(!report.contains(&*std::env::temp_dir().to_string_lossy()), "{report}");
        let files = &confinement.report_without_paths()["files"];
        assert_eq!(files["mounts"], json!([{"mode": "read-write"}]));
        assert_eq!(files["granted"], json!([{"mode": "read-only"}]));
        assert!(files["paths"].is_string());
        assert!(
            confinement.report().to_string().contains("secret-project"),
            "the full report names it"
        );
    }

    /// Issue #44: with a cgroup of each run's own the process limit holds for any user (root
    /// too, whom RLIMIT_NPROC does not limit), and shared memory counts against `memory_mb`;
    /// the report says which mechanism enforces each limit. Without one, shared memory is
    /// reported as not enforced, and the process limit is a gap where no rlimit holds it.
    #[test]
    fn a_runs_cgroup_enforces_the_process_and_shared_memory_limits_and_is_reported() {
        use acp_process::cgroup::{Available, Version};
        let limited = || {
            profile(json!({
                "limits": {"memory_mb": 64},
                "metadata": {"agentacp": {"processes": 16}},
            }))
        };
        let cgroup = KernelSupport {
            cgroup: Available {
                pids: Some(Version::V1),
                memory: Some(Version::V1),
                swap: true,
            },
            ..FULL
        };
        let confinement = Confinement::plan(limited(), None, cgroup).unwrap();
        assert!(confinement.gaps().is_empty(), "{:?}", confinement.gaps());
        assert!(confinement.limits_processes());
        let report = confinement.report();
        assert_eq!(report["limits"]["processes"], 16);
        let by = &report["limits"]["enforced_by"];
        assert!(
            by["processes"][0].as_str().unwrap().starts_with("cgroup v1 pids.max"),
            "{by}"
        );
        assert!(by["memory_mb"][1].as_str().unwrap().contains("shared memory"), "{by}");
        assert!(
            !confinement
                .not_enforced()
                .iter()
                .any(|entry| entry.starts_with("memory.")),
            "{:?}",
            confinement.not_enforced()
        );
        let limits = confinement.cgroup_limits(2);
        assert_eq!((limits.processes, limits.memory_bytes), (Some(18), Some(64 << 20)));
        // No swap accounting: said so.
        let no_swap = KernelSupport {
            cgroup: Available {
                swap: false,
                ..cgroup.cgroup
            },
            ..cgroup
        };
        let confinement = Confinement::plan(limited(), None, no_swap).unwrap();
        assert!(
            confinement
                .not_enforced()
                .iter()
                .any(|entry| entry.starts_with("memory.swap"))
        );
        // No cgroup: shared memory is not enforced, and said so.
        let lenient = profile(json!({
            "limits": {"memory_mb": 64},
            "metadata": {"agentacp": {"processes": 16, "enforcement": "best-effort"}},
        }));
        let confinement = Confinement::plan(lenient, None, FULL).unwrap();
        assert!(
            confinement
                .not_enforced()
                .iter()
                .any(|entry| entry.starts_with("memory.shared"))
        );
        assert_eq!(confinement.cgroup_limits(2), acp_process::cgroup::Limits::default());
        #[cfg(unix)]
        if rustix::process::getuid().is_root() {
            let error = Confinement::plan(limited(), None, FULL).unwrap_err();
            assert!(error.contains("runs as root") && error.contains("no cgroup"), "{error}");
        }
    }

    /// Without a PID namespace, a process a program started outside its group outlives it.
    #[test]
    fn no_pid_namespace_is_a_gap() {
        let kernel = KernelSupport {
            pid_namespace: false,
            ..FULL
        };
        let error = Confinement::plan(profile(json!({})), None, kernel).unwrap_err();
        assert!(error.contains("processes: no PID namespaces"), "{error}");
        let report = Confinement::plan(profile(json!({})), None, FULL).unwrap().report();
        assert_eq!(report["processes"], "pid-namespace");
        assert_eq!(report["proc"], "own");
    }

    /// A `/proc` of the namespace's own is reported where the kernel gives it, and its
    /// absence (the runtime's `/proc`, as some containers force) is no reason to refuse.
    #[test]
    fn the_proc_a_program_sees_is_reported() {
        let kernel = KernelSupport {
            own_proc: false,
            ..FULL
        };
        let lenient = profile(json!({"metadata": {"agentacp": {"enforcement": "best-effort"}}}));
        let confinement = Confinement::plan(lenient, None, kernel).unwrap();
        // No mount namespace: no root of its own either, which is what the gaps are about.
        assert!(
            confinement.gaps().iter().all(|gap| gap.contains("no root of its own")),
            "{:?}",
            confinement.gaps()
        );
        assert_eq!(confinement.report()["proc"], "host");
        assert_eq!(confinement.report()["root"], "host");
    }

    #[test]
    fn egress_to_named_hosts_is_a_gap_on_every_kernel() {
        let error =
            Confinement::plan(profile(json!({"network": {"egress": ["example.com"]}})), None, FULL).unwrap_err();
        assert!(error.contains("example.com"), "{error}");
    }

    #[test]
    fn without_namespaces_tcp_is_cut_by_landlock_as_a_reported_gap() {
        let kernel = KernelSupport {
            landlock_abi: 4,
            network_namespace: false,
            pid_namespace: false,
            own_proc: false,
            own_root: false,
            cgroup: acp_process::cgroup::Available::NONE,
        };
        assert!(Confinement::plan(profile(json!({})), None, kernel).is_err());
        let lenient = Confinement::plan(
            profile(json!({"metadata": {"agentacp": {"enforcement": "best-effort"}}})),
            None,
            kernel,
        )
        .unwrap();
        assert_eq!(lenient.network(), NetworkConfinement::LandlockTcp);
        assert_eq!(lenient.report()["network"], "landlock-tcp");
    }

    #[test]
    fn the_workspace_mount_is_the_narrowed_root_and_a_full_kernel_has_no_gaps() {
        let confinement = Confinement::plan(profile(json!({})), Some(Path::new("/srv/project")), FULL).unwrap();
        assert!(confinement.gaps().is_empty());
        assert_eq!(confinement.mounts(), [(PathBuf::from("/srv/project"), false)]);
        assert_eq!(confinement.report()["network"], "namespace");
        assert_eq!(confinement.report()["files"]["abi"], 6);
    }

    /// Pathname Unix sockets are confined from Landlock ABI 9 on; before, the report says they
    /// are not, and that is no reason to refuse (it never was confined before ABI 9). In a
    /// root of its own only those in the mounts exist for the program.
    #[test]
    fn unix_sockets_are_reported_confined_only_where_landlock_confines_them() {
        let report = |landlock_abi, own_root| {
            let kernel = KernelSupport {
                landlock_abi,
                network_namespace: true,
                pid_namespace: true,
                own_proc: true,
                own_root,
                cgroup: acp_process::cgroup::Available::NONE,
            };
            let lenient = profile(json!({"metadata": {"agentacp": {"enforcement": "best-effort"}}}));
            Confinement::plan(lenient, None, kernel).unwrap().report()["files"]["unix_sockets"].clone()
        };
        assert_eq!(report(LANDLOCK_UNIX_ABI - 1, false), "not confined");
        assert_eq!(report(LANDLOCK_UNIX_ABI - 1, true), "only in the mounts");
        assert_eq!(report(LANDLOCK_UNIX_ABI, false), "confined");
    }

    #[test]
    fn mounts_a_local_sandbox_cannot_give_are_refused() {
        let moved = profile(json!({"mounts": [{"source": {"file": "/data"}, "at": "/mnt/data"}]}));
        assert!(
            Confinement::plan(moved, None, FULL)
                .unwrap_err()
                .contains("cannot move")
        );
        let storage = profile(json!({"mounts": [{"source": {"ref": "@acme/bucket"}, "at": "/b"}]}));
        assert!(Confinement::plan(storage, None, FULL).unwrap_err().contains("storage"));
        let other = SandboxProfile {
            provider: "mastra-e2b".into(),
            ..profile(json!({}))
        };
        assert!(Confinement::plan(other, None, FULL).unwrap_err().contains("mastra-e2b"));
    }
}
