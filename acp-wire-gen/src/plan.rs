//! Planning: every `$defs` entry becomes an [`Item`] (the generator's model of one Rust
//! item), every property a [`Field`] with its Rust type and serde behaviour. Emission
//! ([`super::emit`]) only prints what the plan decided.
//!
//! The field rules (they reproduce how the upstream crate serialises, so messages
//! round-trip with it):
//!
//! | schema | Rust | absent / `null` / value |
//! |---|---|---|
//! | required | `T` (`Option<T>` if nullable) | error / error (or `None`) / value |
//! | optional with a `default` | `T`, always written | default / error / value |
//! | optional list or map | `Vec<T>` / map, left out when empty | empty / error / value |
//! | optional | `Option<T>`, left out when `None` | `None` / `None` / value |
//! | optional, patch semantics ([`PATCH_FIELDS`]) | `Patch<T>` | `Unchanged` / `Clear` / `Set` |
//!
//! The leniency annotations add a `deserialize_with`: `x-deserialize-default-on-error` (a
//! value that does not fit becomes the default), `x-deserialize-skip-invalid-items` (list items
//! that do not fit are dropped), `x-deserialize-default-on-null` (`null` becomes empty).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::names::{self, Scope};
use super::shape::{self, Primitive, Shape};

/// Fields whose `null` means "clear" while absent means "leave unchanged". A JSON Schema
/// cannot say this (both are `type: [T, "null"]`, not required); the upstream protocol docs
/// do, and the upstream crate models exactly these as three-state. `(definition, property)`.
/// The schema's own descriptions say it too, and the planner reads them (this list is what
/// they say in the v1 revisions, kept for a schema without descriptions).
pub const PATCH_FIELDS: &[(&str, &str)] = &[
    ("SessionInfoUpdate", "title"),
    ("SessionInfoUpdate", "updatedAt"),
    ("CompactionUpdate", "summary"),
    ("CompactionUpdate", "error"),
    ("CompactionUpdate", "_meta"),
];

/// The JSON-RPC envelope definitions. The generator does not emit them (nor anything that
/// refers to them): the typed method enums of [`super::dispatch`] take their names and do
/// their job.
pub const ENVELOPES: &[&str] = &[
    "AgentRequest",
    "AgentResponse",
    "AgentNotification",
    "ClientRequest",
    "ClientResponse",
    "ClientNotification",
];

/// A Rust type a field or variant payload can have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ty {
    /// A generated type (boxed when it would make a type infinitely large).
    Named {
        /// The type's name.
        name: String,
        /// Whether it is held in a `Box`.
        boxed: bool,
    },
    /// `String`.
    String,
    /// An integer type (`u16`, `i64`, ...).
    Int(&'static str),
    /// `f64`.
    F64,
    /// `bool`.
    Bool,
    /// Any JSON value.
    Json,
    /// A JSON object of anything (`Map<String, Value>`).
    JsonMap,
    /// `_meta`.
    Meta,
    /// A list.
    Vec(Box<Ty>),
    /// A JSON object whose values have one type (`BTreeMap<String, T>`).
    Map(Box<Ty>),
}

impl Ty {
    fn named(name: impl Into<String>) -> Ty {
        Ty::Named {
            name: name.into(),
            boxed: false,
        }
    }

    /// Whether `Default::default()` exists for this type without looking at other items.
    pub fn has_std_default(&self) -> bool {
        !matches!(self, Ty::Named { .. })
    }

    /// Whether the type is a list.
    pub fn is_vec(&self) -> bool {
        matches!(self, Ty::Vec(_))
    }

    /// Whether the type is a list or a map (empty is its natural "absent").
    pub fn is_collection(&self) -> bool {
        matches!(self, Ty::Vec(_) | Ty::Map(_) | Ty::JsonMap)
    }
}

/// How a field is present on the wire.
#[derive(Debug, Clone, PartialEq)]
pub enum Form {
    /// Required: `T`.
    Required,
    /// Required but nullable: `Option<T>`, `None` written as `null`.
    RequiredNullable,
    /// Optional: `Option<T>`, `None` left out; `null` reads as `None`.
    Optional,
    /// Optional list or map (not nullable, no default): `T`, left out when empty.
    OmitEmpty,
    /// Optional with patch semantics: `Patch<T>`.
    Patch,
    /// Optional with a schema default: `T`, always written.
    Default(Value),
}

/// One struct field.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The JSON key.
    pub wire: String,
    /// The Rust field name.
    pub name: String,
    /// The value type (without the `Option` / `Patch` of its form).
    pub ty: Ty,
    /// How it is present.
    pub form: Form,
    /// `x-deserialize-default-on-error`.
    pub on_error: bool,
    /// `x-deserialize-default-on-null`.
    pub on_null: bool,
    /// `x-deserialize-skip-invalid-items`.
    pub skip_items: bool,
    /// The schema's description (emitted only with `--docs`).
    pub doc: Option<String>,
}

