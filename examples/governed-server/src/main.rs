//! `governed-server`: the governed example operator ([`governed_server::Reviewer`]) served
//! over stdio. Settings come from `AGENTACP_*` (see `docs/design/runtime.md`).

use agentacp::server::Serve;

fn main() -> agentacp::Result<()> {
    governed_server::Reviewer::default().run_stdio()
}
