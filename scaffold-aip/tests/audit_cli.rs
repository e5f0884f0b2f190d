//! `scaffold-aip audit verify`: exit codes and output for intact, broken and unreadable logs.

mod common;

use std::path::Path;
use std::process::{Command, Output};

#[cfg(unix)]
use common::run_bounded;

use acp_audit::{AuditEvent, AuditLog, FsyncPolicy, Lifecycle};

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scaffold-aip"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// A folder holding `audit.jsonl` with `n` records; returns it and the last hash.
fn log_with(n: usize) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::open(&dir.path().join("audit.jsonl"), FsyncPolicy::EveryRecord).unwrap();
    let mut last = String::new();
    for i in 0..n {
        let state = Lifecycle::ALL[i % Lifecycle::ALL.len()];
        last = log
            .record(AuditEvent::lifecycle("echo", &format!("sess-{i}"), state, None))
            .unwrap()
            .hash;
    }
    (dir, last)
}

fn edit(dir: &Path, f: impl FnOnce(String) -> String) {
    let path = dir.join("audit.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, f(text)).unwrap();
}

#[test]
fn an_intact_log_exits_0_with_its_count_and_last_hash() {
    let (dir, last) = log_with(3);
    let output = run(dir.path(), &["audit", "verify", "audit.jsonl"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        format!("audit.jsonl: 3 records, chain intact (last hash {last})\n")
    );

    let output = run(dir.path(), &["audit", "verify", "--format", "json", "audit.jsonl"]);
    assert_eq!(output.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"file": "audit.jsonl", "intact": true, "records": 3, "lastHash": last})
    );
}

