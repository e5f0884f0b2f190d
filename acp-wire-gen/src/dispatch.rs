//! The typed method enums, named as upstream names its envelopes (by the side that *sends*):
//!
//! | enum | carries | handled by |
//! |---|---|---|
//! | `ClientRequest` / `AgentResponse` | requests the client sends, their results | the agent |
//! | `ClientNotification` | notifications the client sends (and `$/cancel_request`) | the agent |
//! | `AgentRequest` / `ClientResponse` | requests the agent sends, their results | the client |
//! | `AgentNotification` | notifications the agent sends (and `$/cancel_request`) | the client |
//!
//! Each has `method()`, `decode(method, params)` (unknown methods are `UnknownMethod`,
//! `_`-prefixed ones an `Extension` variant holding raw JSON) and a `Serialize` that writes
//! the params (or result) alone. Every params type also implements `RequestParams` or
//! `NotificationParams`, which ties it to its method name and result type.

use std::collections::BTreeSet;

use proc_macro2::{Ident, TokenStream};
use quote::quote;

use super::emit::ident;
use super::methods::{Method, MethodTable, Side};
use super::names;

/// Whether an enum carries params (requests, notifications) or results.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Carries {
    Params,
    Results,
}

struct MethodEnum<'a> {
    name: &'static str,
    doc: &'static str,
    carries: Carries,
    /// `(method, payload type)`.
    members: Vec<(&'a Method, &'a str)>,
}

/// Emits the six method enums, the params traits and the `METHODS` table.
pub fn emit(table: &MethodTable) -> TokenStream {
    let by = |side: Side, protocol_too: bool, pick: fn(&Method) -> Option<&String>| -> Vec<(&Method, &str)> {
        table
            .methods
            .iter()
            .filter(|m| m.side == side || (protocol_too && m.side == Side::Protocol))
            .filter_map(|m| pick(m).map(|t| (m, t.as_str())))
            .collect()
    };
    let enums = [
        MethodEnum {
            name: "ClientRequest",
            doc: "A request the client sends and the agent handles.",
            carries: Carries::Params,
            members: by(Side::Agent, false, |m| m.request.as_ref()),
        },
        MethodEnum {
            name: "AgentResponse",
            doc: "The agent's result for a [`ClientRequest`].",
            carries: Carries::Results,
            members: by(Side::Agent, false, |m| m.response.as_ref()),
        },
        MethodEnum {
            name: "ClientNotification",
            doc: "A notification the client sends and the agent handles.",
            carries: Carries::Params,
            members: by(Side::Agent, true, |m| m.notification.as_ref()),
        },
        MethodEnum {
            name: "AgentRequest",
            doc: "A request the agent sends and the client handles.",
            carries: Carries::Params,
            members: by(Side::Client, false, |m| m.request.as_ref()),
        },
        MethodEnum {
            name: "ClientResponse",
            doc: "The client's result for an [`AgentRequest`].",
            carries: Carries::Results,
            members: by(Side::Client, false, |m| m.response.as_ref()),
        },
        MethodEnum {
            name: "AgentNotification",
            doc: "A notification the agent sends and the client handles.",
            carries: Carries::Params,
            members: by(Side::Client, true, |m| m.notification.as_ref()),
        },
    ];
    let mut out = TokenStream::new();
    for method_enum in &enums {
        out.extend(method_enum.tokens());
    }
    out.extend(traits(table));
    out.extend(method_table(table));
    out
}

