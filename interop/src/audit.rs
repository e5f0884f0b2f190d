//! Checking an audit log written by one of our servers or the bridge: its records, and the
//! hash chain through `scaffold-aip audit verify` (accepted as written, rejected with one byte
//! changed). Shared by `tests/rust_sdk.rs` and `tests/py_sdk.rs`.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::example_binary;

/// The parsed records of an audit log (one JSON object per line).
pub fn audit_records(path: &Path) -> Vec<Value> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read the audit log {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("audit line is not JSON ({e}): {l}")))
        .collect()
}

/// The first record about the tool `tool` (`metadata.aip44.tool`).
pub fn find_tool_record<'a>(records: &'a [Value], tool: &str) -> Option<&'a Value> {
    records.iter().find(|r| r["metadata"]["aip44"]["tool"] == tool)
}

/// Checks the audit log of a server whose only connections authenticated as `identity`
/// (docs/remote.md): every record carries `metadata.aip44.identity == identity`, the login is
/// audited (`auth.login`, actor `identity`), and the chain verifies ([`check_audit_log`]).
pub fn check_identity_in_audit_log(path: &Path, identity: &str) {
    let records = audit_records(path);
    let show = |rs: &[&Value]| {
        rs.iter()
            .take(5)
            .map(|r| format!("  {}\n", crate::shorten(&r.to_string(), 600)))
            .collect::<String>()
    };
    let without: Vec<&Value> = records
        .iter()
        .filter(|r| r["metadata"]["aip44"]["identity"] != identity)
        .collect();
    assert!(
        !records.is_empty() && without.is_empty(),
        "{} of the {} records of {} lack `metadata.aip44.identity` {identity:?} (the identity \
         of AGENTACP_TOKEN_IDENTITY); the first:\n{}",
        without.len(),
        records.len(),
        path.display(),
        show(&without)
    );
    assert!(
        records
            .iter()
            .any(|r| r["action"] == "auth.login" && r["actor"]["id"] == identity),
        "no `auth.login` record with actor {identity:?} in {}",
        path.display()
    );
    check_audit_log(path, |_| true);
}

/// Checks the audit log: `want` holds for its records; `scaffold-aip audit verify` accepts
/// it; and the same file with one byte changed is rejected.
pub fn check_audit_log(path: &Path, want: impl Fn(&[Value]) -> bool) {
    let records = audit_records(path);
    assert!(
        want(&records),
        "the audit log {} lacks the expected record; it holds:\n{}",
        path.display(),
        records.iter().map(|r| format!("  {r}\n")).collect::<String>()
    );
    let scaffold = example_binary("scaffold-aip");
    let verify = |file: &Path| {
        Command::new(&scaffold)
            .args(["audit", "verify"])
            .arg(file)
            .output()
            .expect("run scaffold-aip")
    };
    let output = verify(path);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.code() == Some(2) && stderr.contains("unrecognized subcommand") {
        eprintln!(
            "SKIPPED: `scaffold-aip audit verify` does not exist yet, so the audit chain of {} \
             was not verified ({})",
            path.display(),
            stderr.lines().next().unwrap_or_default()
        );
        return;
    }
    assert!(
        output.status.success(),
        "`scaffold-aip audit verify` rejected the log {} ({}):\n{}{}",
        path.display(),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        stderr
    );

    // One byte changed, the JSON still valid: a digit of the first record's timestamp.
    let mut bytes = std::fs::read(path).expect("read the audit log");
    let position = find(&bytes, b"\"ts\":\"")
        .map(|at| at + 6)
        .and_then(|start| bytes[start..].iter().position(u8::is_ascii_digit).map(|d| start + d))
        .unwrap_or(bytes.len() / 2);
    bytes[position] ^= 1;
    let tampered = tempfile::NamedTempFile::new().expect("a temporary file");
    std::fs::write(tampered.path(), &bytes).expect("write the tampered log");
    let output = verify(tampered.path());
    // Exit 1 is "chain broken"; 2 would mean it could not even read the file.
    assert_eq!(
        output.status.code(),
        Some(1),
        "`scaffold-aip audit verify` did not report a broken chain for the log with byte \
         {position} changed:\n{}{}\nthe tampered log:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&bytes)
    );
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
