//! The AIP-44 rules a JSON Schema cannot express (ACP2xx). They read the located tree and
//! consider only values that are themselves well-formed, so one mistake is reported once.

use std::path::Path;

use crate::diagnostic::{Code, Diagnostic};
use crate::yaml::{Node, Value};

use super::capabilities::tier_flags;
use super::model::{Kind, Tier, is_kebab_id, kebab_form};
use super::refs::{RefRole, ResolvedRef};

/// Runs every AIP rule over the frontmatter `root` of the manifest at `path`.
pub fn check(root: &Node, path: &Path, refs: &[ResolvedRef], out: &mut Vec<Diagnostic>) {
    let facts = Facts::read(root);
    name_is_kebab(root, out);
    name_matches_folder(root, path, out);
    transport_includes_stdio(root, out);
    required_refs(&facts, out);
    audit_rules(&facts, out);
    capability_sides(&facts, out);
    agent_surface(root, &facts, out);
    tier_capabilities(&facts, out);
    mcp_servers(&facts, out);
    governance_binding(&facts, refs, out);
    basic_tier_operator(&facts, refs, out);
}

/// The well-formed values the rules depend on.
struct Facts<'a> {
    kind: Option<(Kind, &'a Node)>,
    tier: Option<(Tier, &'a Node)>,
    aip44: Option<&'a Node>,
    capabilities: Option<&'a Node>,
}

impl<'a> Facts<'a> {
    fn read(root: &'a Node) -> Self {
        let kind = root.get("kind").and_then(|n| Some((Kind::parse(n.as_str()?)?, n)));
        let aip44 = root.get_at(&["metadata", "aip44"]).filter(|n| n.as_mapping().is_some());
        let tier = aip44
            .and_then(|a| a.get("tier"))
            .and_then(|n| Some((Tier::parse(n.as_str()?)?, n)));
        let capabilities = aip44
            .and_then(|a| a.get("capabilities"))
            .filter(|n| n.as_mapping().is_some());
        Facts {
            kind,
            tier,
            aip44,
            capabilities,
        }
    }

    fn has(&self, key: &str) -> bool {
        self.aip44.is_some_and(|a| a.get(key).is_some())
    }
}

fn name_is_kebab(root: &Node, out: &mut Vec<Diagnostic>) {
    let Some(name_node) = root.get("name") else { return };
    // An empty name is already a length error (ACP104).
    let Some(name) = name_node.as_str().filter(|n| !n.is_empty()) else {
        return;
    };
    if is_kebab_id(name) {
        return;
    }
    let help = match kebab_form(name) {
        Some(kebab) => format!("use `name: {kebab}` (and name the folder `{kebab}`)"),
        None => {
            "use lowercase letters, digits and single hyphens, starting with a letter (e.g. `my-agent`)".to_string()
        }
    };
    out.push(
        Diagnostic::new(
            Code::NameNotKebab,
            name_node.span.clone(),
            format!(
                "name `{name}` is not a kebab-case id (lowercase letters and digits in words joined by single hyphens, starting with a letter)"
            ),
        )
        .with_help(help),
    );
}

fn name_matches_folder(root: &Node, path: &Path, out: &mut Vec<Diagnostic>) {
    let Some(name_node) = root.get("name") else { return };
    let Some(name) = name_node.as_str() else { return };
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .or_else(|| std::env::current_dir().ok())
        .and_then(|p| std::fs::canonicalize(&p).ok().or(Some(p)));
    let Some(folder_name) = folder
        .as_deref()
        .and_then(Path::file_name)
        .map(|f| f.to_string_lossy().into_owned())
    else {
        return;
    };
    if name != folder_name {
        out.push(
            Diagnostic::new(
                Code::NameNotFolder,
                name_node.span.clone(),
                format!("name `{name}` differs from the folder the ACP.md is in (`{folder_name}`)"),
            )
            .with_help(format!("rename the folder to `{name}`, or set `name: {folder_name}`")),
        );
    }
}

fn transport_includes_stdio(root: &Node, out: &mut Vec<Diagnostic>) {
    let Some(node) = root.get("transport") else { return };
    let items: Vec<&Node> = match &node.value {
        Value::Sequence(items) if !items.is_empty() => items.iter().collect(),
        Value::String(_) => vec![node],
        _ => return,
    };
    let names: Option<Vec<&str>> = items
        .iter()
        .map(|n| n.as_str().filter(|s| matches!(*s, "stdio" | "websocket")))
        .collect();
    if names.is_some_and(|names| !names.contains(&"stdio")) {
        out.push(
            Diagnostic::new(
                Code::NoStdio,
                node.span.clone(),
                "transport must include `stdio` (AIP-44: implementations MUST support stdio)",
            )
            .with_help("use `transport: [stdio, websocket]`"),
        );
    }
}

fn required_refs(facts: &Facts<'_>, out: &mut Vec<Diagnostic>) {
    if let Some((Kind::Server, node)) = facts.kind
        && facts.aip44.is_some()
        && !facts.has("operator")
    {
        out.push(
            Diagnostic::new(
                Code::ServerWithoutOperator,
                node.span.clone(),
                "a `kind: server` manifest needs `metadata.aip44.operator`",
            )
            .with_help("add `operator: ./OPERATOR.md`, the AIP-9 operator this server exposes"),
        );
    }
    if let Some((Tier::Sandboxed, node)) = facts.tier
        && !facts.has("sandbox")
    {
        out.push(
            Diagnostic::new(
                Code::SandboxedWithoutSandbox,
                node.span.clone(),
                "`tier: sandboxed` needs `metadata.aip44.sandbox`",
            )
            .with_help("add `sandbox: ./SANDBOX.md`, the AIP-36 sandbox profile"),
        );
    }
}

fn audit_rules(facts: &Facts<'_>, out: &mut Vec<Diagnostic>) {
    let Some(audit) = facts.aip44.and_then(|a| a.get("audit")) else {
        return;
    };
    let Some(kind_node) = audit.get("kind") else { return };
    match kind_node.as_str() {
        Some("external") if audit.get("ref").is_none() => out.push(
            Diagnostic::new(
                Code::ExternalAuditWithoutRef,
                kind_node.span.clone(),
                "`audit.kind: external` needs `audit.ref`",
            )
            .with_help("name the audit target, e.g. `ref: ./audit/acp.jsonl`"),
        ),
        Some("off") => {
            if let Some((tier, _)) = facts.tier.filter(|(t, _)| t.is_governed()) {
                out.push(
                    Diagnostic::new(
                        Code::AuditOffAtGovernedTier,
                        kind_node.span.clone(),
                        format!(
                            "audit cannot be off at tier `{}`: tool calls must be audited",
                            tier.as_str()
                        ),
                    )
                    .with_help("use `kind: governance` (the default) or `kind: external` with a `ref`"),
                );
            }
        }
        _ => {}
    }
}

fn capability_sides(facts: &Facts<'_>, out: &mut Vec<Diagnostic>) {
    let (Some((kind, _)), Some(caps)) = (facts.kind, facts.capabilities) else {
        return;
    };
    if kind == Kind::Client
        && let Some(entry) = caps.entry("agent")
    {
        out.push(Diagnostic::new(
            Code::AgentCapabilitiesOnClient,
            entry.key_span.clone(),
            "`capabilities.agent` is for servers and bridges; a client advertises `capabilities.client`",
        ));
    }
}

/// The parts of `metadata.agentacp` and the kinds that answer them: `sessions` is for servers
/// and bridges (a bridge passes the agent's session methods); the rest only a server's operator
/// answers.
const SURFACE_PARTS: &[(&str, &[Kind])] = &[
    ("sessions", &[Kind::Server, Kind::Bridge]),
    ("modes", &[Kind::Server]),
    ("configOptions", &[Kind::Server]),
    ("commands", &[Kind::Server]),
    ("extensions", &[Kind::Server]),
    ("auth", &[Kind::Server]),
    ("elicitation", &[Kind::Client, Kind::Bridge]),
];

/// `metadata.agentacp` declares what an agent answers (ACP215 on a kind that answers none of
/// it), with defaults among the choices (ACP217) and ids that are unique (ACP218).
fn agent_surface(root: &Node, facts: &Facts<'_>, out: &mut Vec<Diagnostic>) {
    let Some(agentacp) = root.get_at(&["metadata", "agentacp"]) else {
        return;
    };
    if let Some((kind, _)) = facts.kind {
        for (part, kinds) in SURFACE_PARTS {
            let Some(entry) = agentacp.entry(part).filter(|_| !kinds.contains(&kind)) else {
                continue;
            };
            let who = match *part {
                "sessions" => "an agent (a server, or a bridge passing them on)",
                "elicitation" => "a client (or a bridge, for its editor)",
                _ => "a server's operator",
            };
            let instead = match kind {
                Kind::Server => "a server asks the client instead (`turn.elicit…`, when the client offers it)",
                Kind::Client => "a client calls an agent's instead (`agentacp::client`)",
                Kind::Bridge => "a bridge passes the agent's through unchanged",
            };
            out.push(Diagnostic::new(
                Code::SurfaceOnWrongKind,
                entry.key_span.clone(),
                format!("`metadata.agentacp.{part}` declares what {who} answers; {instead}"),
            ));
        }
    }
    if let Some(modes) = agentacp.get("modes") {
        let ids = items(modes.get("available"), &[]);
        unique(&ids, "mode id", out);
        default_offered(modes.get("default"), &ids, "`modes.default`", "`modes.available`", out);
    }
    if let Some(Value::Sequence(options)) = agentacp.get("configOptions").map(|n| &n.value) {
        let mut ids = Vec::new();
        for option in options {
            let Some(entry) = option.as_mapping().and_then(|e| e.first()) else {
                continue;
            };
            if let Some(id) = entry.value.get("id").filter(|id| id.as_str().is_some()) {
                ids.push(id);
            }
            if entry.key == "select" {
                let values = items(entry.value.get("options"), &["value"]);
                unique(&values, "value of one option", out);
                default_offered(
                    entry.value.get("default"),
                    &values,
                    "`select.default`",
                    "its `options`",
                    out,
                );
            }
        }
        unique(&ids, "config option id", out);
    }
    let names = items(agentacp.get("commands"), &["name"]);
    unique(&names, "command name", out);
    let methods = items(agentacp.get("auth"), &[]);
    unique(&methods, "sign-in method id", out);
    if let Some(Value::Sequence(methods)) = agentacp.get("auth").map(|n| &n.value) {
        methods.iter().for_each(|method| sign_in_args(method, out));
    }
    if let Some(extensions) = agentacp.get("extensions") {
        let mut methods = Vec::new();
        for key in ["requests", "notifications"] {
            if let Some(Value::Sequence(list)) = extensions.get(key).map(|n| &n.value) {
                methods.extend(list.iter().filter(|n| n.as_str().is_some()));
            }
        }
        unique(&methods, "extension method", out);
    }
}

/// ACP220: a `terminal` sign-in method needs `args` (run without them, the program starts as
/// an ACP server in the user's terminal); an `agent` one takes neither `args` nor `env`.
fn sign_in_args(method: &Node, out: &mut Vec<Diagnostic>) {
    let Some(kind) = method.get("type").filter(|k| k.as_str().is_some()) else {
        return;
    };
    let id = method.get("id").and_then(Node::as_str).unwrap_or("?");
    let args = method.entry("args");
    match kind.as_str() {
        Some("terminal") => {
            let empty = args.is_none_or(|entry| matches!(&entry.value.value, Value::Sequence(list) if list.is_empty()));
            if empty {
                let at = args.map_or(kind.span.clone(), |entry| entry.value.span.clone());
                out.push(
                    Diagnostic::new(
                        Code::SignInArgs,
                        at,
                        format!("the terminal sign-in method `{id}` has no `args`: the editor would start the program as it always does, an ACP server on stdio, in the user's terminal"),
                    )
                    .with_help("give the arguments that start the sign-in, e.g. `args: [--login]`"),
                );
            }
        }
        Some("agent") => {
            for key in ["args", "env"] {
                if let Some(entry) = method.entry(key) {
                    out.push(
                        Diagnostic::new(
                            Code::SignInArgs,
                            entry.key_span.clone(),
                            format!("the agent sign-in method `{id}` has `{key}`, which only a terminal method uses: the client signs in through `authenticate` on the running agent"),
                        )
                        .with_help(format!("remove `{key}`, or make the method `type: terminal`")),
                    );
                }
            }
        }
        _ => {}
    }
}

/// The string nodes of a list's items: the items themselves, or their `key` (`["id"]` by
/// default when `key` is empty).
fn items<'a>(list: Option<&'a Node>, key: &[&str]) -> Vec<&'a Node> {
    let Some(Value::Sequence(list)) = list.map(|n| &n.value) else {
        return Vec::new();
    };
    let key = if key.is_empty() { &["id"][..] } else { key };
    list.iter()
        .filter_map(|item| item.get_at(key))
        .filter(|n| n.as_str().is_some())
        .collect()
}

