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
        context: &ClientContext,
        request: wire::ReadTextFileRequest,
    ) -> Result<wire::ReadTextFileResponse, RpcError> {
        fs::read_text_file(context, &request).await
    }

    // The terminal family, delegated to the connection's built-in terminals.
    agentacp::builtin_terminal_methods!();
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
        (spec.name, spec.kind.as_str(), spec.tier),
        ("client", "client", "governance-aware")
    );
    let request = spec.initialize_params();
    assert_eq!(request["clientCapabilities"]["fs"]["readTextFile"], true);
    assert_eq!(request["clientInfo"]["name"], "client");
    assert_eq!(Minimal.capabilities(), agentacp::methods::ClientMethods::NONE);
    assert_eq!(Minimal::spec().tier, "basic");
}
