//! `scaffold-aip conform`: reads the arguments and the manifest, runs `acp-conform`'s suite
//! and prints its report.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use acp_conform::report::{self, Format};
use acp_conform::{AuditSource, Config, Connect, Launch};
use clap::ValueEnum;

use crate::exit::{EXIT_FINDINGS, EXIT_OK, EXIT_USAGE};

/// Arguments of `conform`.
#[derive(Debug, clap::Args)]
pub struct ConformArgs {
    /// The agent's ACP.md: also check that the agent is the one it describes.
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = ConformFormat::Human)]
    pub format: ConformFormat,
    /// Run only these checks (comma-separated ids).
    #[arg(long, value_delimiter = ',', value_name = "ID,...")]
    pub only: Vec<String>,
    /// The deadline of every wait on the agent, in milliseconds.
    #[arg(long, default_value_t = 5000, value_name = "N")]
    pub timeout_ms: u64,
    /// A prompt that keeps a turn running until it is cancelled (for `turn.cancel`).
    #[arg(long, default_value = "/forever", value_name = "TEXT")]
    pub long_prompt: String,
    /// The audit log the agent writes (default: where `--manifest` says it is).
    #[arg(long, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,
    /// A prompt that drives the agent to a tool call, for the `audit.*` checks; repeat it
    /// (each is a turn): best one tool that runs unasked, one that needs approval, one denied.
    #[arg(long, value_name = "TEXT")]
    pub tool_prompt: Vec<String>,
    /// Connect to a remote agent instead of starting one: over WebSocket
    /// (`ws://HOST:PORT/acp`) or Streamable HTTP (`http://HOST:PORT/acp`); needs
    /// `--workspace-root`, takes no `-- AGENT ARGS`. No TLS yet (`wss://`, `https://`).
    #[arg(long, value_name = "URL", requires = "workspace_root", conflicts_with = "agent")]
    pub connect: Option<String>,
    /// The bearer token for `--connect`, on the upgrade or on every HTTP request (default:
    /// `AGENTACP_CONFORM_TOKEN`); never printed.
    #[arg(long, value_name = "TOKEN", requires = "connect")]
    pub token: Option<String>,
    /// The remote agent's workspace root, as the server sees it: sessions are opened there.
    #[arg(long, value_name = "PATH", requires = "connect")]
    pub workspace_root: Option<PathBuf>,
    /// The auth method to `authenticate` with after each `initialize`, one the agent offers
    /// (`authMethods`). Without it the kit never authenticates: an agent that refuses sessions
    /// until then gets one `auth.required` failure, and the checks that need a session skip.
    #[arg(long, value_name = "METHOD")]
    pub auth: Option<String>,
    /// A variable to pass to the agent (the API key of an `env_var` auth method, e.g.
    /// `--env OPENAI_API_KEY`): `NAME` passes ours (it must be set), `NAME=VALUE` sets it.
    #[arg(long = "env", value_name = "NAME[=VALUE]", conflicts_with = "connect")]
    pub env: Vec<String>,
    /// The protocol version whose suite runs: 1 (default) or 2 (ACP v2: initialize at
    /// version 2, the prompt lifecycle as state updates, …; see docs/conform.md).
    #[arg(long, default_value_t = 1, value_name = "1|2", value_parser = clap::value_parser!(u16).range(1..=2))]
    pub protocol: u16,
    /// The v2 JSON schema (`schema.json` of the revision the agent implements) every frame
    /// the agent sends is checked against, with `--protocol 2` (`v2.schema`; skipped without).
    #[arg(long, value_name = "FILE")]
    pub schema: Option<PathBuf>,
    /// The agent and its arguments.
    #[arg(last = true, required_unless_present = "connect", value_name = "AGENT ARGS")]
    pub agent: Vec<std::ffi::OsString>,
}

/// The variable `--token` defaults to.
pub const TOKEN_VAR: &str = "AGENTACP_CONFORM_TOKEN";

