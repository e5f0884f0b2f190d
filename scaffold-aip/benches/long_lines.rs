//! Benchmark: manifests with one huge flow collection on a single line, against the same
//! items one per line (issue 23, item 14: positions must not rescan the line per event).
//!
//! `cargo bench -p scaffold-aip --bench long_lines [-- COUNT...]` (default 10,000, 50,000 and
//! 100,000 items) times `check_bytes` in process, median of 3 (`BENCH_RUNS=n` for n), for: an unknown key holding a
//! flow list (`a: [x0, x1, …]`), the same list under `tags` (every item checked, duplicates
//! looked for), a flow mapping of that many keys (`{x0, x1, …}`), and the list written one item per line.
//! Then `scaffold-aip lint` (release) on the one-line list, as a user runs it.

#![allow(clippy::print_stdout, reason = "a benchmark reports its figures on stdout")]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    let mut counts: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    if counts.is_empty() {
        counts = vec![10_000, 50_000, 100_000];
    }
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-long-lines/long-lines");
    std::fs::create_dir_all(&folder).unwrap();
    let path = folder.join("ACP.md");
    for count in counts {
        let items: Vec<String> = (0..count).map(|i| format!("x{i}")).collect();
        let cases = [
            ("one line, `a: [..]`", format!("a: [{}]\n", items.join(", "))),
            ("one line, `tags: [..]`", format!("tags: [{}]\n", items.join(", "))),
            ("one line, `a: {..}`", format!("a: {{{}}}\n", items.join(", "))),
            (
                "one item per line",
                format!("a:\n{}", items.iter().map(|i| format!("- {i}\n")).collect::<String>()),
            ),
        ];
        for (name, yaml) in cases {
            let bytes = manifest(&yaml);
            let time = median(|| {
                let checked = acp_manifest::manifest::check_bytes(&path, &bytes);
                assert!(checked.has_errors(), "the manifest lacks its required fields");
            });
            println!(
                "{count:>7} items, {name:<24} {:>7} KiB: check_bytes {time:>10.2?} median of {}",
                bytes.len() / 1024,
                runs()
            );
        }
        std::fs::write(&path, manifest(&format!("a: [{}]\n", items.join(", ")))).unwrap();
        let cli = median(|| {
            let status = Command::new(env!("CARGO_BIN_EXE_scaffold-aip"))
                .arg("lint")
                .arg(&path)
                .stdout(Stdio::null())
                .status()
                .unwrap();
            assert_eq!(status.code(), Some(1), "the manifest lacks its required fields");
        });
        println!(
            "{count:>7} items, one line: scaffold-aip lint {cli:.2?} median of {}",
            runs()
        );
    }
}

/// A frontmatter of just `yaml` (so `lint` reports the missing required fields, fast).
fn manifest(yaml: &str) -> Vec<u8> {
    format!("---\n{yaml}---\n").into_bytes()
}

fn runs() -> usize {
    std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3)
        .max(1)
}

fn median(mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..runs())
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}
