//! `governed-server`: the governed example operator ([`governed_server::Reviewer`]) served
//! over stdio, or over WebSocket and Streamable HTTP on one endpoint with `--listen HOST:PORT`
//! (clients authenticate with the token in `AGENTACP_TOKEN`; see `docs/remote.md`). Settings
//! come from `AGENTACP_*` (see `docs/design/runtime.md`).

#[path = "../../echo-server/src/cli.rs"]
mod cli;

fn main() -> std::process::ExitCode {
    cli::main(governed_server::Reviewer::default())
}
