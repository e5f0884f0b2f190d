//! The workspace's handles on Windows, with `cap-std`: each open is relative to a folder
//! handle (`NtCreateFile` with a root directory) and names one component, so nothing is
//! resolved from a path string, and none follows a symbolic link or junction
//! (`FILE_FLAG_OPEN_REPARSE_POINT`, then the handle is checked). Folders are held without
//! `FILE_SHARE_DELETE` (`cap-std`'s choice), so Windows refuses to rename or remove a folder
//! while it is held. `cap-std` creates folders and renames files through a held folder's path
//! (as Windows reports it for the handle, a path free of links); a write holds every folder
//! from the root down to its own, so no part of that path can be renamed or swapped for a
//! junction meanwhile. (The folders above the root are the user's, as on Unix.)
//!
//! Before anything is opened, names are checked: a device name (`NUL`, `COM1`, `con.txt`), an
//! alternate data stream (`file.txt:stream`) and a name ending in a dot or a space (which
//! Windows' path functions would strip) are refused. Paths compare as Windows compares them:
//! drive letters, UNC server and share names and folder names without regard to case, a
//! `\\?\` prefix the same as none.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::path::{Component, Path, PathBuf, Prefix};

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, OpenOptions};

use super::entry::{Entry, invalid, refused};

/// The workspace root, held open.
#[derive(Debug)]
pub(super) struct Root(Dir);

/// A folder beneath the root, held open (where a write happens), with every folder between
/// it and the root: held without delete sharing, none of them can be renamed or replaced while
/// `cap-std` creates a folder or renames a file through this folder's path.
pub(super) struct Folder {
    dir: Dir,
    above: Vec<Dir>,
}

/// What a write keeps of the file it replaces: nothing (the new file has the permissions the
/// folder gives new files).
pub(super) type Keep = ();

/// `ERROR_STOPPED_ON_SYMLINK`: `cap-std`'s answer for a link where none may be followed.
const STOPPED_ON_SYMLINK: i32 = 1281;
/// `ERROR_TOO_MANY_LINKS`.
const TOO_MANY_LINKS: i32 = 1142;
/// `ERROR_DIRECTORY`: a folder was needed.
const NOT_A_FOLDER: i32 = 267;

impl Root {
    /// Opens the root (its canonical path).
    pub(super) fn open(path: &Path) -> io::Result<Root> {
        Ok(Root(Dir::open_ambient_dir(path, cap_std::ambient_authority())?))
    }

    /// Opens the regular file `relative` (normalised) for reading, refusing links.
    pub(super) fn open_file(&self, relative: &Path) -> io::Result<File> {
        let (folder, name) = self.parent_of(relative)?;
        let mut options = OpenOptions::new();
        options.read(true).follow(FollowSymlinks::No);
        match folder.open_with(name, &options) {
            Ok(file) => Ok(file.into_std()),
            // Windows opens a folder only when asked for one ("access denied" otherwise).
            Err(_) if folder.symlink_metadata(name).is_ok_and(|meta| meta.is_dir()) => {
                Err(invalid(format!("`{}` is a folder, not a file", relative.display())))
            }
            Err(error) => Err(link_error(error, relative)),
        }
    }

    /// Opens the folder `relative` (normalised; empty for the root), refusing links.
    pub(super) fn open_folder(&self, relative: &Path) -> io::Result<Folder> {
        let mut folder = Folder {
            dir: self.0.try_clone()?,
            above: Vec::new(),
        };
        for part in relative.iter() {
            folder.descend(part, relative)?;
        }
        Ok(folder)
    }

    /// Opens (creating what is missing) the folder `relative` beneath the root, no links.
    pub(super) fn create_folders(&self, relative: &Path) -> io::Result<Folder> {
        match self.open_folder(relative) {
            Ok(folder) => return Ok(folder),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
        let mut folder = self.open_folder(Path::new(""))?;
        for part in relative.iter() {
            match folder.dir.create_dir(part) {
                Ok(()) => {}
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
                Err(error) => return Err(error),
            }
            folder.descend(part, relative)?;
        }
        Ok(folder)
    }

    /// The folder holding `relative` (opened without links) and the last name.
    fn parent_of<'a>(&self, relative: &'a Path) -> io::Result<(Dir, &'a OsStr)> {
        let (Some(parent), Some(name)) = (relative.parent(), relative.file_name()) else {
            return Err(invalid("an empty path names no file".to_string()));
        };
        Ok((self.open_folder(parent)?.dir, name))
    }
}

