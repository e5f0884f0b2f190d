//! Helpers shared by the integration tests of acp-manifest, acp-wire-gen, acp-audit,
//! scaffold-aip, agentacp and interop: where the workspace, `../shared` (the upstream schemas,
//! read at test time) and the manifest corpus are, snapshot files, and skipping a test whose
//! peer or kernel facility is missing ([`skip_unless_required`], a failure under CI). Each
//! test that reads `../shared` skips, saying so, when it is absent.

pub mod postgres;
pub mod wine;

use std::path::{Path, PathBuf};

/// Runs `command` with an empty stdin and collects its output; kills it and fails the test
/// when it has not ended within `limit` (a guard against hanging, not a timing assertion).
pub fn output_within(command: &mut std::process::Command, limit: std::time::Duration) -> std::process::Output {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{command:?} did not start: {e}"));
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
        let Ok((index, bytes)) = receiver.recv_timeout(limit) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{command:?} was still running after {limit:?}; killed");
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

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("tests/support is two folders below the workspace root")
        .to_path_buf()
}

/// `../shared` beside the checkout (or `$AGENTACP_SHARED`), when present.
pub fn shared() -> Option<PathBuf> {
    let dir = std::env::var_os("AGENTACP_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("../shared"));
    dir.is_dir().then_some(dir)
}

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

/// A module of an early revision (26 August 2025, no `x-method` at all) checked in for
/// `agentacp/tests/early_revision.rs`: its revision and the file it lives in.
pub const EARLY_MODULE: (&str, &str) = (
    "e1c94557c8ad4bb18bdeb8430e799c9cfaadd8ac",
    "agentacp/tests/wire-early/rev_e1c94557.rs",
);

/// The messages of [`EARLY_MODULE`]'s revision, with whether its schema accepts each.
pub const EARLY_CORPUS: &str = "agentacp/tests/wire-early/e1c94557.json";

/// Compares `actual` with the snapshot file `name` under `tests/snapshots` of the crate whose
/// test calls it; with `UPDATE_SNAPSHOTS=1` rewrites it instead.
#[macro_export]
macro_rules! assert_snapshot {
    ($name:expr, $actual:expr $(,)?) => {
        $crate::assert_snapshot_in(
            &::std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots"),
            $name,
            $actual,
        )
    };
}

/// Compares `actual` with the snapshot file `dir/name`; with `UPDATE_SNAPSHOTS=1` rewrites it
/// instead. [`assert_snapshot!`] calls it with the calling crate's `tests/snapshots`.
pub fn assert_snapshot_in(dir: &Path, name: &str, actual: &str) {
    let path = dir.join(name);
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

/// The folder of the upstream protocol-version-2 schema snapshots under `../shared/upstream`
/// (`acp-schemas-v2/<sha>/`: the v2 alphas; a commit may have a v1 snapshot too).
pub const V2_SNAPSHOT_FOLDER: &str = "acp-schemas-v2";

/// The v2 snapshots (`../shared/upstream/acp-schemas-v2/<sha>/`), sorted; empty when absent.
pub fn acp_v2_snapshots() -> Vec<PathBuf> {
    snapshots_in(V2_SNAPSHOT_FOLDER)
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

/// The variable under which a test whose peer (Node, an npm package, the Python SDK, a real
/// agent) or kernel facility (Landlock, namespaces, a cgroup of its own) is missing fails
/// instead of skipping. `.ci/run` sets it, so a CI run cannot pass with one silently absent; a
/// developer's machine without them still gets clean skips.
pub const REQUIRE_PEERS: &str = "AGENTACP_REQUIRE_PEERS";

/// Says why a test is skipped (what it needs is missing): prints `skipped: {why}` on stderr,
/// or, when [`REQUIRE_PEERS`] is set to anything but `0` or empty, fails the test with that
/// reason. The caller returns right after.
pub fn skip_unless_required(why: &str) {
    let flag = std::env::var_os(REQUIRE_PEERS);
    skip_or_fail(why, flag.is_some_and(|v| !v.is_empty() && v != "0"));
}

/// [`skip_unless_required`] with the flag read: fails when `required`, else prints.
fn skip_or_fail(why: &str, required: bool) {
    if required {
        panic!("what this test needs is missing ({REQUIRE_PEERS} is set, as under CI): {why}");
    }
    eprintln!("skipped: {why}");
}

#[cfg(test)]
mod tests {
    #[test]
    #[should_panic(
        expected = "what this test needs is missing (AGENTACP_REQUIRE_PEERS is set, as under CI): node is absent"
    )]
    fn a_missing_peer_fails_the_test_when_it_is_required() {
        super::skip_or_fail("node is absent", true);
    }
}