/// The payload of a tagged variant.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    /// Nothing but the tag.
    Unit,
    /// A type whose fields sit beside the tag (inline branch fields, the v0.4–v0.6 shape, get
    /// a struct of their own).
    Newtype(Ty),
}

/// One variant of a tagged union.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    /// The tag's value on the wire.
    pub tag: String,
    /// The Rust variant name.
    pub name: String,
    /// What it carries.
    pub payload: Payload,
    /// The branch description.
    pub doc: Option<String>,
}

/// A constant of an enum.
#[derive(Debug, Clone, PartialEq)]
pub struct Constant {
    /// The value on the wire.
    pub value: Value,
    /// The Rust variant name.
    pub name: String,
    /// The branch description.
    pub doc: Option<String>,
}

/// One branch of an untagged union (or the untagged fallback of a tagged one).
#[derive(Debug, Clone, PartialEq)]
pub struct Branch {
    /// The Rust variant name.
    pub name: String,
    /// What it carries; `None` for `null`.
    pub ty: Option<Ty>,
    /// For the catch-all branch of a tagged union: the tag, which must be a string for the
    /// branch to match.
    pub requires: Option<String>,
    /// The branch description.
    pub doc: Option<String>,
}

/// What one generated item is.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// A struct; `flatten` names the union enum flattened into it (`properties` + `oneOf`).
    Struct {
        /// Its fields in schema order.
        fields: Vec<Field>,
        /// `(field name, enum type)` of a flattened union.
        flatten: Option<(String, String)>,
    },
    /// A string newtype (`SessionId`).
    Newtype,
    /// Another name for a type (`ProtocolVersion = u16`).
    Alias(Ty),
    /// A struct around one value, read and written as that value: what an alias becomes when
    /// it refers to itself through other aliases (`A = Vec<B>`, `B = Option<A>`), which a
    /// Rust type alias cannot.
    Transparent(Ty),
    /// Constants; with `open`, the variant that keeps any other value.
    Enum {
        /// The constants.
        constants: Vec<Constant>,
        /// `(variant name, type)` of the catch-all.
        open: Option<(String, Ty)>,
    },
    /// A union told apart by a constant property.
    Tagged {
        /// The tag property.
        tag: String,
        /// The tagged variants.
        variants: Vec<Variant>,
        /// Untagged branches tried, in order, when no tag matches.
        fallback: Vec<Branch>,
    },
    /// A union tried in order.
    Untagged(Vec<Branch>),
    /// A request result the schema gives as `null` (early revisions: `authenticate`,
    /// `fs/write_text_file`): a unit struct written as `null`.
    Null,
}

/// A planned item with its name and description.
#[derive(Debug, Clone, PartialEq)]
pub struct Planned {
    /// The Rust (and schema) name.
    pub name: String,
    /// The description.
    pub doc: Option<String>,
    /// What it is.
    pub item: Item,
}

/// The plan of a whole schema.
#[derive(Debug, Default)]
pub struct Plan {
    /// Every item, by name.
    pub items: BTreeMap<String, Planned>,
    /// Constructs that were generated in a weaker form than the schema asks, and why.
    pub notes: Vec<String>,
}

impl Plan {
    /// How many items and members (fields, variants, constants, branches) the plan has: what
    /// printing it costs grows with this.
    pub fn size(&self) -> usize {
        let members = |item: &Item| match item {
            Item::Struct { fields, .. } => fields.len(),
            Item::Enum { constants, .. } => constants.len() + 1,
            Item::Tagged { variants, fallback, .. } => variants.len() + fallback.len(),
            Item::Untagged(branches) => branches.len(),
            Item::Newtype | Item::Alias(_) | Item::Transparent(_) | Item::Null => 0,
        };
        self.items.values().map(|planned| 1 + members(&planned.item)).sum()
    }

    /// Adds a [`Item::Null`] item for each result type the method table found as `null` in
    /// a response union (the names are not definitions, so nothing else plans them); `Err`
    /// names one that a planned type already has.
    pub fn add_null_results(&mut self, names: &BTreeSet<String>) -> Result<(), Vec<String>> {
        let taken: Vec<String> = names
            .iter()
            .filter_map(|name| {
                if self.items.contains_key(name) {
                    Some(format!(
                        "`{name}` is a `null` result and also the name of a generated type"
                    ))
                } else if !names::is_type_name(name) {
                    Some(format!("the `null` result titled `{name}` cannot be a Rust type name"))
                } else {
                    None
                }
            })
            .collect();
        if !taken.is_empty() {
            return Err(taken);
        }
        for name in names {
            self.items.insert(
                name.clone(),
                Planned {
                    name: name.clone(),
                    doc: Some("The result of this request is `null`: it carries nothing.".to_string()),
                    item: Item::Null,
                },
            );
        }
        Ok(())
    }
}

