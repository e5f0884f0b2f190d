//! The escape tests: the same cases on every system (they run under Wine too, with the
//! runtime's other unit tests: `tests/wine_unit.rs`), then those of one system only.

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

/// Makes `link`, a link to the folder `target`: a symbolic link on Unix; on Windows a symbolic
/// link, else (without the privilege for one) a junction (`mklink /J`). `false`, after saying
/// so, where the system makes neither (Wine 8 claims success and makes nothing).
fn link_folder(target: &Path, link: &Path) -> bool {
    #[cfg(unix)]
    std::os::unix::fs::symlink(target, link).unwrap();
    #[cfg(windows)]
    if std::os::windows::fs::symlink_dir(target, link).is_err() || !is_link(link) {
        let _ = std::fs::remove_dir(link);
        let _ = std::process::Command::new("cmd")
            .arg("/c")
            .arg("mklink")
            .arg("/J")
            .arg(link)
            .arg(target)
            .output();
    }
    made(link)
}

/// Makes `link`, a symbolic link to the file `target` (which may not exist); `false`, after
/// saying so, where the system cannot.
fn link_file(target: &Path, link: &Path) -> bool {
    try_link_file(target, link) || made(link)
}

/// [`link_file`] without a word when no link was made.
fn try_link_file(target: &Path, link: &Path) -> bool {
    #[cfg(unix)]
    std::os::unix::fs::symlink(target, link).unwrap();
    #[cfg(windows)]
    let _ = std::os::windows::fs::symlink_file(target, link);
    is_link(link)
}

fn is_link(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink())
}

/// Whether `link` is a link now; says so on stderr when it is not (the case is then skipped).
fn made(link: &Path) -> bool {
    let made = is_link(link);
    if !made {
        eprintln!(
            "skipped: this system made no link at {} (no privilege, or Wine)",
            link.display()
        );
    }
    made
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
    let missing_inside = refusal(&root.join("no-such-folder"));
    assert!(missing_inside.contains("cannot be used"), "{missing_inside}");
}

