//! The ACP methods agentacp implements, one row each: the wire name, who handles it, the
//! handler-trait method it becomes, its params and result types, the enum variant that
//! carries it, and what offers it.
//!
//! It is the one method table of the project. `#[acp_operator]` generates the handler traits
//! (and the stand-ins shown beside manifest errors) from it; the manifest checks and
//! `scaffold-aip explain` read which methods a capability turns on from it; at run time the
//! client and the bridge decide from it which requests an agent may send, and which of their
//! params are workspace paths. A method missing here is answered `-32601` by every operator
//! (a bridge passes only extension methods, `_`-prefixed, that are not in the table).
//!
//! [`CAPABILITIES`] lists every capability of the `initialize` exchange agentacp knows, how
//! each is signalled, and whether a manifest can declare it; a row's [`Offer`] names the one
//! that offers it. A bridge narrows what each side advertises to these rows and gates every
//! method by them: a capability a manifest cannot declare never passes, so turning one on is
//! a matter of marking it `declarable` (and teaching the manifest its key).
//!
//! The table is revision independent: whether the revision an operator pins has a method is
//! read from that revision's generated wire module (its `METHODS`), and a manifest that turns
//! on a capability whose methods the revision lacks fails its checks (`ACP214`).

mod capabilities;

pub use capabilities::{AgentCapabilities, McpCapabilities, PromptCapabilities, SessionCapabilities};

/// The side of the connection that receives (handles) a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// The agent: a server, or the agent half of a bridge.
    Agent,
    /// The client: the editor, a client operator, or the editor half of a bridge.
    Client,
    /// Either side (`$/cancel_request`).
    Both,
}

/// A capability a client offers in `clientCapabilities` (and a manifest declares under
/// `metadata.aip44.capabilities.client`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ClientCapability {
    /// `fs.readTextFile`.
    ReadTextFile,
    /// `fs.writeTextFile`.
    WriteTextFile,
    /// `terminal`.
    Terminal,
}

impl ClientCapability {
    /// Every client capability, in table order.
    pub const ALL: [ClientCapability; 3] = [Self::ReadTextFile, Self::WriteTextFile, Self::Terminal];

    /// Its path under `clientCapabilities` (and under a manifest's `capabilities.client`).
    pub const fn path(self) -> &'static [&'static str] {
        match self {
            Self::ReadTextFile => &["fs", "readTextFile"],
            Self::WriteTextFile => &["fs", "writeTextFile"],
            Self::Terminal => &["terminal"],
        }
    }

    /// The capability at `path`, if `path` names one.
    pub fn at(path: &[&str]) -> Option<ClientCapability> {
        Self::ALL.into_iter().find(|capability| capability.path() == path)
    }

    /// The methods it offers, in table order.
    pub fn methods(self) -> impl Iterator<Item = &'static Method> {
        METHODS.iter().filter(move |method| method.offer == Offer::Client(self))
    }

    /// The tool name governance sees when a server's operator uses it: its first method
    /// (`terminal/create` stands for the whole `terminal/*` family of one command).
    pub fn tool(self) -> &'static str {
        self.methods().next().map_or("", |method| method.name)
    }

    /// Its row in [`CAPABILITIES`].
    pub const fn capability(self) -> Capability {
        match self {
            Self::ReadTextFile => Capability::READ_TEXT_FILE,
            Self::WriteTextFile => Capability::WRITE_TEXT_FILE,
            Self::Terminal => Capability::TERMINAL,
        }
    }
}

/// How a capability is switched on in `initialize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// A boolean: on when `true`.
    Flag,
    /// An object: on when present (`{}`), off when omitted or `null`.
    Presence,
}

/// A capability of the `initialize` exchange: one the agent advertises in `agentCapabilities`
/// (`side: Agent`, it receives the methods it offers) or the client in `clientCapabilities`
/// (`side: Client`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Capability {
    /// Who advertises it (and receives its methods).
    pub side: Side,
    /// Its path under `agentCapabilities` / `clientCapabilities`.
    pub path: &'static [&'static str],
    /// How it is switched on.
    pub signal: Signal,
    /// Whether a manifest can declare it: in AIP-44's closed `metadata.aip44.capabilities.agent`
    /// / `.client` at the same path, or (`sessionCapabilities.*`, `elicitation.*`) in agentacp's
    /// own `metadata.agentacp.sessions` / `metadata.agentacp.elicitation`, since AIP-44 reserves
    /// `metadata.aip44` for its bindings.
    /// One a manifest cannot declare is never let through by a bridge.
    pub declarable: bool,
}

