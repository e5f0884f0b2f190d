//! The kit judges correctly: a small Python agent passes the whole suite, and each mutant of it
//! (wrong in one way) fails exactly the matching check. Skipped when `python3` is absent.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use acp_conform::{AuditSource, Config, Outcome, Verdict, failed};

fn python() -> Option<&'static str> {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some("python3")
}

fn echo_manifest() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/echo-server/ACP.md")
}

/// Runs the suite against the test agent as `mutant` ("" for none), with the echo manifest.
fn run(python: &str, mutant: &str) -> Vec<Verdict> {
    let expected = acp_conform::manifest_initialize(&echo_manifest()).expect("the echo manifest explains");
    let scratch = tempfile::tempdir().expect("a temporary folder");
    let init = scratch.path().join("init.json");
    std::fs::write(&init, expected.to_string()).expect("init.json written");
    let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/mutant.py");
    let audit = scratch.path().join("audit.jsonl");
    let mut config = Config {
        expected_initialize: Some(expected),
        timeout: Duration::from_millis(1500),
        audit_log: Some(AuditSource::File(audit.clone())),
        tool_prompts: ["/tool read", "/tool write", "/tool delete"].map(String::from).to_vec(),
        ..Config::new(vec![
            python.into(),
            "-S".into(),
            agent.into(),
            init.into(),
            mutant.into(),
        ])
    };
    config.launch.env.push(("AGENTACP_AUDIT_LOG".into(), audit.into()));
    acp_conform::run(config).expect("the suite runs")
}

/// How many suites run at once.
const SIDE_BY_SIDE: usize = 4;

#[test]
fn a_correct_agent_passes_and_each_mutant_fails_exactly_its_check() {
    let Some(python) = python() else {
        eprintln!("skipped: no python3");
        return;
    };
    let mutants = [
        ("answer-notification", "jsonrpc.notification-unanswered"),
        ("update-after-response", "turn.updates-before-response"),
        ("ignore-cancel", "turn.cancel"),
        ("accept-dotdot", "session.cwd-dotdot"),
        ("extra-capability", "manifest.capabilities"),
        ("stdout-noise", "jsonrpc.stdout-clean"),
        ("break-chain", "audit.chain"),
        ("accept-busy", "turn.busy-session"),
        ("ignore-frame-limit", "jsonrpc.oversized-frame"),
        ("ignore-sigterm", "turn.sigterm"),
        ("skip-audit-record", "audit.tool-calls"),
        ("announce-denied", "audit.denied-not-on-wire"),
        ("run-after-reject", "audit.rejected-not-run"),
        ("run-unanswered", "audit.unanswered-not-run"),
        ("unknown-session-invalid-params", "session.unknown-session"),
    ];
    // Each run has its own agents and folders; running a few side by side keeps the test short
    // (most of the time is the Python interpreter starting). Not all at once: fifteen suites
    // starting interpreters on two cores made an agent miss the kit's 1.5 s limit.
    let names: Vec<&str> = std::iter::once("")
        .chain(mutants.iter().map(|(mutant, _)| *mutant))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = std::sync::Mutex::new(vec![None; names.len()]);
    std::thread::scope(|scope| {
        for _ in 0..SIDE_BY_SIDE {
            scope.spawn(|| {
                loop {
                    let at = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(name) = names.get(at) else { break };
                    let verdicts = run(python, name);
                    done.lock().unwrap()[at] = Some(verdicts);
                }
            });
        }
    });
    let mut runs = done
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|run| run.expect("every suite ran"));
    let correct = runs.next().expect("the correct run");
    let runs: Vec<Vec<Verdict>> = runs.collect();
    assert_eq!(failed(&correct), Vec::<&str>::new(), "{correct:#?}");
    assert!(
        correct.iter().all(|v| v.outcome == Outcome::Pass),
        "nothing skipped for the correct agent: {correct:#?}"
    );
    for ((mutant, check), verdicts) in mutants.iter().zip(&runs) {
        assert_eq!(failed(verdicts), vec![*check], "mutant {mutant}: {verdicts:#?}");
    }
}

#[test]
fn an_agent_that_cannot_start_is_a_start_error_and_unknown_ids_are_refused() {
    let config = |command: Vec<std::ffi::OsString>, only: Vec<String>| Config {
        timeout: Duration::from_millis(500),
        only,
        ..Config::new(command)
    };
    let missing = acp_conform::run(config(vec!["/nonexistent/acp-agent".into()], Vec::new()));
    assert!(missing.is_err(), "{missing:?}");
    let unknown = acp_conform::run(config(vec!["true".into()], vec!["no.such-check".into()]));
    assert!(unknown.is_err(), "{unknown:?}");
    // `true` exits at once: no initialize answer, a start-up error rather than a hang.
    let silent = acp_conform::run(config(vec!["true".into()], Vec::new()));
    assert!(silent.is_err(), "{silent:?}");
}

/// An agent that answers `initialize` and then never reads its stdin again: a frame bigger
/// than the pipe cannot block the kit; the check fails on its deadline and the agent is killed.
#[cfg(unix)]
#[test]
fn an_agent_that_stops_reading_fails_on_the_deadline_instead_of_hanging() {
    let script = r#"read line; printf '%s\n' '{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"agentCapabilities":{}}}'; exec sleep 60"#;
    let config = Config {
        expected_initialize: Some(serde_json::json!({})),
        timeout: Duration::from_millis(500),
        only: vec!["jsonrpc.oversized-frame".into()],
        ..Config::new(vec!["sh".into(), "-c".into(), script.into()])
    };
    let started = std::time::Instant::now();
    let verdicts = acp_conform::run(config).expect("the preflight passes");
    assert_eq!(failed(&verdicts), vec!["jsonrpc.oversized-frame"], "{verdicts:#?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

/// An agent that floods updates faster than the kit reads them: every wait still ends on its
/// deadline (a wait that took a queued message for "time left" never ended, and wedged CI).
#[cfg(unix)]
#[test]
fn a_flooding_agent_cannot_keep_a_check_past_its_deadline() {
    let update = r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"."}}}}"#;
    let script = format!(
        r#"read line; printf '%s\n' '{{"jsonrpc":"2.0","id":0,"result":{{"protocolVersion":1,"agentCapabilities":{{}}}}}}'
read line; printf '%s\n' '{{"jsonrpc":"2.0","id":"new-session","result":{{"sessionId":"s"}}}}'
read line; exec yes '{update}'"#
    );
    let config = Config {
        timeout: Duration::from_millis(500),
        only: vec!["turn.cancel".into()],
        ..Config::new(vec!["sh".into(), "-c".into(), script.into()])
    };
    // On its own thread, so a kit that never ends fails this test rather than hanging it.
    let (done, verdicts) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(acp_conform::run(config)));
    let verdicts = verdicts
        .recv_timeout(Duration::from_secs(20))
        .expect("the suite ends within 20 s")
        .expect("the preflight passes");
    // It never answers the cancel: a failure, found on the deadline.
    assert_eq!(failed(&verdicts), vec!["turn.cancel"], "{verdicts:#?}");
}
