//! A governance bridge (`kind: bridge`): the editor starts
//! `governance-bridge [--pass-env NAME]... [-- AGENT ARGS...]` as its agent; the bridge starts the agent (default: the `governed-server` example beside
//! this binary) and relays the session, gating tool calls by `OPERATOR.md` + `GOVERNANCE.md`
//! and auditing both directions in `audit/bridge.jsonl` (or `$AGENTACP_AUDIT_LOG`).
//!
//! The agent gets a cleared environment plus `PATH`, `HOME`, ... and the `AGENTACP_*` settings
//! it needs: `AGENTACP_WORKSPACE_ROOT`, `AGENTACP_STATE_DIR`, and `AGENTACP_DOWNSTREAM_AUDIT_LOG`
//! as its `AGENTACP_AUDIT_LOG`. An agent that reads its key from the environment needs it
//! named: `--pass-env OPENAI_API_KEY` (repeatable), or `AGENTACP_BRIDGE_PASS_ENV` (names
//! separated by commas or spaces).

use std::path::PathBuf;

use agentacp::bridge::RunBridge;
use agentacp::client::AgentCommand;
use agentacp::prelude::*;

/// The bridge: which agent to start.
#[acp_operator(manifest = "ACP.md")]
pub struct Gatekeeper {
    agent: Vec<String>,
    /// `--pass-env` names.
    pass_env: Vec<String>,
}

impl GatekeeperBridge for Gatekeeper {
    fn downstream(&self) -> AgentCommand {
        let (program, args) = match self.agent.split_first() {
            Some((program, args)) => (PathBuf::from(program), args.to_vec()),
            None => (beside_this_binary("governed-server"), Vec::new()),
        };
        let mut command = AgentCommand::new(program)
            .args(args)
            .allow_env("AGENTACP_WORKSPACE_ROOT")
            .allow_env("AGENTACP_STATE_DIR")
            .allow_env("AGENTACP_LOG");
        for name in &self.pass_env {
            command = command.allow_env(name);
        }
        if let Some(log) = std::env::var_os("AGENTACP_DOWNSTREAM_AUDIT_LOG") {
            command = command.env("AGENTACP_AUDIT_LOG", log);
        }
        command
    }
}

fn beside_this_binary(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(name)))
        .unwrap_or_else(|| PathBuf::from(name))
}

/// `[--pass-env NAME | --pass-env=NAME]... [--] [AGENT ARGS...]`.
fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Gatekeeper, String> {
    let mut pass_env = Vec::new();
    let mut agent = Vec::new();
    while let Some(arg) = args.next() {
        if arg == "--pass-env" {
            pass_env.push(args.next().ok_or("--pass-env needs a variable name")?);
        } else if let Some(name) = arg.strip_prefix("--pass-env=") {
            pass_env.push(name.to_string());
        } else {
            if arg != "--" {
                agent.push(arg);
            }
            agent.extend(args);
            break;
        }
    }
    if pass_env.iter().any(|name| name.is_empty() || name.contains('=')) {
        return Err("--pass-env takes a variable name".into());
    }
    Ok(Gatekeeper { agent, pass_env })
}

fn main() -> std::process::ExitCode {
    let gatekeeper = match parse_args(std::env::args().skip(1)) {
        Ok(gatekeeper) => gatekeeper,
        Err(error) => {
            eprintln!("governance-bridge: {error}");
            return std::process::ExitCode::from(2);
        }
    };
    match gatekeeper.run_stdio() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("governance-bridge: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
