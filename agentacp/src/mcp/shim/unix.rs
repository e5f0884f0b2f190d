//! The channel between a bridge and its stdio shims on Unix: a Unix socket, at a path in a
//! folder only this user may enter (made by the bridge).

use std::io;
use std::path::Path;

/// One shim's connection, as the bridge or the shim holds it.
pub(crate) type Stream = tokio::net::UnixStream;

/// The bridge's end: the socket, listening.
#[derive(Debug)]
pub(crate) struct Listener(tokio::net::UnixListener);

impl Listener {
    /// Listens at `address` (a path; the socket file is made there).
    pub(crate) fn bind(address: &Path) -> io::Result<Listener> {
        tokio::net::UnixListener::bind(address).map(Listener)
    }

    /// The next shim's connection.
    pub(crate) async fn accept(&self) -> io::Result<Stream> {
        self.0.accept().await.map(|(stream, _)| stream)
    }
}

/// The shim's end: connects to the bridge's socket at `address`.
pub(crate) async fn connect(address: &Path) -> io::Result<Stream> {
    tokio::net::UnixStream::connect(address).await
}
