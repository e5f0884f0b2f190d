//! Writers in other processes: a second writer is refused by name while the first appends,
//! and writers killed at random points (SIGKILL, or death in the middle of a write) leave a log
//! that verifies up to its last complete record and that the next writer recovers and
//! continues.
//!
//! The other processes are this test binary run again on [`child_writer`] with
//! `ACP_AUDIT_CHILD_LOG` set. They say what they do in `child: …` lines on stdout, which the
//! parent reads: nothing here sleeps to wait for them.

#![cfg(unix)]

use std::io::{BufRead, BufReader, Lines, Write};
use std::path::Path;
use std::process::{ChildStdin, ChildStdout, Command, Stdio};

use acp_audit::{Actor, AuditError, AuditEvent, AuditLog, FsyncPolicy, Subject, verify_file};
use serde_json::json;

const LOG: &str = "ACP_AUDIT_CHILD_LOG";
/// Records to write first.
const BEFORE: &str = "ACP_AUDIT_CHILD_BEFORE";
/// When set: then wait for a line on stdin.
const WAIT: &str = "ACP_AUDIT_CHILD_WAIT";
/// Records to write after that.
const AFTER: &str = "ACP_AUDIT_CHILD_AFTER";
/// Payload bytes per record.
const PAYLOAD: &str = "ACP_AUDIT_CHILD_PAYLOAD";
/// When set: the file-size limit (RLIMIT_FSIZE) is this many bytes past the log's end, so
/// the write that crosses it is cut there and the process dies of SIGXFSZ.
const CUT: &str = "ACP_AUDIT_CHILD_CUT";
const PREFIX: &str = "child: ";

fn event(i: u64, payload: &str) -> AuditEvent {
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
    event.input = Some(json!({"i": i, "payload": payload}));
    event
}

/// The child processes' body; without `ACP_AUDIT_CHILD_LOG` (a normal test run) it does
/// nothing. Opens the log (or prints `refused: …` and stops), sets the `CUT` limit, writes
/// `BEFORE` records, waits for a line on stdin when `WAIT` is set, writes `AFTER` records, and
/// says `done`.
#[test]
#[allow(clippy::print_stdout, reason = "the child tells the parent what it does on stdout")]
fn child_writer() {
    let Some(path) = std::env::var_os(LOG) else {
        return;
    };
    let number = |name: &str| std::env::var(name).map_or(0, |v| v.parse::<u64>().unwrap());
    let log = match AuditLog::open(Path::new(&path), FsyncPolicy::Never) {
        Ok(log) => log,
        Err(error) => {
            println!("{PREFIX}refused: {error}");
            return;
        }
    };
    println!("{PREFIX}open");
    if let Ok(cut) = std::env::var(CUT) {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        let end = std::fs::metadata(&path).unwrap().len();
        let no_core = Rlimit {
            current: Some(0),
            maximum: Some(0),
        };
        setrlimit(Resource::Core, no_core).unwrap();
        let limit = Rlimit {
            current: Some(end + cut.parse::<u64>().unwrap()),
            ..getrlimit(Resource::Fsize)
        };
        setrlimit(Resource::Fsize, limit).unwrap();
    }
    let payload = "x".repeat(number(PAYLOAD) as usize);
    let write = |i: u64| {
        println!("{PREFIX}writing {i}");
        let record = log.record(event(i, &payload)).unwrap();
        println!("{PREFIX}wrote {}", record.seq);
    };
    (0..number(BEFORE)).for_each(write);
    if std::env::var_os(WAIT).is_some() {
        std::io::stdin().lines().next();
    }
    (0..number(AFTER)).for_each(write);
    println!("{PREFIX}done");
}

/// A child writer process and its `child: ` lines.
struct Child {
    process: std::process::Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Child {
    fn spawn(log: &Path, settings: &[(&str, u64)]) -> Child {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args(["--exact", "child_writer", "--nocapture", "--test-threads=1", "-q"])
            .env(LOG, log)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        for (name, value) in settings {
            command.env(name, value.to_string());
        }
        let mut process = command.spawn().unwrap();
        let stdin = process.stdin.take();
        let lines = BufReader::new(process.stdout.take().unwrap()).lines();
        Child { process, stdin, lines }
    }

    /// The next thing the child says; panics if it ends without saying more.
    fn next(&mut self) -> String {
        for line in self.lines.by_ref() {
            if let Some(message) = line.unwrap().strip_prefix(PREFIX) {
                return message.to_string();
            }
        }
        panic!("the child ended early: {:?}", self.process.wait());
    }

    /// Reads what the child says until `message`.
    fn until(&mut self, message: &str) {
        while self.next() != message {}
    }

    /// Everything the child says until it ends.
    fn rest(&mut self) -> Vec<String> {
        let lines = self.lines.by_ref().map(Result::unwrap);
        lines
            .filter_map(|line| line.strip_prefix(PREFIX).map(str::to_string))
            .collect()
    }
}

#[test]
fn a_second_writer_process_is_refused_while_the_first_appends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    // The first writer appends 3 records, then (holding the log) waits, then appends 20 more.
    let mut first = Child::spawn(&path, &[(BEFORE, 3), (WAIT, 1), (AFTER, 20), (PAYLOAD, 100)]);
    assert_eq!(first.next(), "open");
    first.until("wrote 2");
    // A second writer would append 20 records from seq 3, forking the chain the first one goes
    // on with: it is refused instead, naming the log and who holds it.
    let mut second = Child::spawn(&path, &[(BEFORE, 20), (PAYLOAD, 100)]);
    let said = second.next();
    let holder = first.process.id();
    assert_eq!(
        said,
        format!(
            "refused: the audit log {} is locked for writing by another process (pid {holder}); a second \
             writer would fork its chain, so this one does not start (stop the other writer, or give this \
             one its own log)",
            path.display()
        )
    );
    assert!(second.process.wait().unwrap().success());
    // So is a writer in this process.
    match AuditLog::open(&path, FsyncPolicy::EveryRecord) {
        Err(AuditError::Locked { holder: Some(pid), .. }) => assert_eq!(pid, holder),
        other => panic!("expected the log to be locked by {holder}, got {other:?}"),
    }
    writeln!(first.stdin.take().unwrap(), "go").unwrap();
    first.until("done");
    assert!(first.process.wait().unwrap().success());
    assert_eq!(verify_file(&path).unwrap().records, 23, "one chain, every record");
}

