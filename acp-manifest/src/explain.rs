//! What a checked manifest means: the `initialize` message it leads to, its tier, the refs
//! it resolves to, and how the operator lifecycle (AIP-9) shows up on the wire (AIP-44).

use serde::Serialize;
use serde_json::{Value, json};

use crate::manifest::{Checked, EffectiveCapabilities, Kind, Tier};
use crate::render::display_path;
use crate::resolved::Resolved;
pub use crate::resolved::WorkspaceRoot;

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

/// Where the operator writes its audit log (`metadata.aip44.audit`), as the runtime finds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditLogRule {
    /// The file without `AGENTACP_AUDIT_LOG`, the state folder written `<state folder>`;
    /// `None` for `audit.kind: off`.
    pub file: Option<String>,
    /// The rule, one step a line, in the order the runtime applies them.
    pub rule: Vec<String>,
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
    /// The ACP protocol version of the wire types the operator's code is written against.
    pub protocol_version: u16,
    /// The protocol versions served, when not just `[1]`: each with what speaks it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_versions: Option<Vec<Value>>,
    /// Transports.
    pub transport: Vec<String>,
    /// The effective capabilities.
    pub capabilities: EffectiveCapabilities,
    /// For a server: the editor's client methods its operator may call, by wire name
    /// (`capabilities.client`; never advertised at `initialize`). `None` for a client or bridge.
    pub editor_methods: Option<Vec<&'static str>>,
    /// For a server: what it declares of the session surface in `metadata.agentacp` (modes,
    /// config options, slash commands, extension methods) as the wire shows it; `None` when it
    /// declares none of them.
    pub session_surface: Option<Value>,
    /// The `initialize` result a server/bridge answers with (`null` for a client).
    pub initialize_response: Value,
    /// The `initialize` params a client/bridge sends (`null` for a server).
    pub initialize_request: Value,
    /// The refs and the files they resolved to.
    pub refs: Vec<Value>,
    /// Which folder session `cwd`s (and the agent's paths) must lie in at run time.
    pub workspace_root: WorkspaceRoot,
    /// Where the audit log is written (a relative `audit.ref` lies in the state folder).
    pub audit_log: AuditLogRule,
    /// For a server: where its sessions and the operator's memory are kept, and where its audit
    /// log and tokens go with a database, one step a line (a deployment setting, not the
    /// manifest's); `None` for a client or bridge.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_store: Option<Vec<String>>,
    /// What the bound SANDBOX.md asks the runtime to enforce (`None` without one); what a
    /// kernel gives is reported by the running server (`_meta.aip44.sandbox_enforcement`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Value>,
    /// The lifecycle → ACP mapping.
    pub lifecycle: Vec<LifecycleRow>,
}

/// Explains a manifest that checked without errors; `None` otherwise (or when its revision's
/// generated module has no readable `PROTOCOL_VERSION`).
pub fn explain(checked: &Checked) -> Option<Explanation> {
    Resolved::of(checked).and_then(|resolved| explain_resolved(&resolved))
}

/// Explains a resolved manifest; `None` when its revision's protocol version is not known
/// here (a `wire =` module the manifest core did not read).
pub fn explain_resolved(resolved: &Resolved) -> Option<Explanation> {
    let manifest = &resolved.manifest;
    let acp_rev = resolved.pin.sha()?;
    let protocol_version = resolved.pin.protocol_version()?;
    let tier = manifest.metadata.aip44.tier;
    Some(Explanation {
        name: manifest.name.clone(),
        kind: manifest.kind,
        tier,
        acp_rev: acp_rev.to_string(),
        revision_label: resolved.pin.label(),
        protocol_version,
        protocol_versions: served_versions(resolved),
        transport: manifest
            .transport
            .to_vec()
            .iter()
            .map(|t| t.as_str().to_string())
            .collect(),
        capabilities: resolved.capabilities,
        editor_methods: resolved.editor.map(|editor| editor.methods()),
        session_surface: session_surface(manifest),
        initialize_response: resolved.initialize_result(acp_rev, protocol_version),
        initialize_request: resolved.initialize_params(acp_rev, protocol_version),
        refs: resolved
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
        workspace_root: resolved.workspace_root.clone(),
        audit_log: AuditLogRule {
            file: resolved.audit.file(),
            rule: resolved.audit.rule(&manifest.id),
        },
        session_store: (manifest.kind == Kind::Server).then(session_store_rule),
        sandbox: resolved.documents.sandbox.as_ref().map(sandbox_asks),
        lifecycle: lifecycle(tier),
    })
}

