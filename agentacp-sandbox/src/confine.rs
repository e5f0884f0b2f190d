//! Linux: confining a program between fork and exec. Everything that allocates or opens
//! files happens before the fork, in [`apply`] (the Landlock ruleset, the namespace maps);
//! the closure run in the child only makes system calls.
//!
//! Where the kernel gives PID namespaces, the child the runtime started does not become the
//! program. It forks the namespace's first process (its init), which forks the program, so
//! that everything the program starts lives in that namespace, which the kernel empties
//! (`SIGKILL`) when its init ends, whatever process group or session a process moved to:
//!
//! - **the outer process** (the runtime's child, the leader of the process group the
//!   runtime signals) waits and then ends as the program ended, with its exit code or by its
//!   signal. It ignores every signal it can (`SIGTERM` and the others the group gets are the
//!   program's to act on); `SIGKILL` ends it, and with it the namespace;
//! - **the init** (PID 1 inside) dies with the outer process (`PR_SET_PDEATHSIG`), reaps what
//!   is orphaned inside, and when the program ends passes its wait status to the outer
//!   process and exits, which ends every process left inside. It has no signal handler, so
//!   of the signals the runtime sends the group only `SIGKILL` reaches it;
//! - **the program** (PID 2 inside) is exec'd as usual.
//!
//! Where the kernel allows it, the init also enters a mount namespace of its own and mounts
//! the PID namespace's procfs over `/proc` before it forks the program: there the program sees
//! its own processes and no others (elsewhere `/proc` is the runtime's, where the program
//! finds itself as `/proc/self`, under its outer PID). Where the kernel allows that too, the
//! init gives the program a root of its own with that `/proc` in it (`root.rs`): only its
//! mounts, the system's folders and what it needs exist for it. Landlock is applied last, in
//! the program: a process it restricts may no longer mount.
//!
//! The split into these three is [`acp_process::namespace`]'s, which runs programs without a
//! sandbox the same way (`acp_process::contain_tree`: in a PID namespace alone where the
//! runtime is root, else in a user namespace that maps its ids to themselves).
//!
//! The outer process and the init are forks of the runtime that never exec: they hold a copy
//! of its memory (its environment among it). They are made non-dumpable, so the program, of
//! the same user, cannot read them through `/proc` (their `environ`, `mem`), and they never
//! dump core. They are outside the program's Landlock domain, which also keeps it from
//! signalling them (Landlock ABI ≥ 6).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use acp_process::cgroup::RunCgroup;
use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
    path_beneath_rules,
};
use rustix::process::{Resource, Rlimit};

use super::plan::{Confinement, Grant, LANDLOCK_TCP_ABI, NetworkConfinement};
use super::root::NewRoot;
use acp_process::namespace::{IdMaps, mount_own_proc};

/// The system's folders a program needs to run, readable (and executable) by every confined
/// program. Missing ones are skipped.
const SYSTEM_READ: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/proc", "/sys",
];

// The devices a program may read and write (not `/dev/tty`): the same in its own root.
use super::root::DEVICES;

/// The Landlock ABI the rules are written for; an older kernel gets what it supports (the
/// plan reported which). From ABI 9 that includes connecting to pathname Unix sockets, which
/// the read-write mounts and grants allow, and the [`Grant::ConnectUnix`] folders alone.
const RULES_ABI: ABI = ABI::V9;

impl Confinement {
    /// Applies the confinement to `command`, which will run `program` in `cwd` (resolved as
    /// the child will, against `cwd` and the child's `PATH`, so its own file can be
    /// allowed). `cpu`: whether `cpu_ms` applies (to a command, not to a long-running MCP
    /// server).
    ///
    /// The run's cgroup, where one limits it (see [`acp_process::cgroup`]): the program joins
    /// it before anything else between fork and exec. Keep it while the program runs;
    /// dropping it kills what is left inside and removes it.
    pub fn apply(
        &self,
        command: &mut tokio::process::Command,
        (program, cwd): (&Path, Option<&Path>),
        child_path: Option<&std::ffi::OsStr>,
        cpu: bool,
    ) -> std::io::Result<Option<RunCgroup>> {
        let program = resolve_program(program, cwd, child_path);
        // Never hidden from it: its own file, the folders its `PATH` names.
        let keep: Vec<PathBuf> = (program.iter().cloned())
            .chain(child_path.into_iter().flat_map(std::env::split_paths))
            .collect();
        confine(self, command, (program.as_deref(), &keep, cwd), cpu)
    }
}

