//! `#[acp_operator]` goes on a struct; on an enum it is an error at `enum`.

use agentacp::prelude::*;

#[acp_operator(manifest = "attribute-on-enum/ACP.md")]
pub enum Echo {
    Idle,
}

fn main() {
    let _operator = Echo::Idle;
}
