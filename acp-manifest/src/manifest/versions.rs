//! The protocol versions a manifest speaks (`metadata.agentacp.protocol_versions`) against the
//! revision it pins: ACP402 (version 2 listed, but the pinned commit has no built-in
//! version-2 wire types), ACP403 (the operator's wire types are not protocol version 1) and
//! ACP219 (a capability or part of the surface that protocol version 2 does not have).
//!
//! The operator's code is always typed by version-1 wire types, the runtime's own terms; a
//! connection that negotiates version 2 is translated at the connection, with the wire types
//! of the pinned commit's version-2 schema ([`revisions::KNOWN_V2`]).

use crate::diagnostic::{Code, Diagnostic};
use crate::revisions::{self, Generated, Revision};
use crate::yaml::{Node, Value};

/// `metadata.agentacp.protocol_versions` where it is a well-formed list of numbers (the schema
/// reports any other shape), else the default `[1]`, each with its node when written.
fn listed(root: &Node) -> Vec<(u16, Option<&Node>)> {
    let Some(Value::Sequence(items)) = root
        .get_at(&["metadata", "agentacp", "protocol_versions"])
        .map(|n| &n.value)
    else {
        return vec![(1, None)];
    };
    items
        .iter()
        .filter_map(|item| match &item.value {
            Value::Number(number) => Some((u16::try_from(number.as_u64()?).ok()?, Some(item))),
            _ => None,
        })
        .collect()
}

/// Whether the manifest lists protocol version 2 (for the rules that depend on it).
pub fn speaks_v2(root: &Node) -> bool {
    listed(root).iter().any(|(version, _)| *version == 2)
}

/// What each part of the manifest that protocol version 2 does not have becomes there: the
/// path under `metadata`, whether it counts only when `true`, and the help.
const NOT_IN_V2: &[(&[&str], bool, &str, &str)] = &[
    (
        &["aip44", "capabilities", "client", "fs", "readTextFile"],
        true,
        "`fs/read_text_file`",
        "protocol version 2 has no client file system: give the agent file access through an MCP server the client passes in `session/new` (`mcpServers`)",
    ),
    (
        &["aip44", "capabilities", "client", "fs", "writeTextFile"],
        true,
        "`fs/write_text_file`",
        "protocol version 2 has no client file system: give the agent file access through an MCP server the client passes in `session/new` (`mcpServers`), and report changes as `diff` tool-call content",
    ),
    (
        &["aip44", "capabilities", "client", "terminal"],
        true,
        "`terminal/*`",
        "protocol version 2 has no client terminals: run commands through an MCP server the client passes, or in the agent, showing their output as an agent-owned terminal (`terminal_update`)",
    ),
    (
        &["aip44", "capabilities", "agent", "mcpCapabilities", "sse"],
        true,
        "MCP servers over SSE",
        "protocol version 2 removed the SSE MCP transport: use `mcpCapabilities.http`",
    ),
    (
        &["agentacp", "modes"],
        false,
        "`session/set_mode` and `current_mode_update`",
        "protocol version 2 has no session modes: declare the modes as a `select` config option with `category: mode` in `metadata.agentacp.configOptions`",
    ),
];

/// Runs the protocol-version rules. `revision` / `generated`: the pin `acp_rev` resolved to
/// (a built-in version-1 revision, or a module `regen` wrote beside the manifest).
pub fn check(root: &Node, revision: Option<&Revision>, generated: Option<&Generated>, out: &mut Vec<Diagnostic>) {
    pinned_module_is_v1(root, generated, out);
    let listed = listed(root);
    let Some((_, node)) = listed.iter().find(|(version, _)| *version == 2) else {
        return;
    };
    let span = node.map(|n| n.span.clone());
    let sha = revision.map(|r| r.sha).or(generated.map(|g| g.sha.as_str()));
    if let (Some(sha), Some(span)) = (sha, span)
        && revisions::v2_of(sha).is_none()
    {
        let built_in: Vec<String> = revisions::KNOWN_V2
            .iter()
            .map(|r| {
                format!(
                    "`acp_rev: {}` ({}, with agentacp's cargo feature `v2`)",
                    &r.sha[..8],
                    r.label
                )
            })
            .collect();
        out.push(
            Diagnostic::new(
                Code::ProtocolVersionNotInRevision,
                span,
                format!(
                    "protocol version 2 is listed, but ACP revision `{}` has no built-in version-2 wire types",
                    &sha[..sha.len().min(8)]
                ),
            )
            .with_help(format!(
                "version 2 is spoken with the wire types of the pinned commit's v2 schema; pin a commit that has them: {}",
                built_in.join(", ")
            )),
        );
    }
    let Some(metadata) = root.get("metadata") else { return };
    for (path, only_true, what, help) in NOT_IN_V2 {
        let Some(entry) = metadata.entry_at(path) else { continue };
        if *only_true && !matches!(entry.value.value, Value::Bool(true)) {
            continue;
        }
        out.push(
            Diagnostic::new(
                Code::NotInProtocolVersion2,
                entry.key_span.clone(),
                format!(
                    "`metadata.{}` needs {what}, which ACP protocol version 2 does not have, and `protocol_versions` lists 2",
                    path.join(".")
                ),
            )
            .with_help(*help),
        );
    }
}

/// ACP403: a module `regen` generated beside the manifest whose `PROTOCOL_VERSION` is not 1
/// cannot type the operator's code.
fn pinned_module_is_v1(root: &Node, generated: Option<&Generated>, out: &mut Vec<Diagnostic>) {
    let Some((generated, version)) = generated.and_then(|g| Some((g, g.protocol_version?))) else {
        return;
    };
    let Some(node) = root.get_at(&["metadata", "aip44", "acp_rev"]).filter(|_| version != 1) else {
        return;
    };
    let file = generated.path.file_name().map(|f| f.to_string_lossy().into_owned());
    out.push(
        Diagnostic::new(
            Code::WireNotProtocolVersion1,
            node.span.clone(),
            format!(
                "the wire types `acp_rev` pins ({}) speak protocol version {version}; an operator's code is typed by protocol-version-1 wire types",
                file.unwrap_or_default()
            ),
        )
        .with_help(
            "generate the commit's v1 schema (`schema/v1`) into the crate instead, and list 2 in `metadata.agentacp.protocol_versions` to speak version 2 too",
        ),
    );
}
