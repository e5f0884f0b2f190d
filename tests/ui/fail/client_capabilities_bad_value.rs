//! A client capability flag that is not a boolean (`readTextFile: "yes"`) is ACP101, at the value.

use agentacp::prelude::*;

#[acp_operator(manifest = "client-capabilities-bad-value/ACP.md")]
pub struct Reader;

impl ReaderClient for Reader {}

fn main() {
    let _operator = Reader;
}
