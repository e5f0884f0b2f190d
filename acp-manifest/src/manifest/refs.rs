//! The documents a manifest refers to: `operator` (AIP-9), `governance` (AIP-7), `sandbox`
//! (AIP-36) and `mcp_servers[].ref`. Each resolves relative to the ACP.md's folder, must be a
//! readable file with frontmatter, and must have the required fields of its own AIP.

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::diagnostic::{Code, Diagnostic};
use crate::document::{self, Parsed, ReadError};
use crate::source::SourceFile;
use crate::yaml::{Node, Value};

/// What a ref is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RefRole {
    /// `metadata.aip44.operator`: an AIP-9 OPERATOR.md.
    Operator,
    /// `metadata.aip44.governance`: an AIP-7 workspace manifest or policy.
    Governance,
    /// `metadata.aip44.sandbox`: an AIP-36 SANDBOX.md.
    Sandbox,
    /// `metadata.aip44.mcp_servers[i].ref`.
    McpServer,
    /// A `policy:<slug>` of the operator's `governance.policies`, through the workspace
    /// manifest's `policies` registry: an AIP-7 policy.
    Policy,
}

impl RefRole {
    /// The manifest key, for messages.
    pub fn key(&self) -> &'static str {
        match self {
            RefRole::Operator => "operator",
            RefRole::Governance => "governance",
            RefRole::Sandbox => "sandbox",
            RefRole::McpServer => "mcp_servers[].ref",
            RefRole::Policy => "policies[].ref",
        }
    }
}

/// A ref that was followed.
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedRef {
    /// What it is for.
    pub role: RefRole,
    /// As written in the manifest.
    pub written: String,
    /// The file it names (relative refs joined onto the manifest's folder).
    pub path: PathBuf,
    /// Which AIP document it is, when recognised (`AIP-9 OPERATOR`, `AIP-7 policy`, ...).
    pub doctype: Option<&'static str>,
    /// The target's frontmatter, when it was read without error.
    #[serde(skip)]
    pub frontmatter: Option<Node>,
    /// The target's text, when it was read (for positions inside it).
    #[serde(skip)]
    pub source: Option<SourceFile>,
}

/// Follows one ref; returns what was found and any findings (located at `span`, the ref value).
pub fn follow(role: RefRole, written: &str, span: Range<usize>, folder: &Path) -> (ResolvedRef, Vec<Diagnostic>) {
    let relative: PathBuf = Path::new(written)
        .components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect();
    let path = folder.join(relative);
    let mut resolved = ResolvedRef {
        role: role.clone(),
        written: written.to_string(),
        path: path.clone(),
        doctype: None,
        frontmatter: None,
        source: None,
    };
    let key = role.key();
    let fail = |code, message: String| vec![Diagnostic::new(code, span.clone(), message)];

    if let Some(diagnostics) = unfollowable(key, written, &fail) {
        return (resolved, diagnostics);
    }
    let bytes = match read_target(&path) {
        Ok(bytes) => bytes,
        Err((code, why)) => return (resolved, fail(code, format!("`{key}` ref `{written}` {why}"))),
    };
    if role == RefRole::McpServer {
        return (resolved, Vec::new());
    }
    let parsed = document::parse(&path, &bytes);
    resolved.source = Some(parsed.document.source.clone());
    let root = match frontmatter(&parsed, key, written, &fail) {
        Ok(root) => root,
        Err(diagnostics) => return (resolved, diagnostics),
    };
    let Ok((doctype, required)) = requirements(&role, &root) else {
        return (resolved, unknown_doctype(&role, key, written, &fail));
    };
    resolved.doctype = Some(doctype);
    let diagnostics = target_findings(&role, &root, (doctype, required), key, written, &fail);
    resolved.frontmatter = Some(root);
    (resolved, diagnostics)
}

