//! `kind: client`: the handler trait has exactly the client-side methods the manifest
//! declares (here `read_text_file` and the terminal family, not `write_text_file`), and the
//! generated handlers offer exactly those.

use agentacp::client::{ClientContext, ClientHandlers, ClientOperator, fs};
use agentacp::jsonrpc::RpcError;
use agentacp::prelude::*;

#[acp_operator(manifest = "client/ACP.md")]
pub struct Reader;

impl ReaderClient for Reader {
    async fn read_text_file(
        &self,
        _context: &ClientContext,
        request: wire::ReadTextFileRequest,
    ) -> Result<wire::ReadTextFileResponse, RpcError> {
        fs::read_text_file(&request).await
    }

    async fn create_terminal(
        &self,
        context: &ClientContext,
        request: wire::CreateTerminalRequest,
    ) -> Result<wire::CreateTerminalResponse, RpcError> {
        context.terminals().create(&request).await
    }

    async fn terminal_output(
        &self,
        context: &ClientContext,
        request: wire::TerminalOutputRequest,
    ) -> Result<wire::TerminalOutputResponse, RpcError> {
        context.terminals().output(&request).await
    }

    async fn wait_for_terminal_exit(
        &self,
        context: &ClientContext,
        request: wire::WaitForTerminalExitRequest,
    ) -> Result<wire::WaitForTerminalExitResponse, RpcError> {
        context.terminals().wait_for_exit(&request).await
    }

    async fn kill_terminal(
        &self,
        context: &ClientContext,
        request: wire::KillTerminalRequest,
    ) -> Result<wire::KillTerminalResponse, RpcError> {
        context.terminals().kill(&request).await
    }

    async fn release_terminal(
        &self,
        context: &ClientContext,
        request: wire::ReleaseTerminalRequest,
    ) -> Result<wire::ReleaseTerminalResponse, RpcError> {
        context.terminals().release(&request).await
    }
}

/// A client that declares no client-side capabilities: an empty handler trait.
#[acp_operator(manifest = "client-minimal/ACP.md")]
pub struct Minimal;

impl MinimalClient for Minimal {}

pub fn main() {
    let offered = Reader.capabilities();
    assert!(offered.read_text_file && offered.terminal && !offered.write_text_file);
    let spec = Reader::spec();
    assert_eq!(
        (spec.name, spec.kind, spec.tier),
        ("client", "client", "governance-aware")
    );
    let request: Value = serde_json::from_str(spec.initialize_request).unwrap();
    assert_eq!(request["clientCapabilities"]["fs"]["readTextFile"], true);
    assert_eq!(request["clientInfo"]["name"], "client");
    assert_eq!(Minimal.capabilities(), agentacp::client::Capabilities::default());
    assert_eq!(Minimal::spec().tier, "basic");
}
