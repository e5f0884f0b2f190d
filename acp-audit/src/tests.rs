//! Chain, durability and verification tests.

use std::io::{self, Cursor};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use super::*;

/// A fresh folder under the system temp dir, removed on drop (no `tempfile` dependency, so the
/// module's tests run in whichever crate compiles it).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("acp-audit-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn note(n: usize) -> AuditEvent {
    let mut event = AuditEvent::new(
        Actor {
            id: "host:test".into(),
            role: Some("system".into()),
        },
        "audit.note",
        Subject {
            kind: "note".into(),
            reference: Some(format!("n{n}")),
            path: None,
        },
    );
    event.input = Some(json!({"n": n}));
    event
}

/// A chain of `n` varied records (escapes, non-ASCII, numbers, nesting, every event kind).
fn sample_chain(n: usize) -> Vec<String> {
    let sink = MemorySink::new();
    let log = AuditLog::with_sink(Box::new(sink.clone()));
    for i in 0..n {
        let event = match i % 4 {
            0 => AuditEvent::lifecycle("echo", "sess-é", Lifecycle::Invoked, Some(json!({"cwd": "/tmp/x"}))),
            1 => AuditEvent::tool_call(ToolCallMirror {
                operator: "echo".into(),
                session: "sess-é".into(),
                tool_call_id: format!("call-{i}"),
                tool: "write-file".into(),
                arguments: json!({"path": "a\"b\\c.txt", "content": "line\n\ttab \u{1} 😀", "n": -12, "f": 2.5}),
                outcome: ToolOutcomeRecord::Result(json!({"ok": true, "list": [1, null, {}]})),
                approval: Approval::ApprovedBy("client".into()),
            }),
            2 => {
                let mut event = note(i);
                event.policy = Some(PolicyRef {
                    reference: "prod-deploy".into(),
                    decision: Some("allow".into()),
                });
                event
            }
            _ => AuditEvent::lifecycle(
                "echo",
                "sess-é",
                Lifecycle::Completed,
                Some(json!({"stopReason": "end_turn"})),
            ),
        };
        log.record(event).unwrap();
    }
    sink.lines()
}

