//! Linux: confining a program between fork and exec. Everything that allocates or opens
//! files happens before the fork, in [`apply`] (the Landlock ruleset, the namespace maps);
//! the closure run in the child only makes system calls.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
    path_beneath_rules,
};
use rustix::process::{Resource, Rlimit};

use super::plan::{Confinement, Grant, LANDLOCK_TCP_ABI, NetworkConfinement};

/// The system's folders a program needs to run, readable (and executable) by every confined
/// program. Missing ones are skipped.
const SYSTEM_READ: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/proc", "/sys",
];

/// Devices a program may read and write. Not `/dev/tty`: through the terminal the server was
/// started from, a program could type commands into its shell (`TIOCSTI`), to run
/// unconfined once the server exits; and a program that prompts there would hang.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

/// The Landlock ABI the rules are written for; an older kernel gets what it supports (the
/// plan reported which). From ABI 9 that includes connecting to pathname Unix sockets, which
/// the read-write mounts and grants allow, and the [`Grant::ConnectUnix`] folders alone.
const RULES_ABI: ABI = ABI::V9;

impl Confinement {
    /// Applies the confinement to `command`, which will run `program` (resolved against the
    /// child's `PATH`, so its own file can be allowed). `cpu`: whether `cpu_ms` applies (to
    /// a command, not to a long-running MCP server).
    pub(crate) fn apply(
        &self,
        command: &mut tokio::process::Command,
        program: &Path,
        child_path: Option<&std::ffi::OsStr>,
        cpu: bool,
    ) -> std::io::Result<()> {
        let program = resolve_program(program, child_path);
        confine(self, command, program.as_deref(), cpu)
    }
}

/// Where `program` is: itself when it has a slash, else the first match in `path`.
fn resolve_program(program: &Path, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    if program.components().count() > 1 {
        return Some(program.to_path_buf());
    }
    std::env::split_paths(path?)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// Confines the child that `command` will start: rlimits, a network namespace, Landlock.
fn confine(
    confinement: &Confinement,
    command: &mut tokio::process::Command,
    program: Option<&Path>,
    cpu: bool,
) -> std::io::Result<()> {
    let ruleset = match confinement.confines_files() {
        true => Some(ruleset(confinement, program)?),
        false => None,
    };
    let limits = confinement.profile.limits;
    let memory = limits.memory_mb.map(|mb| mb.saturating_mul(1024 * 1024));
    let cpu_seconds = limits
        .cpu
        .filter(|_| cpu)
        .map(|cpu| cpu.as_millis().div_ceil(1000).max(1) as u64);
    let namespace = confinement.network == NetworkConfinement::Namespace;
    let (uid, gid) = (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
    let uid_map = format!("{uid} {uid} 1\n").into_bytes();
    let gid_map = format!("{gid} {gid} 1\n").into_bytes();

    // SAFETY: the closure runs in the child between fork and exec. It only makes system calls
    // (setrlimit, unshare, open/write/close of /proc/self files, prctl, landlock_restrict_self)
    // on data prepared above; it allocates nothing and takes no lock.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(move || {
            if let Some(bytes) = memory {
                rustix::process::setrlimit(
                    Resource::Data,
                    Rlimit {
                        current: Some(bytes),
                        maximum: Some(bytes),
                    },
                )?;
            }
            if let Some(seconds) = cpu_seconds {
                // SIGXCPU at the limit, SIGKILL a second later should it be caught.
                rustix::process::setrlimit(
                    Resource::Cpu,
                    Rlimit {
                        current: Some(seconds),
                        maximum: Some(seconds + 1),
                    },
                )?;
            }
            if namespace {
                rustix::thread::unshare_unsafe(
                    rustix::thread::UnshareFlags::NEWUSER | rustix::thread::UnshareFlags::NEWNET,
                )?;
                // Keep our own ids inside (else they read as `nobody`); cosmetic, so a failure
                // is not one.
                let _ = write_proc(c"/proc/self/uid_map", &uid_map);
                let _ = write_proc(c"/proc/self/setgroups", b"deny");
                let _ = write_proc(c"/proc/self/gid_map", &gid_map);
            }
            rustix::thread::set_no_new_privs(true)?;
            if let Some(ruleset) = &ruleset
                && libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(())
}

/// Writes `bytes` to a file of `/proc/self`.
fn write_proc(path: &std::ffi::CStr, bytes: &[u8]) -> std::io::Result<()> {
    let fd = rustix::fs::open(
        path,
        rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    rustix::io::write(&fd, bytes)?;
    Ok(())
}

/// The Landlock ruleset: every file access handled; the system's folders and the program
/// readable, the devices and the read-write mounts writable, read-only mounts readable,
/// pathname Unix sockets reachable in the read-write mounts and the sockets' grants; TCP cut
/// off when the network is confined that way; signals and abstract sockets scoped to the
/// sandbox.
fn ruleset(confinement: &Confinement, program: Option<&Path>) -> std::io::Result<OwnedFd> {
    let fd = landlock_rules(confinement, program)
        .map_err(|error| std::io::Error::other(format!("the sandbox's Landlock rules: {error}")))?;
    fd.ok_or_else(|| std::io::Error::other("this kernel made no Landlock ruleset"))
}

fn landlock_rules(
    confinement: &Confinement,
    program: Option<&Path>,
) -> Result<Option<OwnedFd>, landlock::RulesetError> {
    let read = AccessFs::from_read(RULES_ABI);
    let all = AccessFs::from_all(RULES_ABI);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)?
        .scope(Scope::from_all(RULES_ABI))?;
    if confinement.network == NetworkConfinement::LandlockTcp && confinement.kernel.landlock_abi >= LANDLOCK_TCP_ABI {
        ruleset = ruleset.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?;
    }
    let mounts = confinement.paths.iter().map(|(path, read_only)| {
        let grant = if *read_only { Grant::Read } else { Grant::ReadWrite };
        (path, grant)
    });
    let granted = confinement.granted.iter().map(|(path, grant)| (path, *grant));
    let usable: Vec<(&PathBuf, Grant)> = mounts.chain(granted).collect();
    let with = |wanted: Grant| {
        usable
            .iter()
            .filter(move |(_, grant)| *grant == wanted)
            .map(|(path, _)| *path)
    };
    // Unsupported by this kernel (before ABI 9), the socket rule is left out: best effort.
    let created = ruleset
        .create()?
        .add_rules(path_beneath_rules(SYSTEM_READ, read))?
        .add_rules(path_beneath_rules(program, read))?
        .add_rules(path_beneath_rules(with(Grant::Read), read))?
        .add_rules(path_beneath_rules(DEVICES, all))?
        .add_rules(path_beneath_rules(with(Grant::ReadWrite), all))?
        .add_rules(path_beneath_rules(with(Grant::ConnectUnix), AccessFs::ResolveUnix))?;
    Ok(created.into())
}