/// ACP218 on each string that repeats an earlier one.
fn unique(nodes: &[&Node], what: &str, out: &mut Vec<Diagnostic>) {
    for (index, node) in nodes.iter().enumerate() {
        let text = node.as_str().unwrap_or_default();
        if nodes[..index].iter().any(|earlier| earlier.as_str() == Some(text)) {
            out.push(Diagnostic::new(
                Code::DuplicateDeclaration,
                node.span.clone(),
                format!("{what} `{text}` is declared twice"),
            ));
        }
    }
}

/// ACP217 when `default` is a string that is not among `choices`.
fn default_offered(default: Option<&Node>, choices: &[&Node], field: &str, among: &str, out: &mut Vec<Diagnostic>) {
    let Some((default, text)) = default.and_then(|n| Some((n, n.as_str()?))) else {
        return;
    };
    if choices.is_empty() || choices.iter().any(|choice| choice.as_str() == Some(text)) {
        return;
    }
    let known: Vec<&str> = choices.iter().filter_map(|c| c.as_str()).collect();
    out.push(
        Diagnostic::new(
            Code::DefaultNotOffered,
            default.span.clone(),
            format!("{field} `{text}` is not one of {among}"),
        )
        .with_help(format!("use one of `{}`", known.join("`, `"))),
    );
}

