//! Governance: deciding each tool call before it happens — allow, ask the user, or deny.
//!
//! [`ManifestGovernance`] is the default binding, built from the manifest's refs: the AIP-9
//! operator's tool list and autonomy, the AIP-7 governance document (a workspace manifest's
//! `autonomy`, or a policy) and the AIP-7 policies the operator lists. [`OperatorProfile`] is
//! the rest of the operator document operator code may read: memory, skills, policies. Replace it with your own [`Governance`] through
//! `server::ServerOptions::governance`.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a tool does, as ACP's `ToolKind` says it (used to tell reading from changing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Reads files or data.
    Read,
    /// Changes files or content.
    Edit,
    /// Deletes.
    Delete,
    /// Moves or renames.
    Move,
    /// Searches.
    Search,
    /// Runs a command or code.
    Execute,
    /// Internal reasoning.
    Think,
    /// Fetches from outside.
    Fetch,
    /// Switches the session mode.
    SwitchMode,
    /// Anything else.
    Other,
}

impl ToolKind {
    /// Whether the tool may change something. An unknown kind counts as changing (fail closed).
    pub fn mutates(kind: Option<ToolKind>) -> bool {
        !matches!(
            kind,
            Some(ToolKind::Read | ToolKind::Search | ToolKind::Think | ToolKind::Fetch)
        )
    }
}

/// One tool call to decide.
#[derive(Debug, Clone, Copy)]
pub struct ToolRequest<'a> {
    /// The operator's id.
    pub operator: &'a str,
    /// The session.
    pub session: &'a str,
    /// The tool's name.
    pub tool: &'a str,
    /// What it does, when the operator said.
    pub kind: Option<ToolKind>,
    /// Its arguments.
    pub arguments: &'a Value,
    /// The identity of the authenticated connection the call comes from (`auth::Identity`);
    /// `None` over stdio and in clients and bridges. Policies scoped by identity
    /// (`metadata.agentacp.principals`) apply only to calls whose principal they name.
    pub principal: Option<&'a str>,
}

/// The answer for one tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run it without asking.
    Allow,
    /// Ask the user (a `session/request_permission` to the client) and run it only if approved.
    Ask,
    /// Never run it; it is not even announced to the client. The reason is audited.
    Deny(String),
}

impl Decision {
    /// The stricter of two decisions: deny over ask over allow (of two denials, this one).
    pub fn stricter(self, other: Decision) -> Decision {
        let rank = |decision: &Decision| match decision {
            Decision::Allow => 0,
            Decision::Ask => 1,
            Decision::Deny(_) => 2,
        };
        if rank(&other) > rank(&self) { other } else { self }
    }
}

/// Decides a call whose `kind` is a peer's claim — an agent's report, an MCP server's
/// annotations (`readOnlyHint`, `destructiveHint`, …) — which may make the decision stricter,
/// never more lenient: the stricter of the decisions with that kind and without one. Also the
/// kind to show the call with: the claim, unless it would have loosened the decision.
pub fn decide_claimed(governance: &dyn Governance, request: &ToolRequest<'_>) -> (Decision, Option<ToolKind>) {
    let unclaimed = governance.decide(&ToolRequest { kind: None, ..*request });
    if request.kind.is_none() {
        return (unclaimed, None);
    }
    let claimed = governance.decide(request);
    if claimed.clone().stricter(unclaimed.clone()) == claimed {
        (claimed, request.kind)
    } else {
        (unclaimed, None)
    }
}

/// Decides tool calls. Called before every tool call, at governed tiers.
pub trait Governance: Send + Sync + 'static {
    /// The decision for one call.
    fn decide(&self, request: &ToolRequest<'_>) -> Decision;

    /// For a call decided [`Decision::Ask`]: whether the user may answer for the rest of the
    /// session (ACP's `allow_always` / `reject_always` options). Default: yes.
    fn may_remember(&self, request: &ToolRequest<'_>) -> bool {
        let _ = request;
        true
    }

    /// Whether `tool` is a name these rules know — one they list, match by a pattern of
    /// their own or deny by name — rather than any text. A tool call that carries an
    /// explicit name (`name`, `_meta.aip44.tool`) is decided on its `title` too only when
    /// the title is a name they know: a descriptive title (`Read lib.rs`) then neither
    /// loosens nor denies anything. Default: every name is known, so every title counts.
    fn knows(&self, tool: &str) -> bool {
        let _ = tool;
        true
    }
}

/// AIP-9 `governance.autonomy`: how much the operator may do on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Autonomy {
    /// Listed tools run without asking.
    Autonomous,
    /// Ask the user (refined by the workspace's `defaultApproval`).
    Supervised,
    /// Deny unless a policy allows.
    Gated,
}

/// AIP-7 workspace `autonomy.defaultApproval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefaultApproval {
    /// No approval needed.
    Auto,
    /// Always ask.
    Always,
    /// Ask for tools that change something.
    OnMutate,
}

/// An AIP-7 policy that applies to tool calls.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Policy {
    slug: String,
    /// `tool:<name>` patterns (`*` matches any run of characters); empty matches every tool.
    subjects: Vec<String>,
    decision: PolicyDecision,
    /// Only for calls that may change something (a workspace registry's `appliesTo: mutates`).
    only_mutating: bool,
    /// `autonomy`: the highest workspace autonomy level at which an `allow` stays an allow
    /// (AIP-7 default 2); above it the policy escalates (asks).
    autonomy: u64,
    /// `metadata.agentacp.principals`: when given, the policy applies only to calls whose
    /// principal matches one of these patterns (`*` matches any run of characters). A call
    /// without a principal matches none. A malformed value (not a string or a list of
    /// strings) leaves this empty: the policy then applies to no call.
    principals: Option<Vec<String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PolicyDecision {
    Allow,
    Deny,
    RequireApproval,
}

