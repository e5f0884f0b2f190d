//! `#[acp_operator]` does not take a generic struct; the error is at the generic parameters.

use agentacp::prelude::*;

#[acp_operator(manifest = "attribute-on-generic-struct/ACP.md")]
pub struct Echo<T>(T);

fn main() {
    let _operator = Echo(0u8);
}
