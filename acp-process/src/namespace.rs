//! A program as the first process but one of a PID namespace of its own (Linux): everything
//! it starts lives in that namespace, which the kernel empties (`SIGKILL`) when the
//! namespace's init ends, whatever process group or session a process moved to. Shared by
//! agentacp's sandbox (in a user namespace, with its other confinement) and by
//! [`contain_tree`] (nothing else changed where the caller is root; where it is not, in a user
//! namespace that maps its uid and gid to themselves).
//!
//! Between fork and exec, after `unshare(CLONE_NEWPID)` (with `CLONE_NEWUSER` where the
//! caller is not root), [`split_into_init`] splits the child the caller started into three:
//!
//! - **the outer process** (the caller's child, the leader of the process group the caller
//!   signals) waits and then ends as the program ended, with its exit code or by its signal.
//!   It ignores every signal it can (`SIGTERM` and the others the group gets are the
//!   program's to act on); `SIGKILL` ends it, and with it the namespace;
//! - **the init** (PID 1 inside) dies with the outer process (`PR_SET_PDEATHSIG`), reaps what
//!   is orphaned inside, and when the program ends passes its wait status to the outer
//!   process and exits, which ends every process left inside. It has no signal handler, so
//!   of the signals the caller sends the group only `SIGKILL` reaches it;
//! - **the program** (PID 2 inside) is exec'd as usual.
//!
//! The outer process and the init are forks of the caller that never exec: they hold a copy
//! of its memory (its environment among it), give back what they can of it, close every
//! descriptor (the program alone holds its stdio), and are made non-dumpable, so a program of
//! the same user cannot read them through `/proc` (their `environ`, `mem`) and they never
//! dump core.

use crate::TreeContainment;

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

/// Where this process's command line (its `argv` strings) is in its memory: fields 48 and 49
/// of `/proc/self/stat` (`arg_start`, `arg_end`), read once. An init, a fork of the caller,
/// blanks its copy, which its `/proc/1/cmdline` would show.
pub fn command_line_span() -> Option<(usize, usize)> {
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

/// In the first process of a PID namespace: enters a mount namespace of its own, whose
/// mounts no longer pass to the caller's (`MS_SLAVE`: the caller's still pass in), and mounts
/// the namespace's procfs over `/proc`; with `hide_others`, a process another may not inspect
/// (`ptrace` read access) is invisible to it there (`hidepid=2`). `false` where the kernel
/// refuses (some containers' `/proc` has parts masked).
///
/// # Safety
/// Only in a forked child: it changes the calling process's mount namespace. It makes
/// system calls only (async-signal-safe).
#[allow(unsafe_code)]
pub unsafe fn mount_own_proc(hide_others: bool) -> bool {
    let options = if hide_others { c"hidepid=2" } else { c"" };
    // SAFETY: system calls on constant C strings.
    unsafe {
        libc::unshare(libc::CLONE_NEWNS) == 0
            && libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_SLAVE,
                std::ptr::null(),
            ) == 0
            && libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                options.as_ptr().cast(),
            ) == 0
    }
}