/// The default governance binding, read from the manifest's operator and governance refs.
///
/// In order:
/// 1. a tool missing from the operator's `tools` list is denied (an MCP server binding,
///    `{kind: mcp, server: S, allow: [T, …]}`, lists `mcp/S/T` for each `T`, or every tool of
///    `S` without `allow`);
/// 2. a matching AIP-7 policy — the governance document's, or one the operator lists; one
///    scoped by `metadata.agentacp.principals` only for calls from a matching identity —
///    decides (`deny` wins, then `require-approval` or an `allow` above its `autonomy` level,
///    then `allow`);
/// 3. `autonomy: gated` denies; `autonomous` allows;
/// 4. `supervised` (the default) asks, except that a workspace `defaultApproval: auto` allows,
///    and `on-mutate` allows tools that only read (`read`, `search`, `think`, `fetch`);
///    a workspace `autonomy.level: 0` (read-only) denies tools that change something.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestGovernance {
    tools: Option<Vec<String>>,
    autonomy: Autonomy,
    default_approval: Option<DefaultApproval>,
    read_only: bool,
    /// The workspace's `autonomy.level`, when there is a workspace that gives one.
    level: Option<u64>,
    policies: Vec<Policy>,
}

impl Default for ManifestGovernance {
    fn default() -> Self {
        ManifestGovernance {
            tools: None,
            autonomy: Autonomy::Supervised,
            default_approval: None,
            read_only: false,
            level: None,
            policies: Vec::new(),
        }
    }
}

impl ManifestGovernance {
    /// Builds the binding from the frontmatter of the operator (AIP-9) and governance (AIP-7)
    /// documents, as JSON. Missing documents or fields take the defaults: every tool allowed
    /// by the list, supervised.
    pub fn from_documents(operator: Option<&Value>, governance: Option<&Value>) -> Self {
        let mut binding = ManifestGovernance::default();
        if let Some(operator) = operator {
            binding.tools = operator.get("tools").and_then(Value::as_array).map(|tools| {
                tools
                    .iter()
                    .flat_map(|tool| match tool {
                        Value::String(name) => vec![name.clone()],
                        // An MCP server binding: its tools, known as `mcp/<server>/<tool>`
                        // (every tool of the server without `allow`).
                        Value::Object(object) if object.get("kind").and_then(Value::as_str) == Some("mcp") => {
                            let Some(server) = object.get("server").and_then(Value::as_str) else {
                                return Vec::new();
                            };
                            match object.get("allow").and_then(Value::as_array) {
                                Some(allow) => allow
                                    .iter()
                                    .filter_map(Value::as_str)
                                    .map(|tool| format!("mcp/{server}/{tool}"))
                                    .collect(),
                                None => vec![format!("mcp/{server}/*")],
                            }
                        }
                        Value::Object(object) => object
                            .get("id")
                            .and_then(Value::as_str)
                            .map(str::to_string)
                            .into_iter()
                            .collect(),
                        _ => Vec::new(),
                    })
                    .collect()
            });
            if let Some(autonomy) = operator.pointer("/governance/autonomy").and_then(Value::as_str) {
                binding.autonomy = parse_autonomy(autonomy).unwrap_or(Autonomy::Supervised);
            }
        }
        if let Some(governance) = governance {
            match governance.get("autonomy") {
                Some(Value::String(text)) => {
                    if let Some(autonomy) = parse_autonomy(text) {
                        binding.autonomy = autonomy;
                    }
                }
                Some(Value::Object(object)) => {
                    binding.default_approval =
                        object
                            .get("defaultApproval")
                            .and_then(Value::as_str)
                            .and_then(|text| match text {
                                "auto" => Some(DefaultApproval::Auto),
                                "always" => Some(DefaultApproval::Always),
                                "on-mutate" => Some(DefaultApproval::OnMutate),
                                _ => None,
                            });
                    binding.level = object.get("level").and_then(Value::as_u64);
                    binding.read_only = binding.level == Some(0);
                }
                _ => {}
            }
            if governance.get("doctype").and_then(Value::as_str) == Some("policy") {
                binding.policies.extend(read_policy(governance, None));
            }
        }
        binding
    }

    /// Adds the AIP-7 policies the operator lists (`governance.policies`), as the build
    /// resolved them: each is `{"ref": "policy:<slug>", "appliesTo": <the workspace registry's
    /// binding, or null>, "policy": <the policy's frontmatter>}` (a bare policy document is
    /// accepted too). Policies that do not bind tool calls are left out; a document that is not
    /// a policy is ignored.
    pub fn with_policies<'a>(mut self, policies: impl IntoIterator<Item = &'a Value>) -> Self {
        for entry in policies {
            let (document, applies_to) = match entry.get("policy") {
                Some(document) if document.is_object() => (document, entry.get("appliesTo").and_then(Value::as_str)),
                _ => (entry, None),
            };
            if document.get("doctype").and_then(Value::as_str) != Some("policy") {
                continue;
            }
            let policy = read_policy(document, applies_to);
            if let Some(policy) = policy
                && !self.policies.contains(&policy)
            {
                self.policies.push(policy);
            }
        }
        self
    }

    /// The tools the operator lists, if it lists any.
    pub fn tools(&self) -> Option<&[String]> {
        self.tools.as_deref()
    }

    /// Adds `tools` to the operator's list (when it has one): tools the manifest declares
    /// elsewhere, such as the editor methods a server's `capabilities.client` names. They are
    /// still decided by the policies and the autonomy like any listed tool.
    pub fn listing(mut self, tools: &[&str]) -> Self {
        if let Some(list) = &mut self.tools {
            list.extend(tools.iter().map(|tool| tool.to_string()));
        }
        self
    }
}

fn parse_autonomy(text: &str) -> Option<Autonomy> {
    match text {
        "autonomous" => Some(Autonomy::Autonomous),
        "supervised" => Some(Autonomy::Supervised),
        "gated" => Some(Autonomy::Gated),
        _ => None,
    }
}

/// Whether an AIP-7 action pattern (`*` matches any run of characters, so `tool.*` and `*`
/// both bind tool calls) matches the action `tool.call`.
fn binds_tool_calls(pattern: &str) -> bool {
    glob(pattern, "tool.call")
}

/// `*` matches any run of characters (also `**`); everything else matches itself.
fn glob(pattern: &str, text: &str) -> bool {
    let Some((first, rest)) = pattern.split_once('*') else {
        return pattern == text;
    };
    let Some(mut tail) = text.strip_prefix(first) else {
        return false;
    };
    let rest = rest.trim_start_matches('*');
    if rest.is_empty() {
        return true;
    }
    loop {
        if glob(rest, tail) {
            return true;
        }
        let mut chars = tail.chars();
        if chars.next().is_none() {
            return false;
        }
        tail = chars.as_str();
    }
}

