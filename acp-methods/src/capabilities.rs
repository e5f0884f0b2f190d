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
    /// The session methods beyond the baseline (`sessionCapabilities`, each an object when
    /// offered; the key is left out when none is).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "SessionCapabilities::is_none")
    )]
    pub session_capabilities: SessionCapabilities,
}

/// `sessionCapabilities`: which of the optional session methods an agent answers. On the wire
/// each offered one is an (empty) object and an absent key is not offered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SessionCapabilities {
    /// `session/list`.
    pub list: bool,
    /// `session/resume`.
    pub resume: bool,
    /// `session/close`.
    pub close: bool,
    /// `session/delete`.
    pub delete: bool,
    /// `additionalDirectories` in session requests.
    pub additional_directories: bool,
}

impl SessionCapabilities {
    /// Each capability with its wire key.
    pub const fn flags(&self) -> [(&'static str, bool); 5] {
        [
            ("list", self.list),
            ("resume", self.resume),
            ("close", self.close),
            ("delete", self.delete),
            ("additionalDirectories", self.additional_directories),
        ]
    }

    /// Whether none is offered.
    pub const fn is_none(&self) -> bool {
        !(self.list || self.resume || self.close || self.delete || self.additional_directories)
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for SessionCapabilities {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let offered = self.flags().into_iter().filter(|(_, on)| *on);
        let mut map = serializer.serialize_map(None)?;
        for (key, _) in offered {
            map.serialize_entry(key, &Empty {})?;
        }
        map.end()
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for SessionCapabilities {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// Present and an object: offered; absent or `null`: not.
        #[derive(serde::Deserialize)]
        struct Wire {
            #[serde(default)]
            list: Option<Empty>,
            #[serde(default)]
            resume: Option<Empty>,
            #[serde(default)]
            close: Option<Empty>,
            #[serde(default)]
            delete: Option<Empty>,
            #[serde(default, rename = "additionalDirectories")]
            additional_directories: Option<Empty>,
        }
        let wire = Wire::deserialize(deserializer)?;
        Ok(SessionCapabilities {
            list: wire.list.is_some(),
            resume: wire.resume.is_some(),
            close: wire.close.is_some(),
            delete: wire.delete.is_some(),
            additional_directories: wire.additional_directories.is_some(),
        })
    }
}

/// `{}`: an offered object capability (its own keys, if any, are not read).
#[cfg(feature = "serde")]
#[derive(serde::Serialize, serde::Deserialize)]
struct Empty {}

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
    /// MCP-over-ACP (the upstream RFD; not in the pinned revision's schema, so a manifest does
    /// not declare it): AIP-44 requires it of a runtime that declares `mcpCapabilities`, and
    /// agentacp gives it at tier `sandboxed`. Left out of the JSON when `false`.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "is_false"))]
    pub acp: bool,
}

#[cfg(feature = "serde")]
fn is_false(flag: &bool) -> bool {
    !*flag
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
            acp: false,
        },
        session_capabilities: SessionCapabilities {
            list: false,
            resume: false,
            close: false,
            delete: false,
            additional_directories: false,
        },
    };
}
