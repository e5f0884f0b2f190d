//! The expansion of `#[acp_operator(manifest = "ACP.md")]`, as a library function over
//! `proc_macro2` tokens so it can be tested without a compiler (the typify-impl pattern; the
//! `acp-macros` crate only forwards to [`expand`]).
//!
//! Parse (the attribute and the struct) → check (the manifest, with every diagnostic turned
//! into a compile error spanned on the `manifest = "..."` literal, naming `ACP.md:line:col`)
//! → expand (the handler trait with exactly the methods the capabilities require, the
//! `Operator` impl that decodes the pinned revision's wire types, the manifest spec). When
//! anything is wrong, the struct and a permissive stand-in trait and impl are still emitted,
//! so the user sees the manifest errors and not a cascade of unrelated ones.

use std::path::{Path, PathBuf};

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::spanned::Spanned;
use syn::{Ident, LitStr, Token};

mod methods;
mod stand_in;

use acp_manifest::diagnostic::Code;
use acp_manifest::manifest::{self, AgentacpMetadata, AuthKind, Checked, DeclaredConfigOption, Kind, Tier};
use acp_manifest::methods::{
    self as table, AgentCapabilities, ClientMethods, McpCapabilities, Method, Offer, PromptCapabilities,
    SessionCapabilities, Side,
};
use acp_manifest::render;
use acp_manifest::resolved::{AuditTarget, Resolved};
use acp_manifest::source::SourceFile;
use acp_manifest::yaml::Node;
use methods::Emit;

/// The attribute's arguments: `manifest = "ACP.md"` and optionally `wire = path::to::module`.
struct Args {
    manifest: LitStr,
    wire: Option<syn::Path>,
}

impl Parse for Args {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let mut manifest = None;
        let mut wire = None;
        while !input.is_empty() {
            let key: Ident = input.parse()?;
            input.parse::<Token![=]>()?;
            match key.to_string().as_str() {
                "manifest" if manifest.is_none() => manifest = Some(input.parse()?),
                "wire" if wire.is_none() => wire = Some(input.parse()?),
                "manifest" | "wire" => return Err(syn::Error::new(key.span(), format!("`{key}` is given twice"))),
                _ => {
                    return Err(syn::Error::new(
                        key.span(),
                        format!(
                            "unknown argument `{key}`; expected `manifest = \"ACP.md\"` and optionally `wire = path`"
                        ),
                    ));
                }
            }
            if !input.is_empty() {
                input.parse::<Token![,]>()?;
            }
        }
        let manifest = manifest.ok_or_else(|| {
            syn::Error::new(
                Span::call_site(),
                "missing `manifest = \"ACP.md\"` (the manifest's path, relative to the folder of Cargo.toml or of this source file)",
            )
        })?;
        Ok(Args { manifest, wire })
    }
}

/// Where to look for the manifest: the folder of the crate's `Cargo.toml`, then the folder of
/// the source file that holds the attribute (when the compiler tells it).
#[derive(Debug, Clone, Default)]
pub struct Location {
    /// `CARGO_MANIFEST_DIR`.
    pub crate_dir: PathBuf,
    /// The folder of the file with the attribute.
    pub source_dir: Option<PathBuf>,
}

impl Location {
    /// The manifest `written` in the attribute: under the crate folder if it exists there,
    /// else under the source file's folder if it exists there, else the crate-folder path
    /// (whose reading then fails with a clear error).
    fn resolve(&self, written: &str) -> PathBuf {
        let in_crate = self.crate_dir.join(written);
        if in_crate.exists() {
            return in_crate;
        }
        match &self.source_dir {
            Some(dir) if dir.join(written).exists() => dir.join(written),
            _ => in_crate,
        }
    }
}

/// Expands `#[acp_operator(attr)] item`, looking for the manifest at `location`.
pub fn expand(attr: TokenStream, item: TokenStream, location: &Location) -> TokenStream {
    let args = match syn::parse2::<Args>(attr) {
        Ok(args) => args,
        Err(error) => return with_error(item, error),
    };
    let target: syn::ItemStruct = match syn::parse2::<syn::Item>(item.clone()) {
        Ok(syn::Item::Struct(target)) if target.generics.params.is_empty() => target,
        Ok(syn::Item::Struct(target)) => {
            let error = syn::Error::new(
                target.generics.span(),
                "`#[acp_operator]` does not support generic parameters: the operator struct is served as one concrete type",
            );
            return with_error(item, error);
        }
        Ok(other) => {
            let error = syn::Error::new(
                item_span(&other),
                "`#[acp_operator]` goes on a struct (the operator's state); found another kind of item",
            );
            return with_error(item, error);
        }
        Err(error) => return with_error(item, error),
    };
    let written = args.manifest.value();
    let path = location.resolve(&written);
    let span = args.manifest.span();
    let checked = match manifest::check_file(&path) {
        Ok(checked) => checked,
        Err(error) => {
            // No absolute paths: they differ between machines (and break checked-in UI tests).
            let looked = if location.source_dir.is_some() {
                "in the folder of Cargo.toml and in the folder of this source file"
            } else {
                "in the folder of Cargo.toml"
            };
            let message = format!("cannot read the manifest `{written}` (looked {looked}): {error}");
            let tokens = stand_in::emit(None, &target, Tier::Basic, &stand_in::default_wire(), span);
            return with_error(tokens, syn::Error::new(span, message));
        }
    };
    let errors = manifest_errors(&checked, &written, args.wire.is_some(), span);
    let kind = checked.manifest.as_ref().map(|m| m.kind);
    let rebuild = rebuild_tracking(&checked, &path);
    if let Some(first) = errors.into_iter().reduce(|mut all, next| {
        all.combine(next);
        all
    }) {
        let tier = best_effort_tier(&checked);
        let wire = stand_in::wire(&checked, args.wire.as_ref(), &written, span);
        let mut tokens = stand_in::emit(kind, &target, tier, &wire, span);
        tokens.extend(rebuild);
        return with_error(tokens, first);
    }
    let Some(plan) = Plan::of(&checked, &written, &path, args.wire, span) else {
        let error = syn::Error::new(span, format!("{written}: the manifest could not be read"));
        return with_error(
            stand_in::emit(kind, &target, Tier::Basic, &stand_in::default_wire(), span),
            error,
        );
    };
    let mut tokens = plan.emit(&target);
    tokens.extend(rebuild);
    tokens
}

fn with_error(mut tokens: TokenStream, error: syn::Error) -> TokenStream {
    tokens.extend(error.to_compile_error());
    tokens
}

fn item_span(item: &syn::Item) -> Span {
    match item {
        syn::Item::Enum(item) => item.enum_token.span,
        syn::Item::Union(item) => item.union_token.span,
        syn::Item::Fn(item) => item.sig.fn_token.span,
        syn::Item::Trait(item) => item.trait_token.span,
        syn::Item::Impl(item) => item.impl_token.span,
        other => other.span(),
    }
}

