//! Issue #48: ACP protocol v2 peers written with the official SDKs, proven against each other
//! before our runtime speaks v2 (the controls of the v2 tests).
//!
//! The clients (`src/bin/sdk-v2-client.rs` on the Rust SDK's `Client.v2()`,
//! `ts/v2-client.mjs` on the TypeScript SDK's `experimental/v2`, `py/v2_client.py` on the
//! Python SDK's `acp.experimental.v2`) have one conversation with an agent they spawn and
//! print it as JSON lines: `initialize` (protocol 2), `session/new`, a turn whose prompt is
//! only acknowledged (a `messageId`) and which ends with a `state_update` `idle` `end_turn`,
//! answering a permission request by allowing it, a second turn cancelled by
//! `session/cancel`, then `session/resume` with `replayFrom: {type: "start"}`.
//!
//! The agents (`src/bin/sdk-v2-agent.rs` on `Agent.v2()`, `ts/v2-agent.mjs` on
//! `experimental/v2`'s `agent()`, `py/v2_agent.py` on `acp.experimental.v2`) answer it the same way: `echo: TEXT` as chunks of one
//! message id, a tool call created by its first `tool_call_update` that asks for permission,
//! ` approved`, `idle` `end_turn`; `/wait` until cancelled; the session replayed on resume.
//! With `--both` each serves v1 and v2 on one stdio through its SDK's protocol router, which a
//! v1 client (the Rust SDK's, `interop::sdk::SdkClient`) reaches as a plain v1 agent.
//!
//! The TypeScript peers skip without `node` or `interop/ts/node_modules`; the Python ones
//! without `interop/py/.venv-v2` (`pip install -r interop/py/requirements-v2.txt`: the v2 API
//! is only in PyPI `agent-client-protocol` 1.0.0rc3, not in the 0.12.1 the v1 tests use).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol_http::HttpClient;
use interop::sdk::SdkClient;
use interop::websocket::WsServer;
use interop::{AgentDirs, AgentProcess, ScriptOutput, StderrMode};
use serde_json::{Value, json};

/// The bound on one whole conversation (Node and Python start slowly on a loaded machine).
const DEADLINE: Duration = Duration::from_secs(120);

#[path = "common/official_http.rs"]
mod official_http;
#[path = "common/v2_peers.rs"]
mod v2_peers;
use v2_peers::{Sdk, agent_command, agent_name, client_command};

/// What a v2 client printed.
struct Conversation {
    steps: Vec<Value>,
    output: ScriptOutput,
    /// The folders the agent ran in.
    dirs: Arc<AgentDirs>,
    /// The session's `cwd` (inside the workspace root).
    cwd: PathBuf,
}

impl Conversation {
    /// Fails the test with `message`, the client's output and stderr (with the agent's).
    #[track_caller]
    fn fail(&self, message: impl std::fmt::Display) -> ! {
        panic!(
            "{message}\n\n--- client stdout ---\n{}\n--- client and agent stderr ---\n{}",
            self.output.stdout, self.output.stderr
        )
    }

    /// The one step `name` of `turn` (`Value::Null`: a step without a turn).
    #[track_caller]
    fn step(&self, name: &str, turn: &Value) -> &Value {
        let found: Vec<&Value> = self
            .steps
            .iter()
            .filter(|s| s["step"] == name && (turn.is_null() || &s["turn"] == turn))
            .collect();
        match found.as_slice() {
            [one] => one,
            _ => self.fail(format_args!(
                "expected one `{name}` step of turn {turn}, found {}",
                found.len()
            )),
        }
    }

    /// The updates of `turn`, in the order the client received them.
    fn updates(&self, turn: &Value) -> Vec<&Value> {
        self.steps
            .iter()
            .filter(|s| s["step"] == "update" && &s["turn"] == turn)
            .map(|s| &s["update"])
            .collect()
    }

    /// The updates of `turn` of kind `kind`.
    fn updates_of(&self, turn: &Value, kind: &str) -> Vec<&Value> {
        self.updates(turn)
            .into_iter()
            .filter(|u| u["sessionUpdate"] == kind)
            .collect()
    }
}

