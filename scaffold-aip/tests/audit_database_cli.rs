//! `scaffold-aip audit verify --database` and `audit export --database` against a real
//! PostgreSQL (the tests' cluster; skipped without PostgreSQL's server programs unless
//! `AGENTACP_REQUIRE_PEERS` is set): verdicts per chain, exit codes, and exports that
//! `audit verify FILE` accepts.

#![cfg(feature = "postgres")]

mod common;

use std::path::Path;
use std::process::Output;

use acp_audit::{AuditEvent, AuditLog, FsyncPolicy, Lifecycle};
use acp_postgres::{Database, Options};

/// `scaffold-aip args` in `dir`, without `AGENTACP_DATABASE_URL`.
fn run(dir: &Path, args: &[&str]) -> Output {
    common::run_with_database_env(dir, args, None)
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// A database holding chains `op@a` (3 records) and `op@b` (2 records); its URL and the last
/// hash of each chain.
fn chains(test: &str) -> Option<(&'static test_support::postgres::Cluster, String, [String; 2])> {
    let cluster = test_support::postgres::cluster()?;
    let url = cluster.database(test);
    let db = Database::connect(&url, Options::default()).unwrap();
    let mut last = [String::new(), String::new()];
    for (i, (chain, n)) in [("op@a", 3), ("op@b", 2)].into_iter().enumerate() {
        let log = AuditLog::open_database(&db, chain, FsyncPolicy::EveryRecord).unwrap();
        for k in 0..n {
            let state = Lifecycle::ALL[k % Lifecycle::ALL.len()];
            last[i] = log
                .record(AuditEvent::lifecycle("echo", &format!("sess-{k}"), state, None))
                .unwrap()
                .hash;
        }
    }
    Some((cluster, url, last))
}

#[test]
fn intact_chains_exit_0_with_a_verdict_each() {
    let Some((_, url, [a, b])) = chains("cli_intact") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let output = run(dir.path(), &["audit", "verify", "--database", &url]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        format!(
            "chain op@a: 3 records, chain intact (last hash {a})\nchain op@b: 2 records, chain intact (last hash {b})\n"
        )
    );
    let output = run(
        dir.path(),
        &[
            "audit",
            "verify",
            "--database",
            &url,
            "--chain",
            "op@b",
            "--format",
            "json",
        ],
    );
    assert_eq!(output.status.code(), Some(0));
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        document,
        serde_json::json!({"chain": "op@b", "intact": true, "records": 2, "lastHash": b})
    );
}

#[test]
fn a_broken_chain_exits_1_naming_chain_and_seq() {
    let Some((cluster, url, _)) = chains("cli_broken") else {
        return;
    };
    cluster
        .psql(
            &url,
            "delete from agentacp_audit_records where chain = 'op@a' and seq = 1",
        )
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let output = run(dir.path(), &["audit", "verify", "--database", &url]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let said = stdout(&output);
    assert!(
        said.starts_with(
            "chain op@a: broken at seq 1: seq 2 follows seq 0: records 1 to 1 are missing (a gap)\n  the record \
             before it is intact\nchain op@b: 2 records, chain intact"
        ),
        "{said}"
    );
    let output = run(
        dir.path(),
        &["audit", "verify", "--database", &url, "--chain", "op@none"],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).starts_with("chain op@none: broken: there is no such chain in the database at"));
}

#[test]
fn an_export_is_verified_by_the_file_verifier() {
    let Some((_, url, [a, _])) = chains("cli_export") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let output = run(
        dir.path(),
        &["audit", "export", "--database", &url, "--out", "exported"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "chain op@a: 3 records written to exported/op@a.jsonl\nchain op@b: 2 records written to exported/op@b.jsonl\n"
    );
    let output = run(
        dir.path(),
        &["audit", "verify", "exported/op@a.jsonl", "exported/op@b.jsonl"],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stdout(&output).starts_with(&format!(
        "exported/op@a.jsonl: 3 records, chain intact (last hash {a})\n"
    )));
}

/// `--database` without a URL reads it from `AGENTACP_DATABASE_URL` (the servers' variable),
/// which keeps a password out of the process list; without the variable, a sentence says so.
#[test]
fn a_bare_database_flag_reads_the_url_from_agentacp_database_url() {
    let Some((_, url, [a, b])) = chains("cli_env") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let output = common::run_with_database_env(dir.path(), &["audit", "verify", "--database"], Some(&url));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        format!(
            "chain op@a: 3 records, chain intact (last hash {a})\nchain op@b: 2 records, chain intact (last hash {b})\n"
        )
    );
    assert_eq!(stderr(&output), "", "no warning for a URL from the environment");
    let output = common::run_with_database_env(
        dir.path(),
        &["audit", "export", "--database", "--out", "exported", "--chain", "op@b"],
        Some(&url),
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "chain op@b: 2 records written to exported/op@b.jsonl\n"
    );
    for args in [
        vec!["audit", "verify", "--database", "--chain", "op@a"],
        vec!["audit", "export", "--database", "--out", "x"],
    ] {
        let output = common::run_with_database_env(dir.path(), &args, None);
        assert_eq!(output.status.code(), Some(2));
        assert_eq!(
            stderr(&output),
            format!(
                "scaffold-aip {} {}: `--database` without a URL reads it from AGENTACP_DATABASE_URL, which is not \
                 set: set it, or give the URL after `--database`\n",
                args[0], args[1]
            )
        );
    }
}

#[test]
fn an_unreachable_database_exits_2_with_a_sentence_and_no_password() {
    let (url, port) = common::unreachable_database();
    let dir = tempfile::tempdir().unwrap();
    for args in [
        vec!["audit", "verify", "--database"],
        vec!["audit", "export", "--database", "--out", "x"],
    ] {
        let command = format!("scaffold-aip {} {}", args[0], args[1]);
        let unreachable = format!("{command}: cannot reach the database at postgres://agent@127.0.0.1:{port}/agents");
        // The URL from the environment: the sentence alone.
        let output = common::run_with_database_env(dir.path(), &args, Some(&url));
        assert_eq!(output.status.code(), Some(2));
        let said = stderr(&output);
        assert!(said.starts_with(&unreachable), "{said}");
        assert!(!said.contains("s3cret"), "{said}");
        // The URL on the command line: a warning that its password shows, then the sentence.
        let mut args = args.clone();
        args.insert(3, &url);
        let output = run(dir.path(), &args);
        assert_eq!(output.status.code(), Some(2));
        let said = stderr(&output);
        let lines: Vec<&str> = said.lines().collect();
        assert_eq!(
            lines[0],
            format!(
                "{command}: warning: the database URL on the command line holds a password, which other users of \
                 this machine can read in the process list; set AGENTACP_DATABASE_URL and give `--database` \
                 without a URL"
            )
        );
        assert!(lines[1].starts_with(&unreachable), "{said}");
        assert!(!said.contains("s3cret"), "{said}");
    }
}

#[test]
fn files_and_a_database_are_not_verified_together() {
    let dir = tempfile::tempdir().unwrap();
    let output = run(
        dir.path(),
        &["audit", "verify", "a.jsonl", "--database", "postgres://x@127.0.0.1/x"],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("cannot be used with"), "{}", stderr(&output));
    let output = run(dir.path(), &["audit", "verify", "--chain", "x"]);
    assert_eq!(output.status.code(), Some(2));
}
