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
//! The outer process and the init are forks of the runtime that never exec: they hold a copy
//! of its memory (its environment among it). They are made non-dumpable, so the program, of
//! the same user, cannot read them through `/proc` (their `environ`, `mem`), and they never
//! dump core. They are outside the program's Landlock domain, which also keeps it from
//! signalling them (Landlock ABI ≥ 6).

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
    path_beneath_rules,
};
use rustix::process::{Resource, Rlimit};

use super::kernel::mount_own_proc;
use super::plan::{Confinement, Grant, LANDLOCK_TCP_ABI, NetworkConfinement};
use super::root::NewRoot;

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
    pub(crate) fn apply(
        &self,
        command: &mut tokio::process::Command,
        (program, cwd): (&Path, Option<&Path>),
        child_path: Option<&std::ffi::OsStr>,
        cpu: bool,
    ) -> std::io::Result<()> {
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

/// Confines the child that `command` will start: rlimits, a network namespace, Landlock, a
/// PID namespace, a root of its own.
fn confine(
    confinement: &Confinement,
    command: &mut tokio::process::Command,
    (program, keep, cwd): (Option<&Path>, &[PathBuf], Option<&Path>),
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
    // Counted in its own user namespace: the outer process and the init are there too.
    let processes = limits
        .processes
        .filter(|_| confinement.limits_processes())
        .map(|n| n.saturating_add(2));
    let network = confinement.network == NetworkConfinement::Namespace;
    let contain = confinement.contains_processes();
    // The namespace's own `/proc`, and the rule that makes it readable as the runtime's was.
    let own_proc = confinement.has_own_proc().then(|| OwnProc {
        ruleset: ruleset.as_ref().map(AsRawFd::as_raw_fd),
        access: AccessFs::from_read(RULES_ABI).bits(),
        command_line: command_line_span(),
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
    });
    let mut namespaces = rustix::thread::UnshareFlags::empty();
    if network {
        namespaces |= rustix::thread::UnshareFlags::NEWUSER | rustix::thread::UnshareFlags::NEWNET;
    }
    if contain {
        namespaces |= rustix::thread::UnshareFlags::NEWUSER | rustix::thread::UnshareFlags::NEWPID;
    }
    let (uid, gid) = (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
    let uid_map = format!("{uid} {uid} 1\n").into_bytes();
    let gid_map = format!("{gid} {gid} 1\n").into_bytes();

    // SAFETY: the closure runs in the child between fork and exec. It only makes system calls
    // (setrlimit, unshare, open/write/close of /proc/self files, prctl, landlock_restrict_self,
    // and those of `contain_processes`: fork, pipe2, pidfd_open, poll, unshare, mount, open,
    // landlock_add_rule, close, waitpid, read, write, madvise) on data prepared above; it
    // allocates nothing and takes no lock. Landlock comes last: a process it restricts may no longer mount, and
    // the init mounts the namespace's `/proc`.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(move || {
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
                let _ = write_proc(c"/proc/self/uid_map", &uid_map);
                let _ = write_proc(c"/proc/self/setgroups", b"deny");
                let _ = write_proc(c"/proc/self/gid_map", &gid_map);
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
                contain_processes(own_proc.as_ref())?;
            }
            if let Some(ruleset) = &ruleset
                && libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), 0u32) != 0
            {
                return Err(failed(Step::Landlock, std::io::Error::last_os_error()));
            }
            Ok(())
        });
    }
    Ok(())
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
}

