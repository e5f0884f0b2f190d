//! Benchmark: what `#[acp_operator]` spends reading and checking a manifest (issue 14: under
//! 5 ms), without rustc internals.
//!
//! `cargo bench -p scaffold-aip --bench manifest_check [-- ITERATIONS]` (default 1,000) generates
//! the crates `scaffold-aip new` makes for a server at tier `basic` and at tier
//! `governance-aware` (which also reads its OPERATOR.md and GOVERNANCE.md refs) and times, in
//! process, the two functions the macro's expansion calls: `manifest::check_file` (read and
//! check) and the whole `operator::expand` (check plus code generation, on the scaffolded
//! struct). For each: the first call (a compiler process expands the macro once per crate,
//! so this one includes any lazy initialisation), then the mean and the minimum over the
//! iterations. `build-cost.sh` also runs it with `--profile dev`: a debug build runs the macro
//! unoptimised, like this.

#![allow(clippy::print_stdout, reason = "a benchmark reports its figures on stdout")]

use std::path::Path;
use std::time::{Duration, Instant};

use acp_expand::{Location, expand};
use scaffold_aip::scaffold::{self, Kind, Options, Tier};

fn main() {
    let iterations: u32 = std::env::args()
        .skip(1)
        .find_map(|arg| arg.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1_000);
    let dir = tempfile::tempdir().expect("a temporary folder");
    let profile = if cfg!(debug_assertions) {
        "dev (unoptimised)"
    } else {
        "release"
    };
    println!("manifest check, {iterations} iterations, profile {profile}");
    for (name, tier) in [("bench-basic", Tier::Basic), ("bench-governed", Tier::GovernanceAware)] {
        let options = Options {
            name: name.to_string(),
            kind: Kind::Server,
            tier,
            transports: Vec::new(),
            dir: dir.path().to_path_buf(),
            agentacp_path: None,
            workspace_root: None,
        };
        let root = scaffold::new_crate(&options).expect("scaffold-aip new").root;
        let manifest = root.join("ACP.md");
        let checked = acp_manifest::manifest::check_file(&manifest).expect("the manifest is readable");
        assert!(!checked.has_errors(), "{name}: the scaffolded manifest is clean");
        let attr: proc_macro2::TokenStream = "manifest = \"ACP.md\"".parse().expect("tokens");
        let item: proc_macro2::TokenStream = format!("pub struct {};", scaffold::struct_name(name))
            .parse()
            .expect("tokens");
        let location = Location {
            crate_dir: root.clone(),
            source_dir: Some(root.join("src")),
        };
        let expanded = expand(attr.clone(), item.clone(), &location).to_string();
        assert!(
            !expanded.contains("compile_error"),
            "{name}: the expansion has no error: {expanded}"
        );

        let check = measure(iterations, || {
            std::hint::black_box(acp_manifest::manifest::check_file(&manifest).expect("readable"));
        });
        report(name, "check_file (read + check)", &manifest, check);
        let whole = measure(iterations, || {
            std::hint::black_box(expand(attr.clone(), item.clone(), &location));
        });
        report(name, "expand (check + codegen)", &manifest, whole);
    }
}

/// First call, mean and minimum of `iterations` further calls.
struct Times {
    first: Duration,
    mean: Duration,
    min: Duration,
}

fn measure(iterations: u32, mut run: impl FnMut()) -> Times {
    let start = Instant::now();
    run();
    let first = start.elapsed();
    let mut min = Duration::MAX;
    let all = Instant::now();
    for _ in 0..iterations {
        let one = Instant::now();
        run();
        min = min.min(one.elapsed());
    }
    Times {
        first,
        mean: all.elapsed() / iterations,
        min,
    }
}

fn report(name: &str, what: &str, manifest: &Path, times: Times) {
    let bytes = std::fs::metadata(manifest).map(|m| m.len()).unwrap_or(0);
    println!(
        "{name:<15} {what:<26} ACP.md {bytes:>4} B: mean {:>9.1?}  min {:>9.1?}  first call {:>9.1?}",
        times.mean, times.min, times.first
    );
}
