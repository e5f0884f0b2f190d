//! Confining file access to the workspace, by directory handle rather than by path string.
//!
//! A [`Workspace`] holds the workspace root open (one file descriptor, shared by every session
//! and clone) and a base folder beneath it (a session's `cwd`, or the root itself). Every file
//! a tool or an `fs/*` request touches is opened *beneath that handle*: with `openat2` and
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` where the kernel has it (Linux 5.6+), else by a walk
//! of `openat(O_NOFOLLOW)` calls, one component at a time. So:
//!
//! - no path string is ever re-resolved: renaming or replacing the root, or a session's folder,
//!   after the session started cannot move the workspace somewhere else;
//! - a symbolic link anywhere below the root is refused, dangling or not — the link itself can
//!   be neither followed, read through, nor written through (writes replace nothing that is a
//!   link);
//! - what was checked is what is opened: there is no window between a check and the open in
//!   which a file can be swapped for a link (the check *is* the open);
//! - new files are written to a temporary file with a random name created with `O_EXCL`
//!   (a pre-placed file or link of that name is never written through), fsynced, then renamed
//!   over the target, whose permission bits are kept, and the folder is fsynced.
//!
//! The root itself is the user's setting (`AGENTACP_WORKSPACE_ROOT`, a sandbox mount, the home
//! directory) and is resolved once, when it is opened; symlinks in *its* path are followed then.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

/// A directory tree that file access is confined to: the workspace root, held open, and a
/// base folder beneath it. Cheap to clone (the handle is shared).
#[derive(Debug, Clone)]
pub struct Workspace {
    root: Arc<OwnedFd>,
    /// The root's canonical path when it was opened (for messages and absolute paths).
    root_path: PathBuf,
    /// The base folder, relative to the root, normalised (no `.`, `..` or empty parts).
    base: PathBuf,
}

/// Why a path was refused.
fn refused(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, message)
}

impl Workspace {
    /// Opens `root` as the workspace root (resolving its own path once) with the root as base.
    pub fn open(root: &Path) -> Result<Workspace, String> {
        let root_path = root
            .canonicalize()
            .map_err(|error| format!("the workspace root `{}` cannot be used: {error}", root.display()))?;
        let handle = rustix::fs::open(&root_path, dir_flags(), Mode::empty())
            .map_err(|error| format!("the workspace root `{}` cannot be opened: {error}", root.display()))?;
        Ok(Workspace {
            root: Arc::new(handle),
            root_path,
            base: PathBuf::new(),
        })
    }

    /// The base folder's path (canonical as of when the workspace was opened).
    pub fn path(&self) -> PathBuf {
        self.root_path.join(&self.base)
    }

    /// The workspace root's path (canonical as of when it was opened).
    pub fn root_path(&self) -> &Path {
        &self.root_path
    }

    /// Checks a `cwd` from `session/new` or `session/load` (absolute, an existing folder inside
    /// the root, reached without symlinks below the root) and returns the workspace based there.
    /// The `cwd` may name the root through another spelling of its path (it is canonicalised
    /// first, as editors may pass a path through a symlinked home, say).
    pub fn confine_cwd(&self, cwd: &str) -> Result<Workspace, String> {
        let path = Path::new(cwd);
        if !path.is_absolute() {
            return Err(format!("`cwd` must be an absolute path, got `{cwd}`"));
        }
        let outside = || {
            format!(
                "`cwd` `{cwd}` is outside the workspace root `{}`",
                self.root_path.display()
            )
        };
        let canonical = match path.canonicalize() {
            Ok(canonical) => canonical,
            // Why only for a path inside the root as written: for one outside, "no such file"
            // against "outside" would tell the client what exists beyond the workspace.
            Err(error)
                if path.starts_with(&self.root_path) && !path.components().any(|part| part == Component::ParentDir) =>
            {
                return Err(format!("`cwd` `{cwd}` cannot be used: {error}"));
            }
            Err(_) => return Err(outside()),
        };
        let Ok(relative) = canonical.strip_prefix(&self.root_path) else {
            return Err(outside());
        };
        let base = normalise(relative).ok_or_else(|| format!("`cwd` `{cwd}` cannot be resolved"))?;
        // The folder must be reachable beneath the handle, without links (this also catches a
        // swap between the canonicalisation above and here).
        self.open_beneath(&base, dir_flags(), Mode::empty())
            .map_err(|error| format!("`cwd` `{cwd}` cannot be used: {error}"))?;
        Ok(Workspace {
            root: self.root.clone(),
            root_path: self.root_path.clone(),
            base,
        })
    }

    /// Where `path` (relative to the base, or absolute) lies, relative to the root; refused
    /// when it leaves the base. Purely lexical: nothing on disk is consulted.
    fn locate(&self, path: &str) -> io::Result<PathBuf> {
        let given = Path::new(path);
        let outside = || {
            refused(format!(
                "`{path}` is outside `{}`",
                self.root_path.join(&self.base).display()
            ))
        };
        let joined = if given.is_absolute() {
            given
                .strip_prefix(&self.root_path)
                .map_err(|_| outside())?
                .to_path_buf()
        } else {
            self.base.join(given)
        };
        let normal = normalise(&joined).ok_or_else(outside)?;
        if !normal.starts_with(&self.base) {
            return Err(outside());
        }
        Ok(normal)
    }

    /// The absolute path `path` names, checked to be inside the base (lexically: nothing is
    /// opened). For messages and for handing a path to code that needs one; open files through
    /// [`read`](Workspace::read) / [`write`](Workspace::write) to be safe from links and swaps.
    pub fn resolve(&self, path: &str) -> io::Result<PathBuf> {
        Ok(self.root_path.join(self.locate(path)?))
    }

    /// Opens a regular file beneath the base for reading. Opened non-blocking, so a FIFO
    /// planted in the workspace is refused at once instead of waiting for a writer.
    pub fn open_file(&self, path: &str) -> io::Result<File> {
        let relative = self.locate(path)?;
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK;
        let fd = self.open_beneath(&relative, flags, Mode::empty())?;
        let file = File::from(fd);
        if !file.metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{path}` is not a file"),
            ));
        }
        Ok(file)
    }

    /// Reads a file beneath the base: its bytes, at most `limit` of them (a larger file is an
    /// error, not a truncated read).
    pub fn read(&self, path: &str, limit: u64) -> io::Result<Vec<u8>> {
        let file = self.open_file(path)?;
        let size = file.metadata()?.len();
        if size > limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{path}` is {size} bytes, over the {limit}-byte read limit"),
            ));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        file.take(limit + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > limit {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{path}` grew over the {limit}-byte read limit while being read"),
            ));
        }
        Ok(bytes)
    }

    /// Reads a UTF-8 text file beneath the base (at most 64 MiB).
    pub fn read_to_string(&self, path: &str) -> io::Result<String> {
        let bytes = self.read(path, MAX_FILE_BYTES)?;
        String::from_utf8(bytes)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("`{path}` is not UTF-8 text")))
    }

    /// Writes a whole file beneath the base, atomically: missing folders are created (beneath
    /// the base, without links), the content goes to a new temporary file beside the target
    /// (random name, `O_EXCL`), which is fsynced and renamed over the target; the target's
    /// permission bits are kept; the folder is fsynced. A target that is a symlink or a folder
    /// is refused.
    pub fn write(&self, path: &str, contents: &[u8]) -> io::Result<()> {
        self.write_with_names(path, contents, &mut random_names())
    }

    fn write_with_names(&self, path: &str, contents: &[u8], names: &mut dyn Iterator<Item = String>) -> io::Result<()> {
        let relative = self.locate(path)?;
        let (Some(folder), Some(name)) = (relative.parent(), relative.file_name()) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{path}` names no file"),
            ));
        };
        if relative == self.base {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{path}` is a folder"),
            ));
        }
        let folder = self.create_folders(folder)?;
        let mode = match rustix::fs::statat(&folder, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => match FileType::from_raw_mode(stat.st_mode) {
                FileType::RegularFile => Some(Mode::from_raw_mode(stat.st_mode) & Mode::from_raw_mode(0o7777)),
                FileType::Symlink => {
                    return Err(refused(format!(
                        "`{path}` is a symbolic link; links are not written through"
                    )));
                }
                FileType::Directory => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("`{path}` is a folder"),
                    ));
                }
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("`{path}` is not a regular file"),
                    ));
                }
            },
            Err(rustix::io::Errno::NOENT) => None,
            Err(error) => return Err(error.into()),
        };
        let (temporary, fd) = create_temporary(&folder, name, names)?;
        let written = (|| {
            if let Some(mode) = mode {
                rustix::fs::fchmod(&fd, mode)?;
            }
            let mut file = File::from(fd);
            file.write_all(contents)?;
            file.sync_all()?;
            rustix::fs::renameat(&folder, &temporary, &folder, name)?;
            Ok::<(), io::Error>(())
        })();
        if let Err(error) = written {
            let _ = rustix::fs::unlinkat(&folder, &temporary, AtFlags::empty());
            return Err(error);
        }
        // The rename is durable once the folder is.
        let _ = rustix::fs::fsync(&folder);
        Ok(())
    }

    /// Opens (creating what is missing) the folder `relative` beneath the root, no links.
    fn create_folders(&self, relative: &Path) -> io::Result<OwnedFd> {
        match self.open_beneath(relative, dir_flags(), Mode::empty()) {
            Ok(fd) => return Ok(fd),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
        let mut current = rustix::fs::openat(&*self.root, ".", dir_flags(), Mode::empty())?;
        for part in relative.iter() {
            match rustix::fs::mkdirat(&current, part, Mode::from_raw_mode(0o777)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(error) => return Err(error.into()),
            }
            current = rustix::fs::openat(&current, part, dir_flags() | OFlags::NOFOLLOW, Mode::empty())
                .map_err(|error| link_error(error, relative))?;
        }
        Ok(current)
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
                match rustix::fs::openat2(&*self.root, target, flags | OFlags::CLOEXEC, mode, resolve) {
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
    fn walk_beneath(&self, relative: &Path, flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
        let parts: Vec<&OsStr> = relative.iter().collect();
        let Some((last, folders)) = parts.split_last() else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty path"));
        };
        let mut current: Option<OwnedFd> = None;
        for part in folders {
            let at = current.as_ref().map_or(self.root.as_fd(), AsFd::as_fd);
            let next = rustix::fs::openat(at, *part, dir_flags() | OFlags::NOFOLLOW, Mode::empty())
                .map_err(|error| link_error(error, relative))?;
            current = Some(next);
        }
        let at = current.as_ref().map_or(self.root.as_fd(), AsFd::as_fd);
        rustix::fs::openat(at, *last, flags | OFlags::NOFOLLOW | OFlags::CLOEXEC, mode)
            .map_err(|error| link_error(error, relative))
    }
}

/// The largest file [`Workspace::read_to_string`] reads: 64 MiB.
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Flags for holding a folder open (`O_PATH` where it exists: no read permission needed).
fn dir_flags() -> OFlags {
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

/// A relative, normalised path: `.` dropped, `..` applied; `None` when it climbs above its
/// start or is not relative.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut parts: Vec<&OsStr> = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => parts.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.iter().collect())
}

/// Creates the temporary file beside `name` in `folder`: `O_CREAT | O_EXCL | O_NOFOLLOW`, so a
/// name that is taken (by a file or a planted link) is skipped, never written through.
fn create_temporary(
    folder: &OwnedFd,
    name: &OsStr,
    names: &mut dyn Iterator<Item = String>,
) -> io::Result<(PathBuf, OwnedFd)> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    for (attempt, suffix) in names.enumerate() {
        if attempt >= 16 {
            break;
        }
        let temporary = PathBuf::from(format!(".{}.{suffix}.agentacp.tmp", name.to_string_lossy()));
        match rustix::fs::openat(folder, &temporary, flags, Mode::from_raw_mode(0o666)) {
            Ok(fd) => return Ok((temporary, fd)),
            Err(rustix::io::Errno::EXIST) => continue,
            Err(error) => return Err(error.into()),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free temporary file name beside the target",
    ))
}

