//! Confining file access to the workspace, by directory handle rather than by path string.
//!
//! A [`Workspace`] holds the workspace root open (one handle, shared by every session and
//! clone) and a base folder beneath it (a session's `cwd`, or the root itself). Every file a
//! tool or an `fs/*` request touches is opened *beneath that handle*, one way per system:
//!
//! - on Unix (`unix.rs`), with `openat2` and `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` where the
//!   kernel has it (Linux 5.6+), else by a walk of `openat(O_NOFOLLOW)` calls, one component
//!   at a time;
//! - on Windows (`windows.rs`), by a walk of `cap-std` opens relative to the folder handle
//!   (`NtCreateFile` with a root directory), one component at a time, none following a
//!   symbolic link or junction.
//!
//! So:
//!
//! - a path is first placed lexically: `..` may not climb above the base, an absolute path must
//!   lie below the root (on Windows: drive letters, UNC shares and `\\?\` prefixes compared as
//!   Windows does, without regard to case), and on Windows a name that is a device (`NUL`,
//!   `COM1`) or an alternate data stream (`file.txt:stream`) is refused;
//! - no path string is ever re-resolved: renaming or replacing the root, or a session's folder,
//!   after the session started cannot move the workspace somewhere else;
//! - a symbolic link (or junction) anywhere below the root is refused, dangling or not — the
//!   link itself can be neither followed, read through, nor written through (writes replace
//!   nothing that is a link);
//! - what was checked is what is opened: there is no window between a check and the open in
//!   which a file can be swapped for a link (the check *is* the open);
//! - new files are written to a temporary file with a random name that must not exist yet
//!   (a pre-placed file or link of that name is never written through), flushed to disk, then
//!   renamed over the target, whose permission bits are kept (Unix), and the folder is flushed
//!   (Unix).
//!
//! The root itself is the user's setting (`AGENTACP_WORKSPACE_ROOT`, a sandbox mount, the home
//! directory) and is resolved once, when it is opened; symlinks in *its* path are followed then.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use entry::{Entry, invalid, refused};

mod entry;
#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as system;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as system;

/// A directory tree that file access is confined to: the workspace root, held open, and a
/// base folder beneath it. Cheap to clone (the handle is shared).
#[derive(Debug, Clone)]
pub struct Workspace {
    root: Arc<system::Root>,
    /// The root's canonical path when it was opened (for messages and absolute paths).
    root_path: PathBuf,
    /// The base folder, relative to the root, normalised (no `.`, `..` or empty parts).
    base: PathBuf,
}