impl Folder {
    /// Moves down into the folder `part` (not a link), keeping this one held.
    fn descend(&mut self, part: &OsStr, relative: &Path) -> io::Result<()> {
        let next = self
            .dir
            .open_dir_nofollow(part)
            .map_err(|error| link_error(error, relative))?;
        self.above.push(std::mem::replace(&mut self.dir, next));
        Ok(())
    }

    /// What the folder holds under `name` (a link or junction is not followed).
    pub(super) fn entry(&self, name: &OsStr) -> io::Result<Entry<Keep>> {
        match self.dir.symlink_metadata(name) {
            Ok(meta) if meta.file_type().is_symlink() => Ok(Entry::Link),
            Ok(meta) if meta.is_dir() => Ok(Entry::Folder),
            Ok(meta) if meta.is_file() => Ok(Entry::File(())),
            Ok(_) => Ok(Entry::Other),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(Entry::Missing),
            Err(error) => Err(error),
        }
    }

    /// Creates `name` for writing (`CREATE_NEW`, the name itself not followed); `None` when the
    /// name is taken (by a file or a link, which is left alone).
    pub(super) fn create_new(&self, name: &Path) -> io::Result<Option<File>> {
        let mut options = OpenOptions::new();
        options.write(true).create_new(true).follow(FollowSymlinks::No);
        match self.dir.open_with(name, &options) {
            Ok(file) => Ok(Some(file.into_std())),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => Ok(None),
            Err(error) => Err(error),
        }
    }

    /// Renames `from` over `to`, both in this folder (replacing `to`).
    pub(super) fn rename(&self, from: &Path, to: &OsStr) -> io::Result<()> {
        self.dir.rename(from, &self.dir, to)
    }

    /// Removes the file `name`, if it can (a failed write's temporary file).
    pub(super) fn remove(&self, name: &Path) {
        let _ = self.dir.remove_file(name);
    }

    /// Nothing: Windows has no call to flush a folder held for reading; NTFS journals the
    /// rename itself.
    pub(super) fn sync(&self) {}
}

/// Nothing is carried over to the new file on Windows.
pub(super) fn keep(_file: &File, _keep: &Keep) -> io::Result<()> {
    Ok(())
}

/// The part of `given` (absolute) below `root`, compared as Windows compares paths: the same
/// drive or UNC share (a `\\?\` prefix or none), then the root's folders, all without regard to
/// case. `None` when it is not below the root, or names a device (`\\.\`).
pub(super) fn beneath(root: &Path, given: &Path) -> Option<PathBuf> {
    let mut root_parts = root.components();
    let mut given_parts = given.components();
    match (root_parts.next(), given_parts.next()) {
        (Some(Component::Prefix(a)), Some(Component::Prefix(b))) if same_volume(a.kind(), b.kind()) => {}
        _ => return None,
    }
    for part in root_parts {
        match (part, given_parts.next()?) {
            (Component::RootDir, Component::RootDir) => {}
            (Component::Normal(a), Component::Normal(b)) if same_name(a, b) => {}
            _ => return None,
        }
    }
    Some(given_parts.as_path().to_path_buf())
}

/// Whether the normalised relative path `path` is `base` or lies below it (names compared
/// without regard to case).
pub(super) fn starts_with(path: &Path, base: &Path) -> bool {
    let mut parts = path.iter();
    base.iter()
        .all(|folder| parts.next().is_some_and(|part| same_name(part, folder)))
}

