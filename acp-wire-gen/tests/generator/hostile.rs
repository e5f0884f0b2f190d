//! The generator on schemas made to break it: references it must not follow, `$ref` cycles,
//! names that are no Rust names, and inputs too large to generate from. Each ends in an error
//! naming what and where, or in a module; never in a panic or unbounded memory. (What the
//! `scaffold-aip regen` command makes of such schemas, from a file, is tested in
//! `scaffold-aip/tests/regen.rs`.)

use crate::common;

use acp_wire_gen::input::{MAX_DEFINITIONS, MAX_METHODS, MAX_PLANNED};
use acp_wire_gen::{Options, generate};
use serde_json::{Value, json};

const REV: &str = "0123456789abcdef0123456789abcdef01234567";

/// The smallest schema regen accepts: one request, its result, and `Thing` to edit.
fn schema() -> Value {
    json!({"$defs": {
        "InitializeRequest": {"type": "object", "x-side": "agent", "x-method": "initialize",
                              "properties": {"thing": {"$ref": "#/$defs/Thing"}}},
        "InitializeResponse": {"type": "object", "x-side": "agent", "x-method": "initialize",
                               "properties": {"ok": {"type": "boolean"}}},
        "Thing": {"type": "object", "properties": {"name": {"type": "string"}}}
    }})
}

/// The problems `generate` reports for `schema`, or the generated source.
fn problems(schema: &Value) -> Result<String, Vec<String>> {
    generate(schema, None, &Options::new(REV))
        .map(|generated| generated.source)
        .map_err(|error| error.problems)
}