/// How a finding at the ref is made: its code and message.
type Fail<'a> = &'a dyn Fn(Code, String) -> Vec<Diagnostic>;

/// The findings for a ref `written` that cannot be followed at all (empty, absolute, a URL).
fn unfollowable(key: &str, written: &str, fail: Fail<'_>) -> Option<Vec<Diagnostic>> {
    if written.trim().is_empty() {
        return Some(fail(Code::RefNotRelative, format!("`{key}` ref is empty")));
    }
    if written.contains("://") || Path::new(written).is_absolute() || written.starts_with(['/', '\\']) {
        let diagnostics = fail(
            Code::RefNotRelative,
            format!("`{key}` ref `{written}` must be a path relative to this ACP.md's folder"),
        );
        return Some(with_help(
            diagnostics,
            "write it like `./OPERATOR.md`, relative to the folder that holds ACP.md",
        ));
    }
    None
}

/// The target's frontmatter, a mapping; else the finding that says why there is none.
fn frontmatter(parsed: &Parsed, key: &str, written: &str, fail: Fail<'_>) -> Result<Node, Vec<Diagnostic>> {
    let frontmatter_error = parsed.diagnostics.iter().find(|d| d.is_error());
    match (&parsed.document.frontmatter, frontmatter_error) {
        (Some(root), None) if root.as_mapping().is_some() => Ok(root.clone()),
        (_, found) => {
            let why = match found {
                Some(inner) => {
                    let at = parsed.document.source.position(inner.span.start);
                    format!("{}:{}:{}: {}", written, at.line, at.column, inner.message)
                }
                None => format!("{written}: the frontmatter is not a mapping"),
            };
            Err(fail(
                Code::RefBadFrontmatter,
                format!("`{key}` ref has no valid frontmatter ({why})"),
            ))
        }
    }
}

/// The finding for a target that is not the kind of document its `role` refers to.
fn unknown_doctype(role: &RefRole, key: &str, written: &str, fail: Fail<'_>) -> Vec<Diagnostic> {
    if *role == RefRole::Policy {
        return fail(
            Code::RefUnknownDoctype,
            format!("`{key}` ref `{written}` is not an AIP-7 policy (`doctype: policy`)"),
        );
    }
    let diagnostics = fail(
        Code::RefUnknownDoctype,
        format!("`{key}` ref `{written}` is neither an AIP-7 workspace manifest nor a policy"),
    );
    with_help(
        diagnostics,
        "a GOVERNANCE.md has `schema: governance.workspace/v1`, or `doctype: policy`",
    )
}

/// The findings about a target of kind `doctype` whose frontmatter is `root`: the `required`
/// fields it lacks, and for a sandbox, a provider or a restriction the runtime cannot give.
fn target_findings(
    role: &RefRole,
    root: &Node,
    (doctype, required): (&str, &[&str]),
    key: &str,
    written: &str,
    fail: Fail<'_>,
) -> Vec<Diagnostic> {
    let missing: Vec<&str> = required
        .iter()
        .copied()
        .filter(|field| root.get(field).is_none())
        .collect();
    // The runtime implements the `local` sandbox only: another provider would start nothing.
    let provider = match (role, root.get("provider").and_then(|p| p.as_str())) {
        (RefRole::Sandbox, Some(provider)) if provider != "local" => Some(provider.to_string()),
        _ => None,
    };
    let unenforceable = match role {
        RefRole::Sandbox if provider.is_none() => local_sandbox_gaps(&root.to_json()),
        _ => Vec::new(),
    };
    if let Some(provider) = provider.filter(|_| missing.is_empty()) {
        let diagnostics = fail(
            Code::SandboxProviderNotImplemented,
            format!("`{key}` ref `{written}` names the provider `{provider}`, which agentacp does not implement"),
        );
        return with_help(
            diagnostics,
            "agentacp runs `provider: local` sandboxes; a server with another provider refuses to start",
        );
    }
    if missing.is_empty() && !unenforceable.is_empty() {
        let diagnostics = unenforceable
            .into_iter()
            .flat_map(|why| fail(Code::SandboxNotEnforceable, format!("`{key}` ref `{written}`: {why}")))
            .collect();
        return with_help(
            diagnostics,
            "a server refuses to start with this sandbox (see docs/sandbox.md); a host allow-list alone is accepted with `metadata: {agentacp: {enforcement: best-effort}}`",
        );
    }
    if missing.is_empty() {
        return Vec::new();
    }
    let list = missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", ");
    fail(
        Code::RefMissingFields,
        format!("`{key}` ref `{written}` ({doctype}) lacks required {list}"),
    )
}

