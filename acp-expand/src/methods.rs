//! Handler-trait methods and the glue that calls them, emitted from the one method table
//! ([`acp_manifest::methods`]). The same emitters build a valid manifest's trait and the
//! stand-in shown beside manifest errors; requests are decoded through the wire module's
//! generated request enums (`ClientRequest` on the agent side, `AgentRequest` on the client
//! side), by the variant the table names.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::Ident;

use acp_manifest::methods::{Context, Method, Offer, Side, TraitMethod};

/// What every emitted method refers to.
pub(crate) struct Emit<'a> {
    /// The wire module (`::agentacp::wire::rev_…` or the `wire = path`).
    pub wire: &'a TokenStream,
    /// The tier type (`::agentacp::tier::Basic`).
    pub tier: &'a TokenStream,
    /// Where the manifest literal is: errors in the trait point there.
    pub span: Span,
}

/// A method's handler-trait method; every method in the table a trait is made from has one.
fn trait_method(method: &Method) -> TraitMethod {
    method
        .trait_method()
        .unwrap_or_else(|| panic!("`{}` is answered by the runtime, not by a handler trait", method.name))
}

/// The argument a handler-trait method takes besides the request, and its name.
fn context_argument(context: Context, tier: &TokenStream) -> Option<(Ident, TokenStream)> {
    let (name, ty) = match context {
        Context::None => return None,
        Context::Session => ("session", quote!(&::agentacp::server::SessionContext)),
        Context::Turn => ("turn", quote!(&mut ::agentacp::server::Turn<'_, #tier>)),
        Context::Client => ("context", quote!(&::agentacp::client::ClientContext)),
    };
    Some((format_ident!("{name}"), ty))
}

impl Emit<'_> {
    /// One handler-trait method: its docs (`reason`: the manifest line that requires it), its
    /// signature, and for a stand-in a body that fails.
    pub(crate) fn signature(&self, method: &Method, reason: Option<&str>, stand_in: bool) -> TokenStream {
        let Emit { wire, tier, span } = self;
        let handler = trait_method(method);
        let name = format_ident!("{}", handler.name);
        let params = format_ident!("{}", method.params);
        let returns = format_ident!("{}", handler.returns);
        let doc = if stand_in { "Stand-in." } else { handler.doc };
        let reason = reason.map(|reason| quote_spanned!(*span=> #[doc = #reason]));
        let context = context_argument(handler.context, tier);
        let context_parameter = context.as_ref().map(|(name, ty)| quote!(#name: #ty,));
        let output = match method.side {
            Side::Client => quote!(::core::result::Result<#wire::#returns, ::agentacp::jsonrpc::RpcError>),
            Side::Agent | Side::Both => quote!(::agentacp::Result<#wire::#returns>),
        };
        let body = if stand_in {
            let context_name = context.as_ref().map(|(name, _)| quote!(#name,));
            let error = match method.side {
                Side::Client => quote!(::agentacp::jsonrpc::RpcError::new(-32603, "the manifest has errors")),
                Side::Agent | Side::Both => quote!(::agentacp::Error::msg("the manifest has errors")),
            };
            quote_spanned!(*span=> {
                let _ = (#context_name request);
                async { ::core::result::Result::Err(#error) }
            })
        } else {
            // Spanned like the rest, so that "from trait" points at the manifest literal.
            quote_spanned!(*span=> ;)
        };
        quote_spanned! {*span=>
            #[doc = #doc]
            #reason
            fn #name(&self, #context_parameter request: #wire::#params)
                -> impl ::core::future::Future<Output = #output> + ::core::marker::Send
                #body
        }
    }

    /// The `agentacp::server::Operator` method for an agent-side row: decodes the request
    /// through `ClientRequest`, calls the handler trait (`handler`), encodes the answer. A
    /// method every agent has is required by `Operator`; the others return `Option`.
    /// A server's `Operator::check_params`: the messages the runtime answers itself, decoded
    /// through the wire module's `ClientRequest` / `ClientNotification` (a method the module
    /// does not define passes).
    pub(crate) fn check_params(&self) -> TokenStream {
        let wire = self.wire;
        quote! {
            fn check_params(
                method: &str,
                params: ::core::option::Option<&::agentacp::__private::RawValue>,
                notification: bool,
            ) -> ::core::result::Result<(), ::agentacp::jsonrpc::RpcError> {
                let decoded = if notification {
                    #wire::ClientNotification::decode(method, params).map(::core::mem::drop)
                } else {
                    #wire::ClientRequest::decode(method, params).map(::core::mem::drop)
                };
                match decoded {
                    ::core::result::Result::Err(::agentacp::wire::support::DecodeError::InvalidParams { .. }) => {
                        decoded.map_err(::core::convert::Into::into)
                    }
                    _ => ::core::result::Result::Ok(()),
                }
            }
        }
    }

    pub(crate) fn server_glue(&self, method: &Method, handler: &Ident) -> TokenStream {
        let wire = self.wire;
        let handler_method = trait_method(method);
        let name = format_ident!("{}", handler_method.name);
        let variant = format_ident!("{}", method.variant);
        let wire_name = method.name;
        // The runtime's parameters borrow for `'a`.
        let context_parameter = match handler_method.context {
            Context::Turn => quote!(turn: &'a mut ::agentacp::server::Turn<'_, Self::Tier>,),
            Context::Session => quote!(session: &'a ::agentacp::server::SessionContext,),
            Context::Client => quote!(context: &'a ::agentacp::client::ClientContext,),
            Context::None => quote!(),
        };
        let context = context_argument(handler_method.context, &quote!(Self::Tier));
        let context_name = context.as_ref().map(|(name, _)| quote!(#name,));
        // `prompt` answers a `StopReason`; the wire result wraps it.
        let answer = match method.result {
            Some(result) if result != handler_method.returns => {
                let result = format_ident!("{result}");
                quote!(&#wire::#result::new(answer))
            }
            _ => quote!(&answer),
        };
        let run = quote! {
            ::std::boxed::Box::pin(async move {
                let #wire::ClientRequest::#variant(request) =
                    #wire::ClientRequest::decode(#wire_name, ::core::option::Option::Some(params))?
                else {
                    return ::core::result::Result::Err(::agentacp::Error::msg(::core::concat!(
                        "`", #wire_name, "` did not decode as itself"
                    )));
                };
                let answer = <Self as #handler>::#name(self, #context_name request).await?;
                ::agentacp::server::encode_result(#answer)
            })
        };
        let future = quote!(::agentacp::__private::BoxFuture<'a, ::agentacp::Result<::agentacp::__private::Value>>);
        if method.offer == Offer::Always {
            quote! {
                fn #name<'a>(&'a self, #context_parameter params: &'a ::agentacp::__private::RawValue) -> #future {
                    #run
                }
            }
        } else {
            quote! {
                fn #name<'a>(
                    &'a self,
                    #context_parameter
                    params: &'a ::agentacp::__private::RawValue,
                ) -> ::core::option::Option<#future> {
                    ::core::option::Option::Some(#run)
                }
            }
        }
    }

    /// The handler-trait methods for extension methods (`metadata.agentacp.extensions`):
    /// `extension` when requests are declared (`requests`: the reason, or for a stand-in any
    /// text), `extension_notification` when notifications are.
    pub(crate) fn extension_signatures(
        &self,
        requests: Option<&str>,
        notifications: Option<&str>,
        stand_in: bool,
    ) -> TokenStream {
        let span = self.span;
        let value = quote!(::agentacp::__private::Value);
        let body = |answer: TokenStream| {
            if stand_in {
                quote_spanned!(span=> {
                    let _ = (method, params);
                    async { #answer }
                })
            } else {
                quote_spanned!(span=> ;)
            }
        };
        let doc_of = |doc: &str| {
            if stand_in {
                "Stand-in.".to_string()
            } else {
                doc.to_string()
            }
        };
        let request = requests.map(|reason| {
            let doc = doc_of("An extension request (`_`-prefixed) the manifest declares: `method` is its name, `params` its params as sent (with `_meta`); the answer is the result as sent. Undeclared ones are answered `-32601` by the runtime.");
            let body = body(quote!(::core::result::Result::Err(::agentacp::Error::msg("the manifest has errors"))));
            let reason = (!stand_in).then(|| quote_spanned!(span=> #[doc = #reason]));
            quote_spanned! {span=>
                #[doc = #doc]
                #reason
                fn extension(&self, method: &str, params: #value)
                    -> impl ::core::future::Future<Output = ::agentacp::Result<#value>> + ::core::marker::Send
                    #body
            }
        });
        let notification = notifications.map(|reason| {
            let doc = doc_of("An extension notification (`_`-prefixed) the manifest declares: `method` is its name, `params` its params as sent. Nothing is answered; an error is logged.");
            let body = body(quote!(::core::result::Result::Ok(())));
            let reason = (!stand_in).then(|| quote_spanned!(span=> #[doc = #reason]));
            quote_spanned! {span=>
                #[doc = #doc]
                #reason
                fn extension_notification(&self, method: &str, params: #value)
                    -> impl ::core::future::Future<Output = ::agentacp::Result<()>> + ::core::marker::Send
                    #body
            }
        });
        quote!(#request #notification)
    }

    /// The handler trait's sign-in methods when the manifest declares any
    /// (`credential_file`, which has a default); `sign_in` too for a `terminal` one, with
    /// `terminal` as its reason (the stand-in always has both).
    pub(crate) fn sign_in_signatures(
        &self,
        declared: Option<&str>,
        terminal: Option<&str>,
        stand_in: bool,
    ) -> TokenStream {
        let span = self.span;
        let Some(id) = declared else {
            return TokenStream::new();
        };
        let file = quote!(::agentacp::server::CredentialFile);
        let credential_file = quote_spanned! {span=>
            #[doc = "Where the credential of a sign-in is kept (a terminal sign-in's is stored there by the runtime; a session request is served once it holds one). Default: `credential` in the state folder (`AGENTACP_STATE_DIR`, else `~/.local/state/agentacp/<id>`)."]
            fn credential_file(&self) -> #file {
                #file::in_state_dir(#id)
            }
        };
        let sign_in = terminal.map(|reason| {
            let (doc, reason, body) = if stand_in {
                ("Stand-in.", None, quote_spanned!(span=> {
                    let _ = method;
                    async { ::core::result::Result::Err(::agentacp::Error::msg("the manifest has errors")) }
                }))
            } else {
                (
                    "A terminal sign-in: the editor ran this program with the `args` of the declared `terminal` method `method`, in a terminal (stdin and stdout are the user's, not ACP). Return the credential; the runtime stores it in `credential_file` and the program exits 0 (an error: non-zero).",
                    Some(quote_spanned!(span=> #[doc = #reason])),
                    quote_spanned!(span=> ;),
                )
            };
            quote_spanned! {span=>
                #[doc = #doc]
                #reason
                fn sign_in(&self, method: &str)
                    -> impl ::core::future::Future<Output = ::agentacp::Result<::agentacp::server::Credential>> + ::core::marker::Send
                    #body
            }
        });
        quote!(#credential_file #sign_in)
    }

    /// The `agentacp::server::Operator` methods that reach the sign-in handlers.
    pub(crate) fn sign_in_glue(&self, declared: bool, terminal: bool, handler: &Ident) -> TokenStream {
        let file = declared.then(|| {
            quote! {
                fn credential_file(&self) -> ::core::option::Option<::agentacp::server::CredentialFile> {
                    ::core::option::Option::Some(<Self as #handler>::credential_file(self))
                }
            }
        });
        let sign_in = terminal.then(|| {
            quote! {
                fn sign_in<'a>(
                    &'a self,
                    method: &'a str,
                ) -> ::core::option::Option<::agentacp::__private::BoxFuture<'a, ::agentacp::Result<::agentacp::server::Credential>>> {
                    ::core::option::Option::Some(::std::boxed::Box::pin(<Self as #handler>::sign_in(self, method)))
                }
            }
        });
        quote!(#file #sign_in)
    }

    /// The `agentacp::server::Operator` methods that call the extension handlers.
    pub(crate) fn extension_glue(&self, requests: bool, notifications: bool, handler: &Ident) -> TokenStream {
        let value = quote!(::agentacp::__private::Value);
        let request = requests.then(|| {
            quote! {
                fn extension<'a>(
                    &'a self,
                    method: &'a str,
                    params: #value,
                ) -> ::core::option::Option<::agentacp::__private::BoxFuture<'a, ::agentacp::Result<#value>>> {
                    ::core::option::Option::Some(::std::boxed::Box::pin(<Self as #handler>::extension(self, method, params)))
                }
            }
        });
        let notification = notifications.then(|| {
            quote! {
                fn extension_notification<'a>(
                    &'a self,
                    method: &'a str,
                    params: #value,
                ) -> ::core::option::Option<::agentacp::__private::BoxFuture<'a, ::agentacp::Result<()>>> {
                    ::core::option::Option::Some(::std::boxed::Box::pin(
                        <Self as #handler>::extension_notification(self, method, params),
                    ))
                }
            }
        });
        quote!(#request #notification)
    }

    /// `agentacp::client::ClientHandlers::handle` for the client-side `methods`: decodes the
    /// request through `AgentRequest` and calls the handler trait; a method not among them
    /// is not handled (`None`: the runtime answers `-32601`).
    pub(crate) fn client_handle(&self, methods: &[&Method], handler: &Ident) -> TokenStream {
        let wire = self.wire;
        let names = methods.iter().map(|method| method.name);
        let arms = methods.iter().map(|method| {
            let variant = format_ident!("{}", method.variant);
            let name = format_ident!("{}", trait_method(method).name);
            quote! {
                #wire::AgentRequest::#variant(request) => {
                    ::agentacp::client::encode(<Self as #handler>::#name(self, context, request).await?)
                }
            }
        });
        let body = if methods.is_empty() {
            quote! {
                let _ = (context, method, params);
                ::core::option::Option::None
            }
        } else {
            quote! {
                if !::core::matches!(method, #(#names)|*) {
                    return ::core::option::Option::None;
                }
                ::core::option::Option::Some(::std::boxed::Box::pin(async move {
                    match #wire::AgentRequest::decode(method, ::core::option::Option::Some(params))? {
                        #(#arms)*
                        _ => ::core::result::Result::Err(::agentacp::jsonrpc::RpcError::new(
                            -32601,
                            ::std::format!("method not found: `{method}`"),
                        )),
                    }
                }))
            }
        };
        quote! {
            fn handle<'a>(
                &'a self,
                context: &'a ::agentacp::client::ClientContext,
                method: &'a str,
                params: &'a ::agentacp::__private::RawValue,
            ) -> ::core::option::Option<::agentacp::__private::BoxFuture<'a, ::agentacp::client::HandlerResult>> {
                #body
            }
        }
    }
}