fn join(lines: &[String]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn check(text: &str) -> Result<VerifySummary, VerifyError> {
    verify(Cursor::new(text.as_bytes()))
}

fn check_bytes(bytes: &[u8]) -> Result<VerifySummary, VerifyError> {
    verify(Cursor::new(bytes))
}

fn parse(line: &str) -> serde_json::Map<String, Value> {
    serde_json::from_str(line).unwrap()
}

// ---- the chain -------------------------------------------------------------------------

#[test]
fn records_are_numbered_linked_and_hashed() {
    let sink = MemorySink::new();
    let log = AuditLog::with_sink(Box::new(sink.clone()));
    let records: Vec<AuditRecord> = (0..4).map(|i| log.record(note(i)).unwrap()).collect();
    let lines = sink.lines();
    assert_eq!(lines.len(), 4);
    let mut prev = GENESIS.to_string();
    for (i, (record, line)) in records.iter().zip(&lines).enumerate() {
        let map = parse(line);
        assert_eq!(
            Value::Object(map.clone()),
            record.value,
            "the returned record is the written one"
        );
        assert_eq!(record.seq, i as u64);
        assert_eq!(map["seq"], json!(i));
        assert_eq!(map["$schema"], "agentgovernance/v1");
        assert_eq!(map["doctype"], "audit-event");
        assert_eq!(map["hashAlg"], "sha256");
        assert_eq!(map["prevHash"], prev.as_str());
        let without: serde_json::Map<String, Value> = map
            .iter()
            .filter(|(k, _)| *k != "hash")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let expected = canonical::sha256_hex(&canonical_json(&Value::Object(without)));
        assert_eq!(map["hash"], expected.as_str());
        assert_eq!(record.hash, expected);
        prev = expected;
    }
    let summary = check(&sink.contents()).unwrap();
    assert_eq!(
        summary,
        VerifySummary {
            records: 4,
            last_hash: Some(prev)
        }
    );
}

#[test]
fn a_stamped_handle_adds_its_fields_to_every_record_on_the_shared_chain() {
    let sink = MemorySink::new();
    let log = AuditLog::with_sink(Box::new(sink.clone()));
    let fields = serde_json::Map::from_iter([("identity".to_string(), json!("alice"))]);
    let alice = log.stamped("aip44", fields);
    log.record(note(0)).unwrap();
    alice.record(note(1)).unwrap();
    // A field the event sets itself wins over the stamp; the event's other fields stay.
    let mut own = note(2);
    own.metadata = Some(serde_json::Map::from_iter([(
        "aip44".to_string(),
        json!({"identity": "bob", "tool": "x"}),
    )]));
    alice.record(own).unwrap();
    let lines: Vec<_> = sink.lines().iter().map(|line| parse(line)).collect();
    assert_eq!(lines.len(), 3, "one chain for both handles");
    assert!(lines[0].get("metadata").is_none(), "{:?}", lines[0]);
    assert_eq!(lines[1]["metadata"]["aip44"], json!({"identity": "alice"}));
    assert_eq!(lines[2]["metadata"]["aip44"], json!({"identity": "bob", "tool": "x"}));
    assert_eq!(lines[2]["seq"], json!(2));
    check(&sink.contents()).unwrap();
}

#[test]
fn timestamps_are_rfc3339_utc_milliseconds() {
    let record = AuditLog::with_sink(Box::new(MemorySink::new()))
        .record(note(0))
        .unwrap();
    let ts = record.value["ts"].as_str().unwrap();
    let shape: String = ts.chars().map(|c| if c.is_ascii_digit() { 'd' } else { c }).collect();
    assert_eq!(shape, "dddd-dd-ddTdd:dd:dd.dddZ", "{ts}");
    assert!(ts.as_bytes() >= b"2024".as_slice());
}

#[test]
fn an_existing_file_is_continued() {
    let dir = TempDir::new();
    let path = dir.path().join("state/audit.jsonl");
    let log = AuditLog::open(&path, FsyncPolicy::EveryRecord).unwrap();
    log.record(note(0)).unwrap();
    let second = log.record(note(1)).unwrap();
    drop(log);
    let log = AuditLog::open(&path, FsyncPolicy::EveryRecord).unwrap();
    let third = log.record(note(2)).unwrap();
    assert_eq!(third.seq, 2);
    assert_eq!(third.value["prevHash"], second.hash.as_str());
    drop(log);
    let summary = verify_file(&path).unwrap();
    assert_eq!(
        summary,
        VerifySummary {
            records: 3,
            last_hash: Some(third.hash)
        }
    );
}

#[test]
fn an_empty_existing_file_starts_a_chain() {
    let dir = TempDir::new();
    let path = dir.path().join("audit.jsonl");
    std::fs::write(&path, "").unwrap();
    let record = AuditLog::open(&path, FsyncPolicy::default())
        .unwrap()
        .record(note(0))
        .unwrap();
    assert_eq!((record.seq, record.value["prevHash"].as_str()), (0, Some(GENESIS)));
}

#[test]
fn a_tampered_file_is_not_continued() {
    let dir = TempDir::new();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(&path, FsyncPolicy::EveryRecord).unwrap();
    for i in 0..3 {
        log.record(note(i)).unwrap();
    }
    drop(log);
    let tampered = std::fs::read_to_string(&path)
        .unwrap()
        .replacen("\"n\":1", "\"n\":7", 1);
    std::fs::write(&path, &tampered).unwrap();
    match AuditLog::open(&path, FsyncPolicy::EveryRecord) {
        Err(AuditError::Broken(error)) => {
            assert_eq!((error.line, error.seq), (2, Some(1)));
            assert!(error.reason.starts_with("hash mismatch"), "{error}");
        }
        other => panic!("expected a broken chain, got {other:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        tampered,
        "the file is left as it was"
    );
}

/// A log at `path` with `n` notes and then a `payload`-byte note torn after `keep` of its
/// bytes; returns the torn tail and where it starts.
fn torn_log(path: &Path, n: usize, payload: usize, keep: usize) -> (Vec<u8>, u64) {
    let log = AuditLog::open(path, FsyncPolicy::EveryRecord).unwrap();
    for i in 0..n {
        log.record(note(i)).unwrap();
    }
    let full = log.record(big_note(n, payload)).unwrap().line();
    drop(log);
    let mut bytes = std::fs::read(path).unwrap();
    let start = bytes.len() - full.len();
    bytes.truncate(start + keep);
    std::fs::write(path, &bytes).unwrap();
    (bytes[start..].to_vec(), start as u64)
}

fn big_note(n: usize, payload: usize) -> AuditEvent {
    let mut event = note(n);
    event.input = Some(json!({"n": n, "blob": "x".repeat(payload)}));
    event
}

#[test]
fn a_torn_last_line_is_moved_aside_and_the_chain_continues() {
    let dir = TempDir::new();
    let path = dir.path().join("audit.jsonl");
    // A multi-page record cut in the middle of a page, as a kill -9 during its write leaves it.
    let (tail, offset) = torn_log(&path, 2, 100_000, 70_001);
    let log = AuditLog::open(&path, FsyncPolicy::EveryRecord).expect("a torn tail is recovered");
    let moved_to = dir.path().join("audit.jsonl.torn-2");
    assert_eq!(
        log.recovery(),
        Some(&Recovery {
            line: 3,
            offset,
            bytes: tail.len() as u64,
            moved_to: moved_to.clone(),
            seq: 2,
        })
    );
    assert_eq!(std::fs::read(&moved_to).unwrap(), tail, "nothing of the tail is lost");
    let next = log.record(note(3)).unwrap();
    assert_eq!(next.seq, 3);
    drop(log);
    assert_eq!(verify_file(&path).unwrap().records, 4);
    let text = std::fs::read_to_string(&path).unwrap();
    let recovered = parse(text.lines().nth(2).unwrap());
    assert_eq!(recovered["seq"], 2);
    assert_eq!(recovered["action"], "audit.recovered");
    assert_eq!(
        recovered["output"],
        json!({
            "reason": "the last line was torn (an interrupted write); it was moved aside",
            "line": 3,
            "offset": offset,
            "bytes": tail.len(),
            "movedTo": "audit.jsonl.torn-2",
            "sha256": canonical::sha256_hex_bytes(&tail),
        })
    );
    // The next open finds an intact log: nothing more to recover.
    assert_eq!(
        AuditLog::open(&path, FsyncPolicy::EveryRecord).unwrap().recovery(),
        None
    );
}

#[test]
fn a_torn_first_record_is_recovered_from_genesis() {
    let dir = TempDir::new();
    let path = dir.path().join("audit.jsonl");
    let (tail, _) = torn_log(&path, 0, 10, 5);
    let log = AuditLog::open(&path, FsyncPolicy::Never).unwrap();
    assert_eq!(log.recovery().map(|r| (r.line, r.offset, r.seq)), Some((1, 0, 0)));
    drop(log);
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(parse(text.lines().next().unwrap())["prevHash"], GENESIS);
    assert_eq!(verify_file(&path).unwrap().records, 1);
    assert_eq!(std::fs::read(dir.path().join("audit.jsonl.torn-0")).unwrap(), tail);
}

#[test]
fn recovery_never_overwrites_an_earlier_torn_copy() {
    let dir = TempDir::new();
    let path = dir.path().join("audit.jsonl");
    let (tail, _) = torn_log(&path, 1, 10, 20);
    std::fs::write(dir.path().join("audit.jsonl.torn-1"), "earlier").unwrap();
    let log = AuditLog::open(&path, FsyncPolicy::EveryRecord).unwrap();
    let moved_to = dir.path().join("audit.jsonl.torn-1-2");
    assert_eq!(log.recovery().map(|r| r.moved_to.clone()), Some(moved_to.clone()));
    assert_eq!(std::fs::read(&moved_to).unwrap(), tail);
    assert_eq!(
        std::fs::read(dir.path().join("audit.jsonl.torn-1")).unwrap(),
        b"earlier"
    );
}

#[test]
fn a_torn_recovery_record_is_recovered_in_turn() {
    // A crash while the recovery record itself is written leaves a torn tail again; the next
    // open moves that aside too, and both copies stay.
    let dir = TempDir::new();
    let path = dir.path().join("audit.jsonl");
    torn_log(&path, 1, 10, 20);
    drop(AuditLog::open(&path, FsyncPolicy::EveryRecord).unwrap());
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.truncate(bytes.len() - 30);
    std::fs::write(&path, &bytes).unwrap();
    let log = AuditLog::open(&path, FsyncPolicy::EveryRecord).unwrap();
    assert_eq!(log.recovery().map(|r| (r.line, r.seq)), Some((2, 1)));
    assert!(dir.path().join("audit.jsonl.torn-1").is_file());
    assert!(dir.path().join("audit.jsonl.torn-1-2").is_file());
    drop(log);
    assert_eq!(verify_file(&path).unwrap().records, 2);
}

#[test]
fn a_broken_middle_is_refused_even_when_the_tail_is_torn() {
    let dir = TempDir::new();
    let path = dir.path().join("audit.jsonl");
    torn_log(&path, 3, 10, 20);
    let tampered = std::fs::read_to_string(&path)
        .unwrap()
        .replacen("\"n\":1", "\"n\":7", 1);
    std::fs::write(&path, &tampered).unwrap();
    match AuditLog::open(&path, FsyncPolicy::EveryRecord) {
        Err(AuditError::Broken(error)) => assert_eq!((error.line, error.seq), (2, Some(1)), "{error}"),
        other => panic!("expected a broken chain, got {other:?}"),
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        tampered,
        "the file is left as it was"
    );
    let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(entries.len(), 1, "no torn copy: nothing was recovered");
}

#[test]
fn a_complete_but_broken_last_line_is_refused_not_recovered() {
    // A last line with its newline was written whole: if it does not verify, it was changed.
    let dir = TempDir::new();
    let path = dir.path().join("audit.jsonl");
    let log = AuditLog::open(&path, FsyncPolicy::EveryRecord).unwrap();
    log.record(note(0)).unwrap();
    log.record(note(1)).unwrap();
    drop(log);
    let tampered = std::fs::read_to_string(&path)
        .unwrap()
        .replacen("\"n\":1", "\"n\":7", 1);
    std::fs::write(&path, &tampered).unwrap();
    assert!(matches!(
        AuditLog::open(&path, FsyncPolicy::EveryRecord),
        Err(AuditError::Broken(_))
    ));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), tampered);
}