/// Every error of the manifest as a compile error on the literal: `ACP.md:5:10: error[ACP103]:
/// ...` followed by the snippet, as `scaffold-aip lint` prints it. With `wire = path`, an
/// `acp_rev` without built-in wire types is not an error (the module is checked instead).
fn manifest_errors(checked: &Checked, written: &str, custom_wire: bool, span: Span) -> Vec<syn::Error> {
    let source = SourceFile::new(written, checked.document.source.text().to_string());
    checked
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .filter(|d| !(custom_wire && d.code == Code::UnknownRevision))
        .map(|diagnostic| {
            let at = source.position(diagnostic.span.start);
            let rendered = render::human(&source, diagnostic, false);
            // The renderer's first line repeats the title; the snippet starts after it.
            let snippet = rendered.split_once('\n').map_or("", |(_, rest)| rest).trim_end();
            let message = format!(
                "{written}:{}:{}: {}[{}]: {}\n{snippet}",
                at.line,
                at.column,
                diagnostic.severity.as_str(),
                diagnostic.code.as_str(),
                diagnostic.message,
            );
            syn::Error::new(span, message)
        })
        .collect()
}

/// `line:column` of the value at `path` in the frontmatter.
fn position(checked: &Checked, path: &[&str]) -> Option<String> {
    let node = checked.document.frontmatter.as_ref()?.get_at(path)?;
    let at = checked.document.source.position(node.span.start);
    Some(format!("{}:{}", at.line, at.column))
}

fn best_effort_tier(checked: &Checked) -> Tier {
    checked
        .document
        .frontmatter
        .as_ref()
        .and_then(|root| root.get_at(&["metadata", "aip44", "tier"]))
        .and_then(Node::as_str)
        .and_then(Tier::parse)
        .unwrap_or(Tier::Basic)
}

/// `include_bytes!` of the manifest and of every ref that exists, so cargo rebuilds when any
/// of them changes. Files over the size limit are left out (rustc would read them whole); they
/// are errors, and a crate that failed to build is rebuilt anyway.
fn rebuild_tracking(checked: &Checked, manifest: &Path) -> TokenStream {
    let files: Vec<String> = std::iter::once(manifest.to_path_buf())
        .chain(checked.refs.iter().map(|r| r.path.clone()))
        .chain(checked.policies.iter().map(|p| p.target.path.clone()))
        .filter(|path| {
            std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() <= acp_manifest::document::MAX_FILE_BYTES)
        })
        .map(|path| path.to_string_lossy().into_owned())
        .collect();
    quote! {
        const _: () = { #( const _: &[u8] = include_bytes!(#files); )* };
    }
}

fn tier_type(tier: Tier) -> TokenStream {
    match tier {
        Tier::Basic => quote!(::agentacp::tier::Basic),
        Tier::GovernanceAware => quote!(::agentacp::tier::GovernanceAware),
        Tier::Sandboxed => quote!(::agentacp::tier::Sandboxed),
    }
}

fn trait_name(target: &syn::ItemStruct) -> Ident {
    format_ident!("{}Server", target.ident)
}

fn bridge_trait_name(target: &syn::ItemStruct) -> Ident {
    format_ident!("{}Bridge", target.ident)
}

fn client_trait_name(target: &syn::ItemStruct) -> Ident {
    format_ident!("{}Client", target.ident)
}

/// What a valid manifest expands to: the resolved manifest and where its pieces came from.
struct Plan {
    /// The manifest, resolved (the value `scaffold-aip explain` reports).
    resolved: Resolved,
    manifest: String,
    manifest_path: PathBuf,
    wire: TokenStream,
    acp_rev_prefix: String,
    /// `ACP.md:line:col` of `acp_rev`.
    acp_rev_at: String,
    /// `ACP.md:line:col` of `metadata.aip44.tier`.
    tier_at: String,
    /// Where the `wire = path` argument is, for the error when it is the wrong revision.
    wire_span: Span,
    /// `rev_<first 8>` when the wire types are agentacp's built-in module of the revision.
    built_in_module: Option<String>,
    /// `ACP.md:line:col` of `metadata.agentacp.protocol_versions`, when written.
    protocol_versions_at: Option<String>,
    span: Span,
    /// `ACP.md:line:col: ...` lines saying which manifest line requires which method.
    reasons: Vec<String>,
}

/// Which manifest line requires which method: `ACP.md:line:col: ...` lines, for the error
/// that names a missing handler method.
fn reasons(checked: &Checked, written: &str, resolved: &Resolved) -> Vec<String> {
    let manifest = &resolved.manifest;
    let aip44 = &manifest.metadata.aip44;
    let agent = resolved.capabilities.agent_capabilities.unwrap_or_default();
    let client = resolved
        .capabilities
        .client_capabilities
        .unwrap_or_default()
        .as_methods();
    let mut reasons = Vec::new();
    if manifest.kind == Kind::Server {
        reasons.push(format!(
            "{written}:{}: `kind: server` → `prompt`",
            position(checked, &["kind"]).unwrap_or_default()
        ));
        if resolved.protocol_versions.contains(&2) {
            let tier = match aip44.tier {
                Tier::Basic => "Basic",
                Tier::GovernanceAware => "GovernanceAware",
                Tier::Sandboxed => "Sandboxed",
            };
            reasons.push(format!(
                "{written}:{}: `protocol_versions` lists 2 → the turn is `Turn<'_, V2<{tier}>>`, without `turn.editor()` and `turn.set_mode()` (version 2 has no client file system, terminals or session modes)",
                position(checked, &["metadata", "agentacp", "protocol_versions"]).unwrap_or_default()
            ));
        }
    }
    let declared = |path: &[&str], methods: &str| {
        let full: Vec<&str> = ["metadata", "aip44", "capabilities", "client"]
            .iter()
            .chain(path)
            .copied()
            .collect();
        format!(
            "{written}:{}: `{}: true` → {methods}",
            position(checked, &full).unwrap_or_default(),
            path.last().copied().unwrap_or_default()
        )
    };
    for capability in client.capabilities() {
        let handlers: Vec<String> = capability
            .methods()
            .filter_map(Method::trait_method)
            .map(|handler| format!("`{}`", handler.name))
            .collect();
        reasons.push(declared(capability.path(), &handlers.join(", ")));
    }
    if manifest.kind == Kind::Bridge {
        reasons.push(format!(
            "{written}:{}: `kind: bridge` → `downstream` (the agent to start)",
            position(checked, &["kind"]).unwrap_or_default()
        ));
    }
    if manifest.kind == Kind::Client && reasons.is_empty() {
        reasons.push(format!(
            "{written}:{}: `kind: client` without client capabilities → no methods",
            position(checked, &["kind"]).unwrap_or_default()
        ));
    }
    if agent.load_session && manifest.kind != Kind::Client {
        let at = position(checked, &["metadata", "aip44", "capabilities", "agent", "loadSession"])
            .map(|at| format!("{at}: `loadSession: true`"))
            .unwrap_or_else(|| {
                format!(
                    "{}: `tier: {}` turns on loadSession",
                    position(checked, &["metadata", "aip44", "tier"]).unwrap_or_default(),
                    aip44.tier.as_str()
                )
            });
        reasons.push(format!("{written}:{at} → `load_session`"));
    }
    if manifest.kind == Kind::Server
        && let Some(surface) = &manifest.metadata.agentacp
    {
        surface_reasons(checked, written, surface, &mut reasons);
    }
    if resolved.websocket {
        reasons.push(format!(
            "{written}:{}: `transport` includes websocket → `authenticate`",
            position(checked, &["transport"]).unwrap_or_default()
        ));
    }
    reasons
}

