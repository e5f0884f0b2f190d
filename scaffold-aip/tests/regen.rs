//! `scaffold-aip regen` over the upstream snapshots in `../shared/upstream/acp-schemas`
//! (skipped, saying so, when absent): `--out` and `--check`, the checked-in built-in modules
//! current, the errors of the command line, `explain` of a generated revision, and schema files
//! made to break it. The generator itself (its output over every snapshot, hostile schemas, the
//! slow compile check of every snapshot's module) is tested in `acp-wire-gen/tests/generator`.

mod common;

use std::process::Command;

use acp_wire_gen::input::MAX_INPUT_BYTES;
use serde_json::json;

/// The built-in revisions and the file each lives in.
const BUILT_IN: &[(&str, &str)] = &[
    (
        "0fc18323a9fdad4e5b4a20ec2f1645dde843fd9b",
        "agentacp-wire/src/rev_0fc18323.rs",
    ),
    (
        "b7f0005493b98de32fabee3e9540e2b64da68535",
        "agentacp-wire/src/rev_b7f00054.rs",
    ),
    (
        "d9072428412f97189bad8856f8ee6394a8dd52ef",
        "agentacp-wire/src/rev_d9072428.rs",
    ),
    (
        "272bf799f35a258c6a4107a0410ed361e83683d3",
        "agentacp-wire/src/rev_272bf799.rs",
    ),
];

/// The built-in protocol-version-2 modules, generated from `../shared/upstream/acp-schemas-v2`
/// (a commit's v2 schema; the same commit may have a v1 module above).
const BUILT_IN_V2: &[(&str, &str)] = &[(
    "272bf799f35a258c6a4107a0410ed361e83683d3",
    "agentacp-wire/src/rev_272bf799_v2.rs",
)];

/// The v2 snapshot of commit `sha`, when `../shared` has it (saying so when not).
fn v2_snapshot(sha: &str) -> Option<std::path::PathBuf> {
    let found = common::acp_v2_snapshots().into_iter().find(|dir| dir.ends_with(sha));
    if found.is_none() {
        eprintln!("skipped: v2 snapshot {sha} is absent");
    }
    found
}

