//! The one method table (`agentacp::methods`) agrees with the generated wire modules: every
//! row is a method of each built-in revision that has it, with the same side, params and
//! result types, and the request enum of its side carries it. (That the table's variant names
//! are the enums' is checked in acp-wire-gen, against the generator's naming.)

use agentacp::methods::{self, Side};
use agentacp::wire::support::{self, DecodeError, MethodInfo};

/// The built-in revisions this test is compiled with (agentacp's dev-dependency turns every
/// revision feature on).
fn revisions() -> Vec<(&'static str, &'static [MethodInfo])> {
    vec![
        ("rev_0fc18323", agentacp::wire::rev_0fc18323::METHODS),
        ("rev_b7f00054", agentacp::wire::rev_b7f00054::METHODS),
        ("rev_d9072428", agentacp::wire::rev_d9072428::METHODS),
    ]
}

fn side(side: Side) -> support::Side {
    match side {
        Side::Agent => support::Side::Agent,
        Side::Client => support::Side::Client,
        Side::Both => support::Side::Protocol,
    }
}

#[test]
fn every_row_is_a_method_of_the_default_revision_with_the_same_types() {
    let default = agentacp::wire::default::METHODS;
    for row in methods::METHODS {
        let info = default
            .iter()
            .find(|info| info.name == row.name)
            .unwrap_or_else(|| panic!("`{}` is not a method of the default revision", row.name));
        assert_eq!(info.side, side(row.side), "{}", row.name);
        assert_eq!(info.params, row.params, "{}", row.name);
        assert_eq!(info.result, row.result, "{}", row.name);
        assert_eq!(row.notification, info.is_notification(), "{}", row.name);
    }
}

#[test]
fn where_an_older_revision_has_a_row_it_has_the_same_types() {
    for (module, table) in revisions() {
        for row in methods::METHODS {
            // An older revision may lack a method (`session/close`); a manifest pinning it
            // cannot turn on a capability whose methods it lacks (ACP214).
            let Some(info) = table.iter().find(|info| info.name == row.name) else {
                assert!(
                    row.trait_method().is_none() || row.client_capability().is_some(),
                    "{module} lacks `{}`, which every operator of its side must answer",
                    row.name
                );
                continue;
            };
            assert_eq!(info.side, side(row.side), "{module} {}", row.name);
            assert_eq!(
                (info.params, info.result),
                (row.params, row.result),
                "{module} {}",
                row.name
            );
        }
    }
}

/// Decodes `params` for `row` through the request enum of its side, returning the decoded
/// method name (or the failure).
fn decode(row: &methods::Method, params: &str) -> Result<String, DecodeError> {
    use agentacp::wire::default::{AgentRequest, ClientRequest};
    let raw = serde_json::value::RawValue::from_string(params.to_string()).unwrap();
    match row.side {
        Side::Agent => ClientRequest::decode(row.name, Some(&raw)).map(|r| r.method().to_string()),
        Side::Client => AgentRequest::decode(row.name, Some(&raw)).map(|r| r.method().to_string()),
        Side::Both => Ok(row.name.to_string()),
    }
}

#[test]
fn the_request_enums_carry_every_request_row() {
    for row in methods::METHODS.iter().filter(|row| !row.notification) {
        match decode(row, "{}") {
            Ok(method) => assert_eq!(method, row.name),
            Err(DecodeError::InvalidParams { method, .. }) => assert_eq!(method, row.name),
            Err(error @ DecodeError::UnknownMethod(_)) => panic!("{}: {error}", row.name),
        }
    }
}

#[test]
fn only_the_tables_client_methods_are_offered_and_their_paths_are_confined() {
    let all = methods::ClientMethods::from_paths(|_| true);
    for info in agentacp::wire::default::METHODS {
        let row = methods::find(info.name);
        assert_eq!(
            all.offers(info.name),
            row.and_then(methods::Method::client_capability).is_some(),
            "{}",
            info.name
        );
    }
    let confined: Vec<(&str, &str)> = methods::METHODS
        .iter()
        .filter_map(|row| Some((row.name, row.workspace_path?)))
        .collect();
    assert_eq!(
        confined,
        [
            ("fs/read_text_file", "path"),
            ("fs/write_text_file", "path"),
            ("terminal/create", "cwd")
        ]
    );
}