/// Plans every definition of `schema` except the envelopes.
pub fn plan(schema: &Value) -> Result<Plan, Vec<String>> {
    let defs = schema
        .get("$defs")
        .and_then(Value::as_object)
        .ok_or_else(|| vec!["the schema has no `$defs`".to_string()])?;
    let mut planner = Planner {
        names: Scope::with(defs.keys().cloned()),
        plan: Plan::default(),
        pending: Vec::new(),
        errors: Vec::new(),
    };
    let skipped = envelopes(defs);
    for (name, def) in defs {
        if skipped.contains(name.as_str()) {
            continue;
        }
        planner.plan_definition(name, def);
    }
    while let Some((name, def)) = planner.pending.pop() {
        planner.plan_definition(&name, &def);
    }
    if !planner.errors.is_empty() {
        return Err(planner.errors);
    }
    let mut plan = planner.plan;
    wrap_recursive_aliases(&mut plan);
    refuse_bottomless_cycles(&plan)?;
    box_recursive_fields(&mut plan);
    Ok(plan)
}

/// The envelope definitions and every definition that refers to one (whole-message unions
/// such as v0.6's `AgentOutgoingMessage`): the method enums replace them all.
fn envelopes(defs: &Map<String, Value>) -> BTreeSet<&str> {
    // Who refers to whom, read once; then everything that reaches an envelope, found
    // backwards from the envelopes.
    let mut referrers: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for (name, def) in defs {
        let mut targets = BTreeSet::new();
        ref_targets(def, &mut targets);
        for target in targets {
            referrers.entry(target).or_default().insert(name.as_str());
        }
    }
    let mut skipped: BTreeSet<&str> = defs
        .keys()
        .map(String::as_str)
        .filter(|n| ENVELOPES.contains(n))
        .collect();
    let mut todo: Vec<&str> = skipped.iter().copied().collect();
    while let Some(name) = todo.pop() {
        for referrer in referrers.get(name).into_iter().flatten() {
            if skipped.insert(referrer) {
                todo.push(referrer);
            }
        }
    }
    skipped
}

