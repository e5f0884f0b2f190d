//! The ACP v2 suite (`--protocol 2`): the same driver (stdio, WebSocket, Streamable HTTP), and
//! checks of what v2 changes: `initialize`'s shape (and, with `--manifest`, the manifest's
//! parts of it), the prompt lifecycle as `state_update`s, message ids, tool calls created by
//! their first update, cancel, resume with replay, `auth/login` and `auth/logout`, the
//! session baseline (`session/list`, `session/close`) and `session/delete`,
//! `session/set_config_option`, batches, `$/cancel_request`, the shapes of plans, terminals
//! and tool call content, elicitation, unknown fields, and every frame against the v2 schema
//! the user gives.

mod jsonrpc;
mod manifest;
pub mod schema;
mod sessions;
mod updates;
mod wire;

use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use serde_json::{Value, json};

use crate::checks::{QUIET, refused_for_auth, remote_refusal};
use crate::driver::{ReadError, error_code};
use crate::{Check, Config, Context, Needs, Outcome, trim};
use wire::{Turn, Wire, is_idle_of, is_running_of, is_state, run_turn};

/// The version the suite asks for.
const VERSION: u64 = 2;
/// JSON-RPC's "Method not found".
const METHOD_NOT_FOUND: i64 = -32601;
/// The check that reports a version other than 2; every other check skips then.
const INITIALIZE: &str = "v2.initialize";
/// At most this many invalid frames are named in `v2.schema`'s evidence.
const FRAMES_NAMED: usize = 2;

/// The v2 state of a run: the schema, the version the agent chose, the frames it failed.
pub(crate) struct State {
    schema: Option<schema::Schema>,
    negotiated: OnceLock<u64>,
    invalid: Mutex<Vec<String>>,
}

impl State {
    /// The state of a run of `config`: its schema read (an error says why it cannot be).
    pub fn new(config: &Config) -> Result<State, String> {
        Ok(State {
            schema: config.schema.as_deref().map(schema::Schema::read).transpose()?,
            negotiated: OnceLock::new(),
            invalid: Mutex::new(Vec::new()),
        })
    }

    /// Checks a frame the agent sent (`answering`: the method it answers) against the schema.
    fn observe(&self, frame: &Value, answering: Option<&str>) {
        let Some(schema) = &self.schema else { return };
        let errors = schema.errors(frame, answering);
        if !errors.is_empty()
            && let Ok(mut invalid) = self.invalid.lock()
        {
            invalid.push(format!("{} in {}", errors.join("; "), trim(&frame.to_string())));
        }
    }
}

/// Why `check` does not run: the agent chose another version than 2 (`v2.initialize` says so).
pub(crate) fn gate(context: &Context, check: &Check) -> Option<Outcome> {
    let negotiated = *context.v2.negotiated.get()?;
    (negotiated != VERSION && check.id != INITIALIZE).then(|| {
        Outcome::Skip(format!(
            "the agent chose protocol version {negotiated}, not 2 ({INITIALIZE})"
        ))
    })
}

