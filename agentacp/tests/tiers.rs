//! The pass cases of `tests/ui/pass`: an operator at every tier (and one with a websocket
//! transport) builds with exactly the methods its manifest requires, and its spec says what
//! the manifest says. They are compiled here, with the crate's other tests, rather than by
//! trybuild (which would build every dependency again); `tests/ui` keeps the compile-fail
//! cases. Each module is found beside its manifest folder.

#[path = "../../tests/ui/pass/basic.rs"]
mod basic;
#[path = "../../tests/ui/pass/client.rs"]
mod client;
#[path = "../../tests/ui/pass/governance_aware.rs"]
mod governance_aware;
#[path = "../../tests/ui/pass/sandboxed.rs"]
mod sandboxed;
#[path = "../../tests/ui/pass/v2.rs"]
mod v2;
#[path = "../../tests/ui/pass/websocket.rs"]
mod websocket;

#[test]
fn a_client_builds_with_exactly_its_declared_client_methods() {
    client::main();
}

#[test]
fn basic_tier_builds_without_load_session() {
    basic::main();
}

#[test]
fn governance_aware_tier_builds_with_load_session_and_tool_calls() {
    governance_aware::main();
}

#[test]
fn sandboxed_tier_builds_with_mcp_servers() {
    sandboxed::main();
}

/// Issue #48: a manifest that lists protocol version 2 builds with a `Turn<'_, V2<tier>>`
/// that has the tier's powers but not `editor()` or `set_mode()` (`tests/ui/fail/v2_turn_*`).
#[test]
fn a_version_2_server_builds_with_the_tiers_powers_version_2_has() {
    v2::main();
}

#[test]
fn websocket_transport_builds_with_authenticate() {
    websocket::main();
}
