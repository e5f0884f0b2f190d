//! `capabilities.agent` in a `kind: client` manifest is ACP206, at the `agent` key.

use agentacp::prelude::*;

#[acp_operator(manifest = "client-agent-capabilities/ACP.md")]
pub struct Reader;

impl ReaderClient for Reader {}

fn main() {
    let _operator = Reader;
}
