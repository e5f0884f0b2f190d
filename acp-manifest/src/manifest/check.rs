//! Checking one manifest: parse → schema rules → refs → AIP rules → `acp_rev`, every finding
//! collected (never stopping at the first), then — when nothing is wrong — the typed model.

use std::path::Path;
use std::sync::LazyLock;

use crate::diagnostic::{Code, Diagnostic};
use crate::document::{self, Document, ReadError, Refusal};
use crate::revisions::{self, Generated, ResolveError, Revision};
use crate::yaml::Node;

use super::capabilities::EffectiveCapabilities;
use super::model::{self, Manifest};
use super::refs::{self, RefRole, ResolvedPolicy, ResolvedRef};
use super::rules;
use super::schema_check::SchemaChecker;

static SCHEMA: LazyLock<SchemaChecker> = LazyLock::new(|| SchemaChecker::new(model::json_schema()));
static ACP_REV: LazyLock<regex_lite::Regex> =
    LazyLock::new(|| regex_lite::Regex::new(model::ACP_REV_PATTERN).expect("a valid constant pattern"));

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
    /// The operator's `governance.policies`, resolved to AIP-7 policy documents.
    pub policies: Vec<ResolvedPolicy>,
    /// For an `acp_rev` without built-in wire types: the module `scaffold-aip regen` generated
    /// for it in the crate beside the manifest (`src/`), which the build uses through
    /// `#[acp_operator(wire = …)]`.
    pub generated_wire: Option<Generated>,
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
/// A file that is not a regular file, or is larger than [`document::MAX_FILE_BYTES`], is not
/// read: it is reported (ACP014, ACP013).
pub fn check_file(path: &Path) -> std::io::Result<Checked> {
    match document::read_file(path) {
        Ok(bytes) => Ok(check_bytes(path, &bytes)),
        Err(ReadError::Io(error)) => Err(error),
        Err(ReadError::Refused(refusal)) => Ok(check_parsed(path, document::refused(path, refusal))),
    }
}

/// Checks manifest bytes as if read from `path` (the path gives the folder for the name
/// rule and for refs).
pub fn check_bytes(path: &Path, bytes: &[u8]) -> Checked {
    let parsed = match bytes.len() as u64 {
        size if size > document::MAX_FILE_BYTES => document::refused(path, Refusal::TooLarge(size)),
        _ => document::parse(path, bytes),
    };
    check_parsed(path, parsed)
}