impl Workspace {
    /// Opens `root` as the workspace root (resolving its own path once) with the root as base.
    pub fn open(root: &Path) -> Result<Workspace, String> {
        let root_path = root
            .canonicalize()
            .map_err(|error| format!("the workspace root `{}` cannot be used: {error}", root.display()))?;
        let handle = system::Root::open(&root_path)
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
                system::shown(&self.root_path).display()
            )
        };
        let canonical = match path.canonicalize() {
            Ok(canonical) => canonical,
            // Why only for a path inside the root as written: for one outside, "no such file"
            // against "outside" would tell the client what exists beyond the workspace.
            Err(error)
                if system::beneath(&self.root_path, path).is_some()
                    && !path.components().any(|part| part == Component::ParentDir) =>
            {
                return Err(format!("`cwd` `{cwd}` cannot be used: {error}"));
            }
            Err(_) => return Err(outside()),
        };
        let Some(relative) = system::beneath(&self.root_path, &canonical) else {
            return Err(outside());
        };
        let base = normalise(&relative).ok_or_else(|| format!("`cwd` `{cwd}` cannot be resolved"))?;
        // The folder must be reachable beneath the handle, without links (this also catches a
        // swap between the canonicalisation above and here).
        self.root
            .open_folder(&base)
            .map_err(|error| format!("`cwd` `{cwd}` cannot be used: {error}"))?;
        Ok(Workspace {
            root: self.root.clone(),
            root_path: self.root_path.clone(),
            base,
        })
    }

    /// Where `path` (relative to the base, or absolute) lies, relative to the root; refused
    /// when it leaves the base or names what the system would not treat as a plain file name
    /// (on Windows: a device or an alternate data stream). Purely lexical: nothing on disk is
    /// consulted.
    fn locate(&self, path: &str) -> io::Result<PathBuf> {
        let given = Path::new(path);
        let outside = || {
            refused(format!(
                "`{path}` is outside `{}`",
                system::shown(&self.root_path.join(&self.base)).display()
            ))
        };
        let joined = if given.is_absolute() {
            system::beneath(&self.root_path, given).ok_or_else(outside)?
        } else {
            self.base.join(given)
        };
        let normal = normalise(&joined).ok_or_else(outside)?;
        if !system::starts_with(&normal, &self.base) {
            return Err(outside());
        }
        for part in normal.iter() {
            system::check_name(part).map_err(|why| refused(format!("`{path}`: {why}")))?;
        }
        Ok(normal)
    }

    /// The absolute path `path` names, checked to be inside the base (lexically: nothing is
    /// opened). For messages and for handing a path to code that needs one; open files through
    /// [`read`](Workspace::read) / [`write`](Workspace::write) to be safe from links and swaps.
    pub fn resolve(&self, path: &str) -> io::Result<PathBuf> {
        Ok(self.root_path.join(self.locate(path)?))
    }

    /// Opens a regular file beneath the base for reading. On Unix it is opened non-blocking,
    /// so a FIFO planted in the workspace is refused at once instead of waiting for a writer.
    pub fn open_file(&self, path: &str) -> io::Result<File> {
        let relative = self.locate(path)?;
        let file = self.root.open_file(&relative)?;
        if !file.metadata()?.is_file() {
            return Err(invalid(format!("`{path}` is not a file")));
        }
        Ok(file)
    }

    /// Reads a file beneath the base: its bytes, at most `limit` of them (a larger file is an
    /// error, not a truncated read).
    pub fn read(&self, path: &str, limit: u64) -> io::Result<Vec<u8>> {
        let file = self.open_file(path)?;
        let size = file.metadata()?.len();
        if size > limit {
            return Err(invalid(format!(
                "`{path}` is {size} bytes, over the {limit}-byte read limit"
            )));
        }
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        file.take(limit + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > limit {
            return Err(invalid(format!(
                "`{path}` grew over the {limit}-byte read limit while being read"
            )));
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
    /// (random name, which must not exist yet), which is flushed to disk and renamed over the
    /// target; the target's permission bits are kept (Unix); the folder is flushed (Unix). A
    /// target that is a symlink or a folder is refused.
    pub fn write(&self, path: &str, contents: &[u8]) -> io::Result<()> {
        self.write_with_names(path, contents, &mut random_names())
    }

    fn write_with_names(&self, path: &str, contents: &[u8], names: &mut dyn Iterator<Item = String>) -> io::Result<()> {
        let relative = self.locate(path)?;
        let (Some(folder), Some(name)) = (relative.parent(), relative.file_name()) else {
            return Err(invalid(format!("`{path}` names no file")));
        };
        if relative == self.base {
            return Err(invalid(format!("`{path}` is a folder")));
        }
        let folder = self.root.create_folders(folder)?;
        let keep = match folder.entry(name)? {
            Entry::Missing => None,
            Entry::File(keep) => Some(keep),
            Entry::Link => {
                return Err(refused(format!(
                    "`{path}` is a symbolic link; links are not written through"
                )));
            }
            Entry::Folder => return Err(invalid(format!("`{path}` is a folder"))),
            Entry::Other => return Err(invalid(format!("`{path}` is not a regular file"))),
        };
        let (temporary, file) = create_temporary(&folder, name, names)?;
        let written = (|| {
            let mut file = file;
            if let Some(keep) = &keep {
                system::keep(&file, keep)?;
            }
            file.write_all(contents)?;
            file.sync_all()?;
            // Closed before the rename: Windows renames an open file only when it was opened
            // to allow that.
            drop(file);
            folder.rename(&temporary, name)
        })();
        if let Err(error) = written {
            folder.remove(&temporary);
            return Err(error);
        }
        // The rename is durable once the folder is.
        folder.sync();
        Ok(())
    }
}

/// The largest file [`Workspace::read_to_string`] reads: 64 MiB.
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// A relative, normalised path: `.` dropped, `..` applied; `None` when it climbs above its
/// start or is not relative (a root, a drive letter, a UNC share, a `\\?\` prefix).
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

/// Creates the temporary file beside `name` in `folder`, under a name that must not exist yet,
/// so a name that is taken (by a file or a planted link) is skipped, never written through.
fn create_temporary(
    folder: &system::Folder,
    name: &OsStr,
    names: &mut dyn Iterator<Item = String>,
) -> io::Result<(PathBuf, File)> {
    for (attempt, suffix) in names.enumerate() {
        if attempt >= 16 {
            break;
        }
        let temporary = PathBuf::from(format!(".{}.{suffix}.agentacp.tmp", name.to_string_lossy()));
        if let Some(file) = folder.create_new(&temporary)? {
            return Ok((temporary, file));
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

/// Creates `dir` and its missing parents for state that holds what sessions said and did:
/// on Unix each readable by its user alone (`0700`); on Windows with the permissions the
/// folders inherit (the state folder lives in the user's own profile). An existing folder is
/// left as it is.
pub(crate) fn create_private_folder(dir: &Path) -> io::Result<()> {
    system::create_private_folder(dir)
}

#[cfg(test)]
mod tests;