/// Between fork and exec, after `unshare(CLONE_NEWPID)`: splits this child into the outer
/// process, the namespace's init and the program (see the module's docs). The init runs
/// `in_init` before it forks the program (e.g. [`mount_own_proc`]); its error, or
/// `failed(errno)` of a step here, fails the program's start. Returns only in the program,
/// which goes on to exec; the other two end in here.
///
/// # Safety
/// Only between fork and exec: it forks, and the processes that do not return only make
/// async-signal-safe system calls and `_exit`. `in_init` must make system calls only.
#[allow(unsafe_code)]
pub unsafe fn split_into_init(
    in_init: impl FnOnce() -> std::io::Result<()>,
    failed: fn(std::io::Error) -> std::io::Error,
) -> std::io::Result<()> {
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
            return Err(failed(std::io::Error::last_os_error()));
        }
        let [status_read, status_write] = status_pipe;
        // Unreadable through `/proc` by the program, which shares our user: we hold a copy
        // of the runtime's memory. The program's exec makes it dumpable again; the init
        // inherits this.
        if libc::prctl(libc::PR_SET_DUMPABLE, 0 as libc::c_ulong) != 0 {
            return Err(failed(std::io::Error::last_os_error()));
        }
        // What tells the init, should the outer process die before the init's
        // `PR_SET_PDEATHSIG` took effect, that it did (the init cannot ask for its parent:
        // that is outside its namespace).
        let outer = libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) as libc::c_int;
        let init = libc::fork();
        if init < 0 {
            return Err(failed(std::io::Error::last_os_error()));
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
        in_init()?;
        let program = libc::fork();
        if program < 0 {
            // Reported as the first fork's failure is (this init is the process whose
            // failure the runtime is told of), not as the program's exit 127.
            return Err(failed(std::io::Error::last_os_error()));
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
    // SAFETY: async-signal-safe system calls only (see `split_into_init`).
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
    // SAFETY: async-signal-safe system calls only (see `split_into_init`).
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

/// Whether [`contain_tree`] can start a program here ([`tree_containment`] says how).
pub fn tree_namespace() -> bool {
    tree_containment().is_some()
}

/// How [`contain_tree`] starts programs here, chosen once per process: in a PID namespace
/// alone where the caller may make one (it is root, with `CAP_SYS_ADMIN`); else, for a caller
/// that is not root, in a user namespace that maps its uid and gid to themselves with a PID
/// namespace in it, where the kernel lets it make them (`user.max_user_namespaces`, a
/// container's seccomp filter or AppArmor may not). Either way the namespace's init must be
/// able to mount its own `/proc`; each is tried by a child that does what a program's start
/// does and exits. `None` where neither works or [`CONTAIN_TREE_ENV`](crate::CONTAIN_TREE_ENV)
/// is `off`: logged once, saying why and what that leaves.
pub fn tree_containment() -> Option<TreeContainment> {
    static CHOSEN: std::sync::OnceLock<Option<TreeContainment>> = std::sync::OnceLock::new();
    *CHOSEN.get_or_init(|| choose_containment(std::env::var_os(crate::CONTAIN_TREE_ENV).as_deref()))
}

/// What follows when nothing contains an agent's tree, for the logs.
const UNCONTAINED: &str = "what an agent starts outside its process group outlives a runtime killed with SIGKILL";

/// [`tree_containment`], given the setting of [`CONTAIN_TREE_ENV`](crate::CONTAIN_TREE_ENV).
fn choose_containment(setting: Option<&std::ffi::OsStr>) -> Option<TreeContainment> {
    let variable = crate::CONTAIN_TREE_ENV;
    match containment_wanted(setting) {
        Ok(true) => {}
        Ok(false) => {
            tracing::info!("{variable} is off: agents do not run in namespaces of their own, so {UNCONTAINED}");
            return None;
        }
        Err(value) => {
            tracing::warn!("{variable} is \"{value}\", which is neither \"off\" nor \"auto\": taken as \"auto\"")
        }
    }
    if probe_tree_namespace(None) {
        return Some(TreeContainment::PidNamespace);
    }
    let maps = match IdMaps::of_caller() {
        Ok(maps) => maps,
        Err(why) => {
            tracing::info!("agents cannot run in a PID namespace of their own ({why}), so {UNCONTAINED}");
            return None;
        }
    };
    if probe_tree_namespace(Some(maps)) {
        tracing::debug!("agents run in a user and a PID namespace of their own, with this process's uid and gid");
        return Some(TreeContainment::UserNamespace);
    }
    tracing::info!(
        "agents cannot run in a user and PID namespace of their own (the kernel refused them or their own /proc: see user.max_user_namespaces, or a seccomp or AppArmor policy), so {UNCONTAINED}"
    );
    None
}

/// Whether the setting of [`CONTAIN_TREE_ENV`](crate::CONTAIN_TREE_ENV) asks for containment:
/// unset, empty or `auto` yes, `off` no (either in any case, spaces around ignored); any other
/// value is given back, to be reported.
fn containment_wanted(setting: Option<&std::ffi::OsStr>) -> Result<bool, String> {
    let Some(setting) = setting else { return Ok(true) };
    let value = setting.to_string_lossy();
    match value.trim().to_ascii_lowercase().as_str() {
        "" | "auto" => Ok(true),
        "off" => Ok(false),
        _ => Err(value.into_owned()),
    }
}

/// The caller's effective uid and gid, each mapped to itself, as a new user namespace's
/// `uid_map` and `gid_map` take them: prepared before the fork, so that writing them
/// ([`IdMaps::write`]) allocates nothing. Shared by [`contain_tree`] and agentacp's sandbox.
#[derive(Debug, Clone)]
pub struct IdMaps {
    uid: Vec<u8>,
    gid: Vec<u8>,
}

impl IdMaps {
    /// The caller's effective uid and gid (the only ones an unprivileged process may map),
    /// each mapped to itself.
    pub fn identity() -> IdMaps {
        let (uid, gid) = (rustix::process::geteuid().as_raw(), rustix::process::getegid().as_raw());
        IdMaps {
            uid: format!("{uid} {uid} 1\n").into_bytes(),
            gid: format!("{gid} {gid} 1\n").into_bytes(),
        }
    }

    /// [`IdMaps::identity`] for [`contain_tree`]; why not: for root (which gets a PID
    /// namespace alone, or nothing: mapped to itself it would keep every capability in the
    /// namespace), or where the real and effective ids differ (only the effective ones may be
    /// mapped; the real would show as `nobody`).
    fn of_caller() -> Result<IdMaps, &'static str> {
        use rustix::process::{getegid, geteuid, getgid, getuid};
        let (uid, gid) = (geteuid(), getegid());
        if uid.is_root() {
            return Err("the kernel refused one, or its own /proc, to this root process");
        }
        if getuid() != uid || getgid() != gid {
            return Err("this process's real and effective user or group differ");
        }
        Ok(IdMaps::identity())
    }

    /// Writes the maps for the user namespace this process has just entered
    /// (`unshare(CLONE_NEWUSER)`, between fork and exec): `uid_map`, then `setgroups` denied
    /// (as the kernel requires before an unprivileged process maps a group), then `gid_map`,
    /// of `/proc/self`, each in one `write`. All three are tried; the first error is returned.
    /// System calls only: nothing is allocated.
    pub fn write(&self) -> std::io::Result<()> {
        let written = [
            write_proc(c"/proc/self/uid_map", &self.uid),
            write_proc(c"/proc/self/setgroups", b"deny"),
            write_proc(c"/proc/self/gid_map", &self.gid),
        ];
        written.into_iter().find_map(Result::err).map_or(Ok(()), Err)
    }
}

/// Between fork and exec: makes the PID namespace the children of this process will be in
/// (their init first). With `maps`, inside a new user namespace that this process enters,
/// where its uid and gid are mapped to themselves: it keeps its ids, and holds every
/// capability over the new namespaces (its init needs them to mount `/proc`), which the
/// program's exec under a uid other than 0 drops. `setgroups` is denied there, as the kernel
/// requires before an unprivileged process maps a group: the supplementary groups stay (they
/// show as `nogroup`), and no process inside may drop them.
///
/// # Safety
/// Only between fork and exec: it changes the calling process's namespaces. System calls only.
#[allow(unsafe_code)]
unsafe fn enter_namespaces(maps: Option<&IdMaps>) -> std::io::Result<()> {
    let flags = match maps {
        Some(_) => libc::CLONE_NEWUSER | libc::CLONE_NEWPID,
        None => libc::CLONE_NEWPID,
    };
    // SAFETY: a system call on this process.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // Before the process is made non-dumpable: then its `/proc/self` files are root's.
    maps.map_or(Ok(()), IdMaps::write)
}

/// Writes `bytes` to the `/proc` file `file` in one `write` (as those files want them).
/// System calls only (it runs between fork and exec).
#[allow(unsafe_code)]
fn write_proc(file: &std::ffi::CStr, bytes: &[u8]) -> std::io::Result<()> {
    // SAFETY: `open`, `write` and `close` on a C string and a buffer we were given.
    unsafe {
        let fd = libc::open(file.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        let error = std::io::Error::last_os_error();
        libc::close(fd);
        match written == bytes.len() as isize {
            true => Ok(()),
            false if written < 0 => Err(error),
            false => Err(std::io::Error::from_raw_os_error(libc::EIO)),
        }
    }
}

/// Starts `command`'s program as the first process but one of a PID namespace of its own
/// (with the namespace's `/proc` mounted over `/proc`, in a mount namespace of its own), when
/// [`tree_containment`] says it can: then everything the program starts ends when the outer
/// process ends, also by `SIGKILL` — give that one a parent-death signal
/// ([`die_with_parent`]) and nothing of the tree outlives the caller.
///
/// Unchanged for the program: its uid, gid and supplementary groups, its environment,
/// folder and stdio as set on `command`. What it sees differently: its pid (2) and its
/// parent's (1), `/proc` showing only its namespace's processes, and mounts it makes no
/// longer reaching the caller's namespace. Where the caller is not root
/// ([`TreeContainment::UserNamespace`]) also: the owners of files other than the caller's uid
/// and gid (root's among them) and its supplementary groups show as `nobody` and `nogroup`
/// (what it may open is decided on the real ids, as before); it has no capabilities, and a
/// set-user-ID or set-group-ID program (`sudo`, `su`, `newuidmap`) runs without changing ids,
/// nor does a file capability (`setcap`) grant anything outside the namespace; it cannot call
/// `setgroups`. Whether it will run so (else `command` is unchanged).
pub fn contain_tree(command: &mut std::process::Command) -> bool {
    use std::os::unix::process::CommandExt;
    let maps = match tree_containment() {
        None => return false,
        Some(TreeContainment::PidNamespace) => None,
        Some(TreeContainment::UserNamespace) => match IdMaps::of_caller() {
            Ok(maps) => Some(maps),
            // The ids changed since the choice (`setuid` in the caller): not contained.
            Err(_) => return false,
        },
    };
    let command_line = command_line_span();
    // SAFETY: the closure runs in the child between fork and exec: system calls only
    // (`unshare`, the writes of the id maps, then those of `split_into_init`, and in the init
    // `mount_own_proc` and the blanking of its copy of our command line), on data prepared
    // here; it allocates nothing and takes no lock.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(move || {
            enter_namespaces(maps.as_ref())?;
            let in_init = || {
                if let Some((start, end)) = command_line {
                    std::ptr::write_bytes(start as *mut u8, 0, end - start);
                }
                match mount_own_proc(false) {
                    true => Ok(()),
                    false => Err(std::io::Error::last_os_error()),
                }
            };
            split_into_init(in_init, |error| error)
        });
    }
    true
}

