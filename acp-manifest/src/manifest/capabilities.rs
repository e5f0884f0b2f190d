//! Effective capabilities: what `initialize` advertises for a checked manifest.
//!
//! The tier gives defaults; `metadata.aip44.capabilities` overrides them key by key.
//!
//! | tier             | agent side                                   |
//! |------------------|----------------------------------------------|
//! | basic            | nothing beyond the baseline                  |
//! | governance-aware | `loadSession`                                |
//! | sandboxed        | `loadSession`, `mcpCapabilities.http`, `.acp` |
//!
//! Client-side capabilities (fs, terminal) default to off at every tier. For a client or a
//! bridge they are what it offers the agent; for a server, the editor methods its operator
//! may call ([`EffectiveCapabilities::editor_methods`]).

use serde::{Deserialize, Serialize};

use super::model::{DeclaredAgentCapabilities, DeclaredClientCapabilities, Kind, Manifest, Tier};

pub use acp_methods::{AgentCapabilities, McpCapabilities, PromptCapabilities, SessionCapabilities};

/// Client capabilities as sent in the `initialize` request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientCapabilities {
    /// File-system methods.
    pub fs: FsCapabilities,
    /// The terminal methods.
    pub terminal: bool,
}

impl ClientCapabilities {
    /// As the method table's set ([`acp_methods::ClientMethods`]).
    pub fn as_methods(&self) -> acp_methods::ClientMethods {
        acp_methods::ClientMethods {
            read_text_file: self.fs.read_text_file,
            write_text_file: self.fs.write_text_file,
            terminal: self.terminal,
        }
    }

    /// The editor methods these capabilities turn on, by wire name, in the method table's
    /// order.
    pub fn methods(&self) -> Vec<&'static str> {
        self.as_methods().methods().map(|method| method.name).collect()
    }
}

/// File-system methods.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FsCapabilities {
    /// `fs/read_text_file`.
    pub read_text_file: bool,
    /// `fs/write_text_file`.
    pub write_text_file: bool,
}

/// The capabilities a runtime advertises: the agent side for servers and bridges, the
/// client side for clients and bridges.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EffectiveCapabilities {
    /// Present for server and bridge.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_capabilities: Option<AgentCapabilities>,
    /// Present for client and bridge.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_capabilities: Option<ClientCapabilities>,
}

/// One capability flag, for the tier rules: its path under `capabilities`, the tier's
/// default, and whether the tier requires it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TierFlag {
    /// Path under `metadata.aip44.capabilities`, e.g. `["agent", "loadSession"]`.
    pub path: &'static [&'static str],
    /// The default at the tier.
    pub default: bool,
    /// Switching it off is an error.
    pub required: bool,
}

/// Every capability flag with its default at `tier`.
pub fn tier_flags(tier: Tier) -> Vec<TierFlag> {
    let agent = tier_agent_defaults(tier);
    let flag = |path, default, required| TierFlag {
        path,
        default,
        required,
    };
    vec![
        flag(&["agent", "loadSession"], agent.load_session, agent.load_session),
        flag(&["agent", "promptCapabilities", "image"], false, false),
        flag(&["agent", "promptCapabilities", "audio"], false, false),
        flag(&["agent", "promptCapabilities", "embeddedContext"], false, false),
        flag(
            &["agent", "mcpCapabilities", "http"],
            agent.mcp_capabilities.http,
            agent.mcp_capabilities.http,
        ),
        flag(&["agent", "mcpCapabilities", "sse"], false, false),
        flag(&["client", "fs", "readTextFile"], false, false),
        flag(&["client", "fs", "writeTextFile"], false, false),
        flag(&["client", "terminal"], false, false),
    ]
}

/// The agent capabilities a tier gives by default.
pub fn tier_agent_defaults(tier: Tier) -> AgentCapabilities {
    AgentCapabilities {
        load_session: tier >= Tier::GovernanceAware,
        mcp_capabilities: McpCapabilities {
            http: tier >= Tier::Sandboxed,
            sse: false,
            // AIP-44: a runtime that declares `mcpCapabilities` takes MCP-over-ACP.
            acp: tier >= Tier::Sandboxed,
        },
        ..AgentCapabilities::default()
    }
}

impl EffectiveCapabilities {
    /// The capabilities of a manifest: tier defaults, then each declared key.
    pub fn of(manifest: &Manifest) -> Self {
        let aip44 = &manifest.metadata.aip44;
        let declared = aip44.capabilities.clone().unwrap_or_default();
        let kind = manifest.kind;
        EffectiveCapabilities {
            agent_capabilities: kind.is_agent_side().then(|| AgentCapabilities {
                session_capabilities: sessions(manifest),
                ..agent(aip44.tier, declared.agent.unwrap_or_default())
            }),
            client_capabilities: (kind == Kind::Client || kind == Kind::Bridge)
                .then(|| client(declared.client.unwrap_or_default())),
        }
    }

    /// For a server: the editor's client methods its operator may call
    /// (`capabilities.client` in a server's manifest, all off by default). `None` for a
    /// client or bridge, whose `capabilities.client` is what it offers (above). Never sent at
    /// `initialize`: a server does not advertise client capabilities.
    pub fn editor_methods(manifest: &Manifest) -> Option<ClientCapabilities> {
        let declared = manifest.metadata.aip44.capabilities.clone().unwrap_or_default();
        (manifest.kind == Kind::Server).then(|| client(declared.client.unwrap_or_default()))
    }

    /// As a JSON object (`{"agentCapabilities": ..., "clientCapabilities": ...}`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("plain data")
    }
}

fn agent(tier: Tier, declared: DeclaredAgentCapabilities) -> AgentCapabilities {
    let mut caps = tier_agent_defaults(tier);
    let prompt = declared.prompt_capabilities.unwrap_or_default();
    let mcp = declared.mcp_capabilities.unwrap_or_default();
    set(&mut caps.load_session, declared.load_session);
    set(&mut caps.prompt_capabilities.image, prompt.image);
    set(&mut caps.prompt_capabilities.audio, prompt.audio);
    set(&mut caps.prompt_capabilities.embedded_context, prompt.embedded_context);
    set(&mut caps.mcp_capabilities.http, mcp.http);
    set(&mut caps.mcp_capabilities.sse, mcp.sse);
    caps
}

/// `metadata.agentacp.sessions`: what is declared `true`.
fn sessions(manifest: &Manifest) -> SessionCapabilities {
    let declared = manifest
        .metadata
        .agentacp
        .as_ref()
        .and_then(|agentacp| agentacp.sessions.clone())
        .unwrap_or_default();
    let on = |flag: Option<bool>| flag.unwrap_or(false);
    SessionCapabilities {
        list: on(declared.list),
        resume: on(declared.resume),
        close: on(declared.close),
        delete: on(declared.delete),
        additional_directories: on(declared.additional_directories),
    }
}

fn client(declared: DeclaredClientCapabilities) -> ClientCapabilities {
    let mut caps = ClientCapabilities::default();
    let fs = declared.fs.unwrap_or_default();
    set(&mut caps.fs.read_text_file, fs.read_text_file);
    set(&mut caps.fs.write_text_file, fs.write_text_file);
    set(&mut caps.terminal, declared.terminal);
    caps
}

fn set(slot: &mut bool, declared: Option<bool>) {
    if let Some(value) = declared {
        *slot = value;
    }
}
