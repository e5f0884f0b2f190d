//! The wire-schema model over every upstream snapshot in `../shared/upstream/acp-schemas` and
//! `acp-schemas-early` (skipped when absent): every definition classifies, every method has
//! its types, and the constructs named in issue #3 come out as the generator needs them.

use crate::common;

use acp_wire_gen::shape::{Primitive, Shape, TaggedVariant};
use acp_wire_gen::{MethodTable, Side, classify_all};
use serde_json::{Value, json};

fn load(dir: &std::path::Path, file: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join(file)).unwrap()).unwrap()
}

fn shape_of(shapes: &[(String, Shape)], name: &str) -> Shape {
    shapes
        .iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no {name}"))
        .1
        .clone()
}

#[test]
fn every_definition_of_every_snapshot_classifies() {
    let dirs = common::all_acp_snapshots();
    if dirs.is_empty() {
        eprintln!("skipped: ../shared/upstream/acp-schemas and acp-schemas-early are absent");
        return;
    }
    for dir in dirs {
        let schema = load(&dir, "schema.json");
        let shapes = classify_all(&schema).unwrap_or_else(|e| panic!("{}: {e:#?}", dir.display()));
        let defs = schema["$defs"].as_object().unwrap().len();
        assert_eq!(shapes.len(), defs, "{}", dir.display());
    }
}

/// Issue #20: every method of every revision, the early ones included (whose types are named
/// `CreateTerminalRequest`, `SetSessionModeRequest`, … and bound to their methods by the
/// routing unions rather than by `x-method`), has its params type, and a request its result
/// type. The methods agentacp's operators need are bound to the types the macro names, on the
/// side that handles them.
#[test]
fn every_method_of_every_snapshot_has_its_types() {
    let dirs = common::all_acp_snapshots();
    if dirs.is_empty() {
        eprintln!("skipped: ../shared/upstream/acp-schemas and acp-schemas-early are absent");
    }
    for dir in &dirs {
        let schema = load(dir, "schema.json");
        let table = MethodTable::read(&schema, &load(dir, "meta.json"), &[])
            .unwrap_or_else(|e| panic!("{}: {e:#?}", dir.display()));
        let expect = |method: &str, side: Side, params: &str, result: Option<&str>| {
            let Some(found) = table.get(method) else { return };
            assert_eq!(found.side, side, "{}: {method}", dir.display());
            assert_eq!(found.params(), Some(params), "{}: {method}", dir.display());
            if result.is_some() {
                assert_eq!(found.response.as_deref(), result, "{}: {method}", dir.display());
            }
        };
        expect(
            "initialize",
            Side::Agent,
            "InitializeRequest",
            Some("InitializeResponse"),
        );
        expect(
            "authenticate",
            Side::Agent,
            "AuthenticateRequest",
            Some("AuthenticateResponse"),
        );
        expect(
            "session/new",
            Side::Agent,
            "NewSessionRequest",
            Some("NewSessionResponse"),
        );
        expect(
            "session/load",
            Side::Agent,
            "LoadSessionRequest",
            Some("LoadSessionResponse"),
        );
        expect("session/prompt", Side::Agent, "PromptRequest", Some("PromptResponse"));
        expect(
            "session/set_mode",
            Side::Agent,
            "SetSessionModeRequest",
            Some("SetSessionModeResponse"),
        );
        expect("session/update", Side::Client, "SessionNotification", None);
        expect(
            "fs/read_text_file",
            Side::Client,
            "ReadTextFileRequest",
            Some("ReadTextFileResponse"),
        );
        expect(
            "fs/write_text_file",
            Side::Client,
            "WriteTextFileRequest",
            Some("WriteTextFileResponse"),
        );
        expect(
            "terminal/create",
            Side::Client,
            "CreateTerminalRequest",
            Some("CreateTerminalResponse"),
        );
        expect(
            "terminal/wait_for_exit",
            Side::Client,
            "WaitForTerminalExitRequest",
            Some("WaitForTerminalExitResponse"),
        );
        assert!(
            table.get("session/prompt").is_some() && table.get("session/update").is_some(),
            "{}",
            dir.display()
        );
        let defs = schema["$defs"].as_object().unwrap();
        let mut bound_by_unions = Vec::new();
        for method in &table.methods {
            assert_eq!(
                method.request.is_some(),
                method.response.is_some(),
                "{}: {}",
                dir.display(),
                method.name
            );
            // Every type is a definition, or a result the schema gives as `null`.
            for ty in [&method.request, &method.response, &method.notification]
                .into_iter()
                .flatten()
            {
                assert!(
                    defs.contains_key(ty) || table.null_results.contains(ty),
                    "{}: {ty}",
                    dir.display()
                );
            }
            let annotated = |ty: &Option<String>| {
                ty.as_ref()
                    .is_some_and(|ty| defs.get(ty).is_some_and(|def| def.get("x-method").is_some()))
            };
            if !annotated(&method.request) && !annotated(&method.notification) {
                bound_by_unions.push(method.name.as_str());
            }
        }
        // What sets the early revisions apart: some of their methods have no annotated type
        // (so this test covers the binding through the unions), and none of the later ones.
        let early = common::acp_early_snapshots().contains(dir);
        assert_eq!(
            !bound_by_unions.is_empty(),
            early,
            "{}: bound through the unions: {bound_by_unions:?}",
            dir.display()
        );
    }
}

