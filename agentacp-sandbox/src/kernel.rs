//! What this kernel can enforce, probed once per process: the Landlock ABI, and whether an
//! unprivileged process may enter a user namespace of its own with a network namespace, and
//! with a PID namespace whose `/proc` it can mount; and which cgroups this process may make
//! for a run ([`acp_process::cgroup::probe`]).

use std::sync::OnceLock;

/// The confinement mechanisms this kernel offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelSupport {
    /// The Landlock ABI version (0: no Landlock). 1 confines the file system, 4 adds TCP,
    /// 6 adds signal scoping.
    pub landlock_abi: u32,
    /// Whether a confined program can be given a network namespace of its own (an
    /// unprivileged user namespace with `CLONE_NEWNET`): no network at all, loopback included.
    pub network_namespace: bool,
    /// Whether a confined program can be given a PID namespace of its own (in an
    /// unprivileged user namespace): every process it starts ends with it, also one that
    /// left its process group (`setsid`, a double fork).
    pub pid_namespace: bool,
    /// Whether that PID namespace can have a `/proc` of its own (a mount namespace of its
    /// own, with the namespace's procfs mounted over `/proc`), so a program sees its own
    /// processes there and no others. Some containers refuse it (their `/proc` has parts
    /// masked); the runtime's `/proc` stays then.
    pub own_proc: bool,
    /// Whether, in that mount namespace, a program can get a root of its own that holds only
    /// its mounts and what it needs to run (`pivot_root` to a tmpfs with read-only binds of
    /// the system's folders): then nothing outside its mounts exists for it by path, so
    /// neither can it change files there in ways Landlock does not confine (`chmod`,
    /// `utime`, `setxattr`, `chown`) nor reach a pathname Unix socket there.
    pub own_root: bool,
    /// What a cgroup of each run's own can limit here ([`acp_process::cgroup`]): its
    /// processes (`pids`) and the memory of all of them together, shared memory included.
    pub cgroup: acp_process::cgroup::Available,
}

impl KernelSupport {
    /// This kernel's support (probed the first time, then remembered).
    pub fn probe() -> KernelSupport {
        static PROBED: OnceLock<KernelSupport> = OnceLock::new();
        *PROBED.get_or_init(|| {
            let (network_namespace, pid_namespace) = namespaces();
            let own_proc = pid_namespace && may_mount_own_proc();
            let support = KernelSupport {
                landlock_abi: landlock_abi(),
                network_namespace,
                pid_namespace,
                own_proc,
                own_root: own_proc && may_have_own_root(),
                cgroup: acp_process::cgroup::probe().available(),
            };
            tracing::debug!(?support, "sandbox support of this kernel");
            support
        })
    }

    /// No mechanism at all (another OS, or a kernel without them).
    pub const NONE: KernelSupport = KernelSupport {
        landlock_abi: 0,
        network_namespace: false,
        pid_namespace: false,
        own_proc: false,
        own_root: false,
        cgroup: acp_process::cgroup::Available::NONE,
    };
}

/// `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`: the ABI version, or 0.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn landlock_abi() -> u32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute pointer and size 0, the call only reads its flags and
    // returns the ABI version (or -1 with errno): no memory is passed.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(abi).unwrap_or(0)
}

#[cfg(not(target_os = "linux"))]
fn landlock_abi() -> u32 {
    0
}

#[cfg(target_os = "linux")]
use rustix::thread::UnshareFlags;

/// Tries what a confined program's start does: a child (forked, never exec'd) enters the
/// namespaces `flags` name and exits 0; any failure means no.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn may_unshare(flags: UnshareFlags) -> bool {
    // SAFETY: `unshare` is a system call, and `_exit` ends the child.
    probe(move || unsafe {
        rustix::thread::unshare_unsafe(flags)?;
        libc::_exit(0)
    })
}

/// Tries what a confined program's init does: a child enters a user and a PID namespace, and
/// its child (the namespace's first process) mounts its own `/proc`
/// ([`acp_process::namespace::mount_own_proc`], `hidepid=2`); any failure means no.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn may_mount_own_proc() -> bool {
    // SAFETY: `mount_own_proc` runs in the forked init.
    in_namespace_init(|| unsafe { acp_process::namespace::mount_own_proc(true) })
}

/// Tries what a confined program's init does to give it a root of its own (with the system's
/// folders only); any failure means no.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn may_have_own_root() -> bool {
    let root = super::root::NewRoot::plan(&[], &[], Some(std::path::Path::new("/")));
    // SAFETY: `enter` runs in the forked init, on what was prepared here.
    in_namespace_init(move || unsafe { root.enter().is_ok() })
}

/// Runs `init` as the first process of a PID namespace, in a user namespace that maps this
/// process's user and group to themselves (as a confined program's does): whether it
/// returned true.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn in_namespace_init(init: impl Fn() -> bool + Send + Sync + 'static) -> bool {
    let id_maps = acp_process::namespace::IdMaps::identity();
    // SAFETY: system calls only; the forked process and this one end with `_exit`.
    probe(move || unsafe {
        rustix::thread::unshare_unsafe(UnshareFlags::NEWUSER | UnshareFlags::NEWPID)?;
        let _ = id_maps.write();
        let child = libc::fork();
        if child == 0 {
            libc::_exit(if init() { 0 } else { 1 });
        }
        if child < 0 {
            libc::_exit(1);
        }
        let mut status = 1;
        let reaped = loop {
            let reaped = libc::waitpid(child, &mut status, 0);
            if reaped >= 0 || *libc::__errno_location() != libc::EINTR {
                break reaped;
            }
        };
        if reaped != child {
            libc::_exit(1);
        }
        libc::_exit(if libc::WIFEXITED(status) {
            libc::WEXITSTATUS(status)
        } else {
            1
        })
    })
}

/// Runs `child` in a forked child (between fork and exec, where it must `_exit`): whether it
/// exited 0.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn probe(child: impl FnMut() -> std::io::Result<()> + Send + Sync + 'static) -> bool {
    use std::os::unix::process::CommandExt;
    let mut probe = std::process::Command::new("/");
    probe
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: `child` makes system calls only, and `_exit`s: async-signal-safe, nothing is
    // allocated or locked.
    unsafe {
        probe.pre_exec(child);
    }
    match probe.spawn() {
        Ok(mut child) => child.wait().is_ok_and(|status| status.success()),
        Err(_) => false,
    }
}

/// Whether a confined program can get a network namespace, and a PID namespace.
#[cfg(target_os = "linux")]
fn namespaces() -> (bool, bool) {
    (
        may_unshare(UnshareFlags::NEWUSER | UnshareFlags::NEWNET),
        may_unshare(UnshareFlags::NEWUSER | UnshareFlags::NEWPID),
    )
}

#[cfg(not(target_os = "linux"))]
fn namespaces() -> (bool, bool) {
    (false, false)
}

#[cfg(not(target_os = "linux"))]
fn may_mount_own_proc() -> bool {
    false
}

#[cfg(not(target_os = "linux"))]
fn may_have_own_root() -> bool {
    false
}
