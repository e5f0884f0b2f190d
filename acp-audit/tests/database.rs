//! Audit chains in a real PostgreSQL (feature `postgres`; the tests' cluster, skipped without
//! PostgreSQL's server programs unless `AGENTACP_REQUIRE_PEERS` is set): chains continue
//! across reopening, one writer per chain (in this process and another), tampering of every
//! kind is found and named, exports verify as files, and writers killed at random points lose
//! nothing they acknowledged.
//!
//! The other processes are this test binary run again on [`child_writer`] with
//! `ACP_AUDIT_DB_CHILD_URL` set; they say what they do in `child: …` lines on stdout, which
//! the parent reads (nothing here sleeps to wait for them).

#![cfg(all(unix, feature = "postgres"))]

use std::io::{BufRead, BufReader, Lines, Write as _};
use std::process::{Child, ChildStdout, Command, Stdio};

use acp_audit::{
    Actor, AuditError, AuditEvent, AuditLog, ChainVerdict, FsyncPolicy, Subject, VerifySummary, export_database,
    verify_database, verify_file,
};
use acp_postgres::{Database, Options};
use serde_json::json;
use test_support::postgres::Cluster;

const URL: &str = "ACP_AUDIT_DB_CHILD_URL";
const CHAIN: &str = "ACP_AUDIT_DB_CHILD_CHAIN";
/// `Batched { every: N }` when set, else `EveryRecord`.
const BATCH: &str = "ACP_AUDIT_DB_CHILD_BATCH";
const PREFIX: &str = "child: ";

fn event(i: u64) -> AuditEvent {
    let mut event = AuditEvent::new(
        Actor {
            id: format!("host:{}", std::process::id()),
            role: None,
        },
        "audit.note",
        Subject {
            kind: "note".into(),
            reference: None,
            path: None,
        },
    );
    event.input = Some(json!({"i": i, "payload": "x".repeat(300)}));
    event
}

/// A fresh database on the cluster: the cluster, its URL and a pool on it.
fn database(test: &str) -> Option<(&'static Cluster, String, Database)> {
    let cluster = test_support::postgres::cluster()?;
    let url = cluster.database(test);
    let db = Database::connect(&url, Options::default()).expect("connects");
    Some((cluster, url, db))
}

fn record(log: &AuditLog, n: u64) {
    for i in 0..n {
        log.record(event(i)).expect("record");
    }
}

/// The verdicts, as `(chain, records)` for intact chains or `(chain, fault)` sentences.
fn verdicts(db: &Database) -> Vec<(String, Result<u64, String>)> {
    verify_database(db, None)
        .expect("verify")
        .into_iter()
        .map(|ChainVerdict { chain, result }| (chain, result.map(|s| s.records).map_err(|f| f.to_string())))
        .collect()
}

#[test]
fn a_chain_continues_across_reopening_and_each_replica_has_its_own() {
    let Some((_, _, db)) = database("continues") else {
        return;
    };
    let a = AuditLog::open_database(&db, "op@a", FsyncPolicy::EveryRecord).unwrap();
    record(&a, 3);
    let b = AuditLog::open_database(&db, "op@b", FsyncPolicy::Batched { every: 4 }).unwrap();
    record(&b, 5);
    drop(a);
    let a = AuditLog::open_database(&db, "op@a", FsyncPolicy::EveryRecord).unwrap();
    let next = a.record(event(9)).unwrap();
    assert_eq!(next.seq, 3, "the reopened chain continues");
    drop((a, b));
    assert_eq!(
        verdicts(&db),
        [("op@a".to_string(), Ok(4)), ("op@b".to_string(), Ok(5))]
    );
}

#[test]
fn a_second_writer_of_a_chain_is_refused_naming_the_chain_and_the_holder() {
    let Some((_, _, db)) = database("second_writer") else {
        return;
    };
    let first = AuditLog::open_database(&db, "op@same", FsyncPolicy::EveryRecord).unwrap();
    record(&first, 1);
    let error = AuditLog::open_database(&db, "op@same", FsyncPolicy::EveryRecord).unwrap_err();
    assert!(matches!(error, AuditError::ChainLocked { .. }), "{error:?}");
    let said = error.to_string();
    assert!(
        said.starts_with("the audit chain op@same in the database at postgres://"),
        "{said}"
    );
    assert!(
        said.contains(&format!("agentacp audit op@same pid {}", std::process::id())),
        "names the holder: {said}"
    );
    drop(first);
    let again = AuditLog::open_database(&db, "op@same", FsyncPolicy::EveryRecord).unwrap();
    assert_eq!(again.record(event(1)).unwrap().seq, 1);
}