/// Runs `client`'s v2 client against `agent` (a command line) with `flags`, in a fresh
/// workspace (the agent's environment: `env` and the `AGENTACP_*` folders); `None` (having
/// said why) when the client cannot run here.
fn converse_raw(
    client: Sdk,
    agent: &[OsString],
    flags: &[&str],
    env: &[(&str, &str)],
    dirs: Arc<AgentDirs>,
) -> Option<Conversation> {
    let command = match client_command(client) {
        Ok(command) => command,
        Err(why) => {
            interop::skip_without_peer(&why);
            return None;
        }
    };
    // One folder per client, so that clients of one server do not meet.
    let cwd = dirs.project(&format!("{client:?}-v2").to_lowercase());
    let mut script = Command::new(&command[0]);
    script
        .args(&command[1..])
        .arg(format!("--cwd={}", cwd.display()))
        .args(flags)
        .arg("--")
        .args(agent)
        .envs(dirs.env())
        .envs(env.iter().copied());
    let output = interop::run_script(&mut script, DEADLINE);
    let parsed: Result<Vec<Value>, String> = output
        .stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| serde_json::from_str(line).map_err(|e| format!("a line that is not JSON ({e}): {line}")))
        .collect();
    let (steps, bad) = match parsed {
        Ok(steps) => (steps, None),
        Err(bad) => (Vec::new(), Some(bad)),
    };
    let conversation = Conversation {
        steps,
        output,
        dirs,
        cwd,
    };
    if let Some(bad) = bad {
        conversation.fail(format_args!("{client:?}'s v2 client printed {bad}"));
    }
    Some(conversation)
}

/// Runs `client` against `agent` like [`converse_raw`] and checks that it got to the end:
/// exit 0, the last step `done`.
fn converse(
    client: Sdk,
    agent: &[OsString],
    flags: &[&str],
    env: &[(&str, &str)],
    dirs: Arc<AgentDirs>,
) -> Option<Conversation> {
    let conversation = converse_raw(client, agent, flags, env, dirs)?;
    if !conversation.output.status.is_some_and(|s| s.success()) {
        conversation.fail(format_args!(
            "{client:?}'s v2 client did not exit 0 ({:?})",
            conversation.output.status
        ));
    }
    if conversation.steps.last().map(|s| &s["step"]) != Some(&json!("done")) {
        conversation.fail("the last step is not `done`");
    }
    Some(conversation)
}

/// Whether `value` has a non-empty string `messageId`.
fn has_message_id(value: &Value) -> bool {
    value["messageId"].as_str().is_some_and(|id| !id.is_empty())
}

/// What holds of every v2 conversation: protocol 2 agreed, each prompt acknowledged with a
/// `messageId`, every message chunk carrying a `messageId`, turn 1 idle `end_turn` after a
/// non-idle state, turn 2 cancelled after the client's `session/cancel` and idle `cancelled`.
fn check_lifecycle(c: &Conversation) {
    let none = Value::Null;
    let initialize = &c.step("initialize", &none)["result"];
    if initialize["protocolVersion"] != 2 {
        c.fail(format_args!(
            "initialize agreed on {}, not 2",
            initialize["protocolVersion"]
        ));
    }
    for turn in [json!(1), json!(2)] {
        let ack = &c.step("prompt", &turn)["result"];
        if !has_message_id(ack) {
            c.fail(format_args!(
                "the prompt of turn {turn} was acknowledged without a messageId: {ack}"
            ));
        }
        let chunks = c.updates_of(&turn, "agent_message_chunk");
        if chunks.is_empty() {
            c.fail(format_args!("turn {turn} has no agent_message_chunk"));
        }
        if let Some(bare) = chunks.iter().find(|u| !has_message_id(u)) {
            c.fail(format_args!("a chunk of turn {turn} has no messageId: {bare}"));
        }
    }
    if c.step("idle", &json!(1))["stopReason"] != "end_turn" {
        c.fail("turn 1 did not end idle `end_turn`");
    }
    c.step("cancel", &json!(2));
    if c.step("idle", &json!(2))["stopReason"] != "cancelled" {
        c.fail("the cancelled turn 2 did not end idle `cancelled`");
    }
    // The SDKs' draft: a resume sends the current state before its answer, replay or not.
    // Over Streamable HTTP the state goes on the session's stream and the answer on the
    // connection's, which nothing orders: there the TypeScript client waits for the state
    // after the answer too (`afterAnswer`); over stdio and WebSocket it must come first.
    if c.steps.iter().any(|s| s["step"] == "resume") && c.updates_of(&json!("resume"), "state_update").is_empty() {
        c.fail("session/resume was answered without a state_update before it");
    }
}