fn scaffold_aip(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_scaffold-aip"))
        .args(args)
        .output()
        .expect("run scaffold-aip");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The built-in modules, and the early module the tests use, are what `regen` gives today.
#[test]
fn the_checked_in_built_in_modules_are_current() {
    let v1 = BUILT_IN
        .iter()
        .chain([&common::EARLY_MODULE])
        .map(|(sha, file)| (common::acp_snapshot(sha), file));
    let v2 = BUILT_IN_V2.iter().map(|(sha, file)| (v2_snapshot(sha), file));
    for (dir, file) in v1.chain(v2) {
        let Some(dir) = dir else { continue };
        let path = common::workspace().join(file);
        let (code, stdout, stderr) = scaffold_aip(&[
            "regen",
            "--schema",
            dir.to_str().unwrap(),
            "--out",
            path.to_str().unwrap(),
            "--check",
        ]);
        assert_eq!(
            code,
            0,
            "{file} is stale; run `scaffold-aip regen --schema {} --out {file}`\n{stdout}{stderr}",
            dir.display()
        );
        assert!(stdout.contains("up to date"), "{stdout}");
    }
}

#[test]
fn check_reports_a_stale_module_with_a_diff_and_exit_1() {
    let Some(dir) = common::acp_snapshot(BUILT_IN[0].0) else {
        return;
    };
    let temp = tempfile::tempdir().unwrap();
    let out = temp.path().join("wire.rs");
    let (code, _, stderr) = scaffold_aip(&[
        "regen",
        "--schema",
        dir.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let fresh = std::fs::read_to_string(&out).unwrap();
    std::fs::write(
        &out,
        fresh.replace("pub struct PromptRequest", "pub struct PromptRequestRenamed"),
    )
    .unwrap();
    let (code, stdout, _) = scaffold_aip(&[
        "regen",
        "--schema",
        dir.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--check",
    ]);
    assert_eq!(code, 1, "{stdout}");
    assert!(stdout.contains("out of date"), "{stdout}");
    assert!(stdout.contains("-pub struct PromptRequestRenamed"), "{stdout}");
    assert!(stdout.contains("+pub struct PromptRequest"), "{stdout}");
    assert!(stdout.contains("1 lines added, 1 removed"), "{stdout}");
    // --check never writes.
    assert!(std::fs::read_to_string(&out).unwrap().contains("PromptRequestRenamed"));
}

/// `regen --out` then `regen --check` of every revision of both folders (in process): the file
/// written is what `--check` expects, so CI can keep any pinned revision's module current.
#[test]
fn every_revision_is_up_to_date_right_after_regen() {
    let dirs = common::all_acp_snapshots();
    if dirs.is_empty() {
        eprintln!("skipped: ../shared/upstream/acp-schemas and acp-schemas-early are absent");
    }
    let temp = tempfile::tempdir().unwrap();
    for dir in dirs {
        let out = temp
            .path()
            .join(format!("{}.rs", dir.file_name().unwrap().to_string_lossy()));
        let run = |check: bool| {
            let mut args: Vec<std::ffi::OsString> = vec![
                "scaffold-aip".into(),
                "regen".into(),
                "--schema".into(),
                dir.clone().into_os_string(),
            ];
            args.extend(["--out".into(), out.clone().into_os_string()]);
            if check {
                args.push("--check".into());
            }
            let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
            let code = scaffold_aip::cli::run(args, &mut stdout, &mut stderr);
            (
                code,
                String::from_utf8(stdout).unwrap() + &String::from_utf8(stderr).unwrap(),
            )
        };
        let (code, output) = run(false);
        assert_eq!(code, 0, "{}: {output}", dir.display());
        let (code, output) = run(true);
        assert_eq!(code, 0, "{}: {output}", dir.display());
        assert!(output.contains("up to date"), "{}: {output}", dir.display());
    }
}

#[test]
fn regen_refuses_a_folder_without_a_rev_and_a_bad_rev() {
    let Some(dir) = common::acp_snapshot(BUILT_IN[0].0) else {
        return;
    };
    let temp = tempfile::tempdir().unwrap();
    std::fs::copy(dir.join("schema.json"), temp.path().join("schema.json")).unwrap();
    let (code, _, stderr) = scaffold_aip(&["regen", "--schema", temp.path().to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--rev"), "{stderr}");
    let (code, _, stderr) = scaffold_aip(&["regen", "--schema", temp.path().to_str().unwrap(), "--rev", "abc1234"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("not a full 40-hex-digit commit SHA"), "{stderr}");
    // Without meta.json the method table comes from the x-side / x-method annotations.
    let (code, stdout, stderr) = scaffold_aip(&[
        "regen",
        "--schema",
        temp.path().to_str().unwrap(),
        "--rev",
        BUILT_IN[0].0,
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("\"session/prompt\""), "no method table");
    let (code, _, stderr) = scaffold_aip(&["regen", "--schema", "/nonexistent/schema.json", "--rev", BUILT_IN[0].0]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("no such schema file"), "{stderr}");
}

/// Issue #20: where the schema binds no type to a method, `regen` names the method and what
/// it looked for, and `--method` names the types. The schema is an early revision's (whose
/// terminal requests carry no `x-method`) with `CreateTerminalRequest` renamed, so that no
/// union branch is made of the words of `terminal/create` any more.
#[test]
fn a_method_the_schema_does_not_bind_is_named_and_method_binds_it() {
    let sha = "624a266b804cebbdd35117300fa3164a4fd47442";
    let Some(dir) = common::acp_snapshot(sha) else {
        return;
    };
    let temp = tempfile::tempdir().unwrap();
    let schema = std::fs::read_to_string(dir.join("schema.json")).unwrap();
    assert!(
        schema.contains("\"CreateTerminalRequest\""),
        "the snapshot changed; pick another name"
    );
    std::fs::write(
        temp.path().join("schema.json"),
        schema.replace("CreateTerminalRequest", "SpawnShellRequest"),
    )
    .unwrap();
    std::fs::copy(dir.join("meta.json"), temp.path().join("meta.json")).unwrap();
    let folder = temp.path().to_str().unwrap();
    let out = temp.path().join("acp_wire.rs");
    let out = out.to_str().unwrap();

    let (code, stdout, stderr) = scaffold_aip(&["regen", "--schema", folder, "--rev", sha]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    for expected in [
        "method `terminal/create` (clientMethods) has no request or notification type",
        "no definition is annotated `x-method: \"terminal/create\"`",
        "no branch of AgentRequest, AgentNotification, ClientRequest, ClientNotification left unbound has a title made of its words (terminal, create)",
        "name its types with `--method terminal/create=ParamsType[:ResultType]`",
    ] {
        assert!(stderr.contains(expected), "missing `{expected}` in:\n{stderr}");
    }

    // Named, it is a request (its params are a branch of a request union) whose result is the
    // branch at the same position of the paired response union.
    let bind = ["--method", "terminal/create=SpawnShellRequest"];
    let with = |extra: &[&str]| {
        let mut args = vec!["regen", "--schema", folder, "--rev", sha, "--out", out];
        args.extend(bind);
        args.extend(extra);
        scaffold_aip(&args)
    };
    let (code, _, stderr) = with(&[]);
    assert_eq!(code, 0, "{stderr}");
    let module = std::fs::read_to_string(out).unwrap();
    assert!(
        module.contains(
            "impl __s::RequestParams for SpawnShellRequest {\n    const METHOD: &'static str = \"terminal/create\";\n    type Result = CreateTerminalResponse;"
        ),
        "{module}"
    );
    assert!(
        module.contains("TerminalCreate(SpawnShellRequest)"),
        "no AgentRequest variant"
    );
    let (code, stdout, stderr) = with(&["--check"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("up to date"), "{stdout}");
    // --check without the binding cannot generate, and says why.
    let (code, _, stderr) = scaffold_aip(&["regen", "--schema", folder, "--rev", sha, "--out", out, "--check"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("method `terminal/create` (clientMethods)"), "{stderr}");

    let (code, _, stderr) = scaffold_aip(&["regen", "--schema", folder, "--rev", sha, "--method", "terminal/create"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("expected METHOD=ParamsType[:ResultType]"), "{stderr}");
    let (code, _, stderr) = scaffold_aip(&[
        "regen",
        "--schema",
        folder,
        "--rev",
        sha,
        "--method",
        "terminal/create=NoSuchType",
    ]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("--method terminal/create=NoSuchType: the schema has no definition `NoSuchType`"),
        "{stderr}"
    );
}

/// Issue #13: a manifest pinned to a revision agentacp has no wire types for, in a crate that
/// `scaffold-aip regen` generated them into (as `docs/regen.md` says), is linted clean and
/// explained from that module: its full SHA, its protocol version, and — for a server that
/// declares them — the editor methods, checked against that revision's method table.
#[test]
fn explain_works_for_a_revision_generated_with_regen() {
    // v0.4.0: not built in.
    let sha = "83367966a8bc65aa0ec3469d8cc017108e0db452";
    let Some(schema) = common::acp_snapshot(sha) else {
        return;
    };
    assert!(
        acp_manifest::revisions::resolve(&sha[..8]).is_err(),
        "{sha} became built in; pick another"
    );
    let dir = tempfile::tempdir().unwrap();
    let crate_dir = dir.path().join("old-rev");
    std::fs::create_dir_all(crate_dir.join("src")).unwrap();
    let module = crate_dir.join("src/acp_wire.rs");
    let (code, _, stderr) = scaffold_aip(&[
        "regen",
        "--schema",
        schema.to_str().unwrap(),
        "--out",
        module.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    std::fs::write(
        crate_dir.join("OPERATOR.md"),
        "---\nname: Old\nid: old-op\npersona_summary: p\nversion: 0.1.0\nprofile: {role: r}\ngovernance: {autonomy: supervised}\n---\n",
    )
    .unwrap();
    std::fs::write(
        crate_dir.join("ACP.md"),
        "---\nname: old-rev\nid: old-rev\ndescription: d\nversion: 0.1.0\nkind: server\ntransport: stdio\nmetadata:\n  aip44:\n    acp_rev: \"83367966\"\n    tier: governance-aware\n    operator: ./OPERATOR.md\n    capabilities:\n      client:\n        terminal: true\n---\n",
    )
    .unwrap();
    let manifest = crate_dir.join("ACP.md");
    let (code, stdout, _) = scaffold_aip(&["lint", manifest.to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}");

    let (code, stdout, stderr) = scaffold_aip(&["explain", manifest.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(&format!(
            "acp_rev: {sha} (generated by scaffold-aip regen into acp_wire.rs), protocol version 1"
        )),
        "{stdout}"
    );
    assert!(stdout.contains("  terminal/create\n"), "{stdout}");
    let (_, json, _) = scaffold_aip(&["explain", "--format", "json", manifest.to_str().unwrap()]);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["initializeResponse"]["_meta"]["aip44"]["acp_rev"], sha);
    assert_eq!(json["initializeResponse"]["_meta"]["aip44"]["operator"], "old-op");
    assert_eq!(json["protocolVersion"], 1);
}

/// A revision for schemas made up by the tests.
const MADE_UP_REV: &str = "0123456789abcdef0123456789abcdef01234567";

/// Runs `regen` on `schema` written to a file; exit code and stderr.
fn regen_file(schema: &[u8]) -> (i32, String) {
    let temp = tempfile::tempdir().unwrap();
    let path = temp.path().join("schema.json");
    std::fs::write(&path, schema).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_scaffold-aip"))
        .args(["regen", "--schema", path.to_str().unwrap(), "--rev", MADE_UP_REV])
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A `$ref` out of the schema file (it panicked, exit 101, before) is named with where it is.
/// The generator's other refusals of references: `acp-wire-gen/tests/generator/hostile.rs`.
#[test]
fn a_ref_out_of_the_schema_is_named_not_a_panic() {
    // The smallest schema regen accepts, with a reference to another file.
    let remote = json!({"$defs": {
        "InitializeRequest": {"type": "object", "x-side": "agent", "x-method": "initialize",
                              "properties": {"thing": {"$ref": "#/$defs/Thing"}}},
        "InitializeResponse": {"type": "object", "x-side": "agent", "x-method": "initialize",
                               "properties": {"ok": {"type": "boolean"}}},
        "Thing": {"type": "object", "properties": {"name": {"type": "string"},
                                                   "more": {"$ref": "http://example.com/thing.json"}}}
    }});
    let (code, stderr) = regen_file(remote.to_string().as_bytes());
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(
            "the `$ref` `http://example.com/thing.json` at `/$defs/Thing/properties/more` points outside the schema"
        ),
        "{stderr}"
    );
}

/// A schema file one byte over the limit is refused and read no further (it is not even JSON).
/// The generator's other limits: `acp-wire-gen/tests/generator/hostile.rs`.
#[test]
fn a_schema_file_over_the_size_limit_is_not_read() {
    let (code, stderr) = regen_file(&vec![b' '; MAX_INPUT_BYTES as usize + 1]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("larger than 2 MiB, the most regen reads (an ACP schema is a few hundred KB)"),
        "{stderr}"
    );
}
