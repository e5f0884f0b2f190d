//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// `../shared` beside the checkout (or `$AGENTACP_SHARED`), when present.
pub fn shared() -> Option<PathBuf> {
    let dir = std::env::var_os("AGENTACP_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("../shared"));
    dir.is_dir().then_some(dir)
}

/// Codes about what a file is rather than what it says — its size, its kind — which neither
/// the corpus nor an example in the docs can hold, with the test in `tests/hostile.rs` that
/// makes such a file and checks the code instead.
pub const NOT_FROM_TEXT: &[(acp_manifest::Code, &str)] = &[
    (
        acp_manifest::Code::FileTooLarge,
        "a_manifest_one_byte_over_the_limit_is_refused",
    ),
    (acp_manifest::Code::NotARegularFile, "lint_and_explain_refuse_dev_zero"),
];

/// The manifest corpus.
pub fn corpus() -> PathBuf {
    workspace().join("tests/manifests")
}

/// `tests/manifests/<group>/*/ACP.md`, sorted.
pub fn cases(group: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(corpus().join(group))
        .unwrap_or_else(|e| panic!("tests/manifests/{group}: {e}"))
        .map(|e| e.unwrap().path().join("ACP.md"))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found
}

/// The upstream example manifests, when `../shared` is present.
pub fn upstream_examples() -> Vec<PathBuf> {
    let Some(shared) = shared() else { return Vec::new() };
    let Ok(entries) = std::fs::read_dir(shared.join("upstream/aip-44/examples")) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path().join("ACP.md"))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found
}

/// Compares `actual` with the snapshot file `name` under `tests/snapshots`; with
/// `UPDATE_SNAPSHOTS=1` rewrites it instead.
pub fn assert_snapshot(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots").join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_SNAPSHOTS=1 to create it)", path.display()));
    assert!(
        expected == actual,
        "snapshot {name} differs (UPDATE_SNAPSHOTS=1 rewrites it)\n--- expected\n{expected}\n--- actual\n{actual}"
    );
}

/// The folders of upstream ACP schema snapshots under `../shared/upstream`: the v0.4 to v1
/// revisions, and the early ones of August and September 2025 (kept apart upstream).
pub const SNAPSHOT_FOLDERS: [&str; 2] = ["acp-schemas", "acp-schemas-early"];

/// The snapshots of one folder of `../shared/upstream` (`<sha>/schema.json`), sorted; empty
/// when it is absent.
fn snapshots_in(folder: &str) -> Vec<PathBuf> {
    let Some(shared) = shared() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(shared.join("upstream").join(folder)) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("schema.json").is_file())
        .collect();
    dirs.sort();
    dirs
}

/// The upstream ACP schema snapshots (`../shared/upstream/acp-schemas/<sha>/`), sorted; empty
/// when `../shared` is absent.
pub fn acp_snapshots() -> Vec<PathBuf> {
    snapshots_in(SNAPSHOT_FOLDERS[0])
}

/// The early snapshots (`../shared/upstream/acp-schemas-early/<sha>/`, August and September
/// 2025), sorted; empty when absent.
pub fn acp_early_snapshots() -> Vec<PathBuf> {
    snapshots_in(SNAPSHOT_FOLDERS[1])
}

/// Every snapshot of both folders, each folder sorted; empty (after saying which folder is
/// missing) when neither is there.
pub fn all_acp_snapshots() -> Vec<PathBuf> {
    let mut all = Vec::new();
    for folder in SNAPSHOT_FOLDERS {
        let found = snapshots_in(folder);
        if found.is_empty() {
            eprintln!("note: ../shared/upstream/{folder} is absent or empty: its snapshots are not tested");
        }
        all.extend(found);
    }
    all
}

/// One snapshot by full SHA, from either folder; `None` (after saying so) when it is absent.
pub fn acp_snapshot(sha: &str) -> Option<PathBuf> {
    let found = SNAPSHOT_FOLDERS
        .iter()
        .flat_map(|folder| snapshots_in(folder))
        .find(|d| d.ends_with(sha));
    if found.is_none() {
        eprintln!("skipped: snapshot {sha} is absent");
    }
    found
}

/// Runs the built `scaffold-aip` with `args` in `dir` on hostile input, so that a bug cannot
/// hang, swamp or damage anything: the child gets at most 2 GiB of address space (`ulimit
/// -v`), may not write a byte to any file (`ulimit -f 0`: a bug that took `/dev/zero` for a
/// token file cannot replace it, even as root), and is killed, failing the test, if it has not
/// finished within a minute (a guard against hanging, not a timing assertion). Stdin is empty.
#[cfg(unix)]
pub fn run_bounded(dir: &Path, args: &[&str]) -> std::process::Output {
    use std::io::Read;
    use std::process::{Command, Stdio};
    const LIMIT: std::time::Duration = std::time::Duration::from_secs(60);
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 2097152 && ulimit -f 0 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_scaffold-aip"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (sender, receiver) = std::sync::mpsc::channel();
    let pipes: [Box<dyn Read + Send>; 2] = [
        Box::new(child.stdout.take().unwrap()),
        Box::new(child.stderr.take().unwrap()),
    ];
    for (index, mut pipe) in pipes.into_iter().enumerate() {
        let sender = sender.clone();
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            let _ = sender.send((index, bytes));
        });
    }
    let mut outputs = [Vec::new(), Vec::new()];
    for _ in 0..2 {
        let Ok((index, bytes)) = receiver.recv_timeout(LIMIT) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("scaffold-aip {args:?} was still running after {LIMIT:?}; killed");
        };
        outputs[index] = bytes;
    }
    let [stdout, stderr] = outputs;
    std::process::Output {
        status: child.wait().unwrap(),
        stdout,
        stderr,
    }
}
