//! The guided tour: `cargo run --release -p tour`.
//!
//! Starts the governed example server (`examples/governed-server`, compiled into this binary
//! and run as a subprocess of it) and drives it with our client through one session: streamed
//! text, a tool governance allows, one that needs approval, one it denies, a cancelled turn, a
//! reloaded session, the session's modes, its model option and its slash command, and
//! `session/list`, `close` and `resume`. Then it verifies the server's hash-chained audit log
//! and summarises it.
//! Each step checks what it saw; the tour exits 1 at the first step that misbehaves, naming it.
//!
//! `--wire` prints every JSON-RPC message as well; `--keep` keeps the scratch folder (the
//! workspace and the audit log); `--protocol 2` runs the steps over ACP v2 (our client asks
//! for version 2; the governed example serves 1 and 2); `-- AGENT ARGS…` runs the same steps
//! against another agent.

#![allow(clippy::print_stdout, reason = "the transcript is this program's output")]

mod audit;
mod transcript;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentacp::client::{
    AgentCommand, Client, ClientOptions, LIST_PAGES_MAX, PermissionDecision, PromptEvent, Protocol, Update,
    config_value,
};
use agentacp::prelude::*;
use agentacp::server::Operator;
use clap::Parser;

use transcript::{Failure, Steps, WirePrinter};

/// No step may take longer than this, whatever the agent does.
const STEP_TIMEOUT: Duration = Duration::from_secs(30);
/// Message chunks of one turn printed before the rest are only counted.
const SHOWN_CHUNKS: usize = 6;
/// `/forever` ticks received before the tour cancels the turn.
const TICKS_BEFORE_CANCEL: usize = 3;
/// The tool the governed server's manifest does not list.
const UNLISTED_TOOL: &str = "delete-workspace";

