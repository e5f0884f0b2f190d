//! `scaffold-aip`: lint, explain and print the schema of AIP-44 ACP.md manifests.
//! A thin wrapper over [`scaffold_aip::cli::run`].

fn main() {
    let code = scaffold_aip::cli::run(
        std::env::args_os(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    std::process::exit(code);
}
