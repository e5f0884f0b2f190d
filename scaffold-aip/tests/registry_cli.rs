//! `scaffold-aip registry`: the ACP registry's `agent.json` from an operator's ACP.md, the
//! registry's rules (each made to fail on a crafted entry), the archives' SHA-256, and — when
//! the registry's own files are at hand — our output against its real `agent.schema.json` and
//! our rules against its real entries.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

fn run(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scaffold-aip"))
        .current_dir(dir)
        .arg("registry")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// `(rule, severity)` of every finding line on stderr (`PLACE: error[RULE]: …`).
fn findings(stderr: &str) -> Vec<(String, String)> {
    stderr
        .lines()
        .filter_map(|line| {
            let (_, rest) = line
                .split_once(": error[")
                .map(|(p, r)| (p, ("error", r)))
                .or_else(|| line.split_once(": warning[").map(|(p, r)| (p, ("warning", r))))?;
            let (level, rest) = rest;
            Some((rest.split(']').next()?.to_string(), level.to_string()))
        })
        .collect()
}

const TARGETS: [&str; 6] = [
    "darwin-aarch64",
    "darwin-x86_64",
    "linux-aarch64",
    "linux-x86_64",
    "windows-aarch64",
    "windows-x86_64",
];

/// A release URL of `name` `version` for `target`, GitHub-style.
fn url(name: &str, version: &str, target: &str) -> String {
    format!("https://github.com/example/{name}/releases/download/v{version}/{name}-{target}.tar.gz")
}

/// One fake archive a target in `dir`, and the `--archive` flags naming them.
fn archives(dir: &Path, name: &str, version: &str, targets: &[&str]) -> Vec<String> {
    targets
        .iter()
        .map(|target| {
            let file = dir.join(format!("{name}-{target}.tar.gz"));
            std::fs::write(&file, format!("archive of {name} for {target}")).unwrap();
            format!("{target}={},file={}", url(name, version, target), file.display())
        })
        .collect()
}

fn example_manifests() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(common::workspace().join("examples"))
        .unwrap()
        .map(|entry| entry.unwrap().path().join("ACP.md"))
        .filter(|path| path.is_file())
        .collect();
    found.sort();
    assert!(found.len() >= 4, "examples: {found:?}");
    found
}

/// Builds the entry for an example with every target and every optional field; `None` for a
/// client (refused, checked here).
fn entry_for(manifest: &Path, scratch: &Path) -> Option<(Value, acp_manifest::manifest::Manifest)> {
    let checked = acp_manifest::manifest::check_file(manifest).unwrap();
    let parsed = checked.manifest.clone().unwrap();
    let flags = archives(scratch, &parsed.name, &parsed.version, &TARGETS);
    let mut args: Vec<&str> = vec![
        manifest.to_str().unwrap(),
        "--allow-unbuilt-targets",
        "--license",
        "MIT OR Apache-2.0",
    ];
    args.extend([
        "--repository",
        "https://github.com/example/agentacp",
        "--author",
        "Example Author",
    ]);
    for flag in &flags {
        args.extend(["--archive", flag.as_str()]);
    }
    let output = run(scratch, &args);
    let stderr = text(&output.stderr);
    let found = findings(&stderr);
    if parsed.kind == acp_manifest::manifest::Kind::Client {
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(found.contains(&("kind".into(), "error".into())), "{stderr}");
        assert!(output.stdout.is_empty(), "nothing written for a client");
        return None;
    }
    // What is left: the registry's auth check on the running agent (the examples declare no
    // sign-in method) and the warnings for the Windows targets: x86_64 tested under Wine
    // only, ARM let through by the flag.
    let errors: Vec<_> = found.iter().filter(|(_, level)| level == "error").collect();
    assert_eq!(errors, [&("auth-methods".to_string(), "error".to_string())], "{stderr}");
    for rule in ["wine-only", "unbuilt-target"] {
        assert_eq!(
            found
                .iter()
                .filter(|(r, level)| r == rule && level == "warning")
                .count(),
            1,
            "{rule}: {stderr}"
        );
    }
    assert!(
        stderr.contains(&format!("{}:", manifest.display())),
        "the auth finding names the manifest: {stderr}"
    );
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    Some((serde_json::from_slice(&output.stdout).unwrap(), parsed))
}

