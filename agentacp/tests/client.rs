//! The typed ACP client (`agentacp::client`) against the example servers, and against tiny
//! fake agents (python3 and sh scripts) that misbehave on purpose. Every wait is bounded.

use std::future::Future;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentacp::client::{AgentCommand, Client, ClientError, ClientOptions, PermissionDecision, PromptEvent, Update};
use agentacp::wire::default as wire;
use serde_json::Value;

/// The bound on each test's body.
const TEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs a test body within [`TEST_TIMEOUT`]. The example binaries are built first, outside
/// the bound: a rebuild can take longer than the bound on a loaded machine.
async fn bounded<T>(future: impl Future<Output = T>) -> T {
    example_binary("echo-server");
    tokio::time::timeout(TEST_TIMEOUT, future)
        .await
        .expect("the test finished within its bound")
}

// ---- the example servers -------------------------------------------------------------------

/// Finds the workspace's binaries (shared with the interop crate).
#[path = "../../interop/src/workspace_bins.rs"]
#[allow(dead_code, reason = "the release builds are for the benchmarks")]
mod workspace_bins;

/// The debug build of the example binary `name`.
fn example_binary(name: &str) -> PathBuf {
    workspace_bins::debug_binary(name).unwrap_or_else(|e| panic!("{e}"))
}

/// Temporary workspace root, state folder and audit log for one agent.
struct Dirs {
    _tmp: tempfile::TempDir,
    workspace: PathBuf,
    state: PathBuf,
    audit: PathBuf,
}

impl Dirs {
    fn new() -> Dirs {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().canonicalize().unwrap();
        let workspace = base.join("workspace");
        let state = base.join("state");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::create_dir_all(&state).unwrap();
        Dirs {
            audit: base.join("audit.jsonl"),
            _tmp: tmp,
            workspace,
            state,
        }
    }

    fn command(&self, binary: &str) -> AgentCommand {
        AgentCommand::new(example_binary(binary))
            .current_dir(&self.workspace)
            .env("AGENTACP_WORKSPACE_ROOT", &self.workspace)
            .env("AGENTACP_STATE_DIR", &self.state)
            .env("AGENTACP_AUDIT_LOG", &self.audit)
    }
}

fn texts(updates: &[Update]) -> Vec<String> {
    updates.iter().filter_map(|u| u.text().map(str::to_string)).collect()
}

/// Connects to the agent `command` with `options` and opens a session in `cwd`.
async fn start_session(command: AgentCommand, options: ClientOptions, cwd: &Path) -> (Client, wire::SessionId) {
    let client = Client::connect(command, options).await.unwrap();
    let session = client.new_session(cwd).await.unwrap();
    (client, session)
}

/// Runs the prompt `text` in `session` to its end: the turn's updates and its stop reason.
async fn run_prompt(
    client: &Client,
    session: &wire::SessionId,
    text: &str,
) -> Result<(Vec<Update>, wire::StopReason), ClientError> {
    client.prompt_text(session, text).await.unwrap().collect().await
}

#[tokio::test]
async fn the_handshake_reports_the_agents_capabilities_and_info() {
    bounded(async {
        let dirs = Dirs::new();
        let client = Client::connect(dirs.command("governed-server"), ClientOptions::default())
            .await
            .unwrap();
        let init = client.initialize_response();
        assert_eq!(init.protocol_version, wire::PROTOCOL_VERSION);
        let info = init.agent_info.as_ref().expect("agentInfo");
        assert!(!info.name.is_empty());
        assert!(!info.version.is_empty());
        assert!(
            init.agent_capabilities.load_session,
            "governed-server supports session/load"
        );
        let meta = serde_json::to_value(&init.meta).unwrap();
        assert!(meta["aip44"]["acp_rev"].is_string(), "{meta}");
        assert!(client.close().await.is_some_and(|s| s.success()));
    })
    .await;
}

#[tokio::test]
async fn a_streamed_prompt_yields_every_chunk_in_order_then_end_turn() {
    bounded(async {
        let dirs = Dirs::new();
        let (client, session) =
            start_session(dirs.command("echo-server"), ClientOptions::default(), &dirs.workspace).await;
        let (updates, stop) = run_prompt(&client, &session, "/stream 100 64").await.unwrap();
        assert_eq!(stop, wire::StopReason::EndTurn);
        let texts = texts(&updates);
        assert_eq!(texts.len(), 100);
        for (i, text) in texts.iter().enumerate() {
            assert!(text.starts_with(&format!("{i:08}")), "chunk {i}: {text}");
            assert_eq!(text.len(), 64);
        }
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn cancel_ends_a_running_turn_with_cancelled_and_the_session_goes_on() {
    bounded(async {
        let dirs = Dirs::new();
        let (client, session) =
            start_session(dirs.command("echo-server"), ClientOptions::default(), &dirs.workspace).await;
        let mut turn = client.prompt_text(&session, "/forever").await.unwrap();
        // Wait for the turn to run (3 ticks), then cancel it.
        let mut ticks = 0;
        while ticks < 3 {
            match turn.next().await.unwrap().unwrap() {
                PromptEvent::Update(_) => ticks += 1,
                other => panic!("stopped early: {other:?}"),
            }
        }
        client.cancel(&session).await.unwrap();
        let stop = loop {
            match turn.next().await.expect("the turn ends").unwrap() {
                PromptEvent::Update(_) => continue,
                PromptEvent::Stop(reason) => break reason,
                other => panic!("not a prompt event: {other:?}"),
            }
        };
        assert_eq!(stop, wire::StopReason::Cancelled);
        assert!(turn.next().await.is_none(), "nothing after the stop");
        drop(turn);
        let (updates, stop) = run_prompt(&client, &session, "hello again").await.unwrap();
        assert_eq!(stop, wire::StopReason::EndTurn);
        assert_eq!(texts(&updates), ["hello again"]);
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn load_session_returns_the_replayed_history() {
    bounded(async {
        let dirs = Dirs::new();
        let (first, session) = start_session(
            dirs.command("governed-server"),
            ClientOptions::default(),
            &dirs.workspace,
        )
        .await;
        let (_, stop) = run_prompt(&first, &session, "remember me").await.unwrap();
        assert_eq!(stop, wire::StopReason::EndTurn);
        first.close().await;
        let second = Client::connect(dirs.command("governed-server"), ClientOptions::default())
            .await
            .unwrap();
        let mut load = second.load_session(&session, &dirs.workspace).await.unwrap();
        let mut replayed = Vec::new();
        loop {
            match load.next().await.expect("the load ends").unwrap() {
                PromptEvent::Replay(update) => replayed.push(update),
                PromptEvent::Loaded => break,
                other => panic!("a load yields only replayed history, then `Loaded`: {other:?}"),
            }
        }
        assert!(texts(&replayed).iter().any(|t| t == "remember me"), "{replayed:?}");
        second.close().await;
    })
    .await;
}

/// A turn of governed-server (its environment plus `env`) that runs `/tool write-file`,
/// which asks for permission: the client, still open, the turn's updates, and the folders.
async fn write_file_turn(options: ClientOptions, env: &[(&str, &str)]) -> (Client, Vec<Update>, Dirs) {
    let dirs = Dirs::new();
    let mut command = dirs.command("governed-server");
    for (key, value) in env {
        command = command.env(key, value);
    }
    let (client, session) = start_session(command, options, &dirs.workspace).await;
    let (updates, stop) = run_prompt(&client, &session, r#"/tool write-file {"path":"x.txt","content":"y"}"#)
        .await
        .unwrap();
    assert_eq!(stop, wire::StopReason::EndTurn);
    assert!(
        updates.iter().any(|u| matches!(u, Update::ToolCall(_))),
        "a tool_call was announced: {updates:?}"
    );
    (client, updates, dirs)
}

async fn write_file_tool(options: ClientOptions) -> (Vec<String>, Dirs) {
    let (client, updates, dirs) = write_file_turn(options, &[]).await;
    client.close().await;
    (texts(&updates), dirs)
}

/// `options` with a permission handler that answers every question `decision`; how many
/// questions it was asked.
fn counting_permission(options: ClientOptions, decision: PermissionDecision) -> (ClientOptions, Arc<AtomicUsize>) {
    let asked = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&asked);
    let options = options.with_permission(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
        let decision = decision.clone();
        async move { decision }
    });
    (options, asked)
}

#[tokio::test]
async fn an_approved_permission_request_runs_the_tool() {
    bounded(async {
        let asked = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&asked);
        let options = ClientOptions::default().with_permission(move |request: wire::RequestPermissionRequest| {
            counter.fetch_add(1, Ordering::SeqCst);
            assert!(!request.options.is_empty());
            async { PermissionDecision::Approve }
        });
        let (texts, dirs) = write_file_tool(options).await;
        assert_eq!(asked.load(Ordering::SeqCst), 1, "the callback was asked once");
        assert!(texts.iter().any(|t| t.starts_with("completed")), "{texts:?}");
        assert_eq!(std::fs::read_to_string(dirs.workspace.join("x.txt")).unwrap(), "y");
    })
    .await;
}

#[tokio::test]
async fn permission_requests_are_rejected_by_default() {
    bounded(async {
        let (texts, dirs) = write_file_tool(ClientOptions::default()).await;
        assert!(texts.iter().any(|t| t.starts_with("rejected")), "{texts:?}");
        assert!(!dirs.workspace.join("x.txt").exists());
    })
    .await;
}

#[tokio::test]
async fn a_permission_handler_that_takes_too_long_counts_as_a_rejection() {
    bounded(async {
        let options = ClientOptions {
            permission_timeout: Duration::from_millis(200),
            ..ClientOptions::default()
        }
        .with_permission(|_| std::future::pending::<PermissionDecision>());
        let (texts, dirs) = write_file_tool(options).await;
        assert!(texts.iter().any(|t| t.starts_with("rejected")), "{texts:?}");
        assert!(!dirs.workspace.join("x.txt").exists());
    })
    .await;
}

/// The server gives up on its permission request (its own timeout, 200 ms here): it cancels
/// the request at the client (`$/cancel_request`), which withdraws the question (the handler's
/// future is dropped) instead of leaving it open until the client's own timeout.
#[tokio::test]
async fn a_permission_request_the_server_gives_up_on_is_withdrawn_at_the_client() {
    bounded(async {
        let (question, withdrawn) = tokio::sync::oneshot::channel::<()>();
        let question = std::sync::Mutex::new(Some(question));
        let options = ClientOptions {
            permission_timeout: Duration::from_secs(600),
            ..ClientOptions::default()
        }
        .with_permission(move |_| {
            // Held by the question: dropped with it.
            let asked = question.lock().unwrap().take();
            async move {
                let _asked = asked;
                std::future::pending::<PermissionDecision>().await
            }
        });
        let (client, updates, dirs) = write_file_turn(options, &[("AGENTACP_PERMISSION_TIMEOUT_MS", "200")]).await;
        assert!(texts(&updates).iter().any(|t| t.starts_with("rejected")), "{updates:?}");
        assert!(withdrawn.await.is_err(), "the question was dropped, not answered");
        assert!(!dirs.workspace.join("x.txt").exists());
        client.close().await;
    })
    .await;
}

// ---- fake agents ---------------------------------------------------------------------------

const FAKE_AGENT: &str = r#"
import json, os, sys, time
mode = sys.argv[1]
# Optional: a file to write our pid to, and "linger" (keep running after our input ends, as
# an agent busy with a turn does, until a signal).
if len(sys.argv) > 2:
    with open(sys.argv[2], "w") as f:
        f.write(str(os.getpid()))
linger = sys.argv[3:4] == ["linger"]
authenticated = False
def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
def raw(text):
    sys.stdout.write(text)
    sys.stdout.flush()
def update(text):
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1",
          "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}})
prompts = 0
client_capabilities = None
for line in sys.stdin:
    msg = json.loads(line)
    method, id = msg.get("method"), msg.get("id")
    if method == "initialize":
        client_capabilities = msg["params"].get("clientCapabilities")
        if mode == "silent":
            continue
        version = 99 if mode == "version" else 1
        result = {"protocolVersion": version, "agentCapabilities": {}, "agentInfo": {"name": "fake", "version": "0"}}
        if mode == "auth":
            # As Codex does: an agent method, and env_var methods naming the variable it reads.
            result["agentCapabilities"] = {"auth": {"logout": {}}}
            result["authMethods"] = [
                {"id": "chatgpt", "name": "Login with ChatGPT"},
                {"id": "fake-key", "name": "Use FAKE_API_KEY", "type": "env_var", "vars": [{"name": "FAKE_API_KEY"}]},
                {"id": "login", "name": "Log in in a terminal", "type": "terminal", "args": ["--login"]},
            ]
        send({"jsonrpc": "2.0", "id": id, "result": result})
    elif method == "authenticate":
        method_id = msg["params"].get("methodId")
        if method_id == "fake-key" and os.environ.get("FAKE_API_KEY"):
            authenticated = True
            send({"jsonrpc": "2.0", "id": id, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": "Authentication failed",
                  "data": {"method": method_id, "reason": "FAKE_API_KEY is not set"}}})
    elif method == "logout":
        authenticated = False
        send({"jsonrpc": "2.0", "id": id, "result": {}})
    elif method == "session/new" and mode == "auth" and not authenticated:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": "Authentication required",
              "data": {"reason": "no credentials: set FAKE_API_KEY or log in"}}})
    elif method == "session/new" and mode == "errors":
        # Gemini answered with an HTTP status as the code.
        send({"jsonrpc": "2.0", "id": id, "error": {"code": 500, "message": "Internal Server Error",
              "data": "quota exceeded for model fake-1"}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": id, "result": {"sessionId": "s1"}})
        if mode == "twice":
            send({"jsonrpc": "2.0", "id": id, "result": {"sessionId": "s2"}})
    elif method == "session/prompt":
        prompts += 1
        if mode == "crash":
            update("partial")
            sys.stderr.write("fake agent: about to crash\nfake agent: the disk is on fire\n")
            sys.stderr.flush()
            sys.exit(1)
        if mode == "huge":
            raw('{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":'
                '{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"'
                + "x" * 10_000_000 + '"}}}}\n')
        if mode == "huge-response" and prompts == 1:
            raw('{"jsonrpc":"2.0","id":' + json.dumps(id) + ',"result":{"stopReason":"end_turn","_meta":{"pad":"'
                + "x" * 10_000_000 + '"}}}\n')
            continue
        if mode == "requests":
            # The prompt's text is a JSON list of [method, params] or [method, params,
            # "cancel"]: ask the client each one (and cancel it right after; with
            # "cancel-at-once", in the same write, so the client reads both together) and
            # stream its answer back as a message chunk.
            asks = json.loads(msg["params"]["prompt"][0]["text"])
            for n, ask in enumerate(asks):
                ask_method, ask_params = ask[0], ask[1]
                if ask_method == "$clientCapabilities":
                    # Not a request: what the client advertised at initialize.
                    update(json.dumps({"result": client_capabilities}, sort_keys=True))
                    continue
                ask_id = "ask-%d" % n
                request = {"jsonrpc": "2.0", "id": ask_id, "method": ask_method, "params": ask_params}
                cancel = {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": ask_id}}
                if ask[2:] == ["cancel-at-once"]:
                    raw(json.dumps(request) + "\n" + json.dumps(cancel) + "\n")
                else:
                    send(request)
                if ask[2:] == ["cancel"]:
                    send(cancel)
                for answer_line in sys.stdin:
                    answer = json.loads(answer_line)
                    if answer.get("id") == ask_id and "method" not in answer:
                        break
                answer.pop("jsonrpc", None)
                answer.pop("id", None)
                update(json.dumps(answer, sort_keys=True))
            send({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}})
            continue
        if mode == "stall":
            update("one")
            continue
        if mode == "prompt-error":
            # Codex: a bare internal error, the real cause in `data`.
            send({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": "Internal error",
                  "data": {"message": "stream disconnected before completion: model at capacity"}}})
            continue
        if mode == "trickle":
            import time
            for n in range(6):
                update("tick %d" % n)
                time.sleep(0.1)
        if mode == "updates":
            for u in [{"sessionUpdate": "current_mode_update", "currentModeId": "architect"},
                      {"sessionUpdate": "available_commands_update",
                       "availableCommands": [{"name": "review", "description": "Review a change"}]},
                      {"sessionUpdate": "usage_update", "used": 1200, "size": 200000},
                      {"sessionUpdate": "something_new", "x": 1}]:
                send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s1", "update": u}})
        if mode == "garbage":
            raw("this is not json\n")
            raw('{"jsonrpc": "2.0", "method": \n')
            raw("[1, 2, 3]\n")
            raw('"a string"\n')
            raw('{"jsonrpc":"2.0","id":987654,"result":{}}\n')
            raw('{"jsonrpc":"2.0","method":"session/update","params":{"nope":1}}\n')
        update("after")
        send({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}})
