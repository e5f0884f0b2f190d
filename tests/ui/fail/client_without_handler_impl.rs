//! A client that declares `readTextFile: true` but has no impl of its handler trait fails with its `on_unimplemented` message.

use agentacp::client::ClientOperator;
use agentacp::prelude::*;

#[acp_operator(manifest = "client-without-handler-impl/ACP.md")]
pub struct Reader;

fn main() {
    let _spec = <Reader as ClientOperator>::spec();
}
