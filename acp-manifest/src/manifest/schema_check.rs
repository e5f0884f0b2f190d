//! Checks a located YAML tree against a JSON Schema — the one generated from
//! [`model`](super::model) — and reports every violation with the position of the offending
//! key or value. It understands the keywords that schema uses: `$ref`, `type`, `enum`,
//! `const`, `anyOf`/`oneOf`, `properties`, `required`, `additionalProperties`, `items`,
//! `minItems`, `uniqueItems`, `minLength`, `maxLength`, `pattern`. (`allOf`'s if/then —
//! a sandboxed tier needs a sandbox — is reported by the AIP rules as ACP203.)

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::ops::Range;

use regex_lite::Regex;
use serde_json::Value as Schema;

use crate::diagnostic::{Code, Diagnostic};
use crate::yaml::{Node, Value};

/// A compiled schema.
pub struct SchemaChecker {
    root: Schema,
    /// Every `pattern` of the schema, compiled; one that does not compile keeps its error, so
    /// a value it should check is reported instead of passing unchecked.
    patterns: HashMap<String, Result<Regex, String>>,
}

/// Where the node being checked sits.
#[derive(Clone)]
struct Place<'a> {
    /// Dotted path for messages (`metadata.aip44.tier`).
    path: String,
    /// The span of the key this node is the value of, if any.
    key_span: Option<Range<usize>>,
    /// Where to report a field missing at this level when there is no key (the root).
    fallback: &'a Range<usize>,
}

impl SchemaChecker {
    /// Compiles `root` (its patterns once, here).
    pub fn new(root: Schema) -> Self {
        let mut patterns = HashMap::new();
        collect_patterns(&root, &mut patterns);
        SchemaChecker { root, patterns }
    }