#[test]
fn every_example_server_and_bridge_gets_a_full_agent_json() {
    let scratch = tempfile::tempdir().unwrap();
    for manifest in example_manifests() {
        let Some((entry, parsed)) = entry_for(&manifest, scratch.path()) else {
            continue;
        };
        let mut binary = serde_json::Map::new();
        for target in TARGETS {
            let exe = if target.starts_with("windows") { ".exe" } else { "" };
            binary.insert(
                target.into(),
                json!({"archive": url(&parsed.name, &parsed.version, target), "cmd": format!("./{}{exe}", parsed.name)}),
            );
        }
        let expected = json!({
            "id": parsed.id, "name": parsed.name, "version": parsed.version, "description": parsed.description,
            "repository": "https://github.com/example/agentacp", "authors": ["Example Author"],
            "license": "MIT OR Apache-2.0", "distribution": {"binary": binary},
        });
        assert_eq!(entry, expected, "{}", manifest.display());
        let keys: Vec<&String> = entry.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "id",
                "name",
                "version",
                "description",
                "repository",
                "authors",
                "license",
                "distribution"
            ]
        );
    }
}

/// A registry entry that passes every rule (npx: no Windows binary needed).
fn good_entry() -> Value {
    json!({
        "id": "my-agent", "name": "My agent", "version": "1.2.3", "description": "Does things.",
        "repository": "https://github.com/example/my-agent", "authors": ["Me"], "license": "MIT",
        "distribution": {"npx": {"package": "@example/my-agent@1.2.3", "args": ["--acp"]}},
    })
}

/// Writes `entry` as `<dir>/<id folder>/agent.json` and runs `--check` on it.
fn check(dir: &Path, entry: &Value, extra: &[&str]) -> Output {
    let folder = dir.join(
        entry["id"]
            .as_str()
            .filter(|id| !id.is_empty() && !id.contains('/'))
            .unwrap_or("entry"),
    );
    std::fs::create_dir_all(&folder).unwrap();
    let file = folder.join("agent.json");
    std::fs::write(&file, serde_json::to_string_pretty(entry).unwrap()).unwrap();
    run(dir, &[&["--check", file.to_str().unwrap()], extra].concat())
}

fn with(mut entry: Value, pointer: &str, value: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let parent = entry.pointer_mut(parent).unwrap().as_object_mut().unwrap();
    if value.is_null() {
        parent.remove(key);
    } else {
        parent.insert(key.to_string(), value);
    }
    entry
}

fn binaries(version: &str, targets: &[&str]) -> Value {
    let map: serde_json::Map<String, Value> = targets
        .iter()
        .map(|t| {
            (
                t.to_string(),
                json!({"archive": url("my-agent", version, t), "cmd": "./my-agent"}),
            )
        })
        .collect();
    Value::Object(map)
}