#[test]
fn a_chain_is_opened_verified_and_exported_from_an_async_runtime() {
    // The synchronous client panics on a runtime's thread: agentacp opens its log from one.
    let Some((_, _, db)) = database("in_runtime") else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    runtime.block_on(async {
        let log = AuditLog::open_database(&db, "op@rt", FsyncPolicy::EveryRecord).unwrap();
        record(&log, 2);
        drop(log);
        assert_eq!(verdicts(&db), [("op@rt".to_string(), Ok(2))]);
        assert_eq!(export_database(&db, dir.path(), None).unwrap().len(), 1);
        assert_eq!(acp_audit::database_chains(&db).unwrap(), ["op@rt"]);
    });
}

#[test]
fn a_bad_chain_name_is_refused_with_a_sentence() {
    let Some((_, _, db)) = database("bad_name") else { return };
    for name in ["", ".hidden", "a/b", "x y"] {
        let error = AuditLog::open_database(&db, name, FsyncPolicy::EveryRecord).unwrap_err();
        assert!(
            error.to_string().contains("is not an audit chain name"),
            "{name}: {error}"
        );
    }
}

/// Tampers with chain `op@t` of a fresh database holding 6 records, by `sql`; the verdict and
/// whether the chain still opens.
fn tampered(test: &str, sql: &str) -> Option<(String, Option<String>)> {
    let (cluster, url, db) = database(test)?;
    let log = AuditLog::open_database(&db, "op@t", FsyncPolicy::EveryRecord).unwrap();
    record(&log, 6);
    drop(log);
    cluster.psql(&url, sql).expect("tampering");
    let [(chain, verdict)] = verdicts(&db).try_into().expect("one chain");
    assert_eq!(chain, "op@t");
    let fault = verdict.expect_err("tampering is found");
    let opened = AuditLog::open_database(&db, "op@t", FsyncPolicy::EveryRecord).err();
    Some((fault, opened.map(|e| e.to_string())))
}

#[test]
fn a_changed_line_is_found_naming_chain_and_seq() {
    let sql = "update agentacp_audit_records set line = replace(line, '\"i\":2', '\"i\":7') where seq = 2";
    let Some((fault, opened)) = tampered("changed", sql) else {
        return;
    };
    assert!(fault.starts_with("chain op@t, seq 2: hash mismatch"), "{fault}");
    assert_eq!(opened, None, "only the tail is checked at open");
}

#[test]
fn a_changed_last_line_stops_the_chain_from_opening() {
    let sql = "update agentacp_audit_records set line = replace(line, '\"i\":5', '\"i\":7') where seq = 5";
    let Some((fault, opened)) = tampered("changed_last", sql) else {
        return;
    };
    assert!(fault.starts_with("chain op@t, seq 5: hash mismatch"), "{fault}");
    let opened = opened.expect("refused");
    assert!(
        opened.starts_with("audit chain is broken, refusing to append: chain op@t, seq 5: hash mismatch"),
        "{opened}"
    );
}

#[test]
fn a_deleted_middle_row_is_a_gap() {
    let sql = "delete from agentacp_audit_records where seq = 3";
    let Some((fault, _)) = tampered("gap", sql) else { return };
    assert_eq!(
        fault,
        "chain op@t, seq 3: seq 4 follows seq 2: records 3 to 3 are missing (a gap)"
    );
}

#[test]
fn deleted_tail_rows_are_found_by_the_head_left_behind() {
    let sql = "delete from agentacp_audit_records where seq >= 4";
    let Some((fault, opened)) = tampered("cut_tail", sql) else {
        return;
    };
    let expected = "chain op@t, seq 4: the head names seq 5 but the last record is seq 3: records 4 to 5 were \
                    deleted (the tail was cut)";
    assert_eq!(fault, expected);
    assert_eq!(
        opened.as_deref(),
        Some(format!("audit chain is broken, refusing to append: {expected}").as_str())
    );
}

#[test]
fn a_deleted_head_is_found() {
    let Some((fault, opened)) = tampered("no_head", "delete from agentacp_audit_heads") else {
        return;
    };
    assert!(fault.contains("the chain has records but no head row"), "{fault}");
    assert!(opened.is_some_and(|o| o.contains("no head row")));
}

