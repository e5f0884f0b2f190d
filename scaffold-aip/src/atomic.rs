//! Writes that are whole or absent: a crash or a failed write never leaves a half-written file
//! (`regen --out`) or a half-made crate (`new`) where the user expects a finished one.
//!
//! A file is written to a fresh temporary file in its own folder, synced, then renamed over
//! the target (keeping the target's permissions when it existed), and the folder is synced. A
//! crate is built in a temporary folder beside its final place, every file synced, then
//! renamed into place. A crash part way leaves the old file (or no crate) and, at worst, a
//! temporary `.tmp…` entry beside it.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

/// Writes `contents` to `path` atomically (see the module docs). The folder must exist.
pub fn write_file(path: &Path, contents: &[u8]) -> io::Result<()> {
    write_file_with(path, |file| file.write_all(contents))
}

/// [`write_file`] with the writing done by `write`: when it fails, the target is untouched and
/// the temporary file is removed.
pub fn write_file_with(path: &Path, write: impl FnOnce(&mut File) -> io::Result<()>) -> io::Result<()> {
    let folder = parent_of(path);
    let mut temporary = tempfile::Builder::new().prefix(".tmp").tempfile_in(folder)?;
    write(temporary.as_file_mut())?;
    if let Ok(existing) = std::fs::metadata(path) {
        temporary.as_file().set_permissions(existing.permissions())?;
    }
    temporary.as_file().sync_all()?;
    temporary.persist(path).map_err(|error| error.error)?;
    sync_folder(folder)
}

/// Creates the folder `root` (which must not exist) holding `files` (paths relative to it), all
/// at once: they are written into a temporary folder beside `root`, synced, and the folder is
/// renamed to `root`. When `root` appears meanwhile, nothing is written there and the error
/// kind is [`io::ErrorKind::AlreadyExists`].
pub fn create_folder(root: &Path, files: &[(impl AsRef<Path>, impl AsRef<[u8]>)]) -> io::Result<()> {
    let parent = parent_of(root);
    let staging = tempfile::Builder::new().prefix(".tmp").tempdir_in(parent)?;
    for (relative, contents) in files {
        let path = staging.path().join(relative);
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder)?;
        }
        let mut file = File::create_new(&path)?;
        file.write_all(contents.as_ref())?;
        file.sync_all()?;
    }
    sync_tree(staging.path())?;
    // `root` is claimed first, so a folder that appeared since the caller looked is never
    // replaced; renaming onto the empty folder just made is then the one atomic step.
    std::fs::create_dir(root)?;
    if let Err(error) = std::fs::rename(staging.path(), root) {
        let _ = std::fs::remove_dir(root);
        return Err(error);
    }
    // The staging folder is now `root`: nothing left for its guard to remove.
    let _ = staging.keep();
    sync_folder(parent)
}

fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// Syncs a folder, so a rename or a new entry in it survives a crash.
#[cfg(unix)]
fn sync_folder(folder: &Path) -> io::Result<()> {
    File::open(folder)?.sync_all()
}

/// Nothing to do on Windows: a folder is not a file std can open there (the open was refused,
/// "Access denied", and every write failed with it), and NTFS journals a rename itself.
#[cfg(not(unix))]
fn sync_folder(_folder: &Path) -> io::Result<()> {
    Ok(())
}

/// Syncs every folder under `root` (its files were synced as they were written).
fn sync_tree(root: &Path) -> io::Result<()> {
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            sync_tree(&entry.path())?;
        }
    }
    sync_folder(root)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn entries(folder: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(folder)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// A write that fails half way (as a crash would stop it) leaves the old file whole and
    /// no temporary file behind; `std::fs::write` would have left half a module.
    #[test]
    fn a_write_that_fails_half_way_leaves_the_old_file_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acp_wire.rs");
        std::fs::write(&path, "old module\n").unwrap();
        let outcome = write_file_with(&path, |file| {
            file.write_all(b"half of the new")?;
            Err(io::Error::other("disk full"))
        });
        assert_eq!(outcome.unwrap_err().to_string(), "disk full");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old module\n");
        assert_eq!(entries(dir.path()), ["acp_wire.rs"]);
    }

    #[test]
    fn a_rewrite_keeps_the_files_permissions_and_leaves_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("acp_wire.rs");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_file(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o640);
        assert_eq!(entries(dir.path()), ["acp_wire.rs"]);
    }

    #[test]
    fn a_folder_appears_whole_and_never_over_one_that_exists() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("my-agent");
        create_folder(&root, &[("Cargo.toml", "a"), ("src/lib.rs", "b")]).unwrap();
        assert_eq!(std::fs::read_to_string(root.join("src/lib.rs")).unwrap(), "b");
        assert_eq!(entries(dir.path()), ["my-agent"]);

        let taken = dir.path().join("taken");
        std::fs::create_dir(&taken).unwrap();
        let error = create_folder(&taken, &[("Cargo.toml", "a")]).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::AlreadyExists);
        assert!(entries(&taken).is_empty(), "nothing written into the existing folder");
        assert_eq!(entries(dir.path()), ["my-agent", "taken"], "no staging folder left");
    }

    /// A file that cannot be written (here: a second file at the same path) stops the crate
    /// before it exists: no half-made crate.
    #[test]
    fn a_crate_that_fails_half_way_does_not_appear() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("my-agent");
        let error = create_folder(&root, &[("Cargo.toml", "a"), ("Cargo.toml", "again")]).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::AlreadyExists);
        assert!(!root.exists());
        assert!(entries(dir.path()).is_empty(), "no staging folder left");
    }
}