/// A guided tour of agentacp: our client drives the governed example server through one
/// session, then its audit log is verified.
#[derive(Debug, Parser)]
#[command(name = "tour", version)]
struct Args {
    /// Also print every JSON-RPC message (→ to the agent, ← from it).
    #[arg(long)]
    wire: bool,
    /// Keep the scratch folder (workspace and audit log) and say where it is.
    #[arg(long)]
    keep: bool,
    /// The ACP protocol version the tour's client speaks: 1, or 2 (v2; the agent must serve it).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=2))]
    protocol: u16,
    /// Serve the governed example over stdio instead (how the tour starts its server).
    #[arg(long, hide = true, conflicts_with_all = ["wire", "keep", "agent"])]
    serve: bool,
    /// Run the tour against this agent instead of the governed example server.
    #[arg(last = true)]
    agent: Vec<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.serve {
        return match governed_server::Reviewer::default().run_stdio() {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("governed-server: {error}");
                ExitCode::FAILURE
            }
        };
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("tour: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let scratch = match Scratch::create(args.keep) {
        Ok(scratch) => scratch,
        Err(error) => {
            eprintln!("tour: cannot create a scratch folder: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(tour(&args, &scratch));
    match outcome {
        Ok(steps) => {
            println!("\nThe tour passed: {steps} steps, each checked.");
            println!("Next: your own operator, with `scaffold-aip new` (README.md, \"Try it\").");
            ExitCode::SUCCESS
        }
        Err(failure) => {
            println!("\nThe tour FAILED at {failure}");
            eprintln!("tour: failed at {failure}");
            ExitCode::FAILURE
        }
    }
}

/// The scratch folder: the session's workspace, the audit log and the session store.
struct Scratch {
    root: PathBuf,
    keep: bool,
}

impl Scratch {
    fn create(keep: bool) -> std::io::Result<Scratch> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.subsec_nanos());
        let root = std::env::temp_dir().join(format!("agentacp-tour-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(root.join("workspace"))?;
        std::fs::create_dir_all(root.join("state"))?;
        std::fs::write(
            root.join("workspace/notes.txt"),
            "Ship the parser on Friday.\nThe audit log must verify.\n",
        )?;
        // Canonical, so that paths the server reports compare equal to ours.
        let root = root.canonicalize()?;
        Ok(Scratch { root, keep })
    }

    fn workspace(&self) -> PathBuf {
        self.root.join("workspace")
    }

    fn audit_log(&self) -> PathBuf {
        self.root.join("audit.jsonl")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.keep {
            println!("The scratch folder is kept: {}", self.root.display());
        } else if let Err(error) = std::fs::remove_dir_all(&self.root) {
            eprintln!("tour: could not remove {}: {error}", self.root.display());
        }
    }
}

/// What one prompt turn showed.
#[derive(Debug, Default)]
struct TurnLog {
    /// The agent's message text, all chunks joined.
    text: String,
    /// How many message chunks arrived.
    chunks: usize,
    /// Each tool call announced: its id, title and last status.
    tool_calls: Vec<ToolCallSeen>,
    /// Each `current_mode_update`'s mode, in order.
    modes: Vec<String>,
    /// How the turn ended.
    stop: Option<wire::StopReason>,
}

/// A tool call as the client saw it.
#[derive(Debug)]
struct ToolCallSeen {
    id: String,
    title: String,
    status: String,
}

/// Runs every step; returns how many passed.
async fn tour(args: &Args, scratch: &Scratch) -> Result<usize, Failure> {
    let mut steps = Steps::default();
    let custom_agent = !args.agent.is_empty();
    println!("agentacp tour: our client drives an ACP agent through one governed, audited session.");

    steps.run("The manifest", async { manifest(custom_agent) }).await?;

    let asked = Arc::new(Mutex::new(Vec::<String>::new()));
    let client = steps
        .run(
            "Start the agent and initialize",
            start(args, scratch, Arc::clone(&asked)),
        )
        .await?;
    let outcome = session_steps(&mut steps, &client, scratch, &asked).await;
    // Whatever happened, stop the agent; a clean exit is part of the tour.
    let closed = steps.run("Close the connection", close(client)).await;
    outcome?;
    closed?;
    steps
        .run("Verify the audit log", async { audit::check(&scratch.audit_log()) })
        .await?;
    Ok(steps.passed())
}

/// The steps that need a session.
async fn session_steps(
    steps: &mut Steps,
    client: &Client,
    scratch: &Scratch,
    asked: &Mutex<Vec<String>>,
) -> Result<(), Failure> {
    let workspace = scratch.workspace();
    let session = steps
        .run("Open a session", async {
            let session = client.new_session(&workspace).await.map_err(|e| e.to_string())?;
            println!("  session/new in {} → {}", workspace.display(), session.as_str());
            Ok(session)
        })
        .await?;

    steps
        .run("Streamed text", async {
            let greeting = "Hello! Please say this back.";
            let echo = turn(client, &session, greeting, None).await?;
            expect(
                echo.text == greeting,
                format!("expected the agent to say {greeting:?}, it said {:?}", echo.text),
            )?;
            let streamed = turn(client, &session, "/stream 5 16", None).await?;
            let expected: String = (0..5).map(|index| format!("{index:08}........")).collect();
            expect(
                streamed.chunks == 5 && streamed.text == expected,
                format!(
                    "expected 5 numbered chunks in order, got {} chunks: {:?}",
                    streamed.chunks, streamed.text
                ),
            )
        })
        .await?;

    steps
        .run("A tool governance allows (read-file runs without asking)", async {
            let before = lock(asked).len();
            let log = turn(client, &session, r#"/tool read-file {"path": "notes.txt"}"#, None).await?;
            expect(
                lock(asked).len() == before,
                "the agent asked permission for a read; governance allows reads",
            )?;
            expect_tool(&log, "read-file", "completed")?;
            expect(
                log.text.contains("Ship the parser on Friday."),
                format!("expected the file's text in the answer, got {:?}", log.text),
            )
        })
        .await?;

    steps
        .run(
            "A tool that needs approval (write-file asks; the tour approves)",
            async {
                let before = lock(asked).len();
                let log = turn(
                    client,
                    &session,
                    r#"/tool write-file {"path": "review.txt", "content": "Looks good."}"#,
                    None,
                )
                .await?;
                expect(
                    lock(asked).len() == before + 1,
                    "expected one permission request for the write",
                )?;
                expect_tool(&log, "write-file", "completed")?;
                let written = std::fs::read_to_string(workspace.join("review.txt")).unwrap_or_default();
                expect(
                    written == "Looks good.",
                    format!("expected review.txt to hold the approved text, it holds {written:?}"),
                )?;
                println!("  review.txt in the workspace now reads {written:?}");
                Ok(())
            },
        )
        .await?;

    steps
        .run("A tool governance denies (never shown to the client)", async {
            let before = lock(asked).len();
            let prompt = format!("/tool {UNLISTED_TOOL} {{}}");
            let log = turn(client, &session, &prompt, None).await?;
            expect(
                lock(asked).len() == before,
                "the agent asked permission for a tool governance denies",
            )?;
            expect(
                log.tool_calls.is_empty(),
                format!(
                    "a denied tool must not be announced, but the client saw {:?}",
                    log.tool_calls
                ),
            )?;
            expect(
                log.text.starts_with("denied"),
                format!("expected the agent to report the denial, it said {:?}", log.text),
            )
        })
        .await?;

    steps
        .run("Cancel a turn", async {
            let log = turn(client, &session, "/forever", Some(TICKS_BEFORE_CANCEL)).await?;
            expect(
                log.stop == Some(wire::StopReason::Cancelled),
                format!("expected stop reason `cancelled`, got {:?}", log.stop),
            )
        })
        .await?;

    steps
        .run("Load the session again (its history is replayed)", async {
            let replay = client
                .load_session(&session, &workspace)
                .await
                .map_err(|e| e.to_string())?;
            let history = replay.replayed().await.map_err(|e| e.to_string())?;
            let said: String = history.iter().filter_map(Update::text).collect();
            println!("  session/load replayed {} updates", history.len());
            expect(
                said.contains("Hello! Please say this back.") && said.contains("tick 0"),
                "expected the replay to hold the session's earlier turns",
            )
        })
        .await?;
    surface_steps(steps, client, scratch, &session).await
}

/// The steps of the session surface the manifest declares in `metadata.agentacp`: modes, the
/// model option, the slash command, and `session/list`, `close` and `resume`.
async fn surface_steps(
    steps: &mut Steps,
    client: &Client,
    scratch: &Scratch,
    session: &wire::SessionId,
) -> Result<(), Failure> {
    let workspace = scratch.workspace();
    steps
        .run("Modes (session/set_mode; the agent switches back itself)", async {
            let state = client.session_state(session).unwrap_or_default();
            let modes = state.modes.ok_or("the agent offers no modes for the session")?;
            let ids: Vec<&str> = modes.available_modes.iter().map(|mode| mode.id.as_str()).collect();
            println!(
                "  modes: {} (current: {})",
                ids.join(", "),
                modes.current_mode_id.as_str()
            );
            expect(
                ids == ["ask", "code"] && modes.current_mode_id.as_str() == "ask",
                "expected the modes `ask` (current) and `code`",
            )?;
            client
                .set_mode(session, &"code".into())
                .await
                .map_err(|e| e.to_string())?;
            println!("  session/set_mode code → ok");
            let echo = turn(client, session, "Which mode?", None).await?;
            expect(
                echo.text == "[code, fast] Which mode?",
                format!("expected the echo to show mode `code`, it said {:?}", echo.text),
            )?;
            let switched = turn(client, session, "/mode ask", None).await?;
            expect(
                switched.modes == ["ask"],
                format!("expected one current_mode_update to `ask`, saw {:?}", switched.modes),
            )?;
            let current = client.session_state(session).and_then(|state| state.modes);
            expect(
                current.is_some_and(|modes| modes.current_mode_id.as_str() == "ask"),
                "the client did not follow the agent's switch back to `ask`",
            )
        })
        .await?;

    steps
        .run("A config option (session/set_config_option: model deep)", async {
            let state = client.session_state(session).unwrap_or_default();
            let model = state
                .config_option("model")
                .ok_or("the agent offers no `model` config option")?;
            let value = config_value(model, "deep").map_err(|e| e.to_string())?;
            let answer = client
                .set_config_option(session, &wire::SessionConfigId("model".into()), value)
                .await
                .map_err(|e| e.to_string())?;
            let current = answer.config_options.iter().find_map(|option| match &option.kind {
                wire::SessionConfigOptionKind::Select(select) if option.id.0 == "model" => {
                    Some(select.current_value.as_str().to_string())
                }
                _ => None,
            });
            println!("  session/set_config_option model deep → model is {current:?}");
            expect(
                current.as_deref() == Some("deep"),
                "expected the answer to carry model `deep`",
            )?;
            let echo = turn(client, session, "Which model?", None).await?;
            expect(
                echo.text == "[ask, deep] Which model?",
                format!("expected the echo to show model `deep`, it said {:?}", echo.text),
            )
        })
        .await?;

    steps
        .run("The slash command (/summary, announced by the agent)", async {
            let state = client.session_state(session).unwrap_or_default();
            let command = state
                .command("summary")
                .ok_or("the agent did not announce `/summary` (available_commands_update)")?;
            println!("  /{}: {}", command.name, command.description);
            let summary = turn(client, session, "/summary the review", None).await?;
            expect(
                summary.text.starts_with("summary: ")
                    && summary.text.contains("mode ask, model deep")
                    && summary.text.ends_with("focus: the review"),
                format!("expected a summary with mode, model and focus, got {:?}", summary.text),
            )
        })
        .await?;

    steps
        .run("List, close and resume the session (its settings are kept)", async {
            let listed = client
                .list_all_sessions(Some(&workspace), LIST_PAGES_MAX)
                .await
                .map_err(|e| e.to_string())?;
            println!("  session/list → {} session(s)", listed.len());
            expect(
                listed.iter().any(|info| &info.session_id == session),
                "expected session/list to include the tour's session",
            )?;
            client.close_session(session).await.map_err(|e| e.to_string())?;
            println!("  session/close → ok");
            let resumed = client
                .resume_session(session, &workspace)
                .await
                .map_err(|e| e.to_string())?;
            let mode = resumed.modes.map(|modes| modes.current_mode_id.as_str().to_string());
            println!("  session/resume → mode {}", mode.as_deref().unwrap_or("(none)"));
            expect(
                mode.as_deref() == Some("ask"),
                "expected the resumed session in mode `ask`",
            )?;
            let echo = turn(client, session, "Still there?", None).await?;
            expect(
                echo.text == "[ask, deep] Still there?",
                format!(
                    "expected the resumed session to keep model `deep`, it said {:?}",
                    echo.text
                ),
            )
        })
        .await?;
    Ok(())
}

/// Step 1: what the manifest says, read from the spec `#[acp_operator]` compiled in.
fn manifest(custom_agent: bool) -> Result<(), String> {
    if custom_agent {
        println!("  a custom agent: the tour checks its behaviour on the wire, not its manifest");
        return Ok(());
    }
    let spec = governed_server::Reviewer::spec();
    println!("  examples/governed-server/ACP.md, checked at compile time by #[acp_operator]:");
    println!(
        "  {} {} · kind {} · tier {}",
        spec.name, spec.version, spec.kind, spec.tier
    );
    println!(
        "  pinned to ACP revision {} (protocol version {})",
        spec.acp_rev, spec.protocol_version
    );
    let governance = spec.governance();
    println!("  governance from OPERATOR.md and GOVERNANCE.md decides each tool before it runs:");
    let no_arguments = json!({});
    for (tool, kind) in [
        ("read-file", Some(ToolKind::Read)),
        ("write-file", Some(ToolKind::Edit)),
        ("run-tests", Some(ToolKind::Execute)),
        (UNLISTED_TOOL, None),
    ] {
        let request = ToolRequest {
            operator: spec.id,
            session: "tour",
            tool,
            kind,
            arguments: &no_arguments,
            principal: None,
        };
        let decision = match governance.decide(&request) {
            Decision::Allow => "allow (runs without asking)".to_string(),
            Decision::Ask => "ask (the client is asked first)".to_string(),
            Decision::Deny(reason) => format!("deny ({reason})"),
        };
        println!("    {tool:<17} {decision}");
    }
    Ok(())
}

/// Step 2: start the agent (by default this binary with `--serve`) and initialize.
async fn start(args: &Args, scratch: &Scratch, asked: Arc<Mutex<Vec<String>>>) -> Result<Client, String> {
    let command = match args.agent.split_first() {
        Some((program, rest)) => AgentCommand::new(program).args(rest),
        None => {
            let me = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
            AgentCommand::new(me).arg("--serve")
        }
    }
    .current_dir(scratch.workspace())
    .env("AGENTACP_AUDIT_LOG", scratch.audit_log())
    .env("AGENTACP_STATE_DIR", scratch.root.join("state"))
    .env("AGENTACP_WORKSPACE_ROOT", scratch.workspace())
    // The governed example serves v1 and v2 (the client picks with `--protocol`).
    .env("AGENTACP_PROTOCOL_VERSIONS", "1,2");
    let permission = move |request: wire::RequestPermissionRequest| {
        let asked = Arc::clone(&asked);
        async move {
            let title = request.tool_call.title.clone().unwrap_or_else(|| "a tool".into());
            println!("  permission: the agent asks to run {title}; the tour approves");
            lock(&asked).push(title);
            PermissionDecision::Approve
        }
    };
    let mut options = ClientOptions::default()
        .with_workspace_root(scratch.workspace())
        .with_permission(permission)
        .with_protocol(if args.protocol == 2 { Protocol::V2 } else { Protocol::V1 });
    options.client_info = ("agentacp-tour".into(), env!("CARGO_PKG_VERSION").into());
    options.initialize_timeout = STEP_TIMEOUT;
    options.request_timeout = STEP_TIMEOUT;
    options.prompt_idle_timeout = STEP_TIMEOUT;
    if args.wire {
        let printer = Mutex::new(WirePrinter::default());
        options = options.with_wire_tap(move |direction, line| lock(&printer).show(direction, line));
    }
    let client = Client::connect(command, options).await.map_err(|e| e.to_string())?;
    let answer = client.initialize_response();
    let agent = answer.agent_info.as_ref().map_or_else(
        || "an agent without agentInfo".to_string(),
        |info| format!("{} {}", info.name, info.version),
    );
    println!(
        "  started {agent} (pid {})",
        client.pid().map_or_else(|| "?".into(), |pid| pid.to_string())
    );
    println!(
        "  initialize: protocol version {}, loadSession {}",
        client.protocol_version(),
        answer.agent_capabilities.load_session
    );
    if let Some(aip44) = answer.meta.as_ref().and_then(|meta| meta.get("aip44")) {
        println!("  _meta.aip44: {aip44}");
    }
    expect(
        answer.agent_capabilities.load_session,
        "the agent does not offer session/load, which the tour uses",
    )?;
    println!("  the audit log goes to {}", scratch.audit_log().display());
    Ok(client)
}

/// The last step with the agent: close its stdin and see it exit cleanly.
async fn close(client: Client) -> Result<(), String> {
    let status = client.close().await;
    match status {
        Some(status) if status.success() => {
            println!("  the agent exited cleanly ({status})");
            Ok(())
        }
        Some(status) => Err(format!("the agent exited with {status}")),
        None => Err("the agent's exit status is unknown".to_string()),
    }
}

/// Sends `prompt`, prints the turn as it streams, and returns what it showed. With
/// `cancel_after`, cancels the turn once that many message chunks arrived.
async fn turn(
    client: &Client,
    session: &wire::SessionId,
    prompt: &str,
    cancel_after: Option<usize>,
) -> Result<TurnLog, String> {
    println!("  you › {prompt}");
    let mut stream = client.prompt_text(session, prompt).await.map_err(|e| e.to_string())?;
    let mut log = TurnLog::default();
    let mut cancelled = false;
    while let Some(event) = stream.next().await {
        match event.map_err(|e| e.to_string())? {
            PromptEvent::Update(update @ Update::MessageChunk(_)) => {
                let text = update.text().unwrap_or_default();
                log.chunks += 1;
                log.text.push_str(text);
                if log.chunks <= SHOWN_CHUNKS {
                    println!("  agent › {text}");
                }
                if cancel_after.is_some_and(|after| log.chunks >= after) && !cancelled {
                    cancelled = true;
                    println!("  (the tour sends session/cancel)");
                    stream.cancel().await.map_err(|e| e.to_string())?;
                }
            }
            PromptEvent::Update(Update::ToolCall(call)) => {
                let status = status_name(call.status.as_ref());
                println!("  tool  › {} ({status})", call.title);
                log.tool_calls.push(ToolCallSeen {
                    id: call.tool_call_id.as_str().to_string(),
                    title: call.title.clone(),
                    status,
                });
            }
            PromptEvent::Update(Update::ToolCallUpdate(update)) => {
                let status = status_name(update.status.as_ref());
                let id = update.tool_call_id.as_str();
                match log.tool_calls.iter_mut().find(|seen| seen.id == id) {
                    Some(seen) => {
                        println!("  tool  › {} → {status}", seen.title);
                        seen.status = status;
                    }
                    None => return Err(format!("an update of tool call `{id}`, which was never announced")),
                }
            }
            PromptEvent::Update(Update::CurrentMode(update)) => {
                let mode = update.current_mode_id.as_str().to_string();
                println!("  mode  › {mode}");
                log.modes.push(mode);
            }
            PromptEvent::Update(_) | PromptEvent::Replay(_) | PromptEvent::Loaded => {}
            PromptEvent::Stop(reason) => log.stop = Some(reason),
        }
    }
    if log.chunks > SHOWN_CHUNKS {
        println!("  agent › … {} more chunks", log.chunks - SHOWN_CHUNKS);
    }
    let stop = log
        .stop
        .as_ref()
        .map_or_else(|| "none".to_string(), |reason| enum_name(json!(reason)));
    println!("  stop  › {stop}");
    Ok(log)
}

/// `ok` or the reason the step failed.
fn expect(ok: bool, otherwise: impl Into<String>) -> Result<(), String> {
    if ok { Ok(()) } else { Err(otherwise.into()) }
}

/// The turn announced `tool` and it ended `status`.
fn expect_tool(log: &TurnLog, tool: &str, status: &str) -> Result<(), String> {
    match log.tool_calls.as_slice() {
        [seen] if seen.title.contains(tool) && seen.status == status => Ok(()),
        other => Err(format!(
            "expected one `{tool}` tool call ending {status}, saw {other:?}"
        )),
    }
}

/// A tool call's status as ACP spells it (`pending` when absent).
fn status_name(status: Option<&wire::ToolCallStatus>) -> String {
    status.map_or_else(|| "pending".to_string(), |status| enum_name(json!(status)))
}

/// How ACP spells a unit enum value (`end_turn`, `in_progress`).
fn enum_name(value: Value) -> String {
    value.as_str().unwrap_or("?").to_string()
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
