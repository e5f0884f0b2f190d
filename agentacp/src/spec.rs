//! The manifest as the runtime sees it: the [`OperatorSpec`] `#[acp_operator]` reads from an
//! `ACP.md` at compile time, shared by servers, clients and bridges.

use serde_json::Value;

use serde_json::json;

use crate::audit::{AuditError, AuditLog, FsyncPolicy};
use crate::error::{Error, Result};
use crate::methods::{AgentCapabilities, ClientMethods, ElicitationModes, client_capabilities_json, elicitation_json};

/// The tool name (and method) of a file read through the editor.
pub const READ_TEXT_FILE: &str = "fs/read_text_file";
/// The tool name (and method) of a file write through the editor.
pub const WRITE_TEXT_FILE: &str = "fs/write_text_file";
/// The tool name of a command run in the editor's terminal (`terminal/create` and the
/// follow-up `terminal/*` requests of that run).
pub const TERMINAL: &str = "terminal/create";
/// The tool name (and method) governance decides an agent's question to the user by
/// (`elicitation/create`, crossing a bridge).
pub const ELICITATION_TOOL: &str = "elicitation/create";
// (Each is its capability's `tool()` in the method table; `tests::tool_names_are_the_tables`.)

/// Where the manifest sends audit records (`metadata.aip44.audit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditTarget {
    /// `kind: off`: no audit (only below governance-aware).
    Off,
    /// `kind: governance` (the default): the governance binding's log, kept in the state
    /// folder; `channel` is the operator's `governance.audit_log` (`audit:<name>`), if any.
    Governance {
        /// The AIP-9 audit channel.
        channel: Option<&'static str>,
    },
    /// `kind: external`: the file named by `audit.ref`: absolute as written, or relative to
    /// the state folder, resolved when the operator runs (not where it was built).
    External {
        /// The path, absolute or relative to the state folder.
        path: &'static str,
    },
}

/// The manifest's `kind`: the role the operator plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperatorKind {
    /// `kind: server`: an ACP agent the editor talks to.
    Server,
    /// `kind: client`: drives an ACP agent.
    Client,
    /// `kind: bridge`: an agent upstream, a client downstream.
    Bridge,
}

impl OperatorKind {
    /// The name the manifest writes.
    pub const fn as_str(self) -> &'static str {
        match self {
            OperatorKind::Server => "server",
            OperatorKind::Client => "client",
            OperatorKind::Bridge => "bridge",
        }
    }
}

impl std::fmt::Display for OperatorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The ids of the manifest's AIP-44 bindings that `initialize` names in `_meta.aip44`: each the
/// id its own AIP gives the bound document (never a path).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bindings {
    /// The AIP-9 operator's `id`.
    pub operator: Option<&'static str>,
    /// The AIP-7 policy's `slug` or workspace manifest's `name`.
    pub governance: Option<&'static str>,
    /// The AIP-36 sandbox's `id`.
    pub sandbox: Option<&'static str>,
}