/// The names of every `$ref` anywhere in `schema`.
fn ref_targets(schema: &Value, targets: &mut BTreeSet<String>) {
    match schema {
        Value::Object(object) => {
            for (key, value) in object {
                match value.as_str() {
                    Some(target) if key == "$ref" => {
                        targets.insert(shape::ref_name(target));
                    }
                    _ => ref_targets(value, targets),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| ref_targets(item, targets)),
        _ => {}
    }
}

struct Planner {
    names: Scope,
    plan: Plan,
    /// Inline object schemas that need a struct of their own: `(name, schema)`.
    pending: Vec<(String, Value)>,
    errors: Vec<String>,
}

fn description(schema: &Value) -> Option<String> {
    schema.get("description").and_then(Value::as_str).map(str::to_string)
}

/// Whether the schema's prose gives a property patch semantics (absent: unchanged, `null`:
/// cleared, a value: replaced): its definition's description says its fields "have patch
/// semantics" (v2's upserts: `ToolCallUpdate`, `TerminalUpdate`, `AgentMessage`, ...), or the
/// property's own says `null` clears it ("Set to null to clear", "`null` is an explicit clear
/// signal"). JSON Schema has no keyword for this, and upstream states it only in prose; the
/// same words in any revision give the same field, so no revision is special-cased.
fn says_patch(def: &Value, property: &Value) -> bool {
    let prose = |schema: &Value| {
        let text = schema.get("description").and_then(Value::as_str).unwrap_or_default();
        text.replace('`', "")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    };
    let (owner, own) = (prose(def), prose(property));
    owner.contains("patch semantics")
        || ["null clears", "null is an explicit clear", "set to null to clear"]
            .iter()
            .any(|words| own.contains(words))
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool).unwrap_or(false)
}

impl Planner {
    fn plan_definition(&mut self, name: &str, def: &Value) {
        let def = &*shape::normalized(def);
        let shape = match shape::classify(def) {
            Ok(shape) => shape,
            Err(why) => {
                self.errors.push(format!("{name}: {why}"));
                return;
            }
        };
        let item = match shape {
            Shape::Struct { .. } => Item::Struct {
                fields: self.fields(name, def),
                flatten: None,
            },
            Shape::Newtype(primitive) => match primitive {
                Primitive::String => Item::Newtype,
                other => Item::Alias(self.primitive_ty(name, &other, def)),
            },
            Shape::StructWithUnion { union, .. } => {
                let fields = self.fields(name, def);
                let mut field_names = Scope::with(fields.iter().map(|f| f.name.clone()));
                let field = field_names.claim("kind");
                let union_name = self.names.claim(&format!("{name}Kind"));
                let union_item = self.union_item(&union_name, def, &union);
                self.plan.items.insert(
                    union_name.clone(),
                    Planned {
                        name: union_name.clone(),
                        doc: None,
                        item: union_item,
                    },
                );
                Item::Struct {
                    fields,
                    flatten: Some((field, union_name)),
                }
            }
            union => self.union_item(name, def, &union),
        };
        self.plan.items.insert(
            name.to_string(),
            Planned {
                name: name.to_string(),
                doc: description(def),
                item,
            },
        );
    }

    fn union_item(&mut self, name: &str, def: &Value, shape: &Shape) -> Item {
        let branches: Vec<&Value> = def
            .get("oneOf")
            .or_else(|| def.get("anyOf"))
            .and_then(Value::as_array)
            .map(|b| b.iter().collect())
            .unwrap_or_default();
        match shape {
            Shape::Enum { fallback, .. } => {
                let mut variants = Scope::default();
                let constants = branches
                    .iter()
                    .filter_map(|b| {
                        let value = b.get("const")?.clone();
                        let label = b
                            .get("title")
                            .and_then(Value::as_str)
                            .map(str::to_string)
                            .unwrap_or_else(|| const_label(&value));
                        Some(Constant {
                            name: variants.claim(&names::camel(&label)),
                            value,
                            doc: description(b),
                        })
                    })
                    .collect();
                let open = fallback.as_ref().map(|primitive| {
                    let branch = branches.iter().find(|b| b.get("const").is_none()).copied();
                    let ty = self.primitive_ty(name, primitive, branch.unwrap_or(&Value::Null));
                    let wanted = if variants.contains("Other") { "Unknown" } else { "Other" };
                    (variants.claim(wanted), ty)
                });
                Item::Enum { constants, open }
            }
            Shape::Tagged { tag, .. } => {
                let mut scope = Scope::default();
                let mut variants = Vec::new();
                let mut untagged = Vec::new();
                for branch in branches {
                    let tag_value = branch
                        .get("properties")
                        .and_then(|p| p.get(tag))
                        .and_then(|t| t.get("const"))
                        .and_then(Value::as_str);
                    match tag_value {
                        Some(tag_value) => {
                            let variant_name = scope.claim(&names::camel(tag_value));
                            let payload = self.tagged_payload(name, &variant_name, tag, branch);
                            variants.push(Variant {
                                tag: tag_value.to_string(),
                                name: variant_name,
                                payload,
                                doc: description(branch),
                            });
                        }
                        None => {
                            let mut fallback = self.branch(name, &mut scope, branch);
                            fallback.requires = requires_string(branch, tag).then(|| tag.clone());
                            untagged.push(fallback);
                        }
                    }
                }
                Item::Tagged {
                    tag: tag.clone(),
                    variants,
                    fallback: untagged,
                }
            }
            Shape::Untagged(_) => {
                let mut scope = Scope::default();
                Item::Untagged(branches.into_iter().map(|b| self.branch(name, &mut scope, b)).collect())
            }
            Shape::Struct { .. } | Shape::Newtype(_) | Shape::StructWithUnion { .. } => {
                self.errors.push(format!("{name}: a union nested in a union"));
                Item::Untagged(Vec::new())
            }
        }
    }

    /// A branch's payload: its `allOf` ref, a struct made of its inline properties (the v0.4
    /// shape), or nothing.
    fn tagged_payload(&mut self, union: &str, variant: &str, tag: &str, branch: &Value) -> Payload {
        if let Some(target) = shape::payload_ref(branch) {
            return Payload::Newtype(Ty::named(shape::ref_name(target)));
        }
        let has_fields = branch
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| p.keys().any(|k| k != tag));
        if has_fields {
            let mut inline = branch.clone();
            if let Some(object) = inline.as_object_mut() {
                object.remove("description");
                if let Some(props) = object.get_mut("properties").and_then(Value::as_object_mut) {
                    props.remove(tag);
                }
                if let Some(required) = object.get_mut("required").and_then(Value::as_array_mut) {
                    required.retain(|r| r.as_str() != Some(tag));
                }
            }
            let name = self.names.claim(&format!("{union}{variant}"));
            self.pending.push((name.clone(), inline));
            Payload::Newtype(Ty::named(name))
        } else {
            Payload::Unit
        }
    }

    fn branch(&mut self, union: &str, scope: &mut Scope, branch: &Value) -> Branch {
        let doc = description(branch);
        let title = branch.get("title").and_then(Value::as_str);
        let open_object = ["additionalProperties", "unevaluatedProperties"]
            .iter()
            .any(|k| branch.get(k) == Some(&Value::Bool(true)));
        let (ty, nullable) = if open_object {
            // A catch-all branch ("any other tag, any other fields"): keep the whole object.
            (Ty::JsonMap, false)
        } else {
            self.ty(union, title.unwrap_or("Value"), branch)
        };
        let is_null = nullable && branch.get("type").and_then(Value::as_str) == Some("null");
        let label = match (title, &ty) {
            (Some(title), _) => names::camel(title),
            (None, _) if is_null => "Null".to_string(),
            (None, Ty::Named { name, .. }) => name.clone(),
            (None, other) => primitive_label(other).to_string(),
        };
        Branch {
            name: scope.claim(&label),
            ty: (!is_null).then_some(ty),
            requires: None,
            doc,
        }
    }

    fn fields(&mut self, owner: &str, def: &Value) -> Vec<Field> {
        let Some(properties) = def.get("properties").and_then(Value::as_object) else {
            return Vec::new();
        };
        let required: BTreeSet<&str> = def
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut scope = Scope::default();
        properties
            .iter()
            .map(|(wire, schema)| {
                let (ty, nullable) = self.ty(owner, wire, schema);
                let patch = PATCH_FIELDS.contains(&(owner, wire.as_str()))
                    || (!required.contains(wire.as_str()) && says_patch(def, schema));
                let form = if required.contains(wire.as_str()) {
                    if nullable {
                        Form::RequiredNullable
                    } else {
                        Form::Required
                    }
                } else if patch {
                    Form::Patch
                } else if let Some(default) = schema.get("default").filter(|_| !nullable) {
                    Form::Default(default.clone())
                } else if !nullable && ty.is_collection() {
                    Form::OmitEmpty
                } else {
                    Form::Optional
                };
                Field {
                    wire: wire.clone(),
                    name: scope.claim(&names::snake(wire)),
                    ty,
                    form,
                    on_error: flag(schema, "x-deserialize-default-on-error"),
                    on_null: flag(schema, "x-deserialize-default-on-null"),
                    skip_items: flag(schema, "x-deserialize-skip-invalid-items"),
                    doc: description(schema),
                }
            })
            .collect()
    }

    /// The Rust type of a property (or branch) schema, and whether it admits `null`.
    fn ty(&mut self, owner: &str, property: &str, schema: &Value) -> (Ty, bool) {
        let Some(object) = schema.as_object() else {
            return (Ty::Json, false); // `true` / `false` schemas
        };
        if property == "_meta" {
            return (Ty::Meta, true);
        }
        if let Some(target) = object.get("$ref").and_then(Value::as_str) {
            return (Ty::named(shape::ref_name(target)), false);
        }
        if let Some(all) = object.get("allOf").and_then(Value::as_array)
            && let [only] = all.as_slice()
        {
            return self.ty(owner, property, only);
        }
        if let Some(branches) = object
            .get("anyOf")
            .or_else(|| object.get("oneOf"))
            .and_then(Value::as_array)
        {
            let (nulls, others): (Vec<&Value>, Vec<&Value>) = branches
                .iter()
                .partition(|b| b.get("type").and_then(Value::as_str) == Some("null"));
            return match others.as_slice() {
                [only] => {
                    let (ty, nullable) = self.ty(owner, property, only);
                    (ty, nullable || !nulls.is_empty())
                }
                _ => (Ty::Json, !nulls.is_empty()),
            };
        }
        let (types, nullable): (Vec<&str>, bool) = match object.get("type") {
            Some(Value::String(t)) => (vec![t.as_str()], t == "null"),
            Some(Value::Array(list)) => {
                let types: Vec<&str> = list.iter().filter_map(Value::as_str).collect();
                let nullable = types.contains(&"null");
                (types.into_iter().filter(|t| *t != "null").collect(), nullable)
            }
            _ => (Vec::new(), false),
        };
        let ty = match types.as_slice() {
            ["string"] => Ty::String,
            ["integer"] => Ty::Int(int_type(object)),
            ["number"] => Ty::F64,
            ["boolean"] => Ty::Bool,
            ["array"] => {
                let items = object.get("items").map(|items| self.ty(owner, property, items).0);
                Ty::Vec(Box::new(items.unwrap_or(Ty::Json)))
            }
            ["object"] => self.object_ty(owner, property, object),
            [] if object.contains_key("properties") => self.object_ty(owner, property, object),
            _ => Ty::Json,
        };
        (ty, nullable)
    }

    fn object_ty(&mut self, owner: &str, property: &str, object: &Map<String, Value>) -> Ty {
        if object
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|p| !p.is_empty())
        {
            let name = self.names.claim(&format!("{owner}{}", names::camel(property)));
            self.pending.push((name.clone(), Value::Object(object.clone())));
            return Ty::named(name);
        }
        match object.get("additionalProperties") {
            Some(values @ Value::Object(_)) => Ty::Map(Box::new(self.ty(owner, property, values).0)),
            _ => Ty::JsonMap,
        }
    }

    fn primitive_ty(&mut self, owner: &str, primitive: &Primitive, schema: &Value) -> Ty {
        match primitive {
            Primitive::String => Ty::String,
            Primitive::Integer(_) => Ty::Int(schema.as_object().map(int_type).unwrap_or("i64")),
            Primitive::Number => Ty::F64,
            Primitive::Boolean => Ty::Bool,
            Primitive::Null | Primitive::Any => Ty::Json,
            Primitive::Array | Primitive::Map => self.ty(owner, "Value", schema).0,
            Primitive::Ref(name) => Ty::named(name.clone()),
        }
    }
}

