//! The checks. Each starts its own agent process through [`Context::spawn`]; a check returns
//! `Ok(Outcome)` or `Err(evidence)` (a failure).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::auth::AUTH_REQUIRED;
use crate::driver::{ReadError, error_code};
use crate::{Check, Context, Needs, Outcome, Peer, Sent, trim};

pub mod audit;

/// The protocol version the kit speaks.
const PROTOCOL_VERSION: u64 = 1;
/// ACP's "Resource not found": the answer to a request naming an unknown session.
const RESOURCE_NOT_FOUND: i64 = -32002;
/// How long the kit listens for a message that must not come.
pub(crate) const QUIET: Duration = Duration::from_millis(100);
/// The status with which a Streamable HTTP server refuses a malformed request (the RFD's
/// `400 Bad Request`).
const BAD_REQUEST: u16 = 400;

/// Every check, in order.
pub fn all() -> Vec<Check> {
    vec![
        check(
            "handshake.initialize-first",
            "a session before initialize is refused",
            "Initialization: the client must call initialize before anything else; a session/new first gets an error response, and the connection survives (over Streamable HTTP, where no connection exists before initialize, the POST is refused with 400)",
            initialize_first,
        ),
        check(
            "handshake.version-current",
            "the current protocol version is echoed",
            "Initialization, protocol version: an agent that supports the requested version answers with it",
            version_current,
        ),
        check(
            "handshake.version-newer",
            "a newer client version is negotiated down",
            "Initialization, protocol version: an agent that does not support the requested version answers with the latest one it supports (an integer no greater than asked)",
            version_newer,
        ),
        check(
            "handshake.version-older",
            "an older client version gets the same or the agent's latest",
            "Initialization, protocol version: the answer is the requested version or the agent's latest",
            version_older,
        ),
        check(
            "handshake.agent-info",
            "agentInfo names the agent",
            "Initialization, implementation information: agentInfo carries a name and a version",
            agent_info,
        ),
        check(
            "manifest.capabilities",
            "agentCapabilities are the manifest's, exactly",
            "AIP-44 / runtime contract: initialize advertises exactly the manifest's effective capabilities (scaffold-aip explain)",
            manifest_capabilities,
        ),
        check(
            "manifest.agent-info",
            "agentInfo is the manifest's",
            "AIP-44 / runtime contract: agentInfo comes from the manifest (scaffold-aip explain)",
            manifest_agent_info,
        ),
        check(
            "manifest.meta-aip44",
            "_meta.aip44 is the manifest's",
            "AIP-44 / runtime contract: _meta.aip44 (acp_rev, tier, ...) equals what scaffold-aip explain computes",
            manifest_meta,
        ),
        check(
            "jsonrpc.parse-error",
            "a frame that is not JSON gets -32700 with id null",
            "JSON-RPC 2.0 §5.1: a parse error is answered with code -32700 and id null (over Streamable HTTP the server may refuse the POST with 400 instead)",
            parse_error,
        ),
        check(
            "jsonrpc.invalid-request",
            "a request that is not a request gets -32600",
            "JSON-RPC 2.0 §5.1: an object that is not a valid Request is answered with -32600 (over Streamable HTTP the server may refuse the POST with 400 instead)",
            invalid_request,
        ),
        check(
            "jsonrpc.unknown-method",
            "an unknown method gets -32601",
            "JSON-RPC 2.0 §5.1: a method that does not exist is answered with -32601",
            unknown_method,
        ),
        check(
            "jsonrpc.invalid-params",
            "bad params get -32602",
            "JSON-RPC 2.0 §5.1 and ACP session/new: params of the wrong shape are answered with -32602",
            invalid_params,
        ),
        check(
            "jsonrpc.notification-unanswered",
            "notifications are never answered",
            "JSON-RPC 2.0 §4.1: the server must not reply to a notification, not even an unknown or malformed one",
            notification_unanswered,
        ),
        check(
            "jsonrpc.ids-echoed",
            "string and number ids come back exactly",
            "JSON-RPC 2.0 §5: the response carries the same id as the request, of the same type",
            ids_echoed,
        ),
        session_check(
            "jsonrpc.stdout-clean",
            "stdout carries only JSON-RPC",
            "ACP transports, stdio: the agent must not write anything to stdout that is not a valid ACP message",
            stdout_clean,
        ),
        check(
            "session.unknown-session",
            "a prompt for an unknown session is refused",
            "ACP session/prompt: the sessionId must name a session the agent created; otherwise an error response (with --manifest: -32002 Resource not found, as the runtime contract answers)",
            unknown_session,
        ),
        session_check(
            "session.relative-cwd",
            "a relative cwd is refused",
            "ACP session setup: cwd must be an absolute path",
            relative_cwd,
        ),
        session_check(
            "session.cwd-dotdot",
            "a cwd escaping the workspace root with .. is refused",
            "AIP-44 runtime contract: cwd must lie inside the workspace root after canonicalisation",
            cwd_dotdot,
        ),
        session_check(
            "session.cwd-symlink",
            "a cwd escaping the workspace root through a symlink is refused",
            "AIP-44 runtime contract: cwd must lie inside the workspace root with symlinks resolved",
            cwd_symlink,
        ),
        session_check(
            "session.load",
            "session/load replays history first, or is refused when not advertised",
            "ACP session setup, loading sessions: with loadSession the agent replays the conversation as session/update before answering; without it, session/load is not offered",
            session_load,
        ),
        session_check(
            "turn.updates-before-response",
            "every update of a turn precedes its response",
            "ACP prompt turn: the turn's session/update notifications are sent before the session/prompt response, none after",
            updates_before_response,
        ),
        session_check(
            "turn.cancel",
            "session/cancel ends the turn with cancelled",
            "ACP prompt turn, cancellation: after session/cancel the agent answers the prompt with stopReason cancelled, promptly, and sends no update after it",
            cancel,
        ),
        session_check(
            "turn.busy-session",
            "a second prompt on a busy session is refused",
            "AIP-44 runtime contract: a second session/prompt while one runs on the session is answered -32602; the running turn goes on",
            busy_session,
        ),
        check(
            "jsonrpc.oversized-frame",
            "a frame over the limit is refused, the connection survives",
            "AIP-44 runtime contract: a message over AGENTACP_MAX_FRAME_BYTES is answered -32600 and the connection goes on",
            oversized_frame,
        ),
        session_check(
            "turn.sigterm",
            "SIGTERM ends the agent promptly",
            "ACP stdio transport / runtime contract: the client may stop the agent; SIGTERM ends it within the timeout",
            sigterm,
        ),
        session_check(
            "turn.eof-exit",
            "EOF on stdin ends the agent with status 0",
            "AIP-44 runtime contract (ACP stdio transport): when stdin closes the agent exits cleanly and promptly",
            eof_exit,
        ),
        session_check(
            "audit.chain",
            "the audit log's hash chain verifies after the turns",
            "AIP-44 / AIP-7 audit: every record is hash-chained (seq, prevHash, hash over the canonical JSON); the log holds the session's records and verifies after its turns (scaffold-aip audit verify)",
            audit::chain,
        ),
        session_check(
            "audit.tool-calls",
            "every tool_call on the wire has its audit record, with its approval",
            "AIP-44 governed tiers: each tool call is mirrored to the audit log (tool, arguments, result or error, approval); conformance tests must exercise the audit emit path",
            audit::tool_calls,
        ),
        session_check(
            "audit.denied-not-on-wire",
            "a tool call governance denies never reaches the wire",
            "AIP-44 governance: a denied tool is never emitted as a tool_call (nor asked about); the denial is audited",
            audit::denied_not_on_wire,
        ),
        session_check(
            "audit.rejected-not-run",
            "a rejected permission request does not run the tool",
            "AIP-44 governance / ACP permission requests: a call the client rejects does not run; its record says rejectedBy, with an error",
            audit::rejected_not_run,
        ),
        session_check(
            "audit.unanswered-not-run",
            "an unanswered permission request does not run the tool",
            "AIP-44 governance: permission requests fail closed (timeout or cancel = reject, never auto-approve); the cancelled turn still ends",
            audit::unanswered_not_run,
        ),
    ]
}