const fn capability(side: Side, path: &'static [&'static str], signal: Signal, declarable: bool) -> Capability {
    Capability {
        side,
        path,
        signal,
        declarable,
    }
}

impl Capability {
    /// `agentCapabilities.loadSession`.
    pub const LOAD_SESSION: Capability = capability(Side::Agent, &["loadSession"], Signal::Flag, true);
    /// `agentCapabilities.promptCapabilities.image`.
    pub const PROMPT_IMAGE: Capability = capability(Side::Agent, &["promptCapabilities", "image"], Signal::Flag, true);
    /// `agentCapabilities.promptCapabilities.audio`.
    pub const PROMPT_AUDIO: Capability = capability(Side::Agent, &["promptCapabilities", "audio"], Signal::Flag, true);
    /// `agentCapabilities.promptCapabilities.embeddedContext`.
    pub const PROMPT_EMBEDDED_CONTEXT: Capability = capability(
        Side::Agent,
        &["promptCapabilities", "embeddedContext"],
        Signal::Flag,
        true,
    );
    /// `agentCapabilities.mcpCapabilities.http`.
    pub const MCP_HTTP: Capability = capability(Side::Agent, &["mcpCapabilities", "http"], Signal::Flag, true);
    /// `agentCapabilities.mcpCapabilities.sse`.
    pub const MCP_SSE: Capability = capability(Side::Agent, &["mcpCapabilities", "sse"], Signal::Flag, true);
    /// `agentCapabilities.sessionCapabilities.list`: `session/list`.
    pub const SESSION_LIST: Capability =
        capability(Side::Agent, &["sessionCapabilities", "list"], Signal::Presence, true);
    /// `agentCapabilities.sessionCapabilities.delete`: `session/delete`.
    pub const SESSION_DELETE: Capability =
        capability(Side::Agent, &["sessionCapabilities", "delete"], Signal::Presence, true);
    /// `agentCapabilities.sessionCapabilities.additionalDirectories`: the `additionalDirectories`
    /// field of session requests.
    pub const SESSION_ADDITIONAL_DIRECTORIES: Capability = capability(
        Side::Agent,
        &["sessionCapabilities", "additionalDirectories"],
        Signal::Presence,
        true,
    );
    /// `agentCapabilities.sessionCapabilities.resume`: `session/resume`.
    pub const SESSION_RESUME: Capability =
        capability(Side::Agent, &["sessionCapabilities", "resume"], Signal::Presence, true);
    /// `agentCapabilities.sessionCapabilities.close`: `session/close`.
    pub const SESSION_CLOSE: Capability =
        capability(Side::Agent, &["sessionCapabilities", "close"], Signal::Presence, true);
    /// `agentCapabilities.auth.logout`: `logout`.
    pub const LOGOUT: Capability = capability(Side::Agent, &["auth", "logout"], Signal::Presence, false);
    /// `clientCapabilities.fs.readTextFile`.
    pub const READ_TEXT_FILE: Capability = capability(Side::Client, &["fs", "readTextFile"], Signal::Flag, true);
    /// `clientCapabilities.fs.writeTextFile`.
    pub const WRITE_TEXT_FILE: Capability = capability(Side::Client, &["fs", "writeTextFile"], Signal::Flag, true);
    /// `clientCapabilities.terminal`.
    pub const TERMINAL: Capability = capability(Side::Client, &["terminal"], Signal::Flag, true);
    /// `clientCapabilities.auth.terminal`: the agent may offer `terminal` auth methods.
    pub const AUTH_TERMINAL: Capability = capability(Side::Client, &["auth", "terminal"], Signal::Flag, false);
    /// `clientCapabilities.session.compaction`: compaction session updates.
    pub const SESSION_COMPACTION: Capability =
        capability(Side::Client, &["session", "compaction"], Signal::Presence, false);
    /// `clientCapabilities.session.configOptions`: config option extensions.
    pub const SESSION_CONFIG_OPTIONS: Capability =
        capability(Side::Client, &["session", "configOptions"], Signal::Presence, false);
    /// `clientCapabilities.session.configOptions.boolean`: boolean config options.
    pub const BOOLEAN_CONFIG_OPTIONS: Capability = capability(
        Side::Client,
        &["session", "configOptions", "boolean"],
        Signal::Presence,
        false,
    );
    /// `clientCapabilities.session.notices`: notice session updates.
    pub const SESSION_NOTICES: Capability = capability(Side::Client, &["session", "notices"], Signal::Presence, false);
    /// `clientCapabilities.elicitation`: `elicitation/create` and `elicitation/complete`.
    pub const ELICITATION: Capability = capability(Side::Client, &["elicitation"], Signal::Presence, true);
    /// `clientCapabilities.elicitation.form`.
    pub const ELICITATION_FORM: Capability = capability(Side::Client, &["elicitation", "form"], Signal::Presence, true);
    /// `clientCapabilities.elicitation.url`.
    pub const ELICITATION_URL: Capability = capability(Side::Client, &["elicitation", "url"], Signal::Presence, true);