/// Whether a child can enter a PID namespace of its own (in a user namespace with `maps`,
/// else alone), and its first process mount that namespace's `/proc` ([`mount_own_proc`]).
#[allow(unsafe_code)]
fn probe_tree_namespace(maps: Option<IdMaps>) -> bool {
    use std::os::unix::process::CommandExt;
    let mut probe = std::process::Command::new("/");
    probe
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: between fork and exec the closure makes system calls only and `_exit`s (the
    // forked init too): nothing is allocated or locked.
    unsafe {
        probe.pre_exec(move || {
            if enter_namespaces(maps.as_ref()).is_err() {
                libc::_exit(1);
            }
            let init = libc::fork();
            if init == 0 {
                libc::_exit(if mount_own_proc(false) { 0 } else { 1 });
            }
            if init < 0 {
                libc::_exit(1);
            }
            let status = reap(init);
            libc::_exit(if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                1
            })
        });
    }
    match probe.spawn() {
        Ok(mut child) => child.wait().is_ok_and(|status| status.success()),
        Err(_) => false,
    }
}

/// Makes `command`'s child get `SIGKILL` when the thread that started it ends (Linux
/// `PR_SET_PDEATHSIG`), also by `kill -9` of the caller; the start fails (`ESRCH`) should the
/// caller be gone before it took effect. It follows the *thread*: start children from
/// threads that live as long as the caller.
pub fn die_with_parent(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = rustix::process::getpid();
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: it makes two raw system calls (prctl, getppid)
    // through rustix, allocates nothing and takes no lock.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            // The parent may have died before the prctl: then nothing would ever signal us.
            // (`ESRCH`, "no such process": an error made without allocating, which a child
            // of a multi-threaded process must not do before exec.)
            if rustix::process::getppid() != Some(parent) {
                return Err(rustix::io::Errno::SRCH.into());
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The processes (not zombies) in the PID namespace `namespace` (`/proc/<pid>/ns/pid`).
    fn running_in(namespace: &std::path::Path) -> Vec<u32> {
        let Ok(folder) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        folder
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok().as_deref() == Some(namespace))
            .filter(|pid| {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                !stat
                    .rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X']))
            })
            .collect()
    }

    /// The pid a process `/proc` lists (`pid`) has in the innermost PID namespace it is in.
    fn inner_pid(pid: u32) -> Option<u32> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|line| line.starts_with("NSpid:"))?;
        line.split_whitespace().last()?.parse().ok()
    }

    /// Polls (at most `limit`) until `done`; whether it came.
    fn poll_until(limit: std::time::Duration, mut done: impl FnMut() -> bool) -> bool {
        let deadline = std::time::Instant::now() + limit;
        while !done() {
            if std::time::Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        true
    }

    /// Runs `sh` with [`contain_tree`]: it prints its pid, uid, gid, a variable set for it,
    /// its PID namespace and what `extra` (shell words) prints, then starts a `sleep` in a
    /// session of its own (`setsid`) and sleeps. Once that `sleep` runs, SIGKILLs the outer
    /// process (as a dying caller's death signal does) and asserts that nothing of the
    /// namespace is left. The line the program printed, the namespace left out.
    fn kill_a_contained_tree(extra: &str) -> String {
        let script = format!(
            "echo $$ $(id -u) $(id -g) $MARK $(readlink /proc/self/ns/pid) {extra}; setsid sleep 600 & exec sleep 600"
        );
        let mut command = std::process::Command::new("sh");
        command
            .args(["-c", &script])
            .env("MARK", "kept")
            .stdout(std::process::Stdio::piped());
        assert!(contain_tree(&mut command));
        let mut outer = command.spawn().unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(outer.stdout.take().unwrap()), &mut line).unwrap();
        let mut words: Vec<&str> = line.split_whitespace().collect();
        assert!(words.len() >= 5, "{line}");
        let namespace = std::path::PathBuf::from(words.remove(4));
        // The `setsid` sleep: neither the init (1) nor the program (2). Not the init either
        // where it cannot be seen: a caller that is not root may not read its `/proc` entries.
        let started = || running_in(&namespace).into_iter().any(|pid| inner_pid(pid) > Some(2));
        assert!(
            poll_until(std::time::Duration::from_secs(20), started),
            "{:?}",
            running_in(&namespace)
        );
        outer.kill().unwrap();
        outer.wait().unwrap();
        let emptied = || running_in(&namespace).is_empty();
        assert!(
            poll_until(std::time::Duration::from_secs(10), emptied),
            "left running: {:?}",
            running_in(&namespace)
        );
        words.join(" ")
    }

    /// Where the caller is root: a program run with `contain_tree` sees itself as PID 2, with
    /// the same uid and environment; when its outer process is SIGKILLed (as a dying caller's
    /// death signal does), what it started in another session (`setsid`) dies with it.
    #[test]
    fn a_contained_tree_keeps_the_uid_and_dies_whole_with_its_outer_process() {
        if tree_containment() != Some(TreeContainment::PidNamespace) {
            eprintln!("skipped: no PID namespace without a user namespace here (not root)");
            return;
        }
        let (uid, gid) = (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
        assert_eq!(kill_a_contained_tree(""), format!("2 {uid} {gid} kept"));
    }

    /// The uid and gid [`a_caller_that_is_not_root_contains_the_tree_in_a_user_namespace`]
    /// runs as when the tests run as root: not 65534, which an unmapped id shows as.
    const NOT_ROOT: u32 = 10044;

    /// Issue #44.10: where the caller is not root, `contain_tree` changed nothing, so what the
    /// program started in another session outlived a caller killed with SIGKILL. Now it runs
    /// in a user namespace of its own, with the caller's uid and gid, no capabilities, and
    /// root's files shown as `nobody`'s; its tree dies whole with its outer process. Run as
    /// root, the test runs itself again as [`NOT_ROOT`].
    #[test]
    fn a_caller_that_is_not_root_contains_the_tree_in_a_user_namespace() {
        use std::os::unix::process::CommandExt;
        if rustix::process::geteuid().is_root() {
            let output = std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "namespace::tests::a_caller_that_is_not_root_contains_the_tree_in_a_user_namespace",
                ])
                .args(["--nocapture", "--test-threads=1"])
                .env_remove(crate::CONTAIN_TREE_ENV)
                .uid(NOT_ROOT)
                .gid(NOT_ROOT)
                .output()
                .unwrap();
            let (stdout, stderr) = (
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr),
            );
            eprint!("{stderr}");
            assert!(
                output.status.success() && stdout.contains("1 passed"),
                "{stdout}{stderr}"
            );
            return;
        }
        // What tells a kernel that refuses unprivileged user namespaces (a sysctl, seccomp,
        // AppArmor) from a `contain_tree` that does not use them: util-linux's `unshare`.
        let kernel_allows = std::process::Command::new("unshare")
            .args([
                "--user",
                "--map-current-user",
                "--pid",
                "--fork",
                "--mount-proc",
                "true",
            ])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        let setting = std::env::var_os(crate::CONTAIN_TREE_ENV);
        if containment_wanted(setting.as_deref()) == Ok(false) {
            eprintln!("skipped: {} is off in this test run", crate::CONTAIN_TREE_ENV);
            return;
        }
        let chosen = tree_containment();
        if chosen != Some(TreeContainment::UserNamespace) && !kernel_allows {
            eprintln!(
                "skipped: this process (uid {}) may not make a user and PID namespace with its own /proc here (`unshare --user --pid --mount-proc` fails too)",
                rustix::process::geteuid().as_raw()
            );
            return;
        }
        assert_eq!(chosen, Some(TreeContainment::UserNamespace));
        let (uid, gid) = (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
        let capabilities = "$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status)";
        assert_eq!(
            kill_a_contained_tree(&format!("{capabilities} $(stat -c %u /)")),
            format!("2 {uid} {gid} kept 0000000000000000 65534")
        );
    }

    /// `AGENTACP_CONTAIN_TREE`: off, on, and a value that is neither (reported, taken as on).
    #[test]
    fn the_contain_tree_setting_is_off_auto_or_reported() {
        let wanted = |value: &str| containment_wanted(Some(std::ffi::OsStr::new(value)));
        assert_eq!(containment_wanted(None), Ok(true));
        assert_eq!(wanted(""), Ok(true));
        assert_eq!(wanted("auto"), Ok(true));
        assert_eq!(wanted(" OFF "), Ok(false));
        assert_eq!(wanted("no"), Err("no".to_string()));
        assert_eq!(choose_containment(Some(std::ffi::OsStr::new("off"))), None);
    }

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
