//! A real MCP server over stdio, written with `rmcp` (the official Rust MCP SDK), for the
//! sandboxed tier's tests (`tests/mcp.rs`) and benchmark:
//!
//! - `read_note` (read-only): the text of a file in its working folder;
//! - `write_note` (destructive): writes a file in its working folder;
//! - `echo`: its `text` back (no annotations: kind `other`);
//! - `fail`: always a tool error;
//! - `env`: the value of a variable in its environment (empty when unset).
//!
//! With `--exit-at-start` it exits before MCP `initialize` (a server that cannot start).

use std::path::PathBuf;

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock};
use rmcp::{ErrorData, ServiceExt, schemars, tool, tool_router};
use serde::Deserialize;

#[derive(Deserialize, schemars::JsonSchema)]
struct Note {
    /// A file name in the server's working folder.
    name: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct NoteText {
    /// A file name in the server's working folder.
    name: String,
    /// What to write.
    text: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Text {
    /// Anything.
    text: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Variable {
    /// A variable's name.
    name: String,
}

struct Notes {
    folder: PathBuf,
}

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text.into())])
}

/// A plain name in the folder: no separators, no `..`.
fn plain(name: &str) -> Result<&str, ErrorData> {
    if name.is_empty() || name.contains(['/', '\\']) || name == ".." || name == "." {
        return Err(ErrorData::invalid_params(
            format!("`{name}` is not a plain file name"),
            None,
        ));
    }
    Ok(name)
}

#[tool_router(server_handler)]
impl Notes {
    #[tool(description = "Reads a note", annotations(read_only_hint = true))]
    fn read_note(&self, Parameters(Note { name }): Parameters<Note>) -> Result<CallToolResult, ErrorData> {
        let name = plain(&name)?;
        Ok(match std::fs::read_to_string(self.folder.join(name)) {
            Ok(content) => text(content),
            Err(error) => CallToolResult::error(vec![ContentBlock::text(format!("cannot read `{name}`: {error}"))]),
        })
    }

    #[tool(description = "Writes a note", annotations(destructive_hint = true))]
    fn write_note(
        &self,
        Parameters(NoteText { name, text: body }): Parameters<NoteText>,
    ) -> Result<CallToolResult, ErrorData> {
        let name = plain(&name)?;
        Ok(match std::fs::write(self.folder.join(name), &body) {
            Ok(()) => text(format!("wrote {} bytes to {name}", body.len())),
            Err(error) => CallToolResult::error(vec![ContentBlock::text(format!("cannot write `{name}`: {error}"))]),
        })
    }

    #[tool(description = "Says the text back")]
    fn echo(&self, Parameters(Text { text: said }): Parameters<Text>) -> CallToolResult {
        text(said)
    }

    #[tool(description = "Always fails")]
    fn fail(&self) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text("this tool always fails")])
    }

    #[tool(
        description = "The value of an environment variable",
        annotations(read_only_hint = true)
    )]
    fn env(&self, Parameters(Variable { name }): Parameters<Variable>) -> CallToolResult {
        text(std::env::var(name).unwrap_or_default())
    }
}

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