#[test]
fn verify_reports_a_torn_last_line_with_its_line_and_byte_offset() {
    let dir = TempDir::new();
    let path = dir.path().join("audit.jsonl");
    let (tail, offset) = torn_log(&path, 2, 10, 15);
    let Err(AuditError::Broken(error)) = verify_file(&path) else {
        panic!("a torn tail is not intact")
    };
    assert_eq!((error.line, error.seq, error.offset), (3, None, offset));
    assert_eq!(
        error.reason,
        format!(
            "torn last line: {} bytes from byte {offset} with no trailing newline (an interrupted write; \
             opening the log for writing moves it aside)",
            tail.len()
        )
    );
}

#[test]
fn two_opens_of_one_log_in_one_process_are_refused() {
    let dir = TempDir::new();
    let path = dir.path().join("audit.jsonl");
    let barrier = std::sync::Barrier::new(4);
    let results: Vec<Result<AuditLog, AuditError>> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    barrier.wait();
                    AuditLog::open(&path, FsyncPolicy::EveryRecord)
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let (open, refused): (Vec<_>, Vec<_>) = results.into_iter().partition(Result::is_ok);
    assert_eq!((open.len(), refused.len()), (1, 3), "exactly one writer");
    for error in refused {
        let error = error.unwrap_err();
        let text = error.to_string();
        assert!(
            matches!(&error, AuditError::Locked { path: p, holder: Some(pid) } if *p == path && *pid == std::process::id()),
            "{error:?}"
        );
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains("another handle in this process"), "{text}");
    }
    // The writer that got it keeps a single chain.
    let log = open.into_iter().next().unwrap().unwrap();
    log.record(note(0)).unwrap();
    drop(log);
    // Dropping the last handle releases the lock.
    let again = AuditLog::open(&path, FsyncPolicy::EveryRecord).unwrap();
    assert_eq!(again.record(note(1)).unwrap().seq, 1);
    let clone = again.clone();
    drop(again);
    assert!(
        matches!(
            AuditLog::open(&path, FsyncPolicy::EveryRecord),
            Err(AuditError::Locked { .. })
        ),
        "a clone still holds it"
    );
    drop(clone);
    assert_eq!(verify_file(&path).unwrap().records, 2);
}

/// A writer that is going away (an agent restarted at once, or killed with its parent)
/// releases the lock within moments: the next one waits for it (up to a second) instead of
/// being refused. Before, it was refused at once.
#[test]
fn a_new_writer_waits_a_moment_for_one_that_is_going_away() {
    let dir = TempDir::new();
    let path = dir.path().join("audit.jsonl");
    let first = AuditLog::open(&path, FsyncPolicy::EveryRecord).unwrap();
    let second = std::thread::spawn({
        let path = path.clone();
        move || AuditLog::open(&path, FsyncPolicy::EveryRecord).map(|_| ())
    });
    // Held a moment longer, then gone.
    std::thread::sleep(Duration::from_millis(100));
    drop(first);
    second
        .join()
        .unwrap()
        .expect("the second writer got the lock once the first was gone");
}

#[test]
fn a_file_sink_holds_the_lock_too() {
    let dir = TempDir::new();
    let path = dir.path().join("audit.jsonl");
    let sink = FileSink::open(&path).unwrap();
    assert!(matches!(
        AuditLog::open(&path, FsyncPolicy::EveryRecord),
        Err(AuditError::Locked { .. })
    ));
    drop(sink);
    AuditLog::open(&path, FsyncPolicy::EveryRecord).unwrap();
}

#[cfg(unix)]
#[test]
fn open_refuses_a_device() {
    let error = AuditLog::open(Path::new("/dev/null"), FsyncPolicy::EveryRecord).unwrap_err();
    assert!(
        matches!(&error, AuditError::Io(e) if e.to_string().contains("not a regular file (a character device)")),
        "{error:?}"
    );
}

#[test]
fn open_reports_io_errors() {
    let dir = TempDir::new();
    // A folder where the file should be.
    let error = AuditLog::open(dir.path(), FsyncPolicy::EveryRecord).unwrap_err();
    assert!(matches!(error, AuditError::Io(_)), "{error:?}");
}

#[test]
fn every_record_policy_syncs_each_record_before_returning() {
    let sink = MemorySink::new();
    let log = AuditLog::with_sink(Box::new(sink.clone()));
    for i in 0..3 {
        log.record(note(i)).unwrap();
        assert_eq!(sink.synced_lines(), i + 1);
    }
    assert_eq!(sink.syncs(), 3);
}

#[test]
fn batched_policy_syncs_every_n_and_on_flush() {
    let sink = MemorySink::new();
    let log = AuditLog::with_sink_and_policy(Box::new(sink.clone()), FsyncPolicy::Batched { every: 3 });
    log.record(note(0)).unwrap();
    log.record(note(1)).unwrap();
    assert_eq!((sink.syncs(), sink.synced_lines()), (0, 0));
    log.record(note(2)).unwrap();
    assert_eq!((sink.syncs(), sink.synced_lines()), (1, 3));
    log.record(note(3)).unwrap();
    assert_eq!((sink.syncs(), sink.synced_lines()), (1, 3));
    log.flush().unwrap();
    assert_eq!((sink.syncs(), sink.synced_lines()), (2, 4));
    log.flush().unwrap();
    assert_eq!(sink.syncs(), 2, "nothing pending, no sync");
    // Whatever was synced is a verifiable prefix.
    let synced = &sink.lines()[..sink.synced_lines()];
    assert_eq!(check(&join(synced)).unwrap().records, 4);
}

