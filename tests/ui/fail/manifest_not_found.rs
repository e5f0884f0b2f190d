//! A manifest path that does not exist is an error at the literal, saying where it looked.

use agentacp::prelude::*;

#[acp_operator(manifest = "no-such-folder/ACP.md")]
pub struct Echo;

fn main() {
    let _operator = Echo;
}
