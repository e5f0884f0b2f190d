//! Benchmark: `scaffold-aip lint` over a folder of 10,000 generated manifests.
//!
//! `cargo bench -p scaffold-aip --bench lint_corpus [-- COUNT]` generates the corpus under
//! `target/bench-corpus`, then times (a) the library's discover + check, in process, and
//! (b) the release `scaffold-aip lint` binary, end to end, as a user runs it. Median of 5.

#![allow(clippy::print_stdout, reason = "a benchmark reports its figures on stdout")]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RUNS: usize = 5;

fn main() {
    let count: usize = std::env::args().skip(1).find_map(|a| a.parse().ok()).unwrap_or(10_000);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-corpus");
    let started = Instant::now();
    let folder = generate(&root, count);
    println!(
        "generated {count} manifests in {:.2?} ({})",
        started.elapsed(),
        folder.display()
    );

    let in_process = median(|| {
        let files = scaffold_aip::lint::discover(std::slice::from_ref(&folder)).unwrap();
        let outcomes = scaffold_aip::lint::check_all(&files);
        assert_eq!(outcomes.len(), count);
    });
    println!(
        "library discover + check: {in_process:.2?} median of {RUNS} ({:.1} µs/manifest)",
        per(in_process, count)
    );

    let binary = env!("CARGO_BIN_EXE_scaffold-aip");
    let cli = median(|| {
        let status = Command::new(binary)
            .args(["lint", "--format", "json"])
            .arg(&folder)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(1), "the corpus has deliberate errors");
    });
    println!(
        "scaffold-aip lint --format json: {cli:.2?} median of {RUNS} ({:.1} µs/manifest)",
        per(cli, count)
    );
    let human = median(|| {
        Command::new(binary)
            .arg("lint")
            .arg(&folder)
            .stdout(Stdio::null())
            .status()
            .unwrap();
    });
    println!("scaffold-aip lint (human):       {human:.2?} median of {RUNS}");
    println!("target: under 1 s for 10,000 manifests");
}

fn per(d: Duration, n: usize) -> f64 {
    d.as_secs_f64() * 1e6 / n as f64
}

fn median(mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[RUNS / 2]
}

/// Writes `count` manifests: servers, clients and bridges at every tier, sharing ref
/// documents the way a monorepo would; one in ten has a mistake.
fn generate(root: &Path, count: usize) -> PathBuf {
    let folder = root.join(format!("n{count}"));
    let _ = std::fs::remove_dir_all(&folder);
    let refs = folder.join("_refs");
    std::fs::create_dir_all(&refs).unwrap();
    std::fs::write(
        refs.join("OPERATOR.md"),
        "---\nname: Bench\nid: bench-operator\npersona_summary: Benchmarks.\nversion: 1.0.0\nprofile:\n  role: r\n  voice: v\n  boundaries: []\ngovernance:\n  audit_log: \"audit:default\"\n  autonomy: supervised\n---\n",
    )
    .unwrap();
    std::fs::write(refs.join("SANDBOX.md"), "---\nprovider: local\nconfig: {}\n---\n").unwrap();
    for i in 0..count {
        let name = format!("operator-{i:05}");
        let dir = folder.join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        let (kind, tier) = match i % 6 {
            0 => ("server", "basic"),
            1 => ("server", "governance-aware"),
            2 => ("server", "sandboxed"),
            3 => ("client", "basic"),
            4 => ("client", "governance-aware"),
            _ => ("bridge", "governance-aware"),
        };
        let version = if i % 10 == 7 { "1.0" } else { "0.1.0" };
        let mut text = format!(
            "---\nname: {name}\nid: {name}\ndescription: Generated manifest number {i} for the lint benchmark.\nversion: {version}\nkind: {kind}\ntransport: [stdio, websocket]\ntags: [bench, generated]\nmetadata:\n  aip44:\n    acp_rev: 0fc18323\n    tier: {tier}\n"
        );
        if kind != "client" {
            text += "    operator: ../_refs/OPERATOR.md\n";
        }
        if tier == "sandboxed" {
            text += "    sandbox: ../_refs/SANDBOX.md\n";
        }
        if kind == "client" {
            text += "    capabilities:\n      client:\n        fs:\n          readTextFile: true\n";
        }
        text += "---\n# Generated\n\nSome body text.\n";
        std::fs::write(dir.join("ACP.md"), text).unwrap();
    }
    folder
}
