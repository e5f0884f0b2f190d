//! `#[acp_operator(manifest = "ACP.md")]` — not implemented yet (issue #4).
//!
//! This crate will be a thin adapter: it reads the manifest with `acp-gen`, maps the
//! library's diagnostics onto the span of the `manifest = "..."` literal, and emits the
//! handler trait, the `initialize` answer and the dispatch. Until then it exports nothing.
