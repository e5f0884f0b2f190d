//! `writeTextFile: true` puts `write_text_file` in the client handler trait, so an impl without it is E0046.

use agentacp::client::{ClientContext, fs};
use agentacp::jsonrpc::RpcError;
use agentacp::prelude::*;

#[acp_operator(manifest = "client-missing-declared-handler/ACP.md")]
pub struct Editor;

impl EditorClient for Editor {
    async fn read_text_file(
        &self,
        context: &ClientContext,
        request: wire::ReadTextFileRequest,
    ) -> Result<wire::ReadTextFileResponse, RpcError> {
        fs::read_text_file(context, &request).await
    }
}

fn main() {
    let _operator = Editor;
}
