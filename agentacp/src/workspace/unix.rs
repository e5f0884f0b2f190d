//! The workspace's handles on Unix: `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` where
//! Linux has it, else a walk of `openat(O_NOFOLLOW)` calls (rustix).

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::entry::{Entry, refused};

/// The workspace root, held open.
#[derive(Debug)]
pub(super) struct Root(OwnedFd);

/// A folder beneath the root, held open (where a write happens).
pub(super) struct Folder(OwnedFd);

/// What a write keeps of the file it replaces: its permission bits.
pub(super) type Keep = Mode;

impl Root {
    /// Opens the root (its canonical path).
    pub(super) fn open(path: &Path) -> io::Result<Root> {
        Ok(Root(rustix::fs::open(path, dir_flags(), Mode::empty())?))
    }

    /// Opens the regular file `relative` (normalised) for reading, non-blocking (a FIFO does
    /// not wait for a writer), refusing links.
    pub(super) fn open_file(&self, relative: &Path) -> io::Result<File> {
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK;
        Ok(File::from(self.open_beneath(relative, flags, Mode::empty())?))
    }

    /// Opens the folder `relative` (normalised; empty for the root), refusing links.
    pub(super) fn open_folder(&self, relative: &Path) -> io::Result<Folder> {
        Ok(Folder(self.open_beneath(relative, dir_flags(), Mode::empty())?))
    }

    /// Opens (creating what is missing) the folder `relative` beneath the root, no links.
    pub(super) fn create_folders(&self, relative: &Path) -> io::Result<Folder> {
        match self.open_beneath(relative, dir_flags(), Mode::empty()) {
            Ok(fd) => return Ok(Folder(fd)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
        let mut current = rustix::fs::openat(&self.0, ".", dir_flags(), Mode::empty())?;
        for part in relative.iter() {
            match rustix::fs::mkdirat(&current, part, Mode::from_raw_mode(0o777)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(error) => return Err(error.into()),
            }
            current = rustix::fs::openat(&current, part, dir_flags() | OFlags::NOFOLLOW, Mode::empty())
                .map_err(|error| link_error(error, relative))?;
        }
        Ok(Folder(current))
    }

    /// Opens `relative` (normalised, relative to the root) beneath the root handle, refusing
    /// symlinks on the way and at the end.
    fn open_beneath(&self, relative: &Path, flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
        let target: &Path = if relative.as_os_str().is_empty() {
            Path::new(".")
        } else {
            relative
        };
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            use std::sync::atomic::{AtomicBool, Ordering};
            static NO_OPENAT2: AtomicBool = AtomicBool::new(false);
            if !NO_OPENAT2.load(Ordering::Relaxed) {
                use rustix::fs::ResolveFlags;
                let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
                match rustix::fs::openat2(&self.0, target, flags | OFlags::CLOEXEC, mode, resolve) {
                    // No openat2 here (old kernel, or a seccomp filter): walk instead, from now on.
                    Err(rustix::io::Errno::NOSYS | rustix::io::Errno::PERM) => {
                        NO_OPENAT2.store(true, Ordering::Relaxed)
                    }
                    // openat2 retries internally, but says AGAIN when renames keep racing it.
                    Err(rustix::io::Errno::AGAIN) => {}
                    other => return other.map_err(|error| link_error(error, relative)),
                }
            }
        }
        self.walk_beneath(target, flags, mode)
    }

    /// The portable form of [`open_beneath`](Self::open_beneath): one `openat(O_NOFOLLOW)` per
    /// component. `relative` has no `..` (it is normalised), so the walk cannot climb out.
    pub(super) fn walk_beneath(&self, relative: &Path, flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
        let parts: Vec<&OsStr> = relative.iter().collect();
        let Some((last, folders)) = parts.split_last() else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty path"));
        };
        let mut current: Option<OwnedFd> = None;
        for part in folders {
            let at = current.as_ref().map_or(self.0.as_fd(), AsFd::as_fd);
            let next = rustix::fs::openat(at, *part, dir_flags() | OFlags::NOFOLLOW, Mode::empty())
                .map_err(|error| link_error(error, relative))?;
            current = Some(next);
        }
        let at = current.as_ref().map_or(self.0.as_fd(), AsFd::as_fd);
        rustix::fs::openat(at, *last, flags | OFlags::NOFOLLOW | OFlags::CLOEXEC, mode)
            .map_err(|error| link_error(error, relative))
    }
}

