//! Regular files opened without blocking and read within a size limit: what every file the
//! workspace reads from a path a user names (a token file, a manifest and the documents it
//! refers to, an audit log, a session store's files) goes through.
//!
//! The open does not wait (`O_NONBLOCK`: a FIFO would wait for a writer), the file's kind is
//! taken from the open handle (so it cannot be swapped between the check and the use), and
//! anything but a regular file is refused; a regular file gets its blocking mode back. A read
//! goes through `take(limit + 1)`, so neither a huge or growing file nor a device that never
//! ends is read whole.
//!
//! Beside that, what a file is whatever path names it ([`identity`]: device and inode, or on
//! Windows volume serial number and file index) and the lock its one writer holds
//! ([`try_lock_exclusive`]: `flock`, or on Windows `LockFileEx` past the data), for the audit
//! log and the token file alike.

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

/// What makes a file itself, whatever path names it: the device and inode on Unix, the
/// volume serial number and file index on Windows. Two open files with the same identity are
/// the same file; a path whose identity changed now names another file (one renamed over it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileId {
    device: u64,
    index: u64,
}

/// The identity of the open `file`.
pub fn identity(file: &File) -> io::Result<FileId> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let metadata = file.metadata()?;
        Ok(FileId {
            device: metadata.dev(),
            index: metadata.ino(),
        })
    }
    #[cfg(windows)]
    {
        windows::identity(file)
    }
    #[cfg(not(any(unix, windows)))]
    {
        let _ = file;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "file identity is not known on this platform",
        ))
    }
}

/// The identity of the file `path` names now (following symbolic links), without opening it
/// for reading on Unix (a FIFO is not waited on); on Windows through a handle that may only
/// read its attributes (it does not stop others reading, writing or renaming the file).
pub fn identity_of_path(path: &Path) -> io::Result<FileId> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let metadata = std::fs::metadata(path)?;
        Ok(FileId {
            device: metadata.dev(),
            index: metadata.ino(),
        })
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::OpenOptionsExt;
        // No access rights (attributes only); backup semantics so that a folder opens too.
        const FILE_FLAG_BACKUP_SEMANTICS: u32 = 0x0200_0000;
        let file = OpenOptions::new()
            .access_mode(0)
            .custom_flags(FILE_FLAG_BACKUP_SEMANTICS)
            .open(path)?;
        windows::identity(&file)
    }
    #[cfg(not(any(unix, windows)))]
    {
        identity(&File::open(path)?)
    }
}

/// Tries once to take an exclusive lock on the open `file`, without waiting: `Ok(false)` when
/// another open file (in this or another process) holds it. The lock goes with this open file:
/// it is released when the file is closed, or its process dies.
///
/// Unix: `flock(LOCK_EX | LOCK_NB)`, advisory. Windows: `LockFileEx` of one byte far past any
/// end a file can have (Windows locks are mandatory: a lock on the data would stop others
/// reading it, e.g. verifying a live audit log); `file` must be open for reading or writing.
pub fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    #[cfg(unix)]
    {
        use rustix::fs::{FlockOperation, flock};
        match flock(file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(true),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
            Err(errno) => Err(errno.into()),
        }
    }
    #[cfg(windows)]
    {
        windows::try_lock_exclusive(file)
    }
    #[cfg(not(any(unix, windows)))]
    {
        let _ = file;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "file locks are not available on this platform",
        ))
    }
}

/// The Windows calls behind [`identity`] and [`try_lock_exclusive`].
#[cfg(windows)]
mod windows {
    use std::fs::File;
    use std::io;
    use std::os::windows::io::AsRawHandle;

    use windows_sys::Win32::Foundation::ERROR_LOCK_VIOLATION;
    use windows_sys::Win32::Storage::FileSystem::{
        BY_HANDLE_FILE_INFORMATION, GetFileInformationByHandle, LOCKFILE_EXCLUSIVE_LOCK, LOCKFILE_FAIL_IMMEDIATELY,
        LockFileEx,
    };
    use windows_sys::Win32::System::IO::OVERLAPPED;

    /// The byte [`try_lock_exclusive`] locks: the last offset a lock can name, which no file
    /// reaches (NTFS files end below 2^64 - 2^16).
    const LOCK_OFFSET: u64 = u64::MAX - 1;

    /// Volume serial number and file index, from `GetFileInformationByHandle` (std's
    /// `MetadataExt` fields for them are unstable).
    #[allow(unsafe_code)]
    pub(super) fn identity(file: &File) -> io::Result<super::FileId> {
        // SAFETY: an all-zero BY_HANDLE_FILE_INFORMATION is a valid value (plain integers).
        let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
        // SAFETY: the handle is open for as long as `file` is borrowed; `info` is a valid,
        // writable structure of the size the call expects.
        let done = unsafe { GetFileInformationByHandle(file.as_raw_handle(), &mut info) };
        if done == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(super::FileId {
            device: u64::from(info.dwVolumeSerialNumber),
            index: (u64::from(info.nFileIndexHigh) << 32) | u64::from(info.nFileIndexLow),
        })
    }

    /// `LockFileEx(LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY)` of the byte at
    /// [`LOCK_OFFSET`]; `ERROR_LOCK_VIOLATION` means another handle holds it.
    #[allow(unsafe_code)]
    pub(super) fn try_lock_exclusive(file: &File) -> io::Result<bool> {
        // SAFETY: an all-zero OVERLAPPED is a valid value (integers, a union of integers and a
        // pointer, and a null event handle).
        let mut overlapped: OVERLAPPED = unsafe { std::mem::zeroed() };
        overlapped.Anonymous.Anonymous.Offset = LOCK_OFFSET as u32;
        overlapped.Anonymous.Anonymous.OffsetHigh = (LOCK_OFFSET >> 32) as u32;
        let flags = LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY;
        // SAFETY: the handle is open for as long as `file` is borrowed; `overlapped` outlives
        // the call, which does not wait (FAIL_IMMEDIATELY on a handle std opened without
        // FILE_FLAG_OVERLAPPED: the call completes before it returns).
        let done = unsafe { LockFileEx(file.as_raw_handle(), flags, 0, 1, 0, &mut overlapped) };
        if done != 0 {
            return Ok(true);
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() == Some(ERROR_LOCK_VIOLATION as i32) {
            return Ok(false);
        }
        Err(error)
    }
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

    /// One open file holds the lock until it is closed; another open file of the same file
    /// (as another process would have) is refused meanwhile, and the two share an identity.
    #[test]
    fn a_lock_excludes_a_second_open_file_until_closed() {
        let dir = std::env::temp_dir().join(format!("acp-process-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log");
        std::fs::write(&path, b"data").unwrap();
        let first = OpenOptions::new().read(true).append(true).open(&path).unwrap();
        let second = OpenOptions::new().read(true).append(true).open(&path).unwrap();
        let taken = try_lock_exclusive(&first).unwrap();
        let refused = try_lock_exclusive(&second).unwrap();
        // The lock is far past the data: reading is not blocked.
        let readable = std::fs::read(&path).unwrap();
        let same = (identity(&first).unwrap(), identity_of_path(&path).unwrap());
        drop(first);
        let after = try_lock_exclusive(&second).unwrap();
        std::fs::write(dir.join("other"), b"").unwrap();
        let other = identity_of_path(&dir.join("other")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            taken && !refused && after,
            "taken {taken}, refused {refused}, after {after}"
        );
        assert_eq!(readable, b"data");
        assert_eq!(same.0, same.1);
        assert_ne!(same.0, other);
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
