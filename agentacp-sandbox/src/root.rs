//! Linux: a root of its own for a confined program, where it gets a mount namespace.
//!
//! Landlock does not confine changing a file's mode, times, extended attributes or owner
//! (`chmod`, `utime`, `setxattr`, `chown`), nor (before ABI 9) connecting to a pathname Unix
//! socket. A program whose root holds only its mounts and what it needs to run cannot do any
//! of these outside them: nothing else exists for it by path. The namespace's init builds that
//! root before it forks the program, as bubblewrap does: a tmpfs becomes the root
//! (`pivot_root`), the system's folders are bound into it read-only, each mount with its mode,
//! a few devices, the PID namespace's own `/proc`, an empty `/tmp`; then the old root is
//! detached and the new one made read-only.
//!
//! Everything is prepared before the fork ([`NewRoot::plan`]); [`NewRoot::enter`], in the
//! init, only makes system calls on what was prepared.

use std::ffi::CString;
use std::path::{Path, PathBuf};

/// The system's folders bound read-only into every root (or, where one is a symbolic link,
/// as on a merged `/usr`, made the same link). Missing ones are skipped.
pub(super) const SYSTEM: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/sys"];

/// Devices a program may read and write (Landlock), bound into its root's `/dev`. Not
/// `/dev/tty`: through the terminal the server was started from, a program could type
/// commands into its shell (`TIOCSTI`), to run unconfined once the server exits; and a
/// program that prompts there would hang.
pub(super) const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"];

/// Where the old root is while the new one is built (inside the new one, then detached).
const OLD_ROOT: &str = "/.oldroot";

/// The longest path bound (`PATH_MAX`).
const PATH_MAX: usize = 4096;

/// `struct mount_attr` of `<linux/mount.h>` (for `mount_setattr`, Linux 5.12, older than any
/// Landlock).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// One thing bound into the new root.
#[derive(Debug)]
struct Bind {
    /// Where it is under the old root (`/.oldroot/…`).
    source: CString,
    /// Where it goes in the new root (where it is on this machine).
    target: CString,
    /// A folder (else a file, a device or a socket).
    folder: bool,
    read_only: bool,
}

/// What the new root holds, prepared before the fork.
#[derive(Debug)]
pub(super) struct NewRoot {
    binds: Vec<Bind>,
    /// Symbolic links made in it (the link, what it points to): `/bin` → `usr/bin`, …
    links: Vec<(CString, CString)>,
    /// The program's working folder, entered at the end (`/` where it is not in the root).
    cwd: CString,
}

/// A path as a C string, `None` when it holds a NUL (it could not be bound).
fn c_path(path: &Path) -> Option<CString> {
    CString::new(path.as_os_str().as_encoded_bytes()).ok()
}