#[test]
fn every_registry_rule_fails_on_a_crafted_entry() {
    let dir = tempfile::tempdir().unwrap();
    let passed = check(dir.path(), &good_entry(), &[]);
    assert_eq!(passed.status.code(), Some(0), "{}", text(&passed.stderr));
    assert!(text(&passed.stderr).contains("the registry's rules hold"));
    let all_but_windows = binaries("1.2.3", &TARGETS[..4]);
    let cases: Vec<(&str, Value, &str)> = vec![
        ("no version", with(good_entry(), "/version", Value::Null), "required"),
        (
            "no distribution",
            with(good_entry(), "/distribution", Value::Null),
            "required",
        ),
        ("a number for a name", with(good_entry(), "/name", json!(7)), "type"),
        (
            "an id with a capital",
            with(good_entry(), "/id", json!("My-agent")),
            "id",
        ),
        (
            "an id starting with a digit",
            with(good_entry(), "/id", json!("1agent")),
            "id",
        ),
        ("an empty name", with(good_entry(), "/name", json!(" ")), "empty"),
        (
            "an empty description",
            with(good_entry(), "/description", json!("")),
            "empty",
        ),
        (
            "a pre-release version",
            with(good_entry(), "/version", json!("1.2.3-rc.1")),
            "version",
        ),
        (
            "a two-part version",
            with(good_entry(), "/version", json!("1.2")),
            "version",
        ),
        (
            "a repository that is no URL",
            with(good_entry(), "/repository", json!("example/my-agent")),
            "repository",
        ),
        (
            "authors as a string",
            with(good_entry(), "/authors", json!("Me")),
            "type",
        ),
        (
            "an empty distribution",
            with(good_entry(), "/distribution", json!({})),
            "distribution",
        ),
        (
            "an unknown distribution",
            with(good_entry(), "/distribution/docker", json!({"image": "x"})),
            "distribution",
        ),
        (
            "an empty binary map",
            with(good_entry(), "/distribution/binary", json!({})),
            "distribution",
        ),
        (
            "an unknown target",
            with(good_entry(), "/distribution/binary", json!({"linux-riscv64": {}})),
            "target",
        ),
        (
            "binaries without windows",
            with(good_entry(), "/distribution/binary", all_but_windows.clone()),
            "all-systems",
        ),
        (
            "an ARM windows binary",
            with(good_entry(), "/distribution/binary", binaries("1.2.3", &TARGETS)),
            "unbuilt-target",
        ),
        (
            "a target without cmd",
            with(
                with(good_entry(), "/distribution/binary", all_but_windows.clone()),
                "/distribution/binary/linux-x86_64/cmd",
                Value::Null,
            ),
            "required",
        ),
        (
            "an empty cmd",
            with(
                with(good_entry(), "/distribution/binary", all_but_windows.clone()),
                "/distribution/binary/linux-x86_64/cmd",
                json!(""),
            ),
            "cmd",
        ),
        (
            "a sha256 in a target",
            with(
                with(good_entry(), "/distribution/binary", all_but_windows.clone()),
                "/distribution/binary/linux-x86_64/sha256",
                json!("ab"),
            ),
            "unknown-key",
        ),
        (
            "args that are no list",
            with(good_entry(), "/distribution/npx/args", json!("--acp")),
            "type",
        ),
        (
            "env that is no map",
            with(good_entry(), "/distribution/npx/env", json!(["A=1"])),
            "type",
        ),
        (
            "an archive that is no URL",
            with(
                with(good_entry(), "/distribution/binary", all_but_windows.clone()),
                "/distribution/binary/linux-x86_64/archive",
                json!("my-agent.tar.gz"),
            ),
            "archive",
        ),
        (
            "an archive of /latest/",
            with(
                with(good_entry(), "/distribution/binary", all_but_windows.clone()),
                "/distribution/binary/linux-x86_64/archive",
                json!("https://github.com/e/m/releases/latest/download/m.tar.gz"),
            ),
            "archive-version",
        ),
        (
            "an archive of another version",
            with(good_entry(), "/distribution/binary", binaries("1.2.4", &TARGETS[..4])),
            "archive-version",
        ),
        (
            "a package without a name",
            with(good_entry(), "/distribution/npx/package", Value::Null),
            "required",
        ),
        (
            "an empty package",
            with(good_entry(), "/distribution/uvx", json!({"package": ""})),
            "package",
        ),
        (
            "an npx @latest",
            with(
                good_entry(),
                "/distribution/npx/package",
                json!("@example/my-agent@latest"),
            ),
            "package-version",
        ),
        (
            "an npx of another version",
            with(good_entry(), "/distribution/npx/package", json!("my-agent@1.0.0")),
            "package-version",
        ),
        (
            "a uvx of another version",
            with(good_entry(), "/distribution/uvx", json!({"package": "my-agent==1.0.0"})),
            "package-version",
        ),
        ("an entry that is a list", json!([good_entry()]), "type"),
    ];
    for (what, entry, rule) in cases {
        let output = check(dir.path(), &entry, &[]);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{what}: {stderr}");
        assert!(
            findings(&stderr).contains(&(rule.to_string(), "error".to_string())),
            "{what}: expected error[{rule}]:\n{stderr}"
        );
    }
    // Warnings only: an unknown top-level key, a folder not named after the id.
    let extra = with(good_entry(), "/website", json!("https://example.com"));
    let output = check(dir.path(), &extra, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(findings(&text(&output.stderr)).contains(&("unknown-key".into(), "warning".into())));
    let elsewhere = dir.path().join("not-the-id");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(elsewhere.join("agent.json"), good_entry().to_string()).unwrap();
    let output = run(dir.path(), &["--check", "not-the-id/agent.json"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(findings(&text(&output.stderr)).contains(&("folder".into(), "warning".into())));
    // The ARM Windows rule is a warning when allowed; the registry's own rules still apply.
    let windows = with(good_entry(), "/distribution/binary", binaries("1.2.3", &TARGETS));
    let output = check(dir.path(), &windows, &["--allow-unbuilt-targets"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        findings(&stderr).contains(&("unbuilt-target".into(), "warning".into())),
        "{stderr}"
    );
    assert!(stderr.contains("docs/crates.md#platforms"), "{stderr}");
    // x86_64 Windows alone needs no flag: a warning that it is tested under Wine only.
    let x86_64 = ["darwin-x86_64", "linux-x86_64", "windows-x86_64"];
    let windows = with(good_entry(), "/distribution/binary", binaries("1.2.3", &x86_64));
    let output = check(dir.path(), &windows, &[]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(
        findings(&stderr),
        [("wine-only".to_string(), "warning".to_string())],
        "{stderr}"
    );
}

#[test]
fn icons_are_checked_beside_the_entry_or_named() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("my-agent");
    std::fs::create_dir_all(&folder).unwrap();
    let good = r#"<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 16 16"><path fill="currentColor" d="M0 0h16v16H0z"/></svg>"#;
    std::fs::write(folder.join("icon.svg"), good).unwrap();
    let output = check(dir.path(), &good_entry(), &[]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let bad = [
        (
            r#"<svg width="24" height="24"><path fill="currentColor"/></svg>"#,
            "must be 16×16",
        ),
        (
            r#"<svg width="16" height="12"><path fill="currentColor"/></svg>"#,
            "must be square",
        ),
        (
            r##"<svg viewBox="0 0 16 16"><path fill="#FF0000" stroke="currentColor"/></svg>"##,
            "fill=\"#FF0000\"",
        ),
        (
            r#"<svg viewBox="0 0 16 16"><path fill="currentColor" style="stroke: blue"/></svg>"#,
            "style stroke: blue",
        ),
        (
            r#"<svg viewBox="0 0 16 16"><path fill="none"/></svg>"#,
            "never uses currentColor",
        ),
        (
            r#"<svg><path fill="currentColor"/></svg>"#,
            "neither width and height nor a viewBox",
        ),
    ];
    for (svg, problem) in bad {
        std::fs::write(folder.join("icon.svg"), svg).unwrap();
        let output = check(dir.path(), &good_entry(), &[]);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{svg}: {stderr}");
        assert!(
            stderr.contains("error[icon]") && stderr.contains(problem),
            "{svg}: {stderr}"
        );
    }
    // `--icon` when writing: the same rules, the entry still written (the icon is its own file).
    let manifest = common::workspace().join("examples/echo-server/ACP.md");
    let icon = folder.join("icon.svg");
    let output = run(
        dir.path(),
        &[
            manifest.to_str().unwrap(),
            "--npx",
            "echo-server@0.1.0",
            "--icon",
            icon.to_str().unwrap(),
        ],
    );
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("error[icon]: the <svg> element has neither"),
        "{stderr}"
    );
    assert!(!output.stdout.is_empty(), "{stderr}");
}

/// A copy of the echo-server example with its version (or id) replaced.
fn echo_copy(dir: &Path, from: &str, to: &str) -> PathBuf {
    let source = common::workspace().join("examples/echo-server");
    let folder = dir.join("echo-server");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::copy(source.join("OPERATOR.md"), folder.join("OPERATOR.md")).unwrap();
    let manifest = std::fs::read_to_string(source.join("ACP.md")).unwrap();
    assert!(manifest.contains(from), "{from}");
    std::fs::write(folder.join("ACP.md"), manifest.replacen(from, to, 1)).unwrap();
    folder.join("ACP.md")
}

/// The line a manifest's `key:` is on (1-based).
fn line_of(manifest: &Path, key: &str) -> usize {
    let text = std::fs::read_to_string(manifest).unwrap();
    1 + text
        .lines()
        .position(|line| line.starts_with(&format!("{key}:")))
        .unwrap()
}

#[test]
fn a_manifest_value_the_registry_refuses_is_reported_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = echo_copy(dir.path(), "version: 0.1.0", "version: 0.1.0-rc.1");
    let output = run(dir.path(), &[manifest.to_str().unwrap(), "--npx", "echo-server@0.1.0"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let at = format!(
        "{}:{}:10: error[version]: the version `0.1.0-rc.1`",
        manifest.display(),
        line_of(&manifest, "version")
    );
    assert!(stderr.contains(&at), "expected `{at}` in:\n{stderr}");
    assert!(stderr.contains("agent.json not written"), "{stderr}");
    assert!(output.stdout.is_empty());

    let manifest = echo_copy(&dir.path().join("id"), "id: echo-server", "id: 9echo");
    let output = run(dir.path(), &[manifest.to_str().unwrap(), "--npx", "echo-server@0.1.0"]);
    let stderr = text(&output.stderr);
    let at = format!("{}:{}:5: error[id]:", manifest.display(), line_of(&manifest, "id"));
    assert!(stderr.contains(&at), "expected `{at}` in:\n{stderr}");
}

#[test]
fn a_manifest_that_declares_a_sign_in_method_passes_the_auth_methods_rule() {
    let dir = tempfile::tempdir().unwrap();
    let methods = [
        "      - id: browser\n        type: agent\n        name: Sign in\n",
        "      - id: login\n        type: terminal\n        name: Sign in in a terminal\n        args: [--login]\n",
    ];
    for (case, auth) in [
        ("agent", methods[0].to_string()),
        ("terminal", methods[1].to_string()),
        ("both", methods.concat()),
    ] {
        let declared = format!("operator: ./OPERATOR.md\n  agentacp:\n    auth:\n{auth}");
        let manifest = echo_copy(&dir.path().join(case), "operator: ./OPERATOR.md\n", &declared);
        let output = run(dir.path(), &[manifest.to_str().unwrap(), "--npx", "echo-server@0.1.0"]);
        let stderr = text(&output.stderr);
        assert!(findings(&stderr).is_empty(), "{case}: {stderr}");
        assert_eq!(output.status.code(), Some(0), "{case}: {stderr}");
        let entry: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(entry["distribution"]["npx"]["package"], "echo-server@0.1.0");
    }

    // Without one, the rule names the manifest and says what to declare.
    let manifest = echo_copy(&dir.path().join("none"), "id: echo-server", "id: echo-server");
    let output = run(dir.path(), &[manifest.to_str().unwrap(), "--npx", "echo-server@0.1.0"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("error[auth-methods]"), "{stderr}");
    assert!(stderr.contains("metadata.agentacp.auth"), "{stderr}");
}

#[test]
fn the_sha256_of_each_archive_is_computed_from_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = common::workspace().join("examples/echo-server/ACP.md");
    std::fs::write(dir.path().join("echo-server-linux-x86_64.tar.gz"), "abc").unwrap();
    let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
    let linux = format!(
        "linux-x86_64={},file=echo-server-linux-x86_64.tar.gz",
        url("echo-server", "0.1.0", "linux-x86_64")
    );
    let darwin = format!(
        "darwin-aarch64={},sha256={}",
        url("echo-server", "0.1.0", "darwin-aarch64"),
        "AB".repeat(32)
    );
    let windows = format!("windows-x86_64={}", url("echo-server", "0.1.0", "windows-x86_64"));
    let args = [
        manifest.to_str().unwrap(),
        "--allow-unbuilt-targets",
        "--sums",
        "SHA256SUMS",
        "--out",
        "agent.json",
    ];
    let output = run(
        dir.path(),
        &[
            &args[..],
            &["--archive", &linux, "--archive", &darwin, "--archive", &windows],
        ]
        .concat(),
    );
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "sha256 {abc}  {}",
            url("echo-server", "0.1.0", "linux-x86_64")
        )),
        "{stderr}"
    );
    let sums = std::fs::read_to_string(dir.path().join("SHA256SUMS")).unwrap();
    let expected = format!(
        "{}  echo-server-darwin-aarch64.tar.gz\n{abc}  echo-server-linux-x86_64.tar.gz\n",
        "ab".repeat(32)
    );
    assert_eq!(sums, expected);
    let entry: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("agent.json")).unwrap()).unwrap();
    assert_eq!(
        entry["distribution"]["binary"]["windows-x86_64"]["cmd"],
        "./echo-server.exe"
    );
    assert!(
        entry["distribution"]["binary"]["linux-x86_64"].get("sha256").is_none(),
        "the schema has no sha256"
    );

    // A sum that does not match the file, a missing file, a bad target: usage errors.
    let wrong = format!("{linux},sha256={}", "0".repeat(64));
    for (flag, says) in [
        (wrong.as_str(), "the file's SHA-256 is ba7816bf"),
        (
            "linux-x86_64=https://e.com/v0.1.0/a.tar.gz,file=absent.tar.gz",
            "absent.tar.gz",
        ),
        (
            "linux-riscv64=https://e.com/a.tar.gz",
            "`linux-riscv64` is not a registry target",
        ),
        (
            "linux-x86_64=https://e.com/a,b.tar.gz",
            "a comma in the URL is written %2C",
        ),
        ("linux-x86_64=https://e.com/a.tar.gz,sha256=xyz", "is not 64 hex digits"),
    ] {
        let output = run(dir.path(), &[manifest.to_str().unwrap(), "--archive", flag]);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{flag}: {stderr}");
        assert!(stderr.contains(says), "{flag}: {stderr}");
    }
    let output = run(
        dir.path(),
        &[manifest.to_str().unwrap(), "--archive", &linux, "--archive", &linux],
    );
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("--archive names `linux-x86_64` twice"));
}