/// Every v2 check, in order.
pub fn all() -> Vec<Check> {
    let check = |id, title, rule, needs, run| Check {
        id,
        title,
        rule,
        needs,
        run,
    };
    vec![
        check(
            INITIALIZE,
            "initialize at version 2 is answered in v2's shape",
            "v2 Initialization: asked for version 2, an agent that serves it answers protocolVersion 2 with the required info (name, version) and capabilities as objects",
            Needs::Agent,
            initialize,
        ),
        check(
            "v2.version-newer",
            "a newer version is negotiated down to 2 or the agent's latest",
            "v2 Initialization, version negotiation: a version the agent does not serve is answered with its latest (an integer, not above the one asked)",
            Needs::Agent,
            version_newer,
        ),
        check(
            "v2.manifest-capabilities",
            "capabilities.session are the manifest's",
            "AIP-44 / runtime contract on v2: the session capabilities are the manifest's effective ones as v2 marks them (prompt and mcp markers as objects, delete, additionalDirectories; a bridge may offer less). Skipped without --manifest",
            Needs::Agent,
            manifest::capabilities,
        ),
        check(
            "v2.manifest-info",
            "info is the manifest's",
            "AIP-44 / runtime contract on v2: info is the agentInfo scaffold-aip explain computes for the manifest. Skipped without --manifest",
            Needs::Agent,
            manifest::info,
        ),
        check(
            "v2.manifest-meta-aip44",
            "_meta.aip44 is the manifest's",
            "AIP-44 / runtime contract on v2: _meta.aip44 (revision, tier, operator) is the manifest's, as on v1. Skipped without --manifest",
            Needs::Agent,
            manifest::meta,
        ),
        check(
            "v2.auth-login",
            "auth/login is served when authMethods are advertised",
            "v2 Initialization / Authentication: an agent that advertises authMethods must support auth/login (and auth/logout)",
            Needs::Agent,
            auth_login,
        ),
        check(
            "v2.auth-logout",
            "auth/logout is answered when authMethods are advertised",
            "v2 Authentication: every agent implements auth/logout (one without authentication state answers an empty result); a client calls it only when authMethods is not empty",
            Needs::Agent,
            auth_logout,
        ),
        check(
            "v2.session-new",
            "session/new opens a session",
            "v2 Session setup: session/new with an absolute cwd is answered with a sessionId",
            Needs::Session,
            session_new,
        ),
        check(
            "v2.unknown-session",
            "a prompt for an unknown session is refused",
            "v2 Prompt lifecycle, as on v1 (session.unknown-session, the same code): a prompt naming a session the agent never made is refused with an error (with --manifest -32002, the runtime contract's), and the connection goes on",
            Needs::Agent,
            crate::checks::unknown_session,
        ),
        check(
            "v2.relative-cwd",
            "session/new with a relative cwd is refused",
            "v2 Session setup, as on v1 (session.relative-cwd, the same code): cwd must be an absolute path",
            Needs::Session,
            crate::checks::relative_cwd,
        ),
        check(
            "v2.cwd-dotdot",
            "a cwd escaping the workspace root with .. is refused",
            "AIP-44 runtime contract on v2, as on v1 (session.cwd-dotdot, the same code): sessions are confined to the workspace root after canonicalisation. Skipped without --manifest",
            Needs::Session,
            crate::checks::cwd_dotdot,
        ),
        check(
            "v2.cwd-symlink",
            "a cwd escaping the workspace root through a symlink is refused",
            "AIP-44 runtime contract on v2, as on v1 (session.cwd-symlink, the same code): the same, with symlinks resolved. Skipped without --manifest, and off Unix",
            Needs::Session,
            crate::checks::cwd_symlink,
        ),
        check(
            "v2.session-list",
            "session/list lists sessions in the shape asked",
            "v2 Session setup, baseline: advertising capabilities.session commits the agent to session/list; each entry has a sessionId and an absolute cwd, and a cwd filter is honoured",
            Needs::Session,
            sessions::list,
        ),
        check(
            "v2.session-close",
            "session/close closes a session",
            "v2 Session setup, baseline: advertising capabilities.session commits the agent to session/close, answered with a result; the connection goes on",
            Needs::Session,
            sessions::close,
        ),
        check(
            "v2.session-delete",
            "session/delete removes the session from session/list",
            "v2 Session setup: an agent advertising capabilities.session.delete answers session/delete, after which session/list no longer lists the session",
            Needs::Session,
            sessions::delete,
        ),
        check(
            "v2.set-config-option",
            "session/set_config_option sets the value and answers every option",
            "v2 Session config options: session/set_config_option (configId, type, value) is answered with the full configOptions, the option set holding its new currentValue",
            Needs::Session,
            sessions::set_config_option,
        ),
        check(
            "v2.prompt-lifecycle",
            "the prompt is acknowledged; the turn runs and ends idle with a stop reason",
            "v2 Prompt lifecycle: session/prompt only acknowledges (no stopReason); the user message is reported; state_update running precedes the work, and the turn ends with state_update idle carrying the stopReason",
            Needs::Session,
            prompt_lifecycle,
        ),
        check(
            "v2.message-ids",
            "every message update carries a messageId",
            "v2 Prompt lifecycle / Content: user, agent and thought messages and their chunks carry the required messageId",
            Needs::Session,
            message_ids,
        ),
        check(
            "v2.tool-calls",
            "tool calls are created by their first tool_call_update",
            "v2 Tool calls: there is no tool_call update; the first tool_call_update of an id creates the call, and a permission request has a title and names a call already created",
            Needs::Session,
            tool_calls,
        ),
        check(
            "v2.cancel",
            "session/cancel ends the turn idle with cancelled",
            "v2 Cancellation: after session/cancel the agent reports state_update idle with stopReason cancelled",
            Needs::Session,
            cancel,
        ),
        check(
            "v2.resume-replay",
            "session/resume with replayFrom start replays the history before its answer",
            "v2 Session setup, resuming: with replayFrom {type: start} the whole conversation is replayed as session/update before the answer (skipped when the agent does not serve replay)",
            Needs::Session,
            resume_replay,
        ),
        check(
            "v2.unknown-fields",
            "unknown fields and values from the client are tolerated",
            "v2 Extensibility: implementations ignore fields and enum values they do not know; initialize, session/new and session/prompt carrying some still work",
            Needs::Session,
            unknown_fields,
        ),
        check(
            "v2.batch",
            "a batch on stdio is answered entry by entry",
            "v2 Transports / JSON-RPC 2.0 batch: a line may be a batch array; each request in it is answered once (as lines or as one array), a notification in it never, an entry that is not a request with -32600 and id null; the connection goes on",
            Needs::Session,
            jsonrpc::batch_check,
        ),
        check(
            "v2.cancel-request",
            "$/cancel_request is never answered; the request it names is answered once",
            "v2 Cancellation ($/cancel_request): a notification, so never answered (not even for an id never sent); the cancelled request still gets exactly one answer (its result or an error, -32800 when cancelled); the connection goes on",
            Needs::Session,
            jsonrpc::cancel_request,
        ),
        check(
            "v2.update-shapes",
            "plan_update, terminal updates and tool call content chunks have their shape",
            "v2 Plans, Terminals, Tool calls: a plan_update carries a plan with a type and a planId (an items plan: entries with content, priority, status); terminal_update a terminalId (output as base64 data, exitStatus); terminal_output_chunk a terminalId and base64 data; tool_call_content_chunk a content item for a call already created. Skipped when the turns send none",
            Needs::Session,
            updates::shapes,
        ),
        check(
            "v2.elicitation",
            "an elicitation is well formed, and the turn completes after the kit declines it",
            "v2 Elicitation: elicitation/create has a message, a mode (form: requestedSchema; url: elicitationId and url) and a scope (the session or a request); declined, the turn still ends idle; elicitation/complete names an elicitation made. Skipped when the agent does not elicit",
            Needs::Session,
            updates::elicitation,
        ),
        check(
            "v2.schema",
            "every frame the agent sent matches the v2 schema",
            "v2 schema (--schema FILE): each message the agent sent during the run, and its params or result, validate against the definitions the schema annotates for its method",
            Needs::Session,
            schema_check,
        ),
    ]
}

