//! MCP servers for sandboxed operators (feature `mcp`): the servers a client passes in
//! `session/new` (`mcpServers`), connected with `rmcp`, the official Rust MCP SDK, and their
//! tools, which the operator calls through governance (`Turn::mcp`, `agentacp::server`).
//!
//! - [`McpServerSpec`]: one server as the client described it (`stdio`, `http`, `sse`, `acp`),
//!   checked;
//! - [`McpTool`]: one tool a connected server offers, with the [`ToolKind`] its annotations
//!   give (default `other`) and the name governance knows it by ([`McpTool::governed_name`]:
//!   `mcp/<server>/<tool>`);
//! - `McpClients` (crate-internal): a session's servers, connected on first use, each in
//!   parallel and bounded; a stdio server runs in its own process group with a cleared
//!   environment (the variables the client gave, and `PATH`), and is stopped (SIGTERM, then
//!   SIGKILL) when the session or connection ends; a server of `"type": "acp"` is reached
//!   through the ACP connection itself (`tunnel.rs`: MCP-over-ACP).
//!
//! How it fits together: `docs/mcp.md`.

mod deep;
mod deep_http;
pub(crate) mod in_order;
pub mod shim;
pub(crate) mod tunnel;

use crate::methods::mcp_over_acp::governed_name;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, Tool};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceExt};
use serde_json::Value;

use self::tunnel::{AcpPeer, PeerRequest, Tunnel, Tunnels};
use crate::governance::ToolKind;
use crate::sandbox::Confinement;
use crate::subprocess::{self, AgentCommand, AgentProcess, ExitState};

/// How long connecting to one MCP server may take: starting it, and the MCP `initialize` and
/// `tools/list` (a server started through `npx` may first download itself).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one MCP tool call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a stdio MCP server has to exit after its input is closed, then after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// How many of a stdio server's stderr lines are kept for errors.
const STDERR_LINES: usize = 10;

/// One MCP server of a session, as the client described it (ACP `McpServer`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpServerSpec {
    /// A program started by the agent and spoken to over its stdio.
    Stdio {
        /// The name the client gave it.
        name: String,
        /// The program (an absolute path, or a name looked up in `PATH`).
        command: PathBuf,
        /// Its arguments.
        args: Vec<String>,
        /// The variables set in its environment.
        env: Vec<(String, String)>,
    },
    /// A Streamable HTTP endpoint (`"type": "http"`).
    Http {
        /// The name the client gave it.
        name: String,
        /// Its URL.
        url: String,
        /// Headers sent with every request.
        headers: Vec<(String, String)>,
    },
    /// A server-sent-events endpoint (`"type": "sse"`, deprecated by MCP).
    Sse {
        /// The name the client gave it.
        name: String,
        /// Its URL.
        url: String,
        /// Headers sent with every request.
        headers: Vec<(String, String)>,
    },
    /// A server the client itself provides over the ACP connection (`"type": "acp"`,
    /// MCP-over-ACP; needs `mcpCapabilities.acp`).
    Acp {
        /// The name the client gave it.
        name: String,
        /// The id the client routes `mcp/connect` by (`serverId`).
        server_id: String,
    },
}

impl McpServerSpec {
    /// Reads `mcpServers` of `session/new` / `session/load`: each entry checked, names unique.
    /// The error names the entry and what is wrong with it.
    pub fn parse_all(servers: &Value) -> Result<Vec<McpServerSpec>, String> {
        let entries = match servers {
            Value::Null => return Ok(Vec::new()),
            Value::Array(entries) => entries,
            _ => return Err("`mcpServers` is not an array".into()),
        };
        let mut specs: Vec<McpServerSpec> = Vec::with_capacity(entries.len());
        for (index, entry) in entries.iter().enumerate() {
            let spec = McpServerSpec::parse(entry).map_err(|why| format!("`mcpServers[{index}]`: {why}"))?;
            if specs.iter().any(|seen| seen.name() == spec.name()) {
                return Err(format!(
                    "`mcpServers[{index}]`: the name `{}` is given to two servers",
                    spec.name()
                ));
            }
            specs.push(spec);
        }
        Ok(specs)
    }

