//! The generator's entry point: one revision's `schema.json` (+ `meta.json`) → one formatted,
//! deterministic Rust module.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use proc_macro2::TokenStream;
use quote::quote;
use serde_json::{Map, Value};

use super::methods::{MethodBinding, MethodTable};
use super::{dispatch, emit, input, names, plan};

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The full commit SHA of the revision (becomes `ACP_REV` and the header).
    pub rev: String,
    /// Turn the schema's descriptions into doc comments (off for checked-in modules, which
    /// must not carry upstream prose).
    pub docs: bool,
    /// Methods whose types the user names (`--method`), for what the schema does not say.
    pub methods: Vec<MethodBinding>,
}

impl Options {
    /// The options for revision `rev`, without docs or method bindings.
    pub fn new(rev: impl Into<String>) -> Self {
        Options {
            rev: rev.into(),
            docs: false,
            methods: Vec::new(),
        }
    }
}

/// A generated module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    /// The Rust source, formatted.
    pub source: String,
    /// Constructs generated in a weaker form than the schema asks, and why.
    pub notes: Vec<String>,
    /// How many types were generated.
    pub type_count: usize,
    /// How many methods the table has.
    pub method_count: usize,
}

/// Why a schema could not be turned into Rust.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenerateError {
    /// Every problem found.
    pub problems: Vec<String>,
}

impl fmt::Display for GenerateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot generate wire types: {}", self.problems.join("; "))
    }
}

impl std::error::Error for GenerateError {}

impl GenerateError {
    fn new(problem: impl Into<String>) -> Self {
        GenerateError {
            problems: vec![problem.into()],
        }
    }
}

/// Names the generated code uses unqualified (the Rust prelude, the serde derives, the
/// support alias); a definition with one of these names is refused rather than miscompiled.
const RESERVED: &[&str] = &[
    "Box",
    "Default",
    "Deserialize",
    "Err",
    "From",
    "None",
    "Ok",
    "Option",
    "Result",
    "Self",
    "Serialize",
    "Some",
    "String",
    "Vec",
    "__s",
];

pub use acp_manifest::revisions::{header, rev_of_header};

/// Generates the module for `schema` and `meta` (the method table; when `None` it is read from
/// the `x-side` / `x-method` annotations alone).
pub fn generate(schema: &Value, meta: Option<&Value>, options: &Options) -> Result<Generated, GenerateError> {
    if !is_full_sha(&options.rev) {
        return Err(GenerateError::new(format!(
            "`{}` is not a full 40-hex-digit commit SHA",
            options.rev
        )));
    }
    input::check(schema).map_err(|problems| GenerateError { problems })?;
    let meta = match meta {
        Some(meta) => meta.clone(),
        None => meta_from_annotations(schema),
    };
    let listed = ["agentMethods", "clientMethods", "protocolMethods"]
        .iter()
        .filter_map(|group| meta.get(group).and_then(Value::as_object))
        .map(Map::len)
        .sum::<usize>();
    if listed > input::MAX_METHODS {
        return Err(GenerateError::new(format!(
            "the revision lists {listed} methods, more than the {} regen accepts",
            input::MAX_METHODS
        )));
    }
    let table = MethodTable::read(schema, &meta, &options.methods).map_err(|problems| GenerateError { problems })?;
    let clashes = method_name_clashes(&table);
    if !clashes.is_empty() {
        return Err(GenerateError { problems: clashes });
    }
    if table.methods.is_empty() {
        return Err(GenerateError::new(
            "the revision has no methods: meta.json lists none (or is absent) and no definition is annotated with `x-method`",
        ));
    }
    let shadowing: Vec<String> = schema
        .get("$defs")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|defs| defs.keys())
        .filter(|name| RESERVED.contains(&name.as_str()))
        .map(|name| format!("definition `{name}` would shadow a name the generated code uses"))
        .collect();
    if !shadowing.is_empty() {
        return Err(GenerateError { problems: shadowing });
    }
    let mut plan = plan::plan(schema).map_err(|problems| GenerateError { problems })?;
    plan.add_null_results(&table.null_results)
        .map_err(|problems| GenerateError { problems })?;
    plan.notes.extend(table.notes.iter().cloned());
    emit::settle_defaults(&mut plan);
    let operator_update = add_operator_update(&mut plan);
    let planned = plan.size();
    if planned > input::MAX_PLANNED {
        return Err(GenerateError::new(format!(
            "the schema makes {planned} types and members (fields, variants, constants), more than the {} regen prints",
            input::MAX_PLANNED
        )));
    }
    let protocol_version = meta.get("version").and_then(Value::as_u64).unwrap_or(1);
    let protocol_version =
        u16::try_from(protocol_version).map_err(|_| GenerateError::new("meta.json `version` does not fit u16"))?;

    let rev = &options.rev;
    let support: TokenStream = emit::SUPPORT
        .parse()
        .map_err(|_| GenerateError::new("bad support path"))?;
    let items = emit::items(&plan, options.docs);
    let methods = dispatch::emit(&table);
    let operator_update = operator_update.then(|| {
        quote! {
            impl __s::OperatorUpdate for OperatorUpdate {}
        }
    });
    let tokens = quote! {
        #![allow(missing_docs, clippy::all)]

        use #support as __s;
        use __s::serde::{Deserialize, Serialize};

        /// The upstream commit these types were generated from.
        pub const ACP_REV: &str = #rev;

        /// The ACP protocol version of this revision.
        pub const PROTOCOL_VERSION: u16 = #protocol_version;

        #items
        #operator_update
        #methods
    };
    let file: syn::File =
        syn::parse2(tokens).map_err(|e| GenerateError::new(format!("internal: emitted invalid Rust: {e}")))?;
    let body = prettyplease::unparse(&file);
    Ok(Generated {
        source: format!("{}\n{body}", header(rev)),
        notes: plan.notes,
        type_count: plan.items.len(),
        method_count: table.methods.len(),
    })
}

