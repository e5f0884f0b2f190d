//! A real MCP server over stdio, written with `rmcp` (the official Rust MCP SDK), for the
//! sandboxed tier's tests (`tests/mcp.rs`) and benchmark: the tools of
//! [`interop::notes_mcp::Notes`], kept in its working folder.
//!
//! With `--exit-at-start` it exits before MCP `initialize` (a server that cannot start).

use interop::notes_mcp::Notes;
use rmcp::ServiceExt;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().any(|arg| arg == "--exit-at-start") {
        eprintln!("mcp-test-server: exiting at start, as asked");
        std::process::exit(3);
    }
    let folder = std::env::current_dir()?;
    let mut args = std::env::args().skip_while(|arg| arg != "--http");
    if let (Some(_), Some(address)) = (args.next(), args.next()) {
        return serve_http(&address, folder).await;
    }
    let service = Notes { folder }.serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}

/// `--http ADDRESS`: the same tools over MCP's streamable HTTP, one session per client; the
/// URL is the first line on stdout. Serves until killed.
#[allow(clippy::print_stdout, reason = "the URL is this mode's answer to its starter")]
async fn serve_http(address: &str, folder: std::path::PathBuf) -> Result<(), Box<dyn std::error::Error>> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

    let listener = tokio::net::TcpListener::bind(address).await?;
    let service = StreamableHttpService::new(
        move || Ok(Notes { folder: folder.clone() }),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    println!("http://{}/mcp", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        let service = hyper_util::service::TowerToHyperService::new(service.clone());
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            if let Err(error) = connection.await {
                eprintln!("mcp-test-server: connection ended: {error}");
            }
        });
    }
}