    /// The capability `side` advertises at `path`, if `path` names one.
    pub fn at(side: Side, path: &[&str]) -> Option<Capability> {
        CAPABILITIES
            .iter()
            .copied()
            .find(|capability| capability.side == side && capability.path == path)
    }

    /// Whether `path` leads to a capability of `side` without naming one (`fs`,
    /// `sessionCapabilities`): an object that holds capabilities.
    pub fn holds(side: Side, path: &[&str]) -> bool {
        CAPABILITIES.iter().any(|capability| {
            capability.side == side && capability.path.len() > path.len() && capability.path.starts_with(path)
        })
    }

    /// The methods it offers, in table order.
    pub fn methods(self) -> impl Iterator<Item = &'static Method> {
        METHODS
            .iter()
            .filter(move |method| method.offer.capability() == Some(self))
    }
}

/// Every capability of the `initialize` exchange agentacp knows (those of the built-in
/// revisions). Anything else a peer advertises (an unstable capability, another revision's)
/// is not governed: a bridge removes it. `_meta` is never a capability.
pub const CAPABILITIES: &[Capability] = &[
    Capability::LOAD_SESSION,
    Capability::PROMPT_IMAGE,
    Capability::PROMPT_AUDIO,
    Capability::PROMPT_EMBEDDED_CONTEXT,
    Capability::MCP_HTTP,
    Capability::MCP_SSE,
    Capability::SESSION_LIST,
    Capability::SESSION_DELETE,
    Capability::SESSION_ADDITIONAL_DIRECTORIES,
    Capability::SESSION_RESUME,
    Capability::SESSION_CLOSE,
    Capability::LOGOUT,
    Capability::READ_TEXT_FILE,
    Capability::WRITE_TEXT_FILE,
    Capability::TERMINAL,
    Capability::AUTH_TERMINAL,
    Capability::SESSION_COMPACTION,
    Capability::SESSION_CONFIG_OPTIONS,
    Capability::BOOLEAN_CONFIG_OPTIONS,
    Capability::SESSION_NOTICES,
    Capability::ELICITATION,
    Capability::ELICITATION_FORM,
    Capability::ELICITATION_URL,
];

/// The keys of `clientCapabilities._meta` known to advertise a client ability, and the
/// capability each depends on: a bridge removes such a key when it switched that capability
/// off. Other `_meta` keys pass unchanged.
pub const CLIENT_META: &[(&str, Capability)] = &[
    // Claude's agent offers its terminal login to a client that says it can run it.
    ("terminal-auth", Capability::TERMINAL),
];

