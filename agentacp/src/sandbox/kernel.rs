//! What this kernel can enforce, probed once per process: the Landlock ABI, and whether an
//! unprivileged process may enter a user namespace of its own with a network namespace, and
//! with a PID namespace.

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
}

impl KernelSupport {
    /// This kernel's support (probed the first time, then remembered).
    pub fn probe() -> KernelSupport {
        static PROBED: OnceLock<KernelSupport> = OnceLock::new();
        *PROBED.get_or_init(|| {
            let (network_namespace, pid_namespace) = namespaces();
            let support = KernelSupport {
                landlock_abi: landlock_abi(),
                network_namespace,
                pid_namespace,
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
    use std::os::unix::process::CommandExt;
    let mut probe = std::process::Command::new("/");
    probe
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: between fork and exec the closure makes the unshare system call and, when it
    // worked, `_exit`s: both async-signal-safe, nothing is allocated or locked.
    unsafe {
        probe.pre_exec(move || {
            rustix::thread::unshare_unsafe(flags)?;
            libc::_exit(0)
        });
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