fn check(
    id: &'static str,
    title: &'static str,
    rule: &'static str,
    run: fn(&Context) -> Result<Outcome, String>,
) -> Check {
    Check {
        id,
        title,
        rule,
        needs: Needs::Agent,
        run,
    }
}

/// A check that needs a session ([`Needs::Session`]).
fn session_check(
    id: &'static str,
    title: &'static str,
    rule: &'static str,
    run: fn(&Context) -> Result<Outcome, String>,
) -> Check {
    Check {
        needs: Needs::Session,
        ..check(id, title, rule, run)
    }
}

/// Starts an agent and initializes it (and, with `--auth`, authenticates it after checking the
/// method against those it offers); the failure of this is a start-up error. Then it tries a
/// session, to learn whether the agent refuses them for want of authentication.
pub fn preflight(context: &Context) -> Result<(), String> {
    let mut peer = context.spawn()?;
    let init = initialize(&mut peer)?;
    let methods = crate::auth::Method::all_of(&init);
    if let Some(id) = &context.config.auth {
        crate::auth::check_choice(&methods, id, |var| context.agent_has_env(var))?;
        authenticate(&mut peer, id)?;
    }
    context.auth.set_methods(methods);
    remote_refusal(context, &mut peer)?;
    // A session, as the checks open theirs; an agent that gives none (no answer, another
    // error) is left to the checks to judge.
    if let Ok((_, response)) = peer.call(
        json!("new-session"),
        "session/new",
        new_session_params(&context.agent_root()),
    ) {
        context.auth.note_sessions(&response);
    }
    Ok(())
}

/// With `--connect`: `Err` when the server serves the connection nothing but authentication.
/// A server with tokens admits a connection that shows none on the upgrade, but answers
/// everything else -32000: every check would fail for want of a token.
pub(crate) fn remote_refusal(context: &Context, peer: &mut Peer) -> Result<(), String> {
    let Some(connect) = &context.config.connect else {
        return Ok(());
    };
    let (_, response) = peer.call(json!(1), "conform/no-such-method", json!({}))?;
    if error_code(&response) != Some(-32000) {
        return Ok(());
    }
    let why = match connect.token {
        None => "the server wants a token (--token or AGENTACP_CONFORM_TOKEN)",
        Some(_) => "the server still wants authentication after the token on the upgrade",
    };
    let answer = trim(&response["error"].to_string());
    Err(format!("{}: {why}: it answers {answer}", connect.url))
}

/// `authenticate` with `method`; `Err` when the agent refuses it.
fn authenticate(peer: &mut Peer, method: &str) -> Result<(), String> {
    let (_, response) = peer.call(json!("authenticate"), "authenticate", json!({"methodId": method}))?;
    match response.get("error") {
        None => Ok(()),
        Some(error) => Err(format!(
            "authenticate with {method} failed: {}",
            trim(&error.to_string())
        )),
    }
}

