//! The local sandbox (AIP-36 `provider: local`): what SANDBOX.md declares, enforced on the
//! programs the runtime starts for a sandboxed operator — its own commands
//! (`Turn::sandbox_command` (server)) and the session's stdio MCP servers.
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
//!   `RLIMIT_NPROC` in the program's own user namespace.
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

mod command;
#[cfg(all(target_os = "linux", feature = "sandbox"))]
mod confine;
mod kernel;
mod plan;
mod profile;
#[cfg(target_os = "linux")]
mod root;

use std::path::Path;

use serde_json::Value;

pub use command::{LimitExceeded, SandboxCommand, SandboxError, SandboxOutput};
pub(crate) use command::{die_with_parent, explain_spawn_error};
pub use kernel::KernelSupport;
pub(crate) use plan::Grant;
pub use plan::{Confinement, NetworkConfinement};
pub use profile::{Limits, Mount, MountSource, SandboxProfile};

/// Elsewhere than Linux, or without feature `sandbox`, there is nothing to apply: the plan
/// reported every gap, and only a best-effort profile gets this far.
#[cfg(not(all(target_os = "linux", feature = "sandbox")))]
impl Confinement {
    pub(crate) fn apply(
        &self,
        _command: &mut tokio::process::Command,
        _program: (&Path, Option<&Path>),
        _child_path: Option<&std::ffi::OsStr>,
        _cpu: bool,
    ) -> std::io::Result<()> {
        Ok(())
    }
}

/// The sandbox bound by `spec` (tier sandboxed), planned for this kernel; `None` without one.
/// Refused when a program could write the runtime's `state_dir` or its audit log (`audit_log`
/// overriding the manifest's, as [`OperatorSpec::open_audit`](crate::spec::OperatorSpec::open_audit)
/// takes it).
pub(crate) fn from_spec(
    spec: &crate::spec::OperatorSpec,
    workspace_root: Option<&Path>,
    (state_dir, audit_log): (&Path, Option<&Path>),
) -> Result<Option<Confinement>, String> {
    let Some(sandbox) = spec.sandbox else {
        return Ok(None);
    };
    let doc: Value = serde_json::from_str(sandbox).map_err(|error| format!("the bound SANDBOX.md: {error}"))?;
    let profile = SandboxProfile::from_frontmatter(&doc)?;
    let confinement = Confinement::plan(profile, workspace_root, KernelSupport::probe())
        .map_err(|why| format!("`{}`: {why}", spec.id))?;
    let audit_log = spec.audit_path(audit_log, state_dir);
    (confinement.keep_out(state_dir, audit_log.as_deref())).map_err(|why| format!("`{}`: {why}", spec.id))?;
    tracing::info!(enforced = %confinement.report(), "sandbox");
    for gap in confinement.gaps() {
        tracing::warn!(%gap, "sandbox not fully enforced (best effort)");
    }
    Ok(Some(confinement))
}