#[test]
fn a_fork_cannot_be_stored_and_a_relinked_record_is_found() {
    let Some((cluster, url, db)) = database("fork") else {
        return;
    };
    let log = AuditLog::open_database(&db, "op@f", FsyncPolicy::EveryRecord).unwrap();
    record(&log, 3);
    drop(log);
    let error = cluster
        .psql(
            &url,
            "insert into agentacp_audit_records select chain, seq, line from agentacp_audit_records where seq = 1",
        )
        .unwrap_err();
    assert!(
        error.contains("duplicate key value violates unique constraint"),
        "{error}"
    );
    // A record replaced by one of another chain (a fork's branch grafted in).
    let other = AuditLog::open_database(&db, "op@g", FsyncPolicy::EveryRecord).unwrap();
    record(&other, 3);
    drop(other);
    cluster
        .psql(
            &url,
            "update agentacp_audit_records r set line = g.line from agentacp_audit_records g \
             where r.chain = 'op@f' and r.seq = 1 and g.chain = 'op@g' and g.seq = 1",
        )
        .unwrap();
    let verdicts = verdicts(&db);
    let fault = verdicts[0].1.as_ref().unwrap_err();
    assert!(
        fault.starts_with("chain op@f, seq 1: prevHash")
            && fault.contains("does not link to the previous record's hash"),
        "{fault}"
    );
    assert_eq!(verdicts[1], ("op@g".to_string(), Ok(3)));
}

#[test]
fn an_export_verifies_with_the_file_verifier() {
    let Some((_, _, db)) = database("export") else { return };
    for (chain, n) in [("op@x", 4), ("op@y", 0), ("op@z", 7)] {
        let log = AuditLog::open_database(&db, chain, FsyncPolicy::Batched { every: 3 }).unwrap();
        record(&log, n);
    }
    let dir = tempfile::tempdir().unwrap();
    let exports = export_database(&db, dir.path(), None).unwrap();
    let names: Vec<_> = exports.iter().map(|e| (e.chain.as_str(), e.records)).collect();
    // A chain opened but never written to holds nothing, so it is not a chain yet.
    assert_eq!(names, [("op@x", 4), ("op@z", 7)]);
    let in_db = verify_database(&db, None).unwrap();
    for (export, verdict) in exports.iter().zip(&in_db) {
        assert_eq!(export.path, dir.path().join(format!("{}.jsonl", export.chain)));
        let summary = verify_file(&export.path).expect("the file verifier accepts the export");
        assert_eq!(Ok(summary), verdict.result.clone());
    }
    let only = export_database(&db, &dir.path().join("one"), Some("op@z")).unwrap();
    assert_eq!(only.len(), 1);
    let error = export_database(&db, dir.path(), Some("op@none"))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("there is no audit chain op@none in the database at"),
        "{error}"
    );
}

#[test]
fn a_long_chain_is_read_a_page_at_a_time_by_rows_and_by_bytes() {
    let Some((_, _, db)) = database("pages") else { return };
    let log = AuditLog::open_database(&db, "op@long", FsyncPolicy::Batched { every: 64 }).unwrap();
    // 600 records (over two pages of 256 rows), the last 150 of about 60 KB (over a page's
    // 8 MiB).
    for i in 0..600u64 {
        let mut event = event(i);
        if i >= 450 {
            event.input = Some(json!({"i": i, "payload": "y".repeat(60_000)}));
        }
        log.record(event).unwrap();
    }
    // Committed as recorded, before any flush: what a kill would leave.
    assert_eq!(verdicts(&db), [("op@long".to_string(), Ok(600))]);
    drop(log);
    let dir = tempfile::tempdir().unwrap();
    let [export] = export_database(&db, dir.path(), None).unwrap().try_into().unwrap();
    assert_eq!(export.records, 600);
    assert_eq!(verify_file(&export.path).unwrap().records, 600);
}

#[test]
fn verify_of_one_chain_and_of_an_empty_database() {
    let Some((_, _, db)) = database("one_chain") else {
        return;
    };
    assert_eq!(verify_database(&db, None).unwrap(), [], "no audit tables: no chains");
    let log = AuditLog::open_database(&db, "op@one", FsyncPolicy::EveryRecord).unwrap();
    let last = log.record(event(0)).unwrap();
    let [verdict] = verify_database(&db, Some("op@one")).unwrap().try_into().unwrap();
    assert_eq!(
        verdict.result,
        Ok(VerifySummary {
            records: 1,
            last_hash: Some(last.hash)
        })
    );
    let [missing] = verify_database(&db, Some("op@two")).unwrap().try_into().unwrap();
    let fault = missing.result.unwrap_err().to_string();
    assert!(
        fault.starts_with("chain op@two: there is no such chain in the database at"),
        "{fault}"
    );
}

