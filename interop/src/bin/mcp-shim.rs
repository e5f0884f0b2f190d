//! A bridge's stdio MCP shim on its own (`agentacp::mcp::shim`): what a bridge whose agent takes
//! neither MCP-over-ACP nor HTTP MCP servers lists as the stdio server (`BridgeOptions::mcp_shim`).
//! A bridge binary that serves with `bridge_stdio` is its own shim; this one is for the tests'
//! bridge, served in-process.

use std::process::ExitCode;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match agentacp::mcp::shim::serve_if_asked().await {
        Some(Ok(())) => ExitCode::SUCCESS,
        Some(Err(error)) => {
            eprintln!("mcp-shim: {error}");
            ExitCode::FAILURE
        }
        None => {
            eprintln!(
                "mcp-shim: {} is not set; this program is started by a bridge's agent",
                agentacp::mcp::shim::SOCKET_ENV
            );
            ExitCode::from(2)
        }
    }
}