/// What the SDK agents do besides (see the module's doc): the echo in one message, the tool
/// call created by its first update, asked about (the permission's subject is that call) and
/// approved, completed; on resume the session replayed with the same message ids.
fn check_sdk_agent_conversation(c: &Conversation, agent: Sdk) {
    check_lifecycle(c);
    let none = Value::Null;
    let one = json!(1);
    let name = &c.step("initialize", &none)["result"]["info"]["name"];
    if name != agent_name(agent) {
        c.fail(format_args!("the agent is named {name}, not {}", agent_name(agent)));
    }
    let chunks = c.updates_of(&one, "agent_message_chunk");
    let text: String = chunks.iter().filter_map(|u| u["content"]["text"].as_str()).collect();
    if text != "echo: hello approved" {
        c.fail(format_args!("turn 1's message reads {text:?}"));
    }
    if chunks.iter().any(|u| u["messageId"] != chunks[0]["messageId"]) {
        c.fail("turn 1's chunks are not one message");
    }
    let calls = c.updates_of(&one, "tool_call_update");
    let statuses: Vec<&Value> = calls.iter().map(|u| &u["status"]).collect();
    if statuses != [&json!("pending"), &json!("completed")] || calls[0]["toolCallId"] != calls[1]["toolCallId"] {
        c.fail(format_args!("turn 1's tool call went {statuses:?}"));
    }
    let permission = c.step("permission", &one);
    if permission["request"]["subject"]["toolCall"]["toolCallId"] != calls[0]["toolCallId"]
        || permission["answer"] != json!({"outcome": "selected", "optionId": "allow"})
    {
        c.fail(format_args!(
            "the permission request {permission} is not about the tool call, or not allowed"
        ));
    }
    let ack = &c.step("prompt", &one)["result"]["messageId"];
    let user = c.updates_of(&one, "user_message");
    if user.len() != 1 || &user[0]["messageId"] != ack {
        c.fail("turn 1's user_message does not carry the acknowledged messageId");
    }
    let resume = json!("resume");
    c.step("resume", &none);
    let replayed_ids: Vec<&Value> = c.updates(&resume).iter().map(|u| &u["messageId"]).collect();
    if !replayed_ids.contains(&ack) || !replayed_ids.contains(&&chunks[0]["messageId"]) {
        c.fail("the replay lacks turn 1's user message or its answer (by message id)");
    }
}

/// `client`'s v2 client against `agent`'s v2 agent.
fn sdk_pair(client: Sdk, agent: Sdk) {
    let command = match agent_command(agent, false) {
        Ok(command) => command,
        Err(why) => return interop::skip_without_peer(&why),
    };
    if let Some(conversation) = converse(client, &command, &[], &[], Arc::default()) {
        check_sdk_agent_conversation(&conversation, agent);
    }
}

#[test]
fn rust_v2_client_drives_the_rust_v2_agent() {
    sdk_pair(Sdk::Rust, Sdk::Rust);
}

#[test]
fn rust_v2_client_drives_the_typescript_v2_agent() {
    sdk_pair(Sdk::Rust, Sdk::TypeScript);
}

#[test]
fn typescript_v2_client_drives_the_rust_v2_agent() {
    sdk_pair(Sdk::TypeScript, Sdk::Rust);
}

#[test]
fn typescript_v2_client_drives_the_typescript_v2_agent() {
    sdk_pair(Sdk::TypeScript, Sdk::TypeScript);
}

#[test]
fn python_v2_client_drives_the_rust_v2_agent() {
    sdk_pair(Sdk::Python, Sdk::Rust);
}

#[test]
fn python_v2_client_drives_the_typescript_v2_agent() {
    sdk_pair(Sdk::Python, Sdk::TypeScript);
}