/// What offers a method to the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Every peer that speaks ACP.
    Always,
    /// `agentCapabilities.loadSession`.
    LoadSession,
    /// A transport that needs authentication (a manifest listing `websocket`).
    Authentication,
    /// A client capability.
    Client(ClientCapability),
    /// Another capability of [`CAPABILITIES`] (one a manifest cannot declare yet).
    Capability(Capability),
    /// No capability: the `modes` of the session's setup answer (`session/new`,
    /// `session/load`, `session/resume`), which a server's manifest declares in
    /// `metadata.agentacp.modes`.
    Modes,
    /// No capability: the `configOptions` of the session's setup answer, which a server's
    /// manifest declares in `metadata.agentacp.configOptions`.
    ConfigOptions,
}

impl Offer {
    /// The capability that offers it, if one does.
    pub const fn capability(self) -> Option<Capability> {
        match self {
            Offer::LoadSession => Some(Capability::LOAD_SESSION),
            Offer::Client(capability) => Some(capability.capability()),
            Offer::Capability(capability) => Some(capability),
            Offer::Always | Offer::Authentication | Offer::Modes | Offer::ConfigOptions => None,
        }
    }
}

/// Who answers a method on the receiving side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handler {
    /// agentacp itself (`initialize`, `session/new`, a client's permission handler, ...).
    Runtime,
    /// The operator: the method of its generated handler trait.
    Trait(TraitMethod),
    /// No agentacp operator answers it (servers and clients answer `-32601`); a bridge
    /// forwards it when what offers it passes.
    None,
}

/// A method of a generated handler trait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraitMethod {
    /// Its Rust name (`read_text_file`).
    pub name: &'static str,
    /// What it receives besides the request.
    pub context: Context,
    /// The wire type it returns (`ReadTextFileResponse`; `StopReason` for `prompt`).
    pub returns: &'static str,
    /// Its documentation.
    pub doc: &'static str,
}

/// What a handler-trait method receives besides the decoded request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Context {
    /// Nothing else.
    None,
    /// The session (`&agentacp::server::SessionContext`).
    Session,
    /// The running turn (`&mut agentacp::server::Turn<'_, Tier>`).
    Turn,
    /// The client's view of the session (`&agentacp::client::ClientContext`).
    Client,
}

/// One ACP method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Method {
    /// The wire name (`fs/read_text_file`).
    pub name: &'static str,
    /// Who receives it.
    pub side: Side,
    /// Whether it is a notification (no id, no answer).
    pub notification: bool,
    /// The params type in a generated wire module.
    pub params: &'static str,
    /// The result type in a generated wire module (`None` for a notification).
    pub result: Option<&'static str>,
    /// The variant of the wire module's request enum (`ClientRequest` for the agent side,
    /// `AgentRequest` for the client side) that carries its params: `FsReadTextFile`.
    pub variant: &'static str,
    /// What offers it.
    pub offer: Offer,
    /// Who answers it.
    pub handler: Handler,
    /// The param that names a place in the workspace (`path`, a terminal's `cwd`): the
    /// runtime confines it to the workspace root before a handler sees it.
    pub workspace_path: Option<&'static str>,
}

impl Method {
    /// Whether it is a request the agent sends the client (and so needs an id).
    pub fn is_client_request(&self) -> bool {
        self.side == Side::Client && !self.notification
    }

    /// The handler-trait method, if the operator answers it.
    pub fn trait_method(&self) -> Option<TraitMethod> {
        match self.handler {
            Handler::Trait(method) => Some(method),
            Handler::Runtime | Handler::None => None,
        }
    }

    /// The client capability that offers it, if one does.
    pub fn client_capability(&self) -> Option<ClientCapability> {
        match self.offer {
            Offer::Client(capability) => Some(capability),
            _ => None,
        }
    }
}

/// The method named `name`, if agentacp implements it.
pub fn find(name: &str) -> Option<&'static Method> {
    METHODS.iter().find(|method| method.name == name)
}

/// The methods `side` receives, in table order.
pub fn received_by(side: Side) -> impl Iterator<Item = &'static Method> {
    METHODS.iter().filter(move |method| method.side == side)
}