/// Where a server keeps its sessions and the operator's memory, and with a database its audit
/// chain and tokens too (docs/store.md).
fn session_store_rule() -> Vec<String> {
    vec![
        "files, the default: <state folder>/sessions (an identity's in sessions/identities/<identity>) and <state folder>/memory".into(),
        "PostgreSQL when AGENTACP_DATABASE_URL is set (tables agentacp_sessions, agentacp_session_updates, agentacp_memory): the server must be built with agentacp's feature `postgres`, else it refuses to start".into(),
        "with that database, the audit log is this replica's hash chain <id>@<AGENTACP_REPLICA or host name> there (tables agentacp_audit_records, agentacp_audit_heads) instead of the file above, unless AGENTACP_AUDIT_LOG names a file or the target is off; and AGENTACP_TOKENS=database keeps the bearer tokens there (table agentacp_tokens)".into(),
    ]
}

/// `metadata.agentacp`'s modes, config options, commands and extensions, in wire shapes (the
/// defaults as current values).
fn session_surface(manifest: &crate::manifest::Manifest) -> Option<Value> {
    use crate::manifest::DeclaredConfigOption;
    let surface = manifest
        .metadata
        .agentacp
        .as_ref()
        .filter(|_| manifest.kind == Kind::Server)?;
    let mut out = serde_json::Map::new();
    if let Some(modes) = &surface.modes {
        out.insert(
            "modes".into(),
            json!({"currentModeId": modes.default, "availableModes": modes.available}),
        );
    }
    if let Some(options) = &surface.config_options {
        let options: Vec<Value> = options
            .iter()
            .map(|option| match option {
                DeclaredConfigOption::Select(select) => json!({
                    "id": select.id, "name": select.name, "description": select.description,
                    "category": select.category.map(|c| c.as_str()), "type": "select",
                    "currentValue": select.default, "options": select.options,
                }),
                DeclaredConfigOption::Boolean(boolean) => json!({
                    "id": boolean.id, "name": boolean.name, "description": boolean.description,
                    "category": boolean.category.map(|c| c.as_str()), "type": "boolean",
                    "currentValue": boolean.default,
                }),
            })
            .map(without_nulls)
            .collect();
        out.insert("configOptions".into(), Value::Array(options));
    }
    if let Some(commands) = &surface.commands {
        let commands: Vec<Value> = commands
            .iter()
            .map(|command| {
                let input = command.hint.as_ref().map(|hint| json!({"hint": hint}));
                without_nulls(json!({"name": command.name, "description": command.description, "input": input}))
            })
            .collect();
        out.insert("availableCommands".into(), Value::Array(commands));
    }
    if let Some(extensions) = &surface.extensions {
        out.insert(
            "extensions".into(),
            serde_json::to_value(extensions).unwrap_or_default(),
        );
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

/// What a SANDBOX.md asks for, in the fields the runtime enforces (absent ones as their
/// defaults: no limit, nothing passed through, no egress, enforcement required).
fn sandbox_asks(sandbox: &Value) -> Value {
    let mounts: Vec<Value> = sandbox["mounts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|mount| {
            json!({
                "source": mount["source"],
                "at": mount["at"],
                "mode": mount["mode"].as_str().unwrap_or("read-write"),
            })
        })
        .collect();
    let list = |value: &Value| value.as_array().cloned().unwrap_or_default();
    json!({
        "provider": sandbox["provider"],
        "enforcement": sandbox["metadata"]["agentacp"]["enforcement"].as_str().unwrap_or("required"),
        "mounts": mounts,
        "limits": {
            "timeout_ms": sandbox["limits"]["timeout_ms"],
            "memory_mb": sandbox["limits"]["memory_mb"],
            "cpu_ms": sandbox["limits"]["cpu_ms"],
        },
        "env_passthrough": list(&sandbox["env"]["passthrough"]),
        "egress": list(&sandbox["network"]["egress"]),
        "read_only": sandbox["read_only"].as_bool().unwrap_or(false),
    })
}

/// `value` without its object's `null` members.
fn without_nulls(mut value: Value) -> Value {
    if let Some(object) = value.as_object_mut() {
        object.retain(|_, member| !member.is_null());
    }
    value
}

/// `[{"version": 1, "wire": ...}, {"version": 2, "wire": ..., "label": ...}]` for a manifest
/// that serves more than version 1; `None` for the default `[1]`.
fn served_versions(resolved: &Resolved) -> Option<Vec<Value>> {
    if resolved.protocol_versions == [1] {
        return None;
    }
    let v2 = resolved.v2_revision();
    Some(
        resolved
            .protocol_versions
            .iter()
            .map(|&version| match (version, v2) {
                (2, Some(v2)) => json!({
                    "version": 2,
                    "wire": format!("agentacp::wire::{}", v2.module),
                    "label": v2.label,
                    "spoken": "translated at the connection from the operator's version-1 types",
                }),
                (version, _) => json!({"version": version, "spoken": "as the operator's types say"}),
            })
            .collect(),
    )
}

/// The human-readable lines on a server's sign-in methods (`authMethods`); empty without any.
fn sign_in_text(initialize: &Value) -> String {
    let Some(methods) = initialize["authMethods"].as_array().filter(|m| !m.is_empty()) else {
        return String::new();
    };
    let mut out = String::from(
        "\nsign-in (metadata.agentacp.auth; over stdio, every request but initialize and authenticate is refused -32000 until signed in):\n",
    );
    for method in methods {
        let id = method["id"].as_str().unwrap_or_default();
        out += &match method["type"].as_str() {
            Some("terminal") => {
                let args: Vec<&str> = method["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect();
                format!(
                    "  {id} (terminal): the client runs the program with `{}` in a terminal; handler `sign_in`; offered only to clients with auth.terminal (or _meta.terminal-auth)\n",
                    args.join(" ")
                )
            }
            _ => format!("  {id} (agent): the client calls `authenticate`; handler `authenticate`\n"),
        };
    }
    out
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
        for served in self.protocol_versions.iter().flatten() {
            out += &format!("serves protocol version {}", served["version"]);
            if let (Some(wire), Some(label)) = (served["wire"].as_str(), served["label"].as_str()) {
                out += &format!(" ({label}, {wire}, translated at the connection)");
            }
            out += "\n";
        }
        if !self.initialize_response.is_null() {
            out += &format!(
                "\ninitialize result (this runtime answers as the agent):\n{}\n",
                pretty(&self.initialize_response)
            );
        }
        out += &sign_in_text(&self.initialize_response);
        if !self.initialize_request.is_null() {
            out += &format!(
                "\ninitialize params (this runtime sends as the client):\n{}\n",
                pretty(&self.initialize_request)
            );
        }
        if let Some(methods) = &self.editor_methods {
            out += "\neditor methods the operator may call (capabilities.client; not advertised at initialize):\n";
            if methods.is_empty() {
                out += "  (none)\n";
            }
            for method in methods {
                out += &format!("  {method}\n");
            }
        }
        if let Some(surface) = &self.session_surface {
            out += &format!(
                "\nsession surface (metadata.agentacp; sent in session/new, load and resume answers and updates):\n{}\n",
                pretty(surface)
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
        out += "\nworkspace root (session cwds must lie inside it):\n";
        for line in &self.workspace_root.rule {
            out += &format!("  - {line}\n");
        }
        out += "\naudit log (found when the operator runs, not where it was built):\n";
        for line in &self.audit_log.rule {
            out += &format!("  - {line}\n");
        }
        if let Some(store) = &self.session_store {
            out += "\nsession store (a deployment setting, not the manifest's):\n";
            for line in store {
                out += &format!("  - {line}\n");
            }
        }
        if let Some(sandbox) = &self.sandbox {
            out += &sandbox_text(sandbox);
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

/// The sandbox section of the human report.
fn sandbox_text(sandbox: &Value) -> String {
    let show = |value: &Value| match value {
        Value::Null => "none".to_string(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let names = |value: &Value| {
        let names: Vec<String> = value.as_array().into_iter().flatten().map(show).collect();
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    };
    let mut out = format!(
        "\nsandbox (SANDBOX.md asks; enforcement {}: a restriction the kernel cannot enforce {}):\n  provider: {}\n",
        show(&sandbox["enforcement"]),
        if sandbox["enforcement"] == "best-effort" {
            "is reported as a gap"
        } else {
            "stops the server at start"
        },
        show(&sandbox["provider"]),
    );
    for mount in sandbox["mounts"].as_array().into_iter().flatten() {
        out += &format!(
            "  mount: {} at {} ({})\n",
            show(&mount["source"]),
            show(&mount["at"]),
            show(&mount["mode"])
        );
    }
    let limits = &sandbox["limits"];
    out += &format!(
        "  limits: timeout_ms {}, memory_mb {}, cpu_ms {}\n  env passed through: {}\n  network egress: {}\n",
        show(&limits["timeout_ms"]),
        show(&limits["memory_mb"]),
        show(&limits["cpu_ms"]),
        names(&sandbox["env_passthrough"]),
        names(&sandbox["egress"]),
    );
    if sandbox["read_only"] == true {
        out += "  read_only: commands are refused\n";
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::check_file;

    const OPERATOR: &str = "---\nname: Helper\nid: helper-op\npersona_summary: p\nversion: 0.1.0\nprofile: {role: r}\ngovernance:\n  autonomy: supervised\n---\n";

    /// Writes `files` (the manifest first, as `<name>/ACP.md`) into a fresh folder and explains
    /// the manifest, which must be clean.
    fn explained(name: &str, files: &[(&str, &str)]) -> Explanation {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join(name);
        for (path, text) in files {
            let path = folder.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let checked = check_file(&folder.join("ACP.md")).unwrap();
        assert!(!checked.has_errors(), "{:?}", checked.diagnostics);
        explain(&checked).expect("a clean manifest is explained")
    }

    fn server(name: &str, tier: &str, extra: &str) -> String {
        format!(
            "---\nname: {name}\nid: {name}\ndescription: d\nversion: 0.1.0\nkind: server\ntransport: stdio\nmetadata:\n  aip44:\n    acp_rev: 0fc18323\n    tier: {tier}\n    operator: ./OPERATOR.md\n{extra}---\n"
        )
    }

    #[test]
    fn a_server_lists_the_editor_methods_its_operator_may_call_and_does_not_advertise_them() {
        let caps =
            "    capabilities:\n      client:\n        fs:\n          readTextFile: true\n        terminal: true\n";
        let explanation = explained(
            "editor",
            &[
                ("ACP.md", &server("editor", "governance-aware", caps)),
                ("OPERATOR.md", OPERATOR),
            ],
        );
        assert_eq!(
            explanation.editor_methods.as_deref(),
            Some(
                &[
                    "fs/read_text_file",
                    "terminal/create",
                    "terminal/output",
                    "terminal/wait_for_exit",
                    "terminal/kill",
                    "terminal/release"
                ][..]
            )
        );
        assert!(explanation.initialize_response.get("clientCapabilities").is_none());
        assert!(explanation.initialize_request.is_null(), "a server sends no initialize");
        let text = explanation.to_text();
        assert!(
            text.contains("editor methods the operator may call (capabilities.client; not advertised at initialize):\n  fs/read_text_file\n  terminal/create\n"),
            "{text}"
        );
        assert!(!text.contains("fs/write_text_file"), "{text}");

        let without = explained(
            "plain",
            &[
                ("ACP.md", &server("plain", "governance-aware", "")),
                ("OPERATOR.md", OPERATOR),
            ],
        );
        assert_eq!(without.editor_methods.as_deref(), Some(&[][..]));
        assert!(
            without
                .to_text()
                .contains("operator may call (capabilities.client; not advertised at initialize):\n  (none)\n")
        );
    }

    #[test]
    fn a_client_has_no_editor_methods_its_client_capabilities_are_advertised() {
        let client = "---\nname: drives\nid: drives\ndescription: d\nversion: 0.1.0\nkind: client\ntransport: stdio\nmetadata:\n  aip44:\n    acp_rev: 0fc18323\n    tier: governance-aware\n    capabilities:\n      client:\n        terminal: true\n---\n";
        let explanation = explained("drives", &[("ACP.md", client)]);
        assert_eq!(explanation.editor_methods, None);
        assert_eq!(explanation.initialize_request["clientCapabilities"]["terminal"], true);
        assert!(!explanation.to_text().contains("editor methods"));
    }

    #[test]
    fn meta_names_the_bindings_ids_and_never_a_path() {
        let refs = "    governance: ./gov/GOVERNANCE.md\n    sandbox: ./SANDBOX.md\n";
        let explanation = explained(
            "bound",
            &[
                ("ACP.md", &server("bound", "sandboxed", refs)),
                ("OPERATOR.md", OPERATOR),
                (
                    "gov/GOVERNANCE.md",
                    "---\nschema: agentgovernance/v1\ndoctype: policy\nslug: ask-first\nversion: 0.1.0\nmatch: {action: tool.call}\ndecision: require-approval\n---\n",
                ),
                (
                    "SANDBOX.md",
                    "---\nid: box-1\nprovider: container\nconfig: {image: rust}\nmounts:\n  - {source: workspace, at: /workspace}\n---\n",
                ),
            ],
        );
        let meta = &explanation.initialize_response["_meta"];
        assert_eq!(
            meta,
            &json!({"aip44": {
                "acp_rev": "0fc18323a9fdad4e5b4a20ec2f1645dde843fd9b",
                "tier": "sandboxed",
                "operator": "helper-op",
                "governance": "ask-first",
                "sandbox": "box-1",
            }})
        );
        assert!(!meta.to_string().contains(".md"), "{meta}");
    }

    #[test]
    fn meta_leaves_out_bindings_without_an_id() {
        let workspace =
            "---\nschema: governance.workspace/v1\nname: review-space\ntitle: t\ndescription: d\nversion: 0.1.0\n---\n";
        let explanation = explained(
            "loose",
            &[
                (
                    "ACP.md",
                    &server(
                        "loose",
                        "sandboxed",
                        "    governance: ./GOVERNANCE.md\n    sandbox: ./SANDBOX.md\n",
                    ),
                ),
                // An operator `id` that is a path is not sent.
                ("OPERATOR.md", &OPERATOR.replace("id: helper-op", "id: /home/me/op")),
                ("GOVERNANCE.md", workspace),
                ("SANDBOX.md", "---\nprovider: container\nconfig: {image: rust}\n---\n"),
            ],
        );
        assert_eq!(
            explanation.initialize_response["_meta"],
            json!({"aip44": {
                "acp_rev": "0fc18323a9fdad4e5b4a20ec2f1645dde843fd9b",
                "tier": "sandboxed",
                "governance": "review-space",
            }})
        );
    }

    #[test]
    fn the_workspace_root_rule_is_the_runtimes() {
        let plain = explained(
            "plain",
            &[
                ("ACP.md", &server("plain", "governance-aware", "")),
                ("OPERATOR.md", OPERATOR),
            ],
        );
        assert_eq!(plain.workspace_root.sandbox_mount, None);
        let text = plain.to_text();
        assert!(
            text.contains(
                "  - AGENTACP_WORKSPACE_ROOT, when set\n  - else $HOME\n  - else no root: every session is refused\n"
            ),
            "{text}"
        );

        let sandboxed = explained(
            "boxed",
            &[
                ("ACP.md", &server("boxed", "sandboxed", "    sandbox: ./SANDBOX.md\n")),
                ("OPERATOR.md", OPERATOR),
                (
                    "SANDBOX.md",
                    "---\nprovider: container\nconfig: {image: rust}\nmounts:\n  - {source: cache, at: /cache}\n  - {source: workspace, at: /srv/work}\n---\n",
                ),
            ],
        );
        assert_eq!(sandboxed.workspace_root.sandbox_mount.as_deref(), Some("/srv/work"));
        let text = sandboxed.to_text();
        assert!(text.contains("the sandbox's workspace mount `/srv/work`"), "{text}");
        assert!(
            text.contains("AGENTACP_WORKSPACE_ROOT may only narrow it to a folder inside `/srv/work`, never widen it"),
            "{text}"
        );
        assert!(!text.contains("else $HOME"), "{text}");
    }

    /// Issue #45.5: a relative `audit.ref` is a file in the state folder, resolved when the
    /// operator runs (it pointed into the folder the manifest was built in); `explain` says
    /// where. An absolute one stays as written.
    #[test]
    fn a_relative_audit_ref_lies_in_the_state_folder() {
        let external = |reference: &str| {
            let audit = format!("    audit:\n      kind: external\n      ref: {reference}\n");
            explained(
                "logged",
                &[
                    ("ACP.md", &server("logged", "governance-aware", &audit)),
                    ("OPERATOR.md", OPERATOR),
                ],
            )
        };
        let relative = external("./audit/logged.jsonl");
        assert_eq!(
            relative.audit_log.file.as_deref(),
            Some("<state folder>/audit/logged.jsonl")
        );
        let text = relative.to_text();
        for line in [
            "  - AGENTACP_AUDIT_LOG, when set\n",
            "  - else <state folder>/audit/logged.jsonl\n",
            "  - the state folder: AGENTACP_STATE_DIR, else $XDG_STATE_HOME/agentacp/logged, else ~/.local/state/agentacp/logged\n",
        ] {
            assert!(text.contains(line), "{line:?} in:\n{text}");
        }
        let absolute = external("/var/log/logged.jsonl");
        assert_eq!(absolute.audit_log.file.as_deref(), Some("/var/log/logged.jsonl"));
        assert!(!absolute.to_text().contains("the state folder:"));
    }

    /// Issue #18: `explain` shows what the SANDBOX.md asks the runtime to enforce, defaults
    /// included; a manifest without a sandbox has no such section.
    #[test]
    fn the_sandbox_section_shows_what_the_profile_asks() {
        let sandboxed = explained(
            "boxed",
            &[
                ("ACP.md", &server("boxed", "sandboxed", "    sandbox: ./SANDBOX.md\n")),
                ("OPERATOR.md", OPERATOR),
                (
                    "SANDBOX.md",
                    "---\nprovider: local\nconfig: {}\nmounts:\n  - {source: workspace, at: /srv/work}\n  - {source: {file: /data}, at: /data, mode: read-only}\nlimits: {memory_mb: 512}\nenv: {passthrough: [PATH, LANG]}\n---\n",
                ),
            ],
        );
        let asks = sandboxed.sandbox.as_ref().expect("a sandbox section");
        assert_eq!(asks["enforcement"], "required");
        assert_eq!(asks["mounts"][1]["mode"], "read-only");
        assert_eq!(asks["egress"], json!([]));
        let text = sandboxed.to_text();
        for line in [
            "sandbox (SANDBOX.md asks; enforcement required: a restriction the kernel cannot enforce stops the server at start):",
            "  mount: workspace at /srv/work (read-write)\n",
            "  mount: {\"file\":\"/data\"} at /data (read-only)\n",
            "  limits: timeout_ms none, memory_mb 512, cpu_ms none\n",
            "  env passed through: PATH, LANG\n",
            "  network egress: none\n",
        ] {
            assert!(text.contains(line), "{line:?} in:\n{text}");
        }
        let plain = explained(
            "plain",
            &[
                ("ACP.md", &server("plain", "governance-aware", "")),
                ("OPERATOR.md", OPERATOR),
            ],
        );
        assert!(plain.sandbox.is_none() && !plain.to_text().contains("sandbox (SANDBOX.md"));
    }

    /// `explain` shows a server's declared session surface in wire shapes, defaults as the
    /// current values; a server without one has none.
    #[test]
    fn a_servers_session_surface_is_shown_as_the_wire_has_it() {
        let surface = "  agentacp:\n    modes:\n      default: ask\n      available:\n        - id: ask\n          name: Ask\n    configOptions:\n      - select:\n          id: model\n          name: Model\n          category: model\n          default: fast\n          options:\n            - value: fast\n              name: Fast\n    commands:\n      - name: review\n        description: Review\n        hint: what\n    extensions:\n      requests: [_x/status]\n";
        let explanation = explained(
            "surface",
            &[
                ("ACP.md", &server("surface", "governance-aware", surface)),
                ("OPERATOR.md", OPERATOR),
            ],
        );
        assert_eq!(
            explanation.session_surface,
            Some(json!({
                "modes": {"currentModeId": "ask", "availableModes": [{"id": "ask", "name": "Ask"}]},
                "configOptions": [{"id": "model", "name": "Model", "category": "model", "type": "select",
                    "currentValue": "fast", "options": [{"value": "fast", "name": "Fast"}]}],
                "availableCommands": [{"name": "review", "description": "Review", "input": {"hint": "what"}}],
                "extensions": {"requests": ["_x/status"]},
            }))
        );
        assert!(
            explanation.to_text().contains("session surface (metadata.agentacp"),
            "{}",
            explanation.to_text()
        );
        let plain = explained(
            "plain",
            &[
                ("ACP.md", &server("plain", "governance-aware", "")),
                ("OPERATOR.md", OPERATOR),
            ],
        );
        assert_eq!(plain.session_surface, None);
    }
}