#[test]
fn rust_v2_client_drives_the_python_v2_agent() {
    sdk_pair(Sdk::Rust, Sdk::Python);
}

#[test]
fn typescript_v2_client_drives_the_python_v2_agent() {
    sdk_pair(Sdk::TypeScript, Sdk::Python);
}

#[test]
fn python_v2_client_drives_the_python_v2_agent() {
    sdk_pair(Sdk::Python, Sdk::Python);
}

/// The control of "one endpoint, both versions": `agent`'s SDK router (`--both`) serves a v2
/// client the whole v2 conversation, and the official Rust v1 client, on another run of the
/// same program, a plain v1 session (`initialize` protocol 1, `v1 echo: hi`, `end_turn`).
async fn sdk_router_serves_both(agent: Sdk) {
    let command = match agent_command(agent, true) {
        Ok(command) => command,
        Err(why) => return interop::skip_without_peer(&why),
    };
    let conversation = converse(Sdk::Rust, &command, &[], &[], Arc::default()).expect("the Rust client always runs");
    check_sdk_agent_conversation(&conversation, agent);

    let dirs = AgentDirs::new();
    let (program, args) = command.split_first().expect("a program");
    let process = AgentProcess::spawn_command(&PathBuf::from(program), args, &dirs.env(), StderrMode::Capture);
    let v1 = SdkClient::connect(process, Default::default()).await;
    let initialized = v1.initialize().await;
    if initialized.protocol_version != agent_client_protocol::schema::ProtocolVersion::V1 {
        v1.fail(format_args!(
            "the router answered a v1 client with {:?}",
            initialized.protocol_version
        ));
    }
    let session = v1.new_session(&dirs.project("v1")).await;
    let answer = v1.prompt(&session, "hi").ok().await;
    if answer.stop_reason != agent_client_protocol::v1::schema::StopReason::EndTurn {
        v1.fail(format_args!("the v1 turn ended {:?}", answer.stop_reason));
    }
    let said: String = v1
        .events()
        .iter()
        .filter_map(|e| e.chunk_text().map(str::to_owned))
        .collect();
    if said != "v1 echo: hi" {
        v1.fail(format_args!("the v1 agent said {said:?}"));
    }
}

#[tokio::test]
async fn rust_sdk_router_serves_a_v1_and_a_v2_client() {
    sdk_router_serves_both(Sdk::Rust).await;
}

#[tokio::test]
async fn typescript_sdk_router_serves_a_v1_and_a_v2_client() {
    sdk_router_serves_both(Sdk::TypeScript).await;
}

#[tokio::test]
async fn python_sdk_router_serves_a_v1_and_a_v2_client() {
    sdk_router_serves_both(Sdk::Python).await;
}

/// A shell-script agent that speaks v2 as schema-v2.0.0-alpha.3 words it: `session/prompt`
/// answered `{}`, without the `messageId` that the SDKs' later draft requires.
fn alpha3_ack_agent(dirs: &AgentDirs) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let body = r#"#!/bin/sh
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\("[^"]*"\|[0-9][0-9]*\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*) printf '%s\n' "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{\"protocolVersion\":2,\"info\":{\"name\":\"alpha3\",\"version\":\"0\"},\"capabilities\":{\"session\":{}}}}" ;;
    *'"method":"session/new"'*) printf '%s\n' "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{\"sessionId\":\"s1\"}}" ;;
    *'"method":"session/prompt"'*) printf '%s\n' "{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{}}" ;;
  esac
done
"#;
    let script = dirs.state_dir.join("alpha3-agent.sh");
    std::fs::write(&script, body).expect("write the script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    script
}

/// The negative control of the clients: an acknowledgement without `messageId` (the
/// alpha.3 shape) is a protocol error for each SDK's v2 client, which then prints an `error`
/// step and exits non-zero instead of waiting for the turn.
#[test]
fn each_sdk_v2_client_fails_on_a_prompt_answer_without_message_id() {
    let dirs = AgentDirs::new();
    let agent = alpha3_ack_agent(&dirs);
    for client in [Sdk::Rust, Sdk::TypeScript, Sdk::Python] {
        let Some(c) = converse_raw(client, &[agent.clone().into()], &[], &[], Arc::default()) else {
            continue;
        };
        if c.output.status.is_some_and(|s| s.success()) || c.output.status.is_none() {
            c.fail(format_args!(
                "{client:?}'s client did not fail promptly ({:?})",
                c.output.status
            ));
        }
        if c.steps.iter().any(|s| s["step"] == "prompt") || !c.steps.iter().any(|s| s["step"] == "error") {
            c.fail(format_args!(
                "{client:?}'s client took the answer `{{}}` as an acknowledgement"
            ));
        }
    }
}

