//! `scaffold-aip`: lint, explain and print the schema of AIP-44 ACP.md manifests.
//! A thin wrapper over [`scaffold_aip::cli::run`].

fn main() {
    let code = scaffold_aip::cli::run(
        std::env::args_os(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    // What `conform`'s agents left behind, even outside their process groups, was reparented
    // to us (the kit is their subreaper): it ends with us.
    acp_process::end_all_descendants(std::time::Duration::from_secs(2));
    std::process::exit(code);
}
