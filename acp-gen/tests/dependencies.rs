//! Issue #14: an operator's build compiles the manifest core and the expansion, not the CLI.
//! `acp-macros` depends on `acp-gen` without its `cli` feature, so none of the command line's,
//! the templates' or the generator's crates are in the proc macro's dependency tree.

use std::process::Command;

#[test]
fn the_proc_macro_compiles_no_cli_template_or_pretty_printing_crate() {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "tree",
            "-p",
            "acp-macros",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--locked",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo tree");
    let tree = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "cargo tree failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(tree.lines().any(|line| line.starts_with("acp-gen ")), "{tree}");
    let names: Vec<&str> = tree.lines().filter_map(|line| line.split_whitespace().next()).collect();
    for cli_only in ["clap", "handlebars", "pest", "prettyplease", "similar", "anstream"] {
        assert!(
            !names.contains(&cli_only),
            "`{cli_only}` is in the proc macro's dependency tree:\n{tree}"
        );
    }
}