/// Everything the runtime needs from the manifest, fixed at compile time.
#[derive(Debug, Clone, Copy)]
pub struct OperatorSpec {
    /// Where the manifest was read from.
    pub manifest_path: &'static str,
    /// `name`.
    pub name: &'static str,
    /// `id` (also `agentInfo.name` and the default state folder's name).
    pub id: &'static str,
    /// `version`.
    pub version: &'static str,
    /// `metadata.aip44.tier`: the [`Tier::NAME`](crate::tier::Tier::NAME) of the operator's
    /// tier type, so the name and the type cannot disagree.
    pub tier: &'static str,
    /// The full SHA of the pinned ACP revision.
    pub acp_rev: &'static str,
    /// The ACP protocol version that revision speaks.
    pub protocol_version: u16,
    /// `kind`.
    pub kind: OperatorKind,
    /// The agent capabilities a server or bridge advertises at `initialize` (tier defaults,
    /// then the manifest's `capabilities.agent`); `None` for a client.
    pub agent: Option<AgentCapabilities>,
    /// The client capabilities a client or bridge advertises at `initialize` (the manifest's
    /// `capabilities.client`); `None` for a server, whose `capabilities.client` is
    /// [`Self::editor`] instead.
    pub client: Option<ClientMethods>,
    /// The bindings `_meta.aip44` names at `initialize`.
    pub bindings: Bindings,
    /// The AIP-9 operator document's frontmatter, as JSON.
    pub operator: Option<&'static str>,
    /// The AIP-7 governance document's frontmatter, as JSON.
    pub governance: Option<&'static str>,
    /// The AIP-36 sandbox document's frontmatter, as JSON.
    pub sandbox: Option<&'static str>,
    /// Where audit records go.
    pub audit: AuditTarget,
    /// The editor's client methods the operator may call (servers only).
    pub editor: ClientMethods,
    /// The AIP-7 policies the operator lists (`governance.policies`), resolved at build time
    /// through the workspace manifest's registry: one JSON object each,
    /// `{"ref": "policy:<slug>", "appliesTo": <registry binding or null>, "policy": <frontmatter>}`.
    pub policies: &'static [&'static str],
    /// The session surface the manifest declares in `metadata.agentacp` (modes, config
    /// options, commands, extension methods); servers only.
    pub surface: crate::surface::Surface,
    /// Whether the manifest's `transport` lists `websocket` (the operator may then be served,
    /// or a bridge may listen, over WebSocket).
    pub websocket: bool,
    /// The elicitation modes a client or a bridge declares (`metadata.agentacp.elicitation`):
    /// what a bridge lets through of the editor's `clientCapabilities.elicitation`, and
    /// `elicitation/create` counted as a listed tool of its governance. A server declares none:
    /// it asks through `Turn::elicit` when its client offers the mode.
    pub elicitation: ElicitationModes,
    /// The ACP protocol versions the endpoint serves (the manifest's
    /// `metadata.agentacp.protocol_versions`; `[1]` by default): each connection is served in
    /// the one its client asks for when listed, else the latest (`dialect::negotiate`).
    pub protocol_versions: &'static [u16],
}

impl OperatorSpec {
    /// The optional session methods advertised (`agentCapabilities.sessionCapabilities`, from
    /// the manifest's `metadata.agentacp.sessions`).
    pub fn sessions(&self) -> crate::methods::SessionCapabilities {
        self.agent.map(|agent| agent.session_capabilities).unwrap_or_default()
    }

    /// Whether sessions outlive the connection (kept in the state folder): `session/load`,
    /// `session/list`, `session/resume` or `session/delete` is advertised.
    pub fn stores_sessions(&self) -> bool {
        let sessions = self.sessions();
        self.load_session() || sessions.list || sessions.resume || sessions.delete
    }

    /// Whether `session/load` is advertised (`agentCapabilities.loadSession`).
    pub fn load_session(&self) -> bool {
        self.agent.is_some_and(|agent| agent.load_session)
    }

    /// The `initialize` result a server or a bridge answers with: `protocolVersion`, the
    /// manifest's `agentCapabilities`, `agentInfo` and `_meta.aip44`, with the revision of the
    /// wire module the operator is compiled against ([`Self::protocol_version`],
    /// [`Self::acp_rev`]: a built-in revision's, or a `wire = path` module's). `null` for a
    /// client. The one place the runtime builds it; `scaffold-aip explain` prints the same
    /// (`tests/initialize_matches_explain.rs`).
    pub fn initialize_result(&self) -> Value {
        self.agent.map_or(Value::Null, |agent| {
            json!({
                "protocolVersion": self.protocol_version,
                "agentCapabilities": agent,
                "authMethods": self.surface.sign_in.iter().map(crate::surface::SignIn::to_json).collect::<Vec<_>>(),
                "agentInfo": self.implementation(),
                "_meta": self.meta(),
            })
        })
    }

    /// The `initialize` params a client or a bridge sends, built like
    /// [`Self::initialize_result`]; `null` for a server.
    pub fn initialize_params(&self) -> Value {
        self.client.map_or(Value::Null, |client| {
            let mut capabilities = client_capabilities_json(client);
            if let Some(elicitation) = elicitation_json(self.elicitation) {
                capabilities["elicitation"] = elicitation;
            }
            json!({
                "protocolVersion": self.protocol_version,
                "clientCapabilities": capabilities,
                "clientInfo": self.implementation(),
                "_meta": self.meta(),
            })
        })
    }

    /// `agentInfo` / `clientInfo`: the manifest's id, name and version.
    fn implementation(&self) -> Value {
        json!({"name": self.id, "title": self.name, "version": self.version})
    }