fn read_policy(document: &Value, applies_to: Option<&str>) -> Option<Policy> {
    let matcher = document.get("match");
    let action = matcher.and_then(|m| m.get("action")).and_then(Value::as_str);
    if action.is_some_and(|action| !binds_tool_calls(action)) {
        return None;
    }
    let only_mutating = match applies_to {
        None => false,
        Some("mutates") => true,
        Some(class) if binds_tool_calls(class) => false,
        Some(_) => return None,
    };
    let subjects = match matcher.and_then(|m| m.get("subject")) {
        Some(Value::String(subject)) => vec![subject.clone()],
        Some(Value::Array(subjects)) => subjects.iter().filter_map(Value::as_str).map(str::to_string).collect(),
        _ => Vec::new(),
    };
    let decision = match document.get("decision").and_then(Value::as_str)? {
        "allow" => PolicyDecision::Allow,
        "deny" => PolicyDecision::Deny,
        _ => PolicyDecision::RequireApproval,
    };
    Some(Policy {
        slug: document
            .get("slug")
            .and_then(Value::as_str)
            .unwrap_or("policy")
            .to_string(),
        subjects,
        decision,
        only_mutating,
        autonomy: document.get("autonomy").and_then(Value::as_u64).unwrap_or(2),
        principals: read_principals(document),
    })
}

/// A policy's `metadata.agentacp.principals`: `None` when absent (the policy applies to every
/// call); a string or a list of strings is the list of patterns; anything else (a number, a
/// list without strings) is an empty list, which no call matches.
fn read_principals(document: &Value) -> Option<Vec<String>> {
    match document.pointer("/metadata/agentacp/principals")? {
        Value::String(pattern) => Some(vec![pattern.clone()]),
        Value::Array(patterns) => Some(patterns.iter().filter_map(Value::as_str).map(str::to_string).collect()),
        _ => Some(Vec::new()),
    }
}

impl Policy {
    fn matches(&self, tool: &str, kind: Option<ToolKind>, principal: Option<&str>) -> bool {
        if self.only_mutating && !ToolKind::mutates(kind) {
            return false;
        }
        if let Some(principals) = &self.principals {
            let Some(principal) = principal else {
                return false;
            };
            if !principals.iter().any(|pattern| glob(pattern, principal)) {
                return false;
            }
        }
        self.subjects.is_empty()
            || self.subjects.iter().any(|subject| {
                let pattern = subject.strip_prefix("tool:").unwrap_or(subject);
                glob(pattern, tool)
            })
    }

    /// The decision at workspace autonomy `level`: an `allow` above the policy's `autonomy`
    /// escalates.
    fn decision_at(&self, level: Option<u64>) -> PolicyDecision {
        match (self.decision, level) {
            (PolicyDecision::Allow, Some(level)) if level > self.autonomy => PolicyDecision::RequireApproval,
            (decision, _) => decision,
        }
    }
}

impl Governance for ManifestGovernance {
    fn decide(&self, request: &ToolRequest<'_>) -> Decision {
        let tool = request.tool;
        if let Some(tools) = &self.tools
            && !tools.iter().any(|listed| glob(listed, tool))
        {
            return Decision::Deny(format!("`{tool}` is not in the operator's tool list"));
        }
        let mutates = ToolKind::mutates(request.kind);
        if self.read_only && mutates {
            return Decision::Deny(format!(
                "the workspace is read-only (autonomy level 0) and `{tool}` may change something"
            ));
        }
        let matching: Vec<&Policy> = self
            .policies
            .iter()
            .filter(|p| p.matches(tool, request.kind, request.principal))
            .collect();
        if let Some(policy) = matching.iter().find(|p| p.decision == PolicyDecision::Deny) {
            return Decision::Deny(format!("policy `{}` denies `{tool}`", policy.slug));
        }
        if matching
            .iter()
            .any(|p| p.decision_at(self.level) == PolicyDecision::RequireApproval)
        {
            return Decision::Ask;
        }
        if !matching.is_empty() {
            return Decision::Allow;
        }
        match self.autonomy {
            Autonomy::Gated => Decision::Deny(format!("autonomy is gated and no policy allows `{tool}`")),
            Autonomy::Autonomous => Decision::Allow,
            Autonomy::Supervised => match self.default_approval {
                Some(DefaultApproval::Auto) => Decision::Allow,
                Some(DefaultApproval::OnMutate) if !mutates => Decision::Allow,
                _ => Decision::Ask,
            },
        }
    }

    fn may_remember(&self, request: &ToolRequest<'_>) -> bool {
        !self.approval_is_per_call(request)
    }

    /// A tool the operator's `tools` list names, or a policy's `match.subject` does
    /// (`tool:<pattern>`), by a pattern that is more than `*` (which names nothing).
    fn knows(&self, tool: &str) -> bool {
        let names = |pattern: &str| pattern.contains(|c| c != '*') && glob(pattern, tool);
        let listed = self.tools.iter().flatten().any(|listed| names(listed));
        listed
            || self.policies.iter().any(|policy| {
                (policy.subjects.iter()).any(|subject| names(subject.strip_prefix("tool:").unwrap_or(subject)))
            })
    }
}

impl ManifestGovernance {
    /// Whether `ask` for the request's tool may be answered for the rest of a session: not when a policy
    /// requires approval of it, nor when the workspace says `defaultApproval: always`.
    fn approval_is_per_call(&self, request: &ToolRequest<'_>) -> bool {
        self.default_approval == Some(DefaultApproval::Always)
            || self.policies.iter().any(|policy| {
                policy.decision_at(self.level) == PolicyDecision::RequireApproval
                    && policy.matches(request.tool, request.kind, request.principal)
            })
    }
}

/// Allows every tool call without asking. For tests and trusted local tools only.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

impl Governance for AllowAll {
    fn decide(&self, _: &ToolRequest<'_>) -> Decision {
        Decision::Allow
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decision::Allow => f.write_str("allow"),
            Decision::Ask => f.write_str("ask"),
            Decision::Deny(reason) => write!(f, "deny: {reason}"),
        }
    }
}

/// What the AIP-9 operator document says about the operator beyond its tools and autonomy:
/// its memory, its skills and the policies it consults, as typed data for operator code
/// (`server::SessionContext::operator`). Values this
/// runtime does not know are kept ([`MemoryKind::Other`], [`MemoryPolicy::Other`]); anything
/// unreadable is left out. Never fails.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OperatorProfile {
    /// `id`, when the document has one.
    pub id: Option<String>,
    /// `memory`, when the document has one (with a `kind`).
    pub memory: Option<MemorySpec>,
    /// `skills`, in order: names, or objects with an `id`.
    pub skills: Vec<Skill>,
    /// `governance.policies` as written (`policy:<slug>`).
    pub policies: Vec<String>,
}

