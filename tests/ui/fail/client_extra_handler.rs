//! Without `writeTextFile: true`, `write_text_file` is not a member of the client handler trait: E0407.

use agentacp::client::{ClientContext, fs};
use agentacp::jsonrpc::RpcError;
use agentacp::prelude::*;

#[acp_operator(manifest = "client-extra-handler/ACP.md")]
pub struct Reader;

impl ReaderClient for Reader {
    async fn read_text_file(
        &self,
        context: &ClientContext,
        request: wire::ReadTextFileRequest,
    ) -> Result<wire::ReadTextFileResponse, RpcError> {
        fs::read_text_file(context, &request).await
    }

    async fn write_text_file(
        &self,
        context: &ClientContext,
        request: wire::WriteTextFileRequest,
    ) -> Result<wire::WriteTextFileResponse, RpcError> {
        fs::write_text_file(context, &request).await
    }
}

fn main() {
    let _operator = Reader;
}