#[test]
fn a_symlink_out_of_the_root_is_refused() {
    let (_dir, root, outside) = tree();
    if !link_folder(&outside, &root.join("link")) {
        return;
    }
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
fn write_then_read_creating_folders_atomically() {
    let (_dir, root, _outside) = tree();
    let base = project(&root);
    base.write("a/b/notes.txt", b"hello").unwrap();
    assert_eq!(base.read_to_string("a/b/notes.txt").unwrap(), "hello");
    let existing = root.join("project/existing.txt");
    std::fs::write(&existing, "old").unwrap();
    base.write("existing.txt", b"new").unwrap();
    assert_eq!(
        std::fs::read_to_string(&existing).unwrap(),
        "new",
        "replaced by the rename"
    );
    let leftovers: Vec<_> = std::fs::read_dir(root.join("project"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "no temporary file is left behind");
    assert!(base.write(".", b"x").is_err(), "the base itself is a folder");
    assert!(base.write("src", b"x").is_err(), "a folder is not replaced");
    assert!(root.join("project/src").is_dir());
    let error = base.read("src", 10).unwrap_err();
    assert_eq!(
        error.kind(),
        io::ErrorKind::InvalidInput,
        "a folder is not read as a file: {error}"
    );
    let error = base.read("a/b/notes.txt", 2).unwrap_err();
    assert!(error.to_string().contains("read limit"), "{error}");
}

/// Issue #23.1: `ln -s OUTSIDE/pwned.txt WORKSPACE/notes.txt`, then a write of `notes.txt`
/// created `OUTSIDE/pwned.txt`.
#[test]
fn a_dangling_symlink_is_not_written_through() {
    let (_dir, root, outside) = tree();
    if !link_file(&outside.join("pwned.txt"), &root.join("project/notes.txt")) {
        return;
    }
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
    if !link_folder(&outside, &root.join("project")) {
        return;
    }
    assert!(session.read_to_string("secret.txt").is_err());
    assert!(session.write("planted.txt", b"x").is_err());
    assert!(!outside.join("planted.txt").exists());
    // Nor does replacing the root's own path move the workspace. (Windows refuses to rename a
    // folder held open, as the root is: then there is nothing to replace.)
    let (_dir2, root2, outside2) = tree();
    let session = project(&root2);
    std::fs::write(outside2.join("secret.txt"), "secret").unwrap();
    std::fs::create_dir_all(outside2.join("project")).unwrap();
    std::fs::write(outside2.join("project/secret.txt"), "secret").unwrap();
    if std::fs::rename(&root2, root2.with_file_name("old-root")).is_ok() && link_folder(&outside2, &root2) {
        assert!(session.read_to_string("secret.txt").is_err());
    }
}

/// Issue #23.3: a file flipped between a regular file and a link to a secret outside, while
/// it is read: the secret must never come back.
#[test]
fn reads_racing_a_file_flipped_to_a_symlink_never_see_outside() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (_dir, root, outside) = tree();
    std::fs::write(outside.join("secret.txt"), "SECRET").unwrap();
    let secret = outside.join("secret.txt");
    if !link_file(&secret, &root.join("project/probe")) {
        return;
    }
    let session = project(&root);
    let target = root.join("project/flip.txt");
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let stop = stop.clone();
        let target = target.clone();
        let staged_file = target.with_file_name("staged-file");
        let staged_link = target.with_file_name("staged-link");
        std::thread::spawn(move || {
            let mut flips = 0u64;
            while !stop.load(Ordering::Relaxed) {
                std::fs::write(&staged_file, "public").unwrap();
                std::fs::rename(&staged_file, &target).unwrap();
                let _ = std::fs::remove_file(&staged_link);
                assert!(link_file(&secret, &staged_link));
                // Windows refuses to replace a file another thread has open; try again.
                if std::fs::rename(&staged_link, &target).is_ok() {
                    flips += 1;
                }
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
/// content outside. A taken name (file or link) is skipped, never written through. Where the
/// system makes no links, a planted file stands in for the link.
#[test]
fn a_planted_temporary_name_is_skipped_not_written_through() {
    let (_dir, root, outside) = tree();
    let session = project(&root);
    let planted = root.join("project/.notes.txt.planted.agentacp.tmp");
    let linked = try_link_file(&outside.join("pwned.txt"), &planted);
    if !linked {
        std::fs::write(&planted, "planted").unwrap();
    }
    let mut names = ["planted".to_string(), "fresh".to_string()].into_iter();
    session.write_with_names("notes.txt", b"content", &mut names).unwrap();
    assert!(!outside.join("pwned.txt").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("project/notes.txt")).unwrap(),
        "content"
    );
    if linked {
        assert!(is_link(&planted));
    } else {
        assert_eq!(std::fs::read_to_string(&planted).unwrap(), "planted");
    }
    let first: Vec<String> = random_names().take(2).collect();
    assert_ne!(first[0], first[1]);
}

#[cfg(unix)]
#[test]
fn a_write_keeps_the_permission_bits() {
    use std::os::unix::fs::PermissionsExt;
    let (_dir, root, _outside) = tree();
    let script = root.join("project/run.sh");
    std::fs::write(&script, "old").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    project(&root).write("run.sh", b"new").unwrap();
    assert_eq!(std::fs::read_to_string(&script).unwrap(), "new");
    assert_eq!(std::fs::metadata(&script).unwrap().permissions().mode() & 0o777, 0o755);
}

/// A FIFO planted in the workspace: opening it for reading used to wait for a writer
/// forever; it is refused at once.
#[cfg(unix)]
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

/// The walk `openat2` falls back to where the kernel lacks it refuses links by itself.
#[cfg(unix)]
#[test]
fn the_fallback_walk_refuses_links_too() {
    use rustix::fs::{Mode, OFlags};
    let (_dir, root, outside) = tree();
    std::os::unix::fs::symlink(&outside, root.join("project/out")).unwrap();
    std::fs::write(outside.join("x"), "x").unwrap();
    let session = project(&root);
    let relative = session.locate("out/x").unwrap();
    let error = session
        .root
        .walk_beneath(&relative, OFlags::RDONLY, Mode::empty())
        .unwrap_err();
    assert!(
        error.to_string().contains("symbolic link") || error.to_string().contains("not a folder"),
        "{error}"
    );
    let inside = session.locate("src").unwrap();
    assert!(
        session
            .root
            .walk_beneath(&inside, system::dir_flags(), Mode::empty())
            .is_ok()
    );
}

/// Windows only: paths in Windows' own forms, device names, streams.
#[cfg(windows)]
mod windows {
    use std::io;
    use std::path::{Path, PathBuf};

    use super::super::system::{beneath, shown};
    use super::Workspace;

    /// `Root/Project/src`, capitalised (for the comparisons without regard to case).
    fn tree() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("Root");
        std::fs::create_dir_all(root.join("Project/src")).unwrap();
        (dir, root)
    }

    #[test]
    fn drive_letters_unc_and_verbatim_paths_are_placed_as_windows_does() {
        let root = Path::new(r"\\?\C:\Work\Root");
        let below = |given: &str| beneath(root, Path::new(given));
        assert_eq!(below(r"C:\Work\Root\a\b.txt"), Some(PathBuf::from(r"a\b.txt")));
        assert_eq!(below(r"c:\work\ROOT\a"), Some(PathBuf::from("a")), "case");
        assert_eq!(below(r"\\?\C:\Work\Root\a"), Some(PathBuf::from("a")));
        assert_eq!(below("C:/Work/Root/a"), Some(PathBuf::from("a")));
        assert_eq!(below(r"C:\Work\Root"), Some(PathBuf::new()));
        for outside in [
            r"D:\Work\Root\a",
            r"C:\Work\Rooted\a",
            r"C:\Work",
            r"\\.\C:\Work\Root\a",
            r"\\?\GLOBALROOT\Device\HarddiskVolume1\Work\Root\a",
            r"\\server\share\Work\Root\a",
            r"\Work\Root\a",
            r"C:Work\Root\a",
        ] {
            assert_eq!(below(outside), None, "{outside}");
        }
        let share = Path::new(r"\\?\UNC\Server\Share\Work");
        assert_eq!(
            beneath(share, Path::new(r"\\SERVER\share\work\x")),
            Some(PathBuf::from("x"))
        );
        assert_eq!(beneath(share, Path::new(r"\\server\other\Work\x")), None);
        assert_eq!(beneath(share, Path::new(r"C:\Work\x")), None);
        assert_eq!(shown(root), Path::new(r"C:\Work\Root"));
        assert_eq!(shown(share), Path::new(r"\\Server\Share\Work"));
    }

    #[test]
    fn other_drives_shares_and_prefixed_paths_are_outside() {
        let (_dir, root) = tree();
        let workspace = Workspace::open(&root).unwrap();
        let session = workspace.confine_cwd(root.join("Project").to_str().unwrap()).unwrap();
        std::fs::write(root.join("Project/src/lib.rs"), "inside").unwrap();
        for bad in [
            r"C:\Windows\win.ini",
            r"C:\Windows\..\Windows\win.ini",
            r"D:\x",
            r"C:x",
            r"\Windows\win.ini",
            r"\\server\share\x",
            r"\\?\C:\Windows\win.ini",
            r"\\?\UNC\server\share\x",
            r"\\.\C:\Windows\win.ini",
            r"\\.\PhysicalDrive0",
            r"..\..\x",
            r"src\..\..\..\x",
        ] {
            let error = session.read(bad, 100).unwrap_err();
            assert!(error.to_string().contains("outside"), "{bad}: {error}");
            assert!(session.write(bad, b"x").is_err(), "{bad}");
        }
        // The root's own path in another spelling: case, `\\?\`, forward slashes.
        let canonical = root.canonicalize().unwrap();
        let plain = shown(&canonical).to_string_lossy().into_owned();
        for spelling in [
            format!(r"{plain}\Project\src\lib.rs"),
            format!(r"{}\PROJECT\SRC\LIB.RS", plain.to_uppercase()),
            format!(r"{}\Project\src\lib.rs", canonical.display()),
            format!("{}/Project/src/lib.rs", plain.replace('\\', "/")),
            r"..\project\src\lib.rs".to_string(),
        ] {
            assert_eq!(session.read_to_string(&spelling).unwrap(), "inside", "{spelling}");
        }
        let cwd = plain.to_lowercase();
        assert!(workspace.confine_cwd(&format!(r"{cwd}\project")).is_ok());
        assert!(workspace.confine_cwd(r"C:\Windows").unwrap_err().contains("outside"));
        assert!(workspace.confine_cwd(r"\\server\share").is_err());
    }

    #[test]
    fn device_names_and_alternate_data_streams_are_refused() {
        let (_dir, root) = tree();
        let session = Workspace::open(&root)
            .unwrap()
            .confine_cwd(root.join("Project").to_str().unwrap())
            .unwrap();
        std::fs::write(root.join("Project/notes.txt"), "visible").unwrap();
        for bad in [
            "NUL",
            "nul",
            "CON",
            "con.txt",
            "COM1",
            "com9.log",
            "LPT1",
            "AUX.rs",
            "PRN",
            "CONIN$",
            "src/NUL",
            "src/nul.tar.gz",
            "NUL /x",
            "notes.txt:hidden",
            "notes.txt::$DATA",
            "src:stream",
            "notes.txt.",
            "notes.txt ",
        ] {
            let read = session.read(bad, 100).unwrap_err();
            assert_eq!(read.kind(), io::ErrorKind::PermissionDenied, "{bad}: {read}");
            let write = session.write(bad, b"x").unwrap_err();
            assert_eq!(write.kind(), io::ErrorKind::PermissionDenied, "{bad}: {write}");
        }
        assert_eq!(
            std::fs::read_to_string(root.join("Project/notes.txt")).unwrap(),
            "visible"
        );
        let names: Vec<_> = std::fs::read_dir(root.join("Project"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "nothing was created: {names:?}");
        // Names that merely resemble devices are files.
        for fine in ["COM10", "console.txt", "nullable.rs", "LPT", "auxiliary"] {
            session.write(fine, b"x").unwrap();
            assert_eq!(session.read_to_string(fine).unwrap(), "x");
        }
    }
}
