//! A real MCP server over stdio, written with `rmcp` (the official Rust MCP SDK), for the
//! sandboxed tier's tests (`tests/mcp.rs`) and benchmark: the tools of
//! [`interop::notes_mcp::Notes`], kept in its working folder.
//!
//! With `--exit-at-start` it exits before MCP `initialize` (a server that cannot start);
//! with `--impostor` it serves [`interop::notes_mcp::Impostor`] (a hostile server) instead;
//! `--http ADDRESS` serves streamable HTTP instead of stdio, `--https ADDRESS CERT_PEM` the same
//! over TLS, with a self-signed certificate for `localhost` it writes to `CERT_PEM`.

use interop::notes_mcp::{Impostor, Notes};
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
        return serve_http(&address, None, folder).await;
    }
    let mut args = std::env::args().skip_while(|arg| arg != "--https");
    if let (Some(_), Some(address), Some(cert_out)) = (args.next(), args.next(), args.next()) {
        return serve_http(&address, Some(tls_acceptor(cert_out.as_ref())?), folder).await;
    }
    if std::env::args().any(|arg| arg == "--impostor") {
        Impostor { folder }
            .serve(rmcp::transport::stdio())
            .await?
            .waiting()
            .await?;
        return Ok(());
    }
    let service = Notes { folder }.serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}

/// A TLS acceptor with a new self-signed certificate for `localhost`, written (PEM) to
/// `cert_out` for the client to trust.
fn tls_acceptor(cert_out: &std::path::Path) -> Result<tokio_rustls::TlsAcceptor, Box<dyn std::error::Error>> {
    use tokio_rustls::rustls;
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()])?;
    std::fs::write(cert_out, certified.cert.pem())?;
    let key = rustls::pki_types::PrivateKeyDer::try_from(certified.signing_key.serialize_der())?;
    let config =
        rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(vec![certified.cert.der().clone()], key)?;
    Ok(tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config)))
}

/// `--http ADDRESS` (`--https`: over `tls`): the same tools over MCP's streamable HTTP, one
/// session per client; the URL is the first line on stdout. Serves until killed.
#[allow(clippy::print_stdout, reason = "the URL is this mode's answer to its starter")]
async fn serve_http(
    address: &str,
    tls: Option<tokio_rustls::TlsAcceptor>,
    folder: std::path::PathBuf,
) -> Result<(), Box<dyn std::error::Error>> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

    let listener = tokio::net::TcpListener::bind(address).await?;
    let service = StreamableHttpService::new(
        move || Ok(Notes { folder: folder.clone() }),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    let port = listener.local_addr()?.port();
    match &tls {
        Some(_) => println!("https://localhost:{port}/mcp"),
        None => println!("http://{}/mcp", listener.local_addr()?),
    }
    loop {
        let (stream, _) = listener.accept().await?;
        let service = hyper_util::service::TowerToHyperService::new(service.clone());
        let tls = tls.clone();
        tokio::spawn(async move {
            let http = hyper::server::conn::http1::Builder::new();
            let ended = match tls {
                Some(tls) => match tls.accept(stream).await {
                    Ok(stream) => {
                        http.serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await
                    }
                    Err(error) => {
                        eprintln!("mcp-test-server: TLS handshake failed: {error}");
                        return;
                    }
                },
                None => {
                    http.serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await
                }
            };
            if let Err(error) = ended {
                eprintln!("mcp-test-server: connection ended: {error}");
            }
        });
    }
}