impl Step {
    const ALL: [Step; 12] = [
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

/// The signals the outer process does not ignore: those it cannot, those of its own faults,
/// and its children's ends.
const NOT_IGNORED: [libc::c_int; 9] = [
    libc::SIGKILL,
    libc::SIGSTOP,
    libc::SIGCHLD,
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTRAP,
    libc::SIGSYS,
];

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

/// Where this process's command line (its `argv` strings) is in its memory: fields 48 and 49
/// of `/proc/self/stat` (`arg_start`, `arg_end`), read once.
fn command_line_span() -> Option<(usize, usize)> {
    static SPAN: std::sync::OnceLock<Option<(usize, usize)>> = std::sync::OnceLock::new();
    *SPAN.get_or_init(|| {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // After the command name (in parentheses, which it may contain) comes field 3.
        let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace().skip(48 - 3);
        let start: usize = fields.next()?.parse().ok()?;
        let end: usize = fields.next()?.parse().ok()?;
        (start < end).then_some((start, end))
    })
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
                None if !mount_own_proc() => {
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

/// Between fork and exec, after `unshare(CLONE_NEWPID)`: splits this child into the outer
/// process, the namespace's init and the program (see the module's docs); with `own_proc`,
/// the init first gives the namespace its own `/proc`. Returns only in the program, which
/// goes on to exec; the other two end in here.
///
/// # Safety
/// Only between fork and exec: it forks, and the processes that do not return only make
/// async-signal-safe system calls and `_exit`.
#[allow(unsafe_code)]
unsafe fn contain_processes(own_proc: Option<&OwnProc>) -> std::io::Result<()> {
    // SAFETY (for the block): raw system calls on this process's own descriptors and
    // children, in a process that is single-threaded (forked) and never returns to Rust code
    // but in the program's branch.
    unsafe {
        // The runtime's signal handlers (tokio's, for SIGCHLD or SIGTERM) would run in the
        // outer process and the init, which give the runtime's memory back and so cannot run
        // them: back to the default. The program's exec resets handlers anyway.
        for signal in 1..=64 {
            let mut current = std::mem::zeroed::<libc::sigaction>();
            if libc::sigaction(signal, std::ptr::null(), &mut current) == 0
                && current.sa_sigaction != libc::SIG_DFL
                && current.sa_sigaction != libc::SIG_IGN
            {
                libc::signal(signal, libc::SIG_DFL);
            }
        }
        // The program's wait status, from the init to the outer process.
        let mut status_pipe = [0; 2];
        if libc::pipe2(status_pipe.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(failed(Step::Containment, std::io::Error::last_os_error()));
        }
        let [status_read, status_write] = status_pipe;
        // Unreadable through `/proc` by the program, which shares our user: we hold a copy
        // of the runtime's memory. The program's exec makes it dumpable again; the init
        // inherits this.
        if libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong) != 0 {
            return Err(failed(Step::Containment, std::io::Error::last_os_error()));
        }
        // What tells the init, should the outer process die before the init's
        // `PR_SET_PDEATHSIG` took effect, that it did (the init cannot ask for its parent:
        // that is outside its namespace).
        let outer = libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) as libc::c_int;
        let init = libc::fork();
        if init < 0 {
            return Err(failed(Step::Containment, std::io::Error::last_os_error()));
        }
        if init > 0 {
            outer_process(init, status_read);
        }
        libc::close(status_read);
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
        if outer >= 0 {
            let mut gone = libc::pollfd {
                fd: outer,
                events: libc::POLLIN,
                revents: 0,
            };
            if libc::poll(&mut gone, 1, 0) > 0 {
                libc::_exit(1);
            }
            libc::close(outer);
        }
        // A failure here fails the program's start (the runtime is told through the pipe
        // that reports a failed exec), rather than running it with less than reported.
        if let Some(own_proc) = own_proc {
            own_proc.mount()?;
        }
        let program = libc::fork();
        if program < 0 {
            // Reported as the first fork's failure is (this init is the process whose
            // failure the runtime is told of), not as the program's exit 127.
            return Err(failed(Step::Containment, std::io::Error::last_os_error()));
        }
        if program > 0 {
            namespace_init(program, status_write);
        }
        libc::close(status_write);
        Ok(())
    }
}

/// The outer process: waits for the init's report of the program's end, then ends the same
/// way (by the same signal, or with the same exit code).
#[allow(unsafe_code)]
unsafe fn outer_process(init: libc::pid_t, status_read: libc::c_int) -> ! {
    // SAFETY: async-signal-safe system calls only (see `contain_processes`).
    unsafe {
        // Up to the last real-time signal; an invalid number is refused, which is harmless.
        for signal in (1..=64).filter(|signal| !NOT_IGNORED.contains(signal)) {
            libc::signal(signal, libc::SIG_IGN);
        }
        close_all_but(status_read);
        release_runtime_memory();
        let mut report = [0u8; 4];
        let mut read = 0;
        while read < report.len() {
            let got = libc::read(status_read, report[read..].as_mut_ptr().cast(), report.len() - read);
            if got > 0 {
                read += got as usize;
            } else if got == 0 || *libc::__errno_location() != libc::EINTR {
                break;
            }
        }
        let init_status = reap(init);
        // No report: the init was killed (with the namespace); end as it did.
        let status = if read == report.len() {
            libc::c_int::from_ne_bytes(report)
        } else {
            init_status
        };
        end_as(status)
    }
}

/// The namespace's init: reaps every process orphaned inside until the program ends, then
/// reports its wait status and exits, which ends whatever is left inside.
#[allow(unsafe_code)]
unsafe fn namespace_init(program: libc::pid_t, status_write: libc::c_int) -> ! {
    // SAFETY: async-signal-safe system calls only (see `contain_processes`).
    unsafe {
        close_all_but(status_write);
        release_runtime_memory();
        let mut status = 0;
        loop {
            let reaped = libc::waitpid(-1, &mut status, 0);
            if reaped == program {
                break;
            }
            if reaped < 0 && *libc::__errno_location() != libc::EINTR {
                // No children left, yet the program was never reaped: cannot happen; report a
                // failure rather than wait forever.
                status = 127 << 8;
                break;
            }
        }
        let bytes = status.to_ne_bytes();
        libc::write(status_write, bytes.as_ptr().cast(), bytes.len());
        libc::_exit(0)
    }
}

/// Gives back this process's hold on the runtime's anonymous memory (its heap, the other
/// threads' stacks, its buffers), all but the mappings this thread runs on (its stack, its
/// thread block and TLS): a fork of the runtime that never execs would otherwise keep a copy of
/// every page the runtime changes after the fork. Nothing here reads that memory again (what
/// runs after this uses the stack and system calls). Where `/proc/self/maps` cannot be read,
/// nothing is given back.
#[allow(unsafe_code)]
unsafe fn release_runtime_memory() {
    let on_the_stack = 0u8;
    // SAFETY: `pthread_self` reads the thread pointer; `open`, `read`, `madvise` and `close`
    // are system calls on this process, on buffers of this stack frame.
    unsafe {
        let keep = [
            std::ptr::addr_of!(on_the_stack) as usize,
            // The thread's descriptor, in the mapping that holds its TLS (`errno` among it).
            libc::pthread_self() as usize,
        ];
        let fd = libc::open(c"/proc/self/maps".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return;
        }
        let mut chunk = [0u8; 4096];
        let mut line = [0u8; 256];
        let mut length = 0;
        loop {
            let got = libc::read(fd, chunk.as_mut_ptr().cast(), chunk.len());
            if got < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            }
            if got <= 0 {
                break;
            }
            for &byte in &chunk[..got as usize] {
                if byte != b'\n' {
                    // A longer line only has a longer path: a file's, not memory to give back.
                    if length < line.len() {
                        line[length] = byte;
                        length += 1;
                    }
                    continue;
                }
                if let Some((start, end)) = releasable(&line[..length])
                    && !keep.iter().any(|address| (start..end).contains(address))
                {
                    libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
                }
                length = 0;
            }
        }
        libc::close(fd);
    }
}

/// The address range of a `/proc/<pid>/maps` line that names private, writable, anonymous
/// memory (no file behind it, or the heap).
fn releasable(line: &[u8]) -> Option<(usize, usize)> {
    let mut fields = line.split(|byte| *byte == b' ').filter(|field| !field.is_empty());
    let (range, mode) = (fields.next()?, fields.next()?);
    let (_offset, _device, inode) = (fields.next()?, fields.next()?, fields.next()?);
    let path = fields.next().unwrap_or_default();
    let private_writable = mode.len() == 4 && mode[0] == b'r' && mode[1] == b'w' && mode[3] == b'p';
    if !private_writable || inode != b"0" || !(path.is_empty() || path == b"[heap]") {
        return None;
    }
    let dash = range.iter().position(|byte| *byte == b'-')?;
    Some((hex(&range[..dash])?, hex(&range[dash + 1..])?))
}

/// A hexadecimal number, without allocating.
fn hex(digits: &[u8]) -> Option<usize> {
    digits.iter().try_fold(0usize, |number, digit| {
        let value = char::from(*digit).to_digit(16)?;
        number.checked_mul(16)?.checked_add(value as usize)
    })
}

/// Closes every descriptor but `keep`: with `close_range` (Linux 5.9), else those
/// `/proc/self/fd` lists, else one by one up to the descriptor limit. None may stay open: one
/// of them is the pipe through which the runtime's `spawn` learns that the program was
/// exec'd, which it reads to its end.
#[allow(unsafe_code)]
unsafe fn close_all_but(keep: libc::c_int) {
    // SAFETY: `close_range`, `getrlimit` and `close` only act on this process.
    unsafe {
        let below = keep <= 0 || libc::syscall(libc::SYS_close_range, 0u32, (keep - 1) as u32, 0u32) == 0;
        let above = libc::syscall(libc::SYS_close_range, (keep + 1) as u32, u32::MAX, 0u32) == 0;
        if (below && above) || close_listed_but(keep) {
            return;
        }
        let mut limit = std::mem::zeroed::<libc::rlimit>();
        let last = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur.min(1 << 20) as libc::c_int
        } else {
            1 << 16
        };
        for fd in (0..last).filter(|fd| *fd != keep) {
            libc::close(fd);
        }
    }
}