/// Whether `branch` requires `property` and types it as a string (the catch-all branch of a
/// tagged union: "any other tag").
fn requires_string(branch: &Value, property: &str) -> bool {
    let required = branch
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(|r| r.iter().any(|p| p.as_str() == Some(property)));
    let typed = branch
        .get("properties")
        .and_then(|p| p.get(property))
        .and_then(|s| s.get("type"));
    required && typed.and_then(Value::as_str) == Some("string")
}

/// The integer type for a `format` (and `minimum: 0`).
fn int_type(object: &Map<String, Value>) -> &'static str {
    match object.get("format").and_then(Value::as_str) {
        Some("int8") => "i8",
        Some("int16") => "i16",
        Some("int32") => "i32",
        Some("uint8") => "u8",
        Some("uint16") => "u16",
        Some("uint32") => "u32",
        Some("uint64" | "uint") => "u64",
        _ if object.get("minimum").and_then(Value::as_f64).is_some_and(|m| m >= 0.0) => "u64",
        _ => "i64",
    }
}

fn const_label(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn primitive_label(ty: &Ty) -> &'static str {
    match ty {
        Ty::String => "String",
        Ty::Int(_) => "Integer",
        Ty::F64 => "Number",
        Ty::Bool => "Boolean",
        Ty::Vec(_) => "Array",
        Ty::Map(_) | Ty::JsonMap | Ty::Meta => "Object",
        Ty::Json | Ty::Named { .. } => "Value",
    }
}