while linger:
    time.sleep(1)
"#;

/// Answers `initialize`, then ignores SIGTERM and the end of its input.
const STUBBORN_AGENT: &str = r#"
trap '' TERM
read -r line
id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1}}\n' "$id"
while true; do sleep 1; done
"#;

/// Starts a helper that leaves the agent's process group and session (`setsid`, as a tool that
/// daemonizes does) and writes its pid to `$1`; answers `initialize`, then reads its input to
/// the end and exits, orphaning the helper.
const SETSID_AGENT: &str = r#"
setsid sh -c 'echo $$ > "$1.tmp" && mv "$1.tmp" "$1" && exec sleep 600' helper "$1" < /dev/null > /dev/null 2>&1 &
read -r line
id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1}}\n' "$id"
while read -r line; do :; done
"#;

/// What npm's `.bin` shims do: run the real agent as a child (not `exec`) and wait for it, so
/// the agent is a grandchild of the client, in the launcher's process group.
const LAUNCHER: &str = r#"
"$@"
status=$?
exit $status
"#;

struct Fake {
    dir: tempfile::TempDir,
}

impl Fake {
    fn new() -> Fake {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("agent.py"), FAKE_AGENT).unwrap();
        std::fs::write(dir.path().join("stubborn.sh"), STUBBORN_AGENT).unwrap();
        std::fs::write(dir.path().join("launcher.sh"), LAUNCHER).unwrap();
        std::fs::write(dir.path().join("setsid.sh"), SETSID_AGENT).unwrap();
        Fake { dir }
    }

    fn python_path() -> &'static str {
        if Path::new("/usr/bin/python3").exists() {
            "/usr/bin/python3"
        } else {
            "python3"
        }
    }

    fn python(&self, mode: &str) -> AgentCommand {
        AgentCommand::new(Fake::python_path())
            .arg(self.dir.path().join("agent.py"))
            .arg(mode)
            .current_dir(self.dir.path())
    }

    /// A client of the fake agent in `mode` with `options`, and a session in the fake's folder.
    async fn session(&self, mode: &str, options: ClientOptions) -> (Client, wire::SessionId) {
        start_session(self.python(mode), options, self.dir.path()).await
    }

    /// The launcher's command line for the fake agent in `mode`, which writes its pid to the
    /// returned file and lingers after its input ends.
    fn launched_args(&self, mode: &str) -> (Vec<std::ffi::OsString>, PathBuf) {
        let pid_file = self.dir.path().join(format!("{mode}.pid"));
        let args = vec![
            self.dir.path().join("launcher.sh").into_os_string(),
            Fake::python_path().into(),
            self.dir.path().join("agent.py").into_os_string(),
            mode.into(),
            pid_file.clone().into_os_string(),
            "linger".into(),
        ];
        (args, pid_file)
    }

    /// The fake agent in `mode` behind a launcher (see [`LAUNCHER`]); the file the agent
    /// writes its pid to.
    fn launched(&self, mode: &str) -> (AgentCommand, PathBuf) {
        let (args, pid_file) = self.launched_args(mode);
        let command = AgentCommand::new("/bin/sh").args(args).current_dir(self.dir.path());
        (command, pid_file)
    }

    fn stubborn(&self) -> AgentCommand {
        AgentCommand::new("/bin/sh").arg(self.dir.path().join("stubborn.sh"))
    }

    /// The command line of [`SETSID_AGENT`], and the file its helper writes its pid to.
    fn setsid_args(&self) -> (Vec<std::ffi::OsString>, PathBuf) {
        let pid_file = self.dir.path().join("helper.pid");
        let args = vec![
            "/bin/sh".into(),
            self.dir.path().join("setsid.sh").into_os_string(),
            pid_file.clone().into_os_string(),
        ];
        (args, pid_file)
    }
}

/// Whether `pid` is gone or at least not a zombie.
fn not_a_zombie(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // "pid (comm) S ...": the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().as_bytes().first() != Some(&b'Z')),
    }
}