/// Closes every descriptor `/proc/self/fd` lists but `keep`, listing again until none is
/// left (a listing read while closing may skip some); false when it cannot be listed.
#[allow(unsafe_code)]
unsafe fn close_listed_but(keep: libc::c_int) -> bool {
    // SAFETY: `open`, `getdents64`, `lseek` and `close` on this process's descriptors, into a
    // buffer of this stack frame, read within the lengths the kernel gave.
    unsafe {
        let listing = libc::open(
            c"/proc/self/fd".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        );
        if listing < 0 {
            return false;
        }
        let mut entries = [0u8; 4096];
        loop {
            let mut closed = false;
            libc::lseek(listing, 0, libc::SEEK_SET);
            loop {
                let got = libc::syscall(libc::SYS_getdents64, listing, entries.as_mut_ptr(), entries.len());
                if got <= 0 {
                    break;
                }
                // Each entry: inode (8 bytes), offset (8), its length (2), type (1), name.
                let mut at = 0;
                while at + 19 < got as usize {
                    let length = usize::from(u16::from_ne_bytes([entries[at + 16], entries[at + 17]]));
                    if length == 0 {
                        break;
                    }
                    let name = &entries[at + 19..(at + length).min(got as usize)];
                    let digits = name.split(|byte| *byte == 0).next().unwrap_or_default();
                    let fd = digits.iter().try_fold(0 as libc::c_int, |fd, digit| {
                        let digit = char::from(*digit).to_digit(10)?;
                        fd.checked_mul(10)?.checked_add(digit as libc::c_int)
                    });
                    if let Some(fd) = fd.filter(|fd| !digits.is_empty() && *fd != keep && *fd != listing) {
                        libc::close(fd);
                        closed = true;
                    }
                    at += length;
                }
            }
            if !closed {
                break;
            }
        }
        libc::close(listing);
        true
    }
}