#[test]
fn an_empty_log_is_intact() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("audit.jsonl"), "").unwrap();
    let output = run(dir.path(), &["audit", "verify", "audit.jsonl"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(stdout(&output), "audit.jsonl: 0 records, chain intact (empty log)\n");
}

#[test]
fn a_tampered_log_exits_1_naming_the_first_broken_line() {
    let (dir, _) = log_with(4);
    edit(dir.path(), |text| text.replacen("sess-2", "sess-9", 1));
    let output = run(dir.path(), &["audit", "verify", "audit.jsonl"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.starts_with("audit.jsonl: chain broken at line 3 (seq 2): hash mismatch: recorded "),
        "{text}"
    );
    assert!(text.ends_with("\n  the 2 records before it are intact\n"), "{text}");

    let output = run(dir.path(), &["audit", "verify", "audit.jsonl", "--format", "json"]);
    assert_eq!(output.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(
        (json["intact"].clone(), json["line"].clone(), json["seq"].clone()),
        (false.into(), 3.into(), 2.into())
    );
    assert!(json["reason"].as_str().unwrap().starts_with("hash mismatch"), "{json}");
}

#[test]
fn a_deleted_record_and_a_torn_last_line_exit_1() {
    let (dir, _) = log_with(4);
    edit(dir.path(), |text| {
        let mut lines: Vec<&str> = text.lines().collect();
        lines.remove(1);
        lines.iter().map(|l| format!("{l}\n")).collect()
    });
    let output = run(dir.path(), &["audit", "verify", "audit.jsonl"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output).contains("at line 2 (seq 2): seq 2 where 1 was expected"),
        "{}",
        stdout(&output)
    );
    assert!(
        stdout(&output).ends_with("\n  the record before it is intact\n"),
        "{}",
        stdout(&output)
    );

    let (dir, _) = log_with(2);
    let mut start = 0;
    edit(dir.path(), |text| {
        start = text.find('\n').unwrap() + 1;
        text[..text.len() - 10].to_string()
    });
    let output = run(dir.path(), &["audit", "verify", "audit.jsonl"]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(
        text.starts_with("audit.jsonl: chain broken at line 2: torn last line: "),
        "{text}"
    );
    assert!(
        text.contains(&format!(" bytes from byte {start} with no trailing newline")),
        "{text}"
    );
    let output = run(dir.path(), &["audit", "verify", "--format", "json", "audit.jsonl"]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(
        (json["line"].as_u64(), json["offset"].as_u64()),
        (Some(2), Some(start as u64)),
        "{json}"
    );
}

#[test]
fn a_forged_duplicate_key_exits_1_naming_the_line_and_the_key() {
    let (dir, _) = log_with(3);
    // The forged value comes first; serde_json keeps the last, so the hash still matches.
    edit(dir.path(), |text| {
        let lines: Vec<&str> = text.lines().collect();
        let forged = lines[1].replacen('{', r#"{"metadata":{"aip44":{"state":"FORGED"}},"#, 1);
        format!("{}\n{forged}\n{}\n", lines[0], lines[2])
    });
    let output = run(dir.path(), &["audit", "verify", "audit.jsonl"]);
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    assert!(
        stdout(&output)
            .starts_with(r#"audit.jsonl: chain broken at line 2: duplicate key "metadata" at the top level"#),
        "{}",
        stdout(&output)
    );
}

#[cfg(target_os = "linux")]
#[test]
fn verify_refuses_dev_zero_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let output = run_bounded(dir.path(), &["audit", "verify", "/dev/zero"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert_eq!(stdout(&output), "");
    assert_eq!(
        stderr(&output),
        "scaffold-aip audit verify: /dev/zero: not a regular file (a character device); an audit log is a regular file\n"
    );
}

#[cfg(unix)]
#[test]
fn verify_refuses_a_fifo_without_waiting_for_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new("mkfifo")
        .arg(dir.path().join("audit.jsonl"))
        .status()
        .unwrap();
    assert!(status.success());
    let output = run_bounded(dir.path(), &["audit", "verify", "audit.jsonl"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert_eq!(
        stderr(&output),
        "scaffold-aip audit verify: audit.jsonl: not a regular file (a FIFO); an audit log is a regular file\n"
    );
}

#[cfg(unix)]
#[test]
fn verify_stops_at_a_line_over_the_cap() {
    let (dir, _) = log_with(1);
    let path = dir.path().join("audit.jsonl");
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    let start = file.metadata().unwrap().len();
    // 64 MiB with no newline: more than the cap, so the verifier stops reading early.
    std::io::copy(&mut std::io::Read::take(std::io::repeat(b'x'), 64 << 20), &mut file).unwrap();
    drop(file);
    let output = run_bounded(dir.path(), &["audit", "verify", "--format", "json", "audit.jsonl"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "file": "audit.jsonl", "intact": false, "line": 2, "seq": null, "offset": start,
            "reason": "the line is longer than 16777216 bytes (16 MiB), the limit for one record",
        })
    );
}

#[test]
fn an_unreadable_log_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let output = run(dir.path(), &["audit", "verify", "missing.jsonl"]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(stdout(&output), "");
    assert!(
        stderr(&output).starts_with("scaffold-aip audit verify: missing.jsonl: "),
        "{}",
        stderr(&output)
    );

    let output = run(dir.path(), &["audit", "verify"]);
    assert_eq!(output.status.code(), Some(2), "FILE is required");
    let output = run(dir.path(), &["audit", "verify", "x", "--format", "xml"]);
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn audit_commands_have_help() {
    let dir = tempfile::tempdir().unwrap();
    for args in [&["audit", "--help"][..], &["audit", "verify", "--help"]] {
        let output = run(dir.path(), args);
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        assert!(
            stdout(&output).contains("Usage: scaffold-aip audit"),
            "{}",
            stdout(&output)
        );
    }
    let output = run(dir.path(), &["--help"]);
    assert!(stdout(&output).contains("audit"), "{}", stdout(&output));
}

/// Issue #45.9: `audit verify` takes several logs and verifies each, whatever the others
/// are; the exit status is the worst one (intact 0, broken 1, unreadable 2), and `--format
/// json` gives an array of the single-log documents.
#[test]
fn several_logs_are_each_verified() {
    let (dir, last) = log_with(2);
    let (other, other_last) = log_with(3);
    std::fs::rename(other.path().join("audit.jsonl"), dir.path().join("other.jsonl")).unwrap();
    let output = run(dir.path(), &["audit", "verify", "audit.jsonl", "other.jsonl"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        format!(
            "audit.jsonl: 2 records, chain intact (last hash {last})\nother.jsonl: 3 records, chain intact (last hash {other_last})\n"
        )
    );

    let output = run(
        dir.path(),
        &["audit", "verify", "--format", "json", "audit.jsonl", "other.jsonl"],
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(json[0]["file"], "audit.jsonl");
    assert_eq!(
        json[1],
        serde_json::json!({"file": "other.jsonl", "intact": true, "records": 3, "lastHash": other_last})
    );

    // A missing log between two others: both others still verified, exit 2.
    edit(dir.path(), |text| text.replacen("sess-1", "sess-9", 1));
    let output = run(
        dir.path(),
        &["audit", "verify", "audit.jsonl", "missing.jsonl", "other.jsonl"],
    );
    assert_eq!(output.status.code(), Some(2));
    let text = stdout(&output);
    assert!(text.starts_with("audit.jsonl: chain broken at line 2"), "{text}");
    assert!(text.contains("other.jsonl: 3 records, chain intact"), "{text}");
    assert!(
        stderr(&output).starts_with("scaffold-aip audit verify: missing.jsonl: "),
        "{}",
        stderr(&output)
    );
    let output = run(dir.path(), &["audit", "verify", "audit.jsonl", "other.jsonl"]);
    assert_eq!(output.status.code(), Some(1));
}