/// `initialize` params of the kit's client.
fn init_params(version: u64) -> Value {
    json!({
        "protocolVersion": version,
        "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false},
        "clientInfo": {"name": "scaffold-aip-conform", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// `initialize` at `version`; the result.
fn initialize_at(peer: &mut Peer, version: u64) -> Result<Value, String> {
    let (_, response) = peer.call(json!(0), "initialize", init_params(version))?;
    response
        .get("result")
        .cloned()
        .ok_or_else(|| format!("initialize failed: {}", trim(&response.to_string())))
}

fn initialize(peer: &mut Peer) -> Result<Value, String> {
    initialize_at(peer, PROTOCOL_VERSION)
}

/// A started, initialized agent and its `initialize` result (in the v2 suite, initialized
/// at version 2: the checks both suites run start this way).
fn ready(context: &Context) -> Result<(Peer, Value), String> {
    if context.config.protocol == 2 {
        return crate::v2::ready(context);
    }
    let mut peer = context.spawn()?;
    let result = start(context, &mut peer)?;
    Ok((peer, result))
}

/// `initialize`, then `authenticate` with `--auth`, if given; the `initialize` result.
fn start(context: &Context, peer: &mut Peer) -> Result<Value, String> {
    let result = initialize(peer)?;
    if let Some(method) = &context.config.auth {
        authenticate(peer, method)?;
    }
    Ok(result)
}

fn new_session_params(cwd: &std::path::Path) -> Value {
    json!({"cwd": cwd, "mcpServers": []})
}

/// A started agent with a session in the workspace root.
fn with_session(context: &Context) -> Result<(Peer, Value, String), String> {
    let (mut peer, init) = ready(context)?;
    let (_, response) = peer.call(
        json!("new-session"),
        "session/new",
        new_session_params(&context.agent_root()),
    )?;
    let session = session_id(context, &response)?;
    Ok((peer, init, session))
}

/// The id of the session a `session/new` `response` opened.
pub(crate) fn session_id(context: &Context, response: &Value) -> Result<String, String> {
    refused_for_auth(context, "session/new", response)?;
    response["result"]["sessionId"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("session/new failed: {}", trim(&response.to_string())))
}

/// `Err` when `response` (to `method`) refuses for want of authentication: the check cannot
/// judge its rule (it is skipped, and the refusal reported once as `auth.required`).
pub(crate) fn refused_for_auth(context: &Context, method: &str, response: &Value) -> Result<(), String> {
    if context.auth.refused(method, response) {
        Err(format!("{method} was refused for want of authentication"))
    } else {
        Ok(())
    }
}

fn prompt_params(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]})
}

/// The connection still serves: `session/new` in the workspace root succeeds (or, from an
/// agent that refuses sessions for want of authentication, is refused so again).
pub(crate) fn still_serves(context: &Context, peer: &mut Peer, after: &str) -> Result<(), String> {
    let no_longer = |e: String| format!("after {after}, the connection no longer serves: {e}");
    let (_, response) = peer
        .call(
            json!("new-session"),
            "session/new",
            new_session_params(&context.agent_root()),
        )
        .map_err(no_longer)?;
    if context.auth.refuses_sessions() && error_code(&response) == Some(AUTH_REQUIRED) {
        return Ok(());
    }
    session_id(context, &response).map(drop).map_err(no_longer)
}

/// Fails unless `response` is an error with code `code`.
fn expect_code(response: &Value, code: i64) -> Result<(), String> {
    match error_code(response) {
        Some(got) if got == code => Ok(()),
        _ => Err(format!("expected error {code}, got {}", trim(&response.to_string()))),
    }
}

/// Fails unless `response` is an error (any code).
fn expect_error(response: &Value, what: &str) -> Result<(), String> {
    if response.get("error").is_some() {
        Ok(())
    } else {
        Err(format!("{what} was accepted: {}", trim(&response.to_string())))
    }
}

/// The `session/update` kinds that carry a turn's (or a replayed conversation's) content;
/// the others (available commands, mode, config, session info) may come at any time.
const CONVERSATION_UPDATES: [&str; 6] = [
    "user_message_chunk",
    "agent_message_chunk",
    "agent_thought_chunk",
    "tool_call",
    "tool_call_update",
    "plan",
];

/// Whether `message` is a `session/update` carrying conversation content.
fn is_conversation_update(message: &Value) -> bool {
    message["method"] == "session/update"
        && message["params"]["update"]["sessionUpdate"]
            .as_str()
            .is_some_and(|kind| CONVERSATION_UPDATES.contains(&kind))
}

/// Fails if any message arrives within [`QUIET`].
fn expect_silence(peer: &mut Peer, what: &str) -> Result<(), String> {
    expect_quiet(peer, what, |_| true)
}

/// Fails if a conversation update arrives within [`QUIET`].
fn expect_no_conversation_update(peer: &mut Peer, what: &str) -> Result<(), String> {
    expect_quiet(peer, what, is_conversation_update)
}

/// Fails if a message for which `offending` holds arrives within [`QUIET`].
fn expect_quiet(peer: &mut Peer, what: &str, offending: fn(&Value) -> bool) -> Result<(), String> {
    let deadline = Instant::now() + QUIET;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match peer.recv_within(left) {
            Ok(message) if offending(&message) => return Err(format!("{what}: {}", trim(&message.to_string()))),
            Ok(_) => {}
            Err(ReadError::Timeout) => return Ok(()),
            Err(ReadError::Closed) => return Err(format!("the agent closed stdout{}", peer.stderr_hint())),
        }
    }
}