/// How an item holds a named type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hold {
    /// By value, as a field or a tagged variant's payload (reading it reads part of the JSON).
    Inside,
    /// As its whole value: an alias, a wrapper, an untagged branch, an open enum's fallback,
    /// a flattened union (reading it reads the other type from the same JSON).
    Whole,
    /// Behind a list or a map.
    Behind,
}

/// Every named type an item refers to, and how.
fn holds(item: &Item) -> Vec<(&str, Hold)> {
    let mut out = Vec::new();
    match item {
        Item::Struct { fields, flatten } => {
            fields.iter().for_each(|f| hold_of(&f.ty, Hold::Inside, &mut out));
            if let Some((_, union)) = flatten {
                out.push((union.as_str(), Hold::Whole));
            }
        }
        Item::Alias(ty) | Item::Transparent(ty) => hold_of(ty, Hold::Whole, &mut out),
        Item::Enum { open, .. } => open.iter().for_each(|(_, ty)| hold_of(ty, Hold::Whole, &mut out)),
        Item::Tagged { variants, fallback, .. } => {
            for variant in variants {
                if let Payload::Newtype(ty) = &variant.payload {
                    hold_of(ty, Hold::Inside, &mut out);
                }
            }
            for ty in fallback.iter().filter_map(|b| b.ty.as_ref()) {
                hold_of(ty, Hold::Whole, &mut out);
            }
        }
        Item::Untagged(branches) => {
            for ty in branches.iter().filter_map(|b| b.ty.as_ref()) {
                hold_of(ty, Hold::Whole, &mut out);
            }
        }
        Item::Newtype | Item::Null => {}
    }
    out
}

/// Adds the named types of `ty`: itself held as `hold`, or those within it held behind.
fn hold_of<'a>(ty: &'a Ty, hold: Hold, out: &mut Vec<(&'a str, Hold)>) {
    match ty {
        Ty::Named { name, .. } => out.push((name.as_str(), hold)),
        nested => names_within(nested, &mut |name| out.push((name, Hold::Behind))),
    }
}