fn process_gone(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test]
async fn an_agent_that_never_answers_initialize_fails_with_a_timeout() {
    bounded(async {
        let fake = Fake::new();
        let options = ClientOptions {
            initialize_timeout: Duration::from_millis(500),
            ..ClientOptions::default()
        };
        let started = Instant::now();
        let error = Client::connect(fake.python("silent"), options).await.unwrap_err();
        assert!(
            matches!(&error, ClientError::Timeout { what, after, .. } if what == "initialize" && *after == Duration::from_millis(500)),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(message.contains("initialize") && message.contains("500ms"), "{message}");
        assert!(started.elapsed() < Duration::from_secs(10));
    })
    .await;
}

#[tokio::test]
async fn an_agent_choosing_another_protocol_version_is_refused() {
    bounded(async {
        let fake = Fake::new();
        let error = Client::connect(fake.python("version"), ClientOptions::default())
            .await
            .unwrap_err();
        assert!(
            matches!(error, ClientError::UnsupportedProtocol { agent: 99, ours } if ours == wire::PROTOCOL_VERSION),
            "{error:?}"
        );
        assert!(error.to_string().contains("99"), "{error}");
    })
    .await;
}

#[tokio::test]
async fn an_agent_crashing_mid_turn_fails_the_prompt_with_its_stderr_and_is_reaped() {
    bounded(async {
        let fake = Fake::new();
        let (client, session) = fake.session("crash", ClientOptions::default()).await;
        let pid = client.pid().unwrap();
        let mut turn = client.prompt_text(&session, "go").await.unwrap();
        let first = turn.next().await.unwrap().unwrap();
        assert!(
            matches!(&first, PromptEvent::Update(u) if u.text() == Some("partial")),
            "{first:?}"
        );
        let error = turn.next().await.unwrap().unwrap_err();
        let message = error.to_string();
        assert!(message.contains("the disk is on fire"), "{message}");
        match &error {
            ClientError::AgentExited { status, stderr } => {
                assert_eq!(status.and_then(|s| s.code()), Some(1), "{error:?}");
                assert_eq!(
                    stderr.last().map(String::as_str),
                    Some("fake agent: the disk is on fire")
                );
            }
            other => panic!("{other:?}"),
        }
        // The exit status was read, so the child was reaped: no zombie.
        assert!(not_a_zombie(pid), "pid {pid} is a zombie");
        assert!(turn.next().await.is_none());
        // Later requests fail at once too.
        assert!(matches!(
            client.new_session(fake.dir.path()).await,
            Err(ClientError::AgentExited { .. })
        ));
        client.close().await;
        assert!(process_gone(pid));
    })
    .await;
}

#[tokio::test]
async fn an_agent_ignoring_sigterm_is_killed_after_the_grace_period() {
    bounded(async {
        let fake = Fake::new();
        let options = ClientOptions {
            exit_grace: Duration::from_millis(100),
            kill_grace: Duration::from_secs(5),
            ..ClientOptions::default()
        };
        let client = Client::connect(fake.stubborn(), options).await.unwrap();
        let pid = client.pid().unwrap();
        let started = Instant::now();
        let status = client.close().await.expect("the agent was reaped");
        let took = started.elapsed();
        assert_eq!(status.signal(), Some(9), "SIGKILL ended it: {status:?}");
        assert!(took >= Duration::from_secs(5), "SIGTERM was ignored for 5 s: {took:?}");
        assert!(
            took < Duration::from_secs(8),
            "killed soon after the grace period: {took:?}"
        );
        assert!(process_gone(pid), "pid {pid} was reaped");
    })
    .await;
}

#[tokio::test]
async fn an_oversized_update_is_discarded_and_the_turn_goes_on() {
    bounded(async {
        let fake = Fake::new();
        let (client, session) = fake.session("huge", ClientOptions::default()).await;
        let (updates, stop) = run_prompt(&client, &session, "go").await.unwrap();
        assert_eq!(texts(&updates), ["after"]);
        assert_eq!(stop, wire::StopReason::EndTurn);
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn an_oversized_answer_fails_its_request_and_the_next_one_works() {
    bounded(async {
        let fake = Fake::new();
        let (client, session) = fake.session("huge-response", ClientOptions::default()).await;
        let error = run_prompt(&client, &session, "go").await.unwrap_err();
        assert!(
            matches!(&error, ClientError::Rpc { error, .. } if error.message.contains("over the limit")),
            "{error:?}"
        );
        let (updates, stop) = run_prompt(&client, &session, "again").await.unwrap();
        assert_eq!(texts(&updates), ["after"]);
        assert_eq!(stop, wire::StopReason::EndTurn);
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn lines_that_are_not_json_rpc_are_ignored() {
    bounded(async {
        let fake = Fake::new();
        let (client, session) = fake.session("garbage", ClientOptions::default()).await;
        let (updates, stop) = run_prompt(&client, &session, "go").await.unwrap();
        assert_eq!(texts(&updates), ["after"]);
        assert_eq!(stop, wire::StopReason::EndTurn);
        // And the connection still works.
        client.new_session(fake.dir.path()).await.unwrap();
        client.close().await;
    })
    .await;
}

// ---- fs handlers -----------------------------------------------------------------------------

/// Runs the fake agent's `requests` mode: it sends each `[method, params]` to the client and
/// streams back each answer (`{"result": ...}` or `{"error": ...}`) as JSON.
async fn agent_requests(options: ClientOptions, root: &Path, asks: Value) -> Vec<Value> {
    let fake = Fake::new();
    let (client, session) = start_session(fake.python("requests"), options.with_workspace_root(root), root).await;
    let (updates, stop) = run_prompt(&client, &session, &asks.to_string()).await.unwrap();
    assert_eq!(stop, wire::StopReason::EndTurn);
    client.close().await;
    texts(&updates)
        .iter()
        .map(|text| serde_json::from_str(text).unwrap())
        .collect()
}

fn read(path: &Path) -> Value {
    serde_json::json!(["fs/read_text_file", {"sessionId": "s1", "path": path}])
}

#[tokio::test]
async fn fs_reads_are_confined_to_the_workspace_root() {
    bounded(async {
        let dirs = Dirs::new();
        let inside = dirs.workspace.join("notes.txt");
        std::fs::write(&inside, "one\ntwo\nthree\n").unwrap();
        let outside_dir = tempfile::tempdir().unwrap();
        let outside = outside_dir.path().join("secret.txt");
        std::fs::write(&outside, "secret").unwrap();
        std::os::unix::fs::symlink(&outside, dirs.workspace.join("link.txt")).unwrap();
        let asks = serde_json::json!([
            read(&inside),
            ["fs/read_text_file", {"sessionId": "s1", "path": inside, "line": 2, "limit": 1}],
            read(&outside),
            read(&dirs.workspace.join("link.txt")),
            ["fs/read_text_file", {"sessionId": "s1", "path": "notes.txt"}],
            read(&dirs.workspace.join("../../etc/passwd")),
            read(&dirs.workspace.join("missing.txt")),
            ["fs/write_text_file", {"sessionId": "s1", "path": dirs.workspace.join("w.txt"), "content": "x"}],
        ]);
        let options = ClientOptions::default().with_handlers(agentacp::client::Builtin::read_only());
        let answers = agent_requests(options, &dirs.workspace, asks).await;
        assert_eq!(answers[0]["result"]["content"], "one\ntwo\nthree\n", "{answers:?}");
        assert_eq!(
            answers[1]["result"]["content"], "two\n",
            "lines are 1-based: {answers:?}"
        );
        for (n, what, says) in [
            (2, "outside", "outside"),
            (3, "a symlink out", "symbolic link"),
            (5, "`..` out", "outside"),
        ] {
            assert_eq!(answers[n]["error"]["code"], -32602, "{what}: {answers:?}");
            assert!(
                answers[n]["error"]["message"].as_str().unwrap().contains(says),
                "{what}: {answers:?}"
            );
        }
        assert_eq!(answers[4]["error"]["code"], -32602, "a relative path: {answers:?}");
        assert!(answers[4]["error"]["message"].as_str().unwrap().contains("absolute"));
        assert_eq!(answers[6]["error"]["code"], -32002, "a missing file: {answers:?}");
        assert_eq!(
            answers[7]["error"]["code"], -32601,
            "writing was not offered: {answers:?}"
        );
        assert!(!dirs.workspace.join("w.txt").exists());
    })
    .await;
}

#[tokio::test]
async fn fs_writes_stay_inside_the_root_and_undeclared_methods_are_unknown() {
    bounded(async {
        let dirs = Dirs::new();
        let outside_dir = tempfile::tempdir().unwrap();
        let asks = serde_json::json!([
            ["fs/write_text_file", {"sessionId": "s1", "path": dirs.workspace.join("sub/new.txt"), "content": "fresh"}],
            ["fs/write_text_file", {"sessionId": "s1", "path": outside_dir.path().join("x.txt"), "content": "no"}],
            ["terminal/create", {"sessionId": "s1", "command": "true"}],
            ["fs/delete_everything", {}],
        ]);
        let options = ClientOptions::default().with_handlers(agentacp::client::Builtin::read_write());
        let answers = agent_requests(options, &dirs.workspace, asks).await;
        assert!(answers[0]["result"].is_object(), "{answers:?}");
        assert_eq!(
            std::fs::read_to_string(dirs.workspace.join("sub/new.txt")).unwrap(),
            "fresh"
        );
        assert_eq!(answers[1]["error"]["code"], -32602, "{answers:?}");
        assert!(!outside_dir.path().join("x.txt").exists());
        assert_eq!(
            answers[2]["error"]["code"], -32601,
            "terminal was not offered: {answers:?}"
        );
        assert_eq!(answers[3]["error"]["code"], -32601, "{answers:?}");
    })
    .await;
}

#[tokio::test]
async fn the_builtin_terminal_runs_a_command_in_the_session_cwd() {
    bounded(async {
        let dirs = Dirs::new();
        std::fs::write(dirs.workspace.join("marker.txt"), "").unwrap();
        let outside = tempfile::tempdir().unwrap();
        let asks = serde_json::json!([
            ["terminal/create", {"sessionId": "s1", "command": "ls"}],
            ["terminal/wait_for_exit", {"sessionId": "s1", "terminalId": "term-1"}],
            ["terminal/output", {"sessionId": "s1", "terminalId": "term-1"}],
            ["terminal/release", {"sessionId": "s1", "terminalId": "term-1"}],
            ["terminal/output", {"sessionId": "s1", "terminalId": "term-1"}],
            ["terminal/create", {"sessionId": "s1", "command": "ls", "cwd": outside.path()}],
        ]);
        // Every `terminal/create` is a permission decision; the user approves these.
        let options = ClientOptions::default()
            .with_handlers(agentacp::client::Builtin::default().with_terminal())
            .with_permission(|_| async { PermissionDecision::Approve });
        let answers = agent_requests(options, &dirs.workspace, asks).await;
        assert_eq!(answers[0]["result"]["terminalId"], "term-1", "{answers:?}");
        assert_eq!(answers[1]["result"]["exitCode"], 0, "{answers:?}");
        assert!(
            answers[2]["result"]["output"].as_str().unwrap().contains("marker.txt"),
            "it ran in the session's cwd: {answers:?}"
        );
        assert!(answers[3]["result"].is_object(), "{answers:?}");
        assert_eq!(answers[4]["error"]["code"], -32002, "released: {answers:?}");
        assert_eq!(
            answers[5]["error"]["code"], -32602,
            "a cwd outside the root: {answers:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn the_advertised_client_capabilities_are_the_handlers() {
    bounded(async {
        let dirs = Dirs::new();
        let inside = dirs.workspace.join("a.txt");
        std::fs::write(&inside, "a").unwrap();
        let asks = serde_json::json!([["$clientCapabilities", null], read(&inside)]);
        let caps = |read: bool, write: bool, terminal: bool| {
            serde_json::json!({"fs": {"readTextFile": read, "writeTextFile": write}, "terminal": terminal})
        };
        // The default client offers nothing, says so, and refuses a read.
        let answers = agent_requests(ClientOptions::default(), &dirs.workspace, asks.clone()).await;
        assert_eq!(answers[0]["result"], caps(false, false, false), "{answers:?}");
        assert_eq!(answers[1]["error"]["code"], -32601, "{answers:?}");
        // Each built-in set is advertised exactly.
        use agentacp::client::Builtin;
        for (handlers, expected) in [
            (Builtin::read_only(), caps(true, false, false)),
            (Builtin::read_write(), caps(true, true, false)),
            (Builtin::default().with_terminal(), caps(false, false, true)),
        ] {
            let options = ClientOptions::default().with_handlers(handlers);
            let answers = agent_requests(options, &dirs.workspace, asks.clone()).await;
            assert_eq!(answers[0]["result"], expected, "{handlers:?}: {answers:?}");
        }
    })
    .await;
}

#[tokio::test]
async fn a_session_cwd_outside_the_workspace_root_is_refused() {
    bounded(async {
        let dirs = Dirs::new();
        let client = Client::connect(dirs.command("echo-server"), ClientOptions::default())
            .await
            .unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let error = client.new_session(elsewhere.path()).await.unwrap_err();
        assert!(error.to_string().contains("outside the workspace root"), "{error}");
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn an_answer_sent_twice_is_ignored_and_the_connection_goes_on() {
    bounded(async {
        let fake = Fake::new();
        let (client, session) = fake
            .session("twice", ClientOptions::default().with_workspace_root(fake.dir.path()))
            .await;
        assert_eq!(session.as_str(), "s1", "the first answer counts");
        let (updates, stop) = run_prompt(&client, &session, "hi").await.unwrap();
        assert_eq!(stop, wire::StopReason::EndTurn);
        assert_eq!(texts(&updates), ["after"]);
        client.close().await;
    })
    .await;
}

// ---- governance and audit ------------------------------------------------------------------

/// Denies `write-file`, allows `read-file`, asks for anything else.
struct Policy;

impl agentacp::governance::Governance for Policy {
    fn decide(&self, request: &agentacp::governance::ToolRequest<'_>) -> agentacp::governance::Decision {
        use agentacp::governance::Decision;
        match request.tool {
            "write-file" => Decision::Deny("no writes from this client".into()),
            "read-file" => Decision::Allow,
            _ => Decision::Ask,
        }
    }
}

fn audited(sink: &agentacp::audit::MemorySink) -> Vec<Value> {
    let text = sink.contents();
    agentacp::audit::verify(text.as_bytes()).expect("the chain verifies");
    sink.lines()
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[tokio::test]
async fn governance_decides_before_the_permission_handler_and_every_tool_call_is_audited() {
    bounded(async {
        let dirs = Dirs::new();
        std::fs::write(dirs.workspace.join("r.txt"), "content").unwrap();
        let sink = agentacp::audit::MemorySink::new();
        let (options, asked) = counting_permission(
            ClientOptions::default()
                .with_governance(Policy)
                .with_audit(agentacp::audit::AuditLog::with_sink(Box::new(sink.clone()))),
            PermissionDecision::Approve,
        );
        let (client, session) = start_session(dirs.command("governed-server"), options, &dirs.workspace).await;
        let run = |text: &'static str| {
            let client = &client;
            let session = &session;
            async move { texts(&run_prompt(client, session, text).await.unwrap().0) }
        };
        let written = run(r#"/tool write-file {"path":"x.txt","content":"y"}"#).await;
        assert!(written.iter().any(|t| t.starts_with("rejected")), "{written:?}");
        assert!(!dirs.workspace.join("x.txt").exists(), "governance denied the write");
        let tested = run(r#"/tool run-tests {}"#).await;
        assert!(tested.iter().any(|t| t.starts_with("completed")), "{tested:?}");
        let read = run(r#"/tool read-file {"path":"r.txt"}"#).await;
        assert!(read.iter().any(|t| t.starts_with("completed")), "{read:?}");
        assert_eq!(asked.load(Ordering::SeqCst), 1, "only `ask` reached the handler");
        client.close().await;

        let records = audited(&sink);
        let mirror = |tool: &str| {
            records
                .iter()
                .find(|r| r["metadata"]["aip44"]["tool"] == tool)
                .unwrap_or_else(|| panic!("no record for {tool}: {records:#?}"))["metadata"]["aip44"]
                .clone()
        };
        let write = mirror("write-file");
        assert_eq!(write["approval"]["deniedBy"], "governance", "{write}");
        assert_eq!(write["approval"]["reason"], "no writes from this client", "{write}");
        // The agent's `{"error": "…"}` output is recorded as its message, not as JSON text.
        let error = write["error"].as_str().unwrap_or_default();
        assert!(error.starts_with("rejected"), "{write}");
        assert_eq!(mirror("run-tests")["approval"]["approvedBy"], "user");
        // read-file needed no permission from the server's own governance: nobody was asked.
        let read = mirror("read-file");
        assert_eq!(read["approval"], "auto", "{read}");
        assert_eq!(read["arguments"]["path"], "r.txt", "{read}");
        assert!(read.get("result").is_some(), "{read}");
        assert!(
            records
                .iter()
                .all(|r| r["metadata"]["aip44"]["session"] == session.as_str())
        );
    })
    .await;
}

#[tokio::test]
async fn replayed_history_is_marked_and_not_audited_as_live_tool_calls() {
    bounded(async {
        let dirs = Dirs::new();
        std::fs::write(dirs.workspace.join("r.txt"), "content").unwrap();
        let (first, session) = start_session(
            dirs.command("governed-server"),
            ClientOptions::default(),
            &dirs.workspace,
        )
        .await;
        let (_, stop) = run_prompt(&first, &session, r#"/tool read-file {"path":"r.txt"}"#)
            .await
            .unwrap();
        assert_eq!(stop, wire::StopReason::EndTurn);
        first.close().await;

        let sink = agentacp::audit::MemorySink::new();
        let options = ClientOptions::default().with_audit(agentacp::audit::AuditLog::with_sink(Box::new(sink.clone())));
        let second = Client::connect(dirs.command("governed-server"), options).await.unwrap();
        let replayed = second
            .load_session(&session, &dirs.workspace)
            .await
            .unwrap()
            .replayed()
            .await
            .unwrap();
        assert!(
            replayed
                .iter()
                .any(|u| matches!(u, Update::ToolCall(_) | Update::ToolCallUpdate(_))),
            "the history has the tool call: {replayed:?}"
        );
        second.close().await;
        assert!(
            sink.lines().is_empty(),
            "replayed tool calls are history: {:?}",
            sink.lines()
        );
    })
    .await;
}

// ---- the example client --------------------------------------------------------------------

#[tokio::test]
async fn the_example_client_drives_the_governed_server_and_audits_its_tool_calls() {
    bounded(async {
        let dirs = Dirs::new();
        let client_audit = dirs.state.join("client-audit.jsonl");
        let run = |decision: &str| {
            std::process::Command::new(example_binary("acp-client"))
                .current_dir(&dirs.workspace)
                .env("AGENTACP_WORKSPACE_ROOT", &dirs.workspace)
                .env("AGENTACP_STATE_DIR", &dirs.state)
                .env("AGENTACP_AUDIT_LOG", &client_audit)
                .args([
                    decision,
                    "--env",
                    "AGENTACP_WORKSPACE_ROOT",
                    "--env",
                    "AGENTACP_STATE_DIR",
                ])
                .args([
                    "-p",
                    "hello",
                    "-p",
                    r#"/tool write-file {"path":"w.txt","content":"W"}"#,
                ])
                .arg("--")
                .arg(example_binary("governed-server"))
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap()
        };
        let rejected = run("--no");
        let stdout = String::from_utf8_lossy(&rejected.stdout);
        assert!(
            rejected.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&rejected.stderr)
        );
        assert!(
            stdout.contains("hello") && stdout.contains("[tool] write-file") && stdout.contains("rejected"),
            "{stdout}"
        );
        assert!(!dirs.workspace.join("w.txt").exists());
        let approved = run("--yes");
        let stdout = String::from_utf8_lossy(&approved.stdout);
        assert!(approved.status.success() && stdout.contains("completed"), "{stdout}");
        assert_eq!(std::fs::read_to_string(dirs.workspace.join("w.txt")).unwrap(), "W");
        let text = std::fs::read_to_string(&client_audit).unwrap();
        let summary = agentacp::audit::verify(text.as_bytes()).expect("the client's audit log verifies");
        assert_eq!(summary.records, 2, "{text}");
        assert!(
            text.contains(r#""rejectedBy":"user""#) && text.contains(r#""approvedBy":"user""#),
            "{text}"
        );
    })
    .await;
}

#[tokio::test]
async fn mode_command_and_usage_updates_are_typed_and_the_turn_is_a_stream() {
    bounded(async {
        let fake = Fake::new();
        let options = ClientOptions::default().with_workspace_root(fake.dir.path());
        let (client, session) = fake.session("updates", options).await;
        let mut turn = client.prompt_text(&session, "go").await.unwrap();
        // Read it through `futures_core::Stream`, as stream combinators would.
        let mut events = Vec::new();
        while let Some(event) =
            std::future::poll_fn(|cx| futures_core::Stream::poll_next(std::pin::Pin::new(&mut turn), cx)).await
        {
            events.push(event.unwrap());
        }
        let updates: Vec<&Update> = events
            .iter()
            .filter_map(|e| match e {
                PromptEvent::Update(update) => Some(update),
                _ => None,
            })
            .collect();
        assert!(
            matches!(updates[0], Update::CurrentMode(mode) if mode.current_mode_id.as_str() == "architect"),
            "{updates:?}"
        );
        assert!(
            matches!(updates[1], Update::AvailableCommands(c) if c.available_commands[0].name == "review"),
            "{updates:?}"
        );
        assert!(
            matches!(updates[2], Update::Usage(u) if u.used == 1200 && u.size == 200_000),
            "{updates:?}"
        );
        assert!(
            matches!(updates[3], Update::Other(v) if v["sessionUpdate"] == "something_new"),
            "{updates:?}"
        );
        assert_eq!(events.last(), Some(&PromptEvent::Stop(wire::StopReason::EndTurn)));
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_prompt_fails_after_the_idle_timeout_without_messages_but_not_while_updates_flow() {
    bounded(async {
        let fake = Fake::new();
        let options = || ClientOptions {
            prompt_idle_timeout: Duration::from_millis(400),
            ..ClientOptions::default().with_workspace_root(fake.dir.path())
        };
        // Updates every 100 ms for 600 ms: longer than the idle timeout, never idle that long.
        let (client, session) = fake.session("trickle", options()).await;
        let (updates, stop) = run_prompt(&client, &session, "go").await.unwrap();
        assert_eq!(stop, wire::StopReason::EndTurn);
        assert_eq!(texts(&updates).len(), 7, "{updates:?}");
        client.close().await;
        // One update, then silence: the stream fails with a timeout after the update.
        let (client, session) = fake.session("stall", options()).await;
        let mut turn = client.prompt_text(&session, "go").await.unwrap();
        assert!(matches!(turn.next().await, Some(Ok(PromptEvent::Update(_)))));
        let started = Instant::now();
        let error = turn.next().await.expect("an event").unwrap_err();
        assert!(matches!(error, ClientError::Timeout { .. }), "{error}");
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        assert!(turn.next().await.is_none(), "nothing after the error");
        client.close().await;
    })
    .await;
}

/// A shell script that writes the file `x` in a new folder outside the workspace: the folder
/// (removed when dropped), the file, and the script.
fn writes_outside() -> (tempfile::TempDir, PathBuf, String) {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("x");
    let script = format!("echo x > {}", target.display());
    (outside, target, script)
}

/// The audit mirror (`metadata.aip44`) of the `terminal/create` among `records`.
fn terminal_record(records: &[Value]) -> &Value {
    &records
        .iter()
        .find(|r| r["metadata"]["aip44"]["tool"] == agentacp::client::TERMINAL_TOOL)
        .unwrap_or_else(|| panic!("no terminal record: {records:#?}"))["metadata"]["aip44"]
}

/// Issue #23.5: `terminal/create` ran any command with no permission step. Now it is a
/// permission decision (default: rejected) and audited either way.
#[tokio::test]
async fn terminal_create_needs_permission_and_is_audited() {
    bounded(async {
        let dirs = Dirs::new();
        let (_outside, target, script) = writes_outside();
        let asks = serde_json::json!([
            ["terminal/create", {"sessionId": "s1", "command": "sh", "args": ["-c", script]}],
        ]);
        let sink = agentacp::audit::MemorySink::new();
        let options = ClientOptions::default()
            .with_handlers(agentacp::client::Builtin::default().with_terminal())
            .with_audit(agentacp::audit::AuditLog::with_sink(Box::new(sink.clone())));
        let answers = agent_requests(options, &dirs.workspace, asks.clone()).await;
        assert!(answers[0]["error"]["message"].as_str().unwrap_or_default().contains("not allowed"), "{answers:?}");
        assert!(!target.exists(), "the command did not run");
        let records = audited(&sink);
        let mirror = terminal_record(&records);
        assert_eq!(mirror["approval"]["rejectedBy"], "user", "{mirror}");
        assert_eq!(mirror["arguments"]["command"], "sh", "{mirror}");

        // Governance that denies it answers without asking anyone.
        let deny = serde_json::json!({"doctype": "policy", "slug": "no-shell", "match": {"subject": "tool:terminal/*"}, "decision": "deny"});
        let (options, asked) = counting_permission(
            ClientOptions::default()
                .with_handlers(agentacp::client::Builtin::default().with_terminal())
                .with_governance(agentacp::governance::ManifestGovernance::from_documents(None, Some(&deny))),
            PermissionDecision::Approve,
        );
        let answers = agent_requests(options, &dirs.workspace, asks.clone()).await;
        assert!(answers[0]["error"].is_object(), "{answers:?}");
        assert_eq!(asked.load(Ordering::SeqCst), 0);
        assert!(!target.exists());

        // Approved, it runs.
        let options = ClientOptions::default()
            .with_handlers(agentacp::client::Builtin::default().with_terminal())
            .with_permission(|_| async { PermissionDecision::Approve });
        let mut asks = asks;
        asks.as_array_mut().unwrap().push(serde_json::json!(
            ["terminal/wait_for_exit", {"sessionId": "s1", "terminalId": "term-1"}]
        ));
        let answers = agent_requests(options, &dirs.workspace, asks).await;
        assert_eq!(answers[1]["result"]["exitCode"], 0, "{answers:?}");
        assert!(target.exists(), "the approved command ran");
    })
    .await;
}

/// Counts its drops: a permission question or handler the client gave up on.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// An extension handler that never answers (until the request is cancelled and it is dropped).
struct NeverAnswers(Arc<AtomicUsize>);

impl agentacp::client::ExtensionHandler for NeverAnswers {
    fn request(
        &self,
        _: &str,
        _: Value,
    ) -> std::pin::Pin<Box<dyn Future<Output = agentacp::client::HandlerResult> + Send>> {
        let guard = DropCount(self.0.clone());
        Box::pin(async move {
            let _guard = guard;
            std::future::pending().await
        })
    }
}

/// The agent cancels its own requests (`$/cancel_request`) while the client still works on
/// them: each is answered at once, and what waited for it is dropped. A permission question
/// the user has not answered is answered `cancelled`; a `terminal/create` still being decided
/// is refused with `-32800`, never runs, and is audited as rejected by the agent; an extension
/// request and a `terminal/wait_for_exit` still waiting are answered `-32800`. Without it,
/// each waited for its timeout (minutes) and the question stayed open.
#[tokio::test]
async fn requests_the_agent_cancels_are_answered_at_once_and_what_waits_on_them_is_dropped() {
    bounded(async {
        let dirs = Dirs::new();
        let (_outside, target, script) = writes_outside();
        let (asked, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (asks_counter, drops_counter) = (asked.clone(), dropped.clone());
        let sink = agentacp::audit::MemorySink::new();
        // Every timeout far beyond the test's bound: only the cancel can end these requests.
        let options = ClientOptions {
            permission_timeout: Duration::from_secs(600),
            request_timeout: Duration::from_secs(600),
            ..ClientOptions::default()
        }
        .with_handlers(agentacp::client::Builtin::default().with_terminal())
        .with_audit(agentacp::audit::AuditLog::with_sink(Box::new(sink.clone())))
        .with_extensions(NeverAnswers(dropped.clone()))
        .with_permission(move |_| {
            asks_counter.fetch_add(1, Ordering::SeqCst);
            let guard = DropCount(drops_counter.clone());
            async move {
                let _guard = guard;
                std::future::pending::<PermissionDecision>().await
            }
        });
        let asks = serde_json::json!([
            ["session/request_permission", {
                "sessionId": "s1",
                "toolCall": {"toolCallId": "c1", "title": "Edit a file", "kind": "edit"},
                "options": [
                    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "no", "name": "Reject", "kind": "reject_once"}
                ]
            }, "cancel"],
            ["terminal/create", {"sessionId": "s1", "command": "sh", "args": ["-c", script]}, "cancel"],
            ["_example/slow", {}, "cancel"],
        ]);
        let answers = agent_requests(options, &dirs.workspace, asks).await;
        assert_eq!(answers[0]["result"]["outcome"]["outcome"], "cancelled", "{answers:?}");
        assert_eq!(answers[1]["error"]["code"], -32800, "{answers:?}");
        assert_eq!(answers[2]["error"]["code"], -32800, "{answers:?}");
        assert!(!target.exists(), "the cancelled command never ran");
        // Each question the user was asked was withdrawn, and the extension handler dropped.
        // (A question whose cancel is read before it is asked is never asked: the next test.)
        let asked = asked.load(Ordering::SeqCst);
        assert_eq!(dropped.load(Ordering::SeqCst), asked + 1, "{asked} asked");
        let records = audited(&sink);
        let terminal = terminal_record(&records);
        assert_eq!(terminal["approval"]["rejectedBy"], "agent", "{terminal}");
        assert_eq!(terminal["approval"]["reason"], "cancelled", "{terminal}");

        // An approved command that runs on: waiting for its exit is cancelled, the wait answered.
        let options = ClientOptions {
            request_timeout: Duration::from_secs(600),
            ..ClientOptions::default()
        }
        .with_handlers(agentacp::client::Builtin::default().with_terminal())
        .with_permission(|_| async { PermissionDecision::Approve });
        let asks = serde_json::json!([
            ["terminal/create", {"sessionId": "s1", "command": "sleep", "args": ["600"]}],
            ["terminal/wait_for_exit", {"sessionId": "s1", "terminalId": "term-1"}, "cancel"],
            ["terminal/kill", {"sessionId": "s1", "terminalId": "term-1"}],
        ]);
        let answers = agent_requests(options, &dirs.workspace, asks).await;
        assert!(answers[0]["result"]["terminalId"].is_string(), "{answers:?}");
        assert_eq!(answers[1]["error"]["code"], -32800, "{answers:?}");
        assert!(
            answers[2]["result"].is_object(),
            "the terminal is still there: {answers:?}"
        );
    })
    .await;
}

/// A request the agent cancels in the same write that sends it (the client reads both
/// together, and the single-threaded test runtime runs the request's task only after the
/// reader has read the cancel): the user is never asked about it. Before, the permission
/// handler was called for it, then dropped.
#[tokio::test]
async fn a_question_the_agent_cancelled_before_it_was_read_is_never_asked() {
    bounded(async {
        let dirs = Dirs::new();
        let (_outside, target, script) = writes_outside();
        let sink = agentacp::audit::MemorySink::new();
        let (options, asked) = counting_permission(
            ClientOptions::default()
                .with_handlers(agentacp::client::Builtin::default().with_terminal())
                .with_audit(agentacp::audit::AuditLog::with_sink(Box::new(sink.clone()))),
            PermissionDecision::Approve,
        );
        let asks = serde_json::json!([
            ["session/request_permission", {
                "sessionId": "s1",
                "toolCall": {"toolCallId": "c1", "title": "Edit a file", "kind": "edit"},
                "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"}]
            }, "cancel-at-once"],
            ["terminal/create", {"sessionId": "s1", "command": "sh", "args": ["-c", script]}, "cancel-at-once"],
        ]);
        let answers = agent_requests(options, &dirs.workspace, asks).await;
        assert_eq!(answers[0]["result"]["outcome"]["outcome"], "cancelled", "{answers:?}");
        assert_eq!(answers[1]["error"]["code"], -32800, "{answers:?}");
        assert_eq!(asked.load(Ordering::SeqCst), 0, "a cancelled question was asked");
        assert!(!target.exists(), "the cancelled command ran");
        let records = audited(&sink);
        let terminal = terminal_record(&records);
        assert_eq!(terminal["approval"]["rejectedBy"], "agent", "{terminal}");
    })
    .await;
}

/// Issues #23.7 / #13.2: under an `on-mutate` workspace, a permission request for `rm -rf ~`
/// that the agent labels `kind: read` was approved without asking, on the agent's word.
#[tokio::test]
async fn a_permission_labelled_read_by_the_agent_is_still_asked() {
    bounded(async {
        let dirs = Dirs::new();
        let workspace = serde_json::json!({"autonomy": {"level": 2, "defaultApproval": "on-mutate"}});
        for kind in ["read", "think", "search"] {
            let (options, asked) = counting_permission(
                ClientOptions::default()
                    .with_governance(agentacp::governance::ManifestGovernance::from_documents(None, Some(&workspace))),
                PermissionDecision::Reject,
            );
            let asks = serde_json::json!([["session/request_permission", {
                "sessionId": "s1",
                "toolCall": {"toolCallId": "c1", "title": "rm -rf ~", "kind": kind, "rawInput": {"command": "rm -rf ~"}},
                "options": [
                    {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "no", "name": "Reject", "kind": "reject_once"}
                ]
            }]]);
            let answers = agent_requests(options, &dirs.workspace, asks).await;
            assert_eq!(asked.load(Ordering::SeqCst), 1, "{kind}: the user was asked");
            assert_eq!(answers[0]["result"]["outcome"]["optionId"], "no", "{kind}: {answers:?}");
        }
    })
    .await;
}

/// An agent that leaves a grandchild in its process group, writes that grandchild's pid to
/// `$1`, answers `initialize`, and exits as soon as its input ends.
const LEAVES_A_GRANDCHILD: &str = r#"
sleep 1000 </dev/null >/dev/null 2>&1 &
echo $! > "$1"
read -r line
id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1}}\n' "$id"
while read -r line; do :; done
exit 0
"#;

/// Polls (bounded) until `pid` is gone or a zombie. (It asked whether `pid` was "not a
/// zombie", which a running process is: a survivor passed at once.)
async fn wait_gone(pid: u32, limit: Duration) -> bool {
    let dead = || process_gone(pid) || !not_a_zombie(pid);
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if dead() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    dead()
}

/// Issue #23.8: the group was signalled only when the agent outlived the grace period, so
/// what it started survived an agent that exited promptly at end of input.
#[tokio::test]
async fn processes_left_in_the_agents_group_are_stopped_at_close() {
    bounded(async {
        let fake = Fake::new();
        let script = fake.dir.path().join("grandchild.sh");
        let pid_file = fake.dir.path().join("grandchild.pid");
        std::fs::write(&script, LEAVES_A_GRANDCHILD).unwrap();
        let agent = AgentCommand::new("/bin/sh").arg(&script).arg(&pid_file);
        let client = Client::connect(agent, ClientOptions::default().with_workspace_root(fake.dir.path()))
            .await
            .unwrap();
        let grandchild = read_pid(&pid_file, Duration::from_secs(20), client.pid().unwrap());
        assert!(not_a_zombie(grandchild), "the grandchild runs");
        client.close().await;
        assert!(
            wait_gone(grandchild, Duration::from_secs(10)).await,
            "the grandchild {grandchild} outlived close()"
        );
    })
    .await;
}

/// An agent that writes its pid to `$1`, answers `initialize`, then ignores everything.
const WRITES_ITS_PID: &str = r#"
echo $$ > "$1"
trap '' TERM
read -r line
id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1}}\n' "$id"
while true; do sleep 1; done
"#;

/// Issue #23.8: a client killed with `kill -9` orphaned its agent. The agent now gets SIGKILL
/// when its parent dies (Linux `PR_SET_PDEATHSIG`).
#[tokio::test]
async fn an_agent_dies_with_a_client_killed_by_sigkill() {
    bounded(async {
        let fake = Fake::new();
        let script = fake.dir.path().join("pid.sh");
        let pid_file = fake.dir.path().join("agent.pid");
        std::fs::write(&script, WRITES_ITS_PID).unwrap();
        let mut client = tokio::process::Command::new(example_binary("acp-client"))
            // Its own audit log: the default one beside the manifest takes one writer at a time.
            .env("AGENTACP_AUDIT_LOG", fake.dir.path().join("client-audit.jsonl"))
            .arg("-p")
            .arg("hello")
            .arg("--")
            .arg("/bin/sh")
            .arg(&script)
            .arg(&pid_file)
            .current_dir(fake.dir.path())
            .env("AGENTACP_WORKSPACE_ROOT", fake.dir.path())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        // The agent has started once it wrote its pid.
        let agent = read_pid(&pid_file, Duration::from_secs(20), client.id().unwrap());
        client.start_kill().unwrap();
        client.wait().await.unwrap();
        assert!(
            wait_gone(agent, Duration::from_secs(10)).await,
            "the agent {agent} outlived its SIGKILLed client"
        );
    })
    .await;
}

/// Issue #13.4: `session/load` was sent to agents that never advertised `loadSession`.
#[tokio::test]
async fn session_load_is_refused_locally_when_the_agent_does_not_offer_it() {
    bounded(async {
        let dirs = Dirs::new();
        let tap = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let seen = tap.clone();
        let options = ClientOptions::default().with_wire_tap(move |_, line| {
            seen.lock().unwrap().push(String::from_utf8_lossy(line).into_owned());
        });
        // The echo server is tier basic: no `loadSession`.
        let client = Client::connect(dirs.command("echo-server"), options).await.unwrap();
        assert!(!client.initialize_response().agent_capabilities.load_session);
        let session = client.new_session(&dirs.workspace).await.unwrap();
        let error = client
            .load_session(&session, &dirs.workspace)
            .await
            .expect_err("refused");
        assert!(error.to_string().contains("loadSession"), "{error}");
        client.close().await;
        assert!(
            !tap.lock().unwrap().iter().any(|line| line.contains("session/load")),
            "nothing was sent"
        );
    })
    .await;
}

// ---- authenticate (issue #15.1) and error data (#15.6) -------------------------------------

/// Every method the client sent, in order (from a wire tap).
fn methods_sent(tap: &std::sync::Mutex<Vec<String>>) -> Vec<String> {
    tap.lock()
        .unwrap()
        .iter()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|message| message.get("id").is_some())
        .filter_map(|message| message["method"].as_str().map(str::to_string))
        .collect()
}

fn tapped(options: ClientOptions) -> (ClientOptions, Arc<std::sync::Mutex<Vec<String>>>) {
    let tap = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = tap.clone();
    let options = options.with_wire_tap(move |direction, line| {
        if direction == agentacp::client::Direction::ToAgent {
            seen.lock().unwrap().push(String::from_utf8_lossy(line).into_owned());
        }
    });
    (options, tap)
}

/// Issue #15.1: Codex refuses `session/new` until `authenticate`; the client never called it.
#[tokio::test]
async fn the_default_policy_authenticates_with_an_env_var_method_whose_variable_reaches_the_agent() {
    bounded(async {
        let fake = Fake::new();
        let (options, tap) = tapped(ClientOptions::default().with_workspace_root(fake.dir.path()));
        let client = Client::connect(fake.python("auth").env("FAKE_API_KEY", "sk-test"), options)
            .await
            .unwrap();
        let kinds: Vec<String> = client
            .auth_methods()
            .iter()
            .map(|m| format!("{}={:?}", m.id, std::mem::discriminant(&m.kind)))
            .collect();
        assert_eq!(kinds.len(), 3, "{kinds:?}");
        assert!(matches!(
            &client.auth_methods()[1].kind,
            agentacp::client::AuthKind::EnvVar(vars) if vars[0].name == "FAKE_API_KEY"
        ));
        client
            .new_session(fake.dir.path())
            .await
            .expect("authenticated at connect");
        assert_eq!(methods_sent(&tap), ["initialize", "authenticate", "session/new"]);
        // `logout` is advertised: after it the agent wants authentication again.
        client.logout().await.unwrap();
        let error = client.new_session(fake.dir.path()).await.unwrap_err();
        assert!(error.is_auth_required(), "{error}");
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn authenticate_can_be_called_explicitly_and_is_refused_locally_for_methods_not_offered() {
    bounded(async {
        let fake = Fake::new();
        let options = ClientOptions::default()
            .with_workspace_root(fake.dir.path())
            .with_auth(agentacp::client::AuthPolicy::Never);
        let client = Client::connect(fake.python("auth").env("FAKE_API_KEY", "sk-test"), options)
            .await
            .unwrap();
        let error = client.new_session(fake.dir.path()).await.unwrap_err();
        assert!(error.is_auth_required(), "{error}");
        let refused = client.authenticate(&"nope".into()).await.unwrap_err();
        assert!(
            matches!(&refused, ClientError::InvalidState(m) if m.contains("fake-key")),
            "{refused}"
        );
        let terminal = client.authenticate(&"login".into()).await.unwrap_err();
        assert!(terminal.to_string().contains("terminal"), "{terminal}");
        client.authenticate(&"fake-key".into()).await.unwrap();
        client.new_session(fake.dir.path()).await.unwrap();
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn without_the_variable_nothing_is_authenticated_and_session_new_fails_with_the_agents_data() {
    bounded(async {
        let fake = Fake::new();
        let (options, tap) = tapped(ClientOptions::default().with_workspace_root(fake.dir.path()));
        let client = Client::connect(fake.python("auth"), options).await.unwrap();
        let error = client.new_session(fake.dir.path()).await.unwrap_err();
        assert_eq!(
            methods_sent(&tap),
            ["initialize", "session/new"],
            "no authenticate without the key"
        );
        assert!(error.is_auth_required(), "{error}");
        let rpc = error.rpc().expect("an RPC error");
        assert_eq!(rpc.message, "Authentication required");
        assert_eq!(
            rpc.data,
            Some(serde_json::json!({"reason": "no credentials: set FAKE_API_KEY or log in"}))
        );
        let shown = error.to_string();
        assert!(
            shown.contains("(-32000)") && shown.contains("no credentials: set FAKE_API_KEY"),
            "{shown}"
        );
        // An explicit choice the agent refuses fails the connect, with the agent's reason.
        let options = ClientOptions::default()
            .with_workspace_root(fake.dir.path())
            .with_auth(agentacp::client::AuthPolicy::Method("fake-key".into()));
        let refused = Client::connect(fake.python("auth"), options).await.unwrap_err();
        assert!(refused.to_string().contains("FAKE_API_KEY is not set"), "{refused}");
        client.close().await;
    })
    .await;
}

/// Issue #15.6: only `Internal error (-32603)` was shown; the cause was in `data`. Gemini's
/// `500` is shown as it is.
#[tokio::test]
async fn error_data_and_non_standard_codes_are_kept_and_shown() {
    bounded(async {
        let fake = Fake::new();
        let client = Client::connect(
            fake.python("errors"),
            ClientOptions::default().with_workspace_root(fake.dir.path()),
        )
        .await
        .unwrap();
        let error = client.new_session(fake.dir.path()).await.unwrap_err();
        let rpc = error.rpc().expect("an RPC error");
        assert_eq!(
            (rpc.code, rpc.data.clone()),
            (500, Some(Value::from("quota exceeded for model fake-1")))
        );
        let shown = error.to_string();
        assert!(
            shown.contains("Internal Server Error (500)") && shown.contains("data: quota exceeded"),
            "{shown}"
        );
        client.close().await;

        let (client, session) = fake
            .session(
                "prompt-error",
                ClientOptions::default().with_workspace_root(fake.dir.path()),
            )
            .await;
        let error = run_prompt(&client, &session, "hi").await.unwrap_err();
        let shown = error.to_string();
        assert!(
            shown.contains("Internal error (-32603)") && shown.contains("stream disconnected before completion"),
            "{shown}"
        );
        client.close().await;
    })
    .await;
}

// ---- the agent's process group on every exit path (issue #15.4) ----------------------------

/// The processes of process group `group` that still run (zombies waiting for a reap do not).
fn running_in_group(group: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let Some((_, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
            fields.get(2) == Some(&group.to_string().as_str()) && !matches!(fields.first(), Some(&"Z" | &"X"))
        })
        .collect()
}

/// The process group of `pid`.
fn group_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let (_, rest) = stat.rsplit_once(')').unwrap();
    rest.split_ascii_whitespace().nth(2).unwrap().parse().unwrap()
}

/// Polls (blocking, bounded) until nothing of `group` runs; what still runs, if anything.
fn group_left_after(group: u32, limit: Duration) -> Vec<u32> {
    let deadline = Instant::now() + limit;
    loop {
        let left = running_in_group(group);
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The pid, as this test sees it, of the process below `below` that sees itself as `seen`:
/// where the runtime is root, an agent runs in a PID namespace of its own, where its pids
/// (`$$`, `$!`) are not ours (`NSpid` in `/proc/<pid>/status` lists both). `seen` itself when
/// no such process is found.
fn host_pid(seen: u32, below: u32) -> u32 {
    let mut parents = std::collections::HashMap::<u32, Vec<u32>>::new();
    for pid in std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
    {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if let Some(parent) =
            (stat.rsplit_once(')')).and_then(|(_, rest)| rest.split_ascii_whitespace().nth(1)?.parse::<u32>().ok())
        {
            parents.entry(parent).or_default().push(pid);
        }
    }
    let mut next = vec![below];
    while let Some(parent) = next.pop() {
        for &pid in parents.get(&parent).into_iter().flatten() {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let innermost = (status.lines())
                .find_map(|line| line.strip_prefix("NSpid:"))
                .and_then(|pids| pids.split_ascii_whitespace().last()?.parse::<u32>().ok());
            if innermost == Some(seen) {
                return pid;
            }
            next.push(pid);
        }
    }
    seen
}

/// Reads the pid the agent wrote (polled, bounded), as this test sees it (the agent runs
/// below `below`: see [`host_pid`]).
fn read_pid(file: &Path, limit: Duration, below: u32) -> u32 {
    let seen = read_pid_as_written(file, limit);
    host_pid(seen, below)
}

/// Reads the pid the agent wrote (polled, bounded), as it saw it.
fn read_pid_as_written(file: &Path, limit: Duration) -> u32 {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(pid) = std::fs::read_to_string(file).ok().and_then(|t| t.trim().parse().ok()) {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "the agent wrote no pid to {}",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Issue #15.4: a client returning early on an error skipped `close()`; the stop its `Drop`
/// spawned died with the runtime, and only the direct child (a launcher) was killed: the real
/// agent survived. Here the application's runtime ends right after the drop, as `main` does.
#[test]
fn an_agent_behind_a_launcher_is_stopped_when_the_client_is_dropped_after_an_error() {
    example_binary("echo-server");
    let fake = Fake::new();
    let (command, pid_file) = fake.launched("auth");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let started = Instant::now();
    let (launcher, agent) = runtime.block_on(async {
        let client = Client::connect(command, ClientOptions::default().with_workspace_root(fake.dir.path()))
            .await
            .unwrap();
        let launcher = client.pid().unwrap();
        let agent = read_pid(&pid_file, Duration::from_secs(20), launcher);
        assert_eq!(group_of(agent), launcher, "the agent runs in its launcher's group");
        // The application's early return: `?` on this error drops the client.
        let error = client.new_session(fake.dir.path()).await.unwrap_err();
        assert!(error.is_auth_required(), "{error}");
        drop(client);
        (launcher, agent)
    });
    drop(runtime);
    let left = group_left_after(launcher, Duration::from_secs(10));
    assert!(
        left.is_empty(),
        "left running in the agent's group: {left:?} (the agent is {agent})"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// The acp-client example on the launched fake agent in `stall` mode, once the prompt runs:
/// (the client, the agent's process group).
async fn acp_client_in_a_turn(fake: &Fake) -> (tokio::process::Child, u32) {
    use tokio::io::AsyncReadExt;
    let (args, pid_file) = fake.launched_args("stall");
    let mut client = tokio::process::Command::new(example_binary("acp-client"))
        .env("AGENTACP_AUDIT_LOG", fake.dir.path().join("client-audit.jsonl"))
        .args(["-p", "hello", "--", "/bin/sh"])
        .args(args)
        .current_dir(fake.dir.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // The turn runs once the agent's first chunk is printed.
    let mut stdout = client.stdout.take().unwrap();
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("one") {
        let mut buffer = [0u8; 256];
        let read = stdout.read(&mut buffer).await.unwrap();
        assert!(
            read > 0,
            "acp-client ended before the turn ran: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buffer[..read]);
    }
    let agent = read_pid(&pid_file, Duration::from_secs(20), client.id().unwrap());
    let group = group_of(agent);
    assert_ne!(
        group, agent,
        "the agent runs under its launcher, in the launcher's group"
    );
    // Keep reading so the client never blocks on a full pipe.
    tokio::spawn(async move {
        let mut sink = Vec::new();
        let _ = stdout.read_to_end(&mut sink).await;
    });
    (client, group)
}

fn send_signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

/// Issue #15.4: SIGINT/SIGTERM to the example client while a prompt ran: it exited 130 and
/// the agent (its own process group) kept running.
#[tokio::test]
async fn a_signal_to_the_example_client_during_a_turn_stops_the_agents_whole_group() {
    bounded(async {
        for (signal, code) in [("TERM", 143), ("INT", 130)] {
            let fake = Fake::new();
            let (mut client, group) = acp_client_in_a_turn(&fake).await;
            send_signal(client.id().unwrap(), signal);
            let status = tokio::time::timeout(Duration::from_secs(20), client.wait())
                .await
                .expect("acp-client exits after the signal")
                .unwrap();
            assert_eq!(status.code(), Some(code), "SIG{signal}: {status:?}");
            let left = tokio::task::spawn_blocking(move || group_left_after(group, Duration::from_secs(10)))
                .await
                .unwrap();
            assert!(
                left.is_empty(),
                "SIG{signal}: left running in the agent's group: {left:?}"
            );
        }
    })
    .await;
}

/// Issue #15.4: SIGTERM to the governance-bridge example with a session open: the bridge died
/// and the agent kept running.
#[tokio::test]
async fn sigterm_to_the_example_bridge_with_a_session_open_stops_the_agents_whole_group() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    bounded(async {
        let fake = Fake::new();
        let dirs = Dirs::new();
        let (args, pid_file) = fake.launched_args("stall");
        let mut bridge = tokio::process::Command::new(example_binary("governance-bridge"))
            .arg("--")
            .arg("/bin/sh")
            .args(args)
            .current_dir(&dirs.workspace)
            .env("AGENTACP_WORKSPACE_ROOT", &dirs.workspace)
            .env("AGENTACP_STATE_DIR", &dirs.state)
            .env("AGENTACP_AUDIT_LOG", &dirs.audit)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut editor = bridge.stdin.take().unwrap();
        let mut answers = tokio::io::BufReader::new(bridge.stdout.take().unwrap()).lines();
        let requests = [
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                               "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
            serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                               "params": {"cwd": dirs.workspace, "mcpServers": []}}),
        ];
        for request in requests {
            editor.write_all(format!("{request}\n").as_bytes()).await.unwrap();
            let id = request["id"].clone();
            loop {
                let line = answers.next_line().await.unwrap().expect("the bridge answers");
                let answer: Value = serde_json::from_str(&line).unwrap();
                if answer["id"] == id {
                    assert!(answer.get("result").is_some(), "{answer}");
                    break;
                }
            }
        }
        let agent = read_pid(&pid_file, Duration::from_secs(20), bridge.id().unwrap());
        let group = group_of(agent);
        assert_ne!(group, agent, "the agent runs under its launcher");
        send_signal(bridge.id().unwrap(), "TERM");
        let status = tokio::time::timeout(Duration::from_secs(20), bridge.wait())
            .await
            .expect("the bridge exits after SIGTERM")
            .unwrap();
        let left = tokio::task::spawn_blocking(move || group_left_after(group, Duration::from_secs(10)))
            .await
            .unwrap();
        assert!(
            left.is_empty(),
            "left running in the agent's group: {left:?} (bridge: {status:?})"
        );
        drop(editor);
    })
    .await;
}

// ---- what the agent started outside its process group (issue #44.10) -------------------------

/// Issue #44.10: a helper the agent started with `setsid` (its own session and group) outlived
/// the client: only the agent's group was signalled. Closed or dropped, the client now ends it.
#[tokio::test]
async fn a_setsid_helper_of_the_agent_ends_when_the_client_closes_or_is_dropped() {
    bounded(async {
        for close in [true, false] {
            let fake = Fake::new();
            let (args, pid_file) = fake.setsid_args();
            let command = AgentCommand::new(&args[0]).args(&args[1..]);
            let options = ClientOptions {
                kill_grace: Duration::from_secs(2),
                ..ClientOptions::default()
            };
            let client = Client::connect(command, options).await.unwrap();
            let helper = read_pid(&pid_file, Duration::from_secs(20), client.pid().unwrap());
            assert_ne!(
                group_of(helper),
                client.pid().unwrap(),
                "the helper left the agent's group"
            );
            if close {
                client.close().await;
            } else {
                drop(client);
            }
            assert!(
                process_gone(helper),
                "close: {close}: the helper {helper} outlived the client"
            );
        }
    })
    .await;
}

/// The uid and gid an example runtime runs as to be a runtime that is not root, where the
/// tests run as root: `nobody`'s.
const NOBODY: u32 = 65534;

/// Whether this process, root, may run programs as [`NOBODY`] (`setpriv`), and [`NOBODY`]
/// may make a user and PID namespace with its own `/proc` (util-linux's `unshare`, which
/// tells a kernel that refuses them from a runtime that does not use them). Why not, if not.
fn nobody_may_make_namespaces() -> Result<(), &'static str> {
    if !rustix::process::geteuid().is_root() {
        return Err("the tests do not run as root, so they cannot run a runtime as another user");
    }
    let works = std::process::Command::new("setpriv")
        .args(as_nobody())
        .args([
            "unshare",
            "--user",
            "--map-current-user",
            "--pid",
            "--fork",
            "--mount-proc",
            "true",
        ])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    match works {
        true => Ok(()),
        false => Err(
            "`setpriv` is missing, or the kernel refuses nobody a user and PID namespace (`unshare --user --pid --mount-proc` fails)",
        ),
    }
}

/// `setpriv`'s arguments to run a program as [`NOBODY`], without supplementary groups.
fn as_nobody() -> [String; 3] {
    [
        format!("--reuid={NOBODY}"),
        format!("--regid={NOBODY}"),
        "--clear-groups".to_string(),
    ]
}

/// Gives `path` and everything below it to [`NOBODY`].
fn give_to_nobody(path: &Path) {
    std::os::unix::fs::lchown(path, Some(NOBODY), Some(NOBODY)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path).unwrap() {
            give_to_nobody(&entry.unwrap().path());
        }
    }
}

/// The command that runs the example binary `program`: as this test's user, or with
/// `as_nobody` as [`NOBODY`] (through `setpriv`), who gets the fake's and `dirs`' folders and,
/// where the build folder is closed to it, a copy of the binary in `dirs`.
fn example_command(program: &str, as_nobody_in: Option<(&Fake, &Dirs)>) -> tokio::process::Command {
    let binary = example_binary(program);
    let Some((fake, dirs)) = as_nobody_in else {
        return tokio::process::Command::new(binary);
    };
    let base = dirs.workspace.parent().unwrap();
    let open_to_nobody = std::process::Command::new("setpriv")
        .args(as_nobody())
        .arg("test")
        .arg("-x")
        .arg(&binary)
        .status()
        .is_ok_and(|status| status.success());
    let binary = match open_to_nobody {
        true => binary,
        false => {
            let copy = base.join(program);
            std::fs::copy(&binary, &copy).unwrap();
            copy
        }
    };
    give_to_nobody(fake.dir.path());
    give_to_nobody(base);
    let mut command = tokio::process::Command::new("setpriv");
    // Contained as it would be by default, whatever this test run's setting.
    (command.args(as_nobody()).arg(binary))
        .env("HOME", base)
        .env_remove(agentacp::process_tree::CONTAIN_TREE_ENV);
    command
}

/// The example `program` (`acp-client` or `governance-bridge`) running a fake agent that
/// leaves a `setsid` helper, once that helper runs: the program, its stdin (kept open), and
/// the helper's pid. The client waits at its unanswered `session/new`; the bridge has started
/// its agent for the editor's `initialize`. With `as_nobody`, the program runs as [`NOBODY`]
/// ([`example_command`]).
async fn example_with_a_setsid_helper(
    program: &str,
    fake: &Fake,
    dirs: &Dirs,
    as_nobody: bool,
) -> (tokio::process::Child, tokio::process::ChildStdin, u32) {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let (args, pid_file) = fake.setsid_args();
    let mut command = example_command(program, as_nobody.then_some((fake, dirs)));
    if program == "acp-client" {
        command.args(["-p", "hello"]);
    }
    let mut running = command
        .arg("--")
        .args(&args)
        .current_dir(&dirs.workspace)
        .env("AGENTACP_WORKSPACE_ROOT", &dirs.workspace)
        .env("AGENTACP_STATE_DIR", &dirs.state)
        .env("AGENTACP_AUDIT_LOG", &dirs.audit)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut input = running.stdin.take().unwrap();
    if program == "governance-bridge" {
        let request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                         "params": {"protocolVersion": 1, "clientCapabilities": {}}});
        input.write_all(format!("{request}\n").as_bytes()).await.unwrap();
        let mut answers = tokio::io::BufReader::new(running.stdout.take().unwrap()).lines();
        let line = answers.next_line().await.unwrap().expect("the bridge answers");
        assert!(line.contains("\"result\""), "{line}");
    }
    let helper = read_pid(&pid_file, Duration::from_secs(20), running.id().unwrap());
    (running, input, helper)
}

/// Issue #44.10: SIGTERM to the example client and bridge left the agent's `setsid` helper
/// running. Each is now the subreaper of what it starts and ends it.
#[tokio::test]
async fn sigterm_to_the_example_client_and_bridge_ends_the_agents_setsid_helper() {
    bounded(async {
        for program in ["acp-client", "governance-bridge"] {
            let (fake, dirs) = (Fake::new(), Dirs::new());
            let (mut running, input, helper) = example_with_a_setsid_helper(program, &fake, &dirs, false).await;
            send_signal(running.id().unwrap(), "TERM");
            let status = tokio::time::timeout(Duration::from_secs(20), running.wait())
                .await
                .expect("it exits after SIGTERM")
                .unwrap();
            assert!(
                process_gone(helper),
                "{program} ({status:?}): the agent's setsid helper {helper} is still there"
            );
            drop(input);
        }
    })
    .await;
}

/// Issue #44.10: `kill -9` of the example client or bridge ended the agent (its death
/// signal) but not what the agent started outside its group (`setsid`): nothing of the
/// runtime ran to end it. The agent runs in a PID namespace of its own, which the kernel
/// empties when the runtime dies: alone where the runtime is root (as here and in CI).
#[tokio::test]
async fn sigkill_of_the_example_client_and_bridge_ends_the_agents_setsid_helper() {
    if !agentacp::process_tree::tree_namespace() {
        eprintln!("skipped: agents cannot run in a PID namespace of their own here (acp_process::tree_containment)");
        return;
    }
    sigkill_of_the_example_client_and_bridge(false).await;
}

/// Issue #44.10 where the runtime is not root: there the agent runs in a user namespace of
/// its own (its uid and gid mapped to themselves) with its PID namespace in it. The example
/// client and bridge run as `nobody` here.
#[tokio::test]
async fn sigkill_of_the_example_client_and_bridge_run_by_a_user_ends_the_agents_setsid_helper() {
    if let Err(why) = nobody_may_make_namespaces() {
        eprintln!("skipped: {why}");
        return;
    }
    sigkill_of_the_example_client_and_bridge(true).await;
}

/// `kill -9` of the example client, then of the bridge (run by [`NOBODY`] with `as_nobody`),
/// each running an agent that left a `setsid` helper: the helper must be gone soon after.
async fn sigkill_of_the_example_client_and_bridge(as_nobody: bool) {
    bounded(async {
        for program in ["acp-client", "governance-bridge"] {
            let (fake, dirs) = (Fake::new(), Dirs::new());
            let (mut running, input, helper) = example_with_a_setsid_helper(program, &fake, &dirs, as_nobody).await;
            assert!(not_a_zombie(helper), "{program}: the helper {helper} runs");
            running.start_kill().unwrap();
            running.wait().await.unwrap();
            assert!(
                wait_gone(helper, Duration::from_secs(10)).await,
                "{program}: the agent's setsid helper {helper} outlived the SIGKILLed runtime"
            );
            drop(input);
        }
    })
    .await;
}

/// Issue #15.1 and #15.6 in the example client: the agent's auth methods are listed when
/// `session/new` wants authentication, the error's `data` is shown, `--env` lets the key
/// through (then the default policy authenticates), and `--auth` picks a method.
#[tokio::test]
async fn the_example_client_lists_auth_methods_and_authenticates_with_a_passed_key() {
    bounded(async {
        let fake = Fake::new();
        let run = |extra: &[&str]| {
            let mut command = tokio::process::Command::new(example_binary("acp-client"));
            command
                .env("AGENTACP_AUDIT_LOG", fake.dir.path().join("client-audit.jsonl"))
                .args(["-p", "hi"])
                .args(extra)
                .arg("--")
                .arg(Fake::python_path())
                .arg(fake.dir.path().join("agent.py"))
                .arg("auth")
                .current_dir(fake.dir.path())
                .env("FAKE_API_KEY", "sk-test")
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true);
            async move { command.output().await.unwrap() }
        };
        let refused = run(&[]).await;
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("Authentication required (-32000)"), "{stderr}");
        assert!(
            stderr.contains("no credentials: set FAKE_API_KEY"),
            "the error's data: {stderr}"
        );
        assert!(
            stderr.contains("fake-key (env_var: FAKE_API_KEY)"),
            "the methods: {stderr}"
        );
        assert!(stderr.contains("--auth"), "{stderr}");

        let passed = run(&["--env", "FAKE_API_KEY"]).await;
        let stdout = String::from_utf8_lossy(&passed.stdout);
        assert!(passed.status.success(), "{}", String::from_utf8_lossy(&passed.stderr));
        assert!(
            stdout.contains("after") && stdout.contains("[stop] end_turn"),
            "{stdout}"
        );

        let chosen = run(&["--auth", "chatgpt"]).await;
        let stderr = String::from_utf8_lossy(&chosen.stderr);
        assert_eq!(chosen.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("Authentication failed (-32000)") && stderr.contains("FAKE_API_KEY is not set"),
            "{stderr}"
        );
    })
    .await;
}