/// AIP-9 `memory`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemorySpec {
    /// `kind`.
    pub kind: MemoryKind,
    /// `policy` (AIP-9 default: `summarising`).
    pub policy: MemoryPolicy,
    /// `share_with`: operator ids that may read this memory.
    pub share_with: Vec<String>,
    /// `external`, for `kind: external`.
    pub external: Option<ExternalMemory>,
}

/// AIP-9 `memory.kind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryKind {
    /// `none`: nothing is kept beyond the session.
    None,
    /// `thread`: kept per session (conversation thread), back when the session is loaded.
    Thread,
    /// `operator-context`: kept for the operator, across sessions.
    OperatorContext,
    /// `external`: kept by an outside store (`memory.external`), which operator code reaches.
    External,
    /// Any other word (AIP-44 mentions `ephemeral`), kept as written; never persisted.
    Other(String),
}

impl MemoryKind {
    /// Whether the runtime keeps this memory in the state folder after a session ends:
    /// `thread` and `operator-context` only.
    pub fn persisted_by_runtime(&self) -> bool {
        matches!(self, MemoryKind::Thread | MemoryKind::OperatorContext)
    }

    fn parse(text: &str) -> Self {
        match text {
            "none" => MemoryKind::None,
            "thread" => MemoryKind::Thread,
            "operator-context" => MemoryKind::OperatorContext,
            "external" => MemoryKind::External,
            other => MemoryKind::Other(other.to_string()),
        }
    }
}

/// AIP-9 `memory.policy`: how entries may change once written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryPolicy {
    /// `append-only`: entries are only ever added.
    AppendOnly,
    /// `redactable`: entries may also be redacted (replaced by a redaction marker).
    Redactable,
    /// `summarising` (the default): entries may also be replaced by a summary.
    Summarising,
    /// Any other word, kept as written; enforced like `append-only`.
    Other(String),
}

impl MemoryPolicy {
    fn parse(text: &str) -> Self {
        match text {
            "append-only" => MemoryPolicy::AppendOnly,
            "redactable" => MemoryPolicy::Redactable,
            "summarising" => MemoryPolicy::Summarising,
            other => MemoryPolicy::Other(other.to_string()),
        }
    }

    /// The word as written in OPERATOR.md.
    pub fn as_str(&self) -> &str {
        match self {
            MemoryPolicy::AppendOnly => "append-only",
            MemoryPolicy::Redactable => "redactable",
            MemoryPolicy::Summarising => "summarising",
            MemoryPolicy::Other(other) => other,
        }
    }

    /// Whether an entry may be redacted.
    pub fn may_redact(&self) -> bool {
        matches!(self, MemoryPolicy::Redactable | MemoryPolicy::Summarising)
    }

    /// Whether the entries may be replaced by a summary.
    pub fn may_summarise(&self) -> bool {
        matches!(self, MemoryPolicy::Summarising)
    }
}

/// AIP-9 `memory.external`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalMemory {
    /// `uri`.
    pub uri: String,
    /// `namespace`.
    pub namespace: Option<String>,
}

/// One AIP-9 `skills` entry (an AIP-3 skill ref).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// The skill's id (the entry itself when it is a name).
    pub id: String,
    /// `source`.
    pub source: Option<String>,
    /// `version`.
    pub version: Option<String>,
    /// `allow`.
    pub allow: Vec<String>,
}

