//! A terminal ACP client (`kind: client`): `acp-client [OPTIONS] -- AGENT [ARGS...]` starts
//! the agent, opens a session in the workspace, sends each `--prompt` (or each line of stdin)
//! and prints the turn as it streams. The agent may read and write files and run commands
//! inside the workspace; permission requests go through `GOVERNANCE.md` and, where it says
//! "ask", to the user on the terminal (`--yes` approves, `--no` rejects, without asking).
//! Tool calls are audited in `audit/client.jsonl` beside the manifest (or `$AGENTACP_AUDIT_LOG`).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use agentacp::client::{
    AgentCommand, ClientContext, ClientOptions, Connect, PermissionDecision, PromptEvent, Update, fs,
};
use agentacp::jsonrpc::RpcError;
use agentacp::prelude::*;
use clap::Parser;
use tokio::io::AsyncBufReadExt;
use tokio::sync::{Mutex, mpsc};

/// The client: file access and terminals are the runtime's built-in ones.
#[acp_operator(manifest = "ACP.md")]
pub struct Terminal;

impl TerminalClient for Terminal {
    async fn read_text_file(
        &self,
        context: &ClientContext,
        request: wire::ReadTextFileRequest,
    ) -> Result<wire::ReadTextFileResponse, RpcError> {
        fs::read_text_file(context, &request).await
    }

    async fn write_text_file(
        &self,
        context: &ClientContext,
        request: wire::WriteTextFileRequest,
    ) -> Result<wire::WriteTextFileResponse, RpcError> {
        eprintln!("[fs] writing {}", request.path);
        fs::write_text_file(context, &request).await
    }

    // The terminal family, delegated to the connection's built-in terminals.
    agentacp::builtin_terminal_methods!();
}

/// Drive an ACP agent from the terminal.
#[derive(Debug, Parser)]
#[command(name = "acp-client", version)]
struct Args {
    /// A prompt to send (repeatable, in order); without any, each line of stdin is one.
    #[arg(long = "prompt", short = 'p')]
    prompts: Vec<String>,
    /// The workspace: the session's cwd, and all the agent may reach (default: here).
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// Approve every permission request governance leaves to the user, without asking.
    #[arg(long, conflicts_with = "no")]
    yes: bool,
    /// Reject every permission request governance leaves to the user, without asking.
    #[arg(long)]
    no: bool,
    /// Environment variables to pass to the agent besides the default allow-list.
    #[arg(long = "env", value_name = "NAME")]
    env: Vec<String>,
    /// The agent's program and arguments.
    #[arg(required = true, last = true)]
    agent: Vec<String>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("acp-client: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Lines of stdin, shared by the prompt loop and the permission questions.
type Lines = Arc<Mutex<mpsc::Receiver<String>>>;

fn stdin_lines() -> Lines {
    let (sender, receiver) = mpsc::channel(16);
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if sender.send(line).await.is_err() {
                break;
            }
        }
    });
    Arc::new(Mutex::new(receiver))
}

async fn run(args: Args) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let workspace = match &args.cwd {
        Some(dir) => dir.canonicalize()?,
        None => std::env::current_dir()?,
    };
    let lines = stdin_lines();
    let (program, agent_args) = args.agent.split_first().ok_or("no agent command")?;
    let mut command = AgentCommand::new(program).args(agent_args).current_dir(&workspace);
    for name in &args.env {
        command = command.allow_env(name);
    }
    let decide = {
        let lines = Arc::clone(&lines);
        let fixed = match (args.yes, args.no) {
            (true, _) => Some(PermissionDecision::Approve),
            (_, true) => Some(PermissionDecision::Reject),
            _ => None,
        };
        move |request: wire::RequestPermissionRequest| {
            let lines = Arc::clone(&lines);
            let fixed = fixed.clone();
            async move {
                let title = request.tool_call.title.clone().unwrap_or_else(|| "a tool".into());
                if let Some(decision) = fixed {
                    eprintln!("[permission] {title}: {decision:?} (from the command line)");
                    return decision;
                }
                eprint!("[permission] allow {title}? [y/N] ");
                let _ = std::io::stderr().flush();
                match lines.lock().await.recv().await {
                    Some(answer) if matches!(answer.trim(), "y" | "Y" | "yes") => PermissionDecision::Approve,
                    _ => PermissionDecision::Reject,
                }
            }
        }
    };
    let options = ClientOptions::default()
        .with_workspace_root(&workspace)
        .with_permission(decide);
    let client = Terminal.connect(command, options).await?;
    let info = client.initialize_response().agent_info.clone();
    if let Some(info) = info {
        eprintln!("[agent] {} {}", info.name, info.version);
    }
    let session = client.new_session(&workspace).await?;
    let outcome = async {
        if args.prompts.is_empty() {
            loop {
                let line = lines.lock().await.recv().await;
                let Some(prompt) = line else { break };
                turn(&client, &session, &prompt).await?;
            }
        } else {
            for prompt in &args.prompts {
                turn(&client, &session, prompt).await?;
            }
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    }
    .await;
    client.close().await;
    outcome
}

/// Sends one prompt and prints its turn.
async fn turn(
    client: &agentacp::client::Client,
    session: &wire::SessionId,
    prompt: &str,
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let mut stream = client.prompt_text(session, prompt).await?;
    let mut titles = std::collections::HashMap::new();
    while let Some(event) = stream.next().await {
        let mut out = std::io::stdout().lock();
        match event? {
            PromptEvent::Update(update @ Update::MessageChunk(_)) => write!(out, "{}", update.text().unwrap_or(""))?,
            PromptEvent::Update(update @ Update::ThoughtChunk(_)) => {
                eprintln!("[thought] {}", update.text().unwrap_or(""))
            }
            PromptEvent::Update(update) => {
                if let Update::ToolCall(call) = &update {
                    titles.insert(call.tool_call_id.as_str().to_string(), call.title.clone());
                }
                writeln!(out, "{}", describe(&update, &titles))?
            }
            PromptEvent::Stop(reason) => writeln!(out, "\n[stop] {}", json!(reason).as_str().unwrap_or("?"))?,
            PromptEvent::Replay(_) | PromptEvent::Loaded => {}
        }
        out.flush()?;
    }
    Ok(())
}

fn describe(update: &Update, titles: &std::collections::HashMap<String, String>) -> String {
    match update {
        Update::ToolCall(call) => format!("[tool] {} ({})", call.title, status(call.status.as_ref())),
        Update::ToolCallUpdate(call) => format!(
            "[tool] {} → {}",
            call.title
                .as_deref()
                .or_else(|| titles.get(call.tool_call_id.as_str()).map(String::as_str))
                .unwrap_or(call.tool_call_id.as_str()),
            status(call.status.as_ref())
        ),
        Update::Plan(plan) => format!("[plan] {} steps", plan.entries.len()),
        other => format!("[update] {other:?}"),
    }
}

fn status(status: Option<&wire::ToolCallStatus>) -> String {
    status.map_or_else(
        || "pending".to_string(),
        |s| json!(s).as_str().unwrap_or("?").to_string(),
    )
}