/// The name of the generated [`OPERATOR_UPDATE`] enum.
const OPERATOR_UPDATE: &str = "OperatorUpdate";

/// The `session/update` kinds only the runtime may send: tool calls are governed and audited,
/// so operator code reaches them through `Turn::tool_call` alone. Compared in snake_case, as
/// early revisions spell them `toolCall`.
const GOVERNED_UPDATES: &[&str] = &["tool_call", "tool_call_update"];

/// Adds `OperatorUpdate`: the revision's `SessionUpdate` without the tool-call variants, the
/// type `Turn::update` takes, so an ungoverned tool call does not compile. Untagged branches
/// are left out too: nothing says they are not tool calls (in August 2025 the tool-call
/// branches carried no tag). Returns whether it was added (not when the revision has no
/// tagged `SessionUpdate`, already defines the name, or no variant is left).
fn add_operator_update(plan: &mut plan::Plan) -> bool {
    if plan.items.contains_key(OPERATOR_UPDATE) {
        plan.notes.push(format!(
            "the schema defines `{OPERATOR_UPDATE}`: no operator-only update enum was generated"
        ));
        return false;
    }
    let Some(plan::Planned {
        item: plan::Item::Tagged { tag, variants, .. },
        ..
    }) = plan.items.get("SessionUpdate")
    else {
        return false;
    };
    let variants: Vec<plan::Variant> = variants
        .iter()
        .filter(|variant| !GOVERNED_UPDATES.contains(&names::snake(&variant.tag).as_str()))
        .cloned()
        .collect();
    if variants.is_empty() {
        return false;
    }
    let item = plan::Item::Tagged {
        tag: tag.clone(),
        variants,
        fallback: Vec::new(),
    };
    plan.items.insert(
        OPERATOR_UPDATE.to_string(),
        plan::Planned {
            name: OPERATOR_UPDATE.to_string(),
            doc: Some("A `SessionUpdate` operator code may send itself: every kind but the tool calls, which only `Turn::tool_call` sends (governed and audited).".to_string()),
            item,
        },
    );
    true
}

/// Methods whose Rust names (the variant of the method enums, the `method_names` constant)
/// are the same: `session/new` and `session_new` would both be `SessionNew`.
fn method_name_clashes(table: &MethodTable) -> Vec<String> {
    let mut problems = Vec::new();
    for (what, rust_name) in [
        ("variant", dispatch::variant_name as fn(&crate::Method) -> String),
        ("constant", |m: &crate::Method| names::constant(&m.name)),
    ] {
        let mut seen: BTreeMap<String, &str> = BTreeMap::new();
        for method in &table.methods {
            let rust = rust_name(method);
            if let Some(first) = seen.insert(rust.clone(), &method.name) {
                problems.push(format!(
                    "methods `{first}` and `{}` would have the same Rust {what} name `{rust}`",
                    method.name
                ));
            }
        }
    }
    problems
}

fn is_full_sha(rev: &str) -> bool {
    rev.len() == 40 && rev.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// A `meta.json` rebuilt from the `x-side` / `x-method` annotations.
fn meta_from_annotations(schema: &Value) -> Value {
    let mut groups = serde_json::Map::new();
    for group in ["agentMethods", "clientMethods", "protocolMethods"] {
        groups.insert(group.to_string(), Value::Object(serde_json::Map::new()));
    }
    for def in schema
        .get("$defs")
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|d| d.values())
    {
        let (Some(side), Some(method)) = (
            def.get("x-side").and_then(Value::as_str),
            def.get("x-method").and_then(Value::as_str),
        ) else {
            continue;
        };
        let group = match side {
            "agent" => "agentMethods",
            "client" => "clientMethods",
            _ => "protocolMethods",
        };
        if let Some(Value::Object(methods)) = groups.get_mut(group) {
            methods.insert(method.to_string(), Value::String(method.to_string()));
        }
    }
    Value::Object(groups)
}

/// Where a revision's input files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaFiles {
    /// `schema.json`.
    pub schema: PathBuf,
    /// `meta.json`, when it exists beside the schema.
    pub meta: Option<PathBuf>,
}

impl SchemaFiles {
    /// From a directory holding `schema.json` (and usually `meta.json`), or a schema file with
    /// an optional `meta.json` beside it.
    pub fn locate(path: &Path) -> Result<Self, String> {
        let (schema, dir) = if path.is_dir() {
            (path.join("schema.json"), path.to_path_buf())
        } else {
            (
                path.to_path_buf(),
                path.parent().map(Path::to_path_buf).unwrap_or_default(),
            )
        };
        if !schema.is_file() {
            return Err(format!("{}: no such schema file", schema.display()));
        }
        let meta = dir.join("meta.json");
        Ok(SchemaFiles {
            schema,
            meta: meta.is_file().then_some(meta),
        })
    }

    /// The revision named by the schema's directory, if that is a full SHA.
    pub fn rev_from_path(&self) -> Option<String> {
        let dir = self.schema.parent()?.canonicalize().ok()?;
        let name = dir.file_name()?.to_str()?;
        is_full_sha(name).then(|| name.to_string())
    }
}

/// Reads and generates from files.
pub fn generate_files(files: &SchemaFiles, options: &Options) -> Result<Generated, GenerateError> {
    let read = |path: &Path| input::read_json(path).map_err(GenerateError::new);
    let schema = read(&files.schema)?;
    let meta = files.meta.as_deref().map(read).transpose()?;
    generate(&schema, meta.as_ref(), options)
}