    /// Checks `node`; a missing field at the top level is reported at `fence`.
    pub fn check(&self, node: &Node, fence: &Range<usize>) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        let place = Place {
            path: String::new(),
            key_span: None,
            fallback: fence,
        };
        self.check_node(&self.root, node, &place, &mut out);
        out
    }

    fn resolve<'s>(&'s self, schema: &'s Schema) -> &'s Schema {
        let mut schema = schema;
        while let Some(target) = schema.get("$ref").and_then(Schema::as_str) {
            let Some(found) = target.strip_prefix('#').and_then(|pointer| self.root.pointer(pointer)) else {
                break;
            };
            if found.get("$ref").is_none() {
                return found;
            }
            schema = found;
        }
        schema
    }

    fn check_node(&self, schema: &Schema, node: &Node, place: &Place<'_>, out: &mut Vec<Diagnostic>) {
        if schema.get("$ref").is_some() {
            self.check_node(self.resolve(schema), node, place, out);
        }
        for union in ["anyOf", "oneOf"] {
            if let Some(branches) = schema.get(union).and_then(Schema::as_array) {
                self.check_union(branches, node, place, out);
            }
        }
        if let Some(expected) = schema.get("type").and_then(Schema::as_str)
            && !type_matches(expected, &node.value)
        {
            out.push(wrong_type(expected, node, place));
            return;
        }
        if let Some(allowed) = schema.get("enum").and_then(Schema::as_array) {
            check_enum(allowed, node, place, out);
        }
        match &node.value {
            Value::String(text) => self.check_string(schema, text, node, place, out),
            Value::Sequence(items) => self.check_sequence(schema, items, node, place, out),
            Value::Mapping(_) => self.check_mapping(schema, node, place, out),
            _ => {}
        }
    }

    /// A union passes when one branch passes; otherwise the findings of the branch whose
    /// type fits the value are reported (or a type error naming every branch's type).
    fn check_union(&self, branches: &[Schema], node: &Node, place: &Place<'_>, out: &mut Vec<Diagnostic>) {
        let mut fitting = None;
        for branch in branches {
            let mut found = Vec::new();
            self.check_node(branch, node, place, &mut found);
            if found.is_empty() {
                return;
            }
            let fits = self.type_of(branch).is_some_and(|t| type_matches(t, &node.value));
            if fits && fitting.is_none() {
                fitting = Some(found);
            }
        }
        match fitting {
            Some(found) => out.extend(found),
            None => {
                let names: Vec<&str> = branches
                    .iter()
                    .filter_map(|b| self.type_of(b))
                    .map(type_label)
                    .collect();
                out.push(wrong_type_named(&names.join(" or "), node, place));
            }
        }
    }

    fn type_of<'s>(&'s self, schema: &'s Schema) -> Option<&'s str> {
        self.resolve(schema).get("type").and_then(Schema::as_str)
    }

    fn check_string(&self, schema: &Schema, text: &str, node: &Node, place: &Place<'_>, out: &mut Vec<Diagnostic>) {
        let length = text.chars().count();
        let min = schema.get("minLength").and_then(Schema::as_u64);
        let max = schema.get("maxLength").and_then(Schema::as_u64);
        let too_short = min.is_some_and(|min| (length as u64) < min);
        let too_long = max.is_some_and(|max| (length as u64) > max);
        if too_short || too_long {
            let bound = match (min, max) {
                (Some(min), Some(max)) => format!("{min} to {max} characters"),
                (Some(min), None) => format!("at least {min} characters"),
                (_, max) => format!("at most {} characters", max.unwrap_or_default()),
            };
            out.push(Diagnostic::new(
                Code::LengthOutOfRange,
                node.span.clone(),
                format!("`{}` must be {bound}, found {length}", place.path),
            ));
        }
        if let Some(pattern) = schema.get("pattern").and_then(Schema::as_str) {
            match self.patterns.get(pattern) {
                Some(Ok(regex)) if regex.is_match(text) => {}
                Some(Ok(_)) => out.push(
                    Diagnostic::new(
                        Code::PatternMismatch,
                        node.span.clone(),
                        format!("`{}` value `{}` does not match `{pattern}`", place.path, shorten(text)),
                    )
                    .with_help(pattern_help(pattern)),
                ),
                // Fail closed: a check that cannot run is an error, never a silent pass.
                Some(Err(_)) | None => out.push(Diagnostic::new(
                    Code::PatternMismatch,
                    node.span.clone(),
                    format!(
                        "`{}` could not be checked: the schema's pattern `{pattern}` does not compile ({}); this is a bug in scaffold-aip, please report it",
                        place.path,
                        error_or_missing(self.patterns.get(pattern))
                    ),
                )),
            }
        }
    }

    fn check_sequence(
        &self,
        schema: &Schema,
        items: &[Node],
        node: &Node,
        place: &Place<'_>,
        out: &mut Vec<Diagnostic>,
    ) {
        if let Some(min) = schema.get("minItems").and_then(Schema::as_u64)
            && (items.len() as u64) < min
        {
            out.push(Diagnostic::new(
                Code::EmptyList,
                node.span.clone(),
                format!(
                    "`{}` needs at least {min} item{}",
                    place.path,
                    if min == 1 { "" } else { "s" }
                ),
            ));
        }
        if schema.get("uniqueItems").and_then(Schema::as_bool) == Some(true) {
            let mut first_at: HashMap<String, &Node> = HashMap::new();
            for item in items {
                let value = item.to_json();
                match first_at.entry(canonical(&value)) {
                    Entry::Occupied(first) => out.push(
                        Diagnostic::new(
                            Code::DuplicateItem,
                            item.span.clone(),
                            format!("`{}` lists {value} twice", place.path),
                        )
                        .with_label(first.get().span.clone(), "first listed here"),
                    ),
                    Entry::Vacant(slot) => {
                        slot.insert(item);
                    }
                }
            }
        }
        if let Some(item_schema) = schema.get("items") {
            for (i, item) in items.iter().enumerate() {
                let child = Place {
                    path: format!("{}[{i}]", place.path),
                    key_span: None,
                    fallback: place.fallback,
                };
                self.check_node(item_schema, item, &child, out);
            }
        }
    }

    fn check_mapping(&self, schema: &Schema, node: &Node, place: &Place<'_>, out: &mut Vec<Diagnostic>) {
        let entries = node.as_mapping().unwrap_or_default();
        let properties = schema.get("properties").and_then(Schema::as_object);
        if let Some(required) = schema.get("required").and_then(Schema::as_array) {
            let at = place.key_span.clone().unwrap_or_else(|| {
                if place.path.is_empty() {
                    place.fallback.clone()
                } else {
                    node.span.start..node.span.start
                }
            });
            for field in required.iter().filter_map(Schema::as_str) {
                if !entries.iter().any(|e| e.key == field) {
                    let path = join(&place.path, field);
                    out.push(Diagnostic::new(
                        Code::MissingField,
                        at.clone(),
                        format!("missing required field `{path}`"),
                    ));
                }
            }
        }
        let closed = schema.get("additionalProperties").and_then(Schema::as_bool) == Some(false);
        let known: Vec<&str> = properties
            .map(|p| p.keys().map(String::as_str).collect())
            .unwrap_or_default();
        for entry in entries {
            let path = join(&place.path, &entry.key);
            match properties.and_then(|p| p.get(&entry.key)) {
                Some(property) => {
                    let child = Place {
                        path,
                        key_span: Some(entry.key_span.clone()),
                        fallback: place.fallback,
                    };
                    self.check_node(property, &entry.value, &child, out);
                }
                None if closed => {
                    let mut diagnostic = Diagnostic::new(
                        Code::UnknownKey,
                        entry.key_span.clone(),
                        format!("unknown key `{path}`"),
                    );
                    diagnostic.help = Some(match closest(&entry.key, &known) {
                        Some(near) => format!("did you mean `{near}`?"),
                        None => format!("allowed here: {}", list(&known)),
                    });
                    out.push(diagnostic);
                }
                None => {
                    if let Some(near) = closest(&entry.key, &known) {
                        out.push(
                            Diagnostic::new(
                                Code::LikelyTypo,
                                entry.key_span.clone(),
                                format!("unknown key `{path}` is kept, but looks like a misspelt `{near}`"),
                            )
                            .with_help(format!("did you mean `{near}`?")),
                        );
                    }
                }
            }
        }
    }
}

