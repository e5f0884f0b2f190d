//! Regular files opened without blocking and read within a size limit: what every file the
//! workspace reads from a path a user names (a token file, a manifest and the documents it
//! refers to, an audit log, a session store's files) goes through.
//!
//! The open does not wait (`O_NONBLOCK`: a FIFO would wait for a writer), the file's kind is
//! taken from the open handle (so it cannot be swapped between the check and the use), and
//! anything but a regular file is refused; a regular file gets its blocking mode back. A read
//! goes through `take(limit + 1)`, so neither a huge or growing file nor a device that never
//! ends is read whole.

use std::fs::{File, FileType, OpenOptions};
use std::io::{self, Read};
use std::path::Path;

/// Why a file was not opened or read.
#[derive(Debug)]
pub enum Refused {
    /// The open or the read failed.
    Io(io::Error),
    /// It is not a regular file: what it is ([`kind_of`]).
    NotRegular(&'static str),
    /// It is larger than the limit: its size when its metadata said so; `None` when it grew
    /// past the limit while it was read.
    TooLarge(Option<u64>),
}

impl From<io::Error> for Refused {
    fn from(error: io::Error) -> Self {
        Refused::Io(error)
    }
}

/// Opens `path` with `options` (the caller's access and creation flags) without blocking,
/// and keeps it only if it is a regular file, in blocking mode.
pub fn open_regular(path: &Path, options: &mut OpenOptions) -> Result<File, Refused> {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(options, rustix::fs::OFlags::NONBLOCK.bits() as i32);
    let file = options.open(path)?;
    let kind = file.metadata()?.file_type();
    if !kind.is_file() {
        return Err(Refused::NotRegular(kind_of(&kind)));
    }
    #[cfg(unix)]
    {
        use rustix::fs::{OFlags, fcntl_getfl, fcntl_setfl};
        fcntl_getfl(&file)
            .and_then(|flags| fcntl_setfl(&file, flags - OFlags::NONBLOCK))
            .map_err(io::Error::from)?;
    }
    Ok(file)
}

/// Reads the regular file at `path`, at most `limit` bytes of it ([`open_regular`]).
pub fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, Refused> {
    let file = open_regular(path, OpenOptions::new().read(true))?;
    let size = file.metadata()?.len();
    if size > limit {
        return Err(Refused::TooLarge(Some(size)));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(Refused::TooLarge(None));
    }
    Ok(bytes)
}

/// What a file that is not a regular file is, for messages ("a FIFO", "a directory", …).
pub fn kind_of(kind: &FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() { "a directory" } else { "a special file" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_is_read_within_its_limit_and_refused_over_it() {
        let dir = std::env::temp_dir().join(format!("acp-process-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, b"12345").unwrap();
        let read = read_regular(&path, 5).unwrap();
        let over = read_regular(&path, 4);
        let folder = read_regular(&dir, 5);
        let missing = read_regular(&dir.join("none"), 5);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(read, b"12345");
        assert!(matches!(over, Err(Refused::TooLarge(Some(5)))), "{over:?}");
        assert!(matches!(folder, Err(Refused::NotRegular("a directory"))), "{folder:?}");
        assert!(
            matches!(&missing, Err(Refused::Io(error)) if error.kind() == io::ErrorKind::NotFound),
            "{missing:?}"
        );
    }

    /// A FIFO is refused at once: the open does not wait for a writer.
    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = std::env::temp_dir().join(format!("acp-process-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let read = read_regular(&path, 5);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(read, Err(Refused::NotRegular("a FIFO"))), "{read:?}");
    }
}
