//! A typed ACP client: spawns an agent as a subprocess and talks to it over its stdio (or,
//! feature `websocket`, dials a remote one).
//!
//! ```ignore
//! use agentacp::client::{AgentCommand, Client, ClientOptions, PromptEvent};
//!
//! // An API key the agent reads from its environment must be let through (see below).
//! let agent = AgentCommand::new("my-agent").allow_env("OPENAI_API_KEY");
//! let client = Client::connect(agent, ClientOptions::default()).await?;
//! let session = client.new_session(std::path::Path::new("/work")).await?;
//! let mut turn = client.prompt_text(&session, "hello").await?;
//! while let Some(event) = turn.next().await {
//!     match event? {
//!         PromptEvent::Update(update) => println!("{}", update.one_line()),
//!         PromptEvent::Stop(reason) => println!("stopped: {reason:?}"),
//!     }
//! }
//! client.close().await;
//! ```
//!
//! Safety rails:
//! - every wait on the agent is bounded (see [`ClientOptions`] for the timeouts and defaults);
//! - requests still waiting fail when the agent closes its stdout or exits, with its exit
//!   status and the last lines of its stderr ([`ClientError::AgentExited`]);
//! - the agent runs in its own process group with a cleared environment ([`AgentCommand`]);
//!   [`Client::close`] closes its stdin, waits [`ClientOptions::exit_grace`], SIGTERMs the
//!   group, waits [`ClientOptions::kill_grace`], SIGKILLs the group and reaps it. Dropping the
//!   client without `close` (an early `?`, a panic) stops the group before `drop` returns:
//!   SIGTERM, up to `kill_grace`, SIGKILL — so what the agent started (an npm launcher's real
//!   binary) does not outlive it, even when the runtime goes away next;
//! - a message over [`ClientOptions::max_frame_bytes`] is discarded without being buffered
//!   whole; if it answered one of our requests that request fails, the connection goes on;
//!   lines that are not JSON-RPC are logged and ignored;
//! - every `session/request_permission` goes to the [`PermissionHandler`]; the default,
//!   [`RejectAll`], rejects; a timeout or a cancel of the turn rejects too.
//!
//! - the agent's `fs/*` and `terminal/*` requests go to [`ClientHandlers`] (default: none
//!   offered, `-32601`); paths and a terminal's `cwd` must be absolute and inside the
//!   workspace root before any handler sees them ([`Builtin`] implements them all);
//! - with a [`Governance`](crate::governance::Governance) binding, `allow`/`deny` answer permission requests without asking;
//!   every tool call is mirrored to the audit log with its approval ([`ClientOptions::audit`]);
//! - `session/load` history arrives as [`PromptEvent::Replay`] (untrusted, not audited as live).
//!
//! - authentication: the agent's `authMethods` are read at `initialize`
//!   ([`Client::auth_methods`], including the `env_var` kind of later schemas); by default
//!   ([`AuthPolicy::EnvVar`]) an `env_var` method whose variables are all set in the agent's
//!   environment is used at connect, else nothing is; [`ClientOptions::auth`] chooses
//!   otherwise, [`Client::authenticate`] and [`Client::logout`] are there to call. The
//!   agent's environment is cleared: pass an API key with [`AgentCommand::allow_env`];
//! - an agent's error answer keeps its `data` ([`ClientError::Rpc`], shown by `Display`).
//! - remote agents (feature `websocket`): `Client::connect_websocket` dials one over
//!   `ws://` / `wss://` and is otherwise the same client (events, timeouts, permissions,
//!   governance, audit, wire tap); a bearer token goes on the upgrade
//!   (`websocket::Dial::token`) or in `authenticate`
//!   ([`Client::authenticate_with_token`], [`AuthPolicy::Token`]).
//!
//! - sessions beyond `new` / `load` / `prompt`: [`Client::list_sessions`] (one page) and
//!   [`Client::list_all_sessions`] (bounded), [`Client::resume_session`],
//!   [`Client::close_session`] (cancels a running turn first), [`Client::delete_session`],
//!   [`Client::set_mode`], [`Client::set_config_option`]; each typed with the revision's
//!   request and response, bounded by the request timeout, and refused here with
//!   [`ClientError::NotOffered`], nothing sent, when the agent did not offer it (its
//!   `sessionCapabilities` at `initialize`; the session's `modes` / `configOptions`);
//! - [`Client::session_state`]: the modes, config options and slash commands the agent gave for
//!   a session, kept up to date by its `current_mode_update`, `config_option_update` and
//!   `available_commands_update` (whether or not a turn runs);
//! - extension methods (`_`-prefixed): [`Client::ext_request`] and [`Client::ext_notification`]
//!   send them; the agent's reach [`ClientOptions::extensions`] ([`ExtensionHandler`];
//!   without one, requests are `-32601`); params and results go as they are, `_meta` included.

mod auth;
mod calls;
mod connection;
mod context;
mod elicitation;
mod error;
mod events;
mod extensions;
pub mod fs;
mod handlers;
#[cfg(feature = "mcp")]
mod mcp;
mod operator;
mod options;
mod permission;
mod queue;

mod reader;
mod render;
mod session;
mod state;
mod stream;
mod tap;
pub mod terminal;

pub use crate::oversight::{
    BoxFuture, DeclineAll, ElicitationHandler, ElicitationModes, ElicitationOutcome, PermissionDecision,
    PermissionHandler, RejectAll, TERMINAL_TOOL,
};
pub use crate::subprocess::{AgentCommand, DEFAULT_ENV_ALLOW};
pub use auth::{AuthChooser, AuthEnvVar, AuthKind, AuthMethodInfo, AuthPolicy, UnpassedVar, unpassed_env_advice};
pub use calls::LIST_PAGES_MAX;
pub use connection::Client;
pub use context::ClientContext;
pub use error::ClientError;
pub use events::{PromptEvent, Update};
pub use extensions::ExtensionHandler;
pub use handlers::{Builtin, ClientHandlers, HandlerResult, NoHandlers, decode, encode};
#[cfg(feature = "mcp")]
pub use mcp::AcpMcpServer;
pub use operator::{ClientOperator, Connect};
pub use options::{ClientOptions, Protocol};
pub use render::{ONE_LINE_MAX, clip};
pub use session::{SessionState, config_value, select_values};
pub use stream::PromptStream;
pub use tap::{Direction, WireTap};