/// `initialize` params of the kit's v2 client (`extra`: fields merged into them).
fn init_params(version: u64) -> Value {
    json!({
        "protocolVersion": version,
        "info": {"name": "scaffold-aip-conform", "version": env!("CARGO_PKG_VERSION")},
        "capabilities": {},
    })
}

/// `initialize` with `params`; the result.
fn initialize_with(wire: &mut Wire<'_>, params: Value) -> Result<Value, String> {
    let (_, response) = wire.call(json!(0), "initialize", params)?;
    response
        .get("result")
        .cloned()
        .ok_or_else(|| format!("initialize failed: {}", trim(&response.to_string())))
}

/// `initialize` at 2, then `auth/login` with `--auth`; the `initialize` result.
fn start(context: &Context, wire: &mut Wire<'_>) -> Result<Value, String> {
    let result = initialize_with(wire, init_params(VERSION))?;
    if let Some(method) = &context.config.auth {
        login(wire, method)?;
    }
    Ok(result)
}

/// `auth/login` with `method`; `Err` when refused.
fn login(wire: &mut Wire<'_>, method: &str) -> Result<(), String> {
    let (_, response) = wire.call(json!("login"), "auth/login", json!({"methodId": method}))?;
    match response.get("error") {
        None => Ok(()),
        Some(error) => Err(format!("auth/login with {method} failed: {}", trim(&error.to_string()))),
    }
}