/// A device, a FIFO or an oversized file is refused in words, not read (nor waited on).
#[test]
fn files_that_are_not_small_regular_files_are_refused_without_reading_them() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let big = dir.path().join("big.json");
    std::fs::File::create(&big).unwrap().set_len(3 << 30).unwrap();
    let manifest = common::workspace().join("examples/echo-server/ACP.md");
    let fifo_archive = format!("linux-x86_64=https://e.com/v0.1.0/a.tar.gz,file={}", fifo.display());
    let cases: Vec<Vec<&str>> = vec![
        vec!["--check", "/dev/zero"],
        vec!["--check", fifo.to_str().unwrap()],
        vec!["--check", big.to_str().unwrap()],
        vec![
            manifest.to_str().unwrap(),
            "--npx",
            "echo-server@0.1.0",
            "--icon",
            fifo.to_str().unwrap(),
        ],
        vec![manifest.to_str().unwrap(), "--archive", &fifo_archive],
    ];
    for args in cases {
        let output = common::run_bounded(dir.path(), &[&["registry"], &args[..]].concat());
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("not a regular file") || stderr.contains("bytes, more than"),
            "{args:?}: {stderr}"
        );
    }
}

/// The registry's `agent.schema.json`: the file `AGENTACP_REGISTRY_SCHEMA` names, else read
/// from the mirror of `agentclientprotocol/registry` when this machine has one; `None`
/// otherwise.
fn registry_schema() -> Option<Value> {
    if let Some(path) = std::env::var_os("AGENTACP_REGISTRY_SCHEMA") {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("AGENTACP_REGISTRY_SCHEMA: {e}"));
        return Some(serde_json::from_str(&text).unwrap());
    }
    let shown = mirror_file("agent.schema.json")?;
    Some(serde_json::from_str(&shown).unwrap())
}

