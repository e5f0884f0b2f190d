//! What the workspace's two halves (`unix.rs`, `windows.rs`) and `mod.rs` share: what a folder
//! holds under a name, and the errors a refusal is.

use std::io;

/// What a folder holds under a name, without following a link there.
#[derive(Debug)]
pub(super) enum Entry<Keep> {
    /// Nothing.
    Missing,
    /// A regular file, with what a write keeps of it (its permission bits on Unix).
    File(Keep),
    /// A symbolic link (on Windows also a junction).
    Link,
    /// A folder.
    Folder,
    /// A device, FIFO, socket or other special file.
    Other,
}

/// Why a path was refused.
pub(super) fn refused(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, message)
}

/// A refusal of bad input (a folder where a file is needed, a name the system cannot hold).
pub(super) fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}
