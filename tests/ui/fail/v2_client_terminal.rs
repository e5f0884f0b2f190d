//! A client that speaks protocol version 2 and offers terminals, which version 2 does not
//! have: ACP219 on the `terminal` line, before any handler trait exists.

use agentacp::client::ClientContext;
use agentacp::jsonrpc::RpcError;
use agentacp::prelude::*;

#[acp_operator(manifest = "v2-client-terminal/ACP.md")]
pub struct Shell;

impl ShellClient for Shell {
    async fn create_terminal(
        &self,
        context: &ClientContext,
        request: wire::CreateTerminalRequest,
    ) -> Result<wire::CreateTerminalResponse, RpcError> {
        context.terminals().create(&request).await
    }
}

fn main() {
    let _operator = Shell;
}