/// `value` as JSON text with object keys sorted: two values are equal exactly when their
/// texts are (JSON objects compare without regard to key order).
fn canonical(value: &Schema) -> String {
    match value {
        Schema::Object(object) => {
            let mut entries: Vec<_> = object.iter().collect();
            entries.sort_by_key(|(key, _)| *key);
            let fields: Vec<String> = entries
                .into_iter()
                .map(|(key, value)| format!("{}:{}", Schema::from(key.as_str()), canonical(value)))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        Schema::Array(items) => format!("[{}]", items.iter().map(canonical).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

/// What a pattern that did not compile failed with.
fn error_or_missing(compiled: Option<&Result<Regex, String>>) -> &str {
    match compiled {
        Some(Err(error)) => error,
        _ => "not compiled",
    }
}

/// Compiles every `pattern` once. The schema's patterns are ECMA-262 ones; `regex-lite` reads
/// `\d` and `\w` as ECMA does (ASCII only). Features it lacks (look-around, backreferences)
/// fail to compile here and are then reported on every value they should check.
fn collect_patterns(schema: &Schema, into: &mut HashMap<String, Result<Regex, String>>) {
    match schema {
        Schema::Object(object) => {
            if let Some(pattern) = object.get("pattern").and_then(Schema::as_str) {
                into.insert(
                    pattern.to_string(),
                    Regex::new(pattern).map_err(|error| error.to_string()),
                );
            }
            object.values().for_each(|v| collect_patterns(v, into));
        }
        Schema::Array(items) => items.iter().for_each(|v| collect_patterns(v, into)),
        _ => {}
    }
}

fn type_matches(expected: &str, value: &Value) -> bool {
    match (expected, value) {
        ("string", Value::String(_)) => true,
        ("boolean", Value::Bool(_)) => true,
        ("object", Value::Mapping(_)) => true,
        ("array", Value::Sequence(_)) => true,
        ("null", Value::Null) => true,
        ("number", Value::Number(_) | Value::NonFiniteFloat) => true,
        ("integer", Value::Number(n)) => !n.is_f64(),
        _ => false,
    }
}

fn type_label(json_type: &str) -> &'static str {
    match json_type {
        "string" => "a string",
        "boolean" => "a boolean",
        "object" => "a mapping",
        "array" => "a list",
        "integer" => "an integer",
        "number" => "a number",
        _ => "null",
    }
}

fn wrong_type(expected: &str, node: &Node, place: &Place<'_>) -> Diagnostic {
    wrong_type_named(type_label(expected), node, place)
}

fn wrong_type_named(expected: &str, node: &Node, place: &Place<'_>) -> Diagnostic {
    let found = node.value.type_name();
    let diagnostic = Diagnostic::new(
        Code::WrongType,
        node.span.clone(),
        format!("`{}` must be {expected}, found {found}", place.path),
    );
    let help = match (&node.value, expected) {
        (Value::Number(_) | Value::NonFiniteFloat | Value::Bool(_), e) if e.contains("string") => {
            Some("YAML read this as a number or boolean; quote it to make it a string".to_string())
        }
        (Value::String(s), "a boolean")
            if matches!(s.to_ascii_lowercase().as_str(), "yes" | "no" | "on" | "off" | "y" | "n") =>
        {
            Some("YAML 1.2 booleans are `true` and `false`".to_string())
        }
        (Value::Null, _) => Some("the key has no value; give one or remove the key".to_string()),
        _ => None,
    };
    match help {
        Some(help) => diagnostic.with_help(help),
        None => diagnostic,
    }
}

fn check_enum(allowed: &[Schema], node: &Node, place: &Place<'_>, out: &mut Vec<Diagnostic>) {
    if allowed.contains(&node.to_json()) {
        return;
    }
    let names: Vec<&str> = allowed.iter().filter_map(Schema::as_str).collect();
    let shown = match &node.value {
        Value::String(s) => format!("`{}`", shorten(s)),
        other => other.type_name().to_string(),
    };
    let mut diagnostic = Diagnostic::new(
        Code::NotAllowed,
        node.span.clone(),
        format!("`{}` cannot be {shown}; expected {}", place.path, list(&names)),
    );
    if let Some(near) = node.as_str().and_then(|s| closest(s, &names)) {
        diagnostic = diagnostic.with_help(format!("did you mean `{near}`?"));
    }
    out.push(diagnostic);
}

fn pattern_help(pattern: &str) -> String {
    match pattern {
        p if p.contains("a-f0-9") => "a commit SHA of the ACP repository: 7 to 40 lowercase hex digits".into(),
        p if p.contains(r"\d+\.\d+\.\d+") => "a semantic version such as `0.1.0` or `1.2.0-beta.1`".into(),
        p if p.contains("{1,63}") => {
            "2 to 64 characters: lowercase letters, digits and `-`, not starting with `-`".into()
        }
        p if p.contains("{0,63}") => {
            "1 to 64 characters: lowercase letters, digits and `-`, not starting with `-`".into()
        }
        _ => format!("the value must match `{pattern}`"),
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn list(names: &[&str]) -> String {
    names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
}

fn shorten(text: &str) -> String {
    if text.chars().count() <= 60 {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(60).collect::<String>())
    }
}

/// The known name closest to `word`, if it is close enough to be a likely typo.
pub fn closest<'k>(word: &str, known: &[&'k str]) -> Option<&'k str> {
    let normalise = |s: &str| s.to_ascii_lowercase().replace(['_', '-'], "");
    let word_n = normalise(word);
    known
        .iter()
        .map(|k| {
            let distance = if normalise(k) == word_n {
                0
            } else {
                strsim::damerau_levenshtein(word, k)
            };
            (distance, *k)
        })
        // One edit from a word of 3+ letters, or two edits from one of 5+, is a likely typo;
        // anything further is a different key.
        .filter(|(distance, k)| {
            let shorter = k.len().min(word.len());
            *distance == 0 || (*distance == 1 && shorter >= 3) || (*distance == 2 && shorter >= 5)
        })
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_text_is_equal_exactly_when_values_are() {
        use serde_json::json;
        let pairs = [
            (
                json!({"a": 1, "b": [2, {"d": 1, "c": 2}]}),
                json!({"b": [2, {"c": 2, "d": 1}], "a": 1}),
            ),
            (json!(1), json!(1.0)),
            (json!("1"), json!(1)),
            (json!(["a,b"]), json!(["a", "b"])),
            (json!({"a:1": 2}), json!({"a": "1:2"})),
        ];
        for (a, b) in pairs {
            assert_eq!(canonical(&a) == canonical(&b), a == b, "{a} / {b}");
        }
    }

    /// Every `pattern` of the committed schema compiles (`collect_patterns` skips one that does
    /// not, which would silently drop the check), and they match as JSON Schema's ECMA-262
    /// patterns do: `\d` is an ASCII digit.
    #[test]
    fn every_schema_pattern_compiles_and_matches_ascii() {
        let schema = super::super::model::json_schema();
        let mut found = Vec::new();
        fn walk(schema: &Schema, found: &mut Vec<String>) {
            match schema {
                Schema::Object(object) => {
                    if let Some(pattern) = object.get("pattern").and_then(Schema::as_str) {
                        found.push(pattern.to_string());
                    }
                    object.values().for_each(|v| walk(v, found));
                }
                Schema::Array(items) => items.iter().for_each(|v| walk(v, found)),
                _ => {}
            }
        }
        walk(&schema, &mut found);
        let checker = SchemaChecker::new(schema);
        assert!(found.len() >= 4, "{found:?}");
        for pattern in &found {
            assert!(
                matches!(checker.patterns.get(pattern), Some(Ok(_))),
                "{pattern} does not compile"
            );
        }
        use super::super::model::{ACP_REV_PATTERN, ID_PATTERN, TAG_PATTERN, VERSION_PATTERN};
        let cases: &[(&str, &[&str], &[&str])] = &[
            (
                ID_PATTERN,
                &["echo-server", "a1", "0-x"],
                &["a", "Echo", "a_b", "-a", "é-a"],
            ),
            (TAG_PATTERN, &["a", "ai-agent", "x9"], &["", "A", "a b", "-x"]),
            (
                VERSION_PATTERN,
                &["0.1.0", "1.2.0-beta.1", "10.20.30+build_5"],
                &["1.2", "v1.2.3", "1.2.3-", "\u{661}.2.3", "1.2.3\n"],
            ),
            (
                ACP_REV_PATTERN,
                &["0fc1832", "0fc18323aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],
                &["0FC1832", "0fc183", "0fc1832g"],
            ),
        ];
        for (pattern, good, bad) in cases {
            let Ok(regex) = &checker.patterns[*pattern] else {
                panic!("{pattern} does not compile")
            };
            for text in *good {
                assert!(regex.is_match(text), "{pattern} should match {text:?}");
            }
            for text in *bad {
                assert!(!regex.is_match(text), "{pattern} should not match {text:?}");
            }
        }
    }

    /// A pattern `regex-lite` cannot compile (an ECMA-262 look-ahead) used to be dropped, so
    /// the field went unchecked and any value passed; it is now an error on the value.
    #[test]
    fn a_pattern_that_does_not_compile_fails_closed() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"id": {"type": "string", "pattern": "^(?=a)[a-z]+$"}},
        });
        let checker = SchemaChecker::new(schema);
        let text = "id: anything\n";
        let file = crate::source::SourceFile::new("ACP.md", text.to_string());
        let (root, _) = crate::yaml::parse(&file, text, 1);
        let found = checker.check(&root.expect("a mapping"), &(0..0));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].code, Code::PatternMismatch);
        assert!(found[0].message.contains("does not compile"), "{}", found[0].message);
    }

    #[test]
    fn typo_suggestions() {
        assert_eq!(closest("trasnport", &["transport", "tags"]), Some("transport"));
        assert_eq!(closest("acpRev", &["acp_rev", "tier"]), Some("acp_rev"));
        assert_eq!(closest("Server", &["client", "server"]), Some("server"));
        assert_eq!(closest("x-vendor", &["transport", "tags"]), None);
        assert_eq!(closest("tag", &["tags"]), Some("tags"));
        assert_eq!(closest("ids", &["kind"]), None);
        assert_eq!(
            closest("idx", &["id", "kind"]),
            None,
            "two-letter keys are not guessed at"
        );
        assert_eq!(closest("kinf", &["kind", "name"]), Some("kind"));
    }
}