/// The methods (and, for `commands`, the update) each part of `metadata.agentacp` needs from
/// the pinned revision.
const SURFACE_NEEDS: &[(&[&str], &str)] = &[
    (&["sessions", "list"], "session/list"),
    (&["sessions", "resume"], "session/resume"),
    (&["sessions", "close"], "session/close"),
    (&["sessions", "delete"], "session/delete"),
    (&["modes"], "session/set_mode"),
    (&["configOptions"], "session/set_config_option"),
];

/// ACP216: a declared part of `metadata.agentacp` whose methods the pinned revision does not
/// have (`agent_methods`: the revision's agent-side methods), or `commands` when it has no
/// `available_commands_update` (`commands_update`).
pub fn surface_in_revision(root: &Node, agent_methods: &[&str], commands_update: bool, out: &mut Vec<Diagnostic>) {
    let Some(agentacp) = root.get_at(&["metadata", "agentacp"]) else {
        return;
    };
    let rev = root
        .get_at(&["metadata", "aip44", "acp_rev"])
        .and_then(Node::as_str)
        .unwrap_or_default();
    let mut report = |entry: &crate::yaml::Entry, path: &[&str], missing: &str| {
        out.push(
            Diagnostic::new(
                Code::SurfaceNotInRevision,
                entry.key_span.clone(),
                format!(
                    "`metadata.agentacp.{}` needs `{missing}`, which ACP revision `{rev}` does not have",
                    path.join(".")
                ),
            )
            .with_help("remove it, or pin a revision that has it"),
        );
    };
    for (path, method) in SURFACE_NEEDS {
        let Some(entry) = agentacp.entry_at(path) else { continue };
        let on = path.len() == 1 || matches!(entry.value.value, Value::Bool(true));
        if on && !agent_methods.contains(method) {
            report(entry, path, method);
        }
    }
    if let Some(entry) = agentacp.entry("commands").filter(|_| !commands_update) {
        report(entry, &["commands"], "available_commands_update");
    }
}