const MIRROR: &str = "/work/.mirror/agentclientprotocol+registry/repo";

/// A file of the registry mirror's newest commit (`git show HEAD:PATH`), when there is one.
fn mirror_file(path: &str) -> Option<String> {
    if !Path::new(MIRROR).exists() {
        return None;
    }
    let output = Command::new("git")
        .args(["-C", MIRROR, "show", &format!("HEAD:{path}")])
        .output()
        .ok()?;
    output.status.success().then(|| text(&output.stdout))
}

/// Our output for every example against the registry's REAL `agent.schema.json`. CI cannot
/// fetch the registry, so this is not a required peer (it never fails for the schema's
/// absence, also not under AGENTACP_REQUIRE_PEERS): set `AGENTACP_REGISTRY_SCHEMA` to the file
/// (or have the mirror at the path above) to run it; otherwise it says "skipped".
#[test]
fn our_agent_json_is_valid_against_the_registrys_own_schema() {
    let Some(schema) = registry_schema() else {
        eprintln!("skipped: no registry schema (set AGENTACP_REGISTRY_SCHEMA to agent.schema.json)");
        return;
    };
    let validator = jsonschema::validator_for(&schema).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let mut validated = 0;
    for manifest in example_manifests() {
        let Some((entry, _)) = entry_for(&manifest, scratch.path()) else {
            continue;
        };
        let errors: Vec<String> = validator
            .iter_errors(&entry)
            .map(|e| format!("{e} at {}", e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:?}", manifest.display());
        validated += 1;
    }
    assert!(validated >= 3);
    // And the schema refuses what our rules refuse where it can tell (a closed target).
    let with_sum = with(
        with(good_entry(), "/distribution/binary", binaries("1.2.3", &TARGETS)),
        "/distribution/binary/linux-x86_64/sha256",
        json!("ab"),
    );
    assert!(!validator.is_valid(&with_sum));
}

/// Our rules against the registry's real entries (listed ones, not `_not_yet_unsupported`),
/// each checked in a folder named after it with its icon: every one passes, Windows targets
/// allowed (they are not agentacp operators). Skipped without the mirror, like the schema test.
#[test]
fn the_registrys_own_entries_pass_our_rules() {
    let Some(listing) = mirror_listing() else {
        eprintln!("skipped: no registry mirror at {MIRROR}");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for id in listing {
        let Some(entry) = mirror_file(&format!("{id}/agent.json")) else {
            continue;
        };
        let folder = dir.path().join(&id);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("agent.json"), entry).unwrap();
        if let Some(icon) = mirror_file(&format!("{id}/icon.svg")) {
            std::fs::write(folder.join("icon.svg"), icon).unwrap();
        }
        let output = run(
            dir.path(),
            &["--check", &format!("{id}/agent.json"), "--allow-unbuilt-targets"],
        );
        assert_eq!(output.status.code(), Some(0), "{id}: {}", text(&output.stderr));
        checked += 1;
    }
    assert!(checked >= 5, "only {checked} entries");
}

fn mirror_listing() -> Option<Vec<String>> {
    if !Path::new(MIRROR).exists() {
        return None;
    }
    let output = Command::new("git")
        .args(["-C", MIRROR, "ls-tree", "--name-only", "HEAD"])
        .output()
        .ok()?;
    let names = text(&output.stdout);
    Some(
        names
            .lines()
            .filter(|n| !n.starts_with(['.', '_']) && !n.contains('.'))
            .map(str::to_string)
            .collect(),
    )
}