/// Refuses a name that is not a plain file name on Windows: a device, a stream, a name
/// Windows' path functions would change.
pub(super) fn check_name(part: &OsStr) -> Result<(), String> {
    let name = part.to_string_lossy();
    if name.contains(':') {
        return Err(format!(
            "`{name}` names an alternate data stream (a name with `:`); streams are not part of the workspace"
        ));
    }
    if name.ends_with('.') || name.ends_with(' ') {
        return Err(format!(
            "`{name}` ends in a dot or a space, which Windows drops from file names"
        ));
    }
    let stem = name.split('.').next().unwrap_or_default().trim_end_matches(' ');
    if is_device(stem) {
        return Err(format!("`{name}` is a device name on Windows, not a file"));
    }
    Ok(())
}

/// Whether `stem` (a name before its first dot) is one of Windows' reserved device names.
fn is_device(stem: &str) -> bool {
    let upper = stem.to_uppercase();
    let numbered = |device: &str| {
        upper.strip_prefix(device).is_some_and(|rest| {
            let mut chars = rest.chars();
            matches!((chars.next(), chars.next()), (Some('0'..='9' | '¹' | '²' | '³'), None))
        })
    };
    matches!(
        upper.as_str(),
        "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$" | "CLOCK$"
    ) || numbered("COM")
        || numbered("LPT")
}

/// A path as messages show it: without a `\\?\` prefix on a drive or UNC path.
pub(super) fn shown(path: &Path) -> PathBuf {
    let text = path.to_string_lossy();
    if let Some(share) = text.strip_prefix(r"\\?\UNC\") {
        return PathBuf::from(format!(r"\\{share}"));
    }
    match text.strip_prefix(r"\\?\") {
        Some(rest) if rest.as_bytes().get(1) == Some(&b':') => PathBuf::from(rest),
        _ => path.to_path_buf(),
    }
}

/// Creates `dir` and its missing parents (the permissions they inherit: the state folder is
/// in the user's own profile).
pub(super) fn create_private_folder(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// The same drive or share, `\\?\` or not; a device path (`\\.\`) is never the same.
fn same_volume(a: Prefix<'_>, b: Prefix<'_>) -> bool {
    use Prefix::{DeviceNS, Disk, UNC, Verbatim, VerbatimDisk, VerbatimUNC};
    match (a, b) {
        (Disk(x) | VerbatimDisk(x), Disk(y) | VerbatimDisk(y)) => x.eq_ignore_ascii_case(&y),
        (UNC(server, share) | VerbatimUNC(server, share), UNC(server2, share2) | VerbatimUNC(server2, share2)) => {
            same_name(server, server2) && same_name(share, share2)
        }
        (Verbatim(x), Verbatim(y)) => same_name(x, y),
        (DeviceNS(_), _) | (_, DeviceNS(_)) => false,
        _ => false,
    }
}

/// Two names that Windows takes for the same: equal after each character's simple upper case
/// (as NTFS's table maps one character to one; `ß` stays `ß`).
fn same_name(a: &OsStr, b: &OsStr) -> bool {
    if a == b {
        return true;
    }
    let (Some(a), Some(b)) = (a.to_str(), b.to_str()) else {
        return false;
    };
    let upper = |c: char| {
        let mut up = c.to_uppercase();
        match (up.next(), up.next()) {
            (Some(u), None) => u,
            _ => c,
        }
    };
    a.chars().map(upper).eq(b.chars().map(upper))
}

/// `cap-std`'s errors for links and escapes as clear refusals.
fn link_error(error: io::Error, path: &Path) -> io::Error {
    match error.raw_os_error() {
        Some(STOPPED_ON_SYMLINK | TOO_MANY_LINKS) => refused(format!(
            "`{}` passes through a symbolic link or junction; links are not followed inside the workspace",
            path.display()
        )),
        Some(NOT_A_FOLDER) => invalid(format!("`{}`: a part of the path is not a folder", path.display())),
        // `cap-std` refuses an escape with no system error code.
        None if error.kind() == io::ErrorKind::PermissionDenied => {
            refused(format!("`{}` leads outside the workspace", path.display()))
        }
        _ => error,
    }
}
