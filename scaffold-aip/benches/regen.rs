//! Benchmark: `scaffold-aip regen`; target under 150 ms per revision, formatting included.
//!
//! `cargo bench -p scaffold-aip --bench regen` times
//! (a) every snapshot of `../shared/upstream/acp-schemas` and `acp-schemas-early` (issue #20:
//!     all the v1 revisions) in this one process: read + plan + emit + prettyplease of each,
//!     the median of 5 per revision; it prints the total and the slowest;
//! (b) the b7f00054 schema (246 KB, 170 definitions), issue #3's reference input: the library
//!     in process, and the release `scaffold-aip regen` binary end to end, writing to a file
//!     (medians of 11).
//!
//! Skips, saying so, when `../shared` is absent.

#![allow(clippy::print_stdout, reason = "a benchmark reports its figures on stdout")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use acp_wire_gen::{Options, SchemaFiles, generate_files};

const RUNS: usize = 11;
/// Runs per revision when timing every snapshot.
const RUNS_EACH: usize = 5;
const REV: &str = "b7f0005493b98de32fabee3e9540e2b64da68535";
/// The target for one revision.
const TARGET: Duration = Duration::from_millis(150);

fn main() {
    let shared = std::env::var_os("AGENTACP_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared"));
    every_snapshot(&shared);
    reference_schema(&shared);
}

/// (a): every snapshot of both folders, in this process.
fn every_snapshot(shared: &Path) {
    let mut dirs: Vec<PathBuf> = ["acp-schemas", "acp-schemas-early"]
        .iter()
        .filter_map(|folder| std::fs::read_dir(shared.join("upstream").join(folder)).ok())
        .flatten()
        .map(|entry| entry.expect("a folder entry").path())
        .filter(|dir| dir.join("schema.json").is_file())
        .collect();
    dirs.sort_by_key(|dir| dir.file_name().map(|name| name.to_os_string()));
    if dirs.is_empty() {
        println!("skipped: no snapshots under {}/upstream", shared.display());
        return;
    }
    let mut timed: Vec<(Duration, String)> = dirs
        .iter()
        .map(|dir| {
            let files = SchemaFiles::locate(dir).expect("schema files");
            let rev = files.rev_from_path().expect("a folder named by its SHA");
            let options = Options::new(rev.clone());
            let time = median(RUNS_EACH, || {
                generate_files(&files, &options).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            });
            (time, rev)
        })
        .collect();
    let total: Duration = timed.iter().map(|(time, _)| *time).sum();
    timed.sort();
    let (slowest, slowest_rev) = timed.last().expect("at least one snapshot");
    let over: Vec<&str> = timed
        .iter()
        .filter(|(time, _)| *time >= TARGET)
        .map(|(_, rev)| &rev[..8])
        .collect();
    println!(
        "library regen of all {} snapshots, one process: total {total:.2?}; slowest {} at {slowest:.2?} \
         (each the median of {RUNS_EACH}); over the {TARGET:?} target: {}",
        timed.len(),
        &slowest_rev[..8],
        if over.is_empty() {
            "none".to_string()
        } else {
            over.join(", ")
        },
    );
}

/// (b): the reference schema, in process and through the release binary.
fn reference_schema(shared: &Path) {
    let dir = shared.join("upstream/acp-schemas").join(REV);
    if !dir.join("schema.json").is_file() {
        println!("skipped: {} is absent", dir.display());
        return;
    }
    let files = SchemaFiles::locate(&dir).expect("schema files");
    let options = Options::new(REV);
    let mut lines = 0;
    let library = median(RUNS, || {
        let generated = generate_files(&files, &options).expect("generate");
        lines = generated.source.lines().count();
    });
    println!("library regen of {REV}: {library:.2?} median of {RUNS} ({lines} lines out)");

    let out = std::env::temp_dir().join(format!("agentacp-bench-regen-{}.rs", std::process::id()));
    let binary = env!("CARGO_BIN_EXE_scaffold-aip");
    let cli = median(RUNS, || {
        let status = Command::new(binary)
            .args(["regen", "--schema"])
            .arg(&dir)
            .arg("--out")
            .arg(&out)
            .stderr(std::process::Stdio::null())
            .status()
            .expect("run scaffold-aip");
        assert!(status.success());
    });
    let _ = std::fs::remove_file(&out);
    println!("scaffold-aip regen (release binary, end to end): {cli:.2?} median of {RUNS}; target < 150 ms");
}

fn median(runs: usize, mut run: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let started = Instant::now();
            run();
            started.elapsed()
        })
        .collect();
    times.sort();
    times[runs / 2]
}
