//! Fuzzing the generator with proptest: schemas built from the pieces that broke it before
//! (references out of the schema or to nothing, `$ref` cycles, names that are no Rust names,
//! defaults, unions, tags) must give a module that parses or an error, never a panic.
//! `PROPTEST_CASES=100000` runs it longer.

use acp_wire_gen::{Options, generate};
use proptest::prelude::*;
use serde_json::{Map, Value, json};
// The workspace's syn 3, not the generator's syn 2.
use syn3 as syn;

/// Definition names every schema has.
const DEF_NAMES: &[&str] = &["A", "B", "Thing"];

/// Names of the odd extra definition: valid, clashing with keywords, not names at all.
const ODD_NAMES: &[&str] = &["Value", "Bad-Name", "type", "x²", "_", "Kind"];

/// References: to definitions that may exist, to none, out of the schema, and not strings.
fn reference() -> impl Strategy<Value = Value> {
    prop_oneof![
        12 => prop::sample::select(DEF_NAMES).prop_map(|n| json!(format!("#/$defs/{n}"))),
        1 => prop::sample::select(ODD_NAMES).prop_map(|n| json!(format!("#/$defs/{n}"))),
        1 => prop::sample::select(vec![
            json!("#/$defs/Nope"),
            json!("http://example.com/a.json"),
            json!("a.json#/$defs/A"),
            json!("#/definitions/A"),
            json!("#"),
            json!(5),
        ]),
    ]
}

/// Property names and constants, some of them no Rust names.
fn word() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "a", "type", "x²", "9", "", "_meta", "self", "kind", "Self", "a b", "²",
    ])
    .prop_map(str::to_string)
}

/// Small JSON values for `const`, `enum` and `default`.
fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(null)),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        word().prop_map(Value::from),
        Just(json!({})),
        Just(json!([])),
        Just(json!([1, 2])),
    ]
}

/// A schema, nested a few levels.
fn subschema() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        prop::sample::select(vec![
            "string", "integer", "number", "boolean", "null", "object", "array"
        ])
        .prop_map(|t| json!({"type": t})),
        reference().prop_map(|r| json!({"$ref": r})),
        Just(json!({})),
        Just(json!(true)),
        value().prop_map(|v| json!({"const": v})),
        prop::collection::vec(value(), 1..4).prop_map(|v| json!({"enum": v})),
    ];
    leaf.prop_recursive(4, 24, 4, |inner| {
        prop_oneof![
            (
                prop::collection::vec((word(), inner.clone()), 1..4),
                prop::collection::vec(word(), 0..2)
            )
                .prop_map(|(properties, required)| {
                    let properties: Map<String, Value> = properties.into_iter().collect();
                    json!({"type": "object", "properties": properties, "required": required})
                }),
            inner.clone().prop_map(|items| json!({"type": "array", "items": items})),
            inner
                .clone()
                .prop_map(|values| json!({"type": "object", "additionalProperties": values})),
            prop::collection::vec(inner.clone(), 1..4).prop_map(|b| json!({"anyOf": b})),
            prop::collection::vec(inner.clone(), 1..4).prop_map(|b| json!({"oneOf": b})),
            inner.clone().prop_map(|only| json!({"allOf": [only]})),
            (word(), inner.clone()).prop_map(|(tag, payload)| json!({"oneOf": [
                {"type": "object", "properties": {"kind": {"const": tag, "type": "string"}, "x": payload}},
                {"type": "object", "properties": {"kind": {"const": "other", "type": "string"}},
                 "allOf": [{"$ref": "#/$defs/A"}]},
                {"type": "object", "properties": {"kind": {"type": "string"}}, "required": ["kind"]}
            ]})),
            (inner.clone(), value()).prop_map(|(schema, default)| {
                let mut schema = schema;
                if let Some(object) = schema.as_object_mut() {
                    object.insert("default".into(), default);
                    object.insert("description".into(), json!("A line.\nAnother."));
                }
                schema
            }),
        ]
    })
}

/// A whole schema: the one method regen needs (its name from a list of awkward ones) and a
/// few definitions.
fn schema() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec![
            "initialize",
            "initialize",
            "initialize",
            "type",
            "1",
            "a/b",
            "",
            "Self",
            "x²",
        ]),
        prop::collection::vec(subschema(), DEF_NAMES.len()),
        prop::option::weighted(0.2, (prop::sample::select(ODD_NAMES), subschema())),
    )
        .prop_map(|(method, defs, odd)| {
            let mut all: Map<String, Value> = DEF_NAMES.iter().map(|n| n.to_string()).zip(defs).collect();
            all.extend(odd.map(|(n, s)| (n.to_string(), s)));
            all.insert(
                "InitializeRequest".into(),
                json!({"type": "object", "x-side": "agent", "x-method": method,
                       "properties": {"a": {"$ref": "#/$defs/A"}}}),
            );
            all.insert(
                "InitializeResponse".into(),
                json!({"type": "object", "x-side": "agent", "x-method": method, "properties": {}}),
            );
            json!({"$defs": all})
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(512),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn generated_schemas_give_a_module_or_an_error_never_a_panic(schema in schema()) {
        let options = Options::new("0123456789abcdef0123456789abcdef01234567");
        match generate(&schema, None, &options) {
            Ok(generated) => {
                let parsed = syn::parse_file(&generated.source);
                prop_assert!(parsed.is_ok(), "{:?}\n{}", parsed.err(), generated.source);
            }
            Err(error) => {
                prop_assert!(!error.problems.is_empty());
                prop_assert!(error.problems.iter().all(|p| !p.is_empty() && !p.starts_with("internal")), "{error}");
            }
        }
    }
}
