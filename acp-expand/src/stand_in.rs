//! What is emitted beside manifest errors: the struct, a handler trait that accepts any of
//! the methods its kind may have (every one with a body that fails), and impls that never run,
//! so the only errors are the manifest's. The trait comes from the same method table and
//! emitters as a valid manifest's, with the wire module the manifest pins.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};

use acp_manifest::manifest::{Checked, Kind, Tier};
use acp_manifest::methods::{self as table, Method, Side};

use crate::methods::Emit;
use crate::{bridge_trait_name, client_trait_name, position, tier_type, trait_name};

/// The wire module a stand-in's types come from, and the check that names the cargo feature
/// of a built-in revision that is off.
pub(crate) struct Wire {
    path: TokenStream,
    feature_check: TokenStream,
}

/// The default revision's wire module, when nothing better is known.
pub(crate) fn default_wire() -> Wire {
    Wire {
        path: quote!(::agentacp::wire::default),
        feature_check: TokenStream::new(),
    }
}

/// The wire module for the stand-in's types: the `wire = path` when given, else the built-in
/// module of the revision the manifest pins (with the check that names its cargo feature when
/// that is off), else the default revision's.
pub(crate) fn wire(checked: &Checked, custom: Option<&syn::Path>, written: &str, span: Span) -> Wire {
    if let Some(path) = custom {
        return Wire {
            path: quote!(#path),
            feature_check: TokenStream::new(),
        };
    }
    let Some(revision) = checked.revision else {
        return default_wire();
    };
    let module = format!("rev_{}", &revision.sha[..8.min(revision.sha.len())]);
    let prefix = checked
        .document
        .frontmatter
        .as_ref()
        .and_then(|root| root.get_at(&["metadata", "aip44", "acp_rev"]))
        .and_then(acp_manifest::yaml::Node::as_str)
        .unwrap_or(revision.sha);
    let at = format!(
        "{written}:{}",
        position(checked, &["metadata", "aip44", "acp_rev"]).unwrap_or_default()
    );
    let feature_check = crate::feature_check(&module, prefix, &at, span);
    let module = format_ident!("{module}");
    Wire {
        path: quote!(::agentacp::wire::#module),
        feature_check,
    }
}

/// The stand-in for an operator of `kind` (a server when unknown).
pub(crate) fn emit(kind: Option<Kind>, target: &syn::ItemStruct, tier: Tier, wire: &Wire, span: Span) -> TokenStream {
    let Wire {
        path: wire,
        feature_check,
    } = wire;
    let tier = tier_type(tier);
    let emit = Emit {
        wire,
        tier: &tier,
        span,
    };
    let name = &target.ident;
    let vis = &target.vis;
    let side = match kind {
        Some(Kind::Client) => Side::Client,
        _ => Side::Agent,
    };
    let signatures: Vec<TokenStream> = table::received_by(side)
        .filter(|method| method.trait_method().is_some())
        .map(|method: &Method| emit.signature(method, None, true))
        .chain((side == Side::Agent).then(|| emit.extension_signatures(Some(""), Some(""), true)))
        .chain((side == Side::Agent).then(|| emit.sign_in_signatures(Some("stand-in"), Some(""), true)))
        .collect();
    let (handler, signatures, impls) = match kind {
        Some(Kind::Client) => (
            client_trait_name(target),
            quote!(#(#signatures)*),
            client_impls(name, &tier, span),
        ),
        Some(Kind::Bridge) => (
            bridge_trait_name(target),
            quote_spanned! {span=>
                #[doc = "Stand-in."]
                fn downstream(&self) -> ::agentacp::client::AgentCommand {
                    ::agentacp::client::AgentCommand::new("false")
                }
            },
            quote_spanned! {span=>
                impl ::agentacp::bridge::BridgeOperator for #name {
                    type Tier = #tier;
                    fn spec() -> &'static ::agentacp::__private::OperatorSpec {
                        ::agentacp::__private::stand_in_spec()
                    }
                    fn downstream(&self) -> ::agentacp::client::AgentCommand {
                        ::agentacp::client::AgentCommand::new("false")
                    }
                }
            },
        ),
        Some(Kind::Server) | None => (
            trait_name(target),
            quote!(#(#signatures)*),
            quote_spanned! {span=>
                impl ::agentacp::server::Operator for #name {
                    type Tier = #tier;
                    fn spec() -> &'static ::agentacp::__private::OperatorSpec {
                        ::agentacp::__private::stand_in_spec()
                    }
                    fn prompt<'a>(
                        &'a self,
                        _turn: &'a mut ::agentacp::server::Turn<'_, Self::Tier>,
                        _params: &'a ::agentacp::__private::RawValue,
                    ) -> ::agentacp::__private::BoxFuture<'a, ::agentacp::Result<::agentacp::__private::Value>> {
                        ::std::boxed::Box::pin(async {
                            ::core::result::Result::Err(::agentacp::Error::msg("the manifest has errors"))
                        })
                    }
                }
            },
        ),
    };
    quote_spanned! {span=>
        #target

        #feature_check

        #[doc = "Stand-in while the manifest has errors."]
        #[allow(dead_code)]
        #vis trait #handler: ::core::marker::Send + ::core::marker::Sync + 'static {
            #signatures
        }

        #impls
    }
}

/// A client stand-in's impls: no handlers, the stand-in spec.
fn client_impls(name: &syn::Ident, tier: &TokenStream, span: Span) -> TokenStream {
    quote_spanned! {span=>
        impl ::agentacp::client::ClientHandlers for #name {
            fn capabilities(&self) -> ::agentacp::__private::ClientMethods {
                ::core::default::Default::default()
            }
            fn handle<'a>(
                &'a self,
                _context: &'a ::agentacp::client::ClientContext,
                _method: &'a str,
                _params: &'a ::agentacp::__private::RawValue,
            ) -> ::core::option::Option<::agentacp::__private::BoxFuture<'a, ::agentacp::client::HandlerResult>> {
                ::core::option::Option::None
            }
        }

        impl ::agentacp::client::ClientOperator for #name {
            type Tier = #tier;
            fn spec() -> &'static ::agentacp::__private::OperatorSpec {
                ::agentacp::__private::stand_in_spec()
            }
        }
    }
}
