//! Reading a token file, and changing one without losing a concurrent change.
//!
//! [`read`] takes regular files only, of at most [`MAX_FILE_BYTES`], and never blocks: a FIFO
//! would wait for a writer and `/dev/zero` never ends, so both are refused without being read.
//!
//! [`lock`] takes the lock writers hold across a read-modify-write: an exclusive lock (`flock`
//! on Unix, `LockFileEx` on Windows) on the sidecar file `<token file>.lock`, not on the token
//! file itself, so the token file can still be replaced by a rename (a reader only ever sees a
//! whole version).

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use acp_process::file::Refused;

/// The largest token file read: 1 MiB. An entry is at most 200 bytes (a 128-character
/// identity, a space, `sha256:` and 64 hex digits), so that is over 5,000 entries; the limit
/// bounds the memory a server or `scaffold-aip token` spends on any file.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// How long [`lock`] waits for a lock another process holds: a writer holds it for the
/// milliseconds of one read-modify-write, so a lock held longer is stuck.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);

/// The bytes of the token file `path`, `None` when it does not exist. Refused, with an error
/// sentence naming `path`: anything but a regular file (opened without blocking, then checked
/// on the open handle), and a file over [`MAX_FILE_BYTES`] (also one that grows past it while
/// it is read).
pub fn read(path: &Path) -> Result<Option<Vec<u8>>, String> {
    match acp_process::file::read_regular(path, MAX_FILE_BYTES) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(Refused::Io(error)) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(Refused::Io(error)) => Err(format!("{}: {error}", path.display())),
        Err(Refused::NotRegular(kind)) => Err(not_regular(path, kind)),
        Err(Refused::TooLarge(size)) => Err(too_large(path, size)),
    }
}

/// The error for a file over [`MAX_FILE_BYTES`], with its size when known.
fn too_large(path: &Path, size: Option<u64>) -> String {
    let size = size.map(|size| format!(" ({size} bytes)")).unwrap_or_default();
    format!(
        "{}: the file is larger than a token file may be{size}; the limit is {MAX_FILE_BYTES} bytes (1 MiB)",
        path.display()
    )
}

/// Refuses `path` unless `metadata` is a regular file's.
fn check_kind(path: &Path, metadata: &Metadata) -> Result<(), String> {
    if metadata.is_file() {
        return Ok(());
    }
    Err(not_regular(path, acp_process::file::kind_of(&metadata.file_type())))
}

/// The error for `path`, which is `kind`, not a regular file.
fn not_regular(path: &Path, kind: &str) -> String {
    format!(
        "{}: not a regular file ({kind}); a token file is a regular file",
        path.display()
    )
}

/// The exclusive lock on a token file taken by [`lock`]; released when dropped (or when its
/// process dies).
#[derive(Debug)]
pub struct Lock {
    _file: File,
}

/// `<path>.lock`: the file whose lock guards changes to the token file `path`.
pub fn lock_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or(path.as_os_str()).to_os_string();
    name.push(".lock");
    path.with_file_name(name)
}

/// Takes the exclusive lock guarding changes to the token file `path` (see the module docs),
/// waiting at most [`LOCK_WAIT`] for another holder. Hold it from reading the file to
/// replacing it. The lock file is created (mode 0600) when absent and is left in place
/// (removing it would let two writers lock two different files). A `path` that exists but is
/// not a regular file is refused before any lock file is made beside it.
pub fn lock(path: &Path) -> Result<Lock, String> {
    match std::fs::metadata(path) {
        Ok(metadata) => check_kind(path, &metadata)?,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(format!("{}: {error}", path.display())),
    }
    let lock_path = lock_path(path);
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
    }
    let file = options.open(&lock_path).map_err(|error| match lock_path.parent() {
        Some(folder) if error.kind() == io::ErrorKind::NotFound && !folder.as_os_str().is_empty() => {
            format!("{}: there is no folder {}", path.display(), folder.display())
        }
        _ => format!("cannot open the lock file {}: {error}", lock_path.display()),
    })?;
    let metadata = file
        .metadata()
        .map_err(|error| format!("{}: {error}", lock_path.display()))?;
    check_kind(&lock_path, &metadata)?;
    lock_exclusive(&file, &lock_path)?;
    Ok(Lock { _file: file })
}

/// Takes the exclusive lock on `file` ([`acp_process::file::try_lock_exclusive`]: `flock` on
/// Unix, `LockFileEx` on Windows), trying again every few milliseconds until [`LOCK_WAIT`] has
/// passed (a blocking lock could wait forever on a stuck holder).
fn lock_exclusive(file: &File, lock_path: &Path) -> Result<(), String> {
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match acp_process::file::try_lock_exclusive(file) {
            Ok(true) => return Ok(()),
            Ok(false) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Ok(false) => {
                return Err(format!(
                    "{}: another process has held this lock for over {} s; try again once it has finished",
                    lock_path.display(),
                    LOCK_WAIT.as_secs()
                ));
            }
            Err(error) => return Err(format!("cannot lock {}: {error}", lock_path.display())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_is_read_and_an_absent_one_is_none() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        assert_eq!(read(&path).unwrap(), None);
        std::fs::write(&path, "alice sha256:00\n").unwrap();
        assert_eq!(read(&path).unwrap().unwrap(), b"alice sha256:00\n");
    }

    #[test]
    fn a_file_over_the_limit_is_refused_and_one_at_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        let file = File::create(&path).unwrap();
        file.set_len(MAX_FILE_BYTES).unwrap();
        assert_eq!(read(&path).unwrap().unwrap().len() as u64, MAX_FILE_BYTES);
        file.set_len(MAX_FILE_BYTES + 1).unwrap();
        let error = read(&path).unwrap_err();
        assert_eq!(
            error,
            format!(
                "{}: the file is larger than a token file may be (1048577 bytes); the limit is 1048576 bytes (1 MiB)",
                path.display()
            )
        );
    }

    #[test]
    fn a_folder_is_refused_and_gets_no_lock_file() {
        let dir = tempfile::tempdir().unwrap();
        let error = read(dir.path()).unwrap_err();
        assert!(
            error.ends_with("not a regular file (a directory); a token file is a regular file"),
            "{error}"
        );
        let folder = dir.path().join("tokens");
        std::fs::create_dir(&folder).unwrap();
        let error = lock(&folder).unwrap_err();
        assert_eq!(
            error,
            format!(
                "{}: not a regular file (a directory); a token file is a regular file",
                folder.display()
            )
        );
        assert!(!lock_path(&folder).exists());
    }

    #[test]
    fn a_token_file_in_a_missing_folder_is_named_with_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nowhere/tokens");
        let folder = dir.path().join("nowhere");
        let expected = format!("{}: there is no folder {}", path.display(), folder.display());
        assert_eq!(lock(&path).unwrap_err(), expected);
    }

    #[test]
    fn the_lock_file_sits_beside_the_token_file() {
        assert_eq!(
            lock_path(Path::new("/etc/agent/tokens")),
            Path::new("/etc/agent/tokens.lock")
        );
        assert_eq!(lock_path(Path::new("tokens")), Path::new("tokens.lock"));
    }

    /// The lock excludes a second holder (another open file, as another process would have)
    /// until the first is dropped.
    #[test]
    fn the_lock_is_exclusive_until_dropped() {
        use acp_process::file::try_lock_exclusive;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        let held = lock(&path).unwrap();
        let other = File::open(lock_path(&path)).unwrap();
        assert!(!try_lock_exclusive(&other).unwrap());
        drop(held);
        assert!(try_lock_exclusive(&other).unwrap());
        assert!(!path.exists(), "locking creates only the lock file");
    }
}