impl NewRoot {
    /// The root for a program: the system's folders and `usable` (the mounts and grants, and
    /// whether each is read-only), what the program needs to run from outside them (`keep`:
    /// its file, its `PATH` folders; read-only), the devices. A path that does not exist is
    /// left out; one inside another with as much access is bound with it.
    pub(super) fn plan(usable: &[(PathBuf, bool)], keep: &[PathBuf], cwd: Option<&Path>) -> NewRoot {
        let mut links = Vec::new();
        let mut wanted: Vec<(PathBuf, bool)> = Vec::new();
        for folder in SYSTEM.iter().map(Path::new) {
            match std::fs::symlink_metadata(folder) {
                Ok(found) if found.file_type().is_symlink() => {
                    if let (Ok(target), Some(link)) = (std::fs::read_link(folder), c_path(folder))
                        && let Some(target) = c_path(&target)
                    {
                        links.push((link, target));
                    }
                }
                Ok(_) => wanted.push((folder.to_path_buf(), true)),
                Err(_) => {}
            }
        }
        wanted.extend(usable.iter().cloned());
        for path in keep {
            wanted.push((path.clone(), true));
            // Run through a link (`node` in a `PATH` folder): the file it names too.
            if let Ok(real) = std::fs::canonicalize(path) {
                wanted.push((real, true));
            }
        }
        // Outer folders first; a path within one already bound with as much access is not
        // bound again (a read-only bind would take away what a read-write mount allows).
        let mut paths: Vec<(PathBuf, bool)> = wanted
            .into_iter()
            .filter_map(|(path, read_only)| Some((path.canonicalize().ok()?, read_only)))
            .collect();
        paths.sort_by_key(|(path, _)| path.components().count());
        let mut kept: Vec<(PathBuf, bool)> = Vec::new();
        for (path, read_only) in paths {
            let covered = kept
                .iter()
                .any(|(outer, outer_read_only)| path.starts_with(outer) && (read_only || !outer_read_only));
            if !covered && path != Path::new("/") {
                kept.push((path, read_only));
            }
        }
        let devices = DEVICES.iter().map(|device| (PathBuf::from(device), false));
        let binds = (kept.into_iter().chain(devices))
            .filter_map(|(path, read_only)| {
                let folder = std::fs::metadata(&path).ok()?.is_dir();
                let mut source = PathBuf::from(OLD_ROOT);
                source.push(path.strip_prefix("/").ok()?);
                Some(Bind {
                    source: c_path(&source)?,
                    target: c_path(&path)?,
                    folder,
                    read_only,
                })
            })
            .collect();
        let cwd = cwd
            .map(Path::to_path_buf)
            .or_else(|| std::env::current_dir().ok())
            .and_then(|cwd| cwd.canonicalize().ok())
            .and_then(|cwd| c_path(&cwd))
            .unwrap_or_else(|| c"/".to_owned());
        NewRoot { binds, links, cwd }
    }

    /// In the PID namespace's init, in a user namespace of its own, before it forks the
    /// program: enters a mount namespace of its own (its mounts do not pass back: `MS_SLAVE`)
    /// and makes the new root its root, with the namespace's own `/proc` (`hidepid=2`).
    /// `Err` with the `errno` of the call that failed.
    ///
    /// # Safety
    /// Only in a forked child (it changes its mount namespace and root): system calls only,
    /// on what [`plan`](Self::plan) prepared and buffers of this stack.
    #[allow(unsafe_code)]
    pub(super) unsafe fn enter(&self) -> Result<(), i32> {
        let check = |result: libc::c_int| if result == 0 { Ok(()) } else { Err(errno()) };
        // SAFETY: system calls on C strings prepared before the fork or constant.
        unsafe {
            check(libc::unshare(libc::CLONE_NEWNS))?;
            check(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_SLAVE,
                std::ptr::null(),
            ))?;
            // The new root, a tmpfs over `/tmp` (any folder would do: once it is the root,
            // the old root's `/tmp` is seen under it again).
            check(libc::mount(
                c"tmpfs".as_ptr(),
                c"/tmp".as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV,
                c"mode=755,size=1m".as_ptr().cast(),
            ))?;
            check(libc::chdir(c"/tmp".as_ptr()))?;
            check(libc::mkdir(c".oldroot".as_ptr(), 0o755))?;
            check(libc::syscall(libc::SYS_pivot_root, c".".as_ptr(), c".oldroot".as_ptr()) as libc::c_int)?;
            check(libc::chdir(c"/".as_ptr()))?;
            for (link, target) in &self.links {
                check(libc::symlink(target.as_ptr(), link.as_ptr()))?;
            }
            for bind in &self.binds {
                bind.make()?;
            }
            for (name, target) in [
                (c"/dev/fd", c"/proc/self/fd"),
                (c"/dev/stdin", c"/proc/self/fd/0"),
                (c"/dev/stdout", c"/proc/self/fd/1"),
                (c"/dev/stderr", c"/proc/self/fd/2"),
            ] {
                check(libc::symlink(target.as_ptr(), name.as_ptr()))?;
            }
            // The namespace's procfs, mounted while the old root's is still there (the
            // kernel lets a user namespace mount one only where one is fully visible).
            make_folders(c"/proc".to_bytes(), true)?;
            check(libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                c"hidepid=2".as_ptr().cast(),
            ))?;
            make_folders(c"/tmp".to_bytes(), true)?;
            check(libc::umount2(c"/.oldroot".as_ptr(), libc::MNT_DETACH))?;
            check(libc::rmdir(c"/.oldroot".as_ptr()))?;
            check(libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
                std::ptr::null(),
            ))?;
            if libc::chdir(self.cwd.as_ptr()) != 0 {
                check(libc::chdir(c"/".as_ptr()))?;
            }
            Ok(())
        }
    }
}

