//! The conformance kit (issue #19): the whole `scaffold-aip conform` suite, end to end, against
//! our `echo-server` with its manifest (target: under 2 s), and in the same run against
//! `governed-server` driven through the audit emit path and against the agent written with the
//! official Rust SDK (`src/bin/sdk-agent.rs`, plain ACP: the checks of AIP-44 rules skip), all
//! release builds. Each suite starts a fresh agent process per check. Median of `RUNS` runs
//! each, interleaved after a warm-up; then the five slowest checks of one echo run, to show
//! where the time goes.
//!
//! Run with `cargo bench -p interop --bench conform`.

#![allow(clippy::print_stdout)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Instant;

use acp_conform::{AuditSource, Config, Outcome, Verdict};
use interop::bench_support::median;
use interop::release_binary;

const RUNS: usize = 7;

/// One agent the suite is run against.
struct Target {
    label: &'static str,
    config: Box<dyn Fn() -> Config>,
    /// Ours: every check must pass (the SDK agent fails two, see docs/performance.md).
    ours: bool,
}

fn manifest(example: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../examples/{example}/ACP.md"))
}

fn with_manifest(binary: PathBuf, example: &str) -> Config {
    let manifest = manifest(example);
    Config {
        expected_initialize: Some(acp_conform::manifest_initialize(&manifest).expect("the manifest explains")),
        ..Config::new(vec![OsString::from(binary)])
    }
}

fn run(target: &Target) -> (f64, Vec<Verdict>) {
    let started = Instant::now();
    let verdicts = acp_conform::run((target.config)()).expect("the suite runs");
    let elapsed = started.elapsed().as_secs_f64() * 1e3;
    if target.ours {
        let failed = acp_conform::failed(&verdicts);
        assert_eq!(failed, Vec::<&str>::new(), "{}: {verdicts:#?}", target.label);
    }
    (elapsed, verdicts)
}

fn main() {
    let echo = release_binary("echo-server");
    let governed = release_binary("governed-server");
    let sdk = release_binary("sdk-agent");
    let scratch = tempfile::tempdir().expect("a temporary folder");
    let governed_log = scratch.path().join("governed.jsonl");
    let targets = [
        Target {
            label: "echo-server, --manifest (31 checks)",
            config: Box::new(move || Config {
                audit_log: Some(acp_conform::manifest_audit(&manifest("echo-server")).expect("resolves")),
                ..with_manifest(echo.clone(), "echo-server")
            }),
            ours: true,
        },
        Target {
            label: "governed-server, --manifest, 3 tool prompts (31 checks)",
            config: Box::new(move || {
                let mut config = Config {
                    audit_log: Some(AuditSource::File(governed_log.clone())),
                    tool_prompts: vec![
                        r#"/tool read-file {"path": "a.txt"}"#.into(),
                        r#"/tool write-file {"path": "a.txt", "content": "hi"}"#.into(),
                        "/tool delete-repo {}".into(),
                    ],
                    ..with_manifest(governed.clone(), "governed-server")
                };
                config
                    .launch
                    .env
                    .push(("AGENTACP_AUDIT_LOG".into(), governed_log.clone().into()));
                config
            }),
            ours: true,
        },
        Target {
            label: "Rust SDK agent, plain ACP (31 checks)",
            config: Box::new(move || Config {
                long_prompt: "/wait".into(),
                ..Config::new(vec![OsString::from(sdk.clone())])
            }),
            ours: false,
        },
    ];
    for target in &targets {
        run(target);
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); targets.len()];
    for _ in 0..RUNS {
        for (target, times) in targets.iter().zip(&mut times) {
            times.push(run(target).0);
        }
    }
    println!("conformance suite, end to end (median of {RUNS}, release builds):");
    for (target, times) in targets.iter().zip(times) {
        let min = times.iter().copied().fold(f64::INFINITY, f64::min);
        println!("  {:<58} {:>7.0} ms  (min {min:.0} ms)", target.label, median(times));
    }
    let (_, mut verdicts) = run(&targets[0]);
    verdicts.sort_by_key(|v| std::cmp::Reverse(v.millis));
    let ran = verdicts.iter().filter(|v| v.outcome == Outcome::Pass).count();
    println!("echo-server: {ran} checks passed; the slowest:");
    for verdict in verdicts.iter().take(5) {
        println!("  {:<34} {:>5} ms", verdict.id, verdict.millis);
    }
}