/// xorshift64*: the kill points, reproducible from the seed.
struct Random(u64);

impl Random {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

#[test]
fn writers_killed_at_random_points_are_recovered_every_time() {
    use std::os::unix::process::ExitStatusExt;
    const KILLS: usize = 50;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let mut random = Random(0x5eed_a0d1_7000_0001);
    let mut complete = 0u64; // records known to be complete
    let mut torn = 0;
    for round in 0..KILLS {
        // Multi-page records (8-40 KiB), written in a loop by a child that dies at a random
        // point: every other round it is sent SIGKILL once it says it starts record 0, 1 or
        // 2 (wherever it then is: building, writing, between records); in the others it dies
        // in the middle of a write, a random number of bytes past the log's end (its
        // RLIMIT_FSIZE: the kernel writes up to the limit, then sends SIGXFSZ).
        let payload = (8 << 10) + random.below(32 << 10);
        let start = std::fs::metadata(&path).map_or(0, |m| m.len());
        let cut = 1 + random.below(3 * payload);
        let victim = random.below(3);
        let sigkill = round % 2 == 0;
        let mut settings = vec![(BEFORE, 1_000_000), (PAYLOAD, payload)];
        if !sigkill {
            settings.push((CUT, cut));
        }
        let mut child = Child::spawn(&path, &settings);
        assert_eq!(child.next(), "open", "round {round}");
        if sigkill {
            loop {
                let said = child.next();
                if said == format!("writing {victim}") {
                    break;
                }
                complete += u64::from(said.starts_with("wrote "));
            }
            child.process.kill().unwrap();
            let status = child.process.wait().unwrap();
            assert_eq!(status.signal(), Some(9), "round {round}: {status}");
        } else {
            complete += child.rest().iter().filter(|said| said.starts_with("wrote ")).count() as u64;
            let status = child.process.wait().unwrap();
            let xfsz = rustix::process::Signal::XFSZ.as_raw();
            assert_eq!(status.signal(), Some(xfsz), "round {round}: {status}");
            assert_eq!(std::fs::metadata(&path).unwrap().len(), start + cut, "round {round}");
        }

        // The log verifies up to its last complete record; a torn one after it is reported
        // with its line and offset.
        let reported = match verify_file(&path) {
            Ok(summary) => {
                assert!(summary.records >= complete, "round {round}: records were lost");
                complete = summary.records;
                None
            }
            Err(AuditError::Broken(error)) => {
                assert!(error.reason.starts_with("torn last line"), "round {round}: {error}");
                // After SIGKILL the child may have finished records it had not yet reported.
                let line = error.line as u64;
                assert!(
                    line == complete + 1 || (sigkill && line > complete),
                    "round {round}: {error}"
                );
                complete = line - 1;
                Some(error)
            }
            Err(error) => panic!("round {round}: {error}"),
        };
        // The next writer recovers the torn record and continues the chain.
        let log = AuditLog::open(&path, FsyncPolicy::Never).unwrap();
        match (log.recovery(), &reported) {
            (None, None) => {}
            (Some(recovery), Some(error)) => {
                assert_eq!((recovery.line, recovery.offset), (error.line, error.offset));
                assert_eq!(recovery.seq, complete);
                if !sigkill {
                    assert_eq!(
                        recovery.offset + recovery.bytes,
                        start + cut,
                        "round {round}: the torn bytes"
                    );
                }
                assert_eq!(std::fs::read(&recovery.moved_to).unwrap().len() as u64, recovery.bytes);
                torn += 1;
                complete += 1;
            }
            (recovery, error) => panic!("round {round}: recovered {recovery:?} where verify said {error:?}"),
        }
    }
    assert_eq!(verify_file(&path).unwrap().records, complete);
    eprintln!("{KILLS} kills, {torn} of them tore a record; {complete} records, chain intact");
    assert!(torn >= KILLS / 4, "only {torn} kills tore a record");
}