    fn parse(entry: &Value) -> Result<McpServerSpec, String> {
        let object = entry.as_object().ok_or("not an object")?;
        let text = |key: &str| -> Result<String, String> {
            object
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("`{key}` is missing or not a string"))
        };
        let name = text("name")?;
        if name.is_empty() || name.contains('/') || name.chars().any(char::is_control) {
            return Err(format!(
                "the name `{name}` is empty or has a `/` or a control character (tools are known as `mcp/<server>/<tool>`)"
            ));
        }
        let pairs = |key: &str| -> Result<Vec<(String, String)>, String> {
            match object.get(key) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|item| {
                        let name = item.get("name").and_then(Value::as_str);
                        let value = item.get("value").and_then(Value::as_str);
                        match (name, value) {
                            (Some(name), Some(value)) => Ok((name.to_string(), value.to_string())),
                            _ => Err(format!("an entry of `{key}` is not `{{\"name\": …, \"value\": …}}`")),
                        }
                    })
                    .collect(),
                Some(_) => Err(format!("`{key}` is not an array")),
            }
        };
        match object.get("type").and_then(Value::as_str) {
            None | Some("stdio") => {
                let command = text("command")?;
                if command.is_empty() {
                    return Err("`command` is empty".into());
                }
                let args = match object.get("args") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(args)) => args
                        .iter()
                        .map(|arg| {
                            arg.as_str()
                                .map(str::to_string)
                                .ok_or("an entry of `args` is not a string")
                        })
                        .collect::<Result<_, _>>()?,
                    Some(_) => return Err("`args` is not an array".into()),
                };
                let env = pairs("env")?;
                if let Some((key, _)) = env.iter().find(|(key, _)| key.is_empty() || key.contains(['=', '\0'])) {
                    return Err(format!("`env` names a variable `{key}` that cannot be set"));
                }
                Ok(McpServerSpec::Stdio {
                    name,
                    command: command.into(),
                    args,
                    env,
                })
            }
            Some(kind @ ("http" | "sse")) => {
                let url = text("url")?;
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!("`url` `{url}` is not an http:// or https:// URL"));
                }
                let headers = pairs("headers")?;
                Ok(if kind == "http" {
                    McpServerSpec::Http { name, url, headers }
                } else {
                    McpServerSpec::Sse { name, url, headers }
                })
            }
            Some("acp") => {
                let server_id = tunnel::server_id_of(entry)
                    .filter(|id| !id.is_empty())
                    .ok_or("`serverId` is missing, empty or not a string")?;
                Ok(McpServerSpec::Acp {
                    name,
                    server_id: server_id.to_string(),
                })
            }
            Some(other) => Err(format!("the transport `{other}` is not one this agent knows")),
        }
    }

    /// The name the client gave the server.
    pub fn name(&self) -> &str {
        match self {
            McpServerSpec::Stdio { name, .. }
            | McpServerSpec::Http { name, .. }
            | McpServerSpec::Sse { name, .. }
            | McpServerSpec::Acp { name, .. } => name,
        }
    }

    /// `stdio`, `http`, `sse` or `acp`.
    pub fn transport(&self) -> &'static str {
        match self {
            McpServerSpec::Stdio { .. } => "stdio",
            McpServerSpec::Http { .. } => "http",
            McpServerSpec::Sse { .. } => "sse",
            McpServerSpec::Acp { .. } => "acp",
        }
    }
}

/// A tool one of the session's MCP servers offers.
#[derive(Debug, Clone, PartialEq)]
pub struct McpTool {
    /// The server's name (as the client gave it).
    pub server: String,
    /// The tool's name on that server.
    pub name: String,
    /// Its human-readable title, when it has one (the server's word: a call is shown under
    /// [`governed_name`](McpTool::governed_name), with this beside it).
    pub title: Option<String>,
    /// What it does, as the server says.
    pub description: Option<String>,
    /// The JSON Schema of its arguments.
    pub input_schema: Value,
    /// From the server's annotations: `read` for a read-only tool, `delete` for a destructive
    /// one, `fetch` for one that reaches the open world; otherwise `other`. The server's word:
    /// governance hears it only where it makes a call stricter
    /// ([`decide_claimed`](crate::governance::decide_claimed)).
    pub kind: ToolKind,
}

impl McpTool {
    /// The name governance, the client and the audit log know the tool by:
    /// `mcp/<server>/<tool>` (listed in OPERATOR.md as `{kind: mcp, server, allow}`).
    pub fn governed_name(&self) -> String {
        governed_name(&self.server, &self.name)
    }

