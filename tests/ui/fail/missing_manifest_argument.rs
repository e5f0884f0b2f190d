//! `#[acp_operator]` without `manifest = "..."` is an error saying what to write.

use agentacp::prelude::*;

#[acp_operator()]
pub struct Echo;

fn main() {
    let _operator = Echo;
}