/// A started agent, initialized at 2 (and logged in with `--auth`), as a bare connection: for
/// the checks the v2 suite shares with v1's ([`crate::checks`]).
pub(crate) fn ready(context: &Context) -> Result<(crate::Peer, Value), String> {
    let mut wire = Wire::open(context)?;
    let init = start(context, &mut wire)?;
    Ok((wire.peer, init))
}

/// `session/new` params of the kit's.
fn new_session_params(context: &Context) -> Value {
    json!({"cwd": context.agent_root(), "mcpServers": []})
}

/// A started agent with a session in the workspace root.
fn with_session(context: &Context) -> Result<(Wire<'_>, Value, String), String> {
    let mut wire = Wire::open(context)?;
    let init = start(context, &mut wire)?;
    let (_, response) = wire.call(json!("new-session"), "session/new", new_session_params(context))?;
    let session = crate::checks::session_id(context, &response)?;
    Ok((wire, init, session))
}

/// The preflight of the v2 suite: start (or connect), `initialize` at 2 (noting the version
/// chosen), `auth/login` with `--auth`, and a session to learn whether sessions are refused
/// for want of authentication.
pub(crate) fn preflight(context: &Context) -> Result<(), String> {
    let mut wire = Wire::open(context)?;
    let init = initialize_with(&mut wire, init_params(VERSION))?;
    if let Some(version) = init["protocolVersion"].as_u64() {
        let _ = context.v2.negotiated.set(version);
        if version != VERSION {
            return Ok(());
        }
    }
    let methods = crate::auth::Method::all_of(&init);
    if let Some(id) = &context.config.auth {
        crate::auth::check_choice(&methods, id, |var| context.agent_has_env(var))?;
        login(&mut wire, id)?;
    }
    context.auth.set_methods(methods);
    remote_refusal(context, &mut wire.peer)?;
    if let Ok((_, response)) = wire.call(json!("new-session"), "session/new", new_session_params(context)) {
        context.auth.note_sessions(&response);
    }
    Ok(())
}

fn initialize(context: &Context) -> Result<Outcome, String> {
    let mut wire = Wire::open(context)?;
    let result = start(context, &mut wire)?;
    match result["protocolVersion"].as_u64() {
        Some(VERSION) => {}
        Some(other) => {
            return Err(format!(
                "asked for protocol version 2, the agent chose {other}: it does not serve ACP v2 (run the kit without --protocol 2 to test it as a v{other} agent)"
            ));
        }
        None => {
            return Err(format!(
                "protocolVersion is not an integer: {}",
                trim(&result.to_string())
            ));
        }
    }
    let info = &result["info"];
    if !(info["name"].is_string() && info["version"].is_string()) {
        return Err(format!(
            "info (required in v2) lacks a name or a version: {}",
            trim(&result.to_string())
        ));
    }
    for (part, value) in [
        ("capabilities", &result["capabilities"]),
        ("capabilities.session", &result["capabilities"]["session"]),
        ("capabilities.auth", &result["capabilities"]["auth"]),
    ] {
        if !(value.is_null() || value.is_object()) {
            return Err(format!("{part} is not an object: {}", trim(&value.to_string())));
        }
    }
    if !(result["authMethods"].is_null() || result["authMethods"].is_array()) {
        return Err(format!(
            "authMethods is not a list: {}",
            trim(&result["authMethods"].to_string())
        ));
    }
    Ok(Outcome::Pass)
}

fn version_newer(context: &Context) -> Result<Outcome, String> {
    let mut wire = Wire::open(context)?;
    let result = initialize_with(&mut wire, init_params(VERSION + 1))?;
    match result["protocolVersion"].as_u64() {
        Some(version) if (VERSION..=VERSION + 1).contains(&version) => Ok(Outcome::Pass),
        _ => Err(format!(
            "asked for version 3, the agent answered neither 2 nor 3: {}",
            trim(&result["protocolVersion"].to_string())
        )),
    }
}

