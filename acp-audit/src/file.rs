//! Opening log files: regular files only, and one writer at a time (an exclusive lock held for
//! as long as the file is open for writing: advisory on Unix, on a byte past the data on
//! Windows, so readers are not blocked there either).

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

use super::AuditError;

/// Opens `path` for reading (verification), refusing anything but a regular file without
/// blocking on it (a FIFO would wait for a writer, `/dev/zero` never ends).
pub(crate) fn open_for_reading(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    open_regular(path, &mut options)
}

/// Opens `path` for reading and appending, creating the file and its parents when absent (a
/// new file's folder is synced, so the file cannot vanish with records synced into it).
/// Anything but a regular file is refused. On Unix what it creates is its user's alone
/// (folders `0700`, the file `0600`): a log records what sessions did.
pub(crate) fn open_for_append(path: &Path) -> io::Result<File> {
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(parent) = parent {
        let mut folders = std::fs::DirBuilder::new();
        folders.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut folders, 0o700);
        folders.create(parent)?;
    }
    let existed = path.exists();
    let mut options = OpenOptions::new();
    options.read(true).append(true).create(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = open_regular(path, &mut options)?;
    if !existed {
        sync_dir(parent.unwrap_or(Path::new(".")))?;
    }
    Ok(file)
}

fn open_regular(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    use acp_process::file::Refused;
    // Opening a FIFO would block until a writer comes: the open does not wait, and anything
    // but a regular file is refused.
    acp_process::file::open_regular(path, options).map_err(|refused| match refused {
        Refused::Io(error) => error,
        Refused::NotRegular(kind) => io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("not a regular file ({kind}); an audit log is a regular file"),
        ),
        // An open reads nothing: it has no size to refuse.
        Refused::TooLarge(_) => io::Error::new(io::ErrorKind::InvalidData, "the audit log is too large"),
    })
}

/// Makes `dir`'s entries durable (a new or renamed file in it).
#[cfg(unix)]
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Makes `dir`'s entries durable (nothing to do on this platform).
#[cfg(not(unix))]
pub(crate) fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

/// How long a new writer waits for the lock held by another: time for a writer that is
/// exiting (an agent restarted at once, one killed with its parent) to be gone.
const LOCK_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Takes the exclusive lock on `file`, the log at `path` ([`acp_process::file::try_lock_exclusive`]:
/// `flock` on Unix, `LockFileEx` of a byte past the data on Windows, so readers are never
/// blocked), waiting at most [`LOCK_GRACE`]: [`AuditError::Locked`] when another open file (in
/// this or another process) still holds it then. The lock goes with the open file: it is
/// released when the file is closed, or its process dies.
pub(crate) fn lock_exclusive(file: &File, path: &Path) -> Result<(), AuditError> {
    let deadline = std::time::Instant::now() + LOCK_GRACE;
    loop {
        match acp_process::file::try_lock_exclusive(file) {
            Ok(true) => return Ok(()),
            Ok(false) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Ok(false) => {
                return Err(AuditError::Locked {
                    path: path.to_path_buf(),
                    holder: lock_holder(file),
                });
            }
            Err(error) => {
                return Err(AuditError::Io(io::Error::new(
                    error.kind(),
                    format!("cannot lock the log for writing: {error}"),
                )));
            }
        }
    }
}

/// The pid holding an `flock` on `file`, from `/proc/locks` (best effort: `None` when it
/// cannot be told, e.g. the lock was released meanwhile).
#[cfg(target_os = "linux")]
fn lock_holder(file: &File) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    let metadata = file.metadata().ok()?;
    let (major, minor) = (rustix::fs::major(metadata.dev()), rustix::fs::minor(metadata.dev()));
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    // `1: FLOCK  ADVISORY  WRITE 1234 fe:00:5373980 0 EOF` (waiters have `->` after the number).
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [_, "FLOCK", _, _, pid, id, ..] = fields.as_slice() else {
            return None;
        };
        let mut id = id.split(':');
        let same = u32::from_str_radix(id.next()?, 16).ok()? == major
            && u32::from_str_radix(id.next()?, 16).ok()? == minor
            && id.next()?.parse::<u64>().ok()? == metadata.ino();
        same.then(|| pid.parse().ok()).flatten()
    })
}

#[cfg(not(target_os = "linux"))]
fn lock_holder(_file: &File) -> Option<u32> {
    None
}

/// Whether `a` and `b` are the same file (not a path replaced in between): device and inode
/// on Unix, volume serial number and file index on Windows.
pub(crate) fn same_file(a: &File, b: &File) -> io::Result<bool> {
    use acp_process::file::identity;
    Ok(identity(a)? == identity(b)?)
}