/// ACP216 for `metadata.agentacp.elicitation` with a mode on at a revision whose client-side
/// methods (`client_methods`) have no `elicitation/create`.
pub fn elicitation_in_revision(root: &Node, client_methods: &[&str], out: &mut Vec<Diagnostic>) {
    let Some(entry) = root
        .get_at(&["metadata", "agentacp"])
        .and_then(|a| a.entry("elicitation"))
    else {
        return;
    };
    let on = ["form", "url"]
        .iter()
        .any(|mode| matches!(entry.value.get(mode).map(|n| &n.value), Some(Value::Bool(true))));
    if !on || client_methods.contains(&"elicitation/create") {
        return;
    }
    let rev = root
        .get_at(&["metadata", "aip44", "acp_rev"])
        .and_then(Node::as_str)
        .unwrap_or_default();
    out.push(
        Diagnostic::new(
            Code::SurfaceNotInRevision,
            entry.key_span.clone(),
            format!(
                "`metadata.agentacp.elicitation` needs `elicitation/create`, which ACP revision `{rev}` does not have"
            ),
        )
        .with_help("remove it, or pin a revision that has it"),
    );
}

fn tier_capabilities(facts: &Facts<'_>, out: &mut Vec<Diagnostic>) {
    let (Some((tier, _)), Some(caps)) = (facts.tier, facts.capabilities) else {
        return;
    };
    let kind = facts.kind.map(|(k, _)| k);
    for flag in tier_flags(tier) {
        // Client flags apply to every kind: what a client or bridge offers, or the editor
        // methods a server's operator may call.
        let side_applies = flag.path[0] != "agent" || kind.is_none_or(Kind::is_agent_side);
        let Some(node) = caps.get_at(flag.path).filter(|_| side_applies) else {
            continue;
        };
        let Value::Bool(on) = node.value else { continue };
        let name = flag.path.join(".");
        let beyond = match flag.path[0] {
            // A bridge's prompt capabilities only let the agent's through: the bridge audits
            // every prompt whatever its content, at every tier.
            "agent" if kind == Some(Kind::Bridge) && flag.path[1] == "promptCapabilities" => false,
            "agent" => on && !flag.default,
            _ => on && tier == Tier::Basic,
        };
        if beyond {
            out.push(
                Diagnostic::new(
                    Code::BeyondTier,
                    node.span.clone(),
                    format!("`{name}` goes beyond tier `{}`", tier.as_str()),
                )
                .with_help(if tier == Tier::Sandboxed {
                    "allowed and advertised as declared; no tier turns it on by default, so the operator must really support it"
                } else {
                    "allowed and advertised as declared; raise the tier if the runtime relies on it"
                }),
            );
        }
        if !on && flag.required {
            out.push(
                Diagnostic::new(
                    Code::RequiredCapabilityOff,
                    node.span.clone(),
                    format!("tier `{}` requires `{name}`; it cannot be switched off", tier.as_str()),
                )
                .with_help("remove the line (the tier turns it on), or choose a lower tier"),
            );
        }
    }
}

