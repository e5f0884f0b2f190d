//! What the generator accepts, checked before any heavy work: the size limits, local
//! `#/$defs/Name` references that name a definition, and definition names that are Rust type
//! names. A schema is untrusted input (it may come from anywhere), so each check ends in an
//! error naming what and where, never in a panic or unbounded memory.

use std::io::Read;
use std::path::Path;

use serde_json::{Map, Value};

use super::names;

/// The largest `schema.json` or `meta.json` read, in bytes (2 MiB: the largest upstream
/// schema is about 290 KB; what generating costs grows with the size, up to about 500 MB at
/// this limit for a schema made to be expensive).
pub const MAX_INPUT_BYTES: u64 = 2 * 1024 * 1024;

/// The most `$defs` entries a schema may have (the upstream schemas have under 200).
pub const MAX_DEFINITIONS: usize = 2_000;

/// The most methods `meta.json` (or the `x-method` annotations) may list (upstream: about 25).
pub const MAX_METHODS: usize = 500;

/// The most generated items (definitions plus the structs of inline objects and the enums of
/// unions beside properties) and members (fields, variants, constants, branches) a module may
/// have, checked before printing: what printing costs grows with them.
pub const MAX_PLANNED: usize = 50_000;

/// Reads a file of at most [`MAX_INPUT_BYTES`] and parses it as JSON.
pub fn read_json(path: &Path) -> Result<Value, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut text = String::new();
    file.take(MAX_INPUT_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if text.len() as u64 > MAX_INPUT_BYTES {
        return Err(format!(
            "{}: larger than {} MiB, the most regen reads (an ACP schema is a few hundred KB)",
            path.display(),
            MAX_INPUT_BYTES / (1024 * 1024)
        ));
    }
    serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))
}

/// Checks the definition count, the definition names and every `$ref`; `Err` lists each
/// problem (the count alone when it is over the limit).
pub fn check(schema: &Value) -> Result<(), Vec<String>> {
    let Some(defs) = schema.get("$defs").and_then(Value::as_object) else {
        return Err(vec!["the schema has no `$defs`".to_string()]);
    };
    if defs.len() > MAX_DEFINITIONS {
        return Err(vec![format!(
            "the schema has {} definitions, more than the {MAX_DEFINITIONS} regen accepts",
            defs.len()
        )]);
    }
    let mut problems: Vec<String> = defs
        .keys()
        .filter(|name| !names::is_type_name(name))
        .map(|name| format!("definition `{name}` is not a Rust type name (letters, digits and `_`, not a keyword)"))
        .collect();
    let mut refs = RefCheck {
        defs,
        problems: Vec::new(),
    };
    refs.schema(schema, &mut String::new());
    problems.extend(refs.problems);
    if problems.is_empty() { Ok(()) } else { Err(problems) }
}

/// Keywords whose value is one schema.
const ONE_SCHEMA: &[&str] = &[
    "additionalProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "items",
    "additionalItems",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
];

/// Keywords whose value is a list of schemas.
const SCHEMA_LISTS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems", "items"];

/// Keywords whose value maps names to schemas.
const SCHEMA_MAPS: &[&str] = &[
    "$defs",
    "definitions",
    "properties",
    "patternProperties",
    "dependentSchemas",
];

/// Walks the schema positions of a schema (not `const`, `default` or other values, where a
/// `$ref` key is data) and collects each bad reference with the JSON pointer of where it is.
struct RefCheck<'a> {
    defs: &'a Map<String, Value>,
    problems: Vec<String>,
}

impl RefCheck<'_> {
    fn schema(&mut self, schema: &Value, at: &mut String) {
        let Some(object) = schema.as_object() else {
            return;
        };
        for (key, value) in object {
            if key == "$ref" {
                self.reference(value, at);
                continue;
            }
            let len = at.len();
            push_segment(at, key);
            if ONE_SCHEMA.contains(&key.as_str()) && value.is_object() {
                self.schema(value, at);
            } else if SCHEMA_LISTS.contains(&key.as_str())
                && let Some(list) = value.as_array()
            {
                for (index, item) in list.iter().enumerate() {
                    let len = at.len();
                    push_segment(at, &index.to_string());
                    self.schema(item, at);
                    at.truncate(len);
                }
            } else if SCHEMA_MAPS.contains(&key.as_str())
                && let Some(map) = value.as_object()
            {
                for (name, item) in map {
                    let len = at.len();
                    push_segment(at, name);
                    self.schema(item, at);
                    at.truncate(len);
                }
            }
            at.truncate(len);
        }
    }

    fn reference(&mut self, value: &Value, at: &str) {
        let at = if at.is_empty() { "/" } else { at };
        let Some(target) = value.as_str() else {
            self.problems.push(format!("the `$ref` at `{at}` is not a string"));
            return;
        };
        let problem = match target.strip_prefix("#/$defs/") {
            Some(name) if self.defs.contains_key(name) => return,
            Some(_) => "names no definition of this schema",
            None if target.starts_with('#') => {
                "is not of the form `#/$defs/Name`, the only local reference regen follows"
            }
            None => "points outside the schema; regen reads one file and follows only `#/$defs/Name` references",
        };
        self.problems.push(format!("the `$ref` `{target}` at `{at}` {problem}"));
    }
}

/// Appends `/segment` to a JSON pointer, escaped (`~` → `~0`, `/` → `~1`).
fn push_segment(pointer: &mut String, segment: &str) {
    pointer.push('/');
    pointer.push_str(&segment.replace('~', "~0").replace('/', "~1"));
}