/// The file the child will run as `program` from `cwd`: itself when it has a slash, else the
/// first match in `path`; a relative one taken from `cwd`, as the child takes it (not from
/// the runtime's folder). Only a regular file: a folder named so is not allowed to be read.
fn resolve_program(program: &Path, cwd: Option<&Path>, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    let from_cwd = |candidate: PathBuf| match cwd {
        Some(cwd) if candidate.is_relative() => cwd.join(candidate),
        _ => candidate,
    };
    if program.components().count() > 1 {
        return Some(from_cwd(program.to_path_buf())).filter(|file| file.is_file());
    }
    std::env::split_paths(path?)
        .map(|dir| from_cwd(dir.join(program)))
        .find(|candidate| candidate.is_file())
}

/// Confines the child that `command` will start: a cgroup of its run's own, rlimits, a
/// network namespace, Landlock, a PID namespace, a root of its own.
fn confine(
    confinement: &Confinement,
    command: &mut tokio::process::Command,
    (program, keep, cwd): (Option<&Path>, &[PathBuf], Option<&Path>),
    cpu: bool,
) -> std::io::Result<Option<RunCgroup>> {
    let ruleset = match confinement.confines_files() {
        true => Some(ruleset(confinement, program)?),
        false => None,
    };
    let (memory, cpu_seconds, processes) = rlimits(confinement, cpu);
    let contain = confinement.contains_processes();
    // Its run's cgroup counts the outer process and the init too, where they are.
    let cgroup = RunCgroup::create(confinement.cgroup_limits(if contain { 2 } else { 0 }))?;
    let join = cgroup.as_ref().map(RunCgroup::joiner).transpose()?;
    // The namespace's own `/proc`, and the rule that makes it readable as the runtime's was.
    let own_proc = confinement
        .has_own_proc()
        .then(|| OwnProc::plan(confinement, ruleset.as_ref(), keep, cwd));
    let namespaces = namespaces(confinement);
    let id_maps = IdMaps::identity();

    // SAFETY: the closure runs in the child between fork and exec. It only makes system calls
    // (write to the cgroup files opened above, setrlimit, unshare, open/write/close of the id
    // maps' /proc/self files, prctl, landlock_restrict_self,
    // and those of `split_into_init`: fork, pipe2, pidfd_open, poll, unshare, mount, open,
    // landlock_add_rule, close, waitpid, read, write, madvise) on data prepared above; it
    // allocates nothing and takes no lock. Landlock comes last: a process it restricts may no longer mount, and
    // the init mounts the namespace's `/proc`.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(move || {
            // First, while it may: everything it starts from here on is inside.
            if let Some(join) = &join {
                join.join().map_err(|e| failed(Step::Cgroup, e))?;
            }
            if let Some(bytes) = memory {
                let limit = Rlimit {
                    current: Some(bytes),
                    maximum: Some(bytes),
                };
                rustix::process::setrlimit(Resource::Data, limit).map_err(|e| failed(Step::MemoryLimit, e))?;
            }
            if let Some(seconds) = cpu_seconds {
                // SIGXCPU at the limit, SIGKILL a second later should it be caught.
                let limit = Rlimit {
                    current: Some(seconds),
                    maximum: Some(seconds + 1),
                };
                rustix::process::setrlimit(Resource::Cpu, limit).map_err(|e| failed(Step::CpuLimit, e))?;
            }
            if !namespaces.is_empty() {
                rustix::thread::unshare_unsafe(namespaces).map_err(|e| failed(Step::Namespaces, e))?;
                // Keep our own ids inside (else they read as `nobody`); cosmetic, so a failure
                // is not one.
                // (A root of its own needs them: files are made in it under these ids.)
                let _ = id_maps.write();
                if let Some(processes) = processes {
                    let limit = Rlimit {
                        current: Some(processes),
                        maximum: Some(processes),
                    };
                    rustix::process::setrlimit(Resource::Nproc, limit).map_err(|e| failed(Step::ProcessLimit, e))?;
                }
                // Root in its namespaces (a runtime run as root keeps uid 0 there), the program
                // would get every capability in them at exec: enough to unmount its `/proc` or
                // reconfigure its network where Landlock does not stop it. With `NOROOT`, uid 0
                // gets no capability from exec; locked, the program cannot undo it.
                if libc::prctl(
                    libc::PR_SET_SECUREBITS,
                    (libc::SECBIT_NOROOT | libc::SECBIT_NOROOT_LOCKED) as libc::c_ulong,
                ) != 0
                {
                    return Err(failed(Step::Securebits, std::io::Error::last_os_error()));
                }
            }
            rustix::thread::set_no_new_privs(true).map_err(|e| failed(Step::NoNewPrivs, e))?;
            if contain {
                // SAFETY: between fork and exec, after `unshare(CLONE_NEWPID)`; the init's step
                // only makes system calls (`OwnProc::mount`).
                acp_process::namespace::split_into_init(
                    || own_proc.as_ref().map_or(Ok(()), |own_proc| own_proc.mount()),
                    |error| failed(Step::Containment, error),
                )?;
            }
            if let Some(ruleset) = &ruleset
                && libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) != 0
            {
                return Err(failed(Step::Landlock, std::io::Error::last_os_error()));
            }
            Ok(())
        });
    }
    Ok(cgroup)
}