/// The variables `--env` passes to the agent: `NAME` with our value (an error when it is not
/// set), `NAME=VALUE` as given.
fn agent_env(given: &[String]) -> Result<Vec<(OsString, OsString)>, String> {
    given
        .iter()
        .map(|entry| match entry.split_once('=') {
            Some(("", _)) => Err(format!("--env {entry}: no variable name")),
            Some((name, value)) => Ok((name.into(), value.into())),
            None => std::env::var_os(entry)
                .map(|value| (entry.into(), value))
                .ok_or_else(|| format!("--env {entry}: {entry} is not set here, so it cannot be passed to the agent")),
        })
        .collect()
}

/// Output format of `conform`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConformFormat {
    /// One line per check.
    Human,
    /// One JSON document.
    Json,
    /// JUnit XML.
    Junit,
    /// GitHub Actions annotations, then the human lines.
    Github,
}

/// Runs `conform`; returns the exit status.
pub fn run(args: &ConformArgs, out: &mut dyn Write, err: &mut dyn Write) -> std::io::Result<i32> {
    let connect = args.connect.as_ref().map(|url| Connect {
        url: url.clone(),
        token: args
            .token
            .clone()
            .or_else(|| std::env::var(TOKEN_VAR).ok().filter(|token| !token.is_empty())),
        workspace_root: args.workspace_root.clone().unwrap_or_default(),
    });
    let env = match agent_env(&args.env) {
        Ok(env) => env,
        Err(message) => {
            writeln!(err, "scaffold-aip conform: {message}")?;
            return Ok(EXIT_USAGE);
        }
    };
    let config = Config {
        launch: Launch {
            command: args.agent.clone(),
            env,
        },
        auth: args.auth.clone(),
        connect,
        timeout: Duration::from_millis(args.timeout_ms.max(1)),
        only: args.only.clone(),
        long_prompt: args.long_prompt.clone(),
        audit_log: args.audit_log.clone().map(AuditSource::File),
        tool_prompts: args.tool_prompt.clone(),
        protocol: args.protocol,
        schema: args.schema.clone(),
        ..Config::new(Vec::new())
    };
    let config = match &args.manifest {
        None => config,
        Some(path) => match config.with_manifest(path) {
            Ok(config) => config,
            Err(message) => {
                writeln!(err, "scaffold-aip conform: {}: {message}", path.display())?;
                return Ok(EXIT_USAGE);
            }
        },
    };
    let verdicts = match acp_conform::run(config) {
        Ok(verdicts) => verdicts,
        Err(error) => {
            writeln!(err, "scaffold-aip conform: {error}")?;
            return Ok(EXIT_USAGE);
        }
    };
    let format = match args.format {
        ConformFormat::Human => Format::Human,
        ConformFormat::Json => Format::Json,
        ConformFormat::Junit => Format::Junit,
        ConformFormat::Github => Format::Github,
    };
    out.write_all(report::render(&verdicts, format).as_bytes())?;
    Ok(if report::all_passed(&verdicts) {
        EXIT_OK
    } else {
        EXIT_FINDINGS
    })
}

#[cfg(test)]
mod tests {
    use super::agent_env;

    #[test]
    fn env_passes_a_set_variable_sets_a_given_value_and_refuses_an_unset_one() {
        // PATH is set wherever the tests run.
        let path = std::env::var_os("PATH").expect("PATH is set");
        assert_eq!(
            agent_env(&["PATH".into(), "CONFORM_KEY=k=v".into()]),
            Ok(vec![("PATH".into(), path), ("CONFORM_KEY".into(), "k=v".into())])
        );
        assert_eq!(
            agent_env(&["AGENTACP_CONFORM_TEST_NEVER_SET".into()]),
            Err("--env AGENTACP_CONFORM_TEST_NEVER_SET: AGENTACP_CONFORM_TEST_NEVER_SET is not set here, so it cannot be passed to the agent".into())
        );
        assert!(agent_env(&["=v".into()]).is_err());
    }
}
