//! The local sandbox (AIP-36 `provider: local`): the `agentacp-sandbox` crate (Landlock,
//! namespaces, a root of its own, rlimits and cgroups for the programs the runtime starts for
//! a sandboxed operator; see its documentation), and the sandbox a manifest binds
//! ([`OperatorSpec`](crate::spec::OperatorSpec)), planned once at start-up.
//!
//! Its confinement is this crate's feature `sandbox` (Linux only): without it a sandbox is
//! planned all the same, and reports every restriction it declares as a gap. Elsewhere than
//! Linux (Windows, macOS) nothing is confined, feature or not: a profile that requires
//! confinement is refused at start-up in a sentence naming the system, and a best-effort one
//! runs with that gap reported (`limits.timeout_ms` still ends a command).

use std::path::Path;

use serde_json::Value;

pub use agentacp_sandbox::{
    Confinement, KernelSupport, LimitExceeded, Limits, Mount, MountSource, NetworkConfinement, SandboxCommand,
    SandboxError, SandboxOutput, SandboxProfile,
};
pub(crate) use agentacp_sandbox::{Grant, die_with_parent, explain_spawn_error};

impl From<SandboxError> for crate::Error {
    fn from(error: SandboxError) -> Self {
        crate::Error::other(error)
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
