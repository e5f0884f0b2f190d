//! Classifying `$defs` entries into the constructs the generator emits.

use std::borrow::Cow;

use serde_json::{Map, Value};

/// A JSON primitive a newtype, an open enum's fallback or an untagged branch can be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Primitive {
    /// `type: string`.
    String,
    /// `type: integer`, with its `format` if any (`int32`, `uint16`, ...).
    Integer(Option<String>),
    /// `type: number`.
    Number,
    /// `type: boolean`.
    Boolean,
    /// `type: null`.
    Null,
    /// `type: array` (items described elsewhere).
    Array,
    /// `type: object` without properties: a JSON map.
    Map,
    /// A `$ref` to another definition.
    Ref(String),
    /// No constraint at all: any JSON value.
    Any,
}

/// One variant of a tagged union.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaggedVariant {
    /// The tag's constant value (`agent_message_chunk`).
    pub tag: String,
    /// The payload definition (`allOf: [{$ref}]`), if the branch has one.
    pub payload: Option<String>,
    /// Properties written inline in the branch besides the tag (the v0.4–v0.6 shape).
    pub inline_properties: Vec<String>,
}

/// What a definition is, for code generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// An object with properties.
    Struct {
        /// Property names in schema order.
        properties: Vec<String>,
        /// The required ones.
        required: Vec<String>,
    },
    /// A named alias of a primitive (`SessionId` = string).
    Newtype(Primitive),
    /// Constants only (closed), or constants plus one fallback primitive (open).
    Enum {
        /// The constants, as JSON.
        values: Vec<Value>,
        /// The branch that takes any other value, for open enums.
        fallback: Option<Primitive>,
    },
    /// Branches told apart by a constant property.
    Tagged {
        /// The tag property (`sessionUpdate`, `type`, `outcome`).
        tag: String,
        /// The tagged branches.
        variants: Vec<TaggedVariant>,
        /// Branches without the tag, tried in order when no tag matches.
        fallback: Vec<Primitive>,
    },
    /// Branches tried in order (`RequestId`: null, integer, string).
    Untagged(Vec<Primitive>),
    /// An object with its own properties and a union (`properties` beside `oneOf`/`anyOf`).
    StructWithUnion {
        /// Property names in schema order.
        properties: Vec<String>,
        /// The union.
        union: Box<Shape>,
    },
}

/// Classifies every `$defs` entry of `schema`; `Err` lists the ones it cannot.
pub fn classify_all(schema: &Value) -> Result<Vec<(String, Shape)>, Vec<String>> {
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .ok_or_else(|| vec!["no $defs".to_string()])?;
    let mut shapes = Vec::new();
    let mut unsupported = Vec::new();
    for (name, def) in defs {
        match classify(def) {
            Ok(shape) => shapes.push((name.clone(), shape)),
            Err(why) => unsupported.push(format!("{name}: {why}")),
        }
    }
    if unsupported.is_empty() {
        Ok(shapes)
    } else {
        Err(unsupported)
    }
}

/// `enum: [..]` (the revisions of early August 2025 write closed enums so) as the `oneOf` of
/// constants every later revision writes; any other definition unchanged.
pub fn normalized(def: &Value) -> Cow<'_, Value> {
    let Some(object) = def.as_object() else {
        return Cow::Borrowed(def);
    };
    let Some(values) = object.get("enum").and_then(Value::as_array) else {
        return Cow::Borrowed(def);
    };
    if object.contains_key("oneOf") || object.contains_key("anyOf") {
        return Cow::Borrowed(def);
    }
    let mut object = object.clone();
    object.remove("enum");
    object.remove("type");
    let branches = values
        .iter()
        .map(|value| serde_json::json!({ "const": value }))
        .collect();
    object.insert("oneOf".to_string(), Value::Array(branches));
    Cow::Owned(Value::Object(object))
}

/// Classifies one definition.
pub fn classify(def: &Value) -> Result<Shape, String> {
    let def = normalized(def);
    let object = def.as_object().ok_or("not an object")?;
    let union = object
        .get("oneOf")
        .or_else(|| object.get("anyOf"))
        .and_then(Value::as_array);
    let properties = property_names(object);
    match union {
        Some(branches) => {
            let union = classify_union(branches)?;
            if properties.is_empty() {
                Ok(union)
            } else {
                Ok(Shape::StructWithUnion {
                    properties,
                    union: Box::new(union),
                })
            }
        }
        None if !properties.is_empty() => Ok(Shape::Struct {
            properties,
            required: strings(object.get("required")),
        }),
        None => Ok(Shape::Newtype(primitive(object)?)),
    }
}