impl Bind {
    /// Makes its place in the new root (folders, or an empty file) and binds it there, with
    /// what is mounted beneath it; read-only where it is, never set-user-ID.
    ///
    /// # Safety
    /// As [`NewRoot::enter`].
    #[allow(unsafe_code)]
    unsafe fn make(&self) -> Result<(), i32> {
        // SAFETY: system calls on C strings prepared before the fork and a struct of this
        // stack.
        unsafe {
            make_folders(self.target.to_bytes(), self.folder)?;
            if libc::mount(
                self.source.as_ptr(),
                self.target.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            ) != 0
            {
                return Err(errno());
            }
            let attributes = MountAttr {
                attr_set: MOUNT_ATTR_NOSUID | if self.read_only { MOUNT_ATTR_RDONLY } else { 0 },
                attr_clr: 0,
                propagation: 0,
                userns_fd: 0,
            };
            let set = libc::syscall(
                libc::SYS_mount_setattr,
                libc::AT_FDCWD,
                self.target.as_ptr(),
                AT_RECURSIVE,
                std::ptr::addr_of!(attributes),
                std::mem::size_of::<MountAttr>(),
            );
            if set != 0 {
                return Err(errno());
            }
            Ok(())
        }
    }
}

/// Makes `path` in the new root, and the folders above it, where missing: a folder, or (not
/// `folder`) an empty file to bind a file over. What exists already is kept.
///
/// # Safety
/// As [`NewRoot::enter`]: system calls on a copy of `path` on this stack.
#[allow(unsafe_code)]
unsafe fn make_folders(path: &[u8], folder: bool) -> Result<(), i32> {
    let mut buffer = [0u8; PATH_MAX];
    if path.len() >= PATH_MAX {
        return Err(libc::ENAMETOOLONG);
    }
    buffer[..path.len()].copy_from_slice(path);
    // SAFETY: `buffer` holds a NUL at each place it is read to.
    unsafe {
        let exists = |buffer: &[u8; PATH_MAX]| {
            let mut found = std::mem::zeroed::<libc::stat>();
            libc::stat(buffer.as_ptr().cast(), &mut found) == 0
        };
        for end in (1..path.len()).filter(|end| path[*end] == b'/') {
            buffer[end] = 0;
            if libc::mkdir(buffer.as_ptr().cast(), 0o755) != 0 && !exists(&buffer) {
                return Err(errno());
            }
            buffer[end] = b'/';
        }
        if exists(&buffer) {
            return Ok(());
        }
        let made = if folder {
            libc::mkdir(buffer.as_ptr().cast(), 0o755)
        } else {
            let fd = libc::open(
                buffer.as_ptr().cast(),
                libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                0o644,
            );
            if fd >= 0 { libc::close(fd) } else { fd }
        };
        if made != 0 {
            return Err(errno());
        }
        Ok(())
    }
}

/// This thread's `errno`.
#[allow(unsafe_code)]
fn errno() -> i32 {
    // SAFETY: reads the calling thread's `errno`.
    unsafe { *libc::__errno_location() }
}
