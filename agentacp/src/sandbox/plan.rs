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
pub(crate) enum Grant {
    /// Read (and execute) it.
    Read,
    /// Read and write it.
    ReadWrite,
    /// Connect to the Unix sockets beneath it, and nothing else (where Landlock confines
    /// that; elsewhere connecting is not confined at all).
    #[cfg_attr(
        not(feature = "mcp"),
        allow(dead_code, reason = "granted to a bridge's stdio MCP shims (feature `mcp`)")
    )]
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
        if profile.provider != "local" {
            return Err(format!(
                "the sandbox's provider is `{}`; agentacp runs `provider: local` sandboxes",
                profile.provider
            ));
        }
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
        let workspace = workspace
            .or_else(|| workspace_root.map(Path::to_path_buf))
            .or_else(|| paths.first().map(|(path, _)| path.clone()))
            .unwrap_or_else(|| PathBuf::from("/"));

        let mut gaps = Vec::new();
        // Confining needs this build's mechanisms as much as the kernel's.
        let kernel = if cfg!(all(target_os = "linux", feature = "sandbox")) {
            kernel
        } else {
            gaps.push(
                "agentacp is built without its `sandbox` feature (Linux only), so nothing is confined".to_string(),
            );
            KernelSupport::NONE
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
            gaps.push("network: neither user namespaces nor Landlock TCP rules here, so the network is open".into());
            NetworkConfinement::Open
        };
        if !kernel.pid_namespace && cfg!(all(target_os = "linux", feature = "sandbox")) {
            gaps.push(
                "processes: no PID namespaces here (unprivileged user namespaces are off), so processes a program starts outside its process group (`setsid`, a double fork) can outlive its timeout and its session".to_string(),
            );
        }
        // An older Landlock enforces less of the same rules, silently: each part it lacks is
        // a gap like the others.
        let abi = kernel.landlock_abi;
        if abi > 0 && abi < LANDLOCK_TRUNCATE_ABI {
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
        if !gaps.is_empty() && !profile.best_effort {
            return Err(format!(
                "the sandbox cannot be enforced on this kernel: {}. Refusing to run unconfined; a profile that accepts this says `metadata: {{agentacp: {{enforcement: best-effort}}}}` in SANDBOX.md",
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
    pub(crate) fn granting(&self, granted: &[(PathBuf, Grant)]) -> Confinement {
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
    /// starts a program unconfined; systemd's user manager; ssh and gpg agents), X11's
    /// sockets, Docker's — hidden from a confined program (an empty folder, or `/dev/null`,
    /// mounted over them in its own mount namespace) where Landlock does not confine
    /// connecting to pathname Unix sockets (before ABI 9) and the program gets a mount
    /// namespace of its own ([`has_own_proc`](Self::has_own_proc)). Those that exist now and
    /// hold none of the program's mounts and grants.
    pub fn hidden_sockets(&self) -> Vec<PathBuf> {
        self.hidden_sockets_keeping(&[])
    }

    /// [`hidden_sockets`](Self::hidden_sockets) but those holding one of `keep` too (the
    /// program's file, the folders of its `PATH`).
    pub(crate) fn hidden_sockets_keeping(&self, keep: &[PathBuf]) -> Vec<PathBuf> {
        if self.confines_unix_sockets() || !self.has_own_proc() {
            return Vec::new();
        }
        let uid = rustix::process::getuid().as_raw();
        let runtime_folders = [
            Some(PathBuf::from(format!("/run/user/{uid}"))),
            std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from),
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
    #[cfg(feature = "mcp")]
    pub(crate) fn unix_socket_folders(&self) -> impl Iterator<Item = &Path> {
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
                    "unix_sockets": if self.confines_unix_sockets() { "confined" } else { "not confined" },
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
            },
            "env": { "passthrough": self.profile.env_passthrough },
            "network": match self.network {
                NetworkConfinement::Open => Value::Null,
                NetworkConfinement::Namespace => "namespace".into(),
                NetworkConfinement::LandlockTcp => "landlock-tcp".into(),
            },
            "processes": if self.contains_processes() { "pid-namespace".into() } else { Value::Null },
            "proc": if self.has_own_proc() { "own" } else { "host" },
            "read_only": self.profile.read_only,
            "gaps": self.gaps,
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
    pub(crate) fn report_granted(&self) -> Value {
        Value::Array(grant_modes(&self.granted))
    }

    /// The environment a confined program gets from ours: `env.passthrough`, where set.
    pub(crate) fn passed_env(&self) -> impl Iterator<Item = (&str, std::ffi::OsString)> {
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

/// Service sockets, and folders of them, hidden besides the user's runtime folder (see
/// [`Confinement::hidden_sockets`]).
const SERVICE_SOCKETS: &[&str] = &["/tmp/.X11-unix", "/run/docker.sock", "/var/run/docker.sock"];

/// Whether `inner` is `outer` or inside it, as the file system resolves both (symbolic
/// links followed) where they exist, else with `.` and `..` taken as written.
fn within(inner: &Path, outer: &Path) -> bool {
    let resolved = |path: &Path| {
        std::fs::canonicalize(path).unwrap_or_else(|_| {
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
            plain
        })
    };
    resolved(inner).starts_with(resolved(outer))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::KernelSupport;

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
        #[cfg(feature = "mcp")]
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
        let plan = |landlock_abi| {
            let kernel = KernelSupport {
                landlock_abi,
                network_namespace: true,
                pid_namespace: true,
                own_proc: true,
            };
            Confinement::plan(profile(json!({})), None, kernel)
        };
        let error = plan(2).unwrap_err();
        assert!(error.contains("truncating") && error.contains("signal"), "{error}");
        let error = plan(5).unwrap_err();
        assert!(!error.contains("truncating") && error.contains("signal"), "{error}");
        assert!(plan(6).unwrap().gaps().is_empty());
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
        let confinement = Confinement::plan(profile(json!({})), None, kernel).unwrap();
        assert!(confinement.gaps().is_empty());
        assert_eq!(confinement.report()["proc"], "host");
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
    /// are not, and that is no reason to refuse (it never was confined before ABI 9).
    #[test]
    fn unix_sockets_are_reported_confined_only_where_landlock_confines_them() {
        let report = |landlock_abi| {
            let kernel = KernelSupport {
                landlock_abi,
                network_namespace: true,
                pid_namespace: true,
                own_proc: true,
            };
            Confinement::plan(profile(json!({})), None, kernel).unwrap().report()["files"]["unix_sockets"].clone()
        };
        assert_eq!(report(LANDLOCK_UNIX_ABI - 1), "not confined");
        assert_eq!(report(LANDLOCK_UNIX_ABI), "confined");
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