fn auth_login(context: &Context) -> Result<Outcome, String> {
    let mut wire = Wire::open(context)?;
    let init = initialize_with(&mut wire, init_params(VERSION))?;
    let methods = crate::auth::Method::all_of(&init);
    let chosen = context
        .config
        .auth
        .clone()
        .or_else(|| methods.first().map(|m| m.id.clone()));
    let Some(method) = chosen else {
        return Ok(Outcome::Skip("the agent advertises no authMethods".into()));
    };
    let (_, response) = wire.call(json!("login"), "auth/login", json!({"methodId": method}))?;
    if error_code(&response) == Some(METHOD_NOT_FOUND) {
        return Err(format!(
            "the agent advertises authMethods but does not know auth/login: {}",
            trim(&response.to_string())
        ));
    }
    Ok(Outcome::Pass)
}

fn auth_logout(context: &Context) -> Result<Outcome, String> {
    let mut wire = Wire::open(context)?;
    let init = initialize_with(&mut wire, init_params(VERSION))?;
    if crate::auth::Method::all_of(&init).is_empty() {
        return Ok(Outcome::Skip(
            "the agent advertises no authMethods (a client must not call auth/logout then)".into(),
        ));
    }
    if let Some(method) = &context.config.auth {
        login(&mut wire, method)?;
    }
    let (_, response) = wire.call(json!("logout"), "auth/logout", json!({}))?;
    match response.get("result") {
        Some(result) if result.is_object() => Ok(Outcome::Pass),
        _ => Err(format!(
            "auth/logout must be answered with a result by an agent that advertises authMethods (an empty one without authentication state): {}",
            trim(&response.to_string())
        )),
    }
}

fn session_new(context: &Context) -> Result<Outcome, String> {
    with_session(context).map(|_| Outcome::Pass)
}

/// A started agent, a session and one plain turn in it.
fn plain_turn(context: &Context) -> Result<Turn, String> {
    let (mut wire, _, session) = with_session(context)?;
    run_turn(&mut wire, &session, "hello, conform", json!(3))
}

fn prompt_lifecycle(context: &Context) -> Result<Outcome, String> {
    let turn = plain_turn(context)?;
    let Some(ack) = &turn.ack else {
        return Err("the turn ended idle but session/prompt was never answered".into());
    };
    if let Some(reason) = ack["result"].get("stopReason") {
        return Err(format!(
            "the session/prompt answer carries stopReason {reason}: in v2 it only acknowledges, the stop reason comes with state_update idle"
        ));
    }
    let user = |u: &&Value| matches!(u["sessionUpdate"].as_str(), Some("user_message" | "user_message_chunk"));
    if !turn.updates().any(|u| user(&u)) {
        return Err("the accepted user message was not reported (no user_message or user_message_chunk)".into());
    }
    let first_state = turn.updates().find(|u| u["sessionUpdate"] == "state_update");
    if !first_state.is_some_and(|u| is_state(u, "running")) {
        return Err(format!(
            "no state_update running before the turn's work (first state update: {})",
            first_state.map_or("none".into(), |u| trim(&u.to_string()))
        ));
    }
    if !turn.idle["stopReason"].is_string() {
        return Err(format!(
            "the idle state_update has no stopReason: {}",
            trim(&turn.idle.to_string())
        ));
    }
    Ok(Outcome::Pass)
}

/// The update kinds that must carry a `messageId`.
const MESSAGE_KINDS: [&str; 6] = [
    "user_message",
    "user_message_chunk",
    "agent_message",
    "agent_message_chunk",
    "agent_thought",
    "agent_thought_chunk",
];

fn message_ids(context: &Context) -> Result<Outcome, String> {
    let turn = plain_turn(context)?;
    let mut messages = turn
        .updates()
        .filter(|u| u["sessionUpdate"].as_str().is_some_and(|k| MESSAGE_KINDS.contains(&k)))
        .peekable();
    if messages.peek().is_none() {
        return Ok(Outcome::Skip("the turn sent no message update".into()));
    }
    match messages.find(|u| u["messageId"].as_str().is_none_or(str::is_empty)) {
        Some(update) => Err(format!(
            "a message update without messageId: {}",
            trim(&update.to_string())
        )),
        None => Ok(Outcome::Pass),
    }
}