/// Sends `frame`; `Ok(true)` when a Streamable HTTP server refused it with `400` (a request
/// it will not hand to the agent: over HTTP, the transport's answer stands for the agent's),
/// `Ok(false)` when it went on to the agent; another refusal fails.
fn refused_by_transport(peer: &mut Peer, frame: &str) -> Result<bool, String> {
    match peer.try_send_raw(frame)? {
        Sent::Taken => Ok(false),
        Sent::Refused { status, .. } if status == BAD_REQUEST => Ok(true),
        Sent::Refused { sentence, .. } => Err(sentence),
    }
}

fn initialize_first(context: &Context) -> Result<Outcome, String> {
    let mut peer = context.spawn()?;
    let id = json!(1);
    let frame = json!({"jsonrpc": "2.0", "id": id, "method": "session/new", "params": new_session_params(&context.agent_root())});
    // Over HTTP there is no connection before `initialize`: the POST is refused (400).
    if !refused_by_transport(&mut peer, &frame.to_string())? {
        let (_, response) = peer
            .until_response(&id)
            .map_err(|e| format!("session/new (id {id}): {e}{}", peer.stderr_hint()))?;
        expect_error(&response, "session/new before initialize")?;
    }
    initialize(&mut peer).map_err(|e| format!("after the refusal: {e}"))?;
    Ok(Outcome::Pass)
}

fn negotiated(result: &Value) -> Result<u64, String> {
    result["protocolVersion"]
        .as_u64()
        .ok_or_else(|| format!("protocolVersion is not an integer: {}", trim(&result.to_string())))
}

fn version_current(context: &Context) -> Result<Outcome, String> {
    let (_, result) = ready(context)?;
    match negotiated(&result)? {
        PROTOCOL_VERSION => Ok(Outcome::Pass),
        other => Err(format!("asked for {PROTOCOL_VERSION}, answered {other}")),
    }
}

fn version_newer(context: &Context) -> Result<Outcome, String> {
    let mut peer = context.spawn()?;
    let asked = PROTOCOL_VERSION + 98;
    let got = negotiated(&initialize_at(&mut peer, asked)?)?;
    if got <= asked {
        Ok(Outcome::Pass)
    } else {
        Err(format!("asked for {asked}, answered a newer {got}"))
    }
}

fn version_older(context: &Context) -> Result<Outcome, String> {
    let (_, current) = ready(context)?;
    let latest = negotiated(&current)?;
    let mut peer = context.spawn()?;
    let got = negotiated(&initialize_at(&mut peer, 0)?)?;
    if got == 0 || got == latest {
        Ok(Outcome::Pass)
    } else {
        Err(format!(
            "asked for 0, answered {got}, neither 0 nor its latest {latest}"
        ))
    }
}

fn agent_info(context: &Context) -> Result<Outcome, String> {
    let (_, result) = ready(context)?;
    let info = &result["agentInfo"];
    if info["name"].is_string() && info["version"].is_string() {
        Ok(Outcome::Pass)
    } else {
        Err(format!(
            "agentInfo lacks a name or version: {}",
            trim(&result.to_string())
        ))
    }
}

/// Compares one part of the `initialize` result with the manifest's: equal, or for a bridge
/// `narrower` (see [`within`]); `adjust` first removes from the agent's part what the
/// manifest cannot know.
fn manifest_part(
    context: &Context,
    pointer: &str,
    narrower: bool,
    adjust: fn(&Context, &mut Value),
) -> Result<Outcome, String> {
    let Some(expected) = &context.config.expected_initialize else {
        return Ok(Outcome::Skip("no --manifest".into()));
    };
    let (_, result) = ready(context)?;
    let want = expected.pointer(pointer).unwrap_or(&Value::Null);
    let got = result.pointer(pointer).cloned().unwrap_or(Value::Null);
    compare_to_manifest(context, pointer, want, got, narrower, adjust)
}

/// Judges `got`, the agent's `pointer` part of its `initialize` answer (after `adjust`),
/// against `want`, the manifest's: equal, or for a bridge `narrower` (see [`within`]). Shared
/// by the v1 and the v2 suite.
pub(crate) fn compare_to_manifest(
    context: &Context,
    pointer: &str,
    want: &Value,
    mut got: Value,
    narrower: bool,
    adjust: fn(&Context, &mut Value),
) -> Result<Outcome, String> {
    adjust(context, &mut got);
    let bridge = narrower && context.config.bridge;
    if want == &got || (bridge && within(&got, want)) {
        Ok(Outcome::Pass)
    } else {
        let says = if bridge { "allows at most" } else { "says" };
        Err(format!(
            "{pointer}: the manifest {says} {}, the agent says {}",
            trim(&want.to_string()),
            trim(&got.to_string())
        ))
    }
}

/// Whether the agent capabilities `got` offer nothing `want` does not: every `true` in `got` is
/// `true` in `want`, every object in `got` (ACP marks some capabilities by an object's
/// presence, `{}`) is an object in `want` and within it, other values are equal; `false`,
/// `null`, `_meta` and what `got` leaves out offer nothing, and neither does an object that
/// only holds capabilities (`sessionCapabilities`, per the method table) when nothing inside
/// it is offered. A bridge advertises its agent's capabilities narrowed to its manifest's, so
/// it may offer less.
fn within(got: &Value, want: &Value) -> bool {
    within_at(&mut Vec::new(), got, want)
}