/// What a `provider: local` SANDBOX.md declares that the runtime cannot enforce (each a
/// sentence's end): a mount it cannot give, egress to named hosts (unless best effort), an
/// enforcement it does not know.
fn local_sandbox_gaps(sandbox: &serde_json::Value) -> Vec<String> {
    let mut gaps = Vec::new();
    for (index, mount) in sandbox["mounts"].as_array().into_iter().flatten().enumerate() {
        let source = &mount["source"];
        let at = mount["at"].as_str().unwrap_or_default();
        if source.get("ref").is_some() || source.get("inline").is_some() {
            gaps.push(format!(
                "mounts[{index}] is a storage backing, which a local sandbox cannot mount"
            ));
        } else if let Some(file) = source["file"].as_str().filter(|file| *file != at) {
            gaps.push(format!(
                "mounts[{index}] mounts `{file}` at `{at}`, and a local sandbox cannot move a folder (`at` must be `{file}`)"
            ));
        }
    }
    let enforcement = sandbox["metadata"]["agentacp"]["enforcement"].as_str();
    match enforcement {
        None | Some("required") | Some("best-effort") => {}
        Some(other) => gaps.push(format!(
            "metadata.agentacp.enforcement is `{other}`, neither `required` nor `best-effort`"
        )),
    }
    let hosts: Vec<&str> = sandbox["network"]["egress"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .collect();
    if !hosts.is_empty() && enforcement != Some("best-effort") {
        gaps.push(format!(
            "network.egress names hosts ({}), and a local sandbox cannot limit egress to hosts",
            hosts.join(", ")
        ));
    }
    gaps
}

/// Reads a ref's target: a UTF-8 regular file within the size limit. The error is a code and
/// the end of a sentence.
fn read_target(path: &Path) -> Result<Vec<u8>, (Code, String)> {
    let bytes = document::read_file(path).map_err(|error| match error {
        ReadError::Io(error) if error.kind() == std::io::ErrorKind::NotFound => {
            (Code::RefNotFound, format!("not found (looked for {})", path.display()))
        }
        ReadError::Io(error) => (Code::RefUnreadable, format!("cannot be read: {error}")),
        ReadError::Refused(refusal) => (Code::RefUnreadable, refusal.to_string()),
    })?;
    if std::str::from_utf8(bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes)).is_err() {
        return Err((Code::RefUnreadable, "is not UTF-8 text".to_string()));
    }
    Ok(bytes)
}

fn with_help(mut diagnostics: Vec<Diagnostic>, help: &str) -> Vec<Diagnostic> {
    for diagnostic in &mut diagnostics {
        diagnostic.help = Some(help.to_string());
    }
    diagnostics
}