/// The rlimits of `confinement`'s run, as `setrlimit` takes them: the data size in bytes,
/// the CPU seconds (when `cpu`) and the process count.
fn rlimits(confinement: &Confinement, cpu: bool) -> (Option<u64>, Option<u64>, Option<u64>) {
    let limits = confinement.profile.limits;
    let memory = limits.memory_mb.map(|mb| mb.saturating_mul(1024 * 1024));
    let cpu_seconds = limits
        .cpu
        .filter(|_| cpu)
        .map(|cpu| cpu.as_millis().div_ceil(1000).max(1) as u64);
    // Counted in its own user namespace: the outer process and the init are there too.
    let processes = limits
        .processes
        .filter(|_| confinement.rlimits_processes())
        .map(|n| n.saturating_add(2));
    (memory, cpu_seconds, processes)
}

/// The namespaces the child of `confinement` unshares: a user and network namespace when
/// its network is cut off that way, a user and PID namespace when its processes are
/// contained.
fn namespaces(confinement: &Confinement) -> rustix::thread::UnshareFlags {
    let mut namespaces = rustix::thread::UnshareFlags::empty();
    if confinement.network == NetworkConfinement::Namespace {
        namespaces |= rustix::thread::UnshareFlags::NEWUSER | rustix::thread::UnshareFlags::NEWNET;
    }
    if confinement.contains_processes() {
        namespaces |= rustix::thread::UnshareFlags::NEWUSER | rustix::thread::UnshareFlags::NEWPID;
    }
    namespaces
}

/// A step of the confinement made between fork and exec: named in the error when it fails,
/// where the runtime would otherwise only get its `errno` (all the child can pass back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    MemoryLimit = 1,
    CpuLimit,
    Namespaces,
    Securebits,
    NoNewPrivs,
    Containment,
    OwnProc,
    ProcRule,
    Landlock,
    HideSockets,
    OwnRoot,
    ProcessLimit,
    Cgroup,
}

impl Step {
    const ALL: [Step; 13] = [
        Step::MemoryLimit,
        Step::CpuLimit,
        Step::Namespaces,
        Step::Securebits,
        Step::NoNewPrivs,
        Step::Containment,
        Step::OwnProc,
        Step::ProcRule,
        Step::Landlock,
        Step::HideSockets,
        Step::OwnRoot,
        Step::ProcessLimit,
        Step::Cgroup,
    ];

    fn doing(self) -> &'static str {
        match self {
            Step::MemoryLimit => "setting its memory limit (RLIMIT_DATA)",
            Step::CpuLimit => "setting its CPU time limit (RLIMIT_CPU)",
            Step::Namespaces => "creating its namespaces (user, network or PID)",
            Step::Securebits => "dropping root's capabilities in its namespaces (securebits)",
            Step::NoNewPrivs => "setting no_new_privs",
            Step::Containment => "starting its PID namespace's init",
            Step::OwnProc => "mounting its PID namespace's own /proc",
            Step::ProcRule => "adding its own /proc to its Landlock rules",
            Step::Landlock => "applying its Landlock rules",
            Step::HideSockets => "hiding the user's service sockets (runtime folder, X11, Docker) from it",
            Step::OwnRoot => "giving it a root of its own (its mounts and the system's folders, pivot_root)",
            Step::ProcessLimit => "setting its process limit (RLIMIT_NPROC)",
            Step::Cgroup => "joining its run's cgroup (its process and memory limits)",
        }
    }
}

/// Bits of a raw OS error that hold the step: an `errno` is below 4096.
const STEP_SHIFT: u32 = 16;