    /// `_meta` at `initialize`: the revision, the tier and the bindings' ids.
    fn meta(&self) -> Value {
        let mut aip44 = serde_json::Map::new();
        aip44.insert("acp_rev".into(), self.acp_rev.into());
        aip44.insert("tier".into(), self.tier.into());
        let Bindings {
            operator,
            governance,
            sandbox,
        } = self.bindings;
        for (key, id) in [("operator", operator), ("governance", governance), ("sandbox", sandbox)] {
            if let Some(id) = id {
                aip44.insert(key.into(), id.into());
            }
        }
        json!({ "aip44": aip44 })
    }

    /// The operator's id for audit records: the AIP-9 operator's `id`, else the manifest `id`.
    pub fn operator_id(&self) -> String {
        self.operator
            .and_then(|text| serde_json::from_str::<Value>(text).ok())
            .and_then(|doc| doc.get("id").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| self.id.to_string())
    }

    /// Opens the audit log the manifest asks for: `path` when given, else the target's file
    /// (a governance channel's log is `<state_dir>/<channel>.jsonl`; a relative `audit.ref`
    /// lies in `state_dir` too). The file is logged at `info`. The error names the file (and,
    /// when another process writes it, that process); a torn last line that was recovered is
    /// logged as a warning.
    pub fn open_audit(
        &self,
        path: Option<&std::path::Path>,
        fsync: FsyncPolicy,
        state_dir: &std::path::Path,
    ) -> Result<AuditLog> {
        let Some(path) = self.audit_path(path, state_dir) else {
            return Ok(AuditLog::off());
        };
        let log = AuditLog::open(&path, fsync).map_err(|error| match error {
            // Names the log and who holds it already.
            AuditError::Locked { .. } => Error::Audit(error.to_string()),
            error => Error::Audit(format!("cannot open the audit log {}: {error}", path.display())),
        })?;
        if let Some(recovery) = log.recovery() {
            tracing::warn!(log = %path.display(), %recovery, "recovered the audit log after an interrupted write");
        }
        tracing::info!(operator = self.id, log = %path.display(), "writing the audit log");
        Ok(log)
    }

    /// The audit log's file, as [`open_audit`](Self::open_audit) finds it; `None` when off.
    pub(crate) fn audit_path(
        &self,
        path: Option<&std::path::Path>,
        state_dir: &std::path::Path,
    ) -> Option<std::path::PathBuf> {
        Some(match (path, self.audit) {
            (Some(path), _) => path.to_path_buf(),
            (None, AuditTarget::Off) => return None,
            (None, AuditTarget::External { path }) => state_dir.join(path),
            (None, AuditTarget::Governance { channel }) => state_dir.join(crate::audit::channel_log_name(channel)),
        })
    }

    /// The default governance binding: the manifest's operator and governance documents,
    /// every policy the operator lists, and the editor methods the manifest declares counted
    /// as listed tools (and `elicitation/create` when it declares elicitation).
    pub fn governance(&self) -> crate::governance::ManifestGovernance {
        let document = |text: Option<&str>| text.and_then(|t| serde_json::from_str::<Value>(t).ok());
        let policies: Vec<Value> = self
            .policies
            .iter()
            .filter_map(|text| serde_json::from_str(text).ok())
            .collect();
        crate::governance::ManifestGovernance::from_documents(
            document(self.operator).as_ref(),
            document(self.governance).as_ref(),
        )
        .with_policies(&policies)
        .listing(&self.editor.tools())
        .listing(if self.elicitation.any() {
            &[ELICITATION_TOOL]
        } else {
            &[]
        })
    }

    /// The operator's memory, skills and policies (AIP-9), as typed data.
    pub fn operator_profile(&self) -> crate::governance::OperatorProfile {
        let document = self.operator.and_then(|text| serde_json::from_str::<Value>(text).ok());
        crate::governance::OperatorProfile::from_document(document.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use crate::methods::ClientCapability;

    #[test]
    fn tool_names_are_the_tables() {
        assert_eq!(ClientCapability::ReadTextFile.tool(), super::READ_TEXT_FILE);
        assert_eq!(ClientCapability::WriteTextFile.tool(), super::WRITE_TEXT_FILE);
        assert_eq!(ClientCapability::Terminal.tool(), super::TERMINAL);
    }
}