/// The document type a ref must be, and the top-level fields its AIP requires.
fn requirements(role: &RefRole, root: &Node) -> Result<(&'static str, &'static [&'static str]), ()> {
    match role {
        RefRole::Operator => Ok((
            "AIP-9 OPERATOR",
            &["name", "id", "persona_summary", "version", "profile"],
        )),
        RefRole::Sandbox => Ok(("AIP-36 SANDBOX", &["provider", "config"])),
        RefRole::Governance => {
            if root.get("schema").and_then(Node::as_str) == Some("governance.workspace/v1") {
                Ok((
                    "AIP-7 workspace",
                    &["schema", "name", "title", "description", "version"],
                ))
            } else if root.get("doctype").and_then(Node::as_str) == Some("policy") {
                Ok((
                    "AIP-7 policy",
                    &["schema", "doctype", "slug", "version", "match", "decision"],
                ))
            } else {
                Err(())
            }
        }
        RefRole::McpServer => Ok(("MCP server", &[])),
        RefRole::Policy => match root.get("doctype").and_then(Node::as_str) {
            Some("policy") => Ok((
                "AIP-7 policy",
                &["schema", "doctype", "slug", "version", "match", "decision"],
            )),
            _ => Err(()),
        },
    }
}

/// One entry of the operator's `governance.policies`, resolved to its AIP-7 policy.
#[derive(Debug, Clone, Serialize)]
pub struct ResolvedPolicy {
    /// As written in OPERATOR.md: `policy:<slug>`.
    pub written: String,
    /// The workspace registry entry's `appliesTo` (the action class it binds), if any.
    pub applies_to: Option<String>,
    /// The policy document (role [`RefRole::Policy`]).
    pub target: ResolvedRef,
}

/// Resolves the operator's `governance.policies` (AIP-9 `policy:<slug>` refs) to AIP-7 policy
/// documents. A slug resolves through the registry of the workspace manifest the `governance`
/// ref names (`policies[]` entry whose `id` is the slug; its `ref` is relative to that
/// GOVERNANCE.md's folder), or to the governance ref itself when that is the policy with that
/// slug. Anything else is an ACP306 at `operator_span` (the manifest's `operator` value),
/// whose message names the OPERATOR.md line of the entry. Refs that could not be read (the
/// operator, the governance document) are already reported and resolve nothing here.
pub fn resolve_policies(refs: &[ResolvedRef], operator_span: Range<usize>) -> (Vec<ResolvedPolicy>, Vec<Diagnostic>) {
    let mut resolved = Vec::new();
    let mut diagnostics = Vec::new();
    let Some(operator) = refs.iter().find(|r| r.role == RefRole::Operator) else {
        return (resolved, diagnostics);
    };
    let Some(Value::Sequence(entries)) = operator
        .frontmatter
        .as_ref()
        .and_then(|root| root.get_at(&["governance", "policies"]))
        .map(|node| &node.value)
    else {
        return (resolved, diagnostics);
    };
    let governance = refs.iter().find(|r| r.role == RefRole::Governance);
    if governance.is_some_and(|g| g.frontmatter.is_none()) {
        // The governance ref's own diagnostic says why it could not be read.
        return (resolved, diagnostics);
    }
    let governance = governance.and_then(|g| Some((g, g.frontmatter.as_ref()?)));
    for entry in entries {
        match resolve_policy(entry, operator, governance, &operator_span) {
            Ok(policy) => resolved.push(policy),
            Err((why, help)) => {
                diagnostics.push(Diagnostic::new(Code::PolicyNotResolved, operator_span.clone(), why).with_help(help))
            }
        }
    }
    (resolved, diagnostics)
}

/// What [`resolve_policy`] could not resolve: why, and the help for it.
type Unresolved = (String, &'static str);

/// One `governance.policies` `entry` of the `operator` document, resolved through
/// `governance` (the ref and its frontmatter); else why not (see [`resolve_policies`]).
fn resolve_policy(
    entry: &Node,
    operator: &ResolvedRef,
    governance: Option<(&ResolvedRef, &Node)>,
    operator_span: &Range<usize>,
) -> Result<ResolvedPolicy, Unresolved> {
    let at = operator.source.as_ref().map_or_else(
        || operator.written.clone(),
        |source| {
            let position = source.position(entry.span.start);
            format!("{}:{}:{}", operator.written, position.line, position.column)
        },
    );
    let registry_help = "list it in the workspace GOVERNANCE.md the manifest's `governance` ref names: `policies: [{id: <slug>, ref: ./policies/<slug>.md}]`";
    let Some(slug) = entry
        .as_str()
        .and_then(|text| text.strip_prefix("policy:"))
        .filter(|slug| !slug.is_empty())
    else {
        return Err((
            format!("operator policy at {at} is not a `policy:<slug>` ref"),
            "write each `governance.policies` entry as `policy:<slug>`",
        ));
    };
    let written = format!("policy:{slug}");
    let Some((governance, root)) = governance else {
        return Err((
            format!(
                "operator policy `{written}` ({at}) cannot be resolved: the manifest has no `governance` ref to a workspace manifest that lists it"
            ),
            registry_help,
        ));
    };
    if governance.doctype == Some("AIP-7 policy") {
        if root.get("slug").and_then(Node::as_str) != Some(slug) {
            return Err((
                format!(
                    "operator policy `{written}` ({at}) cannot be resolved: the `governance` ref `{}` is a single policy with another slug, not a workspace manifest that lists policies",
                    governance.written
                ),
                registry_help,
            ));
        }
        let mut target = governance.clone();
        target.role = RefRole::Policy;
        return Ok(ResolvedPolicy {
            written,
            applies_to: None,
            target,
        });
    }
    let listed = match root.get("policies").map(|node| &node.value) {
        Some(Value::Sequence(listed)) => listed.as_slice(),
        _ => &[],
    };
    let Some(registered) = listed
        .iter()
        .find(|item| item.get("id").and_then(Node::as_str) == Some(slug))
    else {
        return Err((
            format!(
                "operator policy `{written}` ({at}) is not in the `policies` of `{}`",
                governance.written
            ),
            registry_help,
        ));
    };
    let Some(reference) = registered.get("ref").and_then(Node::as_str) else {
        return Err((
            format!(
                "operator policy `{written}` ({at}): its entry in `{}` has no `ref`",
                governance.written
            ),
            "give the registry entry `ref: ./policies/<slug>.md`",
        ));
    };
    let folder = governance.path.parent().unwrap_or(Path::new(""));
    let (target, found) = follow(RefRole::Policy, reference, operator_span.clone(), folder);
    if let Some(problem) = found.first() {
        return Err((
            format!(
                "operator policy `{written}` ({at}), listed in `{}`, does not resolve: {}",
                governance.written, problem.message
            ),
            "the registry's `ref` is relative to the GOVERNANCE.md's folder and must name an AIP-7 policy",
        ));
    }
    Ok(ResolvedPolicy {
        written,
        applies_to: registered.get("appliesTo").and_then(Node::as_str).map(str::to_string),
        target,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::check_file;

    const OPERATOR: &str = "---\nname: O\nid: o\npersona_summary: p\nversion: 0.1.0\nprofile:\n  role: r\ngovernance:\n  policies: [policy:no-deletes]\n  audit_log: \"audit:o\"\n  autonomy: supervised\n---\n";
    const POLICY: &str = "---\nschema: agentgovernance/v1\ndoctype: policy\nslug: no-deletes\nversion: 1.0.0\nmatch:\n  action: tool.call\n  subject: \"delete-*\"\ndecision: deny\n---\n";

    /// A server manifest in `dir/srv` with the operator above and `governance` (if any).
    fn lint(files: &[(&str, &str)], governance: Option<&str>) -> crate::manifest::Checked {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("srv");
        for (name, text) in files {
            let path = folder.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let governance = governance.map_or(String::new(), |g| format!("    governance: {g}\n"));
        let manifest = format!(
            "---\nname: srv\nid: srv\ndescription: d\nversion: 0.1.0\nkind: server\ntransport: stdio\nmetadata:\n  aip44:\n    acp_rev: 0fc18323\n    tier: governance-aware\n    operator: ./OPERATOR.md\n{governance}---\n"
        );
        std::fs::write(folder.join("ACP.md"), manifest).unwrap();
        check_file(&folder.join("ACP.md")).unwrap()
    }

    fn acp306(checked: &crate::manifest::Checked) -> Vec<String> {
        checked
            .diagnostics
            .iter()
            .filter(|d| d.code == Code::PolicyNotResolved)
            .map(|d| d.message.clone())
            .collect()
    }

    #[test]
    fn a_slug_resolves_through_the_workspace_registry() {
        let workspace = "---\nschema: governance.workspace/v1\nname: w\ntitle: t\ndescription: d\nversion: 0.1.0\npolicies:\n  - id: no-deletes\n    ref: ./policies/no-deletes.md\n    appliesTo: mutates\n---\n";
        let checked = lint(
            &[
                ("OPERATOR.md", OPERATOR),
                ("GOVERNANCE.md", workspace),
                ("policies/no-deletes.md", POLICY),
            ],
            Some("./GOVERNANCE.md"),
        );
        assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
        assert_eq!(checked.policies.len(), 1);
        assert_eq!(checked.policies[0].written, "policy:no-deletes");
        assert_eq!(checked.policies[0].applies_to.as_deref(), Some("mutates"));
        assert!(checked.policies[0].target.path.ends_with("policies/no-deletes.md"));
    }

    #[test]
    fn a_governance_ref_that_is_the_policy_resolves_its_own_slug_only() {
        let checked = lint(&[("OPERATOR.md", OPERATOR), ("POLICY.md", POLICY)], Some("./POLICY.md"));
        assert!(checked.diagnostics.is_empty(), "{:?}", checked.diagnostics);
        assert_eq!(checked.policies.len(), 1);
        let other = POLICY.replace("slug: no-deletes", "slug: other-one");
        let checked = lint(&[("OPERATOR.md", OPERATOR), ("POLICY.md", &other)], Some("./POLICY.md"));
        assert_eq!(acp306(&checked).len(), 1, "{:?}", checked.diagnostics);
    }

    #[test]
    fn unresolvable_slugs_are_reported_naming_the_operator_line() {
        // No governance ref at all.
        let checked = lint(&[("OPERATOR.md", OPERATOR)], None);
        let found = acp306(&checked);
        assert_eq!(found.len(), 1, "{:?}", checked.diagnostics);
        assert!(found[0].contains("./OPERATOR.md:9:14"), "{}", found[0]);
        assert!(checked.policies.is_empty());
        // Registered, but the file is missing or is not a policy.
        let workspace = "---\nschema: governance.workspace/v1\nname: w\ntitle: t\ndescription: d\nversion: 0.1.0\npolicies:\n  - id: no-deletes\n    ref: ./gone.md\n---\n";
        let checked = lint(
            &[("OPERATOR.md", OPERATOR), ("GOVERNANCE.md", workspace)],
            Some("./GOVERNANCE.md"),
        );
        assert!(acp306(&checked)[0].contains("not found"), "{:?}", checked.diagnostics);
        let pointing_at_operator = workspace.replace("./gone.md", "./OPERATOR.md");
        let checked = lint(
            &[("OPERATOR.md", OPERATOR), ("GOVERNANCE.md", &pointing_at_operator)],
            Some("./GOVERNANCE.md"),
        );
        assert!(
            acp306(&checked)[0].contains("not an AIP-7 policy"),
            "{:?}",
            checked.diagnostics
        );
        // A malformed entry.
        let odd = OPERATOR.replace("[policy:no-deletes]", "[no-deletes]");
        let checked = lint(&[("OPERATOR.md", &odd), ("POLICY.md", POLICY)], Some("./POLICY.md"));
        assert!(
            acp306(&checked)[0].contains("not a `policy:<slug>`"),
            "{:?}",
            checked.diagnostics
        );
    }
}
