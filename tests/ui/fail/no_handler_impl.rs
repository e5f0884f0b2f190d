//! Without an impl of the generated handler trait, the build fails with its `on_unimplemented` message.

use agentacp::prelude::*;

#[acp_operator(manifest = "no-handler-impl/ACP.md")]
pub struct Echo;

fn main() {
    let _operator = Echo;
}