fn tool_calls(context: &Context) -> Result<Outcome, String> {
    let (mut wire, _, session) = with_session(context)?;
    let prompts = match context.config.tool_prompts.as_slice() {
        [] => vec!["hello, conform".to_string()],
        given => given.to_vec(),
    };
    let mut created = std::collections::HashSet::new();
    let mut asked = 0;
    for (n, prompt) in prompts.iter().enumerate() {
        let turn = run_turn(&mut wire, &session, prompt, json!(10 + n))?;
        for message in &turn.messages {
            asked += usize::from(message["method"] == "session/request_permission");
            judge_tool_message(message, &mut created)?;
        }
    }
    if created.is_empty() && asked == 0 {
        return Ok(Outcome::Skip("the turns made no tool call (give --tool-prompt)".into()));
    }
    Ok(Outcome::Pass)
}

/// Fails on a v1 `tool_call`, a `tool_call_update` without an id, or a permission request
/// without a title or for a call no update created; notes the calls `message` creates.
fn judge_tool_message(message: &Value, created: &mut std::collections::HashSet<String>) -> Result<(), String> {
    let evidence = || trim(&message.to_string());
    if message["method"] == "session/request_permission" {
        let params = &message["params"];
        if !params["title"].is_string() {
            return Err(format!("a permission request without a title: {}", evidence()));
        }
        if params["subject"]["type"] == "tool_call" {
            let id = params["subject"]["toolCall"]["toolCallId"].as_str().unwrap_or_default();
            if !created.contains(id) {
                return Err(format!(
                    "a permission request for a call no tool_call_update created: {}",
                    evidence()
                ));
            }
        }
        return Ok(());
    }
    let update = &message["params"]["update"];
    match update["sessionUpdate"].as_str() {
        Some("tool_call") => Err(format!(
            "a v1 tool_call update (v2 creates a call by its first tool_call_update): {}",
            evidence()
        )),
        Some("tool_call_update") => match update["toolCallId"].as_str() {
            Some(id) => {
                created.insert(id.to_string());
                Ok(())
            }
            None => Err(format!("a tool_call_update without toolCallId: {}", evidence())),
        },
        _ => Ok(()),
    }
}

fn cancel(context: &Context) -> Result<Outcome, String> {
    let (mut wire, _, session) = with_session(context)?;
    let id = json!(3);
    wire.request(
        id,
        "session/prompt",
        wire::prompt_params(&session, &context.config.long_prompt),
    )?;
    if !still_running(&mut wire, &session)? {
        return Ok(Outcome::Skip(format!(
            "the turn of `{}` went idle at once, so there was nothing to cancel (give a --long-prompt that keeps a turn running)",
            trim(&context.config.long_prompt)
        )));
    }
    wire.notify("session/cancel", json!({"sessionId": session}))?;
    let deadline = Instant::now() + context.config.timeout;
    loop {
        let message = wire
            .recv_until(deadline)
            .map_err(|why| format!("no idle state_update after session/cancel: {why}"))?;
        if is_idle_of(&message, &session) {
            let idle = &message["params"]["update"];
            return match idle["stopReason"].as_str() {
                Some("cancelled") => Ok(Outcome::Pass),
                _ => Err(format!(
                    "the cancelled turn ended idle without stopReason cancelled: {}",
                    trim(&idle.to_string())
                )),
            };
        }
    }
}

