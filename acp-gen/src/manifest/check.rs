//! Checking one manifest: parse → schema rules → refs → AIP rules → `acp_rev`, every finding
//! collected (never stopping at the first), then — when nothing is wrong — the typed model.

use std::path::Path;
use std::sync::LazyLock;

use crate::diagnostic::{Code, Diagnostic};
use crate::document::{self, Document};
use crate::revisions::{self, ResolveError, Revision};
use crate::yaml::Node;

use super::capabilities::EffectiveCapabilities;
use super::model::{self, Manifest};
use super::refs::{self, RefRole, ResolvedRef};
use super::rules;
use super::schema_check::SchemaChecker;

static SCHEMA: LazyLock<SchemaChecker> = LazyLock::new(|| SchemaChecker::new(model::json_schema()));
static ACP_REV: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(model::ACP_REV_PATTERN).expect("a valid constant pattern"));

/// The outcome of checking one manifest.
#[derive(Debug, Clone)]
pub struct Checked {
    /// The document as read.
    pub document: Document,
    /// Every finding, sorted by position.
    pub diagnostics: Vec<Diagnostic>,
    /// The typed manifest, when there is no error.
    pub manifest: Option<Manifest>,
    /// The pinned revision, when `acp_rev` resolved.
    pub revision: Option<Revision>,
    /// The refs that were followed.
    pub refs: Vec<ResolvedRef>,
}

impl Checked {
    /// Whether any finding is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// The effective capabilities, when the manifest is valid.
    pub fn effective_capabilities(&self) -> Option<EffectiveCapabilities> {
        self.manifest.as_ref().map(EffectiveCapabilities::of)
    }
}

/// Reads and checks the manifest at `path`. Only I/O failures are errors here; everything
/// about the content is a diagnostic.
pub fn check_file(path: &Path) -> std::io::Result<Checked> {
    let bytes = std::fs::read(path)?;
    Ok(check_bytes(path, &bytes))
}

/// Checks manifest bytes as if read from `path` (the path gives the folder for the name
/// rule and for refs).
pub fn check_bytes(path: &Path, bytes: &[u8]) -> Checked {
    let parsed = document::parse(path, bytes);
    let mut diagnostics = parsed.diagnostics;
    let document = parsed.document;
    let mut checked = Checked {
        document,
        diagnostics: Vec::new(),
        manifest: None,
        revision: None,
        refs: Vec::new(),
    };
    let Some(root) = checked.document.frontmatter.clone() else {
        checked.diagnostics = sorted(diagnostics);
        return checked;
    };
    if root.as_mapping().is_none() {
        diagnostics.push(Diagnostic::new(
            Code::NotAMapping,
            root.span.clone(),
            format!(
                "the frontmatter must be a mapping of fields, found {}",
                root.value.type_name()
            ),
        ));
        checked.diagnostics = sorted(diagnostics);
        return checked;
    }
    diagnostics.extend(SCHEMA.check(&root, &checked.document.fence));
    let folder = path.parent().unwrap_or(Path::new(""));
    checked.refs = follow_refs(&root, folder, &mut diagnostics);
    rules::check(&root, path, &checked.refs, &mut diagnostics);
    checked.revision = check_revision(&root, &mut diagnostics);
    if !diagnostics.iter().any(Diagnostic::is_error) {
        match serde_json::from_value::<Manifest>(root.to_json()) {
            Ok(manifest) => checked.manifest = Some(manifest),
            Err(error) => diagnostics.push(Diagnostic::new(
                Code::WrongType,
                checked.document.fence.clone(),
                format!("could not read the manifest: {error}"),
            )),
        }
    }
    checked.diagnostics = sorted(diagnostics);
    checked
}

fn sorted(mut diagnostics: Vec<Diagnostic>) -> Vec<Diagnostic> {
    diagnostics.sort_by_key(|a| (a.span.start, a.code));
    diagnostics
}

fn follow_refs(root: &Node, folder: &Path, out: &mut Vec<Diagnostic>) -> Vec<ResolvedRef> {
    let Some(aip44) = root.get_at(&["metadata", "aip44"]) else {
        return Vec::new();
    };
    let mut wanted: Vec<(RefRole, &Node)> = Vec::new();
    for (role, key) in [
        (RefRole::Operator, "operator"),
        (RefRole::Governance, "governance"),
        (RefRole::Sandbox, "sandbox"),
    ] {
        if let Some(node) = aip44.get(key) {
            wanted.push((role, node));
        }
    }
    if let Some(crate::yaml::Value::Sequence(servers)) = aip44.get("mcp_servers").map(|n| &n.value) {
        wanted.extend(
            servers
                .iter()
                .filter_map(|s| s.get("ref"))
                .map(|n| (RefRole::McpServer, n)),
        );
    }
    let mut resolved = Vec::new();
    for (role, node) in wanted {
        // A non-string ref is already a schema error.
        let Some(written) = node.as_str() else { continue };
        let (found, diagnostics) = refs::follow(role, written, node.span.clone(), folder);
        out.extend(diagnostics);
        resolved.push(found);
    }
    resolved
}

fn check_revision(root: &Node, out: &mut Vec<Diagnostic>) -> Option<Revision> {
    let node = root.get_at(&["metadata", "aip44", "acp_rev"])?;
    let prefix = node.as_str()?;
    if !ACP_REV.is_match(prefix) {
        // The pattern error (ACP103) says what is wrong.
        return None;
    }
    let known = || {
        revisions::KNOWN
            .iter()
            .map(|r| format!("{} ({})", &r.sha[..8], r.label))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match revisions::resolve(prefix) {
        Ok(revision) => Some(revision),
        Err(ResolveError::Unknown) => {
            out.push(
                Diagnostic::new(
                    Code::UnknownRevision,
                    node.span.clone(),
                    format!("acp_rev `{prefix}` matches no revision with built-in wire types"),
                )
                .with_help(format!(
                    "known: {}; for another revision run `scaffold-aip regen --schema <its schema.json> --rev <sha> --out src/acp_wire.rs` in your crate",
                    known()
                )),
            );
            None
        }
        Err(ResolveError::Ambiguous(matches)) => {
            let names = matches.iter().map(|r| r.sha).collect::<Vec<_>>().join(", ");
            out.push(
                Diagnostic::new(
                    Code::AmbiguousRevision,
                    node.span.clone(),
                    format!("acp_rev `{prefix}` matches several revisions: {names}"),
                )
                .with_help("write more digits of the SHA"),
            );
            None
        }
    }
}
