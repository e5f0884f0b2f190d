//! `agentacp` — the crate operator authors depend on. Not implemented yet (issue #4).
//!
//! It will hold the runtime (JSON-RPC over stdio, sessions, lifecycle, governance, audit),
//! the built-in wire types of each supported ACP revision, and re-export `#[acp_operator]`.
//! Until then it exports nothing.
