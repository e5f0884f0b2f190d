//! A program as the first process but one of a PID namespace of its own (Linux): everything
//! it starts lives in that namespace, which the kernel empties (`SIGKILL`) when the
//! namespace's init ends, whatever process group or session a process moved to. Shared by
//! agentacp's sandbox (in a user namespace, with its other confinement) and by
//! [`contain_tree`] (root only, nothing else changed).
//!
//! Between fork and exec, after `unshare(CLONE_NEWPID)`, [`split_into_init`] splits the
//! child the caller started into three:
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

/// Whether [`contain_tree`] can start a program here: the caller may make a PID namespace
/// without a user namespace (it is root, with `CAP_SYS_ADMIN`), and that namespace's init
/// may give it a `/proc` of its own. Probed once, by a child that does both and exits.
pub fn tree_namespace() -> bool {
    static PROBED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PROBED.get_or_init(probe_tree_namespace)
}

/// Starts `command`'s program as the first process but one of a PID namespace of its own
/// (with the namespace's `/proc` mounted over `/proc`, in a mount namespace of its own), when
/// [`tree_namespace`] says it can: then everything the program starts ends when the outer
/// process ends, also by `SIGKILL` — give that one a parent-death signal
/// ([`die_with_parent`]) and nothing of the tree outlives the caller.
/// Nothing else changes for the program: no user namespace (its uid, its groups and the
/// owners of files are as before), its environment, folder and stdio as set on `command`.
/// What it sees differently: its pid (2) and its parent's (1), `/proc` showing only its
/// namespace's processes, and mounts it makes no longer reaching the caller's namespace.
/// Whether it will run so (else `command` is unchanged).
pub fn contain_tree(command: &mut std::process::Command) -> bool {
    use std::os::unix::process::CommandExt;
    if !tree_namespace() {
        return false;
    }
    let command_line = command_line_span();
    // SAFETY: the closure runs in the child between fork and exec: system calls only
    // (`unshare`, then those of `split_into_init`, and in the init `mount_own_proc` and the
    // blanking of its copy of our command line), on data prepared here; it allocates nothing
    // and takes no lock.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(move || {
            if libc::unshare(libc::CLONE_NEWPID) != 0 {
                return Err(std::io::Error::last_os_error());
            }
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

/// Whether a child can enter a PID namespace of its own (no user namespace), and its first
/// process mount that namespace's `/proc` ([`mount_own_proc`]).
#[allow(unsafe_code)]
fn probe_tree_namespace() -> bool {
    use std::os::unix::process::CommandExt;
    let mut probe = std::process::Command::new("/");
    probe
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: between fork and exec the closure makes system calls only and `_exit`s (the
    // forked init too): nothing is allocated or locked.
    unsafe {
        probe.pre_exec(|| {
            if libc::unshare(libc::CLONE_NEWPID) != 0 {
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

    /// Where the caller is root: a program run with `contain_tree` sees itself as PID 2, with
    /// the same uid and environment; when its outer process is SIGKILLed (as a dying caller's
    /// death signal does), what it started in another session (`setsid`) dies with it.
    #[test]
    fn a_contained_tree_keeps_the_uid_and_dies_whole_with_its_outer_process() {
        if !tree_namespace() {
            eprintln!("skipped: no PID namespace without a user namespace here (not root)");
            return;
        }
        let mut command = std::process::Command::new("sh");
        command
            .args(["-c", "echo $$ $(id -u) $MARK; setsid sleep 600 & exec sleep 600"])
            .env("MARK", "kept")
            .stdout(std::process::Stdio::piped());
        assert!(contain_tree(&mut command));
        let mut outer = command.spawn().unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(outer.stdout.take().unwrap()), &mut line).unwrap();
        let uid = rustix::process::getuid().as_raw();
        assert_eq!(line.trim(), format!("2 {uid} kept"));
        let namespace = std::fs::read_link(format!("/proc/{}/ns/pid_for_children", outer.id())).unwrap();
        // The init, the program and the `setsid` sleep (polled: it may not have forked yet).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while running_in(&namespace).len() < 3 {
            assert!(std::time::Instant::now() < deadline, "{:?}", running_in(&namespace));
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        outer.kill().unwrap();
        outer.wait().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !running_in(&namespace).is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "left running: {:?}",
                running_in(&namespace)
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
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