fn within_at(path: &mut Vec<String>, got: &Value, want: &Value) -> bool {
    match (got, want) {
        (Value::Bool(false) | Value::Null, _) => true,
        (Value::Object(got), want) => {
            let names: Vec<&str> = path.iter().map(String::as_str).collect();
            let holder = want.is_object() || acp_methods::Capability::holds(acp_methods::Side::Agent, &names);
            holder
                && got.iter().filter(|(key, _)| *key != "_meta").all(|(key, value)| {
                    path.push(key.clone());
                    let inside = within_at(path, value, want.get(key).unwrap_or(&Value::Null));
                    path.pop();
                    inside
                })
        }
        (got, want) => got == want,
    }
}

/// Leaves the agent's part as it is ([`compare_to_manifest`]).
pub(crate) fn as_is(_: &Context, _: &mut Value) {}

/// Whether `--manifest` was given and the `initialize` answer it expects is as `says`.
fn manifest_expects(context: &Context, says: impl FnOnce(&Value) -> bool) -> bool {
    context.config.expected_initialize.as_ref().is_some_and(says)
}

fn manifest_capabilities(context: &Context) -> Result<Outcome, String> {
    // A server with tokens advertises `auth.logout` (docs/remote.md): its transport's, not
    // the manifest's.
    fn without_transport_auth(context: &Context, capabilities: &mut Value) {
        let in_manifest = manifest_expects(context, |expected| !expected["agentCapabilities"]["auth"].is_null());
        if context.remote()
            && !in_manifest
            && let Some(capabilities) = capabilities.as_object_mut()
        {
            capabilities.remove("auth");
        }
    }
    manifest_part(context, "/agentCapabilities", true, without_transport_auth)
}

fn manifest_agent_info(context: &Context) -> Result<Outcome, String> {
    manifest_part(context, "/agentInfo", false, as_is)
}

fn manifest_meta(context: &Context) -> Result<Outcome, String> {
    manifest_part(context, "/_meta/aip44", false, without_reports)
}

/// What the runtime reports in `_meta.aip44` that the manifest cannot know: a bridge's
/// `downstream` (the agentInfo of the agent behind it) and, at tier sandboxed,
/// `sandbox_enforcement` (what this kernel enforces). Each is left out of the comparison when
/// it has its shape.
pub(crate) fn without_reports(context: &Context, meta: &mut Value) {
    let sandboxed = manifest_expects(context, |expected| expected["_meta"]["aip44"]["tier"] == "sandboxed");
    let downstream = context.config.bridge && meta["downstream"]["name"].is_string();
    let enforcement = sandboxed
        && meta["sandbox_enforcement"]["provider"].is_string()
        && meta["sandbox_enforcement"]["enforcement"].is_string();
    if let Some(meta) = meta.as_object_mut() {
        if downstream {
            meta.remove("downstream");
        }
        if enforcement {
            meta.remove("sandbox_enforcement");
        }
    }
}

/// How a Streamable HTTP server may treat a bad frame.
#[derive(Clone, Copy, PartialEq, Eq)]
enum OverHttp {
    /// It hands it to the agent (`202`), which must answer.
    Forwards,
    /// It may refuse it itself (`400`) instead: a frame that is not a JSON-RPC request.
    MayRefuse,
}

/// Sends a raw frame after `initialize`, expects an error with `code`, whose id satisfies
/// `id_ok` (or, as `over_http` allows, a `400` from an HTTP server), then that the connection
/// still serves.
fn bad_frame(
    context: &Context,
    frame: &str,
    (code, id_ok): (i64, fn(&Value) -> bool),
    over_http: OverHttp,
    what: &str,
) -> Result<Outcome, String> {
    let (mut peer, _) = ready(context)?;
    if over_http == OverHttp::MayRefuse {
        if refused_by_transport(&mut peer, frame)? {
            still_serves(context, &mut peer, what)?;
            return Ok(Outcome::Pass);
        }
    } else {
        peer.send_raw(frame)?;
    }
    let response = peer
        .recv()
        .map_err(|e| format!("no answer to {what}: {e}{}", peer.stderr_hint()))?;
    if code != AUTH_REQUIRED {
        refused_for_auth(context, what, &response)?;
    }
    expect_code(&response, code)?;
    if !id_ok(&response["id"]) {
        return Err(format!("wrong id: {}", trim(&response.to_string())));
    }
    still_serves(context, &mut peer, what)?;
    Ok(Outcome::Pass)
}

fn parse_error(context: &Context) -> Result<Outcome, String> {
    bad_frame(
        context,
        r#"{"jsonrpc": "2.0", "id": 5, "method": "#,
        (-32700, Value::is_null),
        OverHttp::MayRefuse,
        "a truncated frame",
    )
}

fn invalid_request(context: &Context) -> Result<Outcome, String> {
    bad_frame(
        context,
        r#"{"jsonrpc": "2.0", "id": 6, "method": 42}"#,
        (-32600, |id| id.is_null() || id == &json!(6)),
        OverHttp::MayRefuse,
        "a non-string method",
    )
}

fn unknown_method(context: &Context) -> Result<Outcome, String> {
    bad_frame(
        context,
        r#"{"jsonrpc": "2.0", "id": 7, "method": "conform/no-such-method", "params": {}}"#,
        (-32601, |id| id == &json!(7)),
        OverHttp::Forwards,
        "an unknown method",
    )
}

fn invalid_params(context: &Context) -> Result<Outcome, String> {
    bad_frame(
        context,
        r#"{"jsonrpc": "2.0", "id": 8, "method": "session/new", "params": {"cwd": 42}}"#,
        (-32602, |id| id == &json!(8)),
        OverHttp::Forwards,
        "session/new with a numeric cwd",
    )
}

