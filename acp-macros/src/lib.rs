//! `#[acp_operator(manifest = "ACP.md")]`: a thin adapter over
//! [`acp_gen::operator::expand`], which reads and checks the manifest and writes the code.
//! Use it through the `agentacp` crate (`agentacp::acp_operator`).

use proc_macro::TokenStream;

/// Turns a struct into an ACP operator described by an AIP-44 manifest.
///
/// `manifest` is relative to the crate's `Cargo.toml`. The manifest is checked at compile
/// time (every finding is a compile error naming `ACP.md:line:column`), and the macro emits
/// `<Struct>Server`, the handler trait with exactly the methods the manifest's capabilities
/// require, plus the glue that serves it. `wire = path::to::module` uses wire types generated
/// by `scaffold-aip regen` for a revision that is not built in.
#[proc_macro_attribute]
pub fn acp_operator(args: TokenStream, item: TokenStream) -> TokenStream {
    let crate_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_default();
    acp_gen::operator::expand(args.into(), item.into(), &crate_dir).into()
}