/// A sink whose background syncs wait for the test's go (one `()` each; a dropped sender
/// lets every later one through) and then end as `ends` says.
struct Gated {
    inner: MemorySink,
    go: Arc<Mutex<std::sync::mpsc::Receiver<()>>>,
    durable: Arc<AtomicUsize>,
    ends: SyncEnds,
}

/// How a [`Gated`] sink's background sync ends.
#[derive(Clone, Copy)]
enum SyncEnds {
    /// What was written when it started is durable.
    Durable,
    /// It fails: "the disk went away".
    Fails,
    /// It panics: "the sink's own bug".
    Panics,
}

impl AuditSink for Gated {
    fn append(&mut self, line: &str) -> io::Result<()> {
        self.inner.append(line)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.durable.fetch_max(self.inner.lines().len(), Ordering::SeqCst);
        self.inner.sync()
    }

    fn background_sync(&self) -> Option<BackgroundSync> {
        let (inner, go, durable, ends) = (self.inner.clone(), self.go.clone(), self.durable.clone(), self.ends);
        Some(Box::new(move || {
            let written = inner.lines().len();
            let _ = go.lock().unwrap_or_else(|e| e.into_inner()).recv();
            match ends {
                SyncEnds::Durable => {
                    durable.fetch_max(written, Ordering::SeqCst);
                    Ok(())
                }
                SyncEnds::Fails => Err(io::Error::other("the disk went away")),
                SyncEnds::Panics => panic!("the sink's own bug"),
            }
        }))
    }
}

/// A [`Gated`] sink, its gate, how many records are durable, and its lines (whose
/// [`syncs`](MemorySink::syncs) count the syncs made in line).
fn gated(ends: SyncEnds) -> (Gated, std::sync::mpsc::Sender<()>, Arc<AtomicUsize>, MemorySink) {
    let (go, gate) = std::sync::mpsc::channel();
    let durable = Arc::new(AtomicUsize::new(0));
    let inner = MemorySink::new();
    let sink = Gated {
        inner: inner.clone(),
        go: Arc::new(Mutex::new(gate)),
        durable: durable.clone(),
        ends,
    };
    (sink, go, durable, inner)
}

/// With a batch of 8 and a sync that the disk holds up: the 4th record asks for the sync, the
/// 5th to 7th are written while it is held (their writers do not wait for the disk), and the
/// 8th, which would leave a whole batch unsynced, waits until the sync is done, but does not
/// sync itself: no writer syncs in line (as the 8th did before).
#[test]
fn a_batched_logs_writers_do_not_wait_for_a_sync_held_up_but_never_leave_a_batch_unsynced() {
    let (sink, go, durable, lines) = gated(SyncEnds::Durable);
    let log = AuditLog::with_sink_and_policy(Box::new(sink), FsyncPolicy::Batched { every: 8 });
    for n in 0..7 {
        log.record(note(n)).unwrap();
    }
    assert_eq!(durable.load(Ordering::SeqCst), 0, "the sync is still held up");
    let eighth = std::thread::spawn({
        let log = log.clone();
        let durable = durable.clone();
        move || {
            log.record(note(7)).unwrap();
            durable.load(Ordering::SeqCst)
        }
    });
    go.send(()).unwrap();
    let durable_then = eighth.join().unwrap();
    assert!(durable_then >= 4, "the 8th returned with {durable_then} of 8 durable");
    assert_eq!(lines.syncs(), 0, "a writer synced in line");
    drop(go);
    log.flush().unwrap();
    assert_eq!(durable.load(Ordering::SeqCst), 8);
}

/// A background sync that fails stops the log: the record that waits for it, and every later
/// one, is refused.
#[test]
fn a_failed_background_sync_fails_the_log() {
    a_stopped_sync_fails_the_log(SyncEnds::Fails, "a background sync failed: the disk went away");
}

/// A background sync that panics (a custom sink's bug) stops the log the same way; the
/// record waiting for it is refused, not left waiting for a thread that is gone.
#[test]
fn a_background_sync_that_panics_fails_the_log() {
    a_stopped_sync_fails_the_log(SyncEnds::Panics, "a background sync panicked: the sink's own bug");
}

fn a_stopped_sync_fails_the_log(ends: SyncEnds, reason: &str) {
    let (sink, go, _, _) = gated(ends);
    let log = AuditLog::with_sink_and_policy(Box::new(sink), FsyncPolicy::Batched { every: 4 });
    // The sync asked for at the 2nd record is held up until the 3rd is written.
    for n in 0..3 {
        log.record(note(n)).unwrap();
    }
    drop(go);
    // The 4th waits for that sync: from a thread of its own, so a writer left waiting fails
    // the test instead of hanging it.
    let (done, fourth) = std::sync::mpsc::channel();
    std::thread::spawn({
        let log = log.clone();
        move || done.send(log.record(note(3)))
    });
    let fourth = fourth
        .recv_timeout(Duration::from_secs(30))
        .expect("the 4th record still waits for a sync that ended");
    assert!(
        matches!(&fourth, Err(AuditError::Failed(why)) if why.contains(reason)),
        "{fourth:?}"
    );
    assert!(matches!(log.record(note(4)), Err(AuditError::Failed(_))));
    assert!(log.flush().is_err());
}

/// A log file and the folders made for it are their user's alone: the log records what
/// sessions did. Before, they got the umask's modes (`0644`, `0755`).
#[cfg(unix)]
#[test]
fn a_new_log_and_its_folders_are_for_their_user_alone() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new();
    let path = dir.path().join("state/audit/log.jsonl");
    AuditLog::open(&path, FsyncPolicy::Never).unwrap();
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&dir.path().join("state")), 0o700);
    assert_eq!(mode(&dir.path().join("state/audit")), 0o700);
}

#[test]
fn batched_records_are_synced_when_the_last_handle_drops() {
    let sink = MemorySink::new();
    let log = AuditLog::with_sink_and_policy(Box::new(sink.clone()), FsyncPolicy::Batched { every: 10 });
    let other = log.clone();
    log.record(note(0)).unwrap();
    drop(log);
    assert_eq!(sink.synced_lines(), 0, "another handle is alive");
    drop(other);
    assert_eq!(sink.synced_lines(), 1);
}

#[test]
fn batched_zero_means_one_and_never_syncs_only_on_flush() {
    let sink = MemorySink::new();
    let log = AuditLog::with_sink_and_policy(Box::new(sink.clone()), FsyncPolicy::Batched { every: 0 });
    log.record(note(0)).unwrap();
    assert_eq!(sink.syncs(), 1);
    let sink = MemorySink::new();
    let log = AuditLog::with_sink_and_policy(Box::new(sink.clone()), FsyncPolicy::Never);
    log.record(note(0)).unwrap();
    log.record(note(1)).unwrap();
    assert_eq!(sink.syncs(), 0);
    log.flush().unwrap();
    assert_eq!((sink.syncs(), sink.synced_lines()), (1, 2));
}