/// A set of client capabilities: what a client offers (`clientCapabilities`), or the editor
/// methods a server's operator may call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ClientMethods {
    /// `fs/read_text_file`.
    pub read_text_file: bool,
    /// `fs/write_text_file`.
    pub write_text_file: bool,
    /// The `terminal/*` family.
    pub terminal: bool,
}

impl ClientMethods {
    /// None of them.
    pub const NONE: ClientMethods = ClientMethods {
        read_text_file: false,
        write_text_file: false,
        terminal: false,
    };

    /// The set whose capabilities `offered` says yes to (`offered` gets each capability's path).
    pub fn from_paths(mut offered: impl FnMut(&[&str]) -> bool) -> ClientMethods {
        let mut methods = ClientMethods::NONE;
        for capability in ClientCapability::ALL {
            if offered(capability.path()) {
                methods.insert(capability);
            }
        }
        methods
    }

    /// Whether `capability` is in the set.
    pub fn has(&self, capability: ClientCapability) -> bool {
        match capability {
            ClientCapability::ReadTextFile => self.read_text_file,
            ClientCapability::WriteTextFile => self.write_text_file,
            ClientCapability::Terminal => self.terminal,
        }
    }

    /// Adds `capability`.
    pub fn insert(&mut self, capability: ClientCapability) {
        match capability {
            ClientCapability::ReadTextFile => self.read_text_file = true,
            ClientCapability::WriteTextFile => self.write_text_file = true,
            ClientCapability::Terminal => self.terminal = true,
        }
    }

    /// The capabilities in the set, in table order.
    pub fn capabilities(self) -> impl Iterator<Item = ClientCapability> {
        ClientCapability::ALL
            .into_iter()
            .filter(move |capability| self.has(*capability))
    }

    /// The methods the set offers, in table order.
    pub fn methods(self) -> impl Iterator<Item = &'static Method> {
        METHODS
            .iter()
            .filter(move |method| method.client_capability().is_some_and(|c| self.has(c)))
    }

    /// Whether `method` is offered: it is a client-capability method and its capability is in
    /// the set.
    pub fn offers(&self, method: &str) -> bool {
        find(method)
            .and_then(Method::client_capability)
            .is_some_and(|capability| self.has(capability))
    }

    /// Only what both sets have.
    pub fn intersect(self, other: ClientMethods) -> ClientMethods {
        ClientMethods::from_paths(|path| {
            ClientCapability::at(path).is_some_and(|capability| self.has(capability) && other.has(capability))
        })
    }

    /// The tool names governance sees for the set's capabilities.
    pub fn tools(self) -> Vec<&'static str> {
        self.capabilities().map(ClientCapability::tool).collect()
    }
}

/// The elicitation modes a client offers (`clientCapabilities.elicitation.form` / `.url`: each
/// on only when present), or that a client's or a bridge's manifest declares
/// (`metadata.agentacp.elicitation`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ElicitationModes {
    /// Form mode: structured input by a restricted JSON Schema.
    pub form: bool,
    /// URL mode: an out-of-band interaction at a URL the user opens.
    pub url: bool,
}

impl ElicitationModes {
    /// Neither mode (elicitation not offered).
    pub const NONE: ElicitationModes = ElicitationModes {
        form: false,
        url: false,
    };

    /// Whether any mode is offered.
    pub const fn any(self) -> bool {
        self.form || self.url
    }

    /// Only the modes both sets have.
    pub const fn intersect(self, other: ElicitationModes) -> ElicitationModes {
        ElicitationModes {
            form: self.form && other.form,
            url: self.url && other.url,
        }
    }
}

const fn agent(
    name: &'static str,
    params: &'static str,
    result: &'static str,
    variant: &'static str,
    offer: Offer,
    handler: Handler,
) -> Method {
    Method {
        name,
        side: Side::Agent,
        notification: false,
        params,
        result: Some(result),
        variant,
        offer,
        handler,
        workspace_path: None,
    }
}

