//! Every command shown in the docs is exercised by a test.
//!
//! The commands are the lines of the fenced blocks marked `sh`, `bash`, `shell` or `console`
//! in `README.md` and `docs/**/*.md` (a `\` at the end of a line continues it; `&&` and `;`
//! separate commands; `#` starts a comment). For each one:
//!
//! - **`scaffold-aip …`** (also written `cargo run -q -p scaffold-aip -- …`) is
//!   run with this build's binary, from the root of a scratch copy of the repository (what git
//!   tracks plus new files it does not ignore; one copy per page, commands in page order, so a
//!   command may use what an earlier one of the same page wrote). It must exit 0, or N when a
//!   comment line `# exits N` comes before it in its block. In a `console` block the lines after
//!   a `$ ` command are its expected output: compared with trailing spaces ignored, against
//!   stdout (or stdout and stderr together, in either order); a `...` line matches any number of
//!   lines; a command shown without output is not compared. Placeholders: `<full commit SHA>`
//!   is the default revision, and `path/to/schema/v1` the upstream snapshot of the revision
//!   given by `--rev` (else the default), from either snapshot folder (`path/to/schema/v2`:
//!   from `acp-schemas-v2`); a command that needs a
//!   snapshot is skipped, saying so, when `../shared` is absent.
//! - **any other command** must be a row of [`EXERCISED_BY`], which names the test that does
//!   what the command does (`path/to/file.rs::function`); the function must exist, be a test,
//!   and every row must be shown in some page.
//!
//! Also checked here: the sample GitHub workflow parses and its lint step annotates manifests,
//! and the editor examples (Zed's `agent_servers`, a registry `agent.json`) describe the
//! example manifests they name.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use regex::Regex;
use serde_json::Value;

/// Commands of the docs that this test does not run, and the test that exercises each
/// (`path from the repository root::function`). A command must match a row exactly (runs of
/// spaces count as one).
const EXERCISED_BY: &[(&str, &str)] = &[
    // docs/design/windows.md: scaffold-aip built for Windows and run under Wine.
    (
        "cargo build --target x86_64-pc-windows-gnu --target-dir target/windows -p scaffold-aip",
        "scaffold-aip/tests/wine.rs::the_windows_build_under_wine_answers_as_the_linux_build",
    ),
    (
        "cargo test -p scaffold-aip --test wine",
        "scaffold-aip/tests/wine.rs::the_windows_build_under_wine_answers_as_the_linux_build",
    ),
    (
        "cargo test -p echo-server --test wine",
        "examples/echo-server/tests/wine.rs::the_windows_build_serves_a_session_over_stdio_under_wine",
    ),
    (
        "cargo test -p tour --test wine",
        "examples/tour/tests/wine.rs::the_windows_build_of_the_tour_passes_every_step_under_wine",
    ),
    // docs/remote.md: a server over WebSocket with a token file.
    (
        "AGENTACP_TOKENS_FILE=tokens AGENTACP_WORKSPACE_ROOT=$PWD cargo run -p governed-server -- --listen 127.0.0.1:8765",
        "agentacp/tests/websocket.rs::a_token_on_the_upgrade_admits_the_client_and_every_audit_record_names_its_identity",
    ),
    // docs/deploy.md: three replicas of a fleet on one database.
    (
        "AGENTACP_REPLICA=a governed-server --listen 127.0.0.1:8701",
        "examples/governed-server/tests/fleet.rs::a_session_made_through_one_replica_is_listed_loaded_and_prompted_through_the_others",
    ),
    (
        "AGENTACP_REPLICA=b governed-server --listen 127.0.0.1:8702",
        "examples/governed-server/tests/fleet.rs::a_session_made_through_one_replica_is_listed_loaded_and_prompted_through_the_others",
    ),
    (
        "AGENTACP_REPLICA=c governed-server --listen 127.0.0.1:8703",
        "examples/governed-server/tests/fleet.rs::a_session_made_through_one_replica_is_listed_loaded_and_prompted_through_the_others",
    ),
    // docs/v2.md: the examples serving v1 and v2.
    (
        "AGENTACP_PROTOCOL_VERSIONS=1,2 cargo run -p echo-server",
        "interop/tests/v2_sdk.rs::rust_v2_client_drives_echo_server_beside_a_v1_client",
    ),
    (
        "AGENTACP_PROTOCOL_VERSIONS=1,2 cargo run -p governed-server",
        "interop/tests/v2_sdk.rs::rust_v2_client_drives_governed_server_through_a_permission",
    ),
    // README: the test suite is what CI runs.
    (
        "cargo test --workspace",
        "scaffold-aip/tests/docs_commands.rs::ci_runs_the_documented_test_command",
    ),
    // README: the example client driving the governed server.
    (
        "cargo build -p acp-client -p governed-server",
        "agentacp/tests/client.rs::the_example_client_drives_the_governed_server_and_audits_its_tool_calls",
    ),
    (
        r#"AGENTACP_WORKSPACE_ROOT=$PWD ./target/debug/acp-client --env AGENTACP_WORKSPACE_ROOT -p 'hello' -p '/tool write-file {"path":"notes.txt","content":"hi"}' -- ./target/debug/governed-server"#,
        "agentacp/tests/client.rs::the_example_client_drives_the_governed_server_and_audits_its_tool_calls",
    ),
    // README: the guided tour.
    (
        "cargo run --release -p tour",
        "examples/tour/tests/tour.rs::the_tour_runs_every_step_and_verifies_the_audit",
    ),
    (
        "cargo run --release -p tour -- --wire",
        "examples/tour/tests/tour.rs::the_wire_flag_prints_the_messages",
    ),
    // docs/editors.md: the binaries an editor starts; the bridge finds the server beside it.
    (
        "cargo build --release -p governed-server -p governance-bridge",
        "interop/tests/bridge.rs::a_full_session_crosses_the_bridge_and_both_audit_logs_verify",
    ),
    // docs/regen.md: adding a built-in revision.
    (
        "UPDATE_SNAPSHOTS=1 cargo test -p acp-wire-gen --test generator the_default_revisions_public_surface_matches_its_snapshot",
        "acp-wire-gen/tests/generator/upstream.rs::the_default_revisions_public_surface_matches_its_snapshot",
    ),
    (
        "cargo test -p scaffold-aip --test regen",
        "scaffold-aip/tests/regen.rs::the_checked_in_built_in_modules_are_current",
    ),
    (
        "cargo test -p agentacp --test built_in_revisions",
        "agentacp/tests/built_in_revisions.rs::lint_knows_exactly_the_built_in_revisions",
    ),
];

