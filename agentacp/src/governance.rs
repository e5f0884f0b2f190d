//! Governance: deciding each tool call before it happens — allow, ask the user, or deny.
//!
//! [`ManifestGovernance`] is the default binding, built from the manifest's refs: the AIP-9
//! operator's tool list and autonomy, and the AIP-7 governance document (a workspace manifest's
//! `autonomy`, or a policy). Replace it with your own [`Governance`] through
//! [`ServerOptions::governance`](crate::server::ServerOptions::governance).

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
    /// `tool:<name>` patterns (a trailing `*` matches any rest); empty matches every tool.
    subjects: Vec<String>,
    decision: PolicyDecision,
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
/// 1. a tool missing from the operator's `tools` list is denied;
/// 2. a matching AIP-7 policy decides (`deny` wins, then `require-approval`, then `allow`);
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
    policies: Vec<Policy>,
}

impl Default for ManifestGovernance {
    fn default() -> Self {
        ManifestGovernance {
            tools: None,
            autonomy: Autonomy::Supervised,
            default_approval: None,
            read_only: false,
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
                    .filter_map(|tool| match tool {
                        Value::String(name) => Some(name.clone()),
                        Value::Object(object) => object
                            .get("id")
                            .or_else(|| object.get("server"))
                            .and_then(Value::as_str)
                            .map(str::to_string),
                        _ => None,
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
                    binding.read_only = object.get("level").and_then(Value::as_u64) == Some(0);
                }
                _ => {}
            }
            if governance.get("doctype").and_then(Value::as_str) == Some("policy") {
                binding.policies.extend(read_policy(governance));
            }
        }
        binding
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

fn read_policy(document: &Value) -> Option<Policy> {
    let matcher = document.get("match");
    let action = matcher.and_then(|m| m.get("action")).and_then(Value::as_str);
    if action.is_some_and(|action| action != "tool.call" && action != "*") {
        return None;
    }
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
    })
}

impl Policy {
    fn matches(&self, tool: &str) -> bool {
        self.subjects.is_empty()
            || self.subjects.iter().any(|subject| {
                let pattern = subject.strip_prefix("tool:").unwrap_or(subject);
                match pattern.strip_suffix('*') {
                    Some(prefix) => tool.starts_with(prefix),
                    None => pattern == tool,
                }
            })
    }
}

impl Governance for ManifestGovernance {
    fn decide(&self, request: &ToolRequest<'_>) -> Decision {
        let tool = request.tool;
        if let Some(tools) = &self.tools
            && !tools.iter().any(|listed| listed == tool)
        {
            return Decision::Deny(format!("`{tool}` is not in the operator's tool list"));
        }
        let mutates = ToolKind::mutates(request.kind);
        if self.read_only && mutates {
            return Decision::Deny(format!(
                "the workspace is read-only (autonomy level 0) and `{tool}` may change something"
            ));
        }
        let matching: Vec<&Policy> = self.policies.iter().filter(|p| p.matches(tool)).collect();
        if let Some(policy) = matching.iter().find(|p| p.decision == PolicyDecision::Deny) {
            return Decision::Deny(format!("policy `{}` denies `{tool}`", policy.slug));
        }
        if matching.iter().any(|p| p.decision == PolicyDecision::RequireApproval) {
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
        !self.approval_is_per_call(request.tool)
    }
}

impl ManifestGovernance {
    /// Whether `ask` for `tool` may be answered for the rest of a session: not when a policy
    /// requires approval of it, nor when the workspace says `defaultApproval: always`.
    fn approval_is_per_call(&self, tool: &str) -> bool {
        self.default_approval == Some(DefaultApproval::Always)
            || self
                .policies
                .iter()
                .any(|policy| policy.decision == PolicyDecision::RequireApproval && policy.matches(tool))
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

    #[test]
    fn without_documents_everything_asks() {
        let binding = ManifestGovernance::from_documents(None, None);
        assert_eq!(decide(&binding, "anything", Some(ToolKind::Read)), Decision::Ask);
    }
}