/// Unpredictable names: 64 bits from the standard library's randomly keyed hasher over a
/// counter, the time and the process id.
fn random_names() -> impl Iterator<Item = String> {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    std::iter::repeat_with(|| {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        hasher.write_u32(std::process::id());
        format!("{:016x}", hasher.finish())
    })
}

/// Creates `dir` and its missing parents, each readable by its user alone (`0700`), for
/// state that holds what sessions said and did; an existing folder is left as it is.
pub(crate) fn create_private_folder(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `root/project/src` and `outside/`, in a fresh temporary folder.
    fn tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(root.join("project/src")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        (dir, root, outside)
    }

    fn project(root: &Path) -> Workspace {
        let workspace = Workspace::open(root).unwrap();
        workspace.confine_cwd(root.join("project").to_str().unwrap()).unwrap()
    }

    #[test]
    fn cwd_must_be_absolute_and_inside_the_root() {
        let (_dir, root, outside) = tree();
        let workspace = Workspace::open(&root).unwrap();
        let project = workspace.confine_cwd(root.join("project").to_str().unwrap()).unwrap();
        assert_eq!(project.path(), root.canonicalize().unwrap().join("project"));
        assert!(workspace.confine_cwd("project").unwrap_err().contains("absolute"));
        assert!(
            workspace
                .confine_cwd(outside.to_str().unwrap())
                .unwrap_err()
                .contains("outside")
        );
        let sneaky = format!("{}/../outside", root.display());
        assert!(workspace.confine_cwd(&sneaky).unwrap_err().contains("outside"));
        assert!(workspace.confine_cwd("/definitely/not/here").is_err());
        assert!(workspace.confine_cwd(root.to_str().unwrap()).is_ok(), "the root itself");
        // Outside, a path that exists and one that does not get the same answer (else the
        // answer tells what exists there); inside, a missing folder is named as missing.
        let (existing, missing) = (outside.join("file.txt"), outside.join("no-such-file"));
        std::fs::write(&existing, "x").unwrap();
        let refusal = |path: &Path| workspace.confine_cwd(path.to_str().unwrap()).unwrap_err();
        assert_eq!(
            refusal(&existing).replace("file.txt", "X"),
            refusal(&missing).replace("no-such-file", "X")
        );
        let sneaky_missing = root.join("../outside/no-such-file");
        assert!(
            refusal(&sneaky_missing).contains("outside"),
            "{}",
            refusal(&sneaky_missing)
        );
        assert!(refusal(&root.join("no-such-folder")).contains("No such file"));
    }

    #[test]
    fn a_symlink_out_of_the_root_is_refused() {
        let (_dir, root, outside) = tree();
        std::os::unix::fs::symlink(&outside, root.join("link")).unwrap();
        let workspace = Workspace::open(&root).unwrap();
        let link = root.join("link");
        assert!(
            workspace
                .confine_cwd(link.to_str().unwrap())
                .unwrap_err()
                .contains("outside")
        );
        assert!(workspace.read("link/file.txt", 10).is_err());
        assert!(workspace.write("link/file.txt", b"x").is_err());
        assert!(!outside.join("file.txt").exists());
    }

    #[test]
    fn tool_paths_stay_inside_the_base() {
        let (_dir, root, _outside) = tree();
        let base = project(&root);
        assert!(base.resolve("src/new.rs").unwrap().ends_with("project/src/new.rs"));
        assert!(base.resolve("src/../src/lib.rs").is_ok());
        let absolute = root.canonicalize().unwrap().join("project/src/lib.rs");
        assert!(base.resolve(absolute.to_str().unwrap()).is_ok());
        for bad in ["../../outside/x", "/etc/passwd", "nope/../../x", ".."] {
            let error = base.resolve(bad).unwrap_err();
            assert!(error.to_string().contains("outside"), "{bad}: {error}");
        }
        let sibling = root.canonicalize().unwrap().join("other/x");
        assert!(
            base.resolve(sibling.to_str().unwrap()).is_err(),
            "inside the root, outside the base"
        );
    }

    #[test]
    fn write_then_read_creating_folders_and_keeping_the_mode() {
        use std::os::unix::fs::PermissionsExt;
        let (_dir, root, _outside) = tree();
        let base = project(&root);
        base.write("a/b/notes.txt", b"hello").unwrap();
        assert_eq!(base.read_to_string("a/b/notes.txt").unwrap(), "hello");
        let script = root.join("project/run.sh");
        std::fs::write(&script, "old").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        base.write("run.sh", b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&script).unwrap(), "new");
        assert_eq!(std::fs::metadata(&script).unwrap().permissions().mode() & 0o777, 0o755);
        let leftovers: Vec<_> = std::fs::read_dir(root.join("project"))
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "no temporary file is left behind");
        assert!(base.write(".", b"x").is_err(), "the base itself is a folder");
        assert!(base.read("src", 10).is_err(), "a folder is not read as a file");
    }

    /// Issue #23.1: `ln -s OUTSIDE/pwned.txt WORKSPACE/notes.txt`, then a write of `notes.txt`
    /// created `OUTSIDE/pwned.txt`.
    #[test]
    fn a_dangling_symlink_is_not_written_through() {
        let (_dir, root, outside) = tree();
        std::os::unix::fs::symlink(outside.join("pwned.txt"), root.join("project/notes.txt")).unwrap();
        let error = project(&root).write("notes.txt", b"pwned").unwrap_err();
        assert!(error.to_string().contains("symbolic link"), "{error}");
        assert!(!outside.join("pwned.txt").exists());
        assert!(project(&root).read("notes.txt", 100).is_err());
    }

    /// Issue #23.2: the session's folder replaced by a link to outside after the session began.
    #[test]
    fn a_session_folder_swapped_for_a_link_reaches_nothing_outside() {
        let (_dir, root, outside) = tree();
        let session = project(&root);
        std::fs::write(outside.join("secret.txt"), "secret").unwrap();
        std::fs::rename(root.join("project"), root.join("moved")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("project")).unwrap();
        assert!(session.read_to_string("secret.txt").is_err());
        assert!(session.write("planted.txt", b"x").is_err());
        assert!(!outside.join("planted.txt").exists());
        // Nor does replacing the root's own path move the workspace.
        let (_dir2, root2, outside2) = tree();
        let session = project(&root2);
        std::fs::write(outside2.join("secret.txt"), "secret").unwrap();
        std::fs::create_dir_all(outside2.join("project")).unwrap();
        std::fs::write(outside2.join("project/secret.txt"), "secret").unwrap();
        std::fs::rename(&root2, root2.with_file_name("old-root")).unwrap();
        std::os::unix::fs::symlink(&outside2, &root2).unwrap();
        assert!(session.read_to_string("secret.txt").is_err());
    }

    /// Issue #23.3: a file flipped between a regular file and a link to a secret outside, while
    /// it is read: the secret must never come back.
    #[test]
    fn reads_racing_a_file_flipped_to_a_symlink_never_see_outside() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let (_dir, root, outside) = tree();
        std::fs::write(outside.join("secret.txt"), "SECRET").unwrap();
        let session = project(&root);
        let target = root.join("project/flip.txt");
        let stop = Arc::new(AtomicBool::new(false));
        let flipper = {
            let stop = stop.clone();
            let (target, secret) = (target.clone(), outside.join("secret.txt"));
            let staged_file = target.with_file_name("staged-file");
            let staged_link = target.with_file_name("staged-link");
            std::thread::spawn(move || {
                let mut flips = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    std::fs::write(&staged_file, "public").unwrap();
                    std::fs::rename(&staged_file, &target).unwrap();
                    let _ = std::fs::remove_file(&staged_link);
                    std::os::unix::fs::symlink(&secret, &staged_link).unwrap();
                    std::fs::rename(&staged_link, &target).unwrap();
                    flips += 1;
                }
                flips
            })
        };
        let mut leaked = 0;
        let mut read = 0;
        for _ in 0..3000 {
            match session.read_to_string("flip.txt") {
                Ok(text) if text == "SECRET" => leaked += 1,
                Ok(_) => read += 1,
                Err(_) => {}
            }
        }
        stop.store(true, Ordering::Relaxed);
        let flips = flipper.join().unwrap();
        assert_eq!(leaked, 0, "the secret leaked ({read} public reads, {flips} flips)");
    }

    /// Issue #23.4: the temporary file's name was predictable; one planted as a link sent the
    /// content outside. A taken name (file or link) is skipped, never written through.
    #[test]
    fn a_planted_temporary_name_is_skipped_not_written_through() {
        let (_dir, root, outside) = tree();
        let session = project(&root);
        let planted = root.join("project/.notes.txt.planted.agentacp.tmp");
        std::os::unix::fs::symlink(outside.join("pwned.txt"), &planted).unwrap();
        let mut names = ["planted".to_string(), "fresh".to_string()].into_iter();
        session.write_with_names("notes.txt", b"content", &mut names).unwrap();
        assert!(!outside.join("pwned.txt").exists());
        assert_eq!(
            std::fs::read_to_string(root.join("project/notes.txt")).unwrap(),
            "content"
        );
        assert!(std::fs::symlink_metadata(&planted).unwrap().file_type().is_symlink());
        let first: Vec<String> = random_names().take(2).collect();
        assert_ne!(first[0], first[1]);
    }

    /// A FIFO planted in the workspace: opening it for reading used to wait for a writer
    /// forever; it is refused at once.
    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let (_dir, root, _outside) = tree();
        let fifo = root.join("project/pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|status| status.success()) {
            eprintln!("skipped: mkfifo is not available");
            return;
        }
        let session = project(&root);
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(session.read("pipe", 10).map(|_| ()));
        });
        let outcome = finished
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the read returned instead of waiting for a writer");
        assert!(outcome.unwrap_err().to_string().contains("not a file"));
    }

    #[test]
    fn the_fallback_walk_refuses_links_too() {
        let (_dir, root, outside) = tree();
        std::os::unix::fs::symlink(&outside, root.join("project/out")).unwrap();
        std::fs::write(outside.join("x"), "x").unwrap();
        let session = project(&root);
        let relative = session.locate("out/x").unwrap();
        let error = session
            .walk_beneath(&relative, OFlags::RDONLY, Mode::empty())
            .unwrap_err();
        assert!(
            error.to_string().contains("symbolic link") || error.to_string().contains("not a folder"),
            "{error}"
        );
        let inside = session.locate("src").unwrap();
        assert!(session.walk_beneath(&inside, dir_flags(), Mode::empty()).is_ok());
    }
}
