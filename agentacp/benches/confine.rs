//! What confinement by handle costs a tool call, against the path-string confinement it
//! replaced (re-implemented here as the baseline: canonicalise the longest existing ancestor,
//! compare prefixes, then `std::fs`), in the same run on the same files.
//!
//! `cargo bench -p agentacp --bench confine` prints, for a 4 KiB read and a 4 KiB atomic write
//! in a session folder three levels below the root, the median time per operation of each
//! method over 9 rounds, and their ratio.

#![allow(clippy::print_stdout, reason = "a benchmark reports its figures on stdout")]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agentacp::workspace::Workspace;

const ROUNDS: usize = 9;
const OPS: usize = 2_000;

/// The previous `confine_path`: the longest existing ancestor, canonicalised, and a prefix test.
fn string_confine(base: &Path, path: &str) -> Option<PathBuf> {
    let base = base.canonicalize().ok()?;
    let joined = base.join(path);
    let mut existing = joined.as_path();
    let mut rest = Vec::new();
    let resolved = loop {
        match existing.canonicalize() {
            Ok(canonical) => break canonical,
            Err(_) => {
                rest.push(existing.file_name()?);
                existing = existing.parent()?;
            }
        }
    };
    let full = rest.iter().rev().fold(resolved, |acc, name| acc.join(name));
    full.starts_with(&base).then_some(full)
}

/// The previous write: a temporary file named by pid, then a rename; with `durable`, also the
/// fsyncs the new write does (file, then folder), to compare confinement alone.
fn string_write(base: &Path, path: &str, content: &[u8], durable: bool) {
    let target = string_confine(base, path).expect("inside");
    let temporary = target.with_file_name(format!(".{path}.agentacp-{}.tmp", std::process::id()));
    let mut file = std::fs::File::create(&temporary).unwrap();
    std::io::Write::write_all(&mut file, content).unwrap();
    if durable {
        file.sync_all().unwrap();
    }
    std::fs::rename(&temporary, &target).unwrap();
    if durable {
        std::fs::File::open(base).unwrap().sync_all().unwrap();
    }
}

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The median time per operation of `op`, over [`ROUNDS`] rounds of [`OPS`].
fn per_op(mut op: impl FnMut()) -> Duration {
    op();
    let rounds = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..OPS {
                op();
            }
            start.elapsed() / OPS as u32
        })
        .collect();
    median(rounds)
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let session_dir = root.join("code/project/service");
    std::fs::create_dir_all(session_dir.join("src")).unwrap();
    let content = vec![b'x'; 4096];
    std::fs::write(session_dir.join("src/lib.rs"), &content).unwrap();
    let session = Workspace::open(&root)
        .unwrap()
        .confine_cwd(session_dir.to_str().unwrap())
        .unwrap();

    let read_before = per_op(|| {
        let path = string_confine(&session_dir, "src/lib.rs").unwrap();
        assert_eq!(std::fs::read_to_string(path).unwrap().len(), 4096);
    });
    let read_after = per_op(|| {
        assert_eq!(session.read_to_string("src/lib.rs").unwrap().len(), 4096);
    });
    // The new write fsyncs the file and its folder, which the old one did not: the baseline is
    // shown both as it was and with the same fsyncs (confinement alone).
    let write_before = per_op(|| string_write(&session_dir, "out.txt", &content, false));
    let durable_before = per_op(|| string_write(&session_dir, "out.txt", &content, true));
    let write_after = per_op(|| session.write("out.txt", &content).unwrap());

    println!("confinement per operation, 4 KiB, median of {ROUNDS} rounds of {OPS} (lower is better)");
    println!("| operation | path strings (before) | handle (after) | after / before |");
    println!("|---|---|---|---|");
    for (name, before, after) in [
        ("read a file", read_before, read_after),
        (
            "write a file (after: + fsync of file and folder)",
            write_before,
            write_after,
        ),
        ("write a file, both with those fsyncs", durable_before, write_after),
    ] {
        println!(
            "| {name} | {:.1} µs | {:.1} µs | {:.2} |",
            before.as_secs_f64() * 1e6,
            after.as_secs_f64() * 1e6,
            after.as_secs_f64() / before.as_secs_f64()
        );
    }
}
