//! A governance bridge (`kind: bridge`): the editor starts `governance-bridge [-- AGENT ARGS...]`
//! as its agent; the bridge starts the agent (default: the `governed-server` example beside
//! this binary) and relays the session, gating tool calls by `OPERATOR.md` + `GOVERNANCE.md`
//! and auditing both directions in `audit/bridge.jsonl` (or `$AGENTACP_AUDIT_LOG`).
//!
//! The agent gets a cleared environment plus `PATH`, `HOME`, ... and the `AGENTACP_*` settings
//! it needs: `AGENTACP_WORKSPACE_ROOT`, `AGENTACP_STATE_DIR`, and `AGENTACP_DOWNSTREAM_AUDIT_LOG`
//! as its `AGENTACP_AUDIT_LOG`.

use std::path::PathBuf;

use agentacp::bridge::RunBridge;
use agentacp::client::AgentCommand;
use agentacp::prelude::*;

/// The bridge: which agent to start.
#[acp_operator(manifest = "ACP.md")]
pub struct Gatekeeper {
    agent: Vec<String>,
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

fn main() -> std::process::ExitCode {
    let agent: Vec<String> = std::env::args().skip(1).skip_while(|arg| arg == "--").collect();
    match (Gatekeeper { agent }).run_stdio() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("governance-bridge: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}
