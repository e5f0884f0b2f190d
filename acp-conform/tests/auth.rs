//! An agent that wants authentication: without `--auth` the report is one `auth.required`
//! failure naming its methods, and every check the refusal kept from judging is skipped,
//! saying so (never a false failure); with `--auth` (and the method's variable) the checks
//! run and pass; an `--auth` the agent cannot take is a start-up error listing its methods.
//! The agent is tests/agents/mutant.py as `require-auth` / `require-auth-prompt`. Skipped
//! when `python3` is absent.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use acp_conform::{AuditSource, Config, Needs, Outcome, Verdict, all_checks, failed};

fn python() -> Option<&'static str> {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some("python3")
}

/// The suite's configuration for the test agent as `mode`, with the echo manifest; `scratch`
/// holds its files.
fn config(python: &str, mode: &str, scratch: &Path) -> Config {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/echo-server/ACP.md");
    let expected = acp_conform::manifest_initialize(&manifest).expect("the echo manifest explains");
    let init = scratch.join("init.json");
    std::fs::write(&init, expected.to_string()).expect("init.json written");
    let agent: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/mutant.py");
    let audit = scratch.join("audit.jsonl");
    let mut config = Config {
        expected_initialize: Some(expected),
        timeout: Duration::from_millis(1500),
        audit_log: Some(AuditSource::File(audit.clone())),
        tool_prompts: ["/tool read", "/tool write", "/tool delete"].map(String::from).to_vec(),
        ..Config::new(vec![python.into(), "-S".into(), agent.into(), init.into(), mode.into()])
    };
    config.launch.env.push(("AGENTACP_AUDIT_LOG".into(), audit.into()));
    config
}

fn verdict<'a>(verdicts: &'a [Verdict], id: &str) -> &'a Verdict {
    verdicts
        .iter()
        .find(|v| v.id == id)
        .unwrap_or_else(|| panic!("no verdict {id}: {verdicts:#?}"))
}

/// The one failure is `auth.required`, first, with `says` in its evidence; each check in
/// `skipped` is skipped for it.
fn assert_one_auth_failure(verdicts: &[Verdict], says: &str, skipped: &[&str]) {
    assert_eq!(failed(verdicts), vec!["auth.required"], "{verdicts:#?}");
    assert_eq!(verdicts[0].id, "auth.required", "{verdicts:#?}");
    match &verdicts[0].outcome {
        Outcome::Fail(evidence) => assert!(evidence.contains(says), "{evidence}"),
        other => panic!("auth.required: {other:?}"),
    }
    for id in skipped {
        match &verdict(verdicts, id).outcome {
            Outcome::Skip(reason) => assert!(reason.contains("requires authentication"), "{id}: {reason}"),
            other => panic!("{id} is not skipped for authentication: {other:?}"),
        }
    }
}

#[test]
fn without_auth_the_report_is_one_clear_failure_and_skips_with_auth_the_checks_run() {
    let Some(python) = python() else {
        eprintln!("skipped: no python3");
        return;
    };
    let scratch = tempfile::tempdir().expect("a temporary folder");

    let walled = acp_conform::run(config(python, "require-auth", scratch.path())).expect("the suite runs");
    let needs_session: Vec<&str> = all_checks()
        .iter()
        .filter(|c| c.needs == Needs::Session)
        .map(|c| c.id)
        .collect();
    assert_one_auth_failure(
        &walled,
        "the agent requires authentication: methods conform-key (env_var: CONFORM_TEST_KEY), login (terminal); \
         it answered session/new with -32000 (Authentication required); run the kit with --auth METHOD",
        &needs_session,
    );
    // What needs no session is still judged: the malformed frames, whose "the connection still
    // serves" is the same refusal again.
    for id in [
        "jsonrpc.parse-error",
        "jsonrpc.unknown-method",
        "jsonrpc.notification-unanswered",
    ] {
        assert_eq!(verdict(&walled, id).outcome, Outcome::Pass, "{id}: {walled:#?}");
    }

    // Checks the refusal did not keep from judging: no auth.required.
    let only = Config {
        only: vec!["handshake.agent-info".into(), "jsonrpc.unknown-method".into()],
        ..config(python, "require-auth", scratch.path())
    };
    let judged = acp_conform::run(only).expect("the suite runs");
    assert!(judged.iter().all(|v| v.outcome == Outcome::Pass), "{judged:#?}");

    // Sessions open, prompts are refused: found by the checks that prompt, each skipped.
    let prompts = acp_conform::run(config(python, "require-auth-prompt", scratch.path())).expect("the suite runs");
    assert_one_auth_failure(
        &prompts,
        "it answered session/prompt with -32000",
        &["jsonrpc.stdout-clean", "turn.updates-before-response", "turn.cancel"],
    );
    assert_eq!(verdict(&prompts, "session.relative-cwd").outcome, Outcome::Pass);

    // With --auth and the method's variable: every check runs, and passes.
    let mut with_auth = config(python, "require-auth", scratch.path());
    with_auth.auth = Some("conform-key".into());
    with_auth.launch.env.push(("CONFORM_TEST_KEY".into(), "k".into()));
    let authenticated = acp_conform::run(with_auth).expect("the suite runs");
    assert!(
        authenticated.iter().all(|v| v.outcome == Outcome::Pass),
        "{authenticated:#?}"
    );
}

#[test]
fn an_auth_method_the_agent_cannot_take_is_a_start_error_listing_its_methods() {
    let Some(python) = python() else {
        eprintln!("skipped: no python3");
        return;
    };
    let scratch = tempfile::tempdir().expect("a temporary folder");
    let start_error = |method: &str| {
        let mut config = config(python, "require-auth", scratch.path());
        config.auth = Some(method.into());
        // Empty: as if not set (the kit's own environment has no such variable either).
        config.launch.env.push(("CONFORM_TEST_KEY".into(), "".into()));
        match acp_conform::run(config) {
            Err(error) => error.to_string(),
            Ok(verdicts) => panic!("--auth {method} ran: {verdicts:#?}"),
        }
    };
    assert_eq!(
        start_error("nope"),
        "--auth nope: the agent offers no such auth method (it offers: conform-key (env_var: CONFORM_TEST_KEY), login (terminal))"
    );
    assert!(start_error("login").contains("a terminal auth method"));
    assert!(
        start_error("conform-key").contains("set it and pass it with --env CONFORM_TEST_KEY"),
        "{}",
        start_error("conform-key")
    );
}