#[test]
fn a_ref_that_is_not_a_local_definition_is_named_with_where_it_is() {
    // `http://example.com/thing.json` through the CLI (it panicked before):
    // `a_ref_out_of_the_schema_is_named_not_a_panic` in scaffold-aip/tests/regen.rs.
    let cases = [
        (json!({"$ref": "other.json#/$defs/Thing"}), "points outside the schema"),
        (
            json!({"$ref": "#/definitions/Thing"}),
            "is not of the form `#/$defs/Name`",
        ),
        (json!({"$ref": "#/$defs/Missing"}), "names no definition of this schema"),
        (json!({"type": "array", "items": {"$ref": 7}}), "is not a string"),
    ];
    for (property, expected) in cases {
        let mut bad = schema();
        bad["$defs"]["Thing"]["properties"]["more"] = property.clone();
        let problems = problems(&bad).expect_err(&property.to_string());
        assert!(
            problems.iter().any(|p| p.contains(expected)),
            "{property}: {problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.contains("`/$defs/Thing/properties/more")),
            "{property}: {problems:?}"
        );
    }
    // A `$ref` key in a value (a default, a constant) is data, not a reference.
    let mut data = schema();
    data["$defs"]["Thing"]["properties"]["more"] = json!({"type": "object", "default": {"$ref": "http://x"}});
    problems(&data).unwrap();
}

#[test]
fn names_that_are_no_rust_names_are_refused_or_made_valid() {
    // A definition: refused by name (it panicked before).
    for name in ["Bad-Name", "x.json", "type", "Self", "1st"] {
        let mut bad = schema();
        bad["$defs"][name] = json!({"type": "string"});
        let problems = problems(&bad).expect_err(name);
        assert_eq!(
            problems,
            [format!(
                "definition `{name}` is not a Rust type name (letters, digits and `_`, not a keyword)"
            )]
        );
    }
    // Properties, variants and methods are schema text made into names: always valid ones.
    let mut odd = schema();
    odd["$defs"]["Thing"]["properties"] = json!({"x²": {"type": "string"}, "9": {"type": "string"}, "²": {}});
    odd["$defs"]["Kind"] = json!({"enum": ["a²", "²", "type"]});
    odd["$defs"]["InitializeRequest"]["x-method"] = json!("type");
    odd["$defs"]["InitializeResponse"]["x-method"] = json!("type");
    let source = problems(&odd).unwrap();
    assert!(source.contains("pub const TYPE: &str = \"type\";"), "{source}");
    // Two methods with one Rust name would not compile: refused, naming both.
    let mut clash = schema();
    for name in ["OtherRequest", "OtherResponse"] {
        clash["$defs"][name] =
            json!({"type": "object", "x-side": "agent", "x-method": "session_new", "properties": {}});
    }
    clash["$defs"]["InitializeRequest"]["x-method"] = json!("session/new");
    clash["$defs"]["InitializeResponse"]["x-method"] = json!("session/new");
    let problems = problems(&clash).unwrap_err();
    assert!(
        problems.contains(
            &"methods `session/new` and `session_new` would have the same Rust variant name `SessionNew`".to_string()
        ),
        "{problems:?}"
    );
}

#[test]
fn recursive_types_are_boxed_or_wrapped() {
    let path = common::workspace().join("acp-wire-gen/tests/fixtures/recursive.json");
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let source = problems(&schema).unwrap();
    for expected in [
        "pub parent: Option<Box<Tree>>",
        "pub children: Vec<Tree>",
        "pub tail: Option<Box<List>>",
        "Not(Box<ExprNot>)",
        "pub target: Box<Expr>",
        "Node(Box<Node>)",
        "pub inner: Box<Group>",
        // Aliases that refer to each other: Rust cannot expand them, a wrapper it can.
        "pub struct Nested(pub Vec<NestedMap>);",
        "pub struct NestedMap(pub __s::BTreeMap<String, Nested>);",
        "pub type Wrapper = Tree;",
    ] {
        assert!(source.contains(expected), "no `{expected}` in:\n{source}");
    }
    // `every_snapshot_generates_a_module_that_compiles` (in upstream.rs, run with --ignored)
    // compiles this module.
}

#[test]
fn a_cycle_that_never_reaches_a_value_is_refused_naming_it() {
    let mut aliases = schema();
    aliases["$defs"]["A"] = json!({"$ref": "#/$defs/B"});
    aliases["$defs"]["B"] = json!({"allOf": [{"$ref": "#/$defs/A"}]});
    let problems_of = |schema: &Value| problems(schema).unwrap_err().join("\n");
    assert_eq!(
        problems_of(&aliases),
        "`$ref` cycle A → B → A: each is the whole of the next (an alias, a union branch or a \
         fallback), so reading one would never end; a cycle must pass through a property or a list"
    );
    let mut union = schema();
    union["$defs"]["U"] = json!({"anyOf": [{"type": "string"}, {"$ref": "#/$defs/U"}]});
    assert!(
        problems_of(&union).starts_with("`$ref` cycle U → U: "),
        "{}",
        problems_of(&union)
    );
}

#[test]
fn inputs_over_the_limits_are_refused_before_the_work() {
    // Bytes (a file one byte over, read no further): `a_schema_file_over_the_size_limit_is_not_read`
    // in scaffold-aip/tests/regen.rs.
    // Definitions.
    let mut many = schema();
    for i in 0..MAX_DEFINITIONS {
        many["$defs"][format!("T{i}")] = json!({"type": "string"});
    }
    assert_eq!(
        problems(&many).unwrap_err(),
        [format!(
            "the schema has {} definitions, more than the {MAX_DEFINITIONS} regen accepts",
            MAX_DEFINITIONS + 3
        )]
    );
    // Methods.
    let mut methods = schema();
    for i in 0..MAX_METHODS {
        methods["$defs"][format!("M{i}")] =
            json!({"type": "object", "x-side": "client", "x-method": format!("m/{i}"), "properties": {}});
    }
    let problems_of = problems(&methods).unwrap_err();
    assert_eq!(
        problems_of,
        [format!(
            "the revision lists {} methods, more than the {MAX_METHODS} regen accepts",
            MAX_METHODS + 1
        )]
    );
    // What would be printed: one struct of many fields.
    let mut wide = schema();
    let fields: serde_json::Map<String, Value> = (0..MAX_PLANNED).map(|i| (format!("f{i}"), json!({}))).collect();
    wide["$defs"]["Thing"]["properties"] = Value::Object(fields);
    let problems_of = problems(&wide).unwrap_err();
    assert!(
        problems_of[0].ends_with(&format!(
            "types and members (fields, variants, constants), more than the {MAX_PLANNED} regen prints"
        )),
        "{problems_of:?}"
    );
}

#[test]
fn defaults_that_multiply_through_types_are_cut_off() {
    // Each level's fields default to `{}` of the next level: written out, the first level's
    // default would hold 20 × 20 × 20 values of the last.
    let mut deep = schema();
    for level in 0..4 {
        let properties: serde_json::Map<String, Value> = (0..20)
            .map(|i| {
                let field = if level == 3 {
                    json!({"type": "string", "default": "x"})
                } else {
                    json!({"$ref": format!("#/$defs/L{}", level + 1), "default": {}})
                };
                (format!("f{i}"), field)
            })
            .collect();
        deep["$defs"][format!("L{level}")] = json!({"type": "object", "properties": properties});
    }
    deep["$defs"]["Thing"]["properties"]["deep"] = json!({"$ref": "#/$defs/L0"});
    let generated = generate(&deep, None, &Options::new(REV)).unwrap();
    assert!(
        generated.notes.contains(
            &"L0.f0: its schema default cannot be written as a Rust value; the field is an Option".to_string()
        ),
        "{:?}",
        generated.notes
    );
    // One level down the default is small enough to write.
    assert!(
        generated.source.contains("fn __default_l2_f0() -> L3"),
        "{}",
        generated.source
    );
}