/// The placeholder for an upstream schema folder.
const SCHEMA_PLACEHOLDER: &str = "path/to/schema/v1";
/// The placeholder for an upstream protocol-version-2 schema folder (`acp-schemas-v2`).
const V2_SCHEMA_PLACEHOLDER: &str = "path/to/schema/v2";
/// The placeholder for a full revision SHA.
const SHA_PLACEHOLDER: &str = "<full commit SHA>";

// ---- the tests ---------------------------------------------------------------------------

#[test]
fn every_command_in_the_docs_runs_or_is_exercised() {
    let root = common::workspace();
    let table: BTreeMap<&str, &str> = EXERCISED_BY.iter().copied().collect();
    let mut problems = Vec::new();
    let (mut ran, mut listed) = (0, 0);
    for page in doc_pages(&root) {
        let commands = match page_commands(&root, &page) {
            Ok(commands) => commands,
            Err(problem) => {
                problems.push(problem);
                continue;
            }
        };
        let mut scratch: Option<ScratchCheckout> = None;
        for command in commands {
            match classify(&command) {
                Ok(Kind::ScaffoldAip(invocation)) => {
                    let args = match resolve_placeholders(&invocation.args) {
                        Ok(args) => args,
                        Err(Skip(reason)) => {
                            eprintln!("skipped: {}: `{}`: {reason}", command.place(), command.text);
                            continue;
                        }
                    };
                    let dir = scratch.get_or_insert_with(|| scratch_copy(&root));
                    let output = run_scaffold_aip(&dir.checkout, &invocation.env, &args);
                    ran += 1;
                    if let Some(problem) = check_run(&command, &output) {
                        problems.push(problem);
                    }
                }
                Ok(Kind::Other) => {
                    listed += 1;
                    if !table.contains_key(command.text.as_str()) {
                        problems.push(format!(
                            "{}: `{}` is neither a scaffold-aip command (which this test runs) nor a row of \
                             EXERCISED_BY in scaffold-aip/tests/docs_commands.rs: add a row naming the test that \
                             exercises it, or show it as inline code instead",
                            command.place(),
                            command.text
                        ));
                    }
                }
                Err(problem) => problems.push(format!("{}: `{}`: {problem}", command.place(), command.text)),
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    assert!(
        ran > 0 && listed > 0,
        "found no commands in the docs ({ran} run, {listed} listed)"
    );
}

#[test]
fn every_table_entry_names_an_existing_test() {
    let root = common::workspace();
    let mut problems = Vec::new();
    for (command, target) in EXERCISED_BY {
        if let Err(problem) = test_exists(&root, target) {
            problems.push(format!("EXERCISED_BY row `{command}`: {problem}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_table_entry_is_shown_in_the_docs() {
    let root = common::workspace();
    let shown: BTreeSet<String> = doc_pages(&root)
        .iter()
        .filter_map(|page| page_commands(&root, page).ok())
        .flatten()
        .filter(|command| matches!(classify(command), Ok(Kind::Other)))
        .map(|command| command.text)
        .collect();
    let stale: Vec<&str> = EXERCISED_BY
        .iter()
        .map(|(command, _)| *command)
        .filter(|command| !shown.contains(*command))
        .collect();
    assert!(
        stale.is_empty(),
        "rows of EXERCISED_BY that no page shows any more (remove them, or fix the text):\n{}",
        stale.join("\n")
    );
}

/// The README's test command is the one CI runs.
#[test]
fn ci_runs_the_documented_test_command() {
    let script = std::fs::read_to_string(common::workspace().join(".ci/run")).expect(".ci/run");
    let pattern = Regex::new(r"(?m)^cargo test --workspace( |$)").unwrap();
    assert!(
        pattern.is_match(&script),
        ".ci/run does not run `cargo test --workspace`"
    );
}

#[test]
fn the_sample_workflow_parses_and_its_lint_step_annotates_manifests() {
    let root = common::workspace();
    let path = root.join("docs/examples/github-actions-lint.yml");
    let text = std::fs::read_to_string(&path).expect("the sample workflow");
    let options = serde_saphyr::options! { strict_booleans: true };
    let workflow: Value = serde_saphyr::from_str_with_options(&text, options)
        .unwrap_or_else(|e| panic!("{}: not YAML: {e}", path.display()));
    assert!(workflow.get("on").is_some(), "the workflow has no `on` triggers");
    let steps: Vec<&Value> = workflow["jobs"]
        .as_object()
        .expect("jobs")
        .values()
        .flat_map(|job| job["steps"].as_array().expect("steps").iter())
        .collect();
    let runs: Vec<&str> = steps.iter().filter_map(|step| step["run"].as_str()).collect();

    let install = runs
        .iter()
        .find(|run| run.contains("cargo install"))
        .expect("a step installs scaffold-aip");
    assert!(
        install.contains("--locked") && install.contains("scaffold-aip"),
        "the install step should build scaffold-aip with its lock file: {install}"
    );

    let lint: Vec<&str> = runs
        .iter()
        .flat_map(|run| run.lines())
        .filter(|line| line.contains("scaffold-aip lint"))
        .collect();
    assert_eq!(lint.len(), 1, "one lint command: {lint:?}");
    let command = DocCommand {
        page: "docs/examples/github-actions-lint.yml".into(),
        line: 0,
        text: normalise(lint[0]),
        run_text: lint[0].to_string(),
        expected_exit: 0,
        expected_output: None,
    };
    let Ok(Kind::ScaffoldAip(invocation)) = classify(&command) else {
        panic!("the lint step is not a scaffold-aip command: {}", lint[0]);
    };
    for flag in ["--format", "github", "--deny-warnings"] {
        assert!(
            invocation.args.iter().any(|a| a == flag),
            "{flag} is missing: {}",
            lint[0]
        );
    }
    let folders: Vec<&String> = invocation.args[1..]
        .iter()
        .filter(|a| !a.starts_with("--") && *a != "github")
        .collect();
    assert!(!folders.is_empty(), "the lint step names the folders to lint");

    // A repository whose manifests are clean: nothing printed, exit 0.
    let repo = tempfile::tempdir().unwrap();
    for folder in &folders {
        copy_tree(&root.join("examples"), &repo.path().join(folder));
    }
    let clean = run_scaffold_aip(repo.path(), &invocation.env, &invocation.args);
    assert_eq!(clean.status.code(), Some(0), "{}", describe(&clean));
    assert_eq!(text_of(&clean.stdout), "", "a clean run prints no workflow command");

    // A manifest with warnings: one annotation per finding, on a path relative to the
    // repository root (where `run:` steps start), and the job fails.
    let case = "basic-bridge-warnings";
    copy_tree(
        &root.join("tests/manifests/good").join(case),
        &repo.path().join(folders[0]).join(case),
    );
    let findings = run_scaffold_aip(repo.path(), &invocation.env, &invocation.args);
    assert_eq!(findings.status.code(), Some(1), "{}", describe(&findings));
    let stdout = text_of(&findings.stdout);
    let expected_file = format!("file={}/{case}/ACP.md,line=", folders[0]);
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    for line in stdout.lines() {
        assert!(
            line.starts_with("::warning ") && line.contains(&expected_file),
            "not an annotation on the manifest: {line}"
        );
    }
}

#[test]
fn editor_examples_match_the_manifests_they_describe() {
    let root = common::workspace();
    let binaries = example_binaries(&root);
    let documented = documented_text(&root);
    let (mut zed, mut registry) = (0, 0);
    let mut problems = Vec::new();
    for page in doc_pages(&root) {
        let text = std::fs::read_to_string(root.join(&page)).unwrap();
        for block in fenced_blocks(&text) {
            if !matches!(block.lang.as_str(), "json" | "jsonc") {
                continue;
            }
            let body = block.lines.join("\n");
            let Ok(value) = serde_json::from_str::<Value>(&body) else {
                if body.contains("agent_servers") || body.contains("\"distribution\"") {
                    problems.push(format!("{page}:{}: this editor example is not JSON", block.first_line));
                }
                continue;
            };
            let place = format!("{page}:{}", block.first_line);
            if let Some(servers) = value.get("agent_servers") {
                zed += 1;
                problems.extend(
                    check_zed_settings(servers, &binaries, &documented)
                        .into_iter()
                        .map(|p| format!("{place}: {p}")),
                );
            }
            if value.get("distribution").is_some() {
                registry += 1;
                problems.extend(
                    check_agent_json(&root, &value, &binaries)
                        .into_iter()
                        .map(|p| format!("{place}: {p}")),
                );
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(
        zed > 0 && registry > 0,
        "no Zed settings ({zed}) or agent.json ({registry}) found"
    );
}

#[test]
fn the_extractor_reads_continuations_chains_comments_and_console_blocks() {
    let page = "intro\n\n```sh\n# a comment\nscaffold-aip lint a && \\\n  scaffold-aip explain 'b c'/ACP.md  # trailing\n\n# exits 1\ncargo test -p x; scaffold-aip schema\n```\n\n```text\nscaffold-aip not-a-command\n```\n\n```console\n$ scaffold-aip audit verify x.jsonl\nx.jsonl: 1 record\n...\n# exits 2\n$ scaffold-aip lint \\\n> nowhere\n```\n";
    let commands = commands_of(&fenced_blocks(page), "page.md").unwrap();
    let seen: Vec<(usize, &str, i32, Option<usize>)> = commands
        .iter()
        .map(|c| {
            (
                c.line,
                c.text.as_str(),
                c.expected_exit,
                c.expected_output.as_ref().map(Vec::len),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (5, "scaffold-aip lint a", 0, None),
            (5, "scaffold-aip explain 'b c'/ACP.md", 0, None),
            (9, "cargo test -p x", 0, None),
            (9, "scaffold-aip schema", 1, None),
            (17, "scaffold-aip audit verify x.jsonl", 0, Some(2)),
            (21, "scaffold-aip lint nowhere", 2, None),
        ]
    );
    let Ok(Kind::ScaffoldAip(explain)) = classify(&commands[1]) else {
        panic!()
    };
    assert_eq!(explain.args, ["explain", "b c/ACP.md"]);
    let cargo_form = DocCommand {
        text: "NO_COLOR=1 cargo run -q -p scaffold-aip -- lint --format json .".into(),
        run_text: "NO_COLOR=1 cargo run -q -p scaffold-aip -- lint --format json .".into(),
        ..commands[0].clone()
    };
    let Ok(Kind::ScaffoldAip(lint)) = classify(&cargo_form) else {
        panic!()
    };
    assert_eq!(lint.args, ["lint", "--format", "json", "."]);
    assert_eq!(lint.env, [("NO_COLOR".to_string(), "1".to_string())]);
    assert!(matches!(classify(&commands[2]), Ok(Kind::Other)));
    let piped = DocCommand {
        run_text: "scaffold-aip schema | head".into(),
        ..commands[0].clone()
    };
    assert!(classify(&piped).is_err(), "pipes cannot be run");
    let lines = |text: &str| text.lines().map(str::to_string).collect::<Vec<_>>();
    assert!(output_matches(&lines("a\n...\nz"), &lines("a\nb\nc\nz")));
    assert!(output_matches(&lines("a\n..."), &lines("a")));
    assert!(!output_matches(&lines("a\nz"), &lines("a\nb\nz")));
}

// ---- pages, blocks and commands ------------------------------------------------------------

/// `README.md` and every `docs/**/*.md`, relative to the root, sorted.
fn doc_pages(root: &Path) -> Vec<String> {
    fn walk(dir: &Path, root: &Path, found: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, root, found);
            } else if path.extension().is_some_and(|e| e == "md") {
                let relative = path.strip_prefix(root).unwrap();
                found.push(relative.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    let mut pages = vec!["README.md".to_string()];
    let mut docs = Vec::new();
    walk(&root.join("docs"), root, &mut docs);
    docs.sort();
    pages.extend(docs);
    pages
}

/// One fenced block of a page.
#[derive(Debug, Clone)]
struct Block {
    /// The first word of the info string (`sh`, `console`, `json`, …).
    lang: String,
    /// The 1-based line of the first line inside the fence.
    first_line: usize,
    /// The lines inside the fence, the fence's indentation removed.
    lines: Vec<String>,
}

/// The fenced blocks (``` or ~~~) of a markdown page.
fn fenced_blocks(text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((index, line)) = lines.next() {
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim_start();
        let fence_char = match trimmed.chars().next() {
            Some(c @ ('`' | '~')) => c,
            _ => continue,
        };
        let fence_len = trimmed.chars().take_while(|&c| c == fence_char).count();
        if fence_len < 3 {
            continue;
        }
        let lang = trimmed[fence_len..]
            .split(|c: char| c.is_whitespace() || c == '{' || c == ',')
            .next()
            .unwrap_or("")
            .to_lowercase();
        let mut block = Block {
            lang,
            first_line: index + 2,
            lines: Vec::new(),
        };
        for (_, inner) in lines.by_ref() {
            let inner_trimmed = inner.trim_start();
            let closing = inner_trimmed.chars().take_while(|&c| c == fence_char).count();
            if closing >= fence_len && inner_trimmed[closing..].trim().is_empty() {
                break;
            }
            let strip = inner.len() - inner_trimmed.len();
            block.lines.push(inner[strip.min(indent)..].to_string());
        }
        blocks.push(block);
    }
    blocks
}

/// One command shown in a page.
#[derive(Debug, Clone)]
struct DocCommand {
    /// The page, relative to the repository root.
    page: String,
    /// The 1-based line the command starts on.
    line: usize,
    /// The command as written, continuations joined and runs of spaces made one.
    text: String,
    /// The same with the placeholders filled in, for running.
    run_text: String,
    /// The exit status the page implies.
    expected_exit: i32,
    /// What a `console` block shows after it, if anything.
    expected_output: Option<Vec<String>>,
}

impl DocCommand {
    fn place(&self) -> String {
        format!("{}:{}", self.page, self.line)
    }
}

/// The commands of every shell block of `page`.
fn page_commands(root: &Path, page: &str) -> Result<Vec<DocCommand>, String> {
    let text = std::fs::read_to_string(root.join(page)).map_err(|e| format!("{page}: {e}"))?;
    commands_of(&fenced_blocks(&text), page)
}

fn commands_of(blocks: &[Block], page: &str) -> Result<Vec<DocCommand>, String> {
    let exits = Regex::new(r"^#\s*exits\s+(\d+)\b").unwrap();
    let mut commands = Vec::new();
    for block in blocks {
        let console = match block.lang.as_str() {
            "sh" | "bash" | "shell" | "zsh" => false,
            "console" | "shell-session" => true,
            _ => continue,
        };
        let mut expected_exit = None;
        let mut index = 0;
        while index < block.lines.len() {
            let line = block.lines[index].trim();
            let line_number = block.first_line + index;
            index += 1;
            if let Some(captures) = exits.captures(line) {
                expected_exit = Some(captures[1].parse::<i32>().unwrap());
                continue;
            }
            let start = if console {
                match line.strip_prefix("$ ") {
                    Some(command) => command,
                    None => continue, // output of the command before, handled below
                }
            } else if line.is_empty() || line.starts_with('#') {
                continue;
            } else {
                line
            };
            // Continuations.
            let mut logical = start.to_string();
            while logical.trim_end().ends_with('\\') && index < block.lines.len() {
                let kept = logical.trim_end();
                logical = kept[..kept.len() - 1].to_string();
                let next = block.lines[index].trim();
                let next = if console {
                    next.strip_prefix("> ").unwrap_or(next)
                } else {
                    next
                };
                logical.push(' ');
                logical.push_str(next);
                index += 1;
            }
            // The output a console block shows for it.
            let mut output = None;
            if console {
                let mut shown = Vec::new();
                while index < block.lines.len() {
                    let next = &block.lines[index];
                    if next.starts_with("$ ") || exits.is_match(next.trim()) {
                        break;
                    }
                    shown.push(next.trim_end().to_string());
                    index += 1;
                }
                while shown.last().is_some_and(String::is_empty) {
                    shown.pop();
                }
                output = (!shown.is_empty()).then_some(shown);
            }
            let segments = split_commands(&logical).map_err(|e| format!("{page}:{line_number}: {e}"))?;
            let last = segments.len().saturating_sub(1);
            for (position, segment) in segments.into_iter().enumerate() {
                let is_last = position == last;
                commands.push(DocCommand {
                    page: page.to_string(),
                    line: line_number,
                    text: normalise(&segment),
                    run_text: segment.replace(SHA_PLACEHOLDER, acp_manifest::revisions::DEFAULT.sha),
                    expected_exit: if is_last { expected_exit.unwrap_or(0) } else { 0 },
                    expected_output: if is_last { output.clone() } else { None },
                });
            }
            expected_exit = None;
        }
    }
    Ok(commands)
}

/// Runs of whitespace made one space, ends trimmed.
fn normalise(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A shell token.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// A word, quotes removed; `expands` when it has an unquoted or double-quoted `$` or `` ` ``.
    Word { text: String, expands: bool },
    /// An operator: `&&`, `||`, `|`, `;`, `&`, `<`, `>`, `>>`.
    Op(&'static str),
}

/// Splits a command line into words and operators, with the byte range of each; a `#` that
/// starts a word starts a comment.
fn lex(line: &str) -> Result<Vec<(Token, Range<usize>)>, String> {
    let chars: Vec<char> = line.chars().collect();
    let offsets: Vec<usize> = line
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(line.len()))
        .collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c == '#' {
            break;
        }
        let two: String = chars[i..(i + 2).min(chars.len())].iter().collect();
        let op = match two.as_str() {
            "&&" => Some(("&&", 2)),
            "||" => Some(("||", 2)),
            ">>" => Some((">>", 2)),
            _ => match c {
                '|' => Some(("|", 1)),
                ';' => Some((";", 1)),
                '&' => Some(("&", 1)),
                '<' => Some(("<", 1)),
                '>' => Some((">", 1)),
                _ => None,
            },
        };
        if let Some((op, width)) = op {
            tokens.push((Token::Op(op), offsets[i]..offsets[i + width]));
            i += width;
            continue;
        }
        let start = i;
        let mut text = String::new();
        let mut expands = false;
        while i < chars.len() {
            let c = chars[i];
            if c.is_whitespace() || matches!(c, '|' | ';' | '&' | '<' | '>') {
                break;
            }
            match c {
                '\'' => {
                    let close = chars[i + 1..]
                        .iter()
                        .position(|&q| q == '\'')
                        .ok_or("an unclosed single quote")?;
                    text.extend(&chars[i + 1..i + 1 + close]);
                    i += close + 2;
                }
                '"' => {
                    i += 1;
                    loop {
                        match chars.get(i) {
                            None => return Err("an unclosed double quote".into()),
                            Some('"') => break,
                            Some('\\') if matches!(chars.get(i + 1), Some('"' | '\\' | '$' | '`')) => {
                                text.push(chars[i + 1]);
                                i += 2;
                            }
                            Some(&q) => {
                                expands |= q == '$' || q == '`';
                                text.push(q);
                                i += 1;
                            }
                        }
                    }
                    i += 1;
                }
                '\\' => {
                    if let Some(&next) = chars.get(i + 1) {
                        text.push(next);
                    }
                    i += 2;
                }
                _ => {
                    expands |= c == '$' || c == '`';
                    text.push(c);
                    i += 1;
                }
            }
        }
        tokens.push((
            Token::Word { text, expands },
            offsets[start]..offsets[i.min(chars.len())],
        ));
    }
    Ok(tokens)
}

/// The simple commands of a line: the text between `&&` and `;` operators.
fn split_commands(line: &str) -> Result<Vec<String>, String> {
    let tokens = lex(line)?;
    let mut segments = Vec::new();
    let mut current: Option<Range<usize>> = None;
    for (token, range) in tokens {
        match token {
            Token::Op("&&" | ";") => {
                if let Some(range) = current.take() {
                    segments.push(line[range].to_string());
                }
            }
            _ => {
                current = Some(match current {
                    Some(open) => open.start..range.end,
                    None => range,
                });
            }
        }
    }
    if let Some(range) = current {
        segments.push(line[range].to_string());
    }
    Ok(segments)
}

/// A `scaffold-aip` command to run.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Invocation {
    /// `NAME=value` words before the program.
    env: Vec<(String, String)>,
    /// The arguments after the program (or after `--` of `cargo run`).
    args: Vec<String>,
}

/// What a command is.
#[derive(Debug)]
enum Kind {
    /// `scaffold-aip …`, run by this test.
    ScaffoldAip(Invocation),
    /// Anything else: must be in [`EXERCISED_BY`].
    Other,
}

fn classify(command: &DocCommand) -> Result<Kind, String> {
    let tokens = lex(&command.run_text)?;
    let words: Vec<(String, bool)> = tokens
        .iter()
        .filter_map(|(token, _)| match token {
            Token::Word { text, expands } => Some((text.clone(), *expands)),
            Token::Op(_) => None,
        })
        .collect();
    let assignment = Regex::new(r"^[A-Za-z_][A-Za-z0-9_]*=").unwrap();
    let mut env = Vec::new();
    let mut rest = words.as_slice();
    while let Some(((word, _), tail)) = rest.split_first() {
        if !assignment.is_match(word) {
            break;
        }
        let (name, value) = word.split_once('=').unwrap();
        env.push((name.to_string(), value.to_string()));
        rest = tail;
    }
    let Some(((program, _), tail)) = rest.split_first() else {
        return Ok(Kind::Other);
    };
    let args: Vec<&(String, bool)> = if program == "scaffold-aip" || program.ends_with("/scaffold-aip") {
        tail.iter().collect()
    } else if program == "cargo" && tail.first().is_some_and(|(w, _)| w == "run") {
        let flags: Vec<&str> = tail
            .iter()
            .map(|(w, _)| w.as_str())
            .take_while(|w| *w != "--")
            .collect();
        // `cargo run -p scaffold-aip` (its only binary) or an explicit `--bin scaffold-aip`.
        let runs_it = flags
            .windows(2)
            .any(|w| w == ["--bin", "scaffold-aip"] || w == ["-p", "scaffold-aip"])
            || flags.contains(&"--bin=scaffold-aip")
            || flags.contains(&"--package=scaffold-aip");
        if !runs_it {
            return Ok(Kind::Other);
        }
        tail.iter().skip_while(|(w, _)| w != "--").skip(1).collect()
    } else {
        return Ok(Kind::Other);
    };
    if tokens.iter().any(|(token, _)| matches!(token, Token::Op(_))) {
        return Err("a scaffold-aip command with a pipe or a redirection cannot be run by the docs test".into());
    }
    if words.iter().any(|(_, expands)| *expands) {
        return Err("a scaffold-aip command with a `$` or `` ` `` expansion cannot be run by the docs test".into());
    }
    Ok(Kind::ScaffoldAip(Invocation {
        env,
        args: args.into_iter().map(|(w, _)| w.clone()).collect(),
    }))
}

/// Why a command was not run.
struct Skip(String);

/// `path/to/schema/v1` → the snapshot of the revision given by `--rev` (else the default).
fn resolve_placeholders(args: &[String]) -> Result<Vec<String>, Skip> {
    let v2 = args.iter().any(|a| a.starts_with(V2_SCHEMA_PLACEHOLDER));
    if !v2 && !args.iter().any(|a| a.starts_with(SCHEMA_PLACEHOLDER)) {
        return Ok(args.to_vec());
    }
    let (placeholder, folders): (&str, &[&str]) = if v2 {
        (V2_SCHEMA_PLACEHOLDER, &[common::V2_SNAPSHOT_FOLDER])
    } else {
        (SCHEMA_PLACEHOLDER, &common::SNAPSHOT_FOLDERS)
    };
    let rev = args
        .windows(2)
        .find(|w| w[0] == "--rev")
        .map(|w| w[1].clone())
        .unwrap_or_else(|| acp_manifest::revisions::DEFAULT.sha.to_string());
    let Some(shared) = common::shared() else {
        return Err(Skip("../shared is absent".into()));
    };
    let Some(snapshot) = folders
        .iter()
        .map(|folder| shared.join("upstream").join(folder).join(&rev))
        .find(|snapshot| snapshot.is_dir())
    else {
        return Err(Skip(format!("no upstream snapshot of {rev}")));
    };
    Ok(args
        .iter()
        .map(|a| match a.strip_prefix(placeholder) {
            Some(rest) => format!("{}{rest}", snapshot.display()),
            None => a.clone(),
        })
        .collect())
}

// ---- running -------------------------------------------------------------------------------

/// A scratch copy of the checkout, at `<a new temporary folder>/agentacp`: a command that
/// writes beside the checkout (the README's `scaffold-aip new … --path ..`) stays inside that
/// temporary folder, fresh on every run.
struct ScratchCheckout {
    _dir: tempfile::TempDir,
    checkout: PathBuf,
}

/// A copy of the repository as a fresh checkout would have it: the files git tracks and the
/// new ones it does not ignore (or, without git, everything but build output).
fn scratch_copy(root: &Path) -> ScratchCheckout {
    let dir = tempfile::tempdir().unwrap();
    let checkout = dir.path().join("agentacp");
    let listed = Command::new("git")
        .current_dir(root)
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .output()
        .ok()
        .filter(|o| o.status.success());
    match listed {
        Some(output) => {
            for name in output.stdout.split(|&b| b == 0).filter(|n| !n.is_empty()) {
                let relative = PathBuf::from(String::from_utf8_lossy(name).into_owned());
                let source = root.join(&relative);
                if source.is_file() {
                    let target = checkout.join(&relative);
                    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
                    std::fs::copy(&source, &target).unwrap();
                }
            }
        }
        None => copy_tree(root, &checkout),
    }
    ScratchCheckout { _dir: dir, checkout }
}

/// Copies a folder, leaving out version control, build output and installed packages.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let name = entry.file_name();
        if matches!(name.to_str(), Some(".git" | "target" | "node_modules" | ".venv")) {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            copy_tree(&path, &to.join(&name));
        } else if path.is_file() {
            std::fs::copy(&path, to.join(&name)).unwrap();
        }
    }
}

fn run_scaffold_aip(dir: &Path, env: &[(String, String)], args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scaffold-aip"))
        .current_dir(dir)
        .args(args)
        .env("NO_COLOR", "1")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("run scaffold-aip")
}

fn text_of(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn describe(output: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        output.status.code(),
        tail(&text_of(&output.stdout)),
        tail(&text_of(&output.stderr))
    )
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut kept = lines[lines.len().saturating_sub(30)..].join("\n");
    kept.push('\n');
    kept
}

/// The exit status and output a page implies, against what the command did.
fn check_run(command: &DocCommand, output: &Output) -> Option<String> {
    let code = output.status.code().unwrap_or(-1);
    if code != command.expected_exit {
        let hint = if command.expected_exit == 0 {
            " (if it fails on purpose, put `# exits N` on a line before it)"
        } else {
            ""
        };
        return Some(format!(
            "{}: `{}` exited {code}, the page implies {}{hint}\n{}",
            command.place(),
            command.text,
            command.expected_exit,
            describe(output)
        ));
    }
    let expected = command.expected_output.as_ref()?;
    let lines = |text: &str| -> Vec<String> {
        let mut lines: Vec<String> = text.lines().map(|l| l.trim_end().to_string()).collect();
        while lines.last().is_some_and(String::is_empty) {
            lines.pop();
        }
        lines
    };
    let (stdout, stderr) = (text_of(&output.stdout), text_of(&output.stderr));
    let candidates = [
        lines(&stdout),
        lines(&format!("{stdout}{stderr}")),
        lines(&format!("{stderr}{stdout}")),
    ];
    if candidates.iter().any(|actual| output_matches(expected, actual)) {
        return None;
    }
    Some(format!(
        "{}: `{}` printed something else than the page shows\n--- shown\n{}\n{}",
        command.place(),
        command.text,
        expected.join("\n"),
        describe(output)
    ))
}

/// `expected` against `actual`, line by line; a `...` line matches any number of lines.
fn output_matches(expected: &[String], actual: &[String]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((first, rest)) if first == "..." => (0..=actual.len()).any(|skip| output_matches(rest, &actual[skip..])),
        Some((first, rest)) => actual
            .split_first()
            .is_some_and(|(line, others)| line == first && output_matches(rest, others)),
    }
}

// ---- the table -----------------------------------------------------------------------------

/// `path::function` names a test function in that file.
fn test_exists(root: &Path, target: &str) -> Result<(), String> {
    let (path, function) = target
        .rsplit_once("::")
        .ok_or_else(|| format!("`{target}` is not `path/to/file.rs::function`"))?;
    let source = std::fs::read_to_string(root.join(path)).map_err(|e| format!("{path}: {e}"))?;
    let pattern = Regex::new(&format!(
        r"(?m)^[ \t]*(?:pub\s+)?(?:async\s+)?fn\s+{}\s*[(<]",
        regex::escape(function)
    ))
    .unwrap();
    let found = pattern
        .find(&source)
        .ok_or_else(|| format!("{path} has no function `{function}`"))?;
    // Its attributes: the lines just above it that start with `#[`, or are comments.
    let attributes: Vec<&str> = source[..found.start()]
        .lines()
        .rev()
        .map(str::trim)
        .take_while(|l| l.starts_with("#[") || l.starts_with("//") || l.ends_with(")]") || l.ends_with(']'))
        .collect();
    if !attributes.iter().any(|a| a.starts_with("#[") && a.contains("test")) {
        return Err(format!("{path}: `{function}` is not a test (no #[test] attribute)"));
    }
    Ok(())
}

// ---- editor examples -----------------------------------------------------------------------

/// An example crate: where its manifest is.
#[derive(Debug, Clone)]
struct Example {
    /// The absolute path of its `ACP.md`.
    manifest: PathBuf,
    /// The same, relative to the repository root, for messages.
    shown: String,
}

/// The example crates' binaries, by name (Cargo `[[bin]]` names, else the package name).
fn example_binaries(root: &Path) -> BTreeMap<String, Example> {
    let name = Regex::new(r#"(?m)^name\s*=\s*"([^"]+)""#).unwrap();
    let mut found = BTreeMap::new();
    for entry in std::fs::read_dir(root.join("examples")).unwrap().flatten() {
        let folder = entry.path();
        let (Ok(cargo), true) = (
            std::fs::read_to_string(folder.join("Cargo.toml")),
            folder.join("ACP.md").is_file(),
        ) else {
            continue;
        };
        // `name = "…"` lines of `[package]` and of every `[[bin]]`.
        let mut section = "";
        for line in cargo.lines() {
            let trimmed = line.trim();
            if trimmed.starts_with('[') {
                section = if trimmed == "[package]" || trimmed == "[[bin]]" {
                    "named"
                } else {
                    ""
                };
            } else if section == "named"
                && let Some(captures) = name.captures(trimmed)
            {
                let manifest = folder.join("ACP.md");
                let shown = manifest.strip_prefix(root).unwrap_or(&manifest).display().to_string();
                found.insert(captures[1].to_string(), Example { manifest, shown });
            }
        }
    }
    found
}

/// A manifest's frontmatter, as JSON.
fn frontmatter(manifest: &Path) -> Value {
    let text = std::fs::read_to_string(manifest).unwrap();
    let yaml: String = text
        .lines()
        .skip(1)
        .take_while(|l| l.trim_end() != "---")
        .map(|l| format!("{l}\n"))
        .collect();
    let options = serde_saphyr::options! { strict_booleans: true };
    serde_saphyr::from_str_with_options(&yaml, options).unwrap()
}

/// Every page's text, for "is this setting documented".
fn documented_text(root: &Path) -> String {
    doc_pages(root)
        .iter()
        .filter_map(|page| std::fs::read_to_string(root.join(page)).ok())
        .collect::<Vec<_>>()
        .join("\n")
}

fn basename(command: &str) -> &str {
    command.rsplit(['/', '\\']).next().unwrap_or(command)
}

/// Zed's `agent_servers`: each a custom agent starting an example server or bridge.
fn check_zed_settings(servers: &Value, binaries: &BTreeMap<String, Example>, documented: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(servers) = servers.as_object() else {
        return vec!["`agent_servers` is not an object".into()];
    };
    for (label, server) in servers {
        if server["type"] != "custom" {
            problems.push(format!("`{label}`: `type` should be \"custom\""));
        }
        let Some(command) = server["command"].as_str() else {
            problems.push(format!("`{label}`: no `command`"));
            continue;
        };
        let Some(example) = binaries.get(basename(command)) else {
            problems.push(format!(
                "`{label}`: `{command}` is not the binary of an example (known: {:?})",
                binaries.keys().collect::<Vec<_>>()
            ));
            continue;
        };
        let manifest = frontmatter(&example.manifest);
        let kind = manifest["kind"].as_str().unwrap_or_default();
        if !matches!(kind, "server" | "bridge") {
            problems.push(format!(
                "`{label}`: {} is `kind: {kind}`; an editor can start only servers and bridges",
                example.shown
            ));
        }
        let args = server.get("args");
        let strings = args.is_none_or(|a| a.as_array().is_some_and(|a| a.iter().all(Value::is_string)));
        if !strings {
            problems.push(format!("`{label}`: `args` is not a list of strings"));
        } else if let Some(Value::Array(args)) = args {
            let agent_behind_bridge = kind == "bridge" && args.first().and_then(Value::as_str) == Some("--");
            if !(args.is_empty() || agent_behind_bridge) {
                problems.push(format!(
                    "`{label}`: agentacp operators take no arguments (a bridge takes `-- AGENT …`): {args:?}"
                ));
            }
        }
        if let Some(env) = server.get("env") {
            let Some(env) = env.as_object() else {
                problems.push(format!("`{label}`: `env` is not an object"));
                continue;
            };
            for (key, value) in env {
                if !value.is_string() {
                    problems.push(format!("`{label}`: env `{key}` is not a string"));
                }
                if !key.starts_with("AGENTACP_") || !documented.contains(&format!("`{key}`")) {
                    problems.push(format!("`{label}`: env `{key}` is not a documented AGENTACP_* setting"));
                }
            }
        }
    }
    problems
}

/// A registry `agent.json`: the registry's rules, and the fields derived from the manifest of
/// the example whose binary it distributes.
fn check_agent_json(root: &Path, entry: &Value, binaries: &BTreeMap<String, Example>) -> Vec<String> {
    let mut problems = Vec::new();
    for field in ["id", "name", "version", "description", "distribution"] {
        if entry.get(field).is_none() {
            problems.push(format!("the registry requires `{field}`"));
        }
    }
    let text = |field: &str| entry[field].as_str().unwrap_or_default().to_string();
    if !Regex::new(r"^[a-z][a-z0-9-]*$").unwrap().is_match(&text("id")) {
        problems.push(format!("`id` `{}` does not fit the registry's pattern", text("id")));
    }
    if !Regex::new(r"^\d+\.\d+\.\d+$").unwrap().is_match(&text("version")) {
        problems.push(format!("`version` `{}` is not MAJOR.MINOR.PATCH", text("version")));
    }
    let platforms = [
        "darwin-aarch64",
        "darwin-x86_64",
        "linux-aarch64",
        "linux-x86_64",
        "windows-aarch64",
        "windows-x86_64",
    ];
    let Some(targets) = entry["distribution"]["binary"].as_object() else {
        problems.push("only `distribution.binary` is checked here, and there is none".into());
        return problems;
    };
    let mut manifests: BTreeMap<String, PathBuf> = BTreeMap::new();
    for (platform, target) in targets {
        if !platforms.contains(&platform.as_str()) {
            problems.push(format!("`{platform}` is not a registry platform"));
        }
        let archive = target["archive"].as_str().unwrap_or_default();
        if !archive.starts_with("https://") || !archive.contains(&format!("v{}", text("version"))) {
            problems.push(format!(
                "`{platform}`: the archive URL should be https and name version {}",
                text("version")
            ));
        }
        let cmd = target["cmd"].as_str().unwrap_or_default();
        // A Windows archive's command is the binary with `.exe`.
        let binary = basename(cmd);
        let binary = match platform.starts_with("windows-") {
            true => binary.strip_suffix(".exe").unwrap_or(binary),
            false => binary,
        };
        match binaries.get(binary) {
            Some(example) => {
                manifests.insert(example.shown.clone(), example.manifest.clone());
            }
            None => problems.push(format!("`{platform}`: `cmd` `{cmd}` is not the binary of an example")),
        }
    }
    if manifests.len() != 1 {
        problems.push(format!(
            "the binaries should be one example's, not {:?}",
            manifests.keys().collect::<Vec<_>>()
        ));
        return problems;
    }
    let (shown, manifest_path) = manifests.into_iter().next().unwrap();
    let manifest = frontmatter(&manifest_path);
    for field in ["id", "name", "version", "description"] {
        if entry[field] != manifest[field] {
            problems.push(format!(
                "`{field}` is {}, but {shown} says {}",
                entry[field], manifest[field]
            ));
        }
    }
    if !matches!(manifest["kind"].as_str(), Some("server" | "bridge")) {
        problems.push(format!(
            "{} is not an agent (server or bridge)",
            manifest_path.display()
        ));
    }
    let cargo = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    for field in ["repository", "license"] {
        let Some(value) = entry.get(field) else { continue };
        let line = format!("{field} = {value}");
        if !cargo.lines().any(|l| l.trim() == line) {
            problems.push(format!("`{field}` {value} is not the workspace's (Cargo.toml)"));
        }
    }
    problems
}
