//! Issue #14: each crate's dependency tree holds what its job needs and nothing more. An
//! operator's build compiles the manifest core and the expansion, not the command line; the
//! manifest core compiles no code generator.

use std::process::Command;

/// The crates (by package name) in `package`'s normal dependency tree, `package` included.
fn normal_tree(package: &str) -> Vec<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args(["tree", "-p", package, "-e", "normal", "--prefix", "none", "--locked"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    assert!(
        output.status.success(),
        "cargo tree -p {package} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next().map(str::to_string))
        .collect()
}

/// Crates only the command line needs: argument parsing, templates, diffs, terminal colour,
/// and pretty-printing of generated code.
const CLI_ONLY: &[&str] = &["clap", "handlebars", "pest", "prettyplease", "similar", "anstream"];

/// Crates the macro does without, to keep an operator's cold build short: the manifest schema is
/// committed (schemars only generates it, behind acp-manifest's `schema-gen` feature), and its
/// patterns compile with regex-lite.
const NOT_AT_COMPILE_TIME: &[&str] = &["schemars", "regex"];

#[test]
fn the_proc_macro_compiles_no_cli_template_or_pretty_printing_crate() {
    let tree = normal_tree("acp-macros");
    for needed in ["acp-expand", "acp-manifest"] {
        assert!(tree.iter().any(|name| name == needed), "{needed} missing: {tree:?}");
    }
    for name in CLI_ONLY
        .iter()
        .chain(NOT_AT_COMPILE_TIME)
        .chain(&["acp-wire-gen", "scaffold-aip"])
    {
        assert!(
            !tree.iter().any(|crate_name| crate_name == name),
            "`{name}` is in the proc macro's dependency tree: {tree:?}"
        );
    }
}

#[test]
fn the_manifest_core_compiles_neither_the_cli_nor_a_code_generator() {
    let tree = normal_tree("acp-manifest");
    for name in CLI_ONLY.iter().chain(&["acp-expand", "acp-wire-gen", "scaffold-aip"]) {
        assert!(
            !tree.iter().any(|crate_name| crate_name == name),
            "`{name}` is in acp-manifest's dependency tree: {tree:?}"
        );
    }
}

#[test]
fn an_operator_build_compiles_syn_once_and_no_tracing_attributes() {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "tree",
            "-p",
            "agentacp",
            "-e",
            "normal,build",
            "--prefix",
            "none",
            "--locked",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8_lossy(&output.stdout);
    let mut syn_versions: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("syn v"))
        .filter_map(|rest| rest.split_whitespace().next())
        .collect();
    syn_versions.sort_unstable();
    syn_versions.dedup();
    assert_eq!(
        syn_versions.len(),
        1,
        "syn versions in agentacp's tree: {syn_versions:?}"
    );
    assert!(
        !text.lines().any(|line| line.starts_with("tracing-attributes ")),
        "tracing-attributes is in agentacp's tree (tracing's `attributes` feature)"
    );
}