/// Calls `found` with every named type within `ty` (behind lists and maps too).
fn names_within<'a>(ty: &'a Ty, found: &mut dyn FnMut(&'a str)) {
    match ty {
        Ty::Named { name, .. } => found(name),
        Ty::Vec(inner) | Ty::Map(inner) => names_within(inner, found),
        Ty::String | Ty::Int(_) | Ty::F64 | Ty::Bool | Ty::Json | Ty::JsonMap | Ty::Meta => {}
    }
}

/// The plan's items as graph nodes: their names, and for each its edges of the kinds `keep`
/// accepts (to planned items only).
fn graph(plan: &Plan, keep: impl Fn(&Item, Hold, &Item) -> bool) -> (Vec<&str>, Vec<Vec<usize>>) {
    let names: Vec<&str> = plan.items.keys().map(String::as_str).collect();
    let index: BTreeMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let edges = plan
        .items
        .values()
        .map(|planned| {
            holds(&planned.item)
                .into_iter()
                .filter_map(|(target, hold)| {
                    let to = *index.get(target)?;
                    keep(&planned.item, hold, &plan.items[target].item).then_some(to)
                })
                .collect()
        })
        .collect();
    (names, edges)
}

/// The strongly connected component of each node (Tarjan's algorithm, without recursion:
/// a schema may chain thousands of definitions).
fn components(edges: &[Vec<usize>]) -> Vec<usize> {
    const UNSEEN: usize = usize::MAX;
    let n = edges.len();
    let (mut index, mut low, mut component) = (vec![UNSEEN; n], vec![0; n], vec![UNSEEN; n]);
    let mut on_stack = vec![false; n];
    let (mut stack, mut next_index, mut next_component) = (Vec::new(), 0, 0);
    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        let mut calls = vec![(root, 0)];
        index[root] = next_index;
        low[root] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(top) = calls.last_mut() {
            let (node, edge) = *top;
            if let Some(&next) = edges[node].get(edge) {
                top.1 += 1;
                if index[next] == UNSEEN {
                    index[next] = next_index;
                    low[next] = next_index;
                    next_index += 1;
                    stack.push(next);
                    on_stack[next] = true;
                    calls.push((next, 0));
                } else if on_stack[next] {
                    low[node] = low[node].min(index[next]);
                }
                continue;
            }
            calls.pop();
            if let Some(&(parent, _)) = calls.last() {
                low[parent] = low[parent].min(low[node]);
            }
            if low[node] == index[node] {
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    component[member] = next_component;
                    if member == node {
                        break;
                    }
                }
                next_component += 1;
            }
        }
    }
    component
}

/// The nodes on a cycle: in a component of several nodes, or with an edge to itself.
fn on_cycles(edges: &[Vec<usize>], component: &[usize]) -> Vec<bool> {
    let mut size = BTreeMap::new();
    for c in component {
        *size.entry(*c).or_insert(0) += 1;
    }
    (0..edges.len())
        .map(|node| size[&component[node]] > 1 || edges[node].contains(&node))
        .collect()
}

/// Turns every alias that refers to itself through other aliases (`A = Vec<B>`,
/// `B = BTreeMap<String, A>`: Rust cannot expand such aliases) into a [`Item::Transparent`].
fn wrap_recursive_aliases(plan: &mut Plan) {
    let (names, edges) = graph(plan, |from, _, to| {
        matches!(from, Item::Alias(_)) && matches!(to, Item::Alias(_))
    });
    let component = components(&edges);
    let cyclic: Vec<String> = on_cycles(&edges, &component)
        .into_iter()
        .zip(&names)
        .filter(|(cyclic, _)| *cyclic)
        .map(|(_, name)| name.to_string())
        .collect();
    for name in cyclic {
        if let Some(planned) = plan.items.get_mut(&name)
            && let Item::Alias(ty) = &planned.item
        {
            planned.item = Item::Transparent(ty.clone());
        }
    }
}

/// Refuses a cycle of [`Hold::Whole`] references (`A` is `B`, `B` is `A` or a string):
/// reading one would read the next from the same JSON without end. Each cycle is named.
fn refuse_bottomless_cycles(plan: &Plan) -> Result<(), Vec<String>> {
    let (names, edges) = graph(plan, |_, hold, _| hold == Hold::Whole);
    let component = components(&edges);
    let cyclic = on_cycles(&edges, &component);
    let mut reported = BTreeSet::new();
    let mut problems = Vec::new();
    for start in (0..names.len()).filter(|n| cyclic[*n]) {
        if !reported.insert(component[start]) {
            continue;
        }
        // Walk inside the component until a node repeats: that loop is a cycle.
        let mut path = vec![start];
        let mut node = start;
        while let Some(&next) = edges[node].iter().find(|to| component[**to] == component[start]) {
            if let Some(at) = path.iter().position(|n| *n == next) {
                path.drain(..at);
                path.push(next);
                break;
            }
            path.push(next);
            node = next;
        }
        let cycle: Vec<&str> = path.iter().map(|n| names[*n]).collect();
        problems.push(format!(
            "`$ref` cycle {}: each is the whole of the next (an alias, a union branch or a fallback), \
             so reading one would never end; a cycle must pass through a property or a list",
            cycle.join(" → ")
        ));
    }
    if problems.is_empty() { Ok(()) } else { Err(problems) }
}

