//! The agent capabilities a manifest can declare, as `initialize` advertises them
//! (`agentCapabilities`): one set of types for the manifest core (tier defaults, `explain`),
//! the code `#[acp_operator]` generates, and the runtime that sends them. With the `serde`
//! feature they serialize to the wire's camelCase JSON.

/// `agentCapabilities` as a server or a bridge advertises it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "camelCase")
)]
pub struct AgentCapabilities {
    /// `session/load` is supported.
    pub load_session: bool,
    /// Prompt content beyond text and resource links.
    pub prompt_capabilities: PromptCapabilities,
    /// MCP transports beyond stdio.
    pub mcp_capabilities: McpCapabilities,
}

/// Prompt content types (`promptCapabilities`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "camelCase")
)]
pub struct PromptCapabilities {
    /// Images.
    pub image: bool,
    /// Audio.
    pub audio: bool,
    /// Embedded resources.
    pub embedded_context: bool,
}

/// MCP transports (`mcpCapabilities`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "camelCase")
)]
pub struct McpCapabilities {
    /// Streamable HTTP.
    pub http: bool,
    /// Server-sent events.
    pub sse: bool,
}

impl AgentCapabilities {
    /// Nothing beyond the protocol's baseline (what a `basic` tier advertises by default).
    pub const NONE: AgentCapabilities = AgentCapabilities {
        load_session: false,
        prompt_capabilities: PromptCapabilities {
            image: false,
            audio: false,
            embedded_context: false,
        },
        mcp_capabilities: McpCapabilities {
            http: false,
            sse: false,
        },
    };
}