/// The v1 client's conversation with `governed-server` (`tests/http.rs`'s).
const GOVERNED_V1: official_http::Script<'static> = official_http::Script {
    echo: "hello from v1",
    echoed: "hello from v1",
    permission: Some("/tool write-file {\"path\": \"v1.txt\", \"content\": \"hi\"}"),
    forever: "/forever",
    started: "tick",
};

/// The environment under which our example servers serve v1 and v2 on one endpoint.
const BOTH_VERSIONS: (&str, &str) = ("AGENTACP_PROTOCOL_VERSIONS", "1,2");

/// Our `echo-server` (built with agentacp's feature `v2`, serving v1 and v2) driven by
/// `client`'s v2 client over stdio, while the official Rust v1 client has a session with
/// another process of the same binary, under the same environment, at the same time: the
/// v2 conversation holds (echo `hello` in one message, `/forever` cancelled, a resume without
/// replay, which echo-server does not offer) and the v1 client gets protocol 1 and its echo.
async fn echo_server_serves(client: Sdk) {
    let binary = interop::example_binary("echo-server");
    let dirs = AgentDirs::new();
    let mut env = dirs.env();
    env.push((BOTH_VERSIONS.0, BOTH_VERSIONS.1.into()));
    let v1 = SdkClient::connect(
        AgentProcess::spawn_with_env(&binary, &env, StderrMode::Capture),
        Default::default(),
    )
    .await;
    let initialized = v1.initialize().await;
    if initialized.protocol_version != agent_client_protocol::schema::ProtocolVersion::V1 {
        v1.fail(format_args!(
            "echo-server answered a v1 client with {:?}",
            initialized.protocol_version
        ));
    }
    let session = v1.new_session(&dirs.project("v1")).await;
    let agent: Vec<OsString> = vec![binary.into()];
    let v2 = tokio::task::spawn_blocking(move || {
        converse(
            client,
            &agent,
            &["--cancel-prompt=/forever", "--no-replay"],
            &[BOTH_VERSIONS],
            Arc::default(),
        )
    });
    let answer = v1.prompt(&session, "hi from v1").ok().await;
    let Some(c) = v2.await.expect("the v2 conversation ran") else {
        return;
    };
    check_lifecycle(&c);
    let one = json!(1);
    let name = &c.step("initialize", &Value::Null)["result"]["info"]["name"];
    let text: String = c
        .updates_of(&one, "agent_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str())
        .collect();
    let user = c.updates_of(&one, "user_message");
    if name != "echo-server" || text != "hello" {
        c.fail(format_args!(
            "expected echo-server to echo `hello`, got {name} saying {text:?}"
        ));
    }
    if user.len() != 1 || user[0]["messageId"] != c.step("prompt", &one)["result"]["messageId"] {
        c.fail("turn 1's user_message does not carry the acknowledged messageId");
    }
    c.step("resume", &Value::Null);
    if answer.stop_reason != agent_client_protocol::v1::schema::StopReason::EndTurn {
        v1.fail(format_args!("the v1 turn beside it ended {:?}", answer.stop_reason));
    }
    let said: String = v1
        .events()
        .iter()
        .filter_map(|e| e.chunk_text().map(str::to_owned))
        .collect();
    if said != "hi from v1" {
        v1.fail(format_args!("echo-server told the v1 client {said:?}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_v2_client_drives_echo_server_beside_a_v1_client() {
    echo_server_serves(Sdk::Rust).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_v2_client_drives_echo_server_beside_a_v1_client() {
    echo_server_serves(Sdk::TypeScript).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_v2_client_drives_echo_server_beside_a_v1_client() {
    echo_server_serves(Sdk::Python).await;
}

/// Our `governed-server` (v1 and v2 served) driven by `client`'s v2 client through a
/// governed tool call: `/tool write-file` is announced as a tool call, asked about (the
/// permission request's subject is that call), allowed by the client, run (the file is in
/// the session's cwd) and completed; turn 1 ends `end_turn`, `/forever` is cancelled, the
/// resume (without replay) sends the current state. With `bridged`, the same through
/// `governance-bridge` serving v1 and v2 to its editor, in front of `governed-server` (v1):
/// the bridge's governance asks the v2 client, its audit log records the write.
fn governed_server_serves(client: Sdk, bridged: bool) {
    let dirs = Arc::new(AgentDirs::new());
    let downstream_audit = dirs.state_dir.join("server-audit.jsonl");
    let downstream_audit = downstream_audit.to_str().expect("a UTF-8 path");
    let (binary, env) = if bridged {
        let env = vec![BOTH_VERSIONS, ("AGENTACP_DOWNSTREAM_AUDIT_LOG", downstream_audit)];
        (interop::example_binary("governance-bridge"), env)
    } else {
        (interop::example_binary("governed-server"), vec![BOTH_VERSIONS])
    };
    let prompt = r#"--prompt=/tool write-file {"path": "x.txt", "content": "hi"}"#;
    let flags = [prompt, "--cancel-prompt=/forever", "--no-replay"];
    let Some(c) = converse(client, &[binary.into()], &flags, &env, dirs) else {
        return;
    };
    check_lifecycle(&c);
    let one = json!(1);
    let calls = c.updates_of(&one, "tool_call_update");
    let Some(first) = calls.first() else {
        c.fail("turn 1 has no tool_call_update");
    };
    let id = &first["toolCallId"];
    if calls.iter().any(|u| &u["toolCallId"] != id) {
        c.fail("turn 1 has more than one tool call");
    }
    if !calls.iter().any(|u| u["status"] == "completed") {
        c.fail("the allowed tool call never completed");
    }
    let permission = c.step("permission", &one);
    if &permission["request"]["subject"]["toolCall"]["toolCallId"] != id
        || permission["answer"]["outcome"] != "selected"
    {
        c.fail(format_args!(
            "the permission request {permission} is not about the tool call, or not allowed"
        ));
    }
    match std::fs::read_to_string(c.cwd.join("x.txt")) {
        Ok(text) if text == "hi" => {}
        other => c.fail(format_args!("the allowed write-file did not write x.txt: {other:?}")),
    }
    let audit = std::fs::read_to_string(&c.dirs.audit_log).unwrap_or_default();
    if !audit.contains("write-file") {
        c.fail("the audit log has no record of write-file");
    }
}

#[test]
fn rust_v2_client_drives_governed_server_through_a_permission() {
    governed_server_serves(Sdk::Rust, false);
}

#[test]
fn rust_v2_client_through_the_bridge_to_governed_server() {
    governed_server_serves(Sdk::Rust, true);
}

#[test]
fn typescript_v2_client_drives_governed_server_through_a_permission() {
    governed_server_serves(Sdk::TypeScript, false);
}

#[test]
fn typescript_v2_client_through_the_bridge_to_governed_server() {
    governed_server_serves(Sdk::TypeScript, true);
}

#[test]
fn python_v2_client_drives_governed_server_through_a_permission() {
    governed_server_serves(Sdk::Python, false);
}

#[test]
fn python_v2_client_through_the_bridge_to_governed_server() {
    governed_server_serves(Sdk::Python, true);
}

/// One `governed-server --listen` process serving v1 and v2 on `/acp`: the TypeScript SDK's
/// v2 client over WebSocket (`experimental/ws-client`) and over Streamable HTTP
/// (`experimental/http-client`), and the official Rust v1 `HttpClient` on a third
/// connection, all at the same time. Each v2 conversation goes through the governed
/// `write-file` (asked, allowed, run, completed), `end_turn`, a cancelled `/forever` and a
/// resume; the v1 one through its echo, an allowed write and a cancel, in protocol 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_listening_governed_server_serves_v2_sdk_clients_and_a_v1_sdk_client_at_once() {
    if let Err(why) = v2_peers::node_with_sdk() {
        return interop::skip_without_peer(&why);
    }
    let dirs = Arc::new(AgentDirs::new());
    let mut env = dirs.env();
    env.push((BOTH_VERSIONS.0, BOTH_VERSIONS.1.into()));
    let server = WsServer::start(&interop::example_binary("governed-server"), &env);
    let ws = server.url();
    let http = ws.replace("ws://", "http://");
    let v2_over = |url: String, flavour: &'static str| {
        let dirs = dirs.clone();
        tokio::task::spawn_blocking(move || {
            let prompt = format!(r#"--prompt=/tool write-file {{"path": "{flavour}.txt", "content": "hi"}}"#);
            let flags = [prompt.as_str(), "--cancel-prompt=/forever", "--no-replay"];
            // Both sessions share the TypeScript client's folder; each writes its own file.
            converse(Sdk::TypeScript, &[url.into()], &flags, &[], dirs)
        })
    };
    let over_ws = v2_over(ws, "ws");
    let over_http = v2_over(http.clone(), "http");
    let v1_client = HttpClient::new(http.trim_end_matches("/acp")).expect("a valid URL");
    let (outcome, seen) = official_http::converse(v1_client, dirs.project("v1"), &GOVERNED_V1).await;
    official_http::check(
        outcome,
        &seen,
        &GOVERNED_V1,
        &format!("the v1 client\n{}", server.stderr_text()),
    );
    for (flavour, run) in [("ws", over_ws), ("http", over_http)] {
        let Some(c) = run.await.expect("the v2 conversation ran") else {
            continue;
        };
        check_lifecycle(&c);
        let permission = c.step("permission", &json!(1));
        if permission["answer"]["outcome"] != "selected" {
            c.fail(format_args!("over {flavour}: the permission was not allowed"));
        }
        match std::fs::read_to_string(c.cwd.join(format!("{flavour}.txt"))) {
            Ok(text) if text == "hi" => {}
            other => c.fail(format_args!(
                "over {flavour}: the allowed write did not happen: {other:?}"
            )),
        }
    }
}

/// The bridge translates (issue #48): the official Rust v1 client (an editor of today)
/// through `governance-bridge` (`AGENTACP_BRIDGE_AGENT_PROTOCOL=2`) to `agent`'s v2 agent.
/// The editor sees a plain v1 agent: protocol 1, the echo as chunks, the agent's
/// `write-file` tool call (created by its first v2 `tool_call_update`) shown to it as a v1
/// `tool_call` and asked about, `approved` once allowed, the turn answered `end_turn` (the
/// v2 `idle` state); a `/wait` turn cancelled by `session/cancel` answered `cancelled`. The
/// bridge's audit log records the write and the editor's approval.
async fn bridge_joins_a_v1_editor_to_a_v2_agent(agent: Sdk) {
    let command = match agent_command(agent, false) {
        Ok(command) => command,
        Err(why) => return interop::skip_without_peer(&why),
    };
    let dirs = AgentDirs::new();
    let bridge_audit = dirs.state_dir.join("bridge-audit.jsonl");
    let mut env = dirs.bridge_env(&bridge_audit);
    env.push(("AGENTACP_BRIDGE_AGENT_PROTOCOL", "2".into()));
    let mut args: Vec<OsString> = vec!["--".into()];
    args.extend(command);
    let bridge = interop::example_binary("governance-bridge");
    let process = AgentProcess::spawn_command(&bridge, &args, &env, StderrMode::Capture);
    let editor = SdkClient::connect(process, Default::default()).await;
    editor.set_permission_policy(interop::sdk::PermissionPolicy::Select(
        agent_client_protocol::v1::schema::PermissionOptionKind::AllowOnce,
    ));
    let initialized = editor.initialize().await;
    if initialized.protocol_version != agent_client_protocol::schema::ProtocolVersion::V1 {
        editor.fail(format_args!(
            "the bridge answered the editor with {:?}",
            initialized.protocol_version
        ));
    }
    let session = editor.new_session(&dirs.project("bridged")).await;
    let answer = editor.prompt(&session, "hello").ok().await;
    if answer.stop_reason != agent_client_protocol::v1::schema::StopReason::EndTurn {
        editor.fail(format_args!("the bridged v2 turn ended {:?}", answer.stop_reason));
    }
    let events = editor.events();
    let said: String = events
        .iter()
        .filter_map(|e| e.chunk_text().map(str::to_owned))
        .collect();
    if said != "echo: hello approved" {
        editor.fail(format_args!("the editor read {said:?}"));
    }
    let kinds: Vec<&str> = events.iter().filter_map(|e| e.update_kind()).collect();
    let asked = events
        .iter()
        .filter(|e| matches!(e, interop::sdk::Event::Permission { .. }))
        .count();
    if !kinds.contains(&"tool_call") || asked != 1 {
        editor.fail(format_args!("the editor saw {kinds:?} and {asked} permission requests"));
    }
    let waiting = editor.prompt(&session, "/wait");
    editor
        .wait_until("the waiting chunk", |events| {
            events.iter().any(|e| e.chunk_text() == Some("waiting"))
        })
        .await;
    editor.cancel(&session);
    let cancelled = waiting.ok().await;
    if cancelled.stop_reason != agent_client_protocol::v1::schema::StopReason::Cancelled {
        editor.fail(format_args!(
            "the cancelled bridged turn ended {:?}",
            cancelled.stop_reason
        ));
    }
    let status = editor.shutdown().await;
    let audit = std::fs::read_to_string(&bridge_audit).unwrap_or_default();
    assert!(status.success(), "the bridge exited {status:?}");
    assert!(
        audit.contains("write-file") && audit.contains("approvedBy"),
        "the bridge's audit log lacks the approved write-file:\n{audit}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_joins_a_v1_sdk_editor_to_the_rust_v2_agent() {
    bridge_joins_a_v1_editor_to_a_v2_agent(Sdk::Rust).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_joins_a_v1_sdk_editor_to_the_typescript_v2_agent() {
    bridge_joins_a_v1_editor_to_a_v2_agent(Sdk::TypeScript).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridge_joins_a_v1_sdk_editor_to_the_python_v2_agent() {
    bridge_joins_a_v1_editor_to_a_v2_agent(Sdk::Python).await;
}

#[path = "common/asker.rs"]
mod asker;

/// The official Python SDK's v2 client (`py/v2_elicit.py`) answers our server's elicitations:
/// the server (v1 and v2 on one stdio, in process, on the script's stdin and stdout) asks a
/// form and a URL interaction of a v2 client, which accepts both; the URL one is completed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_v2_sdk_client_answers_our_servers_elicitations() {
    let python = match interop::python_with_acp_v2() {
        Ok(python) => python,
        Err(why) => return interop::skip_without_peer(&why),
    };
    let root = tempfile::tempdir().unwrap();
    let cwd = root.path().canonicalize().unwrap();
    let seen_file = cwd.join("elicited.json");
    let sink = agentacp::audit::MemorySink::new();
    let options = agentacp::server::ServerOptions {
        workspace_root: Some(cwd.clone()),
        state_dir: Some(cwd.join(".state")),
        audit: Some(agentacp::audit::AuditLog::with_sink(Box::new(sink.clone()))),
        protocol_versions: Some(vec![1, 2]),
        ..agentacp::server::ServerOptions::default()
    };
    let mut script = tokio::process::Command::new(python)
        .arg(v2_peers::here().join("py/v2_elicit.py"))
        .arg(&seen_file)
        .arg(&cwd)
        .args(["form", "url"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python starts");
    let (to_script, from_script) = (script.stdin.take().unwrap(), script.stdout.take().unwrap());
    let served = agentacp::server::serve(asker::Asker, options, from_script, to_script);
    let served = tokio::time::timeout(DEADLINE, served).await;
    let out = tokio::time::timeout(DEADLINE, script.wait_with_output())
        .await
        .expect("the script ended in time")
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "v2_elicit.py failed ({:?}):\n{stderr}",
        out.status
    );
    assert!(
        served.is_ok_and(|served| served.is_ok()),
        "the server ended badly:\n{stderr}"
    );
    let seen: Value = serde_json::from_str(&std::fs::read_to_string(&seen_file).unwrap()).unwrap();
    asker::check_form_then_url(&seen, &sink);
}