impl OperatorProfile {
    /// Reads the operator document's frontmatter (as JSON); `None` gives the empty profile.
    pub fn from_document(operator: Option<&Value>) -> Self {
        let Some(operator) = operator else {
            return OperatorProfile::default();
        };
        let text = |value: Option<&Value>| value.and_then(Value::as_str).map(str::to_string);
        let strings = |value: Option<&Value>| -> Vec<String> {
            value
                .and_then(Value::as_array)
                .map(|items| items.iter().filter_map(Value::as_str).map(str::to_string).collect())
                .unwrap_or_default()
        };
        let memory = operator.get("memory").and_then(|memory| {
            Some(MemorySpec {
                kind: MemoryKind::parse(memory.get("kind")?.as_str()?),
                policy: memory
                    .get("policy")
                    .and_then(Value::as_str)
                    .map_or(MemoryPolicy::Summarising, MemoryPolicy::parse),
                share_with: strings(memory.get("share_with")),
                external: memory.get("external").and_then(|external| {
                    Some(ExternalMemory {
                        uri: external.get("uri")?.as_str()?.to_string(),
                        namespace: text(external.get("namespace")),
                    })
                }),
            })
        });
        let skills = operator
            .get("skills")
            .and_then(Value::as_array)
            .map(|skills| {
                skills
                    .iter()
                    .filter_map(|skill| match skill {
                        Value::String(id) => Some(Skill {
                            id: id.clone(),
                            source: None,
                            version: None,
                            allow: Vec::new(),
                        }),
                        Value::Object(object) => Some(Skill {
                            id: object.get("id")?.as_str()?.to_string(),
                            source: text(object.get("source")),
                            version: text(object.get("version")),
                            allow: strings(object.get("allow")),
                        }),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        OperatorProfile {
            id: text(operator.get("id")),
            memory,
            skills,
            policies: strings(operator.pointer("/governance/policies")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decide(binding: &ManifestGovernance, tool: &str, kind: Option<ToolKind>) -> Decision {
        binding.decide(&ToolRequest {
            operator: "op",
            session: "s",
            tool,
            kind,
            arguments: &Value::Null,
            principal: None,
        })
    }

    fn operator(autonomy: &str) -> Value {
        json!({"tools": ["read-file", {"id": "write-file"}, "run-tests"], "governance": {"autonomy": autonomy}})
    }

    #[test]
    fn unlisted_tools_are_denied_whatever_the_autonomy() {
        for autonomy in ["autonomous", "supervised", "gated"] {
            let binding = ManifestGovernance::from_documents(Some(&operator(autonomy)), None);
            assert!(matches!(decide(&binding, "delete-repo", None), Decision::Deny(r) if r.contains("tool list")));
        }
    }

    #[test]
    fn an_mcp_server_binding_lists_its_allowed_tools_or_all_of_them() {
        let operator = json!({"tools": [
            "read-file",
            {"kind": "mcp", "server": "files", "allow": ["read_text", "list"]},
            {"kind": "mcp", "server": "web"},
        ], "governance": {"autonomy": "autonomous"}});
        let binding = ManifestGovernance::from_documents(Some(&operator), None);
        assert_eq!(decide(&binding, "mcp/files/read_text", None), Decision::Allow);
        assert_eq!(decide(&binding, "mcp/files/list", None), Decision::Allow);
        assert!(matches!(decide(&binding, "mcp/files/delete", None), Decision::Deny(r) if r.contains("tool list")));
        assert_eq!(decide(&binding, "mcp/web/fetch", None), Decision::Allow);
        assert_eq!(decide(&binding, "mcp/web/anything", None), Decision::Allow);
        assert!(matches!(decide(&binding, "mcp/other/fetch", None), Decision::Deny(_)));
        // The server's name alone is no tool.
        assert!(matches!(decide(&binding, "files", None), Decision::Deny(_)));
    }

    #[test]
    fn autonomy_decides_listed_tools() {
        let autonomous = ManifestGovernance::from_documents(Some(&operator("autonomous")), None);
        assert_eq!(decide(&autonomous, "write-file", None), Decision::Allow);
        let supervised = ManifestGovernance::from_documents(Some(&operator("supervised")), None);
        assert_eq!(decide(&supervised, "read-file", Some(ToolKind::Read)), Decision::Ask);
        let gated = ManifestGovernance::from_documents(Some(&operator("gated")), None);
        assert!(matches!(decide(&gated, "read-file", None), Decision::Deny(_)));
    }

    #[test]
    fn on_mutate_asks_only_for_tools_that_change_something() {
        let workspace =
            json!({"schema": "governance.workspace/v1", "autonomy": {"level": 2, "defaultApproval": "on-mutate"}});
        let binding = ManifestGovernance::from_documents(Some(&operator("supervised")), Some(&workspace));
        assert_eq!(decide(&binding, "read-file", Some(ToolKind::Read)), Decision::Allow);
        assert_eq!(decide(&binding, "write-file", Some(ToolKind::Edit)), Decision::Ask);
        assert_eq!(
            decide(&binding, "run-tests", None),
            Decision::Ask,
            "no kind counts as mutating"
        );
    }

    #[test]
    fn read_only_workspaces_deny_changes() {
        let workspace = json!({"autonomy": {"level": 0, "defaultApproval": "auto"}});
        let binding = ManifestGovernance::from_documents(Some(&operator("autonomous")), Some(&workspace));
        assert_eq!(decide(&binding, "read-file", Some(ToolKind::Read)), Decision::Allow);
        assert!(matches!(
            decide(&binding, "write-file", Some(ToolKind::Edit)),
            Decision::Deny(_)
        ));
    }

    #[test]
    fn policies_override_autonomy_and_deny_wins() {
        let allow = json!({"doctype": "policy", "slug": "tests-ok", "match": {"action": "tool.call", "subject": "tool:run-*"}, "decision": "allow"});
        let binding = ManifestGovernance::from_documents(Some(&operator("gated")), Some(&allow));
        assert_eq!(decide(&binding, "run-tests", None), Decision::Allow);
        assert!(matches!(decide(&binding, "write-file", None), Decision::Deny(_)));
        let deny = json!({"doctype": "policy", "slug": "no-writes", "match": {"subject": "tool:write-file"}, "decision": "deny"});
        let binding = ManifestGovernance::from_documents(Some(&operator("autonomous")), Some(&deny));
        assert!(matches!(decide(&binding, "write-file", None), Decision::Deny(r) if r.contains("no-writes")));
        let other_action =
            json!({"doctype": "policy", "slug": "x", "match": {"action": "deploy.start"}, "decision": "deny"});
        let binding = ManifestGovernance::from_documents(Some(&operator("autonomous")), Some(&other_action));
        assert_eq!(decide(&binding, "write-file", None), Decision::Allow);
    }

    #[test]
    fn approval_for_the_session_is_offered_unless_every_call_must_be_approved() {
        let request = |tool| ToolRequest {
            operator: "op",
            session: "s",
            tool,
            kind: None,
            arguments: &Value::Null,
            principal: None,
        };
        let on_mutate = json!({"autonomy": {"level": 2, "defaultApproval": "on-mutate"}});
        let binding = ManifestGovernance::from_documents(Some(&operator("supervised")), Some(&on_mutate));
        assert!(binding.may_remember(&request("write-file")));
        let always = json!({"autonomy": {"level": 2, "defaultApproval": "always"}});
        let binding = ManifestGovernance::from_documents(Some(&operator("supervised")), Some(&always));
        assert!(!binding.may_remember(&request("write-file")));
        let policy = json!({"doctype": "policy", "slug": "ask-writes", "match": {"subject": "tool:write-*"}, "decision": "require-approval"});
        let binding = ManifestGovernance::from_documents(Some(&operator("autonomous")), Some(&policy));
        assert!(!binding.may_remember(&request("write-file")));
        assert!(binding.may_remember(&request("run-tests")));
    }

    /// The names governance knows: listed tools (also by a pattern), tools a policy names by
    /// its subject; not a pattern of `*` alone, nor any other text (a descriptive title).
    #[test]
    fn governance_knows_the_names_its_documents_name() {
        let operator = json!({"tools": ["read-file", {"kind": "mcp", "server": "notes"}, "*"]});
        let policy = json!({"doctype": "policy", "slug": "no-deletes",
            "match": {"action": "tool.call", "subject": "tool:delete-*"}, "decision": "deny"});
        let everything =
            json!({"doctype": "policy", "slug": "all", "match": {"subject": "tool:**"}, "decision": "allow"});
        let binding = ManifestGovernance::from_documents(Some(&operator), None).with_policies([&policy, &everything]);
        for known in ["read-file", "mcp/notes/echo", "delete-repo"] {
            assert!(binding.knows(known), "{known}");
        }
        for unknown in ["Read lib.rs", "echo", "write-file"] {
            assert!(!binding.knows(unknown), "{unknown}");
        }
        assert!(
            AllowAll.knows("Read lib.rs"),
            "a binding that says nothing knows every name"
        );
    }

    /// A kind a peer claims (an agent's report, an MCP server's annotations) may make a
    /// decision stricter, never more lenient; it is shown only where it did not loosen it.
    #[test]
    fn a_claimed_kind_only_makes_a_decision_stricter() {
        let workspace =
            json!({"schema": "governance.workspace/v1", "autonomy": {"level": 2, "defaultApproval": "on-mutate"}});
        let binding = ManifestGovernance::from_documents(Some(&operator("supervised")), Some(&workspace));
        let claimed = |tool, kind| {
            decide_claimed(
                &binding,
                &ToolRequest {
                    operator: "op",
                    session: "s",
                    tool,
                    kind: Some(kind),
                    arguments: &Value::Null,
                    principal: None,
                },
            )
        };
        assert_eq!(claimed("write-file", ToolKind::Read), (Decision::Ask, None));
        assert_eq!(
            claimed("write-file", ToolKind::Edit),
            (Decision::Ask, Some(ToolKind::Edit))
        );
        let read_only =
            ManifestGovernance::from_documents(Some(&operator("autonomous")), Some(&json!({"autonomy": {"level": 0}})));
        let request = ToolRequest {
            operator: "op",
            session: "s",
            tool: "read-file",
            kind: Some(ToolKind::Read),
            arguments: &Value::Null,
            principal: None,
        };
        assert!(matches!(
            decide_claimed(&read_only, &request),
            (Decision::Deny(_), None)
        ));
        assert_eq!(Decision::Allow.stricter(Decision::Ask), Decision::Ask);
        assert_eq!(
            Decision::Deny("a".into()).stricter(Decision::Deny("b".into())),
            Decision::Deny("a".into())
        );
    }

    #[test]
    fn without_documents_everything_asks() {
        let binding = ManifestGovernance::from_documents(None, None);
        assert_eq!(decide(&binding, "anything", Some(ToolKind::Read)), Decision::Ask);
    }

    /// Whether a listed policy that denies what `matcher` matches denies the tool `run-tests`.
    fn denies_run_tests(matcher: Value) -> bool {
        let deny = listed("p", None, json!({"match": matcher, "decision": "deny"}));
        matches!(decide(&autonomous_with(&deny), "run-tests", None), Decision::Deny(_))
    }

    /// An autonomous operator's binding with `policy` listed.
    fn autonomous_with(policy: &Value) -> ManifestGovernance {
        listed_in("autonomous", policy)
    }

    /// The binding of an operator at `autonomy` with `policy` listed.
    fn listed_in(autonomy: &str, policy: &Value) -> ManifestGovernance {
        ManifestGovernance::from_documents(Some(&operator(autonomy)), None).with_policies([policy])
    }

    /// A listed policy `slug` (`match` and `decision` from `rule`) for the `principals` its
    /// metadata names.
    fn scoped(slug: &str, mut rule: Value, principals: Value) -> Value {
        rule["metadata"] = json!({"agentacp": {"principals": principals}});
        listed(slug, None, rule)
    }

    fn listed(slug: &str, applies_to: Option<&str>, policy: Value) -> Value {
        let mut document =
            json!({"schema": "agentgovernance/v1", "doctype": "policy", "slug": slug, "version": "1.0.0"});
        for (key, value) in policy.as_object().unwrap() {
            document[key] = value.clone();
        }
        json!({"ref": format!("policy:{slug}"), "appliesTo": applies_to, "policy": document})
    }

    #[test]
    fn every_listed_policy_applies_and_deny_wins_then_approval_then_allow() {
        let policies = [
            listed(
                "tests-ok",
                None,
                json!({"match": {"action": "tool.call", "subject": "run-*"}, "decision": "allow"}),
            ),
            listed(
                "no-writes",
                None,
                json!({"match": {"action": "tool.call", "subject": "tool:write-file"}, "decision": "deny"}),
            ),
            listed(
                "writes-ok",
                None,
                json!({"match": {"action": "tool.call", "subject": "write-*"}, "decision": "allow"}),
            ),
            listed(
                "ask-reads",
                None,
                json!({"match": {"action": "tool.call", "subject": "read-*"}, "decision": "require-approval", "signers": [{"role": "lead"}]}),
            ),
            listed(
                "reads-ok",
                None,
                json!({"match": {"action": "tool.call", "subject": "read-*"}, "decision": "allow"}),
            ),
        ];
        let binding = ManifestGovernance::from_documents(Some(&operator("gated")), None).with_policies(&policies);
        assert_eq!(decide(&binding, "run-tests", None), Decision::Allow);
        assert!(matches!(decide(&binding, "write-file", None), Decision::Deny(r) if r.contains("no-writes")));
        assert_eq!(decide(&binding, "read-file", Some(ToolKind::Read)), Decision::Ask);
        // The tool list still comes first.
        assert!(matches!(decide(&binding, "run-anything", None), Decision::Deny(r) if r.contains("tool list")));
    }

    #[test]
    fn listed_policies_add_to_the_governance_document_policy() {
        let document = json!({"doctype": "policy", "slug": "tests-ok", "match": {"action": "tool.call", "subject": "run-tests"}, "decision": "allow"});
        let deny = listed("deny-all", None, json!({"match": {"action": "*"}, "decision": "deny"}));
        let binding =
            ManifestGovernance::from_documents(Some(&operator("autonomous")), Some(&document)).with_policies([&deny]);
        assert!(matches!(decide(&binding, "run-tests", None), Decision::Deny(r) if r.contains("deny-all")));
    }

    #[test]
    fn a_bare_policy_document_is_accepted_and_other_documents_ignored() {
        let bare = json!({"doctype": "policy", "slug": "no-tests", "match": {"action": "tool.call", "subject": "run-tests"}, "decision": "deny"});
        let workspace = json!({"schema": "governance.workspace/v1", "autonomy": {"level": 2}});
        let binding = ManifestGovernance::from_documents(Some(&operator("autonomous")), None).with_policies([
            &bare,
            &workspace,
            &json!(null),
            &json!({"policy": 3}),
        ]);
        assert!(matches!(decide(&binding, "run-tests", None), Decision::Deny(_)));
        assert_eq!(decide(&binding, "write-file", None), Decision::Allow);
    }

    #[test]
    fn action_patterns_bind_tool_calls_only_when_they_match_tool_call() {
        for (action, binds) in [
            ("tool.call", true),
            ("tool.*", true),
            ("*", true),
            ("*.call", true),
            ("workspace.write", false),
            ("tool.call.extra", false),
            ("tool", false),
        ] {
            assert_eq!(denies_run_tests(json!({"action": action})), binds, "{action}");
        }
    }

    #[test]
    fn subjects_are_tool_names_or_globs_and_workspace_paths_match_no_tool() {
        for (subject, matches) in [
            ("run-tests", true),
            ("tool:run-tests", true),
            ("tool:run-*", true),
            ("*-tests", true),
            ("r*t*s", true),
            ("*", true),
            ("run-test", false),
            ("tool:write-*", false),
            ("workspace:/finance/**", false),
        ] {
            let matcher = json!({"action": "tool.call", "subject": subject});
            assert_eq!(denies_run_tests(matcher), matches, "{subject}");
        }
    }

    #[test]
    fn the_workspace_registry_binding_narrows_a_policy() {
        let policy = json!({"match": {"action": "*"}, "decision": "deny"});
        let mutates = listed("no-changes", Some("mutates"), policy.clone());
        let binding = autonomous_with(&mutates);
        assert_eq!(decide(&binding, "read-file", Some(ToolKind::Read)), Decision::Allow);
        assert!(matches!(
            decide(&binding, "write-file", Some(ToolKind::Edit)),
            Decision::Deny(_)
        ));
        assert!(
            matches!(decide(&binding, "run-tests", None), Decision::Deny(_)),
            "no kind counts as changing"
        );
        let writes = listed("ws", Some("workspace.write"), policy.clone());
        let binding = autonomous_with(&writes);
        assert_eq!(decide(&binding, "write-file", Some(ToolKind::Edit)), Decision::Allow);
        let calls = listed("calls", Some("tool.call"), policy);
        let binding = autonomous_with(&calls);
        assert!(matches!(
            decide(&binding, "read-file", Some(ToolKind::Read)),
            Decision::Deny(_)
        ));
    }

    #[test]
    fn escalate_and_unknown_decisions_ask_and_a_policy_without_decision_is_ignored() {
        for decision in ["escalate", "require-approval", "something-new"] {
            let policy = listed(
                "p",
                None,
                json!({"match": {"action": "tool.call"}, "decision": decision}),
            );
            let binding = autonomous_with(&policy);
            assert_eq!(decide(&binding, "run-tests", None), Decision::Ask, "{decision}");
            assert!(!binding.may_remember(&ToolRequest {
                operator: "op",
                session: "s",
                tool: "run-tests",
                kind: None,
                arguments: &Value::Null,
                principal: None,
            }));
        }
        let undecided = listed("p", None, json!({"match": {"action": "tool.call"}}));
        let binding = autonomous_with(&undecided);
        assert_eq!(decide(&binding, "run-tests", None), Decision::Allow);
    }

    fn decide_as(binding: &ManifestGovernance, tool: &str, principal: Option<&str>) -> Decision {
        binding.decide(&ToolRequest {
            operator: "op",
            session: "s",
            tool,
            kind: None,
            arguments: &Value::Null,
            principal,
        })
    }

    #[test]
    fn a_policy_scoped_by_principal_applies_only_to_matching_identities() {
        let rule = json!({"match": {"action": "tool.call", "subject": "write-*"}, "decision": "deny"});
        let deny = scoped("no-ci-writes", rule, json!(["ci-*"]));
        let binding = autonomous_with(&deny);
        assert!(
            matches!(decide_as(&binding, "write-file", Some("ci-bot")), Decision::Deny(r) if r.contains("no-ci-writes"))
        );
        assert_eq!(decide_as(&binding, "write-file", Some("alice")), Decision::Allow);
        assert_eq!(
            decide_as(&binding, "write-file", None),
            Decision::Allow,
            "a call without a principal (stdio) matches no scoped policy"
        );
        assert_eq!(decide_as(&binding, "run-tests", Some("ci-bot")), Decision::Allow);
        // The same policy as the governance document, scoped by a single string.
        let document = json!({"doctype": "policy", "slug": "no-ci", "match": {"subject": "write-*"}, "decision": "deny",
                              "metadata": {"agentacp": {"principals": "ci-bot"}}});
        let binding = ManifestGovernance::from_documents(Some(&operator("autonomous")), Some(&document));
        assert!(matches!(
            decide_as(&binding, "write-file", Some("ci-bot")),
            Decision::Deny(_)
        ));
        assert_eq!(decide_as(&binding, "write-file", Some("ci-bot2")), Decision::Allow);
    }

    #[test]
    fn an_allow_scoped_to_a_principal_lets_it_run_what_others_are_asked() {
        let rule = json!({"match": {"action": "tool.call", "subject": "write-file"}, "decision": "allow"});
        let allow = scoped("alice-writes", rule, json!(["alice"]));
        let binding = listed_in("supervised", &allow);
        assert_eq!(decide_as(&binding, "write-file", Some("alice")), Decision::Allow);
        assert_eq!(decide_as(&binding, "write-file", Some("bob")), Decision::Ask);
        assert_eq!(decide_as(&binding, "write-file", None), Decision::Ask);
    }

    #[test]
    fn a_require_approval_scoped_to_a_principal_is_per_call_only_for_it() {
        let rule = json!({"match": {"action": "tool.call"}, "decision": "require-approval"});
        let ask = scoped("ask-ci", rule, json!(["ci-*"]));
        let binding = listed_in("supervised", &ask);
        let request = |principal| ToolRequest {
            operator: "op",
            session: "s",
            tool: "run-tests",
            kind: None,
            arguments: &Value::Null,
            principal,
        };
        assert!(!binding.may_remember(&request(Some("ci-bot"))));
        assert!(binding.may_remember(&request(Some("alice"))));
        assert!(binding.may_remember(&request(None)));
    }

    #[test]
    fn a_malformed_principal_scope_applies_the_policy_to_no_call() {
        for principals in [json!(3), json!([]), json!([1, 2]), json!({"a": "b"}), json!(null)] {
            let rule = json!({"match": {"action": "tool.call"}, "decision": "deny"});
            let deny = scoped("p", rule, json!(principals));
            let binding = autonomous_with(&deny);
            for principal in [Some("alice"), Some("3"), None] {
                assert_eq!(
                    decide_as(&binding, "run-tests", principal),
                    Decision::Allow,
                    "{principals} {principal:?}"
                );
            }
        }
        // Metadata without `agentacp.principals` leaves the policy unscoped.
        for metadata in [json!({"owner": "ops"}), json!({"agentacp": {}}), json!(7)] {
            let deny = listed(
                "p",
                None,
                json!({"match": {"action": "tool.call"}, "decision": "deny", "metadata": metadata}),
            );
            let binding = autonomous_with(&deny);
            assert!(
                matches!(decide_as(&binding, "run-tests", None), Decision::Deny(_)),
                "{metadata}"
            );
            assert!(
                matches!(decide_as(&binding, "run-tests", Some("alice")), Decision::Deny(_)),
                "{metadata}"
            );
        }
    }

    #[test]
    fn an_allow_above_its_autonomy_level_escalates_to_asking() {
        let allow = listed(
            "tests-ok",
            None,
            json!({"match": {"action": "tool.call", "subject": "run-tests"}, "decision": "allow", "autonomy": 2}),
        );
        let default_autonomy = listed(
            "writes-ok",
            None,
            json!({"match": {"action": "tool.call", "subject": "write-file"}, "decision": "allow"}),
        );
        let at = |level: u64| {
            let workspace =
                json!({"schema": "governance.workspace/v1", "autonomy": {"level": level, "defaultApproval": "always"}});
            ManifestGovernance::from_documents(Some(&operator("gated")), Some(&workspace))
                .with_policies([&allow, &default_autonomy])
        };
        assert_eq!(decide(&at(2), "run-tests", None), Decision::Allow);
        assert_eq!(decide(&at(1), "run-tests", None), Decision::Allow);
        assert_eq!(decide(&at(3), "run-tests", None), Decision::Ask);
        assert_eq!(
            decide(&at(3), "write-file", None),
            Decision::Ask,
            "AIP-7 default autonomy is 2"
        );
        // Without a workspace level there is nothing to compare with: the allow stands.
        let binding = ManifestGovernance::from_documents(Some(&operator("gated")), None).with_policies([&allow]);
        assert_eq!(decide(&binding, "run-tests", None), Decision::Allow);
    }

    #[test]
    fn the_operator_profile_reads_memory_skills_and_policies() {
        let document = json!({
            "id": "copy",
            "skills": ["copywriting", {"id": "brand-voice", "source": "https://example.com/s", "version": "1.2.0", "allow": ["read"]}, {"source": "no id"}, 7],
            "memory": {"kind": "operator-context", "policy": "append-only", "share_with": ["founder"], "external": {"uri": "s3://m", "namespace": "n"}},
            "governance": {"policies": ["policy:a", "policy:b", 3], "audit_log": "audit:x", "autonomy": "supervised"}
        });
        let profile = OperatorProfile::from_document(Some(&document));
        assert_eq!(profile.id.as_deref(), Some("copy"));
        assert_eq!(profile.skills.len(), 2);
        assert_eq!(profile.skills[0].id, "copywriting");
        assert_eq!(profile.skills[1].version.as_deref(), Some("1.2.0"));
        assert_eq!(profile.skills[1].allow, ["read"]);
        let memory = profile.memory.unwrap();
        assert_eq!(memory.kind, MemoryKind::OperatorContext);
        assert!(memory.kind.persisted_by_runtime());
        assert_eq!(memory.policy, MemoryPolicy::AppendOnly);
        assert!(!memory.policy.may_redact() && !memory.policy.may_summarise());
        assert_eq!(memory.share_with, ["founder"]);
        assert_eq!(memory.external.unwrap().namespace.as_deref(), Some("n"));
        assert_eq!(profile.policies, ["policy:a", "policy:b"]);
    }

    #[test]
    fn unknown_memory_words_are_kept_and_nothing_malformed_panics() {
        let profile =
            OperatorProfile::from_document(Some(&json!({"memory": {"kind": "ephemeral", "policy": "forgetful"}})));
        let memory = profile.memory.unwrap();
        assert_eq!(memory.kind, MemoryKind::Other("ephemeral".into()));
        assert!(!memory.kind.persisted_by_runtime());
        assert_eq!(memory.policy, MemoryPolicy::Other("forgetful".into()));
        assert!(
            !memory.policy.may_redact(),
            "an unknown policy is enforced like append-only"
        );
        let default_policy = OperatorProfile::from_document(Some(&json!({"memory": {"kind": "thread"}})));
        assert_eq!(default_policy.memory.unwrap().policy, MemoryPolicy::Summarising);
        for odd in [
            json!(null),
            json!([1]),
            json!("x"),
            json!({"memory": 3, "skills": {"a": 1}, "governance": []}),
            json!({"memory": {"policy": "append-only"}}),
        ] {
            let profile = OperatorProfile::from_document(Some(&odd));
            assert!(
                profile.memory.is_none() && profile.skills.is_empty() && profile.policies.is_empty(),
                "{odd}"
            );
        }
        assert_eq!(OperatorProfile::from_document(None), OperatorProfile::default());
    }

    /// The published AIP-9 examples (test data, read when present): every one reads, and each
    /// `memory` and `skills` entry comes through.
    #[test]
    fn the_published_operator_examples_read_as_profiles() {
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/upstream/aip-9/examples");
        let Ok(entries) = std::fs::read_dir(&folder) else {
            eprintln!("skipped: no {}", folder.display());
            return;
        };
        let mut read = 0;
        for entry in entries.flatten() {
            let path = entry.path().join("OPERATOR.md");
            let Ok(bytes) = std::fs::read(&path) else { continue };
            let parsed = acp_manifest::document::parse(&path, &bytes);
            let document = parsed.document.frontmatter.expect("the examples parse").to_json();
            let profile = OperatorProfile::from_document(Some(&document));
            let skills = document.get("skills").and_then(Value::as_array).map_or(0, Vec::len);
            assert_eq!(profile.skills.len(), skills, "{}", path.display());
            assert_eq!(
                profile.memory.is_some(),
                document.get("memory").is_some(),
                "{}",
                path.display()
            );
            if let Some(memory) = &profile.memory {
                assert!(
                    !matches!(memory.kind, MemoryKind::Other(_)),
                    "{}: {memory:?}",
                    path.display()
                );
                assert!(
                    !matches!(memory.policy, MemoryPolicy::Other(_)),
                    "{}: {memory:?}",
                    path.display()
                );
            }
            let policies = document
                .pointer("/governance/policies")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            assert_eq!(profile.policies.len(), policies, "{}", path.display());
            read += 1;
        }
        assert!(read > 0);
    }
}