const fn editor(
    name: &'static str,
    (params, result, variant): (&'static str, &'static str, &'static str),
    capability: ClientCapability,
    workspace_path: Option<&'static str>,
    trait_method: (&'static str, &'static str),
) -> Method {
    let (trait_name, doc) = trait_method;
    Method {
        name,
        side: Side::Client,
        notification: false,
        params,
        result: Some(result),
        variant,
        offer: Offer::Client(capability),
        handler: Handler::Trait(TraitMethod {
            name: trait_name,
            context: Context::Client,
            returns: result,
            doc,
        }),
        workspace_path,
    }
}

const fn notification(name: &'static str, side: Side, params: &'static str, variant: &'static str) -> Method {
    Method {
        name,
        side,
        notification: true,
        params,
        result: None,
        variant,
        offer: Offer::Always,
        handler: Handler::Runtime,
        workspace_path: None,
    }
}

/// A request of `side`'s that no agentacp operator answers; a bridge forwards it when `offer`
/// passes.
const fn forwarded(
    name: &'static str,
    side: Side,
    (params, result, variant): (&'static str, &'static str, &'static str),
    offer: Offer,
) -> Method {
    Method {
        name,
        side,
        notification: false,
        params,
        result: Some(result),
        variant,
        offer,
        handler: Handler::None,
        workspace_path: None,
    }
}

/// Every method agentacp implements.
pub const METHODS: &[Method] = &[
    agent(
        "initialize",
        "InitializeRequest",
        "InitializeResponse",
        "Initialize",
        Offer::Always,
        Handler::Runtime,
    ),
    agent(
        "authenticate",
        "AuthenticateRequest",
        "AuthenticateResponse",
        "Authenticate",
        Offer::Authentication,
        Handler::Trait(TraitMethod {
            name: "authenticate",
            context: Context::None,
            returns: "AuthenticateResponse",
            doc: "`authenticate`: required because the manifest offers a websocket transport.",
        }),
    ),
    agent(
        "session/new",
        "NewSessionRequest",
        "NewSessionResponse",
        "SessionNew",
        Offer::Always,
        Handler::Runtime,
    ),
    agent(
        "session/load",
        "LoadSessionRequest",
        "LoadSessionResponse",
        "SessionLoad",
        Offer::LoadSession,
        Handler::Trait(TraitMethod {
            name: "load_session",
            context: Context::Session,
            returns: "LoadSessionResponse",
            doc: "`session/load`: restore the operator's own state for a session. The runtime has already replayed the stored history to the client.",
        }),
    ),
    agent(
        "session/prompt",
        "PromptRequest",
        "PromptResponse",
        "SessionPrompt",
        Offer::Always,
        Handler::Trait(TraitMethod {
            name: "prompt",
            context: Context::Turn,
            returns: "StopReason",
            doc: "`session/prompt`: run one turn, streaming through `turn`; return why it stopped.",
        }),
    ),
    notification("session/cancel", Side::Agent, "CancelNotification", "SessionCancel"),
    // A server answers it though it does not advertise it, for peers that send it anyway.
    agent(
        "session/close",
        "CloseSessionRequest",
        "CloseSessionResponse",
        "SessionClose",
        Offer::Capability(Capability::SESSION_CLOSE),
        Handler::Runtime,
    ),
    forwarded(
        "session/list",
        Side::Agent,
        ("ListSessionsRequest", "ListSessionsResponse", "SessionList"),
        Offer::Capability(Capability::SESSION_LIST),
    ),
    forwarded(
        "session/delete",
        Side::Agent,
        ("DeleteSessionRequest", "DeleteSessionResponse", "SessionDelete"),
        Offer::Capability(Capability::SESSION_DELETE),
    ),
    forwarded(
        "session/resume",
        Side::Agent,
        ("ResumeSessionRequest", "ResumeSessionResponse", "SessionResume"),
        Offer::Capability(Capability::SESSION_RESUME),
    ),
    forwarded(
        "logout",
        Side::Agent,
        ("LogoutRequest", "LogoutResponse", "Logout"),
        Offer::Capability(Capability::LOGOUT),
    ),
    agent(
        "session/set_mode",
        "SetSessionModeRequest",
        "SetSessionModeResponse",
        "SessionSetMode",
        Offer::Modes,
        Handler::Trait(TraitMethod {
            name: "set_mode",
            context: Context::Session,
            returns: "SetSessionModeResponse",
            doc: "`session/set_mode`: the user switches the session to `request.mode_id`. The runtime has checked that the manifest declares it, audited the change and made it the session's mode (`session.mode()`); an error undoes it and is the answer.",
        }),
    ),
    agent(
        "session/set_config_option",
        "SetSessionConfigOptionRequest",
        "SetSessionConfigOptionResponse",
        "SessionSetConfigOption",
        Offer::ConfigOptions,
        Handler::Trait(TraitMethod {
            name: "set_config_option",
            context: Context::Session,
            returns: "SetSessionConfigOptionResponse",
            doc: "`session/set_config_option`: the user sets `request.config_id`. The runtime has checked the value against the manifest, audited the change and stored it (`session.config_value(id)`); an error undoes it and is the answer. The answer's `configOptions` are filled in by the runtime with every option's current value: return `SetSessionConfigOptionResponse::new(Vec::new())`.",
        }),
    ),
    forwarded(
        "elicitation/create",
        Side::Client,
        (
            "CreateElicitationRequest",
            "CreateElicitationResponse",
            "ElicitationCreate",
        ),
        Offer::Capability(Capability::ELICITATION),
    ),
    Method {
        offer: Offer::Capability(Capability::ELICITATION),
        handler: Handler::None,
        ..notification(
            "elicitation/complete",
            Side::Client,
            "CompleteElicitationNotification",
            "ElicitationComplete",
        )
    },
    Method {
        name: "session/request_permission",
        side: Side::Client,
        notification: false,
        params: "RequestPermissionRequest",
        result: Some("RequestPermissionResponse"),
        variant: "SessionRequestPermission",
        offer: Offer::Always,
        handler: Handler::Runtime,
        workspace_path: None,
    },
    notification("session/update", Side::Client, "SessionNotification", "SessionUpdate"),
    editor(
        "fs/read_text_file",
        ("ReadTextFileRequest", "ReadTextFileResponse", "FsReadTextFile"),
        ClientCapability::ReadTextFile,
        Some("path"),
        (
            "read_text_file",
            "`fs/read_text_file`. `request.path` is already absolute, canonical and inside the workspace root; `agentacp::client::fs::read_text_file` is a ready implementation.",
        ),
    ),
    editor(
        "fs/write_text_file",
        ("WriteTextFileRequest", "WriteTextFileResponse", "FsWriteTextFile"),
        ClientCapability::WriteTextFile,
        Some("path"),
        (
            "write_text_file",
            "`fs/write_text_file`. `request.path` is already absolute, canonical and inside the workspace root; `agentacp::client::fs::write_text_file` is a ready implementation.",
        ),
    ),
    editor(
        "terminal/create",
        ("CreateTerminalRequest", "CreateTerminalResponse", "TerminalCreate"),
        ClientCapability::Terminal,
        Some("cwd"),
        (
            "create_terminal",
            "`terminal/create`. `request.cwd` is set, canonical and inside the workspace root; `context.terminals().create(&request)` is a ready implementation.",
        ),
    ),
    editor(
        "terminal/output",
        ("TerminalOutputRequest", "TerminalOutputResponse", "TerminalOutput"),
        ClientCapability::Terminal,
        None,
        (
            "terminal_output",
            "`terminal/output` (`context.terminals().output(&request)`).",
        ),
    ),
    editor(
        "terminal/wait_for_exit",
        (
            "WaitForTerminalExitRequest",
            "WaitForTerminalExitResponse",
            "TerminalWaitForExit",
        ),
        ClientCapability::Terminal,
        None,
        (
            "wait_for_terminal_exit",
            "`terminal/wait_for_exit` (`context.terminals().wait_for_exit(&request)`).",
        ),
    ),
    editor(
        "terminal/kill",
        ("KillTerminalRequest", "KillTerminalResponse", "TerminalKill"),
        ClientCapability::Terminal,
        None,
        (
            "kill_terminal",
            "`terminal/kill` (`context.terminals().kill(&request)`).",
        ),
    ),
    editor(
        "terminal/release",
        ("ReleaseTerminalRequest", "ReleaseTerminalResponse", "TerminalRelease"),
        ClientCapability::Terminal,
        None,
        (
            "release_terminal",
            "`terminal/release` (`context.terminals().release(&request)`).",
        ),
    ),
    notification(
        "$/cancel_request",
        Side::Both,
        "CancelRequestNotification",
        "CancelRequest",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_trait_methods_are_unique() {
        for (i, method) in METHODS.iter().enumerate() {
            assert!(
                METHODS[..i].iter().all(|earlier| earlier.name != method.name),
                "{} twice",
                method.name
            );
            if let Some(trait_method) = method.trait_method() {
                let twins = METHODS
                    .iter()
                    .filter_map(Method::trait_method)
                    .filter(|other| other.name == trait_method.name)
                    .count();
                assert_eq!(twins, 1, "handler `{}` twice", trait_method.name);
            }
        }
    }

    #[test]
    fn each_client_capability_offers_requests_the_agent_sends() {
        for capability in ClientCapability::ALL {
            assert_eq!(ClientCapability::at(capability.path()), Some(capability));
            let methods: Vec<_> = capability.methods().collect();
            assert!(!methods.is_empty(), "{capability:?} offers nothing");
            for method in methods {
                assert!(method.is_client_request(), "{}", method.name);
                assert!(method.trait_method().is_some(), "{}", method.name);
            }
        }
        assert_eq!(ClientCapability::Terminal.tool(), "terminal/create");
        assert_eq!(ClientCapability::Terminal.methods().count(), 5);
    }

    #[test]
    fn capabilities_are_unique_and_offer_what_their_rows_say() {
        for (i, capability) in CAPABILITIES.iter().enumerate() {
            assert!(
                CAPABILITIES[..i]
                    .iter()
                    .all(|earlier| (earlier.side, earlier.path) != (capability.side, capability.path)),
                "{:?} twice",
                capability.path
            );
            assert_eq!(Capability::at(capability.side, capability.path), Some(*capability));
            for method in capability.methods() {
                assert_eq!(
                    method.side, capability.side,
                    "{} is received by who offers it",
                    method.name
                );
            }
        }
        for method in METHODS {
            if let Some(capability) = method.offer.capability() {
                assert!(CAPABILITIES.contains(&capability), "{}: {capability:?}", method.name);
            }
        }
        // The client capabilities a manifest declares are exactly the declarable client rows
        // (elicitation's are declared apart, in `metadata.agentacp.elicitation`).
        let declarable: Vec<Capability> = CAPABILITIES
            .iter()
            .copied()
            .filter(|c| c.side == Side::Client && c.declarable && c.path[0] != "elicitation")
            .collect();
        let declared: Vec<Capability> = ClientCapability::ALL.iter().map(|c| c.capability()).collect();
        assert_eq!(declarable, declared);
        for capability in ClientCapability::ALL {
            assert_eq!(capability.capability().path, capability.path());
        }
        assert!(Capability::holds(Side::Agent, &["sessionCapabilities"]));
        assert!(!Capability::holds(Side::Agent, &["loadSession"]));
        let close: Vec<&str> = Capability::SESSION_CLOSE.methods().map(|m| m.name).collect();
        assert_eq!(close, ["session/close"]);
        for (_, capability) in CLIENT_META {
            assert!(CAPABILITIES.contains(capability));
        }
    }

    #[test]
    fn a_set_offers_exactly_the_methods_of_its_capabilities() {
        let set = ClientMethods {
            write_text_file: true,
            ..ClientMethods::NONE
        };
        assert!(set.offers("fs/write_text_file"));
        assert!(!set.offers("fs/read_text_file"));
        assert!(!set.offers("terminal/create"));
        assert!(!set.offers("session/request_permission"), "not a capability's method");
        assert_eq!(set.tools(), ["fs/write_text_file"]);
        let all = ClientMethods::from_paths(|_| true);
        assert_eq!(all.methods().count(), 7);
        assert_eq!(all.intersect(set), set);
        assert_eq!(
            ClientMethods::from_paths(|path| path == ["terminal"]),
            ClientMethods {
                terminal: true,
                ..ClientMethods::NONE
            }
        );
    }
}