fn notification_unanswered(context: &Context) -> Result<Outcome, String> {
    let (mut peer, _) = ready(context)?;
    peer.notify("conform/no-such-notification", json!({}))?;
    peer.notify("session/cancel", json!({"sessionId": "conform-no-such-session"}))?;
    // A session-scoped notification whose session is not a string, so there is none to name
    // in `Acp-Session-Id`: an HTTP server may refuse it (400), which is not an answer.
    let malformed = json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": 42}});
    refused_by_transport(&mut peer, &malformed.to_string())?;
    expect_silence(&mut peer, "a notification was answered")?;
    still_serves(context, &mut peer, "the notifications")?;
    Ok(Outcome::Pass)
}

fn ids_echoed(context: &Context) -> Result<Outcome, String> {
    let mut peer = context.spawn()?;
    for id in [json!("conform-id-ä 1"), json!(9_007_199_254_740_991_u64)] {
        peer.request(id.clone(), "initialize", init_params(PROTOCOL_VERSION))?;
        let response = peer
            .recv()
            .map_err(|e| format!("no answer to initialize (id {id}): {e}"))?;
        if response.get("id") != Some(&id) {
            return Err(format!("sent id {id}, got {}", trim(&response.to_string())));
        }
    }
    Ok(Outcome::Pass)
}

fn stdout_clean(context: &Context) -> Result<Outcome, String> {
    let (mut peer, _, session) = with_session(context)?;
    let (_, response) = peer.call(json!(3), "session/prompt", prompt_params(&session, "hello"))?;
    refused_for_auth(context, "session/prompt", &response)?;
    let _ = peer.call(json!(4), "conform/no-such-method", json!({}));
    match peer.junk.first() {
        None => Ok(Outcome::Pass),
        Some(line) => Err(format!("not JSON-RPC on {}: {}", peer.channel(), trim(line))),
    }
}

pub(crate) fn unknown_session(context: &Context) -> Result<Outcome, String> {
    let (mut peer, _) = ready(context)?;
    let (_, response) = peer.call(
        json!(2),
        "session/prompt",
        prompt_params("conform-no-such-session", "hello"),
    )?;
    refused_for_auth(context, "session/prompt", &response)?;
    expect_error(&response, "a prompt for an unknown session")?;
    // ACP's "Resource not found" is the runtime contract's answer; plain ACP agents vary.
    if context.config.expected_initialize.is_some() {
        expect_code(&response, RESOURCE_NOT_FOUND)?;
    }
    still_serves(context, &mut peer, "the refusal")?;
    Ok(Outcome::Pass)
}

/// `session/new` in `cwd` must be refused.
fn refused_cwd(context: &Context, cwd: &std::path::Path, what: &str) -> Result<Outcome, String> {
    let (mut peer, _) = ready(context)?;
    let (_, response) = peer.call(json!(2), "session/new", new_session_params(cwd))?;
    refused_for_auth(context, "session/new", &response)?;
    expect_error(&response, what)?;
    still_serves(context, &mut peer, "the refusal")?;
    Ok(Outcome::Pass)
}

pub(crate) fn relative_cwd(context: &Context) -> Result<Outcome, String> {
    refused_cwd(context, std::path::Path::new("relative/folder"), "a relative cwd")
}

/// A skip when no manifest was given: the check enforces an AIP-44 rule (`why`) that plain
/// ACP does not have.
fn manifest_only(context: &Context, why: &str) -> Option<Outcome> {
    context
        .config
        .expected_initialize
        .is_none()
        .then(|| Outcome::Skip(format!("{why}; give --manifest")))
}

/// A skip over `--connect`: the check needs the agent's process (`why`), which is not the kit's.
fn process_only(context: &Context, why: &str) -> Option<Outcome> {
    context
        .remote()
        .then(|| Outcome::Skip(format!("{why}; over --connect the agent's process is not the kit's")))
}

/// Workspace confinement is AIP-44's rule; plain ACP agents have no workspace root.
fn confinement_applies(context: &Context) -> Option<Outcome> {
    manifest_only(context, "workspace confinement is an AIP-44 rule")
}

pub(crate) fn cwd_dotdot(context: &Context) -> Result<Outcome, String> {
    if let Some(skip) = confinement_applies(context) {
        return Ok(skip);
    }
    let escape = if context.remote() {
        // The kit's folders are not the server's: the root's parent is outside it everywhere.
        if context.root().parent().is_none() {
            return Ok(Outcome::Skip("the workspace root has no parent folder".into()));
        }
        context.root().join("..")
    } else {
        context
            .root()
            .join("..")
            .join(context.outside().file_name().unwrap_or_default())
    };
    refused_cwd(context, &context.agent_path(&escape), "a cwd escaping with ..")
}

#[cfg(unix)]
pub(crate) fn cwd_symlink(context: &Context) -> Result<Outcome, String> {
    if let Some(skip) = confinement_applies(context) {
        return Ok(skip);
    }
    if context.remote() && !context.root().is_dir() {
        return Ok(Outcome::Skip(
            "the --workspace-root is not a local folder: the kit cannot make a symlink in it".into(),
        ));
    }
    let link = context.root().join("conform-link-out");
    if !link.exists() {
        std::os::unix::fs::symlink(context.outside(), &link).map_err(|e| format!("cannot make the symlink: {e}"))?;
    }
    let outcome = refused_cwd(context, &context.agent_path(&link), "a cwd escaping through a symlink");
    if context.remote() {
        // The root is the server's, not a temporary folder of the kit's.
        let _ = std::fs::remove_file(&link);
    }
    outcome
}

#[cfg(not(unix))]
pub(crate) fn cwd_symlink(_: &Context) -> Result<Outcome, String> {
    Ok(Outcome::Skip("symlinks are only made on Unix".into()))
}