fn mcp_servers(facts: &Facts<'_>, out: &mut Vec<Diagnostic>) {
    let Some(entry) = facts.aip44.and_then(|a| a.entry("mcp_servers")) else {
        return;
    };
    let Value::Sequence(servers) = &entry.value.value else {
        return;
    };
    let Some((tier, _)) = facts.tier else { return };
    if servers.is_empty() {
        return;
    }
    if tier == Tier::Basic {
        out.push(
            Diagnostic::new(
                Code::McpWithoutCapability,
                entry.key_span.clone(),
                "tier `basic` has no MCP, but `mcp_servers` is set",
            )
            .with_help("raise the tier, or remove `mcp_servers`"),
        );
        return;
    }
    if !facts.kind.is_some_and(|(k, _)| k.is_agent_side()) {
        return;
    }
    let declared = |key: &str| {
        facts
            .capabilities
            .and_then(|c| c.get_at(&["agent", "mcpCapabilities", key]))
            .and_then(|n| match n.value {
                Value::Bool(b) => Some(b),
                _ => None,
            })
    };
    let http = declared("http").unwrap_or(tier >= Tier::Sandboxed);
    let sse = declared("sse").unwrap_or(false);
    for server in servers {
        let Some(transport) = server.get("transport") else {
            continue;
        };
        let missing = match transport.as_str() {
            Some("http") if !http => "http",
            Some("sse") if !sse => "sse",
            _ => continue,
        };
        out.push(
            Diagnostic::new(
                Code::McpWithoutCapability,
                transport.span.clone(),
                format!("an MCP server over `{missing}` needs `capabilities.agent.mcpCapabilities.{missing}`"),
            )
            .with_help(format!(
                "set `mcpCapabilities: {{{missing}: true}}`, or use a stdio MCP server"
            )),
        );
    }
}

