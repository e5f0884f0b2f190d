//! The local sandbox (AIP-36 `provider: local`): what SANDBOX.md declares, enforced on the
//! programs [agentacp](https://docs.rs/agentacp)'s runtime starts for a sandboxed operator — its
//! own commands (`Turn::sandbox_command`) and the session's stdio MCP servers — and on any
//! program run with [`Confinement::command`].
//!
//! - **Files**: Landlock confines a program to the declared mounts (read-write or read-only)
//!   plus the system's folders, read-only (`/usr`, `/bin`, `/lib*`, `/etc`, `/proc`, `/sys`),
//!   a few devices (`/dev/null`, `/dev/zero`, `/dev/random`, `/dev/urandom`; not `/dev/tty`) and
//!   the program's own file. Where the kernel gives it a mount namespace, the program's root
//!   holds only these (`root.rs`): nothing else exists for it, so what Landlock does not
//!   confine (`chmod`, `utime`, `setxattr`, `chown`, pathname Unix sockets before ABI 9)
//!   cannot reach anything else either. The runtime's state folder and audit log must be
//!   outside the writable mounts.
//! - **Limits**: `timeout_ms` is a timer (the process group is killed), `memory_mb` is
//!   `RLIMIT_DATA` (what the heap and private mappings may grow to), `cpu_ms` is
//!   `RLIMIT_CPU` (whole seconds, rounded up); `metadata.agentacp.processes` is
//!   `RLIMIT_NPROC` in the program's own user namespace. Where the runtime may make cgroups
//!   ([`acp_process::cgroup`]), each run gets one of its own too: `pids.max` for the
//!   processes (root's too), and a memory limit for all its processes together that counts
//!   shared memory and tmpfs files, which no rlimit does.
//! - **Environment**: cleared; only `env.passthrough` comes from the runtime's.
//! - **Network**: with no `egress`, a network namespace of its own (nothing but a loopback
//!   that is down), else Landlock's TCP rules (TCP only). A host allow-list cannot be
//!   enforced locally.
//!
//! [`Confinement::plan`] decides, once at start-up, what this kernel can enforce of the
//! profile ([`KernelSupport`]). What it cannot is a *gap*: the server refuses to start unless
//! the profile says `metadata.agentacp.enforcement: best-effort`, and then reports the gaps
//! (in `initialize`'s `_meta.aip44.sandbox_enforcement` and the log). Never a silent run
//! outside the declared sandbox.
//!
//! The confinement is feature `enforce` (default; agentacp's feature `sandbox`). Every
//! `unsafe` block of agentacp is here or in [`acp_process::namespace`]: the system calls
//! between fork and exec that no safe crate wraps, each item with `#[allow(unsafe_code)]` and
//! a SAFETY comment.

mod command;
#[cfg(all(target_os = "linux", feature = "enforce"))]
mod confine;
mod kernel;
mod plan;
mod profile;
#[cfg(target_os = "linux")]
mod root;

#[cfg(not(all(target_os = "linux", feature = "enforce")))]
use std::path::Path;

pub use command::{LimitExceeded, SandboxCommand, SandboxError, SandboxOutput, die_with_parent, explain_spawn_error};
pub use kernel::KernelSupport;
pub use plan::{Confinement, Grant, NetworkConfinement};
pub use profile::{Limits, Mount, MountSource, SandboxProfile};

/// Elsewhere than Linux, or without feature `enforce`, there is nothing to apply: the plan
/// reported every gap, and only a best-effort profile gets this far.
#[cfg(not(all(target_os = "linux", feature = "enforce")))]
impl Confinement {
    /// Does nothing here (see the Linux build with feature `enforce`).
    pub fn apply(
        &self,
        _command: &mut tokio::process::Command,
        _program: (&Path, Option<&Path>),
        _child_path: Option<&std::ffi::OsStr>,
        _cpu: bool,
    ) -> std::io::Result<Option<acp_process::cgroup::RunCgroup>> {
        Ok(None)
    }
}
