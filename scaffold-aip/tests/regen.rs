//! `scaffold-aip regen` over the upstream snapshots in `../shared/upstream/acp-schemas`
//! (skipped, saying so, when absent): deterministic output, no upstream prose without
//! `--docs`, the checked-in built-in modules current, and every snapshot's module compiling.

mod common;

use std::process::Command;

use acp_wire_gen::{Options, SchemaFiles, generate_files};

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
];

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

/// A module of an early revision (26 August 2025, no `x-method` at all) checked in for
/// `agentacp/tests/early_revision.rs`, with the messages of that era it round-trips.
const EARLY_MODULE: (&str, &str) = (
    "e1c94557c8ad4bb18bdeb8430e799c9cfaadd8ac",
    "agentacp/tests/wire-early/rev_e1c94557.rs",
);
/// The messages of [`EARLY_MODULE`]'s revision.
const EARLY_CORPUS: &str = "agentacp/tests/wire-early/e1c94557.json";

/// The built-in modules, and the early module the tests use, are what `regen` gives today.
#[test]
fn the_checked_in_built_in_modules_are_current() {
    for (sha, file) in BUILT_IN.iter().chain([&EARLY_MODULE]) {
        let Some(dir) = common::acp_snapshot(sha) else { continue };
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

/// The lines of the schema's descriptions long enough (four words or more) not to occur in
/// generated code by chance.
fn description_lines(schema: &serde_json::Value, lines: &mut Vec<String>) {
    match schema {
        serde_json::Value::Object(object) => {
            for (key, value) in object {
                match (key.as_str(), value) {
                    ("description", serde_json::Value::String(text)) => lines.extend(
                        text.lines()
                            .map(str::trim)
                            .filter(|line| line.split_whitespace().count() >= 4)
                            .map(str::to_string),
                    ),
                    _ => description_lines(value, lines),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|item| description_lines(item, lines)),
        _ => {}
    }
}

#[test]
fn output_is_deterministic_headed_and_free_of_upstream_prose() {
    let dirs = common::all_acp_snapshots();
    if dirs.is_empty() {
        eprintln!("skipped: ../shared/upstream/acp-schemas and acp-schemas-early are absent");
    }
    for dir in dirs {
        let files = SchemaFiles::locate(&dir).unwrap();
        let rev = files.rev_from_path().unwrap();
        let options = Options::new(rev.clone());
        let first = generate_files(&files, &options).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let second = generate_files(&files, &options).unwrap();
        assert_eq!(first.source, second.source, "{}: two runs differ", dir.display());
        let header = format!("// generated by scaffold-aip regen from ACP rev {rev}; do not edit\n");
        assert!(first.source.starts_with(&header), "{}", dir.display());
        // No description text without --docs, and some with it.
        let schema: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&files.schema).unwrap()).unwrap();
        let mut lines = Vec::new();
        description_lines(&schema, &mut lines);
        for line in &lines {
            assert!(
                !first.source.contains(line.as_str()),
                "{}: upstream prose without --docs: {line}",
                dir.display()
            );
        }
        let with_docs = generate_files(&files, &Options { docs: true, ..options }).unwrap();
        assert!(
            lines.is_empty() || lines.iter().any(|line| with_docs.source.contains(line.as_str())),
            "{}: --docs carries no descriptions",
            dir.display()
        );
    }
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

/// The hand-written messages `agentacp/tests/early_revision.rs` round-trips are of their era:
/// each is valid, or not, against its revision's schema as the corpus says. The type a case
/// is checked against is the one `regen` binds to its method (a `null` result: `type: null`).
#[test]
fn the_early_corpus_agrees_with_its_revisions_schema() {
    let Some(dir) = common::acp_snapshot(EARLY_MODULE.0) else {
        return;
    };
    let read = |path: &std::path::Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let schema = read(&dir.join("schema.json"));
    let table = acp_wire_gen::MethodTable::read(&schema, &read(&dir.join("meta.json")), &[]).unwrap();
    let corpus = read(&common::workspace().join(EARLY_CORPUS));
    assert_eq!(corpus["rev"], EARLY_MODULE.0);
    let mut disagreements = Vec::new();
    for case in corpus["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let method = table
            .get(case["method"].as_str().unwrap())
            .unwrap_or_else(|| panic!("{name}: no such method"));
        let ty = match case["part"].as_str().unwrap() {
            "result" => method.response.as_deref(),
            _ => method.params(),
        }
        .unwrap_or_else(|| panic!("{name}: no type"));
        let target = if table.null_results.contains(ty) {
            serde_json::json!({"type": "null"})
        } else {
            serde_json::json!({"$ref": format!("#/$defs/{ty}"), "$defs": schema["$defs"]})
        };
        let valid = jsonschema::validator_for(&target).unwrap().is_valid(&case["json"]);
        if case["valid"] != valid {
            disagreements.push(format!("{name} ({ty}): the schema says valid = {valid}"));
        }
        if let Some(out) = case.get("out") {
            assert!(
                jsonschema::validator_for(&target).unwrap().is_valid(out),
                "{name}: what our types write back is not valid"
            );
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
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

/// The operator crates of the slow test: a manifest folder of its own (lint wants `name` to be
/// the folder's) and the operator's Rust, on the module `rev_<first 8>`.
struct Operator {
    folder: String,
    manifest: String,
    rust: String,
}

/// A basic server on `module` (pinned to `rev`): `#[acp_operator]` types its handler trait with
/// the module's `PromptRequest` and `StopReason` and decodes through its `ClientRequest`.
fn server_on(module: &str, rev: &str) -> Operator {
    let folder = format!("server-{}", &rev[..8]);
    let name = format!("Server{}", rev[..8].to_uppercase());
    Operator {
        manifest: format!(
            "---\nname: {folder}\nid: {folder}\ndescription: A basic server on a regen module.\nversion: 0.1.0\nkind: server\n\
             transport: stdio\nmetadata:\n  aip44:\n    acp_rev: {rev}\n    tier: basic\n    operator: ../OPERATOR.md\n---\n"
        ),
        rust: format!(
            "#[::agentacp::acp_operator(manifest = \"operators/{folder}/ACP.md\", wire = crate::{module})]\n\
             pub struct {name};\n\
             impl {name}Server for {name} {{\n\
                 async fn prompt(&self, _: &mut ::agentacp::server::Turn<'_, ::agentacp::tier::Basic>, _: crate::{module}::PromptRequest)\n\
                     -> ::agentacp::Result<crate::{module}::StopReason> {{\n\
                     Err(::agentacp::Error::msg(\"a compile check\"))\n\
                 }}\n\
             }}\n"
        ),
        folder,
    }
}

/// A client on `module` offering both `fs` methods: its handler trait takes and returns the
/// module's `ReadTextFile…` / `WriteTextFile…` types, decoded through its `AgentRequest`.
fn client_on(module: &str, rev: &str) -> Operator {
    let folder = format!("client-{}", &rev[..8]);
    let name = format!("Client{}", rev[..8].to_uppercase());
    let error = "Err(::agentacp::jsonrpc::RpcError::new(-32603, \"a compile check\"))";
    let handler = |method: &str, types: &str| {
        format!(
            "    async fn {method}(&self, _: &::agentacp::client::ClientContext, _: crate::{module}::{types}Request)\n\
                 -> Result<crate::{module}::{types}Response, ::agentacp::jsonrpc::RpcError> {{\n        {error}\n    }}\n"
        )
    };
    Operator {
        manifest: format!(
            "---\nname: {folder}\nid: {folder}\ndescription: A client on a regen module.\nversion: 0.1.0\nkind: client\n\
             transport: stdio\nmetadata:\n  aip44:\n    acp_rev: {rev}\n    tier: basic\n    capabilities:\n      client:\n\
             \x20       fs:\n          readTextFile: true\n          writeTextFile: true\n---\n"
        ),
        rust: format!(
            "#[::agentacp::acp_operator(manifest = \"operators/{folder}/ACP.md\", wire = crate::{module})]\n\
             pub struct {name};\n\
             impl {name}Client for {name} {{\n{}{}}}\n",
            handler("read_text_file", "ReadTextFile"),
            handler("write_text_file", "WriteTextFile"),
        ),
        folder,
    }
}

/// Generates every snapshot of both folders into one temporary crate (edition 2021, the oldest
/// a user may have), each module used by operators through `#[acp_operator(wire = …)]` — a
/// client everywhere, a server wherever `session/prompt` answers a stop reason (the first
/// revisions answer `null`, which leaves a server nothing to return) — and runs `cargo check`
/// on it. Slow (a minute or two on 2 cores): `.ci/run` runs it with `--ignored`. The crate also
/// holds the module of `fixtures/regen/recursive.json` (types that contain themselves, boxed or
/// wrapped), with or without the snapshots.
#[test]
#[ignore = "slow: cargo check of every snapshot's module; .ci/run runs it"]
fn every_snapshot_generates_a_module_that_compiles() {
    let dirs = common::all_acp_snapshots();
    if dirs.is_empty() {
        eprintln!(
            "../shared/upstream/acp-schemas and acp-schemas-early are absent: checking the recursive fixture only"
        );
    }
    let temp = tempfile::tempdir().unwrap();
    let krate = temp.path();
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::create_dir_all(krate.join("operators")).unwrap();
    let agentacp = common::workspace().join("agentacp");
    std::fs::write(
        krate.join("Cargo.toml"),
        format!(
            "[package]\nname = \"regen-all\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
             [dependencies]\nagentacp = {{ path = {:?} }}\n\n[workspace]\n",
            agentacp.display().to_string()
        ),
    )
    .unwrap();
    std::fs::write(
        krate.join("operators/OPERATOR.md"),
        "---\nname: Check\nid: check-operator\npersona_summary: A compile check.\nversion: 0.1.0\n\
         profile:\n  role: None.\n---\n",
    )
    .unwrap();
    let mut lib = String::from("#![deny(warnings)]\n");
    let recursive =
        SchemaFiles::locate(&common::workspace().join("scaffold-aip/tests/fixtures/regen/recursive.json")).unwrap();
    let generated = generate_files(&recursive, &Options::new("0123456789abcdef0123456789abcdef01234567")).unwrap();
    std::fs::write(krate.join("src/recursive.rs"), generated.source).unwrap();
    lib += "pub mod recursive;\n";
    let mut servers = Vec::new();
    for dir in &dirs {
        let files = SchemaFiles::locate(dir).unwrap();
        let rev = files.rev_from_path().unwrap();
        let schema: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&files.schema).unwrap()).unwrap();
        // With docs for the default revision only: doc attributes cannot break the build, and
        // each extra module costs CI time.
        let variants: &[bool] = if rev.starts_with("0fc18323") {
            &[false, true]
        } else {
            &[false]
        };
        for &docs in variants {
            let generated = generate_files(
                &files,
                &Options {
                    docs,
                    ..Options::new(rev.clone())
                },
            )
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            let module = format!("rev_{}{}", &rev[..8], if docs { "_docs" } else { "" });
            std::fs::write(krate.join("src").join(format!("{module}.rs")), generated.source).unwrap();
            lib += &format!("pub mod {module};\n");
        }
        let module = format!("rev_{}", &rev[..8]);
        let mut operators = vec![client_on(&module, &rev)];
        if schema["$defs"]["PromptResponse"]["properties"]["stopReason"].is_object() {
            operators.push(server_on(&module, &rev));
            servers.push(module.clone());
        }
        for operator in operators {
            let folder = krate.join("operators").join(&operator.folder);
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(folder.join("ACP.md"), operator.manifest).unwrap();
            lib += &operator.rust;
        }
    }
    // Every revision of the main folder has a server; a missing one would mean the check above
    // stopped finding the stop reason.
    for dir in common::acp_snapshots() {
        let module = format!("rev_{}", &dir.file_name().unwrap().to_string_lossy()[..8]);
        assert!(servers.contains(&module), "no server operator on {module}");
    }
    std::fs::write(krate.join("src/lib.rs"), lib).unwrap();
    let target = common::workspace().join("target/regen-all");
    let output = Command::new(env!("CARGO"))
        .args(["check", "--quiet", "--manifest-path"])
        .arg(krate.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&target)
        .env("CARGO_TERM_COLOR", "never")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "cargo check failed:\n{}", tail(&stderr, 120));
    eprintln!(
        "{} modules checked, each with a client operator; {} with a server operator too",
        dirs.len(),
        servers.len()
    );
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The public surface of the default revision's module, one line per item, so that a review
/// of a regenerated module (or of a generator change) shows what changed for users.
#[test]
fn the_default_revisions_public_surface_matches_its_snapshot() {
    let Some(dir) = common::acp_snapshot(BUILT_IN[0].0) else {
        return;
    };
    let files = SchemaFiles::locate(&dir).unwrap();
    let generated = generate_files(&files, &Options::new(BUILT_IN[0].0)).unwrap();
    common::assert_snapshot("wire-surface-0fc18323.txt", &public_surface(&generated.source));
}

fn public_surface(source: &str) -> String {
    use quote::ToTokens;
    let compact = |tokens: &dyn ToTokens| {
        tokens
            .to_token_stream()
            .to_string()
            .replace(" :: ", "::")
            .replace(":: ", "::")
            .replace(" < ", "<")
            .replace(" >", ">")
            .replace("< ", "<")
            .replace(" ,", ",")
            .replace("& ", "&")
    };
    let file = syn::parse_file(source).unwrap();
    let mut lines = Vec::new();
    for item in &file.items {
        match item {
            syn::Item::Struct(s) if matches!(s.vis, syn::Visibility::Public(_)) => {
                let fields: Vec<String> = s
                    .fields
                    .iter()
                    .map(|f| match &f.ident {
                        Some(name) => format!("{name}: {}", compact(&f.ty)),
                        None => compact(&f.ty),
                    })
                    .collect();
                lines.push(format!("struct {} {{ {} }}", s.ident, fields.join(", ")));
            }
            syn::Item::Enum(e) if matches!(e.vis, syn::Visibility::Public(_)) => {
                let variants: Vec<String> = e
                    .variants
                    .iter()
                    .map(|v| match &v.fields {
                        syn::Fields::Unit => v.ident.to_string(),
                        fields => format!(
                            "{}({})",
                            v.ident,
                            fields.iter().map(|f| compact(&f.ty)).collect::<Vec<_>>().join(", ")
                        ),
                    })
                    .collect();
                lines.push(format!("enum {} {{ {} }}", e.ident, variants.join(", ")));
            }
            syn::Item::Type(t) => lines.push(format!("type {} = {}", t.ident, compact(&t.ty))),
            syn::Item::Const(c) => lines.push(format!("const {}: {}", c.ident, compact(&c.ty))),
            syn::Item::Impl(i) => {
                let target = compact(&i.self_ty);
                let trait_name = i.trait_.as_ref().map(|(path, _)| compact(path));
                for member in &i.items {
                    if let syn::ImplItem::Fn(f) = member
                        && matches!(f.vis, syn::Visibility::Public(_))
                    {
                        let signature = compact(&f.sig).replace(" (", "(").replace(" : ", ": ");
                        lines.push(format!("fn {target}::{}", signature.trim_start_matches("fn ")));
                    }
                }
                if let Some(trait_name) = trait_name.filter(|t| !t.contains("serde") && !t.contains("fmt")) {
                    lines.push(format!("impl {trait_name} for {target}"));
                }
            }
            _ => {}
        }
    }
    lines.join("\n") + "\n"
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