fn session_load(context: &Context) -> Result<Outcome, String> {
    let (mut peer, init, session) = with_session(context)?;
    let advertised = init["agentCapabilities"]["loadSession"] == json!(true);
    if !advertised {
        let (_, response) = peer.call(
            json!(3),
            "session/load",
            json!({"sessionId": session, "cwd": context.agent_root(), "mcpServers": []}),
        )?;
        expect_error(&response, "session/load without loadSession")?;
        return Ok(Outcome::Pass);
    }
    let (_, response) = peer.call(json!(3), "session/prompt", prompt_params(&session, "remember this"))?;
    refused_for_auth(context, "session/prompt", &response)?;
    // Let the agent persist the session the way it does at the end of a connection (over
    // --connect: close it; the next connection, with the same token, is the same identity).
    peer.close_stdin();
    peer.wait_exit(context.config.timeout);
    drop(peer);
    let (mut peer, _) = ready(context)?;
    let (before, response) = peer.call(
        json!(4),
        "session/load",
        json!({"sessionId": session, "cwd": context.agent_root(), "mcpServers": []}),
    )?;
    if response.get("error").is_some() {
        return Err(format!("session/load refused: {}", trim(&response.to_string())));
    }
    if peer.is_http() {
        // The replay comes on the session's stream, the answer on the connection's (the
        // RFD): two streams have no order between them, so only that it comes is judged.
        return replayed_over_http(&mut peer, &before);
    }
    if !before.iter().any(is_conversation_update) {
        return Err("no history replayed before the session/load response".into());
    }
    expect_no_conversation_update(&mut peer, "history after the session/load response")?;
    Ok(Outcome::Pass)
}

/// Over Streamable HTTP: the history of a `session/load` came, before its answer (`before`)
/// or within [`QUIET`] after it.
fn replayed_over_http(peer: &mut Peer, before: &[Value]) -> Result<Outcome, String> {
    let mut replayed = before.iter().any(is_conversation_update);
    let deadline = Instant::now() + QUIET;
    while !replayed {
        match peer.recv_within(deadline.saturating_duration_since(Instant::now())) {
            Ok(message) => replayed = is_conversation_update(&message),
            Err(ReadError::Timeout) => {
                return Err("no history replayed on the session's stream for the session/load".into());
            }
            Err(ReadError::Closed) => return Err(format!("the connection ended{}", peer.stderr_hint())),
        }
    }
    Ok(Outcome::Pass)
}

fn updates_before_response(context: &Context) -> Result<Outcome, String> {
    let (mut peer, _, session) = with_session(context)?;
    let (before, response) = peer.call(json!(3), "session/prompt", prompt_params(&session, "hello, conform"))?;
    refused_for_auth(context, "session/prompt", &response)?;
    if response.get("result").is_none() {
        return Err(format!("the prompt failed: {}", trim(&response.to_string())));
    }
    if !before.iter().any(is_conversation_update) {
        return Ok(Outcome::Skip("the turn sent no session/update".into()));
    }
    expect_no_conversation_update(&mut peer, "an update after the prompt response")?;
    Ok(Outcome::Pass)
}

fn cancel(context: &Context) -> Result<Outcome, String> {
    let (mut peer, _, session) = with_session(context)?;
    let id = json!(3);
    // Cancel once the turn is under way (its first message).
    if !running_turn(&mut peer, context, &session, &id)? {
        return Ok(Outcome::Skip(format!(
            "the turn of `{}` ended at once, so there was nothing to cancel (give a --long-prompt that keeps a turn running)",
            trim(&context.config.long_prompt)
        )));
    }
    peer.notify("session/cancel", json!({"sessionId": session}))?;
    let (_, response) = peer.until_response(&id).map_err(|e| {
        format!(
            "no cancelled response within {} ms of session/cancel ({e}){}",
            context.config.timeout.as_millis(),
            peer.stderr_hint()
        )
    })?;
    match response["result"]["stopReason"].as_str() {
        Some("cancelled") => {}
        _ => {
            return Err(format!(
                "the prompt was not answered cancelled: {}",
                trim(&response.to_string())
            ));
        }
    }
    expect_no_conversation_update(&mut peer, "an update after the cancelled response")?;
    Ok(Outcome::Pass)
}

/// Starts a turn of `--long-prompt` on `session` and sees whether it keeps running:
/// `Ok(true)` when its first message is not its response and no response follows within
/// [`QUIET`]; `Ok(false)` when it answered by then. A turn that simply ends (an agent that
/// echoes the prompt) is not mistaken for one that ignores a cancel sent after its response.
fn running_turn(peer: &mut Peer, context: &Context, session: &str, id: &Value) -> Result<bool, String> {
    peer.request(
        id.clone(),
        "session/prompt",
        prompt_params(session, &context.config.long_prompt),
    )?;
    let is_response = |message: &Value| message.get("id") == Some(id) && message.get("method").is_none();
    let first = peer
        .recv()
        .map_err(|e| format!("the turn neither updated nor answered: {e}"))?;
    if is_response(&first) {
        refused_for_auth(context, "session/prompt", &first)?;
        return Ok(false);
    }
    let deadline = Instant::now() + QUIET;
    loop {
        match peer.recv_within(deadline.saturating_duration_since(Instant::now())) {
            Ok(message) if is_response(&message) => {
                refused_for_auth(context, "session/prompt", &message)?;
                return Ok(false);
            }
            Ok(_) => {}
            Err(ReadError::Timeout) => return Ok(true),
            Err(ReadError::Closed) => return Err(format!("the agent closed stdout{}", peer.stderr_hint())),
        }
    }
}