#[test]
fn off_records_nothing() {
    let log = AuditLog::off();
    assert!(log.is_off());
    assert!(!AuditLog::with_sink(Box::new(MemorySink::new())).is_off());
    let record = log.record(note(0)).unwrap();
    assert_eq!(record.seq, 0);
    log.flush().unwrap();
    assert!(matches!(
        log.record(AuditEvent {
            action: "Bad".into(),
            ..note(0)
        }),
        Err(AuditError::Invalid(_))
    ));
}

#[test]
fn an_invalid_event_writes_nothing_and_keeps_the_chain() {
    let sink = MemorySink::new();
    let log = AuditLog::with_sink(Box::new(sink.clone()));
    log.record(note(0)).unwrap();
    let error = log
        .record(AuditEvent {
            action: "Not An Action".into(),
            ..note(1)
        })
        .unwrap_err();
    assert!(error.to_string().starts_with("invalid audit event: action"), "{error}");
    assert_eq!(log.record(note(1)).unwrap().seq, 1);
    assert_eq!(check(&sink.contents()).unwrap().records, 2);
}

/// Fails the `fail_at`-th append (from 0), or every sync when `fail_sync`.
struct Flaky {
    inner: MemorySink,
    appends: usize,
    fail_at: usize,
    fail_sync: bool,
}

impl AuditSink for Flaky {
    fn append(&mut self, line: &str) -> io::Result<()> {
        self.appends += 1;
        if self.appends - 1 == self.fail_at {
            // Half a line reached the disk.
            self.inner.append(&line[..line.len() / 2])?;
            return Err(io::Error::other("disk full"));
        }
        self.inner.append(line)
    }

    fn sync(&mut self) -> io::Result<()> {
        if self.fail_sync {
            Err(io::Error::other("sync failed"))
        } else {
            self.inner.sync()
        }
    }
}

#[test]
fn after_a_failed_write_the_log_refuses_to_go_on() {
    let memory = MemorySink::new();
    let log = AuditLog::with_sink(Box::new(Flaky {
        inner: memory.clone(),
        appends: 0,
        fail_at: 2,
        fail_sync: false,
    }));
    log.record(note(0)).unwrap();
    log.record(note(1)).unwrap();
    assert!(matches!(log.record(note(2)), Err(AuditError::Io(_))));
    let error = log.record(note(3)).unwrap_err();
    assert!(
        matches!(&error, AuditError::Failed(reason) if reason.contains("record 2")),
        "{error}"
    );
    assert!(matches!(log.flush(), Err(AuditError::Failed(_))));
    // The torn line is the third; the two before it are intact.
    let error = check(&memory.contents()).unwrap_err();
    assert_eq!(error.line, 3);
    assert_eq!(check(&join(&memory.lines()[..2])).unwrap().records, 2);
}

#[test]
fn after_a_failed_sync_the_log_refuses_to_go_on() {
    let log = AuditLog::with_sink(Box::new(Flaky {
        inner: MemorySink::new(),
        appends: 0,
        fail_at: usize::MAX,
        fail_sync: true,
    }));
    assert!(matches!(log.record(note(0)), Err(AuditError::Io(_))));
    assert!(matches!(log.record(note(1)), Err(AuditError::Failed(_))));
}

#[test]
fn handles_are_shared_across_threads() {
    fn assert_traits<T: Clone + Send + Sync + 'static>() {}
    assert_traits::<AuditLog>();
    let sink = MemorySink::new();
    let log = AuditLog::with_sink_and_policy(Box::new(sink.clone()), FsyncPolicy::Batched { every: 7 });
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                for i in 0..25 {
                    log.record(note(t * 100 + i)).unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    log.flush().unwrap();
    assert_eq!(check(&sink.contents()).unwrap().records, 100);
}

#[test]
fn file_sink_creates_parents_and_appends() {
    let dir = TempDir::new();
    let path = dir.path().join("deep/er/audit.jsonl");
    let mut sink = FileSink::open(&path).unwrap();
    sink.append("one\n").unwrap();
    sink.sync().unwrap();
    drop(sink);
    let mut sink = FileSink::open(&path).unwrap();
    sink.append("two\n").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "one\ntwo\n");
}

// ---- verification ----------------------------------------------------------------------

#[test]
fn an_intact_chain_verifies_with_its_count_and_last_hash() {
    let lines = sample_chain(9);
    let summary = check(&join(&lines)).unwrap();
    assert_eq!(summary.records, 9);
    assert_eq!(summary.last_hash.as_deref(), parse(&lines[8])["hash"].as_str());
    assert_eq!(
        check("").unwrap(),
        VerifySummary {
            records: 0,
            last_hash: None
        }
    );
}

#[test]
fn a_chain_hashed_by_an_independent_implementation_verifies() {
    // Two records whose hashes were recomputed with Python's
    // json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False) + hashlib.sha256.
    let chain = concat!(
        r#"{"$schema":"agentgovernance/v1","doctype":"audit-event","seq":0,"ts":"2026-11-22T15:45:09.351Z","actor":{"id":"operator:governed-server","role":"operator"},"action":"operator.invoked","subject":{"kind":"session","ref":"sess-4f2a"},"metadata":{"aip44":{"audit-event-kind":"lifecycle","operator":"governed-server","session":"sess-4f2a","state":"invoked"}},"prevHash":"GENESIS","hash":"1477db73cde52f771a64efae27898138f9aea3997728d3576d0f181909dfd3da","hashAlg":"sha256"}"#,
        "\n",
        r#"{"$schema":"agentgovernance/v1","doctype":"audit-event","seq":1,"ts":"2026-11-22T15:45:09.351Z","actor":{"id":"operator:governed-server","role":"operator"},"action":"tool.call","subject":{"kind":"tool-call","ref":"call-1"},"input":{"tool":"write-file","arguments":{"path":"notes.txt","content":"hi"}},"output":{"result":{"bytes":2}},"metadata":{"aip44":{"audit-event-kind":"tool-call","operator":"governed-server","session":"sess-4f2a","tool":"write-file","arguments":{"path":"notes.txt","content":"hi"},"result":{"bytes":2},"approval":{"approvedBy":"client:zed"}}},"prevHash":"1477db73cde52f771a64efae27898138f9aea3997728d3576d0f181909dfd3da","hash":"9b9bca524e5dd4406836401a87c322d33aaa089cb0bac7f88ee670f8dd6dcb0e","hashAlg":"sha256"}"#,
        "\n",
    );
    let summary = check(chain).unwrap();
    assert_eq!(summary.records, 2);
    assert_eq!(
        summary.last_hash.as_deref(),
        Some("9b9bca524e5dd4406836401a87c322d33aaa089cb0bac7f88ee670f8dd6dcb0e")
    );
}

