//! The built-in `terminal/*` methods: commands the agent runs through the client.
//!
//! (Being written: see issue #5.)

use crate::jsonrpc::{RpcError, codes};
use crate::wire::default as wire;

/// The terminals the agent created on one connection.
#[derive(Debug, Default)]
pub struct Terminals {}

fn not_yet() -> RpcError {
    RpcError::new(codes::INTERNAL_ERROR, "terminals are not implemented yet")
}

impl Terminals {
    /// `terminal/create` (its `cwd` already checked and set by the runtime).
    pub async fn create(&self, request: &wire::CreateTerminalRequest) -> Result<wire::CreateTerminalResponse, RpcError> {
        let _ = request;
        Err(not_yet())
    }

    /// `terminal/output`.
    pub async fn output(&self, request: &wire::TerminalOutputRequest) -> Result<wire::TerminalOutputResponse, RpcError> {
        let _ = request;
        Err(not_yet())
    }

    /// `terminal/wait_for_exit`.
    pub async fn wait_for_exit(
        &self,
        request: &wire::WaitForTerminalExitRequest,
    ) -> Result<wire::WaitForTerminalExitResponse, RpcError> {
        let _ = request;
        Err(not_yet())
    }

    /// `terminal/kill`.
    pub async fn kill(&self, request: &wire::KillTerminalRequest) -> Result<wire::KillTerminalResponse, RpcError> {
        let _ = request;
        Err(not_yet())
    }

    /// `terminal/release`.
    pub async fn release(&self, request: &wire::ReleaseTerminalRequest) -> Result<wire::ReleaseTerminalResponse, RpcError> {
        let _ = request;
        Err(not_yet())
    }

    /// Kills every terminal still running (when the connection closes).
    pub fn kill_all(&self) {}
}
