//! The `scaffold-aip` binary: exit codes, the three lint formats, colour, explain, schema.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_scaffold-aip"));
    command.current_dir(fixtures()).env_remove("NO_COLOR");
    command
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

#[test]
fn lint_human_output_shows_each_finding_with_its_source_line() {
    let output = run(&["lint", "cli-demo"]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    common::assert_snapshot!("lint-human.txt", &stdout(&output));
}

#[test]
fn lint_json_output_lists_every_diagnostic_with_positions() {
    let output = run(&["lint", "--format", "json", "cli-demo/ACP.md"]);
    assert_eq!(output.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let found: Vec<String> = json["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            format!(
                "{} {} {}:{}",
                d["severity"].as_str().unwrap(),
                d["code"].as_str().unwrap(),
                d["line"],
                d["column"]
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            "error ACP103 3:5",
            "error ACP103 5:10",
            "error ACP201 7:12",
            "error ACP209 15:22",
            "warning ACP208 17:18",
        ]
    );
    assert_eq!(
        json["summary"],
        serde_json::json!({"files": 1, "errors": 4, "warnings": 1})
    );
    common::assert_snapshot!("lint-json.txt", &stdout(&output));
}

#[test]
fn lint_json_output_is_written_as_it_goes_in_serde_pretty_form() {
    // No findings, one file's, two files': the same text serde_json prints for the document.
    let examples = common::workspace().join("examples/echo-server");
    for args in [
        vec![examples.into_os_string()],
        vec!["cli-clean".into()],
        vec!["cli-clean".into(), "cli-demo".into()],
    ] {
        let output = bin().args(["lint", "--format", "json"]).args(&args).output().unwrap();
        let text = stdout(&output);
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(text, serde_json::to_string_pretty(&json).unwrap() + "\n", "{args:?}");
    }
}

#[test]
fn lint_github_output_is_workflow_commands() {
    let output = run(&["lint", "--format", "github", "cli-demo"]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(text.lines().all(|l| l.starts_with("::error file=cli-demo/ACP.md,") || l.starts_with("::warning file=cli-demo/ACP.md,")), "{text}");
    common::assert_snapshot!("lint-github.txt", &text);
}

#[test]
fn warnings_pass_unless_denied() {
    let clean = run(&["lint", "cli-clean"]);
    assert_eq!(clean.status.code(), Some(0), "{}", stdout(&clean));
    assert!(
        stdout(&clean).contains("1 manifest: 0 errors, 1 warning"),
        "{}",
        stdout(&clean)
    );
    let denied = run(&["lint", "--deny-warnings", "cli-clean"]);
    assert_eq!(denied.status.code(), Some(1));
}

#[test]
fn lint_without_paths_searches_the_current_folder() {
    let output = run(&["lint", "--format", "json"]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(json["summary"]["files"], 2, "cli-demo and cli-clean");
}

#[test]
fn usage_and_io_errors_exit_2_with_a_message() {
    let missing = run(&["lint", "no-such-dir"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("no-such-dir"), "{}", stderr(&missing));

    let empty = tempfile::tempdir().unwrap();
    let none = bin().args(["lint"]).arg(empty.path()).output().unwrap();
    assert_eq!(none.status.code(), Some(2));
    assert!(stderr(&none).contains("no ACP.md found"), "{}", stderr(&none));

    let bad_flag = run(&["lint", "--format", "xml"]);
    assert_eq!(bad_flag.status.code(), Some(2));
    assert!(stderr(&bad_flag).contains("xml"));

    let no_command = run(&[]);
    assert_eq!(no_command.status.code(), Some(2));
}

#[test]
fn every_command_has_help() {
    for args in [
        &["--help"][..],
        &["lint", "--help"],
        &["explain", "--help"],
        &["schema", "--help"],
    ] {
        let output = run(args);
        assert_eq!(output.status.code(), Some(0), "{args:?}");
        assert!(
            stdout(&output).contains("Usage: scaffold-aip"),
            "{args:?}: {}",
            stdout(&output)
        );
    }
}

#[test]
fn colour_only_when_asked_or_on_a_terminal_and_never_with_no_color() {
    let piped = run(&["lint", "cli-demo"]);
    assert!(!stdout(&piped).contains('\u{1b}'), "no colour into a pipe");
    let forced = run(&["lint", "--color", "always", "cli-demo"]);
    assert!(stdout(&forced).contains('\u{1b}'), "--color always colours");
    let no_color = bin()
        .args(["lint", "--color", "always", "cli-demo"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(!stdout(&no_color).contains('\u{1b}'), "NO_COLOR wins");

    // On a real terminal (a pty from `script`, when the machine has it), auto colours.
    let script = |no_color: bool| {
        let line = format!("{} lint cli-demo", env!("CARGO_BIN_EXE_scaffold-aip"));
        let mut command = Command::new("script");
        command
            .args(["-q", "-e", "-c", &line, "/dev/null"])
            .current_dir(fixtures())
            .env_remove("NO_COLOR");
        if no_color {
            command.env("NO_COLOR", "1");
        }
        command.output().ok().filter(|o| o.status.code() == Some(1))
    };
    if let (Some(tty), Some(tty_no_color)) = (script(false), script(true)) {
        assert!(stdout(&tty).contains('\u{1b}'), "a terminal gets colour");
        assert!(
            !stdout(&tty_no_color).contains('\u{1b}'),
            "NO_COLOR on a terminal: none"
        );
    } else {
        eprintln!("skipped the terminal half: `script` is not available");
    }
}

#[test]
fn explain_reports_initialize_refs_and_lifecycle() {
    let output = run(&["explain", "cli-clean/ACP.md"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).contains("warning[ACP208]"), "warnings go to stderr");
    let text = stdout(&output).replace(&fixtures().display().to_string(), "<fixtures>");
    common::assert_snapshot!("explain-human.txt", &text);

    let json = run(&["explain", "--format", "json", "cli-clean/ACP.md"]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(
        json["initializeResponse"]["agentCapabilities"],
        serde_json::json!({
            "loadSession": true,
            "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
            "mcpCapabilities": {"http": false, "sse": false}
        })
    );
    assert_eq!(
        json["initializeResponse"]["_meta"]["aip44"]["acp_rev"],
        "0fc18323a9fdad4e5b4a20ec2f1645dde843fd9b"
    );
    assert_eq!(
        json["initializeRequest"],
        serde_json::Value::Null,
        "a server sends no initialize request"
    );
}

#[test]
fn explain_refuses_a_manifest_with_errors() {
    let output = run(&["explain", "cli-demo/ACP.md"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("error[ACP103]"));
    assert!(stdout(&output).is_empty());
}

#[test]
fn schema_prints_the_generated_schema() {
    let output = run(&["schema"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(stdout(&output), acp_manifest::manifest::json_schema_text());
}

#[test]
fn readme_first_command_lints_and_explains_the_examples() {
    let examples = common::workspace().join("examples");
    let lint = bin().arg("lint").arg(&examples).output().unwrap();
    assert_eq!(lint.status.code(), Some(0), "{}", stdout(&lint));
    assert!(stdout(&lint).contains("0 errors, 0 warnings"), "{}", stdout(&lint));
    let explain = bin()
        .arg("explain")
        .arg(examples.join("governed-server/ACP.md"))
        .output()
        .unwrap();
    assert_eq!(explain.status.code(), Some(0), "{}", stderr(&explain));
    assert!(
        stdout(&explain).contains("\"loadSession\": true"),
        "{}",
        stdout(&explain)
    );
}

#[test]
fn upstream_hermes_example_is_a_server_without_an_operator() {
    let Some(shared) = common::shared() else {
        eprintln!("skipped: ../shared is absent");
        return;
    };
    let hermes = shared.join("upstream/aip-44/examples/hermes-acp/ACP.md");
    let output = bin().args(["lint", "--format", "json"]).arg(&hermes).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let codes: Vec<&str> = json["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect();
    // docs/diagnostics.md explains each: no operator for a server (ACP202), the placeholder
    // revision `abc1234` (ACP400), and two prompt capabilities beyond governance-aware (ACP208).
    assert_eq!(codes, ["ACP202", "ACP400", "ACP208", "ACP208"]);
}

#[test]
fn every_corpus_diagnostic_renders_in_every_format() {
    let corpus = common::corpus();
    let (mut errors, mut warnings) = (0, 0);
    for group in ["bad", "good"] {
        for case in common::cases(group) {
            let expected = std::fs::read_to_string(case.with_file_name("expected")).unwrap();
            errors += expected.lines().filter(|l| l.starts_with("error ")).count();
            warnings += expected.lines().filter(|l| l.starts_with("warning ")).count();
        }
    }
    for format in ["human", "json", "github"] {
        let output = bin().args(["lint", "--format", format]).arg(&corpus).output().unwrap();
        assert_eq!(output.status.code(), Some(1), "{format}");
        assert!(output.stderr.is_empty(), "{format}: {}", stderr(&output));
        let text = stdout(&output);
        match format {
            "human" => assert!(
                text.ends_with(&format!("manifests: {errors} errors, {warnings} warnings\n")),
                "{text}"
            ),
            "json" => {
                let json: serde_json::Value = serde_json::from_str(&text).unwrap();
                assert_eq!(json["summary"]["errors"], errors);
                assert_eq!(json["summary"]["warnings"], warnings);
            }
            _ => assert_eq!(text.lines().count(), errors + warnings),
        }
    }
}

/// A crate pinned to a revision without built-in wire types, the way `docs/regen.md` says:
/// lint accepts it once the crate has the module `regen` generated for that revision (the build
/// uses it through `wire =`), and only then.
#[test]
fn lint_accepts_an_unknown_revision_once_the_crate_has_its_generated_module() {
    let dir = tempfile::tempdir().unwrap();
    let crate_dir = dir.path().join("cli-clean");
    std::fs::create_dir_all(crate_dir.join("src/wire")).unwrap();
    std::fs::create_dir_all(dir.path().join("refs")).unwrap();
    std::fs::copy(fixtures().join("refs/OPERATOR.md"), dir.path().join("refs/OPERATOR.md")).unwrap();
    let manifest = std::fs::read_to_string(fixtures().join("cli-clean/ACP.md"))
        .unwrap()
        .replace("acp_rev: 0fc18323", "acp_rev: abcdef12");
    std::fs::write(crate_dir.join("ACP.md"), manifest).unwrap();
    let lint = || bin().arg("lint").arg(crate_dir.join("ACP.md")).output().unwrap();

    let before = lint();
    assert_eq!(before.status.code(), Some(1), "{}", stdout(&before));
    assert!(stdout(&before).contains("error[ACP400]"), "{}", stdout(&before));

    let generated = |rev: &str| {
        format!(
            "{}\npub const ACP_REV: &str = \"{rev}\";\n",
            acp_manifest::revisions::header(rev)
        )
    };
    let other = "0123456789abcdef0123456789abcdef01234567";
    std::fs::write(crate_dir.join("src/wire/acp_wire.rs"), generated(other)).unwrap();
    let wrong_module = lint();
    assert!(
        stdout(&wrong_module).contains("error[ACP400]"),
        "a module of another revision does not count"
    );

    let ours = "abcdef120123456789abcdef0123456789abcdef";
    std::fs::write(crate_dir.join("src/wire/acp_wire.rs"), generated(ours)).unwrap();
    let after = lint();
    assert_eq!(after.status.code(), Some(0), "{}", stdout(&after));
    assert!(!stdout(&after).contains("ACP400"), "{}", stdout(&after));
    let explain = || bin().arg("explain").arg(crate_dir.join("ACP.md")).output().unwrap();
    let unreadable = explain();
    assert_eq!(unreadable.status.code(), Some(1));
    assert!(
        stderr(&unreadable).contains("acp_wire.rs has no readable `PROTOCOL_VERSION`"),
        "{}",
        stderr(&unreadable)
    );

    // Issue #13: explain works from the module's header and `PROTOCOL_VERSION`, as lint does.
    std::fs::write(
        crate_dir.join("src/wire/acp_wire.rs"),
        format!("{}pub const PROTOCOL_VERSION: u16 = 1u16;\n", generated(ours)),
    )
    .unwrap();
    let explained = explain();
    assert_eq!(explained.status.code(), Some(0), "{}", stderr(&explained));
    assert!(
        stdout(&explained).contains(&format!(
            "acp_rev: {ours} (generated by scaffold-aip regen into acp_wire.rs), protocol version 1"
        )),
        "{}",
        stdout(&explained)
    );
    assert!(
        stdout(&explained).contains(&format!("\"acp_rev\": \"{ours}\"")),
        "{}",
        stdout(&explained)
    );
}