#[test]
fn changing_any_one_byte_of_a_record_breaks_the_chain_at_that_line() {
    let lines = sample_chain(5);
    let text = join(&lines);
    let mut start = 0;
    for (index, line) in lines.iter().enumerate() {
        // Every byte of the first, a middle and the last record (the tool-call record has
        // escapes, non-ASCII and numbers), with several replacements each.
        if ![0, 1, 4].contains(&index) {
            start += line.len() + 1;
            continue;
        }
        for offset in 0..line.len() {
            let at = start + offset;
            let original = text.as_bytes()[at];
            for replacement in [original ^ 0x01, b'0', b'a', b' '] {
                if replacement == original {
                    continue;
                }
                let mut bytes = text.clone().into_bytes();
                bytes[at] = replacement;
                match check_bytes(&bytes) {
                    Err(error) => assert_eq!(
                        error.line,
                        index + 1,
                        "byte {offset} of line {} ({:?} -> {:?}): {error}",
                        index + 1,
                        original as char,
                        replacement as char
                    ),
                    Ok(_) => panic!(
                        "byte {offset} of line {} changed ({:?} -> {:?}) and the chain still verifies",
                        index + 1,
                        original as char,
                        replacement as char
                    ),
                }
            }
        }
        start += line.len() + 1;
    }
}

#[test]
fn a_hash_mismatch_names_line_seq_and_both_hashes() {
    let mut lines = sample_chain(3);
    lines[1] = lines[1].replacen("\"write-file\"", "\"delete-repo\"", 1);
    let error = check(&join(&lines)).unwrap_err();
    assert_eq!((error.line, error.seq), (2, Some(1)));
    let recorded = parse(&lines[1])["hash"].as_str().unwrap().to_string();
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "line 2 (seq 1): hash mismatch: recorded {}…, computed ",
            &recorded[..12]
        )),
        "{text}"
    );
}

#[test]
fn a_recomputed_hash_still_breaks_the_next_link() {
    // Forge record 1 and give it a correct hash: record 2's prevHash no longer links.
    let mut lines = sample_chain(4);
    let mut forged = parse(&lines[1]);
    forged.insert("action".into(), json!("tool.forged"));
    let hash = canonical::sha256_hex(&canonical::canonical_object_without(&forged, "hash"));
    forged.insert("hash".into(), json!(hash));
    lines[1] = Value::Object(forged).to_string();
    let error = check(&join(&lines)).unwrap_err();
    assert_eq!((error.line, error.seq), (3, Some(2)));
    assert!(
        error.reason.contains("does not link to the previous record's hash"),
        "{error}"
    );
}

#[test]
fn deleting_a_line_breaks_the_chain() {
    let lines = sample_chain(5);
    for removed in 0..4 {
        let mut copy = lines.clone();
        copy.remove(removed);
        let error = check(&join(&copy)).unwrap_err();
        assert_eq!(
            (error.line, error.seq),
            (removed + 1, Some(removed as u64 + 1)),
            "{error}"
        );
        assert!(error.reason.contains("expected"), "{error}");
    }
}

#[test]
fn swapping_two_lines_breaks_the_chain() {
    let lines = sample_chain(5);
    for (a, b) in [(0, 1), (1, 3), (3, 4)] {
        let mut copy = lines.clone();
        copy.swap(a, b);
        let error = check(&join(&copy)).unwrap_err();
        assert_eq!(error.line, a + 1, "{error}");
    }
}

#[test]
fn duplicating_a_line_breaks_the_chain() {
    let lines = sample_chain(4);
    for duplicated in 0..4 {
        let mut copy = lines.clone();
        copy.insert(duplicated + 1, lines[duplicated].clone());
        let error = check(&join(&copy)).unwrap_err();
        assert_eq!(
            (error.line, error.seq),
            (duplicated + 2, Some(duplicated as u64)),
            "{error}"
        );
    }
}

#[test]
fn truncating_the_last_line_breaks_the_chain() {
    let lines = sample_chain(3);
    let text = join(&lines);
    let last_start = text.len() - lines[2].len() - 1;
    for cut in last_start + 1..text.len() {
        let error = check(&text[..cut]).unwrap_err();
        assert_eq!(
            (error.line, error.offset),
            (3, last_start as u64),
            "cut at {cut}: {error}"
        );
        assert!(error.reason.starts_with("torn last line"), "{error}");
    }
}

#[test]
fn other_malformed_logs_are_reported() {
    let lines = sample_chain(2);
    let cases: Vec<(String, usize, &str)> = vec![
        (format!("{}\n\n{}\n", lines[0], lines[1]), 2, "empty line"),
        (format!("{}\n[1]\n", lines[0]), 2, "not a JSON object"),
        (format!("{}\n{{\n", lines[0]), 2, "not JSON"),
        (lines[1].clone() + "\n", 1, "seq 1 where 0 was expected"),
        (
            join(&lines).replacen("agentgovernance/v1", "agentgovernance/v2", 1),
            1,
            "$schema",
        ),
        (join(&lines).replacen("audit-event", "policy", 1), 1, "doctype"),
        (
            join(&lines).replacen("\"seq\":0", "\"seq\":\"0\"", 1),
            1,
            "seq is missing",
        ),
        (
            join(&lines).replacen("\"hashAlg\":\"sha256\"", "\"hashAlg\":\"sha512\"", 1),
            1,
            "unsupported hashAlg",
        ),
        (join(&lines).replacen("\"hash\":", "\"hush\":", 1), 1, "hash is missing"),
    ];
    for (text, line, reason) in cases {
        let error = check(&text).unwrap_err();
        assert_eq!(error.line, line, "{error}");
        assert!(error.reason.contains(reason), "{error} should say {reason}");
    }
    let error = check_bytes(b"\xff\xfe\n").unwrap_err();
    assert_eq!((error.line, error.reason.as_str()), (1, "not UTF-8"));
}

