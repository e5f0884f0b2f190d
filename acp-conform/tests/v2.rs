//! The v2 suite judges correctly: a small scripted v2 agent (`tests/agents/v2_agent.py`)
//! passes it, each of its broken modes fails exactly the check that catches it, and a v1-only
//! agent is reported plainly. Skipped when `python3` is absent.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use acp_conform::{Config, Outcome, Verdict, failed};

fn python() -> Option<&'static str> {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some("python3")
}

/// The alpha.3 schema (test data beside the repository), when it is on this machine.
fn schema() -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/upstream/acp-schemas-v2/272bf799f35a258c6a4107a0410ed361e83683d3/schema.json");
    path.is_file().then_some(path)
}

/// Runs the v2 suite against the scripted agent in `mode` ("" for a correct one).
fn run(python: &str, mode: &str) -> Vec<Verdict> {
    let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/v2_agent.py");
    let config = Config {
        protocol: 2,
        schema: schema(),
        timeout: Duration::from_millis(1500),
        ..Config::new(vec![python.into(), "-S".into(), agent.into(), mode.into()])
    };
    acp_conform::run(config).expect("the suite runs")
}

fn detail<'v>(verdicts: &'v [Verdict], id: &str) -> &'v Outcome {
    &verdicts.iter().find(|v| v.id == id).expect("the check ran").outcome
}

#[test]
fn a_correct_v2_agent_passes_and_each_broken_one_fails_exactly_its_check() {
    let Some(python) = python() else {
        eprintln!("skipped: no python3");
        return;
    };
    let correct = run(python, "");
    assert_eq!(failed(&correct), Vec::<&str>::new(), "{correct:#?}");
    // It advertises no authMethods.
    assert_eq!(acp_conform::skipped(&correct), vec!["v2.auth-login"], "{correct:#?}");
    let mut broken = vec![
        // Every check that reads a turn to its end.
        (
            "v1-ending",
            vec![
                "v2.prompt-lifecycle",
                "v2.message-ids",
                "v2.tool-calls",
                "v2.cancel",
                "v2.resume-replay",
                "v2.schema",
            ],
        ),
        ("v1-tool-call", vec!["v2.tool-calls"]),
    ];
    // The schema requires messageId too.
    if schema().is_some() {
        broken.push(("no-message-id", vec!["v2.message-ids", "v2.schema"]));
        broken.push(("bad-frame", vec!["v2.schema"]));
    } else {
        broken.push(("no-message-id", vec!["v2.message-ids"]));
    }
    for (mode, expected) in broken {
        let verdicts = run(python, mode);
        assert_eq!(failed(&verdicts), expected, "{mode}: {verdicts:#?}");
    }
}

#[test]
fn the_verdicts_name_what_is_wrong_in_a_sentence() {
    let Some(python) = python() else {
        eprintln!("skipped: no python3");
        return;
    };
    let verdicts = run(python, "v1-ending");
    let Outcome::Fail(why) = detail(&verdicts, "v2.prompt-lifecycle") else {
        panic!("{verdicts:#?}")
    };
    assert!(
        why.starts_with("the session/prompt answer ended the turn as v1 does (stopReason \"end_turn\")"),
        "{why}"
    );
    let verdicts = run(python, "no-message-id");
    let Outcome::Fail(why) = detail(&verdicts, "v2.message-ids") else {
        panic!("{verdicts:#?}")
    };
    assert!(why.starts_with("a message update without messageId: "), "{why}");
    if schema().is_some() {
        let verdicts = run(python, "bad-frame");
        let Outcome::Fail(why) = detail(&verdicts, "v2.schema") else {
            panic!("{verdicts:#?}")
        };
        assert!(
            why.contains("do not match the schema: UpdateSessionNotification: at /update"),
            "{why}"
        );
    }
}

#[test]
fn a_v1_only_agent_is_reported_as_one_clear_failure() {
    let Some(python) = python() else {
        eprintln!("skipped: no python3");
        return;
    };
    let verdicts = run(python, "v1-only");
    assert_eq!(failed(&verdicts), vec!["v2.initialize"], "{verdicts:#?}");
    assert_eq!(
        detail(&verdicts, "v2.initialize"),
        &Outcome::Fail(
            "asked for protocol version 2, the agent chose 1: it does not serve ACP v2 (run the kit without --protocol 2 to test it as a v1 agent)"
                .into()
        )
    );
    for verdict in verdicts.iter().filter(|v| v.id != "v2.initialize") {
        assert_eq!(
            verdict.outcome,
            Outcome::Skip("the agent chose protocol version 1, not 2 (v2.initialize)".into()),
            "{}",
            verdict.id
        );
    }
}

#[test]
fn an_unknown_protocol_or_an_unreadable_schema_is_a_start_error() {
    let config = Config {
        protocol: 3,
        ..Config::new(vec!["true".into()])
    };
    let error = acp_conform::run(config).expect_err("refused");
    assert_eq!(error.0, "--protocol 3: the kit has suites for versions 1 and 2");
    let config = Config {
        protocol: 2,
        schema: Some("/nonexistent/schema.json".into()),
        ..Config::new(vec!["true".into()])
    };
    let error = acp_conform::run(config).expect_err("refused");
    assert!(error.0.starts_with("--schema /nonexistent/schema.json: "), "{error}");
}