fn check_parsed(path: &Path, parsed: document::Parsed) -> Checked {
    let mut diagnostics = parsed.diagnostics;
    let document = parsed.document;
    let mut checked = Checked {
        document,
        diagnostics: Vec::new(),
        manifest: None,
        revision: None,
        refs: Vec::new(),
        policies: Vec::new(),
        generated_wire: None,
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
    if let Some(operator) = root.get_at(&["metadata", "aip44", "operator"]) {
        let (policies, found) = refs::resolve_policies(&checked.refs, operator.span.clone());
        checked.policies = policies;
        diagnostics.extend(found);
    }
    rules::check(&root, path, &checked.refs, &mut diagnostics);
    (checked.revision, checked.generated_wire) = check_revision(&root, folder, &mut diagnostics);
    super::versions::check(
        &root,
        checked.revision.as_ref(),
        checked.generated_wire.as_ref(),
        &mut diagnostics,
    );
    let client_methods: Option<Vec<&str>> = match (&checked.revision, &checked.generated_wire) {
        (Some(revision), _) => Some(revision.client_methods.to_vec()),
        (None, Some(generated)) => generated
            .client_methods
            .as_ref()
            .map(|methods| methods.iter().map(String::as_str).collect()),
        (None, None) => None,
    };
    if let Some(methods) = client_methods {
        rules::client_capabilities_in_revision(&root, &methods, &mut diagnostics);
        rules::elicitation_in_revision(&root, &methods, &mut diagnostics);
    }
    let agent_surface: Option<(Vec<&str>, bool)> = match (&checked.revision, &checked.generated_wire) {
        (Some(revision), _) => Some((revision.agent_methods.to_vec(), true)),
        (None, Some(generated)) => generated.agent_methods.as_ref().map(|methods| {
            (
                methods.iter().map(String::as_str).collect(),
                generated.commands_update.unwrap_or(true),
            )
        }),
        (None, None) => None,
    };
    if let Some((methods, commands_update)) = agent_surface {
        rules::surface_in_revision(&root, &methods, commands_update, &mut diagnostics);
    }
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

/// The built-in revision `acp_rev` names or, failing that, a generated module for it.
fn check_revision(root: &Node, folder: &Path, out: &mut Vec<Diagnostic>) -> (Option<Revision>, Option<Generated>) {
    let Some(node) = root.get_at(&["metadata", "aip44", "acp_rev"]) else {
        return (None, None);
    };
    let Some(prefix) = node.as_str() else {
        return (None, None);
    };
    if !ACP_REV.is_match(prefix) {
        // The pattern error (ACP103) says what is wrong.
        return (None, None);
    }
    let known = || {
        revisions::KNOWN
            .iter()
            .map(|r| format!("{} ({})", &r.sha[..8], r.label))
            .collect::<Vec<_>>()
            .join(", ")
    };
    match revisions::resolve(prefix) {
        Ok(revision) => (Some(revision), None),
        Err(ResolveError::Unknown) => {
            if let Some(module) = generated_wire_module(folder, prefix) {
                return (None, Some(module));
            }
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
            (None, None)
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
            (None, None)
        }
    }
}

/// A Rust file under `folder/src` (at most three folders deep, at most 1,000 entries looked
/// at) whose first line says `scaffold-aip regen` generated it from a revision starting with
/// `prefix`, and what it says about that revision.
fn generated_wire_module(folder: &Path, prefix: &str) -> Option<Generated> {
    const MAX_DEPTH: usize = 3;
    const MAX_ENTRIES: usize = 1_000;
    let mut folders = vec![(folder.join("src"), 0)];
    let mut looked_at = 0;
    while let Some((dir, depth)) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            looked_at += 1;
            if looked_at > MAX_ENTRIES {
                return None;
            }
            let path = entry.path();
            match entry.file_type() {
                Ok(kind) if kind.is_dir() && depth < MAX_DEPTH => folders.push((path, depth + 1)),
                Ok(kind) if kind.is_file() && path.extension().is_some_and(|ext| ext == "rs") => {
                    let generated_for = first_line(&path);
                    let rev = generated_for.as_deref().and_then(crate::revisions::rev_of_header);
                    if rev.is_some_and(|rev| rev.starts_with(prefix)) {
                        return Generated::read(&path);
                    }
                }
                _ => {}
            }
        }
    }
    None
}

