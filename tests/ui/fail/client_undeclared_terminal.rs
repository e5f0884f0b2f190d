//! Without `terminal: true`, `create_terminal` is not a member of the client handler trait: E0407.

use agentacp::client::{ClientContext, fs};
use agentacp::jsonrpc::RpcError;
use agentacp::prelude::*;

#[acp_operator(manifest = "client-undeclared-terminal/ACP.md")]
pub struct Reader;

impl ReaderClient for Reader {
    async fn read_text_file(
        &self,
        context: &ClientContext,
        request: wire::ReadTextFileRequest,
    ) -> Result<wire::ReadTextFileResponse, RpcError> {
        fs::read_text_file(context, &request).await
    }

    async fn create_terminal(
        &self,
        context: &ClientContext,
        request: wire::CreateTerminalRequest,
    ) -> Result<wire::CreateTerminalResponse, RpcError> {
        context.terminals().create(&request).await
    }
}

fn main() {
    let _operator = Reader;
}
