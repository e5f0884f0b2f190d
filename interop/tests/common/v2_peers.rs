//! The protocol v2 peers written with the official SDKs (`src/bin/sdk-v2-*.rs`,
//! `ts/v2-*.mjs`, `py/v2_*.py`): how to start each, or why it cannot run here. Shared by
//! `tests/v2_sdk.rs` and the tests of our v2 client against the SDK agents.

#![allow(dead_code)]

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

/// An official SDK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sdk {
    Rust,
    TypeScript,
    Python,
}

pub fn here() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `Err` saying why the TypeScript peers cannot run here.
pub fn node_with_sdk() -> Result<(), String> {
    match Command::new("node").arg("--version").output() {
        Ok(out) if out.status.success() => {}
        _ => return Err("`node` is not on PATH".to_owned()),
    }
    let sdk = here().join("ts/node_modules/@agentclientprotocol/sdk");
    if sdk.is_dir() {
        Ok(())
    } else {
        Err(format!(
            "{} is absent (run `npm ci --prefix interop/ts`)",
            sdk.display()
        ))
    }
}

/// The command line of `sdk`'s v2 client, or why it cannot run here.
pub fn client_command(sdk: Sdk) -> Result<Vec<OsString>, String> {
    Ok(match sdk {
        Sdk::Rust => vec![env!("CARGO_BIN_EXE_sdk-v2-client").into()],
        Sdk::TypeScript => {
            node_with_sdk()?;
            vec!["node".into(), here().join("ts/v2-client.mjs").into()]
        }
        Sdk::Python => vec![
            interop::python_with_acp_v2()?.into(),
            here().join("py/v2_client.py").into(),
        ],
    })
}

/// The command line of `sdk`'s v2 agent (with `both`, v1 and v2 through its SDK's router),
/// or why it cannot run here.
pub fn agent_command(sdk: Sdk, both: bool) -> Result<Vec<OsString>, String> {
    let mut command: Vec<OsString> = match sdk {
        Sdk::Rust => vec![env!("CARGO_BIN_EXE_sdk-v2-agent").into()],
        Sdk::TypeScript => {
            node_with_sdk()?;
            vec!["node".into(), here().join("ts/v2-agent.mjs").into()]
        }
        Sdk::Python => vec![
            interop::python_with_acp_v2()?.into(),
            here().join("py/v2_agent.py").into(),
        ],
    };
    if both {
        command.push("--both".into());
    }
    Ok(command)
}

/// The `info.name` of `sdk`'s v2 agent.
pub fn agent_name(sdk: Sdk) -> &'static str {
    match sdk {
        Sdk::Rust => "sdk-v2-agent-rust",
        Sdk::TypeScript => "sdk-v2-agent-ts",
        Sdk::Python => "sdk-v2-agent-py",
    }
}