#[test]
fn a_duplicate_key_placed_before_the_real_one_fails_verification() {
    let lines = sample_chain(3);
    // serde_json keeps the last of two equal keys, so the hash of record 1 is still right.
    let mut forged = lines.clone();
    forged[1] = lines[1].replacen('{', r#"{"output":{"result":"FORGED"},"#, 1);
    let error = check(&join(&forged)).unwrap_err();
    assert_eq!((error.line, error.seq), (2, None), "{error}");
    assert!(
        error.reason.starts_with(r#"duplicate key "output" at the top level"#),
        "{error}"
    );
    // At any depth, named by its path.
    let mut forged = lines.clone();
    forged[1] = lines[1].replacen(r#""aip44":{"#, r#""aip44":{"result":"FORGED","#, 1);
    let error = check(&join(&forged)).unwrap_err();
    assert_eq!(error.line, 2, "{error}");
    assert!(
        error.reason.starts_with(r#"duplicate key "result" in metadata.aip44"#),
        "{error}"
    );
    let mut forged = lines.clone();
    forged[1] = lines[1].replacen(r#""list":[1,null,{}]"#, r#""list":[1,null,{"k":1,"k":2}]"#, 2);
    let error = check(&join(&forged)).unwrap_err();
    assert!(
        error
            .reason
            .starts_with(r#"duplicate key "k" in output.result.list[2]"#),
        "{error}"
    );
    // Reading the tail at open refuses it too.
    let dir = TempDir::new();
    let path = dir.path().join("audit.jsonl");
    std::fs::write(
        &path,
        join(&[
            lines[0].clone(),
            lines[1].replacen('{', r#"{"output":{"result":"FORGED"},"#, 1),
        ]),
    )
    .unwrap();
    match AuditLog::open(&path, FsyncPolicy::EveryRecord) {
        Err(AuditError::Broken(error)) => assert_eq!(error.line, 2, "{error}"),
        other => panic!("expected a broken chain, got {other:?}"),
    }
}

/// Counts the bytes it hands out.
struct Counting<R> {
    inner: R,
    read: u64,
}

impl<R: io::Read> io::Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

#[test]
fn a_line_over_the_cap_is_refused_without_reading_on() {
    use io::Read;
    let lines = sample_chain(1);
    let endless = Cursor::new(format!("{}\n", lines[0])).chain(io::repeat(b' ').take(4 * MAX_LINE_BYTES as u64));
    let mut reader = io::BufReader::new(Counting {
        inner: endless,
        read: 0,
    });
    let error = verify(&mut reader).unwrap_err();
    assert_eq!((error.line, error.offset), (2, lines[0].len() as u64 + 1), "{error}");
    assert_eq!(
        error.reason,
        format!("the line is longer than {MAX_LINE_BYTES} bytes (16 MiB), the limit for one record")
    );
    let read = reader.get_ref().read;
    assert!(
        read <= (lines[0].len() + 1 + MAX_LINE_BYTES + 64 * 1024) as u64,
        "read {read} bytes: reading did not stop at the cap"
    );
    // A line of exactly the cap is read (and then judged on its content).
    let exact = format!("{}\n", " ".repeat(MAX_LINE_BYTES));
    assert_eq!(check(&exact).unwrap_err().reason, "empty line");
}

#[test]
fn the_writer_refuses_a_record_longer_than_the_cap() {
    let sink = MemorySink::new();
    let log = AuditLog::with_sink(Box::new(sink.clone()));
    log.record(note(0)).unwrap();
    let error = log.record(big_note(1, MAX_LINE_BYTES)).unwrap_err();
    assert!(
        matches!(&error, AuditError::Invalid(reason) if reason.contains("over the 16 MiB limit")),
        "{error:?}"
    );
    assert_eq!(
        log.record(note(1)).unwrap().seq,
        1,
        "nothing written, the chain goes on"
    );
    assert_eq!(check(&sink.contents()).unwrap().records, 2);
}

#[test]
fn the_first_record_must_start_from_genesis() {
    let log_lines = sample_chain(1);
    let mut first = parse(&log_lines[0]);
    first.insert("prevHash".into(), json!("0".repeat(64)));
    let hash = canonical::sha256_hex(&canonical::canonical_object_without(&first, "hash"));
    first.insert("hash".into(), json!(hash));
    let error = check(&(Value::Object(first).to_string() + "\n")).unwrap_err();
    assert_eq!((error.line, error.seq), (1, Some(0)));
    assert!(error.reason.contains("is not GENESIS"), "{error}");
}

#[test]
fn a_record_without_hash_alg_is_read_as_sha256() {
    let mut first = parse(&sample_chain(1)[0]);
    first.shift_remove("hashAlg");
    let hash = canonical::sha256_hex(&canonical::canonical_object_without(&first, "hash"));
    first.insert("hash".into(), json!(hash));
    assert_eq!(check(&(Value::Object(first).to_string() + "\n")).unwrap().records, 1);
}

#[test]
fn read_errors_name_the_line_being_read() {
    struct Failing(usize);
    impl io::Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            Err(io::Error::other(format!("device gone {} {}", self.0, buf.len())))
        }
    }
    let error = verify(io::BufReader::new(Failing(1))).unwrap_err();
    assert_eq!(error.line, 1);
    assert!(error.reason.starts_with("read error"), "{error}");
}

#[test]
fn verify_file_separates_io_from_broken_chains() {
    let dir = TempDir::new();
    assert!(matches!(
        verify_file(&dir.path().join("missing.jsonl")),
        Err(AuditError::Io(_))
    ));
    let path = dir.path().join("audit.jsonl");
    std::fs::write(&path, "{}\n").unwrap();
    assert!(matches!(verify_file(&path), Err(AuditError::Broken(_))));
}

/// The first record of `sample_chain` at `seq`, linked to `prev`, holding `numbers` in `input`,
/// hashed over `form`.
fn record_with_numbers(
    seq: u64,
    prev: &str,
    numbers: Value,
    form: fn(&serde_json::Map<String, Value>, &str) -> String,
) -> (String, String) {
    let mut map = parse(&sample_chain(1)[0]);
    map.insert("seq".into(), json!(seq));
    map.insert("prevHash".into(), json!(prev));
    map.insert("input".into(), json!({ "numbers": numbers }));
    let hash = canonical::sha256_hex(&form(&map, "hash"));
    map.insert("hash".into(), json!(hash));
    (Value::Object(map).to_string() + "\n", hash)
}

#[test]
fn records_are_hashed_in_the_rfc8785_number_form() {
    let sink = MemorySink::new();
    let log = AuditLog::with_sink(Box::new(sink.clone()));
    let mut event = note(0);
    event.input = Some(json!({"x": [1.0, 1e21, 1e-6, -0.0, 0.5]}));
    let record = log.record(event).unwrap();
    let line = parse(sink.contents().lines().next().unwrap());
    let jcs = canonical::canonical_object_without(&line, "hash");
    assert!(jcs.contains(r#""x":[1,1e+21,0.000001,0,0.5]"#), "{jcs}");
    assert_eq!(record.hash, canonical::sha256_hex(&jcs));
    assert_eq!(check(&sink.contents()).unwrap().records, 1);
}

#[test]
fn logs_hashed_in_the_pre_rfc8785_number_form_still_verify() {
    // Written before issue #21: non-integer numbers hashed as serde_json writes them.
    let legacy = canonical::legacy_object_without;
    let (first, hash) = record_with_numbers(0, "GENESIS", json!([1.0, 1e21, 1e-6]), legacy);
    let (second, last) = record_with_numbers(1, &hash, json!([2.5, 7]), legacy);
    let (third, newest) = record_with_numbers(2, &last, json!([1.0]), canonical::canonical_object_without);
    let log = format!("{first}{second}{third}");
    assert_eq!(
        check(&log).unwrap(),
        VerifySummary {
            records: 3,
            last_hash: Some(newest)
        }
    );
    // Still covered: another value, in either form, breaks the chain.
    for forged in [first.replace("1e-6", "2e-6"), first.replace("[1.0,", "[1.5,")] {
        assert_ne!(forged, first);
        let error = check(&format!("{forged}{second}{third}")).unwrap_err();
        assert_eq!(error.line, 1, "{error}");
        assert!(error.reason.contains("hash mismatch"), "{error}");
    }
}

#[test]
fn a_channel_log_name_is_a_plain_file_name() {
    assert_eq!(crate::channel_log_name(None), "audit.jsonl");
    assert_eq!(crate::channel_log_name(Some("audit:reviewer")), "reviewer.jsonl");
    // Nothing in a channel can lead out of the state folder.
    assert_eq!(crate::channel_log_name(Some("audit:../x/y")), "___x_y.jsonl");
    // A channel of another form is not a file name: the default.
    assert_eq!(crate::channel_log_name(Some("other")), "audit.jsonl");
}

// ---- nesting depth (issue #44) ------------------------------------------------------------

/// `levels` nested arrays around `{"path": "x"}`, as a tool's arguments.
fn nested_arguments(levels: usize) -> Value {
    (0..levels).fold(json!({"path": "x"}), |value, _| Value::Array(vec![value]))
}

/// The tool call record of `arguments`, at `seq` after `prev`, as the writer before issue #44
/// wrote it: nested as deep as the arguments came, hashed the same way.
fn old_writer_line(seq: u64, prev: &str, arguments: Value) -> (String, String) {
    let event = AuditEvent::tool_call(ToolCallMirror {
        operator: "governed".into(),
        session: "sess-1".into(),
        tool_call_id: "call-1".into(),
        tool: "delete-repo".into(),
        arguments: json!(null),
        outcome: ToolOutcomeRecord::Error("denied".into()),
        approval: Approval::Denied {
            reason: "not in the operator's tool list".into(),
        },
    });
    let Value::Object(mut map) = AuditRecord::build(event, seq, "2026-11-28T12:00:00.000Z".into(), prev).value else {
        unreachable!()
    };
    map["input"]["arguments"] = arguments.clone();
    map["metadata"]["aip44"]["arguments"] = arguments;
    let hash = canonical::sha256_hex(&canonical::canonical_object_without(&map, "hash"));
    map.insert("hash".into(), json!(hash));
    (Value::Object(map).to_string() + "\n", hash)
}

#[test]
fn records_written_deep_by_an_older_version_verify_and_the_log_opens_and_recovers() {
    // Arguments nesting 124–127 levels (the deepest serde_json parses from a prompt's text)
    // made records of 128–131 levels, past serde_json's default limit of 128.
    for levels in 124..=127 {
        let dir = TempDir::new();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path, FsyncPolicy::EveryRecord).unwrap();
        let first = log.record(note(0)).unwrap();
        drop(log);
        let (deep, deep_hash) = old_writer_line(1, &first.hash, nested_arguments(levels));
        assert!(
            serde_json::from_str::<Value>(&deep).is_err(),
            "{levels}: past serde_json's default limit"
        );
        let mut file = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        io::Write::write_all(&mut file, deep.as_bytes()).unwrap();
        let summary = verify_file(&path).unwrap_or_else(|e| panic!("{levels}: {e}"));
        assert_eq!(summary.last_hash.as_deref(), Some(deep_hash.as_str()), "{levels}");
        let read = parse_record(deep.trim_end()).unwrap_or_else(|e| panic!("{levels}: {e}"));
        assert_eq!(read["input"]["arguments"], nested_arguments(levels), "{levels}");

        // A crash tore the next record: open recovers it and appends after the deep record.
        let torn = note(2);
        let torn = AuditRecord::build(torn, 2, rfc3339_millis(std::time::SystemTime::now()), &deep_hash).line();
        io::Write::write_all(&mut file, &torn.as_bytes()[..torn.len() / 2]).unwrap();
        drop(file);
        let log = AuditLog::open(&path, FsyncPolicy::EveryRecord).unwrap_or_else(|e| panic!("{levels}: {e}"));
        assert_eq!(log.recovery().map(|r| r.seq), Some(2), "{levels}");
        assert_eq!(log.record(note(3)).unwrap().seq, 3);
        drop(log);
        assert_eq!(verify_file(&path).unwrap().records, 4, "{levels}");
    }
}

#[test]
fn deep_values_are_written_within_the_bound_and_kept_as_text() {
    for levels in [100, 124, 126, 127, 1_000] {
        let dir = TempDir::new();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open(&path, FsyncPolicy::EveryRecord).unwrap();
        let arguments = nested_arguments(levels);
        let record = log
            .record(AuditEvent::tool_call(ToolCallMirror {
                operator: "governed".into(),
                session: "sess-1".into(),
                tool_call_id: "call-1".into(),
                tool: "delete-repo".into(),
                arguments: arguments.clone(),
                outcome: ToolOutcomeRecord::Result(arguments.clone()),
                approval: Approval::Auto,
            }))
            .unwrap();
        drop(log);
        assert!(depth::depth(&record.value) <= MAX_WRITE_DEPTH, "{levels}");
        let text = std::fs::read_to_string(&path).unwrap();
        let line: Value = serde_json::from_str(text.trim_end()).expect("any JSON reader reads the record");
        assert_eq!(line, record.value);
        // Every copy of the arguments keeps all of them: down to the placeholder, then its text.
        for copy in [
            &line["input"]["arguments"],
            &line["output"]["result"],
            &line["metadata"]["aip44"]["arguments"],
        ] {
            let (mut at, mut whole, mut above) = (copy, &arguments, 0);
            while at.get(DEEP_JSON_KEY).is_none() {
                (at, whole, above) = (&at[0], &whole[0], above + 1);
            }
            assert!(above > 50, "{levels}: only what is too deep is placed as text");
            assert_eq!(at[DEEP_JSON_KEY].as_str(), Some(whole.to_string().as_str()), "{levels}");
        }
        // The log verifies, and opens for the next record.
        assert_eq!(verify_file(&path).unwrap().records, 1, "{levels}");
        let log = AuditLog::open(&path, FsyncPolicy::EveryRecord).unwrap();
        assert_eq!(log.record(note(1)).unwrap().seq, 1);
    }
}
