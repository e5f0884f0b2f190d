//! A bridge whose handler impl lacks `downstream` (the agent to start) does not compile.

use agentacp::prelude::*;

#[acp_operator(manifest = "bridge-missing-downstream/ACP.md")]
pub struct Gate;

impl GateBridge for Gate {}

fn main() {
    let _operator = Gate;
}
