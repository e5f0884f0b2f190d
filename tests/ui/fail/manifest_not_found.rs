//! A manifest path that does not exist is an error at the literal.

use agentacp::prelude::*;

#[acp_operator(manifest = "manifest-not-found/ACP.md")]
pub struct Echo;

fn main() {
    let _operator = Echo;
}