/// Waits for `child`; its wait status.
#[allow(unsafe_code)]
unsafe fn reap(child: libc::pid_t) -> libc::c_int {
    let mut status = 0;
    // SAFETY: `waitpid` on our own child.
    unsafe { while libc::waitpid(child, &mut status, 0) < 0 && *libc::__errno_location() == libc::EINTR {} }
    status
}

/// Ends this process as the wait status `status` says a process ended: by its signal
/// (default action restored, unblocked, raised), else with its exit code.
#[allow(unsafe_code)]
unsafe fn end_as(status: libc::c_int) -> ! {
    // SAFETY: async-signal-safe system calls only.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            libc::signal(signal, libc::SIG_DFL);
            let mut set = std::mem::zeroed::<libc::sigset_t>();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, signal);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            1
        })
    }
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

    /// The fallback where `close_range` is missing: a child closes what `/proc/self/fd`
    /// lists but stdout, then lists its descriptors with `ls`.
    #[test]
    #[allow(unsafe_code)]
    fn what_proc_self_fd_lists_is_closed_but_the_one_kept() {
        use std::os::unix::process::CommandExt;
        // A descriptor that would be inherited (no close-on-exec), at a free number of its own.
        let file = std::fs::File::open("/proc/self/status").unwrap();
        // SAFETY: `F_DUPFD` takes the lowest free number from 900 on; closed below.
        let inherited = unsafe { libc::fcntl(std::os::fd::AsRawFd::as_raw_fd(&file), libc::F_DUPFD, 900) };
        assert!(inherited >= 900, "{}", std::io::Error::last_os_error());
        let mut command = std::process::Command::new("ls");
        command.arg("/proc/self/fd");
        // SAFETY: between fork and exec the closure only makes system calls.
        unsafe {
            command.pre_exec(|| match close_listed_but(1) {
                true => Ok(()),
                false => Err(std::io::Error::from_raw_os_error(libc::ENOENT)),
            });
        }
        let output = command.output().unwrap();
        // SAFETY: the descriptor `dup2` made above.
        unsafe { libc::close(inherited) };
        let listed: Vec<String> = String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        assert!(listed.contains(&"1".to_string()), "{listed:?}");
        assert!(
            !listed.contains(&"57".to_string()) && !listed.contains(&"2".to_string()),
            "{listed:?}"
        );
    }

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

    #[test]
    fn only_private_writable_anonymous_memory_is_given_back() {
        let range = Some((0x7f00_0000_0000, 0x7f00_0002_1000));
        assert_eq!(releasable(b"7f0000000000-7f0000021000 rw-p 00000000 00:00 0 "), range);
        assert_eq!(
            releasable(b"7f0000000000-7f0000021000 rw-p 00000000 00:00 0      [heap]"),
            range
        );
        // A file's pages, read-only or shared memory, the main stack, the vDSO: kept.
        assert_eq!(
            releasable(b"7f0000000000-7f0000021000 rw-p 00002000 08:01 1234 /usr/lib/libc.so.6"),
            None
        );
        assert_eq!(releasable(b"7f0000000000-7f0000021000 r--p 00000000 00:00 0 "), None);
        assert_eq!(
            releasable(b"7f0000000000-7f0000021000 rw-s 00000000 00:01 99 /dev/zero (deleted)"),
            None
        );
        assert_eq!(
            releasable(b"7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0 [stack]"),
            None
        );
        assert_eq!(
            releasable(b"7ffc00000000-7ffc00002000 r-xp 00000000 00:00 0 [vdso]"),
            None
        );
        assert_eq!(releasable(b"not a line"), None);
    }
}