impl MethodEnum<'_> {
    /// `impl From<payload> for` the enum `name`, only where a payload type belongs to a
    /// single method.
    fn froms(&self, name: &Ident) -> Vec<TokenStream> {
        let mut seen = BTreeSet::new();
        let repeated: BTreeSet<&str> = self
            .members
            .iter()
            .filter(|(_, t)| !seen.insert(*t))
            .map(|(_, t)| *t)
            .collect();
        self.members
            .iter()
            .filter(|(_, t)| !repeated.contains(t))
            .map(|(m, t)| {
                let variant = ident(&variant_name(m));
                let ty = ident(t);
                quote! {
                    impl From<#ty> for #name {
                        fn from(value: #ty) -> Self {
                            Self::#variant(value)
                        }
                    }
                }
            })
            .collect()
    }

    fn tokens(&self) -> TokenStream {
        let name = ident(self.name);
        let doc = self.doc;
        let variants: Vec<_> = self.members.iter().map(|(m, _)| ident(&variant_name(m))).collect();
        let types: Vec<_> = self.members.iter().map(|(_, t)| ident(t)).collect();
        let wires: Vec<&str> = self.members.iter().map(|(m, _)| m.name.as_str()).collect();
        let variant_docs = self.members.iter().map(|(m, _)| format!(" `{}`.", m.name));
        let froms = self.froms(&name);
        match self.carries {
            Carries::Params => quote! {
                #[doc = #doc]
                #[derive(Debug, Clone, PartialEq)]
                pub enum #name {
                    #( #[doc = #variant_docs] #variants(#types), )*
                    /// An extension method (name starting with `_`), params kept as raw JSON.
                    Extension {
                        /// The method name.
                        method: String,
                        /// The params (`null` when absent).
                        params: __s::Value,
                    },
                }

                impl #name {
                    /// The wire method name.
                    pub fn method(&self) -> &str {
                        match self {
                            #( Self::#variants(_) => #wires, )*
                            Self::Extension { method, .. } => method,
                        }
                    }

                    /// Decodes the params of `method`; absent or `null` params read as `{}`.
                    pub fn decode(method: &str, params: Option<&__s::RawValue>) -> Result<Self, __s::DecodeError> {
                        match method {
                            #( #wires => __s::decode_params(method, params).map(Self::#variants), )*
                            _ if __s::is_extension(method) => __s::decode_extension(method, params).map(|params| Self::Extension {
                                method: method.to_string(),
                                params,
                            }),
                            _ => Err(__s::DecodeError::UnknownMethod(method.to_string())),
                        }
                    }
                }

                impl __s::serde::Serialize for #name {
                    fn serialize<S: __s::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                        match self {
                            #( Self::#variants(params) => __s::serde::Serialize::serialize(params, serializer), )*
                            Self::Extension { params, .. } => __s::serde::Serialize::serialize(params, serializer),
                        }
                    }
                }

                #(#froms)*
            },
            Carries::Results => quote! {
                #[doc = #doc]
                #[derive(Debug, Clone, PartialEq)]
                pub enum #name {
                    #( #[doc = #variant_docs] #variants(#types), )*
                    /// The result of an extension method, kept as raw JSON.
                    Extension(__s::Value),
                }

                impl #name {
                    /// The method this answers; `None` for an extension result.
                    pub fn method(&self) -> Option<&'static str> {
                        match self {
                            #( Self::#variants(_) => Some(#wires), )*
                            Self::Extension(_) => None,
                        }
                    }

                    /// Decodes the result of a `method` request; an absent or `null` result reads as `{}`.
                    pub fn decode(method: &str, result: Option<&__s::RawValue>) -> Result<Self, __s::DecodeError> {
                        match method {
                            #( #wires => __s::decode_params(method, result).map(Self::#variants), )*
                            _ if __s::is_extension(method) => __s::decode_extension(method, result).map(Self::Extension),
                            _ => Err(__s::DecodeError::UnknownMethod(method.to_string())),
                        }
                    }
                }

                impl __s::serde::Serialize for #name {
                    fn serialize<S: __s::serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                        match self {
                            #( Self::#variants(result) => __s::serde::Serialize::serialize(result, serializer), )*
                            Self::Extension(result) => __s::serde::Serialize::serialize(result, serializer),
                        }
                    }
                }

                #(#froms)*
            },
        }
    }
}

/// `session/prompt` → `SessionPrompt`, `$/cancel_request` → `CancelRequest`.
pub fn variant_name(method: &Method) -> String {
    names::camel(&method.name)
}

fn traits(table: &MethodTable) -> TokenStream {
    let mut out = TokenStream::new();
    let mut done = BTreeSet::new();
    for method in &table.methods {
        let wire = method.name.as_str();
        if let (Some(request), Some(response)) = (&method.request, &method.response) {
            if !done.insert(request.as_str()) {
                continue;
            }
            let request = ident(request);
            let response = ident(response);
            out.extend(quote! {
                impl __s::RequestParams for #request {
                    const METHOD: &'static str = #wire;
                    type Result = #response;
                }
            });
        } else if let Some(notification) = &method.notification {
            if !done.insert(notification.as_str()) {
                continue;
            }
            let notification = ident(notification);
            out.extend(quote! {
                impl __s::NotificationParams for #notification {
                    const METHOD: &'static str = #wire;
                }
            });
        }
    }
    out
}

fn method_table(table: &MethodTable) -> TokenStream {
    let rows = table.methods.iter().map(|m| {
        let name = &m.name;
        let side = match m.side {
            Side::Agent => quote!(__s::Side::Agent),
            Side::Client => quote!(__s::Side::Client),
            Side::Protocol => quote!(__s::Side::Protocol),
        };
        let params = m
            .request
            .as_ref()
            .or(m.notification.as_ref())
            .map(String::as_str)
            .unwrap_or_default();
        let result = match &m.response {
            Some(r) => quote!(Some(#r)),
            None => quote!(None),
        };
        quote!(__s::MethodInfo { name: #name, side: #side, params: #params, result: #result })
    });
    let constants = table.methods.iter().map(|m| {
        let constant = ident(&names::constant(&m.name));
        let name = &m.name;
        let doc = format!(" `{name}`.");
        quote!(#[doc = #doc] pub const #constant: &str = #name;)
    });
    quote! {
        /// Every method of this revision: wire name, handling side, params and result types.
        pub const METHODS: &[__s::MethodInfo] = &[#(#rows),*];

        /// The wire name of every method.
        pub mod method_names {
            #(#constants)*
        }
    }
}
