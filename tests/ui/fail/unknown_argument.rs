//! An unknown attribute argument (`manifesto`) is an error at that argument.

use agentacp::prelude::*;

#[acp_operator(manifesto = "unknown-argument/ACP.md")]
pub struct Echo;

fn main() {
    let _operator = Echo;
}
