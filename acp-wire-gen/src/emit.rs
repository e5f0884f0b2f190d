//! Emission: turns a [`Plan`] into Rust tokens. Everything the generated code needs at run
//! time is named by its full path under [`SUPPORT`], so the output compiles in any crate that
//! depends on `agentacp`.

use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::{format_ident, quote};
use serde_json::Value;

use super::names;
use super::plan::{Branch, Constant, Field, Form, Item, Payload, Plan, Planned, Ty, Variant};

/// The module generated code takes its runtime support from.
pub const SUPPORT: &str = "::agentacp::wire::support";

/// Builds an identifier from a name the planner made (raw identifiers included).
pub fn ident(name: &str) -> Ident {
    match name.strip_prefix("r#") {
        Some(raw) => Ident::new_raw(raw, Span::call_site()),
        None => Ident::new(name, Span::call_site()),
    }
}

/// `#[doc = "..."]` lines for `doc` when docs are on.
pub fn doc_attr(doc: Option<&str>, docs: bool) -> TokenStream {
    match doc {
        Some(text) if docs => {
            let lines = text.lines().map(|line| format!(" {line}"));
            quote! { #( #[doc = #lines] )* }
        }
        _ => TokenStream::new(),
    }
}

/// The tokens of a type.
pub fn ty_tokens(ty: &Ty) -> TokenStream {
    match ty {
        Ty::Named { name, boxed } => {
            let name = ident(name);
            if *boxed { quote!(Box<#name>) } else { quote!(#name) }
        }
        Ty::String => quote!(String),
        Ty::Int(int) => {
            let int = ident(int);
            quote!(#int)
        }
        Ty::F64 => quote!(f64),
        Ty::Bool => quote!(bool),
        Ty::Json => quote!(__s::Value),
        Ty::JsonMap => quote!(__s::JsonObject),
        Ty::Meta => quote!(__s::Meta),
        Ty::Vec(item) => {
            let item = ty_tokens(item);
            quote!(Vec<#item>)
        }
        Ty::Map(value) => {
            let value = ty_tokens(value);
            quote!(__s::BTreeMap<String, #value>)
        }
    }
}

/// How many steps (values and types visited) one default expression may take: a default
/// holding values of types whose own fields have defaults multiplies, so a small hostile schema
/// could otherwise ask for an expression of billions of tokens. The upstream defaults take
/// under 20.
pub const DEFAULT_STEPS: usize = 64;

/// A Rust expression for the JSON `value` as a `ty`, or `None` if the generator cannot write
/// one within [`DEFAULT_STEPS`] (the field then falls back to `Option`).
pub fn default_expr(plan: &Plan, ty: &Ty, value: &Value) -> Option<TokenStream> {
    expr(plan, ty, value, 0, &mut DEFAULT_STEPS.clone())
}

/// [`default_expr`] at `depth` (which bounds recursion through types), taking from `steps`.
fn expr(plan: &Plan, ty: &Ty, value: &Value, depth: usize, steps: &mut usize) -> Option<TokenStream> {
    if depth > 16 || *steps == 0 {
        return None;
    }
    *steps -= 1;
    Some(match (ty, value) {
        (Ty::Bool, Value::Bool(b)) => quote!(#b),
        (Ty::String, Value::String(s)) => quote!(String::from(#s)),
        (Ty::Int(int), Value::Number(n)) if n.is_i64() || n.is_u64() => format!("{n}{int}").parse().ok()?,
        (Ty::F64, Value::Number(n)) => {
            let literal = Literal::f64_suffixed(n.as_f64()?);
            quote!(#literal)
        }
        (Ty::Vec(_), Value::Array(items)) if items.is_empty() => quote!(Vec::new()),
        (Ty::Vec(item), Value::Array(items)) => {
            let items = items
                .iter()
                .map(|i| expr(plan, item, i, depth + 1, steps))
                .collect::<Option<Vec<_>>>()?;
            quote!(vec![#(#items),*])
        }
        (Ty::Map(_) | Ty::JsonMap | Ty::Meta, Value::Object(map)) if map.is_empty() => {
            quote!(Default::default())
        }
        (Ty::Json, Value::Null) => quote!(__s::Value::Null),
        (Ty::Named { name, boxed }, value) => {
            let inner = named_default_expr(plan, name, value, depth, steps)?;
            if *boxed { quote!(Box::new(#inner)) } else { inner }
        }
        _ => return None,
    })
}

fn named_default_expr(plan: &Plan, name: &str, value: &Value, depth: usize, steps: &mut usize) -> Option<TokenStream> {
    let planned = plan.items.get(name)?;
    let type_ident = ident(name);
    match (&planned.item, value) {
        (Item::Newtype, Value::String(s)) => Some(quote!(#type_ident(String::from(#s)))),
        (Item::Alias(ty), value) => expr(plan, ty, value, depth + 1, steps),
        (Item::Enum { constants, .. }, value) => {
            let constant = constants.iter().find(|c| &c.value == value)?;
            let variant = ident(&constant.name);
            Some(quote!(#type_ident::#variant))
        }
        (Item::Struct { fields, flatten: None }, Value::Object(map)) => {
            if map.keys().any(|k| !fields.iter().any(|f| &f.wire == k)) {
                return None;
            }
            let inits = fields
                .iter()
                .map(|field| {
                    let name = ident(&field.name);
                    let expr = match map.get(&field.wire) {
                        Some(value) => value_in_form(plan, field, value, depth, steps)?,
                        None => absent_expr(plan, field, depth, steps)?,
                    };
                    Some(quote!(#name: #expr))
                })
                .collect::<Option<Vec<_>>>()?;
            Some(quote!(#type_ident { #(#inits),* }))
        }
        _ => None,
    }
}

/// The expression for a field holding `value` (wrapped as its form needs).
fn value_in_form(plan: &Plan, field: &Field, value: &Value, depth: usize, steps: &mut usize) -> Option<TokenStream> {
    let nullable = matches!(field.form, Form::Optional | Form::RequiredNullable | Form::Patch);
    if field.form == Form::OmitEmpty && is_empty_json(value) {
        return Some(quote!(Default::default()));
    }
    if value.is_null() && nullable {
        return Some(match field.form {
            Form::Patch => quote!(__s::Patch::Clear),
            _ => quote!(None),
        });
    }
    let inner = expr(plan, &field.ty, value, depth + 1, steps)?;
    Some(match field.form {
        Form::Optional | Form::RequiredNullable => quote!(Some(#inner)),
        Form::Patch => quote!(__s::Patch::Set(#inner)),
        Form::Required | Form::Default(_) | Form::OmitEmpty => inner,
    })
}

fn is_empty_json(value: &Value) -> bool {
    match value {
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        _ => false,
    }
}

/// The expression for a field whose key is absent (`None` when it is required).
fn absent_expr(plan: &Plan, field: &Field, depth: usize, steps: &mut usize) -> Option<TokenStream> {
    match &field.form {
        Form::Optional => Some(quote!(None)),
        Form::Patch => Some(quote!(__s::Patch::Unchanged)),
        Form::OmitEmpty => Some(quote!(Default::default())),
        Form::Default(value) => expr(plan, &field.ty, value, depth + 1, steps),
        Form::Required | Form::RequiredNullable => None,
    }
}

/// Emits every planned item, sorted by name, plus the private default functions.
pub fn items(plan: &Plan, docs: bool) -> TokenStream {
    let mut out = TokenStream::new();
    for planned in plan.items.values() {
        out.extend(item(plan, planned, docs));
    }
    out
}

fn serde_crate() -> TokenStream {
    let path = format!("{SUPPORT}::serde");
    quote!(#[serde(crate = #path)])
}

fn item(plan: &Plan, planned: &Planned, docs: bool) -> TokenStream {
    let doc = doc_attr(planned.doc.as_deref(), docs);
    let name = ident(&planned.name);
    let serde_crate = serde_crate();
    match &planned.item {
        Item::Struct { fields, flatten } => strukt(plan, planned, fields, flatten.as_ref(), docs),
        Item::Newtype => quote! {
            #doc
            #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize)]
            #serde_crate
            #[serde(transparent)]
            pub struct #name(pub String);

            impl #name {
                /// The string.
                pub fn as_str(&self) -> &str {
                    &self.0
                }
            }

            impl ::std::fmt::Display for #name {
                fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                    f.write_str(&self.0)
                }
            }

            impl From<String> for #name {
                fn from(value: String) -> Self {
                    Self(value)
                }
            }

            impl From<&str> for #name {
                fn from(value: &str) -> Self {
                    Self(value.to_string())
                }
            }
        },
        Item::Alias(ty) => {
            let ty = ty_tokens(ty);
            quote! { #doc pub type #name = #ty; }
        }
        Item::Transparent(ty) => {
            let ty = ty_tokens(ty);
            quote! {
                #doc
                #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
                #serde_crate
                #[serde(transparent)]
                pub struct #name(pub #ty);
            }
        }
        Item::Enum { constants, open } => enumeration(planned, constants, open.as_ref(), docs),
        Item::Tagged {
            tag,
            variants,
            fallback,
        } => tagged(planned, tag, variants, fallback, docs),
        Item::Null => quote! {
            #doc
            #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
            pub struct #name;

            impl __s::serde::Serialize for #name {
                fn serialize<S: __s::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                    serializer.serialize_unit()
                }
            }

            impl<'de> __s::serde::Deserialize<'de> for #name {
                fn deserialize<D: __s::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                    __s::null_result(deserializer).map(|()| Self)
                }
            }
        },
        Item::Untagged(branches) => {
            let variants = branches.iter().map(|b| branch_variant(b, docs, false));
            quote! {
                #doc
                #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
                #serde_crate
                #[serde(untagged)]
                pub enum #name { #(#variants,)* }
            }
        }
    }
}

fn branch_variant(branch: &Branch, docs: bool, untagged_attr: bool) -> TokenStream {
    let doc = doc_attr(branch.doc.as_deref(), docs);
    let name = ident(&branch.name);
    let attr = if untagged_attr {
        quote!(#[serde(untagged)])
    } else {
        TokenStream::new()
    };
    match &branch.ty {
        Some(ty) => {
            let ty = ty_tokens(ty);
            quote!(#doc #attr #name(#ty))
        }
        None => quote!(#doc #attr #name),
    }
}

/// The serde attributes and Rust type of a field; `helpers` receives the private functions
/// the attributes name.
fn field_tokens(plan: &Plan, owner: &str, field: &Field, docs: bool, helpers: &mut TokenStream) -> TokenStream {
    let doc = doc_attr(field.doc.as_deref(), docs);
    let name = ident(&field.name);
    let base = ty_tokens(&field.ty);
    let mut attrs: Vec<TokenStream> = Vec::new();
    if field.name != field.wire {
        let wire = &field.wire;
        attrs.push(quote!(rename = #wire));
    }
    let ty = match &field.form {
        Form::Required => base.clone(),
        Form::RequiredNullable => quote!(Option<#base>),
        Form::Optional => {
            attrs.push(quote!(default, skip_serializing_if = "Option::is_none"));
            quote!(Option<#base>)
        }
        Form::Patch => {
            attrs.push(quote!(default, skip_serializing_if = "__s::Patch::is_unchanged"));
            quote!(__s::Patch<#base>)
        }
        Form::OmitEmpty => {
            let is_empty = match &field.ty {
                Ty::Vec(_) => "Vec::is_empty",
                Ty::Map(_) => "__s::BTreeMap::is_empty",
                _ => "__s::JsonObject::is_empty",
            };
            attrs.push(quote!(default, skip_serializing_if = #is_empty));
            base.clone()
        }
        Form::Default(value) => {
            let function = helper_ident("default", owner, field);
            let function_name = function.to_string();
            let expr = default_expr(plan, &field.ty, value).unwrap_or_else(|| quote!(Default::default()));
            helpers.extend(quote! {
                fn #function() -> #base { #expr }
            });
            attrs.push(quote!(default = #function_name));
            base.clone()
        }
    };
    let defaultable = match &field.form {
        Form::RequiredNullable => true,
        Form::Required => field.ty.has_std_default(),
        _ => true,
    };
    if field.skip_items && field.ty.is_vec() {
        let with = if field.on_error {
            "__s::skip_invalid_items_or_default"
        } else {
            "__s::skip_invalid_items"
        };
        attrs.push(quote!(deserialize_with = #with));
    } else if field.on_error && defaultable {
        if let Form::Default(_) = &field.form {
            let default = helper_ident("default", owner, field);
            let function = helper_ident("lenient", owner, field);
            let function_name = function.to_string();
            helpers.extend(quote! {
                fn #function<'de, D: __s::serde::Deserializer<'de>>(deserializer: D) -> Result<#base, D::Error> {
                    __s::default_on_error_or(deserializer, #default)
                }
            });
            attrs.push(quote!(deserialize_with = #function_name));
        } else {
            attrs.push(quote!(deserialize_with = "__s::default_on_error"));
        }
    } else if field.on_null
        && matches!(field.form, Form::Required | Form::Default(_) | Form::OmitEmpty)
        && field.ty.has_std_default()
    {
        attrs.push(quote!(deserialize_with = "__s::default_on_null"));
    }
    let attrs = if attrs.is_empty() {
        TokenStream::new()
    } else {
        quote!(#[serde(#(#attrs),*)])
    };
    quote! { #doc #attrs pub #name: #ty }
}

/// The name of a private helper function for one field (`__default_agent_capabilities_load_session`).
fn helper_ident(role: &str, owner: &str, field: &Field) -> Ident {
    format_ident!(
        "__{role}_{}_{}",
        names::snake(owner).trim_start_matches("r#"),
        field.name.trim_start_matches("r#")
    )
}

fn strukt(
    plan: &Plan,
    planned: &Planned,
    fields: &[Field],
    flatten: Option<&(String, String)>,
    docs: bool,
) -> TokenStream {
    let doc = doc_attr(planned.doc.as_deref(), docs);
    let name = ident(&planned.name);
    let serde_crate = serde_crate();
    let mut helpers = TokenStream::new();
    let mut field_list: Vec<TokenStream> = fields
        .iter()
        .map(|f| field_tokens(plan, &planned.name, f, docs, &mut helpers))
        .collect();
    if let Some((field, union)) = flatten {
        let field = ident(field);
        let union = ident(union);
        field_list.push(quote!(#[serde(flatten)] pub #field: #union));
    }
    let default_impl = struct_default(plan, planned, fields, flatten.is_some());
    let constructor = constructor(plan, planned, fields, flatten);
    quote! {
        #doc
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #serde_crate
        pub struct #name { #(#field_list,)* }
        #helpers
        #default_impl
        #constructor
    }
}

/// `impl Default` when every field has a default (the schema's, or absent).
fn struct_default(plan: &Plan, planned: &Planned, fields: &[Field], flattened: bool) -> TokenStream {
    if flattened {
        return TokenStream::new();
    }
    let inits: Option<Vec<TokenStream>> = fields
        .iter()
        .map(|f| {
            let name = ident(&f.name);
            absent_expr(plan, f, 0, &mut DEFAULT_STEPS.clone()).map(|e| quote!(#name: #e))
        })
        .collect();
    let Some(inits) = inits else {
        return TokenStream::new();
    };
    let name = ident(&planned.name);
    quote! {
        impl Default for #name {
            fn default() -> Self {
                Self { #(#inits,)* }
            }
        }
    }
}

/// `new(required fields...)` with every other field at its default.
fn constructor(plan: &Plan, planned: &Planned, fields: &[Field], flatten: Option<&(String, String)>) -> TokenStream {
    let mut params = Vec::new();
    let mut inits = Vec::new();
    for field in fields {
        let name = ident(&field.name);
        match absent_expr(plan, field, 0, &mut DEFAULT_STEPS.clone()) {
            Some(expr) => inits.push(quote!(#name: #expr)),
            None => {
                let ty = match field.form {
                    Form::RequiredNullable => {
                        let base = ty_tokens(&field.ty);
                        quote!(Option<#base>)
                    }
                    _ => ty_tokens(&field.ty),
                };
                params.push(quote!(#name: #ty));
                inits.push(quote!(#name));
            }
        }
    }
    if let Some((field, union)) = flatten {
        let field = ident(field);
        let union = ident(union);
        params.push(quote!(#field: #union));
        inits.push(quote!(#field));
    }
    if params.is_empty() {
        return TokenStream::new();
    }
    let name = ident(&planned.name);
    quote! {
        impl #name {
            /// A value with the required fields given and every other field left out.
            #[allow(clippy::too_many_arguments)]
            pub fn new(#(#params),*) -> Self {
                Self { #(#inits,)* }
            }
        }
    }
}

fn enumeration(planned: &Planned, constants: &[Constant], open: Option<&(String, Ty)>, docs: bool) -> TokenStream {
    let doc = doc_attr(planned.doc.as_deref(), docs);
    let name = ident(&planned.name);
    let all_strings = constants.iter().all(|c| c.value.is_string());
    let variant_docs: Vec<TokenStream> = constants.iter().map(|c| doc_attr(c.doc.as_deref(), docs)).collect();
    let variants: Vec<Ident> = constants.iter().map(|c| ident(&c.name)).collect();
    if open.is_none() && all_strings {
        let wires = constants.iter().map(|c| c.value.as_str().unwrap_or_default());
        let serde_crate = serde_crate();
        return quote! {
            #doc
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
            #serde_crate
            pub enum #name { #( #variant_docs #[serde(rename = #wires)] #variants, )* }
        };
    }
    // Constants of one JSON kind are matched on a typed value; anything else via `Value`.
    let literals: Vec<TokenStream> = constants.iter().map(|c| json_literal(&c.value)).collect();
    let all_ints = constants.iter().all(|c| c.value.is_i64());
    let (read_ty, read_as, generic): (TokenStream, TokenStream, bool) = match open {
        Some((_, Ty::String)) if all_strings => (quote!(String), quote!(value.as_str()), false),
        Some((_, Ty::Int(int))) if all_ints => {
            let int = ident(int);
            (quote!(#int), quote!(value), false)
        }
        None if all_ints => (quote!(i64), quote!(value), false),
        _ => (quote!(__s::Value), quote!(&value), true),
    };
    let patterns: Vec<TokenStream> = constants
        .iter()
        .map(|c| {
            if generic {
                let text = c.value.to_string();
                quote!(v if *v == __s::serde_json::from_str::<__s::Value>(#text).unwrap_or_default())
            } else {
                json_pattern(&c.value)
            }
        })
        .collect();
    let (other_decl, other_ser, other_de, derives) = match open {
        Some((variant, ty)) => {
            let variant = ident(variant);
            let ty_t = ty_tokens(ty);
            let de = if generic {
                quote!(_ => Self::#variant(<#ty_t as __s::serde::Deserialize>::deserialize(value).map_err(__s::serde::de::Error::custom)?))
            } else {
                quote!(_ => Self::#variant(value))
            };
            let derives = if matches!(ty, Ty::String | Ty::Int(_)) {
                quote!(#[derive(Debug, Clone, PartialEq, Eq, Hash)])
            } else {
                quote!(#[derive(Debug, Clone, PartialEq)])
            };
            (
                quote!(#variant(#ty_t),),
                quote!(Self::#variant(value) => __s::serde::Serialize::serialize(value, serializer),),
                de,
                derives,
            )
        }
        None => {
            let type_name = planned.name.clone();
            (
                TokenStream::new(),
                TokenStream::new(),
                quote!(other => return Err(__s::serde::de::Error::custom(format!("unknown {} value: {:?}", #type_name, other)))),
                quote!(#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]),
            )
        }
    };
    quote! {
        #doc
        #derives
        pub enum #name { #( #variant_docs #variants, )* #other_decl }

        impl __s::serde::Serialize for #name {
            fn serialize<S: __s::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                match self {
                    #( Self::#variants => __s::serde::Serialize::serialize(&#literals, serializer), )*
                    #other_ser
                }
            }
        }

        impl<'de> __s::serde::Deserialize<'de> for #name {
            fn deserialize<D: __s::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = <#read_ty as __s::serde::Deserialize>::deserialize(deserializer)?;
                Ok(match #read_as {
                    #( #patterns => Self::#variants, )*
                    #other_de
                })
            }
        }
    }
}

/// A Rust literal serialising as `value` (strings, integers, booleans; others via JSON text).
fn json_literal(value: &Value) -> TokenStream {
    match value {
        Value::String(s) => quote!(#s),
        Value::Bool(b) => quote!(#b),
        Value::Number(n) if n.is_i64() => {
            let v = n.as_i64().unwrap_or_default();
            let abs = Literal::u64_suffixed(v.unsigned_abs());
            if v < 0 { quote!((-(#abs as i64))) } else { quote!(#abs) }
        }
        other => {
            let text = other.to_string();
            quote!(__s::serde_json::from_str::<__s::Value>(#text).unwrap_or_default())
        }
    }
}

/// A match pattern for a string or integer constant.
fn json_pattern(value: &Value) -> TokenStream {
    match value {
        Value::String(s) => quote!(#s),
        Value::Number(n) => {
            let v = n.as_i64().unwrap_or_default();
            let abs = Literal::u64_unsuffixed(v.unsigned_abs());
            if v < 0 { quote!(-#abs) } else { quote!(#abs) }
        }
        Value::Bool(b) => quote!(#b),
        _ => quote!(_),
    }
}

fn tagged(planned: &Planned, tag: &str, variants: &[Variant], fallback: &[Branch], docs: bool) -> TokenStream {
    let doc = doc_attr(planned.doc.as_deref(), docs);
    let name = ident(&planned.name);
    let serde_crate = serde_crate();
    let variant_tokens: Vec<TokenStream> = variants
        .iter()
        .map(|v| {
            let doc = doc_attr(v.doc.as_deref(), docs);
            let variant = ident(&v.name);
            let wire = &v.tag;
            match &v.payload {
                Payload::Unit => quote!(#doc #[serde(rename = #wire)] #variant),
                Payload::Newtype(ty) => {
                    let ty = ty_tokens(ty);
                    quote!(#doc #[serde(rename = #wire)] #variant(#ty))
                }
            }
        })
        .collect();
    let fallback_tokens = fallback.iter().map(|b| branch_variant(b, docs, true));
    if fallback.is_empty() {
        return quote! {
            #doc
            #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
            #serde_crate
            #[serde(tag = #tag)]
            pub enum #name {
                #(#variant_tokens,)*
            }
        };
    }
    // With an untagged fallback, serde's derive would fall back even when a known tag's
    // payload is bad (silently dropping the tag); a known tag must decode as its variant.
    let tags = variants.iter().map(|v| v.tag.as_str());
    let decode_tagged = variants.iter().map(|v| {
        let variant = ident(&v.name);
        match &v.payload {
            Payload::Unit => quote!(Self::#variant),
            Payload::Newtype(ty) => {
                let ty = ty_tokens(ty);
                quote!(Self::#variant(<#ty as __s::serde::Deserialize>::deserialize(value).map_err(__s::serde::de::Error::custom)?))
            }
        }
    });
    let tries = fallback.iter().map(|b| {
        let variant = ident(&b.name);
        // No let-chains: the output must build on edition 2021 too.
        let attempt = match &b.ty {
            Some(ty) => {
                let ty = ty_tokens(ty);
                quote! {
                    if let Ok(inner) = <#ty as __s::serde::Deserialize>::deserialize(&value) {
                        return Ok(Self::#variant(inner));
                    }
                }
            }
            None => quote! {
                if value.is_null() {
                    return Ok(Self::#variant);
                }
            },
        };
        match &b.requires {
            Some(property) => quote! {
                if value.get(#property).is_some_and(__s::Value::is_string) {
                    #attempt
                }
            },
            None => attempt,
        }
    });
    let type_name = &planned.name;
    quote! {
        #doc
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #serde_crate
        #[serde(tag = #tag)]
        pub enum #name {
            #(#variant_tokens,)*
            #(#fallback_tokens,)*
        }

        impl<'de> __s::serde::Deserialize<'de> for #name {
            fn deserialize<D: __s::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = <__s::Value as __s::serde::Deserialize>::deserialize(deserializer)?;
                Ok(match value.get(#tag).and_then(__s::Value::as_str) {
                    #( Some(#tags) => #decode_tagged, )*
                    _ => {
                        #(#tries)*
                        return Err(__s::serde::de::Error::custom(format!("data did not match any variant of {}", #type_name)));
                    }
                })
            }
        }
    }
}

/// Fields with a schema default keep it only when it can be written as a Rust expression
/// ([`default_expr`]); the others become `Option` and say so in the notes. A pass of its own
/// after [`super::plan::plan`], since only the printer knows what it can print.
pub fn settle_defaults(plan: &mut Plan) {
    let mut demoted = Vec::new();
    for (owner, planned) in &plan.items {
        if let Item::Struct { fields, .. } = &planned.item {
            for field in fields {
                if let Form::Default(value) = &field.form
                    && default_expr(plan, &field.ty, value).is_none()
                {
                    demoted.push((owner.clone(), field.wire.clone()));
                }
            }
        }
    }
    for (owner, wire) in demoted {
        if let Some(Planned {
            item: Item::Struct { fields, .. },
            ..
        }) = plan.items.get_mut(&owner)
            && let Some(field) = fields.iter_mut().find(|f| f.wire == wire)
        {
            field.form = Form::Optional;
            plan.notes.push(format!(
                "{owner}.{wire}: its schema default cannot be written as a Rust value; the field is an Option"
            ));
        }
    }
}
