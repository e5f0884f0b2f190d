//! An attribute argument given twice is an error at the second one.

use agentacp::prelude::*;

#[acp_operator(manifest = "duplicate-argument/ACP.md", manifest = "duplicate-argument/ACP.md")]
pub struct Echo;

fn main() {
    let _operator = Echo;
}