/// The child processes' body; without `ACP_AUDIT_DB_CHILD_URL` (a normal test run) it does
/// nothing. Opens the chain (or prints `refused: …` and stops), then records until killed,
/// printing `acked SEQ` after each record `record` returned for.
#[test]
#[allow(clippy::print_stdout, reason = "the child tells the parent what it does on stdout")]
fn child_writer() {
    let Ok(url) = std::env::var(URL) else {
        return;
    };
    let chain = std::env::var(CHAIN).unwrap();
    let policy = match std::env::var(BATCH) {
        Ok(every) => FsyncPolicy::Batched {
            every: every.parse().unwrap(),
        },
        Err(_) => FsyncPolicy::EveryRecord,
    };
    let db = Database::connect(&url, Options::default()).unwrap();
    let log = match AuditLog::open_database(&db, &chain, policy) {
        Ok(log) => log,
        Err(error) => {
            println!("{PREFIX}refused: {error}");
            return;
        }
    };
    println!("{PREFIX}open");
    let mut out = std::io::stdout().lock();
    for i in 0.. {
        let record = log.record(event(i)).unwrap();
        writeln!(out, "{PREFIX}acked {}", record.seq).unwrap();
        out.flush().unwrap();
    }
}

/// A child writer on `chain`, and its stdout's lines.
struct Writer {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Writer {
    fn spawn(url: &str, chain: &str, batch: Option<usize>) -> Writer {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args(["--exact", "child_writer", "--nocapture", "--test-threads=1"])
            .env(URL, url)
            .env(CHAIN, chain)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(every) = batch {
            command.env(BATCH, every.to_string());
        }
        let mut child = command.spawn().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Writer { child, lines }
    }

    /// The next `child: …` line, without the prefix.
    fn next(&mut self) -> String {
        loop {
            let line = self.lines.next().expect("the child says more").unwrap();
            // The harness may print `test child_writer ... ` before it on the same line.
            if let Some((_, said)) = line.split_once(PREFIX) {
                return said.to_string();
            }
        }
    }

    /// Reads until the child acknowledged `seq`.
    fn until_acked(&mut self, seq: u64) {
        let want = format!("acked {seq}");
        while self.next() != want {}
    }

    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

#[test]
fn a_second_writer_process_is_refused_while_the_first_appends() {
    let Some((_, url, db)) = database("second_process") else {
        return;
    };
    let mut first = Writer::spawn(&url, "op@p", None);
    assert_eq!(first.next(), "open");
    first.until_acked(2);
    let mut second = Writer::spawn(&url, "op@p", None);
    let said = second.next();
    assert!(
        said.starts_with("refused: the audit chain op@p in the database at"),
        "{said}"
    );
    assert!(said.contains("agentacp audit op@p pid "), "names the holder: {said}");
    second.child.wait().unwrap();
    first.kill();
    let [(_, verdict)] = verdicts(&db).try_into().unwrap();
    assert!(verdict.is_ok(), "{verdict:?}");
}

#[test]
fn writers_killed_at_random_points_lose_nothing_they_acknowledged() {
    let Some((_, url, db)) = database("killed") else { return };
    let mut seed = std::process::id() as u64 ^ 0x9e37_79b9_7f4a_7c15;
    let mut below = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let mut acked: Option<u64> = None;
    for round in 0..12u64 {
        // Alternately every record committed synchronously, and batches of 8 (killed at any
        // point of a batch).
        let batch = (round % 2 == 1).then_some(8);
        let mut writer = Writer::spawn(&url, "op@k", batch);
        assert_eq!(writer.next(), "open", "round {round}: the chain reopens after a kill");
        let from = acked.map_or(0, |a| a + 1);
        let target = from + 1 + below(20);
        writer.until_acked(target);
        writer.kill();
        let [(chain, verdict)] = verdicts(&db).try_into().unwrap();
        assert_eq!(chain, "op@k");
        let records = verdict.unwrap_or_else(|fault| panic!("round {round}: {fault}"));
        assert!(
            records > target,
            "round {round}: record {target} was acknowledged, the chain holds {records}"
        );
        acked = Some(records - 1);
    }
}