/// The reasons a server's `metadata.agentacp` surface (modes, config options, extension
/// methods) gives for its methods, added to `reasons`.
fn surface_reasons(checked: &Checked, written: &str, surface: &AgentacpMetadata, reasons: &mut Vec<String>) {
    let at = |path: &[&str]| {
        let full: Vec<&str> = ["metadata", "agentacp"].iter().chain(path).copied().collect();
        position(checked, &full).unwrap_or_default()
    };
    if surface.modes.is_some() {
        reasons.push(format!("{written}:{}: `modes` → `set_mode`", at(&["modes"])));
    }
    if surface.config_options.is_some() {
        reasons.push(format!(
            "{written}:{}: `configOptions` → `set_config_option`",
            at(&["configOptions"])
        ));
    }
    sign_in_reasons(checked, written, surface, reasons);
    if let Some(extensions) = &surface.extensions {
        if !extensions.requests.is_empty() {
            reasons.push(format!(
                "{written}:{}: `extensions.requests` → `extension`",
                at(&["extensions", "requests"])
            ));
        }
        if !extensions.notifications.is_empty() {
            reasons.push(format!(
                "{written}:{}: `extensions.notifications` → `extension_notification`",
                at(&["extensions", "notifications"])
            ));
        }
    }
}

/// The reasons a server's sign-in methods (`metadata.agentacp.auth`) give: the first `agent`
/// one → `authenticate`, the first `terminal` one → `sign_in`, each at its item's line.
fn sign_in_reasons(checked: &Checked, written: &str, surface: &AgentacpMetadata, reasons: &mut Vec<String>) {
    let methods = surface.auth.as_deref().unwrap_or_default();
    let items = checked
        .document
        .frontmatter
        .as_ref()
        .and_then(|root| root.get_at(&["metadata", "agentacp", "auth"]))
        .and_then(|node| match &node.value {
            acp_manifest::yaml::Value::Sequence(items) => Some(items.as_slice()),
            _ => None,
        })
        .unwrap_or_default();
    for (kind, method_name) in [(AuthKind::Agent, "authenticate"), (AuthKind::Terminal, "sign_in")] {
        let Some(index) = methods.iter().position(|method| method.kind == kind) else {
            continue;
        };
        let at = items.get(index).map_or_else(String::new, |item| {
            let at = checked.document.source.position(item.span.start);
            format!("{}:{}", at.line, at.column)
        });
        reasons.push(format!(
            "{written}:{at}: `auth` method `{}` (type {}) → `{method_name}`",
            methods[index].id,
            kind.as_str()
        ));
    }
}

