//! Windows: a terminal's command in a Job Object of its own (in place of a process group),
//! found as `cmd.exe` finds a program, and ended with exit codes only (no signals).
//!
//! The command is started suspended, put into its job, then let run
//! ([`acp_process::job::Job::adopt_suspended`]): `terminal/kill` and `terminal/release` kill
//! every process of the job, what it started in the background included, and dropping the
//! job (the terminal gone, or the runtime) kills whatever is left. The waiting thread waits on
//! the process without closing our handle of it (held by its `Child`), so its number names it
//! until the terminal is released, as an unreaped zombie does on Unix.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::{Child, ExitStatus};

use acp_process::job::Job;

use crate::jsonrpc::{RpcError, codes};
use crate::wire::default as wire;

/// A command's process number (the Job Object holds the rest).
pub(super) type Pid = u32;

/// The file to start for the request's command, looked up in the command's `PATH` (the
/// request's, else ours) with `PATHEXT`; `-32602` for arguments a batch file cannot be given
/// safely.
pub(super) fn program(request: &wire::CreateTerminalRequest) -> Result<PathBuf, RpcError> {
    let path = (request.env.iter().rev())
        .find(|variable| variable.name.eq_ignore_ascii_case("PATH"))
        .map(|variable| variable.value.clone().into())
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_default();
    crate::subprocess::windows::program_file(OsStr::new(&request.command), &request.args, &path).map_err(|error| {
        RpcError::new(
            codes::INVALID_PARAMS,
            format!("cannot run `{}`: {error}", request.command),
        )
    })
}

/// Puts the started command (suspended) into a Job Object of its own and lets it run; its
/// job and number. Failing, the command is killed and reaped.
pub(super) fn contain(child: &mut Child) -> Result<(Job, Pid), RpcError> {
    let pid = child.id();
    let job = Job::new().and_then(|job| job.adopt_suspended(pid).map(|()| job));
    match job {
        Ok(job) => Ok((job, pid)),
        Err(error) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(RpcError::new(
                codes::INTERNAL_ERROR,
                format!("cannot put the command into a Job Object of its own: {error}"),
            ))
        }
    }
}

/// Kills every process of the command's job.
pub(super) fn kill(job: &Job, pid: Pid) {
    if !job.terminate() {
        tracing::debug!(error = %std::io::Error::last_os_error(), %pid, "terminating a terminal's Job Object failed");
    }
}

/// Waits until `pid` has exited (our handle of it stays open); its exit code.
pub(super) fn wait_exit_code(pid: Pid) -> std::io::Result<u32> {
    acp_process::job::wait_exit_code(pid)
}

/// How `status` ended, as an exit code (Windows has no signals; a code such as `0xC0000005`
/// is kept whole).
pub(super) fn exit_code(status: ExitStatus) -> Option<u32> {
    status.code().map(|code| u32::from_ne_bytes(code.to_ne_bytes()))
}

/// Whether `error` says the file is not a program Windows can start (`ERROR_BAD_EXE_FORMAT`).
pub(super) fn not_executable(error: &std::io::Error) -> bool {
    error.raw_os_error() == Some(193)
}
