//! Benchmark: `scaffold-aip regen` of the b7f00054 schema (246 KB, 170 definitions), the
//! issue's reference input; target under 150 ms including formatting.
//!
//! `cargo bench -p scaffold-aip --bench regen` times (a) the library's read + plan + emit +
//! prettyplease, in process, and (b) the release `scaffold-aip regen` binary end to end,
//! writing to a file. Median of 11. Skips, saying so, when `../shared` is absent.

#![allow(clippy::print_stdout, reason = "a benchmark reports its figures on stdout")]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use acp_wire_gen::{Options, SchemaFiles, generate_files};

const RUNS: usize = 11;
const REV: &str = "b7f0005493b98de32fabee3e9540e2b64da68535";

fn main() {
    let shared = std::env::var_os("AGENTACP_SHARED")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared"));
    let dir = shared.join("upstream/acp-schemas").join(REV);
    if !dir.join("schema.json").is_file() {
        println!("skipped: {} is absent", dir.display());
        return;
    }
    let files = SchemaFiles::locate(&dir).expect("schema files");
    let options = Options::new(REV);
    let mut lines = 0;
    let library = median(|| {
        let generated = generate_files(&files, &options).expect("generate");
        lines = generated.source.lines().count();
    });
    println!("library regen of {REV}: {library:.2?} median of {RUNS} ({lines} lines out)");

    let out = std::env::temp_dir().join(format!("agentacp-bench-regen-{}.rs", std::process::id()));
    let binary = env!("CARGO_BIN_EXE_scaffold-aip");
    let cli = median(|| {
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

fn median(mut run: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            run();
            started.elapsed()
        })
        .collect();
    times.sort();
    times[RUNS / 2]
}
