//! Cross-check of the canonical form against an independent RFC 8785 implementation: Trail of
//! Bits' `rfc8785` (pure Python, pinned in `interop/py/requirements.txt`, installed by
//! `.ci/run` into `interop/py/.venv`). Python canonicalizes the same values and verifies, on
//! its own, a log written here (parse each line, drop `hash`, `rfc8785.dumps`, SHA-256, link).
//!
//! Skips, saying why, when no Python with `rfc8785` is found (`AGENTACP_PYTHON` names one,
//! else `interop/py/.venv/bin/python`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use acp_audit::{Actor, AuditEvent, AuditLog, FsyncPolicy, Subject, canonical_json};
use serde_json::{Value, json};

/// The Python to run, or why there is none.
fn python_with_rfc8785() -> Result<PathBuf, String> {
    let python = std::env::var_os("AGENTACP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../interop/py/.venv/bin/python"));
    let imports = Command::new(&python)
        .args(["-c", "import rfc8785"])
        .output()
        .is_ok_and(|out| out.status.success());
    if imports {
        Ok(python)
    } else {
        Err(format!(
            "{} cannot `import rfc8785` (python3 -m venv interop/py/.venv && \
             interop/py/.venv/bin/pip install -r interop/py/requirements.txt; or set AGENTACP_PYTHON)",
            python.display()
        ))
    }
}

/// Runs `script` with `input` on stdin; its stdout, or a panic with its stderr.
fn run(python: &Path, script: &str, input: &str) -> String {
    let mut child = Command::new(python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Written from another thread: Python answers line by line, and would block on a full
    // stdout pipe while this thread still writes.
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_string();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "python failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Doubles worth checking: RFC 8785's edge cases and a deterministic spread of bit patterns.
fn doubles() -> Vec<f64> {
    let mut values = vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        0.5,
        0.1,
        0.1 + 0.2,
        1.5,
        4.5,
        0.002,
        1e-27,
        1e21,
        1e20,
        1e23,
        1e-6,
        1e-7,
        9.999999999999997e-7,
        5e-324,
        -5e-324,
        1.7976931348623157e308,
        -1.7976931348623157e308,
        9007199254740992.0,
        295147905179352830000.0,
        333333333.3333333,
        1424953923781206.2,
        -0.0000033333333333333333,
        123456789012.0,
        1e16,
        2.5e-8,
    ];
    // xorshift64: the same 3000 finite doubles on every run.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    while values.len() < 3000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let f = f64::from_bits(state);
        if f.is_finite() {
            values.push(f);
        }
    }
    values
}

/// Audit-like values: floats, integers within I-JSON, unicode and control characters in keys
/// and strings, nesting.
fn records() -> Vec<Value> {
    let mut records = vec![
        json!({
            "numbers": [333333333.3333333, 1e30, 4.5, 0.002, 1e-27],
            "string": "\u{20ac}$\u{f}\nA'B\"\\\\\"/",
            "literals": [null, true, false]
        }),
        json!({
            "\u{20ac}": "Euro Sign", "\r": "Carriage Return", "\u{fb33}": "Hebrew Letter Dalet With Dagesh",
            "1": "One", "\u{1f600}": "Emoji: Grinning Face", "\u{80}": "Control", "\u{f6}": "Latin Small Letter O With Diaeresis"
        }),
        json!({
            "$schema": "agentgovernance/v1", "doctype": "audit-event", "seq": 3,
            "input": {"tool": "thermostat", "arguments": {"target": 21.5, "ratio": 1.0, "tiny": 1e-7, "big": 1e21}},
            "output": {"result": {"readings": [-0.0, 0.30000000000000004, 9007199254740991i64, -9007199254740991i64]}},
            "metadata": {"aip44": {"\u{e000}": 1, "\u{1f600}": 2, "a\u{0}b": "\u{1}\u{1f}\u{7f}\u{2028}", "é": {"z": [], "y": {}}}}
        }),
    ];
    for chunk in doubles().chunks(100) {
        let mut map = serde_json::Map::new();
        for (i, f) in chunk.iter().enumerate() {
            map.insert(format!("k\u{1f600}{i:03}"), json!(f));
        }
        records.push(json!({"floats": map, "list": chunk}));
    }
    records
}

const CANONICALIZE: &str = r#"
import json, sys, rfc8785
for line in sys.stdin:
    print(rfc8785.dumps(json.loads(line)).hex())
"#;

#[test]
fn python_rfc8785_writes_the_same_bytes() {
    let python = match python_with_rfc8785() {
        Ok(python) => python,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let records = records();
    let input: String = records.iter().map(|r| format!("{r}\n")).collect();
    let output = run(&python, CANONICALIZE, &input);
    let theirs: Vec<&str> = output.lines().collect();
    assert_eq!(theirs.len(), records.len());
    for (record, theirs) in records.iter().zip(theirs) {
        let ours = canonical_json(record);
        let ours_hex: String = ours.bytes().map(|b| format!("{b:02x}")).collect();
        assert_eq!(ours_hex, theirs, "rfc8785 disagrees on {ours}");
    }
}

const VERIFY: &str = r#"
import hashlib, json, sys, rfc8785
prev = "GENESIS"
for n, line in enumerate(sys.stdin):
    record = json.loads(line)
    recorded = record.pop("hash")
    computed = hashlib.sha256(rfc8785.dumps(record)).hexdigest()
    assert record["seq"] == n and record["prevHash"] == prev, f"line {n + 1}: chain"
    assert computed == recorded, f"line {n + 1}: {recorded} != {computed}"
    prev = recorded
print(n + 1, prev)
"#;

#[test]
fn python_rfc8785_verifies_a_log_written_here() {
    let python = match python_with_rfc8785() {
        Ok(python) => python,
        Err(why) => {
            eprintln!("skipped: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(&path, FsyncPolicy::Never).unwrap();
    let records = records();
    let mut last = String::new();
    for (i, record) in records.iter().enumerate() {
        let mut event = AuditEvent::new(
            Actor {
                id: "operator:jcs".into(),
                role: Some("operator".into()),
            },
            "tool.call",
            Subject {
                kind: "tool-call".into(),
                reference: Some(format!("call_{i}")),
                path: None,
            },
        );
        event.input = Some(record.clone());
        event.output = Some(json!({"result": {"elapsed": 0.25 * i as f64, "ratio": 1.0 / (i as f64 + 3.0)}}));
        last = log.record(event).unwrap().hash;
    }
    drop(log);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(run(&python, VERIFY, &text).trim(), format!("{} {last}", records.len()));
}
