//! The channel between a bridge and its stdio shims on Windows: a named pipe with a random
//! name (`\\.\pipe\agentacp-mcp-…`), which only the current user may open (its security
//! descriptor: `acp_process::pipe`), which refuses clients on other machines, and whose first
//! instance is the bridge's (a name someone else made first is an error, not a pipe to
//! serve). The token check on the first line stays as on Unix.

use std::io;
use std::path::Path;
use std::sync::Mutex;

use tokio::net::windows::named_pipe::{ClientOptions, NamedPipeClient, NamedPipeServer, ServerOptions};

/// The Windows error `ERROR_PIPE_BUSY`: every instance of the pipe is connected just now.
const ERROR_PIPE_BUSY: i32 = 231;

/// The bridge's end: the pipe's next instance, waiting for a shim.
#[derive(Debug)]
pub(crate) struct Listener {
    name: String,
    /// The instance the next shim connects to; `None` after one failed to be made.
    next: Mutex<Option<NamedPipeServer>>,
}

impl Listener {
    /// Makes the pipe `address` (its first instance).
    pub(crate) fn bind(address: &Path) -> io::Result<Listener> {
        let name = address
            .to_str()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "a pipe name is text"))?
            .to_string();
        let first = instance(&name, true)?;
        Ok(Listener {
            name,
            next: Mutex::new(Some(first)),
        })
    }

    /// The next shim's connection. A new instance is made before it is returned, so the name
    /// never stops existing while the bridge serves it.
    pub(crate) async fn accept(&self) -> io::Result<NamedPipeServer> {
        let waiting = crate::sync::lock(&self.next).take();
        let server = match waiting {
            Some(server) => server,
            None => instance(&self.name, false)?,
        };
        server.connect().await?;
        *crate::sync::lock(&self.next) = Some(instance(&self.name, false)?);
        Ok(server)
    }
}

/// An instance of the pipe `name`: the first one fails when the name exists already.
fn instance(name: &str, first: bool) -> io::Result<NamedPipeServer> {
    let mut options = ServerOptions::new();
    options.first_pipe_instance(first).reject_remote_clients(true);
    acp_process::pipe::create_private(&options, name)
}

/// The shim's end: opens the bridge's pipe `address`, waiting (within the caller's timeout)
/// while every instance is busy.
pub(crate) async fn connect(address: &Path) -> io::Result<NamedPipeClient> {
    loop {
        match ClientOptions::new().open(address) {
            Err(error) if error.raw_os_error() == Some(ERROR_PIPE_BUSY) => {
                // The bridge makes the next instance as soon as it accepted one.
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            opened => return opened,
        }
    }
}