/// `error` of `step`, as an OS error that carries both (made without allocating: it runs
/// between fork and exec).
fn failed(step: Step, error: impl Into<std::io::Error>) -> std::io::Error {
    let errno = error.into().raw_os_error().unwrap_or(libc::EINVAL);
    std::io::Error::from_raw_os_error(((step as i32) << STEP_SHIFT) | (errno & ((1 << STEP_SHIFT) - 1)))
}

/// A failed start, with the step of the confinement that failed named (see [`failed`]);
/// any other error as it is.
pub(super) fn explain_spawn_error(error: std::io::Error) -> std::io::Error {
    let Some(code) = error.raw_os_error() else {
        return error;
    };
    let Some(step) = Step::ALL.into_iter().find(|step| *step as i32 == code >> STEP_SHIFT) else {
        return error;
    };
    let cause = std::io::Error::from_raw_os_error(code & ((1 << STEP_SHIFT) - 1));
    std::io::Error::new(cause.kind(), format!("{}: {cause}", step.doing()))
}

/// The namespace's own `/proc`: what the init needs to make it readable, and the service
/// sockets it hides in the same mount namespace.
#[derive(Debug)]
struct OwnProc {
    /// The program's Landlock ruleset, if files are confined.
    ruleset: Option<libc::c_int>,
    /// What a rule for `/proc` allows (reading, as for the runtime's).
    access: u64,
    /// Where the runtime's command line is in its memory (`start..end`): the init, a fork of
    /// the runtime, blanks its copy, which its `/proc/1/cmdline` would show.
    command_line: Option<(usize, usize)>,
    /// [`Confinement::hidden_sockets`], and whether each is a folder (else a socket).
    hide: Vec<(std::ffi::CString, bool)>,
    /// A root of its own ([`Confinement::has_own_root`]), which holds the namespace's
    /// `/proc`; else that `/proc` is mounted over the runtime's.
    root: Option<NewRoot>,
}

/// `struct landlock_path_beneath_attr` of `<linux/landlock.h>`.
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `LANDLOCK_RULE_PATH_BENEATH` of `<linux/landlock.h>`.
const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;

impl OwnProc {
    /// Planned before the fork: what the init needs to mount the namespace's `/proc` for
    /// `confinement` (`ruleset`: the program's Landlock rules, if files are confined; `keep`
    /// and `cwd`, as [`confine`] takes them).
    fn plan(confinement: &Confinement, ruleset: Option<&OwnedFd>, keep: &[PathBuf], cwd: Option<&Path>) -> OwnProc {
        OwnProc {
            ruleset: ruleset.map(AsRawFd::as_raw_fd),
            access: AccessFs::from_read(RULES_ABI).bits(),
            command_line: acp_process::namespace::command_line_span(),
            hide: (confinement.hidden_sockets_keeping(keep).into_iter())
                .filter_map(|place| {
                    let folder = place.is_dir();
                    Some((
                        std::ffi::CString::new(place.into_os_string().into_encoded_bytes()).ok()?,
                        folder,
                    ))
                })
                .collect(),
            root: confinement
                .has_own_root()
                .then(|| NewRoot::plan(&usable_paths(confinement), keep, cwd)),
        }
    }