    fn from_rmcp(server: &str, tool: Tool) -> McpTool {
        let annotations = tool.annotations.as_ref();
        let hint = |pick: fn(&rmcp::model::ToolAnnotations) -> Option<bool>| annotations.and_then(pick) == Some(true);
        let kind = if hint(|a| a.read_only_hint) {
            ToolKind::Read
        } else if hint(|a| a.destructive_hint) {
            ToolKind::Delete
        } else if hint(|a| a.open_world_hint) {
            ToolKind::Fetch
        } else {
            ToolKind::Other
        };
        McpTool {
            server: server.to_string(),
            name: tool.name.to_string(),
            title: tool.title.clone().or_else(|| annotations.and_then(|a| a.title.clone())),
            description: tool.description.as_ref().map(|d| d.to_string()),
            input_schema: Value::Object((*tool.input_schema).clone()),
            kind,
        }
    }
}

/// A connected server: the MCP session, its process (stdio) or tunnel (acp), and its tools.
struct Connected {
    service: RunningService<RoleClient, ClientConfig>,
    process: Option<AgentProcess>,
    tunnel: Option<(Tunnel, AcpLink)>,
    tools: Vec<McpTool>,
}

/// The ACP connection a session's `acp` servers are reached through: the client, and where
/// its `mcp/message`s to us are routed.
#[derive(Clone)]
pub(crate) struct AcpLink {
    pub(crate) peer: Arc<dyn AcpPeer>,
    pub(crate) tunnels: Arc<Tunnels>,
}

/// A session's MCP servers: connected on first use, closed with the session.
pub(crate) struct McpClients {
    specs: Vec<McpServerSpec>,
    /// The session's folder: a stdio server's working folder.
    cwd: PathBuf,
    /// Whether connecting was tried (it is tried once per session).
    tried: bool,
    connected: BTreeMap<String, Connected>,
    /// The servers that could not be connected, and why.
    failed: BTreeMap<String, String>,
    /// The sandbox stdio servers run in (tier sandboxed, SANDBOX.md).
    sandbox: Option<Arc<Confinement>>,
    /// The ACP connection `acp` servers are reached through.
    link: Option<AcpLink>,
}