#[test]
fn the_default_revision_s_constructs_are_recognised() {
    let Some(dir) = common::acp_snapshot("0fc18323a9fdad4e5b4a20ec2f1645dde843fd9b") else {
        return;
    };
    let shapes = classify_all(&load(&dir, "schema.json")).unwrap();

    let Shape::Tagged {
        tag,
        variants,
        fallback,
    } = shape_of(&shapes, "SessionUpdate")
    else {
        panic!("SessionUpdate")
    };
    assert_eq!(tag, "sessionUpdate");
    assert!(fallback.is_empty());
    assert!(variants.contains(&TaggedVariant {
        tag: "agent_message_chunk".into(),
        payload: Some("ContentChunk".into()),
        inline_properties: vec![]
    }));
    // Several tags share one payload.
    assert!(
        variants
            .iter()
            .filter(|v| v.payload.as_deref() == Some("ContentChunk"))
            .count()
            >= 3
    );

    assert_eq!(
        shape_of(&shapes, "RequestId"),
        Shape::Untagged(vec![
            Primitive::Null,
            Primitive::Integer(Some("int64".into())),
            Primitive::String
        ])
    );
    let Shape::Enum { values, fallback: None } = shape_of(&shapes, "StopReason") else {
        panic!("StopReason")
    };
    assert!(values.contains(&json!("end_turn")) && values.contains(&json!("cancelled")));
    let Shape::Enum {
        values,
        fallback: Some(Primitive::Integer(_)),
    } = shape_of(&shapes, "ErrorCode")
    else {
        panic!("ErrorCode is an open integer enum")
    };
    assert!(values.contains(&json!(-32601)));
    assert_eq!(shape_of(&shapes, "SessionId"), Shape::Newtype(Primitive::String));
    let Shape::Tagged { tag, fallback, .. } = shape_of(&shapes, "McpServer") else {
        panic!("McpServer")
    };
    assert_eq!(tag, "type");
    assert_eq!(
        fallback.len(),
        1,
        "stdio servers carry no `type`: the untagged fallback branch"
    );
}

#[test]
fn the_old_inline_shape_is_recognised() {
    let Some(dir) = common::acp_snapshot("83367966a8bc65aa0ec3469d8cc017108e0db452") else {
        return;
    };
    let shapes = classify_all(&load(&dir, "schema.json")).unwrap();
    let Shape::Tagged { tag, variants, .. } = shape_of(&shapes, "SessionUpdate") else {
        panic!("SessionUpdate")
    };
    assert_eq!(tag, "sessionUpdate");
    let chunk = variants.iter().find(|v| v.tag == "agent_message_chunk").unwrap();
    assert_eq!(chunk.payload, None, "v0.4 writes the payload inline");
    assert!(chunk.inline_properties.contains(&"content".to_string()), "{chunk:?}");
}