/// Whether the turn just prompted on `session` is still running after [`QUIET`] past its start
/// (its answer or `running`; an `idle` before that is the session's state before the turn):
/// no `idle` by then. A refused prompt is an error.
fn still_running(wire: &mut Wire<'_>, session: &str) -> Result<bool, String> {
    let mut quiet_from: Option<Instant> = None;
    let deadline = Instant::now() + wire.peer.timeout;
    loop {
        let until = quiet_from.map_or(deadline, |t| t + QUIET);
        match wire.recv_within(until.saturating_duration_since(Instant::now())) {
            Ok(message) if is_idle_of(&message, session) && quiet_from.is_some() => return Ok(false),
            Ok(message) if message.get("error").is_some() => {
                return Err(format!("the prompt was refused: {}", trim(&message.to_string())));
            }
            Ok(message) => {
                wire.answer_request(&message)?;
                if message.get("result").is_some() || is_running_of(&message, session) {
                    quiet_from.get_or_insert_with(Instant::now);
                }
            }
            Err(ReadError::Timeout) if quiet_from.is_some() => return Ok(true),
            Err(e) => return Err(format!("the turn neither acknowledged nor updated: {e}")),
        }
    }
}

fn resume_replay(context: &Context) -> Result<Outcome, String> {
    let (mut wire, _, session) = with_session(context)?;
    run_turn(&mut wire, &session, "remember this", json!(3))?;
    let params =
        json!({"sessionId": session, "cwd": context.agent_root(), "mcpServers": [], "replayFrom": {"type": "start"}});
    let (before, response) = wire.call(json!(4), "session/resume", params)?;
    refused_for_auth(context, "session/resume", &response)?;
    if let Some(error) = response.get("error") {
        return Ok(Outcome::Skip(format!(
            "the agent does not serve session/resume with replay: {}",
            trim(&error.to_string())
        )));
    }
    let is_user = |m: &Value| {
        m["method"] == "session/update"
            && matches!(
                m["params"]["update"]["sessionUpdate"].as_str(),
                Some("user_message" | "user_message_chunk")
            )
    };
    if before.iter().any(is_user) {
        return Ok(Outcome::Pass);
    }
    if wire.peer.is_http() {
        // The replay comes on the session's stream, the answer on the connection's.
        let deadline = Instant::now() + QUIET;
        while let Ok(message) = wire.recv_within(deadline.saturating_duration_since(Instant::now())) {
            if is_user(&message) {
                return Ok(Outcome::Pass);
            }
        }
    }
    Err("session/resume with replayFrom start answered without replaying the user message first".into())
}

fn unknown_fields(context: &Context) -> Result<Outcome, String> {
    let mut wire = Wire::open(context)?;
    let mut params = init_params(VERSION);
    params["capabilities"]["conformFutureCapability"] = json!({"level": "unknown-value"});
    params["conformFutureField"] = json!(true);
    initialize_with(&mut wire, params).map_err(|e| format!("with unknown fields: {e}"))?;
    if let Some(method) = &context.config.auth {
        login(&mut wire, method)?;
    }
    let mut params = new_session_params(context);
    params["conformFutureField"] = json!({"kind": "unknown-value"});
    let (_, response) = wire.call(json!("new-session"), "session/new", params)?;
    let session = crate::checks::session_id(context, &response).map_err(|e| format!("with an unknown field: {e}"))?;
    let mut text =
        json!({"sessionId": session, "prompt": [{"type": "text", "text": "hello, conform"}], "conformFutureField": 1});
    text["prompt"][0]["_meta"] = json!({"conform": "unknown"});
    let (_, ack) = wire.call(json!(3), "session/prompt", text)?;
    refused_for_auth(context, "session/prompt", &ack)?;
    match ack.get("error") {
        Some(error) => Err(format!(
            "a prompt with an unknown field was refused: {}",
            trim(&error.to_string())
        )),
        None => Ok(Outcome::Pass),
    }
}

fn schema_check(context: &Context) -> Result<Outcome, String> {
    if context.v2.schema.is_none() {
        return Ok(Outcome::Skip(
            "no --schema: give the v2 schema.json the agent implements to check every frame".into(),
        ));
    }
    // A turn of its own, so that the check judges frames even when run alone (--only).
    plain_turn(context)?;
    let invalid = context.v2.invalid.lock().map(|i| i.clone()).unwrap_or_default();
    if invalid.is_empty() {
        return Ok(Outcome::Pass);
    }
    let named: Vec<&str> = invalid.iter().take(FRAMES_NAMED).map(String::as_str).collect();
    Err(format!(
        "{} frame(s) do not match the schema: {}",
        invalid.len(),
        named.join(" | ")
    ))
}
