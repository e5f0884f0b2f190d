//! Windows: which file starts an agent (or a stdio MCP server), and how its process tree is
//! held and ended — a Job Object of its own ([`acp_process::job`]) in place of a process group.
//!
//! A bare program name is looked up in the agent's `PATH` with `PATHEXT` (so `npx` finds
//! `npx.cmd`), and the full path goes to `Command`, which starts a batch file through
//! `cmd.exe` with its arguments escaped; an argument a batch file cannot be given safely is
//! refused before anything starts ([`acp_process::program`]). The polite step of ending it is
//! `CTRL_BREAK_EVENT` to its console group, the hard one `TerminateJobObject`; and should the
//! runtime end without either, the system kills the job's processes as its last handle
//! closes.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use acp_process::job::Job;
use acp_process::program::{DEFAULT_PATHEXT, batch_unsafe_argument, is_batch_file, resolve};
use tokio::process::{Child, Command};

/// The file to start for `program` with `args`: a bare name found in `path` (as in `PATH`)
/// with `PATHEXT`, else the name unchanged (`Command` then reports it missing). Refused
/// (`InvalidInput`, a sentence naming the argument's position; nothing is started) when it
/// is a batch file and an argument holds what `cmd.exe` would read as its own syntax. The one
/// place agents, stdio MCP servers and terminal commands are resolved.
pub(crate) fn program_file<A: AsRef<OsStr>>(program: &OsStr, args: &[A], path: &OsStr) -> std::io::Result<PathBuf> {
    let pathext = std::env::var("PATHEXT").unwrap_or_else(|_| DEFAULT_PATHEXT.to_string());
    let file = resolve(program, std::env::split_paths(path), &pathext, Path::is_file)
        .unwrap_or_else(|| PathBuf::from(program));
    if is_batch_file(&file)
        && let Some(argument) = batch_unsafe_argument(args)
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "its argument {} holds {}, which the batch file {} cannot be given safely ({}); nothing was started",
                argument.position,
                argument.character_shown(),
                file.display(),
                argument.reason()
            ),
        ));
    }
    Ok(file)
}

/// Starts `command` (an agent's, with its `arg_count` arguments, suspended) and puts it into a
/// Job Object of its own before it runs. Failing, nothing is left running.
pub(super) fn spawn_in_job(command: &mut Command, arg_count: usize) -> std::io::Result<(Child, Job)> {
    let program = PathBuf::from(command.as_std().get_program());
    let job = Job::new().map_err(|error| contain_error("cannot create a Job Object", &error))?;
    let mut child = (command.spawn())
        .map_err(crate::sandbox::explain_spawn_error)
        .map_err(|error| spawn_error(&program, arg_count, error))?;
    let adopted = match child.id() {
        Some(pid) => job.adopt_suspended(pid),
        None => Err(std::io::Error::other("it exited before it ran")),
    };
    if let Err(error) = adopted {
        // Suspended or outside the job: not to be left so.
        let _ = child.start_kill();
        return Err(contain_error("cannot put it into its Job Object", &error));
    }
    Ok((child, job))
}

/// An error of containing the agent, as a sentence.
fn contain_error(what: &str, error: &std::io::Error) -> std::io::Error {
    std::io::Error::new(error.kind(), format!("{what}: {error}"))
}

/// The error of starting `program`: the standard library's refusal of a batch file's
/// arguments (`InvalidInput`) said as such; anything else unchanged.
fn spawn_error(program: &Path, count: usize, error: std::io::Error) -> std::io::Error {
    if error.kind() == std::io::ErrorKind::InvalidInput && is_batch_file(program) {
        return std::io::Error::new(
            error.kind(),
            format!(
                "the batch file {} cannot be given its {count} argument(s) safely ({error}); nothing was started",
                program.display()
            ),
        );
    }
    error
}

/// `CTRL_BREAK_EVENT` to an agent's console process group (the polite step; it reaches
/// console programs sharing our console only).
pub(super) fn terminate_group(pid: u32) {
    if !acp_process::job::ctrl_break(pid) {
        tracing::debug!(pid, error = %std::io::Error::last_os_error(), "CTRL_BREAK to the agent's process group failed");
    }
}

/// Kills every process of an agent's Job Object.
pub(super) fn kill_group(job: &Job) {
    if !job.terminate() {
        tracing::debug!(error = %std::io::Error::last_os_error(), "terminating the agent's Job Object failed");
    }
}