impl Folder {
    /// What the folder holds under `name` (`lstat`: a link is not followed).
    pub(super) fn entry(&self, name: &OsStr) -> io::Result<Entry<Keep>> {
        match rustix::fs::statat(&self.0, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(match FileType::from_raw_mode(stat.st_mode) {
                FileType::RegularFile => Entry::File(Mode::from_raw_mode(stat.st_mode) & Mode::from_raw_mode(0o7777)),
                FileType::Symlink => Entry::Link,
                FileType::Directory => Entry::Folder,
                _ => Entry::Other,
            }),
            Err(rustix::io::Errno::NOENT) => Ok(Entry::Missing),
            Err(error) => Err(error.into()),
        }
    }

    /// Creates `name` for writing with `O_CREAT | O_EXCL | O_NOFOLLOW`; `None` when the name
    /// is taken (by a file or a link, which is left alone).
    pub(super) fn create_new(&self, name: &Path) -> io::Result<Option<File>> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match rustix::fs::openat(&self.0, name, flags, Mode::from_raw_mode(0o666)) {
            Ok(fd) => Ok(Some(File::from(fd))),
            Err(rustix::io::Errno::EXIST) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    /// Renames `from` over `to`, both in this folder (`renameat`).
    pub(super) fn rename(&self, from: &Path, to: &OsStr) -> io::Result<()> {
        Ok(rustix::fs::renameat(&self.0, from, &self.0, to)?)
    }

    /// Removes the file `name`, if it can (a failed write's temporary file).
    pub(super) fn remove(&self, name: &Path) {
        let _ = rustix::fs::unlinkat(&self.0, name, AtFlags::empty());
    }

    /// Flushes the folder (a rename in it is durable once the folder is).
    pub(super) fn sync(&self) {
        let _ = rustix::fs::fsync(&self.0);
    }
}

/// Gives the new file the permission bits of the one it replaces.
pub(super) fn keep(file: &File, mode: &Keep) -> io::Result<()> {
    Ok(rustix::fs::fchmod(file, *mode)?)
}

/// The part of `given` (absolute) below `root`; `None` when it is not below it.
pub(super) fn beneath(root: &Path, given: &Path) -> Option<PathBuf> {
    given.strip_prefix(root).ok().map(Path::to_path_buf)
}

/// Whether the normalised relative path `path` is `base` or lies below it.
pub(super) fn starts_with(path: &Path, base: &Path) -> bool {
    path.starts_with(base)
}

/// Every name is a plain file name on Unix.
pub(super) fn check_name(_part: &OsStr) -> Result<(), String> {
    Ok(())
}

/// A path as messages show it.
pub(super) fn shown(path: &Path) -> &Path {
    path
}

/// Creates `dir` and its missing parents, each `0700`.
pub(super) fn create_private_folder(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

/// Flags for holding a folder open (`O_PATH` where it exists: no read permission needed).
pub(super) fn dir_flags() -> OFlags {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let path = OFlags::PATH;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let path = OFlags::RDONLY;
    path | OFlags::DIRECTORY | OFlags::CLOEXEC
}

/// What the kernel says when a walk meets a symlink (`ELOOP`; `ENOTDIR` for a link where a
/// folder was expected; `EXDEV` when `RESOLVE_BENEATH` is violated) as a clear refusal.
fn link_error(error: rustix::io::Errno, path: &Path) -> io::Error {
    use rustix::io::Errno;
    match error {
        Errno::LOOP | Errno::MLINK => refused(format!(
            "`{}` passes through a symbolic link; links are not followed inside the workspace",
            path.display()
        )),
        Errno::XDEV => refused(format!("`{}` leads outside the workspace", path.display())),
        Errno::NOTDIR => io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "`{}`: a part of the path is not a folder (or is a symbolic link)",
                path.display()
            ),
        ),
        other => io::Error::from(other),
    }
}
