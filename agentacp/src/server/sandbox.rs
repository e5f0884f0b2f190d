//! `turn.sandbox_command(…)` (tier sandboxed): the operator's own programs, run in the
//! session's local sandbox (see [`crate::sandbox`]).

use std::ffi::OsStr;

use super::turn::Turn;
use crate::error::{Error, Result};
use crate::sandbox::SandboxCommand;
use crate::tier::{SandboxedTier, Tier};

impl<'t, T: Tier> Turn<'t, T> {
    /// A command to run in the sandbox SANDBOX.md declares, in the session's folder:
    /// confined to the mounts, within the limits, with only `env.passthrough` of the
    /// environment and the network the profile allows. Run it with
    /// [`SandboxCommand::output`]; wrap it in [`Turn::tool_call`] to govern, stream and audit
    /// it as a tool call. An error when the manifest binds no sandbox.
    pub fn sandbox_command(&self, program: impl AsRef<OsStr>) -> Result<SandboxCommand<'t>>
    where
        T: SandboxedTier,
    {
        let session = &self.scope.session;
        let sandbox = session
            .sandbox()
            .ok_or_else(|| Error::msg("no sandbox is bound: set `metadata.aip44.sandbox` in ACP.md"))?;
        Ok(sandbox.command(program).current_dir(session.cwd()))
    }
}
