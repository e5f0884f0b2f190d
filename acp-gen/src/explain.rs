//! What a checked manifest means: the `initialize` message it leads to, its tier, the refs
//! it resolves to, and how the operator lifecycle (AIP-9) shows up on the wire (AIP-44).

use serde::Serialize;
use serde_json::{Value, json};

use crate::manifest::{Checked, EffectiveCapabilities, Kind, Manifest, Tier};
use crate::render::display_path;
use crate::revisions::Revision;

/// One row of the lifecycle → ACP mapping.
#[derive(Debug, Clone, Serialize)]
pub struct LifecycleRow {
    /// The AIP-9 operator state.
    pub state: &'static str,
    /// The ACP signal that carries it.
    pub signal: &'static str,
    /// Whether the manifest's tier can reach this state.
    pub available: bool,
}

/// The lifecycle → ACP mapping at `tier`.
pub fn lifecycle(tier: Tier) -> Vec<LifecycleRow> {
    let governed = tier.is_governed();
    let row = |state, signal, available| LifecycleRow {
        state,
        signal,
        available,
    };
    vec![
        row("invoked", "session/new response", true),
        row("running (text)", "session/update agent_message_chunk", true),
        row(
            "running (tool call)",
            "session/update tool_call / tool_call_update",
            governed,
        ),
        row(
            "suspended (governance)",
            "tool_call pending + session/request_permission",
            governed,
        ),
        row("resumed", "permission outcome received", governed),
        row(
            "completed",
            "final session/update, then session/prompt result end_turn",
            true,
        ),
        row(
            "interrupted",
            "stopReason cancelled, or an error response to the prompt",
            true,
        ),
    ]
}

/// Everything `scaffold-aip explain` reports.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// `name`.
    pub name: String,
    /// `kind`.
    pub kind: Kind,
    /// `tier`.
    pub tier: Tier,
    /// The full SHA `acp_rev` resolved to.
    pub acp_rev: String,
    /// What that revision is.
    pub revision_label: String,
    /// The ACP protocol version spoken.
    pub protocol_version: u16,
    /// Transports.
    pub transport: Vec<String>,
    /// The effective capabilities.
    pub capabilities: EffectiveCapabilities,
    /// The `initialize` result a server/bridge answers with (`null` for a client).
    pub initialize_response: Value,
    /// The `initialize` params a client/bridge sends (`null` for a server).
    pub initialize_request: Value,
    /// The refs and the files they resolved to.
    pub refs: Vec<Value>,
    /// The lifecycle → ACP mapping.
    pub lifecycle: Vec<LifecycleRow>,
}

/// Explains a manifest that checked without errors; `None` otherwise.
pub fn explain(checked: &Checked) -> Option<Explanation> {
    let manifest = checked.manifest.as_ref()?;
    let revision = checked.revision?;
    let capabilities = EffectiveCapabilities::of(manifest);
    let tier = manifest.metadata.aip44.tier;
    Some(Explanation {
        name: manifest.name.clone(),
        kind: manifest.kind,
        tier,
        acp_rev: revision.sha.to_string(),
        revision_label: revision.label.to_string(),
        protocol_version: revision.protocol_version,
        transport: manifest
            .transport
            .to_vec()
            .iter()
            .map(|t| t.as_str().to_string())
            .collect(),
        capabilities,
        initialize_response: capabilities.agent_capabilities.map_or(Value::Null, |agent| {
            json!({
                "protocolVersion": revision.protocol_version,
                "agentCapabilities": agent,
                "authMethods": [],
                "agentInfo": implementation(manifest),
                "_meta": meta(manifest, revision),
            })
        }),
        initialize_request: capabilities.client_capabilities.map_or(Value::Null, |client| {
            json!({
                "protocolVersion": revision.protocol_version,
                "clientCapabilities": client,
                "clientInfo": implementation(manifest),
                "_meta": meta(manifest, revision),
            })
        }),
        refs: checked
            .refs
            .iter()
            .map(|r| {
                json!({
                    "role": r.role,
                    "ref": r.written,
                    "path": display_path(&r.path),
                    "doctype": r.doctype,
                })
            })
            .collect(),
        lifecycle: lifecycle(tier),
    })
}

fn implementation(manifest: &Manifest) -> Value {
    json!({"name": manifest.id, "title": manifest.name, "version": manifest.version})
}

fn meta(manifest: &Manifest, revision: Revision) -> Value {
    json!({"aip44": {"acp_rev": revision.sha, "tier": manifest.metadata.aip44.tier}})
}

impl Explanation {
    /// The human-readable report.
    pub fn to_text(&self) -> String {
        let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
        let mut out = format!(
            "{} — kind: {}, tier: {}\nacp_rev: {} ({}), protocol version {}\ntransport: {}\n",
            self.name,
            self.kind.as_str(),
            self.tier.as_str(),
            self.acp_rev,
            self.revision_label,
            self.protocol_version,
            self.transport.join(", "),
        );
        if !self.initialize_response.is_null() {
            out += &format!(
                "\ninitialize result (this runtime answers as the agent):\n{}\n",
                pretty(&self.initialize_response)
            );
        }
        if !self.initialize_request.is_null() {
            out += &format!(
                "\ninitialize params (this runtime sends as the client):\n{}\n",
                pretty(&self.initialize_request)
            );
        }
        out += "\nrefs:\n";
        if self.refs.is_empty() {
            out += "  (none)\n";
        }
        for r in &self.refs {
            let field = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("-").to_string();
            out += &format!(
                "  {:<11} {} -> {} ({})\n",
                field("role"),
                field("ref"),
                field("path"),
                field("doctype")
            );
        }
        out += "\nlifecycle -> ACP:\n";
        for row in &self.lifecycle {
            let note = if row.available {
                String::new()
            } else {
                format!("   [not at tier {}]", self.tier.as_str())
            };
            out += &format!("  {:<24} {}{}\n", row.state, row.signal, note);
        }
        out
    }
}