/// The first line of a file (reading at most 256 bytes).
fn first_line(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let read = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let text = String::from_utf8_lossy(&head[..read]);
    Some(text.lines().next().unwrap_or_default().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(checked: &Checked) -> Vec<&'static str> {
        checked.diagnostics.iter().map(|d| d.code.as_str()).collect()
    }

    fn client(rev: &str) -> String {
        format!(
            "---\nname: offers\nid: offers\ndescription: d\nversion: 0.1.0\nkind: client\ntransport: stdio\nmetadata:\n  aip44:\n    acp_rev: {rev}\n    tier: governance-aware\n    capabilities:\n      client:\n        fs:\n          writeTextFile: true\n        terminal: true\n---\n"
        )
    }

    /// ACP214 reads the revision's methods from a built-in table or a generated module; an
    /// unknown revision, or a module whose table cannot be read, is not guessed at.
    #[test]
    fn a_client_capability_is_checked_against_the_pinned_revisions_methods() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("offers");
        std::fs::create_dir_all(folder.join("src")).unwrap();
        let path = folder.join("ACP.md");

        let built_in = check_bytes(&path, client("0fc18323").as_bytes());
        assert_eq!(codes(&built_in), Vec::<&str>::new(), "every built-in revision has them");

        let unknown = check_bytes(&path, client("abcdef1").as_bytes());
        assert_eq!(codes(&unknown), ["ACP400"], "an unknown revision: no guess");

        let sha = "abcdef1000000000000000000000000000000000";
        let module = |methods: &str| {
            format!(
                "{}\npub const PROTOCOL_VERSION: u16 = 1u16;\npub const METHODS: &[__s::MethodInfo] = &[{methods}];\n",
                crate::revisions::header(sha)
            )
        };
        let entry = |name: &str| {
            format!("__s::MethodInfo {{ name: \"{name}\", side: __s::Side::Client, params: \"P\", result: None }},")
        };
        std::fs::write(folder.join("src/acp_wire.rs"), module(&entry("fs/write_text_file"))).unwrap();
        let without_terminal = check_bytes(&path, client("abcdef1").as_bytes());
        assert_eq!(codes(&without_terminal), ["ACP214"]);
        let diagnostic = &without_terminal.diagnostics[0];
        assert_eq!(
            without_terminal.document.source.position(diagnostic.span.start).line,
            16
        );
        assert!(
            diagnostic.message.contains("`terminal/create`"),
            "{}",
            diagnostic.message
        );
        assert!(diagnostic.message.contains("`abcdef1`"), "{}", diagnostic.message);

        let all = [
            "fs/write_text_file",
            "terminal/create",
            "terminal/output",
            "terminal/wait_for_exit",
            "terminal/kill",
            "terminal/release",
        ];
        std::fs::write(folder.join("src/acp_wire.rs"), module(&all.map(entry).concat())).unwrap();
        assert_eq!(
            codes(&check_bytes(&path, client("abcdef1").as_bytes())),
            Vec::<&str>::new()
        );

        std::fs::write(
            folder.join("src/acp_wire.rs"),
            format!("{}\nnot rust {{\n", crate::revisions::header(sha)),
        )
        .unwrap();
        assert_eq!(
            codes(&check_bytes(&path, client("abcdef1").as_bytes())),
            Vec::<&str>::new(),
            "an unreadable table is not a finding"
        );
    }

    /// ACP216: a `metadata.agentacp` part is checked against the pinned revision's agent-side
    /// methods (and `commands` against its `AvailableCommandsUpdate`), read from its module.
    #[test]
    fn a_declared_part_is_checked_against_the_pinned_revision() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("offers");
        std::fs::create_dir_all(folder.join("src")).unwrap();
        let path = folder.join("ACP.md");
        std::fs::write(
            folder.join("OPERATOR.md"),
            "---\nname: O\nid: o\npersona_summary: p\nversion: 0.1.0\nprofile:\n  role: r\n---\n",
        )
        .unwrap();
        let server = |rev: &str| {
            format!(
                "---\nname: offers\nid: offers\ndescription: d\nversion: 0.1.0\nkind: server\ntransport: stdio\nmetadata:\n  aip44:\n    acp_rev: {rev}\n    tier: basic\n    operator: ./OPERATOR.md\n  agentacp:\n    sessions:\n      list: true\n      close: false\n    modes:\n      default: ask\n      available:\n        - id: ask\n          name: Ask\n    commands:\n      - name: review\n        description: Review\n---\n"
            )
        };
        assert_eq!(
            codes(&check_bytes(&path, server("0fc18323").as_bytes())),
            Vec::<&str>::new(),
            "the built-in revisions have all of it"
        );
        let sha = "abcdef1000000000000000000000000000000000";
        let entry = |name: &str| {
            format!("__s::MethodInfo {{ name: \"{name}\", side: __s::Side::Agent, params: \"P\", result: None }},")
        };
        // A v0.x revision: `session/set_mode`, no `session/list`, no commands update.
        std::fs::write(
            folder.join("src/acp_wire.rs"),
            format!(
                "{}\npub const PROTOCOL_VERSION: u16 = 1u16;\npub const METHODS: &[__s::MethodInfo] = &[{}];\n",
                crate::revisions::header(sha),
                ["session/new", "session/prompt", "session/set_mode"]
                    .map(entry)
                    .concat()
            ),
        )
        .unwrap();
        let old = check_bytes(&path, server("abcdef1").as_bytes());
        assert_eq!(codes(&old), ["ACP216", "ACP216"], "{:?}", old.diagnostics);
        let line = |d: &Diagnostic| old.document.source.position(d.span.start).line;
        assert_eq!((line(&old.diagnostics[0]), line(&old.diagnostics[1])), (15, 22));
        assert!(
            old.diagnostics[0].message.contains("`session/list`"),
            "{}",
            old.diagnostics[0].message
        );
        assert!(
            old.diagnostics[0].message.contains("`abcdef1`"),
            "{}",
            old.diagnostics[0].message
        );
        assert!(
            old.diagnostics[1].message.contains("available_commands_update"),
            "{}",
            old.diagnostics[1].message
        );
    }
}