/// The named types an item holds by value (not behind a `Vec` or map), each with a way to
/// reach the `Ty` that holds it: the ones a `Box` can break a cycle at.
fn by_value(item: &mut Item) -> Vec<&mut Ty> {
    let tys: Vec<&mut Ty> = match item {
        Item::Struct { fields, .. } => fields.iter_mut().map(|f| &mut f.ty).collect(),
        Item::Alias(ty) | Item::Transparent(ty) => vec![ty],
        Item::Newtype | Item::Null => Vec::new(),
        Item::Enum { open, .. } => open.iter_mut().map(|(_, ty)| ty).collect(),
        Item::Tagged { variants, fallback, .. } => {
            let mut tys = Vec::new();
            for variant in variants {
                if let Payload::Newtype(ty) = &mut variant.payload {
                    tys.push(ty);
                }
            }
            tys.extend(fallback.iter_mut().filter_map(|b| b.ty.as_mut()));
            tys
        }
        Item::Untagged(branches) => branches.iter_mut().filter_map(|b| b.ty.as_mut()).collect(),
    };
    tys.into_iter().filter(|t| matches!(t, Ty::Named { .. })).collect()
}

/// Boxes every by-value reference that closes a cycle (a type that would contain itself):
/// the references within one strongly connected component of the by-value graph.
fn box_recursive_fields(plan: &mut Plan) {
    let (names, edges) = graph(plan, |_, hold, _| hold != Hold::Behind);
    let component = components(&edges);
    let of: BTreeMap<String, usize> = names.iter().map(|n| n.to_string()).zip(component).collect();
    for (owner, planned) in plan.items.iter_mut() {
        let Some(&mine) = of.get(owner) else { continue };
        for ty in by_value(&mut planned.item) {
            if let Ty::Named { name, boxed } = ty
                && of.get(name.as_str()) == Some(&mine)
            {
                *boxed = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_null_result_is_a_unit_item_unless_a_planned_type_has_its_name() {
        let schema = json!({"$defs": {"Thing": {"type": "object", "properties": {"inner": {
            "type": "object", "properties": {"x": {"type": "string"}}}}}}});
        let mut plan = plan(&schema).unwrap();
        // `ThingInner` is the struct planned for the inline object.
        let clash = BTreeSet::from(["ThingInner".to_string()]);
        let problems = plan.add_null_results(&clash).unwrap_err();
        assert_eq!(
            problems,
            ["`ThingInner` is a `null` result and also the name of a generated type"]
        );
        let results = BTreeSet::from(["AuthenticateResponse".to_string()]);
        plan.add_null_results(&results).unwrap();
        assert_eq!(plan.items["AuthenticateResponse"].item, Item::Null);
    }

    /// Patch semantics come from the schema's words, whatever the revision: a definition
    /// whose fields "have patch semantics" (v2's upserts) makes every optional field a
    /// `Patch`, a field whose description says `null` clears it is one, and an optional
    /// nullable field the prose says nothing about stays an `Option`.
    #[test]
    fn patch_fields_are_read_from_the_schemas_descriptions() {
        let nullable = json!({"type": ["string", "null"]});
        let clears = json!({"type": ["object", "null"], "description": "Omitted means no update; `null` is an\nexplicit clear signal."});
        let schema = json!({"$defs": {
            "Upsert": {
                "description": "Only `id` is required. Other fields have patch\nsemantics: omitted fields stay.",
                "type": "object",
                "required": ["id"],
                "properties": {"id": {"type": "string"}, "title": nullable, "raw": {}},
            },
            "Info": {
                "type": "object",
                "properties": {"title": nullable, "_meta": clears, "note": {"type": ["string", "null"], "description": "Set to null to clear."}},
            },
        }});
        let plan = plan(&schema).unwrap();
        let forms = |name: &str| match &plan.items[name].item {
            Item::Struct { fields, .. } => fields
                .iter()
                .map(|f| (f.wire.clone(), f.form == Form::Patch))
                .collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        };
        let owned = |pairs: &[(&str, bool)]| pairs.iter().map(|(w, p)| (w.to_string(), *p)).collect::<Vec<_>>();
        assert_eq!(forms("Upsert"), owned(&[("id", false), ("title", true), ("raw", true)]));
        assert_eq!(
            forms("Info"),
            owned(&[("title", false), ("_meta", true), ("note", true)])
        );
    }
}