fn governance_binding(facts: &Facts<'_>, refs: &[ResolvedRef], out: &mut Vec<Diagnostic>) {
    let (Some((kind, _)), Some((tier, tier_node))) = (facts.kind, facts.tier) else {
        return;
    };
    if !kind.is_agent_side() || !tier.is_governed() || facts.has("governance") {
        return;
    }
    if facts.has("operator") {
        let operator = refs.iter().find(|r| r.role == RefRole::Operator);
        match operator.and_then(|r| r.frontmatter.as_ref()) {
            // The operator could not be read: that is already reported.
            None => return,
            Some(frontmatter) if frontmatter.get("governance").is_some() => return,
            Some(_) => {}
        }
    } else if kind == Kind::Server {
        // ACP202 already says the operator is missing.
        return;
    }
    out.push(
        Diagnostic::new(
            Code::NoGovernanceBinding,
            tier_node.span.clone(),
            format!(
                "tier `{}` governs tool calls, but there is no governance binding",
                tier.as_str()
            ),
        )
        .with_help("add `governance: ./GOVERNANCE.md`, or give the operator a `governance` section"),
    );
}

/// AIP-44: binding to an AIP-7-governed operator takes tier `governance-aware` or above.
fn basic_tier_operator(facts: &Facts<'_>, refs: &[ResolvedRef], out: &mut Vec<Diagnostic>) {
    let Some((Tier::Basic, tier_node)) = facts.tier else {
        return;
    };
    // An operator that could not be read has no frontmatter here; its ref diagnostic says why.
    let Some(operator) = refs
        .iter()
        .find(|r| r.role == RefRole::Operator)
        .filter(|r| r.frontmatter.as_ref().is_some_and(|f| f.get("governance").is_some()))
    else {
        return;
    };
    out.push(
        Diagnostic::new(
            Code::BasicTierGovernedOperator,
            tier_node.span.clone(),
            format!(
                "tier `basic` cannot bind the operator `{}`: it has a `governance` block (AIP-7), which takes tier `governance-aware` or above",
                operator.written
            ),
        )
        .with_help("use `tier: governance-aware`, or an operator without a `governance` block"),
    );
}

/// A client capability turned on whose methods the pinned revision does not have (ACP214).
/// `methods` are the revision's client-side methods.
pub fn client_capabilities_in_revision(root: &Node, methods: &[&str], out: &mut Vec<Diagnostic>) {
    let Some(client) = root.get_at(&["metadata", "aip44", "capabilities", "client"]) else {
        return;
    };
    let rev = root
        .get_at(&["metadata", "aip44", "acp_rev"])
        .and_then(Node::as_str)
        .unwrap_or_default();
    for capability in acp_methods::ClientCapability::ALL {
        let path = capability.path();
        let Some(node) = client.get_at(path).filter(|n| matches!(n.value, Value::Bool(true))) else {
            continue;
        };
        let missing: Vec<&str> = capability
            .methods()
            .map(|method| method.name)
            .filter(|m| !methods.contains(m))
            .collect();
        if missing.is_empty() {
            continue;
        }
        out.push(
            Diagnostic::new(
                Code::ClientCapabilityNotInRevision,
                node.span.clone(),
                format!(
                    "`client.{}` needs `{}`, which ACP revision `{rev}` does not have",
                    path.join("."),
                    missing.join("`, `")
                ),
            )
            .with_help("remove the flag, or pin a revision that has these methods"),
        );
    }
}
