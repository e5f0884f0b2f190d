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

/// The scripted agent in `mode` ("" for a correct one), `more` arguments after it.
fn agent_config(python: &str, mode: &str, more: &[String]) -> Config {
    let agent = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/v2_agent.py");
    let mut command = vec![python.into(), "-S".into(), agent.into(), mode.into()];
    command.extend(more.iter().map(Into::into));
    Config {
        protocol: 2,
        schema: schema(),
        timeout: Duration::from_millis(1500),
        ..Config::new(command)
    }
}

/// Runs the v2 suite against the scripted agent in `mode` ("" for a correct one).
fn run(python: &str, mode: &str) -> Vec<Verdict> {
    acp_conform::run(agent_config(python, mode, &[])).expect("the suite runs")
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
    // Without --manifest.
    let manifest = vec![
        "v2.manifest-capabilities",
        "v2.manifest-info",
        "v2.manifest-meta-aip44",
        "v2.cwd-dotdot",
        "v2.cwd-symlink",
    ];
    assert_eq!(acp_conform::skipped(&correct), manifest, "{correct:#?}");
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
                "v2.update-shapes",
                "v2.elicitation",
                "v2.schema",
            ],
        ),
        // Its content chunk names a call no tool_call_update created, too.
        ("v1-tool-call", vec!["v2.tool-calls", "v2.update-shapes"]),
        ("no-logout", vec!["v2.auth-logout"]),
        ("prompt-any-session", vec!["v2.unknown-session"]),
        ("relative-cwd", vec!["v2.relative-cwd"]),
        ("list-ignores-cwd", vec!["v2.session-list"]),
        ("close-refused", vec!["v2.session-close"]),
        ("delete-keeps", vec!["v2.session-delete"]),
        ("config-ignored", vec!["v2.set-config-option"]),
        ("batch-first-only", vec!["v2.batch"]),
        ("answers-cancel-request", vec!["v2.cancel-request"]),
        ("elicit-hang", vec!["v2.elicitation"]),
    ];
    // The schema requires messageId too.
    if schema().is_some() {
        broken.push(("no-message-id", vec!["v2.message-ids", "v2.schema"]));
        broken.push(("bad-frame", vec!["v2.schema"]));
        broken.push(("bad-plan", vec!["v2.update-shapes", "v2.schema"]));
    } else {
        broken.push(("no-message-id", vec!["v2.message-ids"]));
        broken.push(("bad-plan", vec!["v2.update-shapes"]));
    }
    for (mode, expected) in broken {
        let verdicts = run(python, mode);
        assert_eq!(failed(&verdicts), expected, "{mode}: {verdicts:#?}");
    }
}

/// `--manifest` on v2: the scripted agent answers `initialize` with the echo example's
/// manifest's info and `_meta` (as `scaffold-aip explain` computes them) and confines its
/// sessions to the workspace root: it passes the manifest checks, and the runtime-contract
/// ones the manifest turns on; each part changed fails exactly its check, and an agent that
/// does not confine its sessions fails the two confinement checks.
#[test]
fn the_manifest_checks_judge_each_part_of_the_v2_initialize_answer() {
    let Some(python) = python() else {
        eprintln!("skipped: no python3");
        return;
    };
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/echo-server/ACP.md");
    let expected = acp_conform::manifest_initialize(&manifest).expect("the echo manifest reads");
    let only = [
        "v2.manifest-capabilities",
        "v2.manifest-info",
        "v2.manifest-meta-aip44",
        "v2.unknown-session",
        "v2.cwd-dotdot",
        "v2.cwd-symlink",
    ];
    let as_manifest = serde_json::json!({"info": expected["agentInfo"], "_meta": expected["_meta"]});
    let run_as = |answer: &serde_json::Value| {
        let config = Config {
            only: only.iter().map(|id| id.to_string()).collect(),
            ..agent_config(python, "manifest", &[answer.to_string()])
        }
        .with_manifest(&manifest)
        .expect("the manifest reads");
        acp_conform::run(config).expect("the suite runs")
    };
    let verdicts = run_as(&as_manifest);
    assert_eq!(failed(&verdicts), Vec::<&str>::new(), "{verdicts:#?}");
    assert_eq!(acp_conform::skipped(&verdicts), Vec::<&str>::new(), "{verdicts:#?}");
    let mut with_delete = as_manifest.clone();
    with_delete["delete"] = true.into();
    let mut renamed = as_manifest.clone();
    renamed["info"]["name"] = "not-echo".into();
    let mut other_tier = as_manifest.clone();
    other_tier["_meta"]["aip44"]["tier"] = "sandboxed".into();
    for (answer, check) in [
        (with_delete, "v2.manifest-capabilities"),
        (renamed, "v2.manifest-info"),
        (other_tier, "v2.manifest-meta-aip44"),
    ] {
        let verdicts = run_as(&answer);
        assert_eq!(failed(&verdicts), vec![check], "{verdicts:#?}");
        let Outcome::Fail(why) = detail(&verdicts, check) else {
            unreachable!()
        };
        assert!(why.contains(": the manifest says {"), "{why}");
    }
    // The manifest promises confinement to the workspace root (the v1 checks' code).
    let mut unconfined = as_manifest.clone();
    unconfined["confined"] = false.into();
    let verdicts = run_as(&unconfined);
    assert_eq!(
        failed(&verdicts),
        vec!["v2.cwd-dotdot", "v2.cwd-symlink"],
        "{verdicts:#?}"
    );
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