    /// In the init, before it forks the program: blanks the runtime's command line, mounts
    /// the namespace's `/proc` ([`mount_own_proc`]) and adds it to the ruleset, readable. The
    /// rule for the runtime's `/proc` does not reach it: Landlock does not look through a
    /// mount to what it covers. (`hidepid=2` hides the init from a program of another group
    /// than root's; run as root, the program sees it, with nothing on its command line.)
    ///
    /// # Safety
    /// Only between fork and exec, in the namespace's init: system calls only.
    #[allow(unsafe_code)]
    unsafe fn mount(&self) -> std::io::Result<()> {
        // SAFETY: system calls on a descriptor opened here and a struct on this stack; the
        // command line is this process's own copy of the runtime's `argv` strings (in its
        // main stack, writable), which nothing reads after the fork.
        unsafe {
            if let Some((start, end)) = self.command_line {
                std::ptr::write_bytes(start as *mut u8, 0, end - start);
            }
            match &self.root {
                Some(root) => root
                    .enter()
                    .map_err(|errno| failed(Step::OwnRoot, std::io::Error::from_raw_os_error(errno)))?,
                None if !mount_own_proc(true) => {
                    return Err(failed(Step::OwnProc, std::io::Error::last_os_error()));
                }
                None => {}
            }
            // An empty folder over each folder of sockets, `/dev/null` over each socket.
            for (place, folder) in &self.hide {
                let hidden = if *folder {
                    libc::mount(
                        c"tmpfs".as_ptr(),
                        place.as_ptr(),
                        c"tmpfs".as_ptr(),
                        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                        c"size=4k,mode=555".as_ptr().cast(),
                    )
                } else {
                    libc::mount(
                        c"/dev/null".as_ptr(),
                        place.as_ptr(),
                        std::ptr::null(),
                        libc::MS_BIND,
                        std::ptr::null(),
                    )
                };
                // Gone since it was found: nothing left there to reach.
                if hidden != 0 && *libc::__errno_location() != libc::ENOENT {
                    return Err(failed(Step::HideSockets, std::io::Error::last_os_error()));
                }
            }
            let Some(ruleset) = self.ruleset else {
                return Ok(());
            };
            let proc = libc::open(c"/proc".as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
            if proc < 0 {
                return Err(failed(Step::ProcRule, std::io::Error::last_os_error()));
            }
            let rule = PathBeneathAttr {
                allowed_access: self.access,
                parent_fd: proc,
            };
            let added = libc::syscall(
                libc::SYS_landlock_add_rule,
                ruleset,
                LANDLOCK_RULE_PATH_BENEATH,
                std::ptr::addr_of!(rule),
                0u32,
            );
            let error = std::io::Error::last_os_error();
            libc::close(proc);
            if added != 0 {
                return Err(failed(Step::ProcRule, error));
            }
            Ok(())
        }
    }
}

/// The mounts and grants, and whether each is read-only, as bound into a root of its own
/// (a folder for Unix sockets read-only: connecting needs no write).
fn usable_paths(confinement: &Confinement) -> Vec<(PathBuf, bool)> {
    let granted = confinement
        .granted
        .iter()
        .map(|(path, grant)| (path.clone(), *grant != Grant::ReadWrite));
    confinement.paths.iter().cloned().chain(granted).collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A step that fails between fork and exec reaches the runtime through the only thing
    /// the child can pass back, an `errno`, and is named in the error the operator sees.
    #[test]
    #[allow(unsafe_code)]
    fn a_confinement_step_that_fails_is_named_in_the_error() {
        use std::os::unix::process::CommandExt;
        let mut command = std::process::Command::new("true");
        // SAFETY: between fork and exec the closure only builds an OS error (no allocation).
        unsafe {
            command.pre_exec(|| Err(failed(Step::OwnProc, rustix::io::Errno::PERM)));
        }
        let error = explain_spawn_error(command.spawn().expect_err("the step fails"));
        assert_eq!(error.kind(), std::io::ErrorKind::PermissionDenied);
        let message = error.to_string();
        assert!(
            message.starts_with("mounting its PID namespace's own /proc: ") && message.contains("(os error 1)"),
            "{message}"
        );
        // Any other failure to start is left as it is.
        let missing = std::process::Command::new("/nonexistent/program").spawn().unwrap_err();
        let message = missing.to_string();
        assert_eq!(explain_spawn_error(missing).to_string(), message);
        assert!(
            Step::ALL
                .iter()
                .enumerate()
                .all(|(index, step)| *step as usize == index + 1)
        );
    }

    /// A relative program is the file the child runs, from its own folder: not the one of
    /// the same name in the runtime's folder, and never a folder (which would be allowed to
    /// be read, all of it).
    #[test]
    fn a_relative_program_is_found_from_the_childs_folder_and_only_as_a_file() {
        let child = tempfile::tempdir().unwrap();
        std::fs::write(child.path().join("tool"), "#!/bin/sh\n").unwrap();
        std::fs::create_dir(child.path().join("keys")).unwrap();
        let found = resolve_program(Path::new("./tool"), Some(child.path()), None);
        assert_eq!(found, Some(child.path().join("./tool")));
        assert_eq!(resolve_program(Path::new("./keys"), Some(child.path()), None), None);
        let path = std::ffi::OsString::from("bin:/usr/bin");
        std::fs::create_dir(child.path().join("bin")).unwrap();
        std::fs::write(child.path().join("bin/tool"), "#!/bin/sh\n").unwrap();
        let found = resolve_program(Path::new("tool"), Some(child.path()), Some(&path));
        assert_eq!(found, Some(child.path().join("bin/tool")));
    }
}