impl std::fmt::Debug for McpClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClients")
            .field("specs", &self.specs)
            .field("connected", &self.connected.keys().collect::<Vec<_>>())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl McpClients {
    /// The servers of a session whose folder is `cwd`; nothing is started yet.
    pub(crate) fn new(specs: Vec<McpServerSpec>, cwd: PathBuf) -> McpClients {
        McpClients {
            specs,
            cwd,
            tried: false,
            connected: BTreeMap::new(),
            failed: BTreeMap::new(),
            sandbox: None,
            link: None,
        }
    }

    /// Reaches the `acp` servers through `link` (the session's ACP connection).
    pub(crate) fn link(&mut self, link: AcpLink) {
        self.link = Some(link);
    }

    /// Runs the stdio servers in `sandbox`: confined to its mounts, with its memory limit
    /// and only its `env.passthrough` (plus the `env` the client gives each server).
    pub(crate) fn confine(&mut self, sandbox: Option<Arc<Confinement>>) {
        self.sandbox = sandbox;
    }

    /// How long one tool call may take: the sandbox's `limits.timeout_ms`, else
    /// [`CALL_TIMEOUT`].
    pub(crate) fn call_timeout(&self) -> Duration {
        call_timeout(self.sandbox.as_deref())
    }

    /// Connects every server (the first time only), side by side, each within
    /// [`CONNECT_TIMEOUT`]; one that fails is kept in [`McpClients::failures`].
    pub(crate) async fn connect_all(&mut self) {
        if self.tried {
            return;
        }
        let cwd = self.cwd.clone();
        let sandbox = self.sandbox.clone();
        let link = self.link.clone();
        let attempts = self.specs.iter().map(|spec| {
            let cwd = cwd.clone();
            let sandbox = sandbox.clone();
            let link = link.clone();
            async move {
                let result = tokio::time::timeout(CONNECT_TIMEOUT, connect(spec, &cwd, sandbox, link))
                    .await
                    .unwrap_or_else(|_| Err(format!("it did not answer within {CONNECT_TIMEOUT:?}")));
                (spec.name().to_string(), result)
            }
        });
        for (name, result) in futures_util::future::join_all(attempts).await {
            match result {
                Ok(connected) => {
                    tracing::debug!(server = name, tools = connected.tools.len(), "MCP server connected");
                    self.connected.insert(name, connected);
                }
                Err(reason) => {
                    tracing::warn!(server = name, %reason, "an MCP server could not be connected");
                    self.failed.insert(name, reason);
                }
            }
        }
        // Only once every attempt ended: a turn cancelled while connecting leaves it to the
        // next one (what it had started is stopped as it is dropped).
        self.tried = true;
    }

    /// The tools of the connected servers, server by server.
    pub(crate) fn tools(&self) -> Vec<McpTool> {
        self.connected.values().flat_map(|c| c.tools.iter().cloned()).collect()
    }

    /// The servers that could not be connected, and why.
    pub(crate) fn failures(&self) -> &BTreeMap<String, String> {
        &self.failed
    }

    /// `tool` of `server`, the peer to call it on, and whether that server is reached over the
    /// ACP connection (MCP-over-ACP); the error says what is not there, naming of the server's
    /// tools only those `offered` (governance's outright denials stay unnamed).
    pub(crate) fn find(
        &self,
        server: &str,
        tool: &str,
        offered: impl Fn(&McpTool) -> bool,
    ) -> Result<(McpTool, Peer<RoleClient>, bool), String> {
        let Some(connected) = self.connected.get(server) else {
            return Err(match self.failed.get(server) {
                Some(reason) => format!("the MCP server `{server}` could not be connected: {reason}"),
                None => format!(
                    "this session has no MCP server `{server}` (it has: {})",
                    self.specs
                        .iter()
                        .map(|s| format!("`{}`", s.name()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        };
        let found = connected.tools.iter().find(|t| t.name == tool).ok_or_else(|| {
            format!(
                "the MCP server `{server}` has no tool `{tool}` (it has: {})",
                connected
                    .tools
                    .iter()
                    .filter(|t| offered(t))
                    .map(|t| format!("`{}`", t.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
        Ok((
            found.clone(),
            connected.service.peer().clone(),
            connected.tunnel.is_some(),
        ))
    }

    /// Ends every MCP session and stops every stdio server (bounded).
    pub(crate) async fn close(&mut self) {
        let closing = std::mem::take(&mut self.connected)
            .into_values()
            .map(|mut connected| async move {
                if let Some(process) = &connected.process {
                    process.note_descendants();
                }
                let _ = tokio::time::timeout(STOP_GRACE, connected.service.close()).await;
                if let Some(process) = &connected.process {
                    process.stop(STOP_GRACE, STOP_GRACE).await;
                }
                if let Some((tunnel, link)) = connected.tunnel {
                    disconnect(&tunnel, &link);
                }
            });
        futures_util::future::join_all(closing).await;
    }
}

/// How long one tool call may take in `sandbox`: its `limits.timeout_ms`, else
/// [`CALL_TIMEOUT`].
fn call_timeout(sandbox: Option<&Confinement>) -> Duration {
    sandbox
        .and_then(|sandbox| sandbox.profile().limits.timeout)
        .unwrap_or(CALL_TIMEOUT)
}

/// Calls `tool` on `peer` with `arguments` (a JSON object), within `timeout`: the
/// result as JSON (`content`, `structuredContent`), or the tool's error text.
pub(crate) async fn call(
    peer: &Peer<RoleClient>,
    tool: &str,
    arguments: Value,
    timeout: Duration,
) -> Result<Value, String> {
    let arguments = match arguments {
        Value::Object(arguments) => arguments,
        Value::Null => serde_json::Map::new(),
        other => return Err(format!("MCP tool arguments must be a JSON object, not `{other}`")),
    };
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
    let result = tokio::time::timeout(timeout, peer.call_tool(params))
        .await
        .map_err(|_| format!("the MCP tool `{tool}` did not answer within {timeout:?}"))?
        .map_err(|error| format!("the MCP call failed: {error}"))?;
    let value = serde_json::to_value(&result).map_err(|error| error.to_string())?;
    if result.is_error == Some(true) {
        let text: Vec<&str> = value["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|block| block["text"].as_str())
            .collect();
        return Err(if text.is_empty() {
            format!("the MCP tool `{tool}` failed")
        } else {
            text.join("\n")
        });
    }
    Ok(value)
}

/// Starts (stdio) or reaches (http, sse) one server, then MCP `initialize` and `tools/list`.
async fn connect(
    spec: &McpServerSpec,
    cwd: &std::path::Path,
    sandbox: Option<Arc<Confinement>>,
    link: Option<AcpLink>,
) -> Result<Connected, String> {
    let config = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("agentacp", env!("CARGO_PKG_VERSION")),
    );
    match spec {
        McpServerSpec::Stdio {
            name,
            command,
            args,
            env,
        } => {
            // Nothing of ours passes through but `PATH` (to find the program's interpreter) or,
            // in a sandbox, its `env.passthrough`; what the server needs, the client names in
            // `env`.
            let mut program = AgentCommand::new(command).args(args).env_clear_all();
            match &sandbox {
                Some(sandbox) => {
                    for (key, value) in sandbox.passed_env() {
                        program = program.env(key, value);
                    }
                    program = program.confined(sandbox.clone());
                }
                None => program = program.allow_env("PATH"),
            }
            for (key, value) in env {
                program = program.env(key, value);
            }
            let program = program.current_dir(cwd);
            let (process, stdin, stdout) = subprocess::spawn(&program, STDERR_LINES)
                .map_err(|error| format!("cannot start `{}`: {error}", command.display()))?;
            // In order: a cancellation must not overtake the call it cancels. Its answers
            // guarded: one rmcp would drop unread fails its call at once.
            let stdout = deep::guard(name, stdout);
            let transport =
                in_order::InOrder::new(rmcp::transport::async_rw::AsyncRwTransport::new_client(stdout, stdin));
            let service = match config.serve(transport).await {
                Ok(service) => service,
                Err(error) => {
                    // Its exit and last words, when it is going away (bounded).
                    let (state, ()) = tokio::join!(
                        process.wait_exit(Duration::from_secs(1)),
                        process.stderr.wait_closed(Duration::from_secs(1))
                    );
                    let why = match state {
                        ExitState::Exited(Some(status)) => format!("it exited ({status}) before answering"),
                        _ => error.to_string(),
                    };
                    let stderr = process.stderr.lines();
                    process.stop(STOP_GRACE, STOP_GRACE).await;
                    return Err(if stderr.is_empty() {
                        format!("MCP initialize failed: {why}")
                    } else {
                        format!(
                            "MCP initialize failed: {why}; its last stderr lines: {}",
                            stderr.join(" | ")
                        )
                    });
                }
            };
            let tools = list_tools(name, &service).await?;
            Ok(Connected {
                service,
                process: Some(process),
                tunnel: None,
                tools,
            })
        }
        McpServerSpec::Http { name, url, headers } => {
            let service = config
                .serve(http_transport(name, url, headers)?)
                .await
                .map_err(|error| format!("MCP initialize over HTTP at `{url}` failed: {error}"))?;
            let tools = list_tools(name, &service).await?;
            Ok(Connected {
                service,
                process: None,
                tunnel: None,
                tools,
            })
        }
        McpServerSpec::Acp { name, server_id } => {
            let link = link.ok_or("this connection cannot reach MCP servers over ACP")?;
            let timeout = call_timeout(sandbox.as_deref());
            connect_over_acp(name, server_id, link, config, timeout).await
        }
        // rmcp has no client for MCP's legacy SSE transport (replaced by streamable HTTP).
        McpServerSpec::Sse { url, .. } => Err(format!(
            "`{url}` is an MCP server over the legacy SSE transport, which this agent does not speak (rmcp, the MCP SDK it uses, has no client for it); serve it over streamable HTTP (`\"type\": \"http\"`)"
        )),
    }
}

/// `mcp/connect` to the client for `server_id`, then rmcp's client on the tunnel of the
/// `connectionId` it answers: MCP `initialize` and `tools/list` as `mcp/message`s, each
/// message within `timeout` (a tool call's).
async fn connect_over_acp(
    name: &str,
    server_id: &str,
    link: AcpLink,
    config: ClientConfig,
    timeout: Duration,
) -> Result<Connected, String> {
    let (service, tunnel) = open_over_acp(server_id, &link, config, timeout).await?;
    // Disconnected unless its tools are listed: on an error, and when this future is dropped
    // before (the connect timeout, a cancelled turn).
    let mut listing = Opening {
        tunnel: &tunnel,
        link: &link,
        settled: false,
    };
    let listed = list_tools(name, &service).await;
    listing.settled = true;
    drop(listing);
    let tools = match listed {
        Ok(tools) => tools,
        Err(why) => {
            let _ = tokio::time::timeout(STOP_GRACE, service.cancel()).await;
            disconnect(&tunnel, &link);
            return Err(why);
        }
    };
    Ok(Connected {
        service,
        process: None,
        tunnel: Some((tunnel, link)),
        tools,
    })
}

/// An MCP connection over ACP to the server `server_id` of the peer `link` reaches:
/// `mcp/connect`, then the rmcp client `handler` on the tunnel of the `connectionId` it
/// answers (MCP `initialize` done), each of its requests bounded by `timeout`. The tunnel is
/// routed by `link.tunnels` until [`disconnect`]ed.
pub(crate) async fn open_over_acp<H: rmcp::ClientHandler>(
    server_id: &str,
    link: &AcpLink,
    handler: H,
    timeout: Duration,
) -> Result<(RunningService<RoleClient, H>, Tunnel), String> {
    let answer = link
        .peer
        .request(PeerRequest::plain(
            tunnel::CONNECT,
            serde_json::json!({"serverId": server_id}),
            CONNECT_TIMEOUT,
        ))
        .await
        .map_err(|error| format!("`mcp/connect` failed: {}", error.message))?;
    let connection_id = tunnel::connection_id_of(&answer)
        .filter(|id| !id.is_empty())
        .ok_or_else(|| format!("`mcp/connect` answered without a `connectionId`: {answer}"))?
        .to_string();
    let (tunnel, transport) = Tunnel::open::<RoleClient>(connection_id, link.peer.clone(), timeout);
    if !link.tunnels.insert(tunnel.clone()) {
        // Not disconnected: that would name the connection already open under this id.
        return Err(format!(
            "`mcp/connect` answered the `connectionId` `{}`, which names a connection already open",
            tunnel.id()
        ));
    }
    // Disconnected unless it opens: on an error, and when this future is dropped before
    // (a connect timeout, a cancelled turn).
    let mut opening = Opening {
        tunnel: &tunnel,
        link,
        settled: false,
    };
    let served = handler.serve(transport).await;
    opening.settled = true;
    drop(opening);
    match served {
        Ok(service) => Ok((service, tunnel)),
        Err(error) => {
            disconnect(&tunnel, link);
            Err(format!("MCP initialize over ACP failed: {error}"))
        }
    }
}

/// A tunnel being opened ([`open_over_acp`]) or its tools listed ([`connect_over_acp`]):
/// disconnected if dropped before it settled.
struct Opening<'a> {
    tunnel: &'a Tunnel,
    link: &'a AcpLink,
    /// MCP `initialize` was answered, or failed: the caller takes it from there.
    settled: bool,
}

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        if tokio::runtime::Handle::try_current().is_ok() {
            disconnect(self.tunnel, self.link);
        } else {
            // Outside a runtime (its shutdown) nothing can be sent any more.
            self.link.tunnels.remove(self.tunnel.id());
        }
    }
}

/// Ends `tunnel` and sends `mcp/disconnect` for it, without waiting for the answer (bounded,
/// in a task of its own: the session may be closing in the middle of reading the client's
/// messages, where that answer would be read).
pub(crate) fn disconnect(tunnel: &Tunnel, link: &AcpLink) {
    link.tunnels.remove(tunnel.id());
    let params = serde_json::json!({"connectionId": tunnel.id()});
    let peer = link.peer.clone();
    tokio::spawn(async move {
        if let Err(error) = peer
            .request(PeerRequest::plain(tunnel::DISCONNECT, params, STOP_GRACE))
            .await
        {
            tracing::debug!(%error, "`mcp/disconnect` was not answered");
        }
    });
}

/// rmcp's streamable-HTTP client for the server `server` at `url`, sending `headers` (an
/// `Authorization` among them) with every request, its answers read by [`deep_http`] first.
/// `https://` with feature `tls`: rustls on the ring provider (installed as
/// the process default unless the application installed one), certificates verified against
/// the platform's roots (on Linux the system store, or the file `SSL_CERT_FILE` names).
fn http_transport(
    server: &str,
    url: &str,
    headers: &[(String, String)],
) -> Result<rmcp::transport::StreamableHttpClientTransport<deep_http::GuardedHttp>, String> {
    if url.starts_with("https://") && cfg!(not(feature = "tls")) {
        return Err(format!(
            "`{url}`: an `https://` MCP server needs agentacp's cargo feature `tls` (this agent was built without it)"
        ));
    } else if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!("`{url}` is not an http:// or https:// URL"));
    }
    let mut custom = std::collections::HashMap::new();
    for (name, value) in headers {
        let header = http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("`{name}` is not an HTTP header name"))?;
        let value = http::HeaderValue::from_str(value)
            .map_err(|_| format!("the value of header `{name}` is not valid in HTTP"))?;
        custom.insert(header, value);
    }
    let config = rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(url)
        .custom_headers(custom);
    Ok(rmcp::transport::StreamableHttpClientTransport::with_client(
        deep_http::GuardedHttp::new(server)?,
        config,
    ))
}

async fn list_tools(server: &str, service: &RunningService<RoleClient, ClientConfig>) -> Result<Vec<McpTool>, String> {
    let tools = service
        .list_all_tools()
        .await
        .map_err(|error| format!("listing its tools failed: {error}"))?;
    Ok(tools.into_iter().map(|tool| McpTool::from_rmcp(server, tool)).collect())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::future::BoxFuture;
    use crate::jsonrpc::{RpcError, codes};

    /// A peer that answers `mcp/connect` (with `c-1`, or `c-2` once initializing), answers MCP
    /// `initialize` when `initializes`, never answers another `mcp/message` (until it is
    /// cancelled), and says when it is asked `mcp/disconnect`.
    struct Stalls {
        initializes: bool,
        disconnected: tokio::sync::mpsc::UnboundedSender<Value>,
    }

    impl Stalls {
        /// A link to a peer that stalls at MCP `initialize`, or (`initializes`) at
        /// `tools/list`; and what it is sent with `mcp/disconnect`.
        fn link(initializes: bool) -> (AcpLink, tokio::sync::mpsc::UnboundedReceiver<Value>) {
            let (disconnected, disconnects) = tokio::sync::mpsc::unbounded_channel();
            let link = AcpLink {
                peer: Arc::new(Stalls {
                    initializes,
                    disconnected,
                }),
                tunnels: Arc::default(),
            };
            (link, disconnects)
        }
    }

    impl AcpPeer for Stalls {
        fn request(&self, request: tunnel::PeerRequest) -> BoxFuture<'static, Result<Value, RpcError>> {
            let tunnel::PeerRequest {
                method,
                params,
                cancelled,
                ..
            } = request;
            let (disconnected, initializes) = (self.disconnected.clone(), self.initializes);
            Box::pin(async move {
                match (method, params["method"].as_str()) {
                    (tunnel::CONNECT, _) => Ok(json!({"connectionId": if initializes { "c-2" } else { "c-1" }})),
                    (tunnel::DISCONNECT, _) => {
                        let _ = disconnected.send(params);
                        Ok(json!({}))
                    }
                    (_, Some("initialize")) if initializes => Ok(json!({
                        "protocolVersion": "2025-06-18",
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "stalls", "version": "0"},
                    })),
                    _ => {
                        cancelled.await;
                        Err(RpcError::new(codes::REQUEST_CANCELLED, "cancelled"))
                    }
                }
            })
        }

        fn notify(&self, _: &'static str, _: Value) -> BoxFuture<'static, ()> {
            Box::pin(async {})
        }
    }

    /// Asserts that the connection `id` was disconnected: `mcp/disconnect` sent (seen in
    /// `disconnects`) and its tunnel no longer routed in `link`.
    async fn assert_disconnected(
        disconnects: &mut tokio::sync::mpsc::UnboundedReceiver<Value>,
        link: &AcpLink,
        id: &str,
    ) {
        let disconnect = tokio::time::timeout(Duration::from_secs(10), disconnects.recv())
            .await
            .expect("mcp/disconnect sent in time");
        assert_eq!(disconnect, Some(json!({"connectionId": id})));
        assert!(link.tunnels.remove(id).is_none(), "the tunnel is still routed");
    }

    /// Given up on while MCP `initialize` waits (a connect timeout, a cancelled turn), an
    /// MCP connection over ACP is disconnected: `mcp/disconnect` sent, the tunnel no longer
    /// routed. Before, both stayed until the connection ended.
    #[tokio::test]
    async fn an_mcp_connection_over_acp_given_up_on_while_opening_is_disconnected() {
        let (link, mut disconnects) = Stalls::link(false);
        let opening = tokio::time::timeout(
            Duration::from_millis(200),
            open_over_acp("s-1", &link, (), CALL_TIMEOUT),
        );
        assert!(opening.await.is_err(), "initialize is never answered");
        assert_disconnected(&mut disconnects, &link, "c-1").await;
    }

    /// Given up on while its tools are listed (initialized already), an MCP connection over
    /// ACP is disconnected too. Before, the tunnel stayed routed and the client's server ran
    /// until the ACP connection ended; a next turn opened another.
    #[tokio::test]
    async fn an_mcp_connection_over_acp_given_up_on_while_listing_its_tools_is_disconnected() {
        let (link, mut disconnects) = Stalls::link(true);
        let connecting = connect_over_acp("n", "s-2", link.clone(), ClientConfig::default(), CALL_TIMEOUT);
        let connecting = tokio::time::timeout(Duration::from_millis(500), connecting);
        assert!(connecting.await.is_err(), "tools/list is never answered");
        assert_disconnected(&mut disconnects, &link, "c-2").await;
    }

    /// A `connectionId` the client gives a second connection while the first is open is
    /// refused: before, the second replaced the first's routing, and the first's messages
    /// went to the second's rmcp client.
    #[tokio::test]
    async fn a_connection_id_already_open_is_refused_and_the_open_one_kept() {
        let (link, _disconnects) = Stalls::link(true);
        let (first, _) = open_over_acp("s-2", &link, ClientConfig::default(), CALL_TIMEOUT)
            .await
            .expect("the first connection opens");
        let second = open_over_acp("s-2", &link, ClientConfig::default(), CALL_TIMEOUT).await;
        let Err(why) = second else {
            panic!("a second connection under `c-2` was opened");
        };
        assert!(why.contains("`c-2`, which names a connection already open"), "{why}");
        assert!(
            link.tunnels.remove("c-2").is_some(),
            "the open connection is still routed"
        );
        drop(first);
    }

    #[test]
    fn a_stdio_and_an_http_server_are_read_with_their_fields() {
        let specs = McpServerSpec::parse_all(&json!([
            {"name": "files", "command": "/bin/fs-server", "args": ["--root", "."],
             "env": [{"name": "TOKEN", "value": "t"}]},
            {"type": "http", "name": "web", "url": "https://mcp.example/mcp",
             "headers": [{"name": "Authorization", "value": "Bearer x"}]},
            {"type": "acp", "name": "editor-tools", "serverId": "s-1"},
        ]))
        .unwrap();
        assert_eq!(
            specs,
            [
                McpServerSpec::Stdio {
                    name: "files".into(),
                    command: "/bin/fs-server".into(),
                    args: vec!["--root".into(), ".".into()],
                    env: vec![("TOKEN".into(), "t".into())],
                },
                McpServerSpec::Http {
                    name: "web".into(),
                    url: "https://mcp.example/mcp".into(),
                    headers: vec![("Authorization".into(), "Bearer x".into())],
                },
                McpServerSpec::Acp {
                    name: "editor-tools".into(),
                    server_id: "s-1".into(),
                },
            ]
        );
        assert_eq!(McpServerSpec::parse_all(&Value::Null).unwrap(), []);
    }

    #[test]
    fn a_bad_entry_is_refused_naming_it() {
        for (servers, expected) in [
            (json!({}), "not an array"),
            (json!([{"command": "x"}]), "`mcpServers[0]`: `name` is missing"),
            (json!([{"name": "a/b", "command": "x"}]), "has a `/`"),
            (json!([{"name": "a", "command": ""}]), "`command` is empty"),
            (
                json!([{"name": "a", "command": "x", "args": [1]}]),
                "`args` is not a string",
            ),
            (
                json!([{"name": "a", "command": "x", "env": [{"name": "A=B", "value": ""}]}]),
                "cannot be set",
            ),
            (
                json!([{"type": "http", "name": "a", "url": "file:///etc/passwd"}]),
                "is not an http",
            ),
            (
                json!([{"type": "acp", "name": "a", "serverId": ""}]),
                "`serverId` is missing, empty",
            ),
            (
                json!([{"type": "carrier-pigeon", "name": "a"}]),
                "`carrier-pigeon` is not one",
            ),
            (
                json!([{"name": "a", "command": "x"}, {"name": "a", "command": "y"}]),
                "`mcpServers[1]`: the name `a` is given to two servers",
            ),
        ] {
            let error = McpServerSpec::parse_all(&servers).unwrap_err();
            assert!(error.contains(expected), "{servers}: {error}");
        }
    }
}