fn busy_session(context: &Context) -> Result<Outcome, String> {
    if let Some(skip) = manifest_only(context, "what a busy session does is the AIP-44 runtime contract's") {
        return Ok(skip);
    }
    let (mut peer, _, session) = with_session(context)?;
    let first = json!(3);
    if !running_turn(&mut peer, context, &session, &first)? {
        return Ok(Outcome::Skip(format!(
            "the turn of `{}` ended at once, so no session was busy (give a --long-prompt that keeps a turn running)",
            trim(&context.config.long_prompt)
        )));
    }
    let (_, second) = peer.call(json!(4), "session/prompt", prompt_params(&session, "a second prompt"))?;
    refused_for_auth(context, "session/prompt", &second)?;
    expect_code(&second, -32602)?;
    // The refusal does not end the running turn: no response to it for a while (it may
    // stream, or wait on a permission request). Ending it is turn.cancel's.
    let is_first = |message: &Value| message.get("id") == Some(&first) && message.get("method").is_none();
    let deadline = Instant::now() + QUIET;
    loop {
        match peer.recv_within(deadline.saturating_duration_since(Instant::now())) {
            Ok(message) if is_first(&message) => {
                return Err(format!(
                    "the first turn ended after the refusal: {}",
                    trim(&message.to_string())
                ));
            }
            Ok(_) => {}
            Err(ReadError::Timeout) => break,
            Err(ReadError::Closed) => return Err(format!("the agent closed stdout{}", peer.stderr_hint())),
        }
    }
    Ok(Outcome::Pass)
}

/// The frame limit the kit sets for `jsonrpc.oversized-frame`.
pub const FRAME_LIMIT: usize = 64 * 1024;

fn oversized_frame(context: &Context) -> Result<Outcome, String> {
    if let Some(skip) = manifest_only(context, "the frame limit is the AIP-44 runtime contract's") {
        return Ok(skip);
    }
    if let Some(skip) = process_only(context, "the kit sets the frame limit in the agent's environment") {
        return Ok(skip);
    }
    let mut peer = context.spawn_with(&[("AGENTACP_MAX_FRAME_BYTES", &FRAME_LIMIT.to_string())])?;
    start(context, &mut peer)?;
    let padding = "x".repeat(FRAME_LIMIT * 2);
    peer.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "session/new", "params": {"cwd": context.agent_root(), "mcpServers": [], "_meta": {"padding": padding}}}))?;
    let response = peer.recv().map_err(|e| {
        format!(
            "no answer to a frame of {} bytes: {e}{}",
            FRAME_LIMIT * 2,
            peer.stderr_hint()
        )
    })?;
    expect_code(&response, -32600)?;
    still_serves(context, &mut peer, "the oversized frame")?;
    Ok(Outcome::Pass)
}

#[cfg(unix)]
fn sigterm(context: &Context) -> Result<Outcome, String> {
    if let Some(skip) = process_only(context, "the kit signals the agent's process") {
        return Ok(skip);
    }
    let (mut peer, _, _) = with_session(context)?;
    let pid = peer.pid().ok_or("the agent has no process of the kit's")?;
    // Its process group (it leads one), as agentacp's runtime signals it.
    let sent = std::process::Command::new("kill")
        .args(["-TERM", "--", &format!("-{pid}")])
        .status()
        .map_err(|e| format!("cannot run kill: {e}"))?;
    if !sent.success() {
        return Err(format!("kill -TERM failed: {sent}"));
    }
    match peer.wait_exit(context.config.timeout) {
        Some(_) => Ok(Outcome::Pass),
        None => Err(format!(
            "still running {} ms after SIGTERM",
            context.config.timeout.as_millis()
        )),
    }
}

#[cfg(not(unix))]
fn sigterm(_: &Context) -> Result<Outcome, String> {
    Ok(Outcome::Skip("signals are only sent on Unix".into()))
}

fn eof_exit(context: &Context) -> Result<Outcome, String> {
    if let Some(skip) = process_only(context, "the kit closes the agent's stdin and waits for its exit") {
        return Ok(skip);
    }
    let (mut peer, _, _) = with_session(context)?;
    peer.close_stdin();
    match peer.wait_exit(context.config.timeout) {
        Some(status) if status.success() => Ok(Outcome::Pass),
        Some(status) => Err(format!("exited with {status}{}", peer.stderr_hint())),
        None => Err(format!(
            "still running {} ms after EOF",
            context.config.timeout.as_millis()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::within;
    use serde_json::json;

    #[test]
    fn a_bridge_may_offer_less_than_its_manifest_never_more() {
        let manifest = json!({"loadSession": true, "promptCapabilities": {"image": false, "audio": true}, "mcpCapabilities": {"http": true}});
        // Less: fewer trues, left-out keys.
        assert!(within(
            &json!({"loadSession": false, "promptCapabilities": {"audio": true}}),
            &manifest
        ));
        assert!(within(&json!({}), &manifest));
        // More: a capability the manifest does not allow, nested or unknown to it.
        assert!(!within(&json!({"promptCapabilities": {"image": true}}), &manifest));
        assert!(!within(&json!({"sessionCapabilities": {"list": {}}}), &manifest));
        assert!(within(
            &json!({"sessionCapabilities": {"list": {}}}),
            &json!({"sessionCapabilities": {"list": {}}})
        ));
        assert!(!within(&json!({"mcpCapabilities": {"sse": true}}), &manifest));
        assert!(!within(&json!({"x": 1}), &manifest));
    }
}