fn classify_union(branches: &[Value]) -> Result<Shape, String> {
    let consts: Vec<Value> = branches.iter().filter_map(|b| b.get("const").cloned()).collect();
    let others: Vec<&Value> = branches.iter().filter(|b| b.get("const").is_none()).collect();
    if !consts.is_empty() {
        return match others.as_slice() {
            [] => Ok(Shape::Enum {
                values: consts,
                fallback: None,
            }),
            [fallback] => Ok(Shape::Enum {
                values: consts,
                fallback: Some(primitive(fallback.as_object().ok_or("branch is not an object")?)?),
            }),
            _ => Err("constants mixed with several non-constant branches".into()),
        };
    }
    if let Some(tag) = tag_property(branches) {
        let mut variants = Vec::new();
        let mut fallback = Vec::new();
        for branch in branches {
            let object = branch.as_object().ok_or("branch is not an object")?;
            match object
                .get("properties")
                .and_then(|p| p.get(&tag))
                .and_then(|t| t.get("const"))
            {
                Some(value) => {
                    let tag_value = value.as_str().ok_or("tag constant is not a string")?.to_string();
                    let payload = payload_ref(branch).map(ref_name);
                    let inline_properties = property_names(object).into_iter().filter(|p| *p != tag).collect();
                    variants.push(TaggedVariant {
                        tag: tag_value,
                        payload,
                        inline_properties,
                    });
                }
                None => fallback.push(primitive(object)?),
            }
        }
        return Ok(Shape::Tagged {
            tag,
            variants,
            fallback,
        });
    }
    let branches = branches
        .iter()
        .map(|b| primitive(b.as_object().ok_or("branch is not an object")?))
        .collect::<Result<_, _>>()?;
    Ok(Shape::Untagged(branches))
}

/// The payload a tagged branch refers to: its `allOf: [{$ref}]`, or (the first revision) a
/// `$ref` beside the tag's `properties`.
pub fn payload_ref(branch: &Value) -> Option<&str> {
    branch
        .get("allOf")
        .and_then(Value::as_array)
        .and_then(|all| all.iter().find_map(|a| a.get("$ref")))
        .or_else(|| branch.get("$ref"))
        .and_then(Value::as_str)
}

/// The property every tagged branch fixes with a string constant, if there is one.
fn tag_property(branches: &[Value]) -> Option<String> {
    let const_props = |b: &Value| -> Vec<String> {
        b.get("properties")
            .and_then(Value::as_object)
            .map(|p| {
                p.iter()
                    .filter(|(_, v)| v.get("const").is_some_and(Value::is_string))
                    .map(|(k, _)| k.clone())
                    .collect()
            })
            .unwrap_or_default()
    };
    let tagged: Vec<Vec<String>> = branches.iter().map(const_props).filter(|p| !p.is_empty()).collect();
    let first = tagged.first()?;
    first.iter().find(|p| tagged.iter().all(|t| t.contains(p))).cloned()
}

fn primitive(object: &Map<String, Value>) -> Result<Primitive, String> {
    if let Some(target) = object.get("$ref").and_then(Value::as_str) {
        return Ok(Primitive::Ref(ref_name(target)));
    }
    if let Some(target) = object
        .get("allOf")
        .and_then(Value::as_array)
        .and_then(|all| match all.as_slice() {
            [only] => only.get("$ref").and_then(Value::as_str),
            _ => None,
        })
    {
        return Ok(Primitive::Ref(ref_name(target)));
    }
    let types: Vec<&str> = match object.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).filter(|t| *t != "null").collect(),
        None if object.get("properties").is_some() => vec!["object"],
        None => return Ok(Primitive::Any),
        Some(other) => return Err(format!("unsupported `type`: {other}")),
    };
    match types.as_slice() {
        ["string"] => Ok(Primitive::String),
        ["integer"] => Ok(Primitive::Integer(
            object.get("format").and_then(Value::as_str).map(str::to_string),
        )),
        ["number"] => Ok(Primitive::Number),
        ["boolean"] => Ok(Primitive::Boolean),
        ["null"] | [] => Ok(Primitive::Null),
        ["array"] => Ok(Primitive::Array),
        ["object"] => Ok(Primitive::Map),
        other => Err(format!("unsupported type union {other:?}")),
    }
}

fn property_names(object: &Map<String, Value>) -> Vec<String> {
    object
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

fn strings(value: Option<&Value>) -> Vec<String> {
    value
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

/// `#/$defs/Name` → `Name`.
pub fn ref_name(target: &str) -> String {
    target.rsplit('/').next().unwrap_or(target).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_enum_keyword_is_a_closed_enum() {
        let def = json!({"enum": ["read", "edit"], "type": "string"});
        assert_eq!(
            classify(&def),
            Ok(Shape::Enum {
                values: vec![json!("read"), json!("edit")],
                fallback: None
            })
        );
        // Anything else is left as it is.
        let plain = json!({"type": "string"});
        assert!(matches!(normalized(&plain), Cow::Borrowed(_)));
    }

    #[test]
    fn a_ref_beside_the_tag_is_the_payload() {
        // As `allOf: [{$ref}]` is.
        let union = json!({"oneOf": [
            {"$ref": "#/$defs/ToolCall", "properties": {"kind": {"const": "toolCall", "type": "string"}}},
            {"allOf": [{"$ref": "#/$defs/Plan"}], "properties": {"kind": {"const": "plan", "type": "string"}}}
        ]});
        let Ok(Shape::Tagged { variants, .. }) = classify(&union) else {
            panic!("{:?}", classify(&union))
        };
        let payloads: Vec<Option<&str>> = variants.iter().map(|v| v.payload.as_deref()).collect();
        assert_eq!(payloads, [Some("ToolCall"), Some("Plan")]);
    }
}