impl Plan {
    fn of(checked: &Checked, written: &str, path: &Path, wire: Option<syn::Path>, span: Span) -> Option<Plan> {
        // With `wire = path`, an `acp_rev` without built-in wire types was the only error
        // (others stop expansion before this), so the typed manifest is read here.
        let resolved = match &checked.manifest {
            Some(_) => Resolved::of(checked)?,
            None => {
                let mut typed = checked.clone();
                typed.manifest = Some(
                    serde_json::from_value::<manifest::Manifest>(checked.document.frontmatter.as_ref()?.to_json())
                        .ok()?,
                );
                Resolved::of(&typed)?
            }
        };
        let aip44 = &resolved.manifest.metadata.aip44;
        let wire_span = wire.as_ref().map_or(span, |path| path.span());
        // The revision comes from the wire module's `ACP_REV` / `PROTOCOL_VERSION` whatever it
        // is; without `wire = path` it is agentacp's built-in module of the pinned revision.
        let built_in_module = match (&wire, resolved.pin.built_in()) {
            (None, Some(revision)) => Some(revision.module.to_string()),
            _ => None,
        };
        let wire = match (wire, &built_in_module) {
            (Some(path), _) => quote!(#path),
            (None, Some(module)) => {
                let module = format_ident!("{module}");
                quote!(::agentacp::wire::#module)
            }
            (None, None) => return None,
        };
        let reasons = reasons(checked, written, &resolved);
        Some(Plan {
            manifest: written.to_string(),
            manifest_path: path.to_path_buf(),
            wire,
            acp_rev_prefix: aip44.acp_rev.clone(),
            acp_rev_at: format!(
                "{written}:{}",
                position(checked, &["metadata", "aip44", "acp_rev"]).unwrap_or_default()
            ),
            tier_at: format!(
                "{written}:{}",
                position(checked, &["metadata", "aip44", "tier"]).unwrap_or_default()
            ),
            wire_span,
            built_in_module,
            protocol_versions_at: position(checked, &["metadata", "agentacp", "protocol_versions"])
                .map(|at| format!("{written}:{at}")),
            span,
            reasons,
            resolved,
        })
    }

    /// The manifest's `kind`.
    fn kind(&self) -> Kind {
        self.resolved.manifest.kind
    }

    /// The manifest's tier.
    fn tier(&self) -> Tier {
        self.resolved.manifest.metadata.aip44.tier
    }

    /// The client-side methods a client or bridge offers (none for a server).
    fn client(&self) -> ClientMethods {
        self.resolved
            .capabilities
            .client_capabilities
            .unwrap_or_default()
            .as_methods()
    }

    /// `metadata.agentacp`, when the manifest has it.
    fn surface(&self) -> Option<&AgentacpMetadata> {
        self.resolved.manifest.metadata.agentacp.as_ref()
    }

    /// The extension requests and notifications the operator answers (servers only).
    fn extensions(&self) -> (Vec<&str>, Vec<&str>) {
        let extensions = self
            .surface()
            .filter(|_| self.kind() == Kind::Server)
            .and_then(|surface| surface.extensions.as_ref());
        fn names(list: &[manifest::ExtensionMethod]) -> Vec<&str> {
            list.iter().map(|m| m.0.as_str()).collect()
        }
        extensions.map_or((Vec::new(), Vec::new()), |e| {
            (names(&e.requests), names(&e.notifications))
        })
    }

    /// Whether `session/load` is offered.
    fn load_session(&self) -> bool {
        self.resolved
            .capabilities
            .agent_capabilities
            .is_some_and(|agent| agent.load_session)
    }

    fn emit(&self, target: &syn::ItemStruct) -> TokenStream {
        match self.kind() {
            Kind::Client => self.emit_client(target),
            Kind::Bridge => self.emit_bridge(target),
            Kind::Server => self.emit_server(target),
        }
    }

    /// The body of `spec()`: the resolved manifest as a static [`OperatorSpec`] of typed
    /// constants; the revision is the wire module's (`ACP_REV`, `PROTOCOL_VERSION`).
    fn spec_body(&self) -> TokenStream {
        let wire = &self.wire;
        let resolved = &self.resolved;
        let manifest = &resolved.manifest;
        let (spec_name, spec_id, spec_version) = (&manifest.name, &manifest.id, &manifest.version);
        let json =
            |document: &Option<serde_json::Value>| option_str(document.as_ref().map(|d| d.to_string()).as_deref());
        let operator = json(&resolved.documents.operator);
        let governance = json(&resolved.documents.governance);
        let sandbox = json(&resolved.documents.sandbox);
        let policies = resolved.policies.iter().map(|policy| policy.to_string());
        let audit = match &resolved.audit {
            AuditTarget::Off => quote!(::agentacp::__private::AuditTarget::Off),
            AuditTarget::External { path } => {
                let path = path.to_string_lossy().into_owned();
                quote!(::agentacp::__private::AuditTarget::External { path: #path })
            }
            AuditTarget::Governance { channel } => {
                let channel = option_str(channel.as_deref());
                quote!(::agentacp::__private::AuditTarget::Governance { channel: #channel })
            }
        };
        let editor = client_methods_literal(resolved.editor.map(|editor| editor.as_methods()).unwrap_or_default());
        let agent = match resolved.capabilities.agent_capabilities {
            Some(agent) => {
                let agent = agent_capabilities_literal(agent);
                quote!(::core::option::Option::Some(#agent))
            }
            None => quote!(::core::option::Option::None),
        };
        let client = match resolved.capabilities.client_capabilities {
            Some(client) => {
                let client = client_methods_literal(client.as_methods());
                quote!(::core::option::Option::Some(#client))
            }
            None => quote!(::core::option::Option::None),
        };
        let bindings = &resolved.bindings;
        let (bound_operator, bound_governance, bound_sandbox) = (
            option_str(bindings.operator.as_deref()),
            option_str(bindings.governance.as_deref()),
            option_str(bindings.sandbox.as_deref()),
        );
        let manifest_path = self.manifest_path.to_string_lossy().into_owned();
        let surface = surface_literal(self.surface().filter(|_| self.kind() == Kind::Server));
        let websocket = self.resolved.websocket;
        let protocol_versions = &self.resolved.protocol_versions;
        let (elicitation_form, elicitation_url) = (self.resolved.elicitation.form, self.resolved.elicitation.url);
        // The spec's tier is the tier type's name: one source for both.
        let tier = tier_type(self.tier());
        let kind = match self.kind() {
            Kind::Server => quote!(Server),
            Kind::Client => quote!(Client),
            Kind::Bridge => quote!(Bridge),
        };
        quote! {
            static SPEC: ::agentacp::__private::OperatorSpec = ::agentacp::__private::OperatorSpec {
                manifest_path: #manifest_path,
                name: #spec_name,
                id: #spec_id,
                version: #spec_version,
                tier: <#tier as ::agentacp::tier::Tier>::NAME,
                acp_rev: #wire::ACP_REV,
                protocol_version: #wire::PROTOCOL_VERSION,
                kind: ::agentacp::__private::OperatorKind::#kind,
                agent: #agent,
                client: #client,
                bindings: ::agentacp::__private::Bindings {
                    operator: #bound_operator,
                    governance: #bound_governance,
                    sandbox: #bound_sandbox,
                },
                operator: #operator,
                governance: #governance,
                sandbox: #sandbox,
                audit: #audit,
                editor: #editor,
                policies: &[#(#policies),*],
                surface: #surface,
                websocket: #websocket,
                elicitation: ::agentacp::__private::ElicitationModes { form: #elicitation_form, url: #elicitation_url },
                protocol_versions: &[#(#protocol_versions),*],
            };
            &SPEC
        }
    }

    /// A compile-time check that the wire module is the pinned revision's.
    fn rev_check(&self) -> TokenStream {
        let wire = &self.wire;
        let prefix = &self.acp_rev_prefix;
        let rev_mismatch = format!(
            "{}: the wire module was not generated from `acp_rev: {prefix}`; run `scaffold-aip regen --rev <that revision's SHA>` into it",
            self.acp_rev_at
        );
        let wire_span = self.wire_span;
        let feature_check = self
            .built_in_module
            .as_deref()
            .map(|module| feature_check(module, prefix, &self.acp_rev_at, self.span));
        let mcp_check = (self.kind() != Kind::Client && self.tier() == Tier::Sandboxed).then(|| {
            let what = match self.kind() {
                Kind::Server => "server takes the session's MCP servers (MCP-over-ACP among them) and runs its programs in the local sandbox",
                _ => "bridge offers the editor's MCP servers to its agent over ACP",
            };
            let message = format!(
                "{}: a `tier: sandboxed` {what}, which is agentacp's cargo feature `mcp` (the local sandbox included); turn it on in Cargo.toml: agentacp = {{ version = \"{}\", features = [\"mcp\"] }}",
                self.tier_at,
                env!("CARGO_PKG_VERSION"),
            );
            quote_spanned! {self.span=> ::agentacp::__require_mcp!(#message); }
        });
        let v2_check = self.v2_feature_check();
        let version_mismatch = format!(
            "{}: the wire module speaks another protocol version than 1; an operator's code is typed by protocol-version-1 wire types (list 2 in `metadata.agentacp.protocol_versions` to speak version 2 too)",
            self.acp_rev_at
        );
        quote_spanned! {wire_span=>
            #feature_check
            #v2_check
            #mcp_check
            const _: () = ::core::assert!(::agentacp::__private::rev_matches(#wire::ACP_REV, #prefix), #rev_mismatch);
            const _: () = ::core::assert!(#wire::PROTOCOL_VERSION == 1, #version_mismatch);
        }
    }

    /// A manifest that lists protocol version 2 is served through the runtime's translation
    /// into the pinned commit's built-in version-2 wire types (lint made sure they exist), which
    /// is agentacp's cargo feature `v2`: the `__require_v2!` call that fails the build naming
    /// it and the `protocol_versions` line.
    fn v2_feature_check(&self) -> Option<TokenStream> {
        let v2 = self.resolved.v2_revision()?;
        let at = self.protocol_versions_at.as_deref().unwrap_or(&self.acp_rev_at);
        let message = format!(
            "{at}: protocol version 2 is spoken through agentacp's translation into the wire types of {} ({}), which is agentacp's cargo feature `v2`; turn it on in Cargo.toml: agentacp = {{ version = \"{}\", features = [\"v2\"] }}",
            &v2.sha[..8],
            v2.label,
            env!("CARGO_PKG_VERSION"),
        );
        Some(quote_spanned! {self.span=> ::agentacp::__require_v2!(#message); })
    }

    /// The handler trait's docs and `on_unimplemented` attribute.
    fn trait_header(&self, target: &syn::ItemStruct, handler: &Ident) -> TokenStream {
        let name = &target.ident;
        let manifest = &self.manifest;
        let reasons = self.reasons.join("; ");
        let trait_doc = format!(
            "The handler trait of `{name}`, generated from `{manifest}` (kind `{}`, tier `{}`). Its methods are exactly what the manifest requires: {reasons}.",
            self.kind().as_str(),
            self.tier().as_str()
        );
        let unimplemented_message =
            format!("`{{Self}}` does not implement `{handler}`, the handler trait generated from {manifest}");
        let unimplemented_note = format!("implement the methods the manifest requires: {reasons}");
        quote! {
            #[doc = #trait_doc]
            #[diagnostic::on_unimplemented(message = #unimplemented_message, note = #unimplemented_note)]
        }
    }

    /// What a row of the method table needs from this manifest: whether it is offered, and
    /// the manifest line that turns it on.
    fn offers(&self, method: &Method) -> bool {
        match method.offer {
            Offer::Always => true,
            Offer::LoadSession => self.load_session(),
            Offer::Authentication => self.resolved.authenticate,
            Offer::Client(capability) => self.client().has(capability),
            Offer::Modes => self.surface().is_some_and(|s| s.modes.is_some()),
            Offer::ConfigOptions => self.surface().is_some_and(|s| s.config_options.is_some()),
            Offer::Capability(_) => false,
        }
    }

    /// The reason (`ACP.md:line:col: ... → ...`) a row's handler method exists.
    fn reason(&self, method: &Method) -> Option<&str> {
        let needle = match method.offer {
            Offer::Always => "`prompt`".to_string(),
            Offer::LoadSession => "`load_session`".to_string(),
            Offer::Authentication => "`authenticate`".to_string(),
            Offer::Client(capability) => format!("`{}: true`", capability.path().last().copied().unwrap_or_default()),
            Offer::Modes => "`set_mode`".to_string(),
            Offer::ConfigOptions => "`set_config_option`".to_string(),
            Offer::Capability(_) => return None,
        };
        self.reasons.iter().find(|r| r.contains(&needle)).map(String::as_str)
    }

    /// The rows of the method table `side` answers through this operator's handler trait.
    fn trait_rows(&self, side: Side) -> Vec<&'static Method> {
        table::received_by(side)
            .filter(|method| method.trait_method().is_some() && self.offers(method))
            .collect()
    }

    fn emit_client(&self, target: &syn::ItemStruct) -> TokenStream {
        let name = &target.ident;
        let vis = &target.vis;
        let handler = client_trait_name(target);
        let header = self.trait_header(target, &handler);
        let tier = tier_type(self.tier());
        let emit = Emit {
            wire: &self.wire,
            tier: &tier,
            span: self.span,
        };
        let spec = self.spec_body();
        let rev_check = self.rev_check();
        let rows = self.trait_rows(Side::Client);
        let signatures = rows
            .iter()
            .map(|method| emit.signature(method, self.reason(method), false));
        let handle = emit.client_handle(&rows, &handler);
        let capabilities = client_methods_literal(self.client());
        quote! {
            #target

            #header
            #vis trait #handler: ::core::marker::Send + ::core::marker::Sync + 'static {
                #(#signatures)*
            }

            #rev_check

            impl ::agentacp::client::ClientHandlers for #name {
                fn capabilities(&self) -> ::agentacp::__private::ClientMethods {
                    #capabilities
                }

                #handle
            }

            impl ::agentacp::client::ClientOperator for #name {
                type Tier = #tier;

                fn spec() -> &'static ::agentacp::__private::OperatorSpec {
                    #spec
                }
            }

            // The handler trait must be implemented even when it has no methods.
            const _: () = {
                fn requires_handler<T: #handler>() {}
                fn check() {
                    requires_handler::<#name>();
                }
            };
        }
    }

    /// `impl OffersWebSocket` when the manifest's `transport` lists `websocket`: what lets the
    /// operator be served (or a bridge listen) over WebSocket.
    fn offers_websocket(&self, name: &syn::Ident) -> TokenStream {
        if !self.resolved.websocket {
            return TokenStream::new();
        }
        let doc = self
            .reasons
            .iter()
            .find(|reason| reason.contains("`transport` includes websocket"))
            .cloned()
            .unwrap_or_default();
        quote! {
            #[doc = #doc]
            impl ::agentacp::server::OffersWebSocket for #name {}
        }
    }

    fn emit_bridge(&self, target: &syn::ItemStruct) -> TokenStream {
        let name = &target.ident;
        let vis = &target.vis;
        let handler = bridge_trait_name(target);
        let header = self.trait_header(target, &handler);
        let tier = tier_type(self.tier());
        let span = self.span;
        let spec = self.spec_body();
        let rev_check = self.rev_check();
        let reason = self.reasons.join("; ");
        let offers_websocket = self.offers_websocket(name);
        let downstream = quote_spanned! {span=>
            #[doc = "The agent the bridge starts downstream: program, arguments, environment allow-list, working folder."]
            #[doc = #reason]
            fn downstream(&self) -> ::agentacp::client::AgentCommand;
        };
        quote! {
            #target

            #header
            #vis trait #handler: ::core::marker::Send + ::core::marker::Sync + 'static {
                #downstream
            }

            #rev_check

            #offers_websocket

            impl ::agentacp::bridge::BridgeOperator for #name {
                type Tier = #tier;

                fn spec() -> &'static ::agentacp::__private::OperatorSpec {
                    #spec
                }

                fn downstream(&self) -> ::agentacp::client::AgentCommand {
                    <Self as #handler>::downstream(self)
                }
            }
        }
    }

    /// A server's tier type: the manifest's tier, as [`V2`](::agentacp::tier::V2) of it when
    /// `protocol_versions` lists 2, so that what version 2 removed (`turn.editor()`,
    /// `turn.set_mode()`) does not compile.
    fn server_tier(&self) -> TokenStream {
        let tier = tier_type(self.tier());
        if self.resolved.protocol_versions.contains(&2) {
            quote!(::agentacp::tier::V2<#tier>)
        } else {
            tier
        }
    }

    fn emit_server(&self, target: &syn::ItemStruct) -> TokenStream {
        let name = &target.ident;
        let vis = &target.vis;
        let handler = trait_name(target);
        let tier = self.server_tier();
        let header = self.trait_header(target, &handler);
        let emit = Emit {
            wire: &self.wire,
            tier: &tier,
            span: self.span,
        };
        let rows = self.trait_rows(Side::Agent);
        let signatures = rows
            .iter()
            .map(|method| emit.signature(method, self.reason(method), false));
        let glue = rows.iter().map(|method| emit.server_glue(method, &handler));
        let (requests, notifications) = self.extensions();
        let reason_for = |needle: &str| self.reasons.iter().find(|r| r.contains(needle)).map(String::as_str);
        let extension_signatures = emit.extension_signatures(
            reason_for("→ `extension`").filter(|_| !requests.is_empty()),
            reason_for("→ `extension_notification`").filter(|_| !notifications.is_empty()),
            false,
        );
        let extension_glue = emit.extension_glue(!requests.is_empty(), !notifications.is_empty(), &handler);
        let terminal_sign_in = reason_for("→ `sign_in`");
        let declares_sign_in = !self.resolved.sign_in.is_empty();
        let sign_in_signature = emit.sign_in_signatures(
            declares_sign_in.then_some(self.resolved.manifest.id.as_str()),
            terminal_sign_in,
            false,
        );
        let sign_in_glue = emit.sign_in_glue(declares_sign_in, terminal_sign_in.is_some(), &handler);
        let spec = self.spec_body();
        let rev_check = self.rev_check();
        let check_params = emit.check_params();
        let offers_websocket = self.offers_websocket(name);
        quote! {
            #target

            #header
            #vis trait #handler: ::core::marker::Send + ::core::marker::Sync + 'static {
                #(#signatures)*
                #extension_signatures
                #sign_in_signature
            }

            #rev_check

            #offers_websocket

            impl ::agentacp::server::Operator for #name {
                type Tier = #tier;

                fn spec() -> &'static ::agentacp::__private::OperatorSpec {
                    #spec
                }

                #check_params

                #(#glue)*
                #extension_glue
                #sign_in_glue
            }
        }
    }
}

/// `Surface { .. }` of `metadata.agentacp` (`Surface::NONE` without it).
fn surface_literal(surface: Option<&AgentacpMetadata>) -> TokenStream {
    let Some(surface) = surface else {
        return quote!(::agentacp::__private::Surface::NONE);
    };
    let modes = match &surface.modes {
        Some(modes) => {
            let default = &modes.default;
            let available = modes.available.iter().map(|mode| {
                let (id, name, description) = (&mode.id, &mode.name, option_str(mode.description.as_deref()));
                quote!(::agentacp::__private::Mode { id: #id, name: #name, description: #description })
            });
            quote!(::core::option::Option::Some(::agentacp::__private::Modes {
                default: #default,
                available: &[#(#available),*],
            }))
        }
        None => quote!(::core::option::Option::None),
    };
    let options = surface.config_options.iter().flatten().map(|option| {
        let (id, name, description, category, kind) = match option {
            DeclaredConfigOption::Select(select) => {
                let default = &select.default;
                let choices = select.options.iter().map(|choice| {
                    let (value, name) = (&choice.value, &choice.name);
                    let description = option_str(choice.description.as_deref());
                    quote!(::agentacp::__private::Choice { value: #value, name: #name, description: #description })
                });
                let kind =
                    quote!(::agentacp::__private::ConfigKind::Select { default: #default, options: &[#(#choices),*] });
                (&select.id, &select.name, &select.description, select.category, kind)
            }
            DeclaredConfigOption::Boolean(boolean) => {
                let default = boolean.default;
                let kind = quote!(::agentacp::__private::ConfigKind::Boolean { default: #default });
                (&boolean.id, &boolean.name, &boolean.description, boolean.category, kind)
            }
        };
        let description = option_str(description.as_deref());
        let category = option_str(category.map(|c| c.as_str()));
        quote! {
            ::agentacp::__private::ConfigOption {
                id: #id, name: #name, description: #description, category: #category, kind: #kind,
            }
        }
    });
    let commands = surface.commands.iter().flatten().map(|command| {
        let (name, description, hint) = (&command.name, &command.description, option_str(command.hint.as_deref()));
        quote!(::agentacp::__private::Command { name: #name, description: #description, hint: #hint })
    });
    let extensions = surface.extensions.clone().unwrap_or_default();
    let requests = extensions.requests.iter().map(|m| &m.0);
    let notifications = extensions.notifications.iter().map(|m| &m.0);
    let sign_in = surface.auth.iter().flatten().map(|method| {
        let (id, name, description) = (&method.id, &method.name, option_str(method.description.as_deref()));
        let kind = match method.kind {
            AuthKind::Agent => quote!(Agent),
            AuthKind::Terminal => quote!(Terminal),
        };
        let args = method.args.iter().flatten();
        let env = method.env.iter().flatten().map(|(key, value)| quote!((#key, #value)));
        quote! {
            ::agentacp::__private::SignIn {
                id: #id, kind: ::agentacp::__private::SignInKind::#kind, name: #name,
                description: #description, args: &[#(#args),*], env: &[#(#env),*],
            }
        }
    });
    quote! {
        ::agentacp::__private::Surface {
            modes: #modes,
            config_options: &[#(#options),*],
            commands: &[#(#commands),*],
            extensions: ::agentacp::__private::Extensions {
                requests: &[#(#requests),*],
                notifications: &[#(#notifications),*],
            },
            sign_in: &[#(#sign_in),*],
        }
    }
}

/// `ClientMethods { .. }` with the flags of `methods`.
fn client_methods_literal(methods: ClientMethods) -> TokenStream {
    let ClientMethods {
        read_text_file,
        write_text_file,
        terminal,
    } = methods;
    quote! {
        ::agentacp::__private::ClientMethods {
            read_text_file: #read_text_file,
            write_text_file: #write_text_file,
            terminal: #terminal,
        }
    }
}

/// `AgentCapabilities { .. }` with the flags of `agent`.
fn agent_capabilities_literal(agent: AgentCapabilities) -> TokenStream {
    let AgentCapabilities {
        load_session,
        prompt_capabilities:
            PromptCapabilities {
                image,
                audio,
                embedded_context,
            },
        mcp_capabilities: McpCapabilities { http, sse, acp },
        session_capabilities:
            SessionCapabilities {
                list,
                resume,
                close,
                delete,
                additional_directories,
            },
    } = agent;
    quote! {
        ::agentacp::__private::AgentCapabilities {
            load_session: #load_session,
            prompt_capabilities: ::agentacp::__private::PromptCapabilities {
                image: #image,
                audio: #audio,
                embedded_context: #embedded_context,
            },
            mcp_capabilities: ::agentacp::__private::McpCapabilities { http: #http, sse: #sse, acp: #acp },
            session_capabilities: ::agentacp::__private::SessionCapabilities {
                list: #list,
                resume: #resume,
                close: #close,
                delete: #delete,
                additional_directories: #additional_directories,
            },
        }
    }
}

/// A built-in revision other than the default is behind a cargo feature of agentacp: the
/// `__require_rev_…!` call that fails the build, naming the feature, when it is off.
fn feature_check(module: &str, prefix: &str, acp_rev_at: &str, span: Span) -> TokenStream {
    let check = format_ident!("__require_{module}");
    let feature = module.replace('_', "-");
    let message = format!(
        "{acp_rev_at}: acp_rev `{prefix}` is a built-in revision whose wire types are behind agentacp's cargo feature `{feature}`; turn it on in Cargo.toml: agentacp = {{ version = \"{}\", features = [\"{feature}\"] }}",
        env!("CARGO_PKG_VERSION"),
    );
    quote_spanned! {span=> ::agentacp::#check!(#message); }
}

fn option_str(text: Option<&str>) -> TokenStream {
    match text {
        Some(text) => quote!(::core::option::Option::Some(#text)),
        None => quote!(::core::option::Option::None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace_examples() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
    }

    fn expanded(attr: TokenStream, item: TokenStream, dir: &Path) -> String {
        let location = Location {
            crate_dir: dir.to_path_buf(),
            source_dir: None,
        };
        expand(attr, item, &location).to_string()
    }

    #[test]
    fn the_source_files_folder_is_the_second_place_looked_in() {
        let examples = workspace_examples();
        let location = Location {
            crate_dir: std::env::temp_dir().join("no-such-crate-dir"),
            source_dir: Some(examples.clone()),
        };
        let text = expand(
            quote!(manifest = "echo-server/ACP.md"),
            quote!(
                struct Echo;
            ),
            &location,
        )
        .to_string();
        assert!(
            text.contains("trait EchoServer") && !text.contains("compile_error"),
            "{text}"
        );
    }

    /// The operator's listed policies are compiled into the spec, and their files tracked.
    #[test]
    fn the_operators_listed_policies_are_compiled_into_the_spec() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../agentacp/tests/operators/test-policies");
        let text = expanded(
            quote!(manifest = "ACP.md"),
            quote!(
                struct PolicyTester;
            ),
            &dir,
        );
        assert!(!text.contains("compile_error"), "{text}");
        let spec = text.split("policies : & [").nth(1).expect("a policies field");
        assert!(
            spec.contains("policy:no-deletes") && spec.contains("policy:ask-tests"),
            "{spec}"
        );
        assert!(
            text.contains("policies/no-deletes.md"),
            "the policy file is tracked for rebuilds"
        );
    }

    /// Issue #14: a built-in revision other than the default is a cargo feature of agentacp;
    /// the expansion asks for it by name (the default revision needs none, but is checked the
    /// same way), and a `wire =` module needs no feature.
    #[test]
    fn a_built_in_revision_is_required_by_its_feature_and_named_in_the_message() {
        let full = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/manifests/good/full-revision");
        let text = expanded(
            quote!(manifest = "ACP.md"),
            quote!(
                pub struct Pinned;
            ),
            &full,
        );
        assert!(text.contains(":: agentacp :: __require_rev_d9072428 !"), "{text}");
        assert!(
            text.contains("agentacp's cargo feature `rev-d9072428`") && text.contains("ACP.md:"),
            "{text}"
        );
        let default = expanded(
            quote!(manifest = "ACP.md"),
            quote!(
                pub struct Reviewer;
            ),
            &workspace_examples().join("governed-server"),
        );
        assert!(default.contains("__require_rev_0fc18323 !"), "{default}");
    }

    /// Issue #48: a manifest's `protocol_versions` reaches the spec, a manifest that lists 2
    /// needs agentacp's feature `v2` (named with the `protocol_versions` line) and its commit's
    /// version-1 module's feature, and every wire module must be protocol version 1.
    #[test]
    fn protocol_versions_reach_the_spec_and_version_2_needs_its_feature() {
        let v2 = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/manifests/good/v2-server");
        let text = expanded(
            quote!(manifest = "ACP.md"),
            quote!(
                pub struct Both;
            ),
            &v2,
        );
        assert!(text.contains("protocol_versions : & [1u16 , 2u16]"), "{text}");
        assert!(text.contains(":: agentacp :: __require_rev_272bf799 !"), "{text}");
        assert!(text.contains(":: agentacp :: __require_v2 !"), "{text}");
        assert!(
            text.contains("ACP.md:14:24: protocol version 2 is spoken through agentacp's translation")
                && text.contains("agentacp's cargo feature `v2`"),
            "{text}"
        );
        assert!(
            text.contains("wire :: rev_272bf799 ::"),
            "typed by the v1 module: {text}"
        );
        assert!(text.contains("PROTOCOL_VERSION == 1"), "{text}");
        let default = expanded(
            quote!(manifest = "ACP.md"),
            quote!(
                pub struct Reviewer;
            ),
            &workspace_examples().join("governed-server"),
        );
        assert!(default.contains("protocol_versions : & [1u16]"), "{default}");
        assert!(!default.contains("__require_v2"), "{default}");
    }

    /// Issue #48: a server whose manifest lists protocol version 2 has its turn typed
    /// `Turn<'_, V2<tier>>` (no `turn.editor()`, no `turn.set_mode()`), and the trait's docs
    /// say why; a version-1 manifest's turn is typed by its tier alone, as before.
    #[test]
    fn a_version_2_servers_turn_is_typed_v2_of_its_tier() {
        let v2 = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/manifests/good/v2-server");
        let text = expanded(
            quote!(manifest = "ACP.md"),
            quote!(
                pub struct Both;
            ),
            &v2,
        );
        assert!(
            text.contains("Turn < '_ , :: agentacp :: tier :: V2 < :: agentacp :: tier :: Basic > >"),
            "{text}"
        );
        assert!(
            text.contains("type Tier = :: agentacp :: tier :: V2 < :: agentacp :: tier :: Basic >"),
            "{text}"
        );
        assert!(
            text.contains("ACP.md:14:24: `protocol_versions` lists 2 → the turn is `Turn<'_, V2<Basic>>`"),
            "{text}"
        );
        let default = expanded(
            quote!(manifest = "ACP.md"),
            quote!(
                pub struct Reviewer;
            ),
            &workspace_examples().join("governed-server"),
        );
        assert!(
            default.contains("Turn < '_ , :: agentacp :: tier :: GovernanceAware >") && !default.contains("tier :: V2"),
            "{default}"
        );
    }

    /// A client's `metadata.agentacp.elicitation` reaches the spec (it was always `NONE`).
    #[test]
    fn a_clients_elicitation_modes_reach_the_spec() {
        let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/manifests/good/elicitation-client");
        let text = expanded(
            quote!(manifest = "ACP.md"),
            quote!(
                pub struct Asked;
            ),
            &client,
        );
        assert!(
            text.contains("elicitation : :: agentacp :: __private :: ElicitationModes { form : true , url : false }"),
            "{text}"
        );
    }

    #[test]
    fn a_governed_server_gets_prompt_and_load_session() {
        let text = expanded(
            quote!(manifest = "ACP.md"),
            quote!(
                pub struct Reviewer;
            ),
            &workspace_examples().join("governed-server"),
        );
        assert!(text.contains("trait ReviewerServer"), "{text}");
        assert!(text.contains("fn load_session"), "{text}");
        // Its `transport` lists websocket: `authenticate`, and it may be served remotely.
        assert!(text.contains("fn authenticate"), "{text}");
        assert!(
            text.contains("impl :: agentacp :: server :: OffersWebSocket for Reviewer"),
            "{text}"
        );
        assert!(text.contains("websocket : true"), "{text}");
        assert!(text.contains("GovernanceAware"), "{text}");
        assert!(text.contains("rev_0fc18323"), "{text}");
        assert!(!text.contains("compile_error"), "{text}");
    }

    #[test]
    fn a_basic_server_has_no_load_session() {
        let text = expanded(
            quote!(manifest = "ACP.md"),
            quote!(
                struct Echo;
            ),
            &workspace_examples().join("echo-server"),
        );
        assert!(text.contains("trait EchoServer"), "{text}");
        assert!(!text.contains("fn load_session"), "{text}");
        assert!(text.contains(":: agentacp :: tier :: Basic"), "{text}");
    }

    #[test]
    fn manifest_errors_name_the_line_and_keep_the_struct() {
        let dir = std::env::temp_dir().join(format!("acp-macro-{}", std::process::id()));
        let folder = dir.join("broken");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(
            folder.join("ACP.md"),
            "---\nname: broken\nid: broken\ndescription: d\nversion: \"1.0\"\nkind: server\ntransport: stdio\nmetadata:\n  aip44:\n    acp_rev: 0fc18323\n    tier: basic\n---\n",
        )
        .unwrap();
        let text = expanded(
            quote!(manifest = "ACP.md"),
            quote!(
                struct Broken;
            ),
            &folder,
        );
        assert!(text.contains("compile_error"), "{text}");
        assert!(text.contains("ACP.md:5:10: error[ACP103]"), "{text}");
        assert_eq!(
            text.matches("error[ACP103]").count(),
            1,
            "the heading is not repeated: {text}"
        );
        assert!(
            text.contains("ACP.md:6:7: error[ACP202]") || text.contains("ACP202"),
            "{text}"
        );
        assert!(text.contains("struct Broken"), "{text}");
        assert!(text.contains("trait BrokenServer"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_wire_module_stands_in_for_a_revision_that_is_not_built_in() {
        let dir = std::env::temp_dir().join(format!("acp-macro-wire-{}", std::process::id()));
        let folder = dir.join("custom-rev");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(
            folder.join("OPERATOR.md"),
            "---\nname: O\nid: o\npersona_summary: p\nversion: 0.1.0\nprofile: {role: r}\n---\n",
        )
        .unwrap();
        std::fs::write(
            folder.join("ACP.md"),
            "---\nname: custom-rev\nid: custom-rev\ndescription: d\nversion: 0.1.0\nkind: server\ntransport: stdio\nmetadata:\n  aip44:\n    acp_rev: abcdef1\n    tier: basic\n    operator: ./OPERATOR.md\n---\n",
        )
        .unwrap();
        let without = expanded(
            quote!(manifest = "ACP.md"),
            quote!(
                struct Custom;
            ),
            &folder,
        );
        assert!(
            without.contains("ACP400"),
            "an unknown rev without `wire` is an error: {without}"
        );
        let with = expanded(
            quote!(manifest = "ACP.md", wire = crate::acp_wire),
            quote!(
                struct Custom;
            ),
            &folder,
        );
        assert!(!with.contains("compile_error"), "{with}");
        assert!(with.contains("crate :: acp_wire :: PromptRequest"), "{with}");
        // The module is checked against the pinned revision at compile time.
        assert!(
            with.contains("rev_matches (crate :: acp_wire :: ACP_REV , \"abcdef1\")"),
            "{with}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Issue #13: a server's `capabilities.client` fills `OperatorSpec::editor` (it was
    /// always `EditorMethods::NONE`); a client's offers, never its editor methods.
    #[test]
    fn a_servers_client_capabilities_fill_the_specs_editor_methods() {
        let dir = tempfile::tempdir().unwrap();
        let caps =
            "    capabilities:\n      client:\n        fs:\n          readTextFile: true\n        terminal: true\n";
        let write = |name: &str, kind: &str, operator: &str| {
            let folder = dir.path().join(name);
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(
                folder.join("OPERATOR.md"),
                "---\nname: O\nid: o\npersona_summary: p\nversion: 0.1.0\nprofile: {role: r}\ngovernance: {autonomy: supervised}\n---\n",
            )
            .unwrap();
            std::fs::write(
                folder.join("ACP.md"),
                format!("---\nname: {name}\nid: {name}\ndescription: d\nversion: 0.1.0\nkind: {kind}\ntransport: stdio\nmetadata:\n  aip44:\n    acp_rev: 0fc18323\n    tier: governance-aware\n{operator}{caps}---\n"),
            )
            .unwrap();
            folder
        };
        let server = write("editor-server", "server", "    operator: ./OPERATOR.md\n");
        let text = expanded(
            quote!(manifest = "ACP.md"),
            quote!(
                struct Editor;
            ),
            &server,
        );
        assert!(!text.contains("compile_error"), "{text}");
        assert!(
            text.contains(
                "editor : :: agentacp :: __private :: ClientMethods { read_text_file : true , write_text_file : false , terminal : true , }"
            ),
            "{text}"
        );
        assert!(
            !text.contains("fn read_text_file"),
            "a server's trait has no client methods: {text}"
        );
        // `transport: stdio`: no `authenticate`, and not servable over WebSocket.
        assert!(
            !text.contains("fn authenticate") && !text.contains("OffersWebSocket"),
            "{text}"
        );
        assert!(text.contains("websocket : false"), "{text}");
        assert!(
            !text.contains("clientCapabilities"),
            "a server does not advertise them: {text}"
        );

        let client = write("offers-client", "client", "");
        let text = expanded(
            quote!(manifest = "ACP.md"),
            quote!(
                struct Offers;
            ),
            &client,
        );
        assert!(!text.contains("compile_error"), "{text}");
        assert!(
            text.contains(
                "editor : :: agentacp :: __private :: ClientMethods { read_text_file : false , write_text_file : false , terminal : false , }"
            ),
            "{text}"
        );
        assert!(text.contains("fn read_text_file"), "{text}");
    }

    #[test]
    fn bad_attributes_and_items_are_errors_on_them() {
        let dir = workspace_examples().join("echo-server");
        let text = expanded(
            quote!(manifesto = "ACP.md"),
            quote!(
                struct Echo;
            ),
            &dir,
        );
        assert!(text.contains("unknown argument `manifesto`"), "{text}");
        let text = expanded(
            quote!(),
            quote!(
                struct Echo;
            ),
            &dir,
        );
        assert!(text.contains("missing `manifest"), "{text}");
        let text = expanded(
            quote!(manifest = "ACP.md"),
            quote!(
                enum Echo {
                    A,
                }
            ),
            &dir,
        );
        assert!(text.contains("goes on a struct"), "{text}");
        let text = expanded(
            quote!(manifest = "ACP.md"),
            quote!(
                struct Echo<T>(T);
            ),
            &dir,
        );
        assert!(text.contains("generic parameters"), "{text}");
        let text = expanded(
            quote!(manifest = "NOPE.md"),
            quote!(
                struct Echo;
            ),
            &dir,
        );
        assert!(text.contains("cannot read the manifest `NOPE.md`"), "{text}");
        assert!(!text.contains(dir.to_str().unwrap()), "no absolute paths: {text}");
    }
}
