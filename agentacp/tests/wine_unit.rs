//! Issue #50: the runtime's own unit tests (`cargo test -p agentacp --lib`) built for
//! `x86_64-pc-windows-gnu` and run under Wine, through cargo's runner.
//!
//! Built with every feature (`--all-features`: what the crate's own dev-dependency on itself
//! enables for its tests anyway, and what the Windows checks use), into `target/windows`. The
//! tests that need Unix (a shell and its programs, FIFOs, mode bits, `/proc`, the local
//! sandbox) are `#[cfg(unix)]` or `#[cfg(target_os = "linux")]` in the source; the ones that
//! fail only because Wine is not Windows are `#[cfg_attr(windows, ignore = "…")]` with the
//! reason. This test prints how many ran, the ignored ones with their reasons, and every
//! failure. Wine is not Windows: a real Windows runner stays the final check.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use test_support::wine::{self, Wine};

/// How long the build and the run may take together: a cold build of the runtime's tests for
/// Windows takes minutes on two cores (a guard against hanging, not a timing target).
const LIMIT: Duration = Duration::from_secs(1800);

#[test]
fn the_runtimes_unit_tests_pass_on_windows_under_wine() {
    let Some(wine) = Wine::start() else { return };
    let root = test_support::workspace();
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo
        .current_dir(&root)
        .args(["test", "--target", wine::TARGET, "--target-dir"])
        .arg(root.join("target/windows"))
        .args(["-p", "agentacp", "--all-features", "--lib"]);
    wine.cargo_runner(&mut cargo);
    let out = test_support::output_within(&mut cargo, LIMIT);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = wine::quiet(&String::from_utf8_lossy(&out.stderr));
    let summary = Summary::of(&stdout);
    let unix_only = unix_only_tests(&root.join("agentacp/src"));
    eprintln!(
        "{summary}not built for Windows (Unix-only), {} tests or test modules:\n  {}",
        unix_only.len(),
        unix_only.join("\n  ")
    );
    assert!(
        out.status.success() && summary.failed.is_empty(),
        "the runtime's unit tests failed on Windows under Wine:\n{stdout}\n{stderr}"
    );
    assert!(summary.passed >= 200, "too few tests ran:\n{stdout}");
}

/// The unit tests under `src` that Windows does not build, each `file: name`: a test fn, or a
/// `mod` (`file: mod name`, all its tests), gated to Unix (`#[cfg(unix)]`, `target_os =
/// "linux"`, …). Read from the source: a test program lists only the tests it has.
fn unix_only_tests(src: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut files = vec![src.to_path_buf()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|entry| entry.unwrap().path()));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            let file = path.strip_prefix(src).unwrap().display().to_string();
            for item in unix_only_in(&text) {
                // `mod name;`: counted when its file has tests.
                if let Some(name) = item.strip_prefix("mod ").and_then(|name| name.strip_suffix(';')) {
                    let folder = match path.file_stem().unwrap().to_str().unwrap() {
                        "mod" | "lib" => path.parent().unwrap().to_path_buf(),
                        stem => path.with_file_name(stem),
                    };
                    let child = [folder.join(format!("{name}.rs")), folder.join(name).join("mod.rs")];
                    let text = child.iter().find_map(|child| std::fs::read_to_string(child).ok());
                    if text.is_some_and(|text| text.contains("#[test]") || text.contains("::test")) {
                        found.push(format!("{file}: mod {name}"));
                    }
                } else {
                    found.push(format!("{file}: {item}"));
                }
            }
        }
    }
    found.sort();
    found
}

/// The Unix-only tests of one file's `text`: `name` for a test fn, `mod name` for an inline
/// test module, `mod name;` for any module in a file of its own (which may hold tests).
fn unix_only_in(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut attributes = String::new();
    let mut open_brackets = 0i32;
    for line in text.lines().map(str::trim) {
        if open_brackets > 0 || line.starts_with("#[") {
            open_brackets += line.matches('[').count() as i32 - line.matches(']').count() as i32;
            attributes.push_str(line);
            continue;
        }
        if line.starts_with("//") {
            continue;
        }
        let gated = attributes.split("#[").any(|attribute| {
            attribute.starts_with("cfg(")
                && (attribute.contains("unix") || attribute.contains("linux"))
                && !attribute.contains("not(")
        });
        let test = attributes.contains("#[test]") || attributes.contains("::test");
        let words: Vec<&str> = line
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .filter(|word| !word.is_empty())
            .collect();
        let named = |keyword: &str| {
            let at = words.iter().position(|word| *word == keyword)?;
            words.get(at + 1).copied()
        };
        if gated {
            match (named("fn"), named("mod")) {
                (Some(name), _) if test => found.push(name.to_string()),
                (None, Some(name)) if line.ends_with(';') => found.push(format!("mod {name};")),
                (None, Some(name)) if name == "tests" || attributes.contains("test") => {
                    found.push(format!("mod {name}"))
                }
                _ => {}
            }
        }
        attributes.clear();
    }
    found
}

/// What one run of a libtest binary reported.
#[derive(Debug, Default, PartialEq)]
struct Summary {
    /// How many passed.
    passed: usize,
    /// The failed tests' names.
    failed: Vec<String>,
    /// The ignored tests, each `name: reason` (`name` alone without a reason).
    ignored: Vec<String>,
}

impl Summary {
    /// Reads libtest's `test name ... ok` lines.
    fn of(stdout: &str) -> Summary {
        let mut summary = Summary::default();
        for line in stdout.lines() {
            let Some((name, outcome)) = line.strip_prefix("test ").and_then(|rest| rest.split_once(" ... ")) else {
                continue;
            };
            match outcome.trim_end() {
                "ok" => summary.passed += 1,
                "FAILED" => summary.failed.push(name.to_string()),
                "ignored" => summary.ignored.push(name.to_string()),
                other => {
                    if let Some(reason) = other.strip_prefix("ignored, ") {
                        summary.ignored.push(format!("{name}: {reason}"));
                    }
                }
            }
        }
        summary
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "agentacp's unit tests on Windows under Wine: {} passed, {} failed, {} ignored",
            self.passed,
            self.failed.len(),
            self.ignored.len()
        )?;
        for name in &self.ignored {
            writeln!(f, "  ignored: {name}")?;
        }
        for name in &self.failed {
            writeln!(f, "  FAILED: {name}")?;
        }
        Ok(())
    }
}

#[test]
fn libtest_lines_are_counted() {
    let stdout = "running 4 tests\ntest a::b ... ok\ntest a::c ... FAILED\ntest a::d ... ignored, Wine has no FIFOs\ntest e ... ignored\ntest f ... ok\n\ntest result: FAILED. 2 passed; 1 failed; 2 ignored;\n";
    assert_eq!(
        Summary::of(stdout),
        Summary {
            passed: 2,
            failed: vec!["a::c".into()],
            ignored: vec!["a::d: Wine has no FIFOs".into(), "e".into()],
        }
    );
}

#[test]
fn unix_only_tests_are_found_in_the_source() {
    let text = "#[cfg(unix)]\n#[test]\nfn a() {}\n#[test]\nfn b() {}\n/// Doc.\n#[cfg(target_os = \"linux\")]\n#[tokio::test(\n    flavor = \"current_thread\"\n)]\nasync fn c() {}\n#[cfg(not(unix))]\n#[test]\nfn d() {}\n#[cfg(all(test, unix))]\nmod tests {\n}\n#[cfg(unix)]\npub mod stdio;\n#[cfg(unix)]\nfn helper() {}\n";
    assert_eq!(unix_only_in(text), ["a", "c", "mod tests", "mod stdio;"]);
}
