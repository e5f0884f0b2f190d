//! A terminal ACP client (`kind: client`): `acp-client [OPTIONS] -- AGENT [ARGS...]` starts
//! the agent, opens a session in the workspace, sends each `--prompt` (or each line of stdin)
//! and prints the turn as it streams. The agent may read and write files and run commands
//! inside the workspace; permission requests go through `GOVERNANCE.md` and, where it says
//! "ask", to the user on the terminal (`--yes` approves, `--no` rejects, without asking).
//! Tool calls are audited in `audit/client.jsonl` of its state folder,
//! `~/.local/state/agentacp/acp-client` by default (or `$AGENTACP_AUDIT_LOG`).
//!
//! Lines starting with `/`: `/mode [ID]` lists the session's modes or sets one, `/config [ID
//! VALUE]` lists its config options or sets one, `/sessions` lists the agent's sessions,
//! `/resume ID` goes on in one of them, `/commands` lists the agent's slash commands (shown
//! once when they first arrive); a feature the agent does not offer is said so. Any other line
//! (an agent's `/command` too) is a prompt.
//!
//! Authentication: an `env_var` method of the agent's whose variables are passed with `--env`
//! is used by itself; `--auth ID` picks one (`--auth none`: never), and passes the variables of
//! a named `env_var` method that are set here (the agent is started again with them; `[auth]`
//! on stderr names them). When `session/new` is refused for want of it, the agent's methods
//! are listed, with the flag that passes a variable set here. SIGINT and SIGTERM cancel the
//! running turn and stop the agent (its whole process group) before exiting (130, 143).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use agentacp::client::{
    AgentCommand, AuthPolicy, Client, ClientContext, ClientOptions, Connect, LIST_PAGES_MAX, PermissionDecision,
    PromptEvent, SessionState, Update, config_value, fs, select_values, unpassed_env_advice,
};
use agentacp::env::{ShutdownSignal, ShutdownSignals};
use agentacp::jsonrpc::RpcError;
use agentacp::prelude::*;
use clap::Parser;
use tokio::io::AsyncBufReadExt;
use tokio::sync::{Mutex, mpsc};

/// A line on stdout (what the user asked to see; a closed stdout is not an error here).
macro_rules! out {
    ($($arg:tt)*) => {{
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

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
    /// Environment variables to pass to the agent besides the default allow-list (an API key
    /// an `env_var` auth method names, e.g. `--env OPENAI_API_KEY`).
    #[arg(long = "env", value_name = "NAME")]
    env: Vec<String>,
    /// The auth method to `authenticate` with after `initialize` (`none`: never). Default: an
    /// `env_var` method whose variables are all passed to the agent, else none. A named
    /// `env_var` method's variables that are set here are passed to the agent (it is started
    /// again with them); one that is not set is an error naming it.
    #[arg(long, value_name = "METHOD-ID")]
    auth: Option<String>,
    /// The agent's program and arguments.
    #[arg(required = true, last = true)]
    agent: Vec<String>,
}

/// How a run ended early.
#[derive(Debug)]
enum Stopped {
    /// By a signal, after stopping the agent.
    Signal(ShutdownSignal),
    /// By an error.
    Error(Box<dyn std::error::Error>),
}

impl<E: Into<Box<dyn std::error::Error>>> From<E> for Stopped {
    fn from(error: E) -> Self {
        Stopped::Error(error.into())
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    // The runtime's logs (warnings, what cannot be contained) on stderr; stdout stays ours.
    agentacp::env::init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("acp-client: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(run(args));
    // The agent is stopped by now. Stdin's reader may sit in a read that never ends (a
    // terminal after Ctrl-C): do not wait for it.
    runtime.shutdown_background();
    // What the agent left behind, even outside its process group, was reparented to us (the
    // runtime is its subreaper): it ends with us.
    agentacp::process_tree::end_all_descendants(std::time::Duration::from_secs(2));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(Stopped::Signal(signal)) => {
            eprintln!("acp-client: stopped by {}", signal.name());
            ExitCode::from(signal.exit_code())
        }
        Err(Stopped::Error(error)) => {
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

async fn run(args: Args) -> std::result::Result<(), Stopped> {
    // Before the agent starts: from here on a signal stops it rather than orphaning it.
    let mut signals = ShutdownSignals::install()?;
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
    // A method named with `--auth` is used below, once its variables reach the agent.
    let named = args.auth.as_deref().filter(|id| *id != "none");
    let auth = match args.auth.as_deref() {
        None => AuthPolicy::default(),
        Some(_) => AuthPolicy::Never,
    };
    let options = ClientOptions::default()
        .with_workspace_root(&workspace)
        .with_permission(decide)
        .with_auth(auth);
    let mut client = connect(command.clone(), options.clone(), &mut signals).await?;
    if let Some(id) = named {
        client = authenticate_named(client, id, command.clone(), options, &mut signals).await?;
    }
    let info = client.initialize_response().agent_info.clone();
    if let Some(info) = info {
        eprintln!("[agent] {} {}", info.name, info.version);
    }
    let mut session = None;
    let outcome = tokio::select! {
        outcome = converse(&client, &command, &workspace, &args.prompts, &lines, &mut session) => outcome.map_err(Stopped::Error),
        signal = signals.recv() => Err(Stopped::Signal(signal)),
    };
    if let (Err(Stopped::Signal(_)), Some(session)) = (&outcome, &session) {
        // The turn's stream is gone with `converse`; tell the agent, briefly.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), client.cancel(session)).await;
    }
    // Every path closes: stdin, a grace, SIGTERM, SIGKILL to the agent's group. A second
    // signal stops waiting (dropping the client stops the group at once).
    tokio::select! {
        _ = client.close() => {}
        signal = signals.recv() => eprintln!("acp-client: {}: stopping the agent now", signal.name()),
    }
    outcome
}

/// Starts the agent and initializes it. A signal while connecting drops the client being
/// connected: that stops the agent.
async fn connect(
    command: AgentCommand,
    options: ClientOptions,
    signals: &mut ShutdownSignals,
) -> std::result::Result<Client, Stopped> {
    tokio::select! {
        client = Terminal.connect(command, options) => Ok(client?),
        signal = signals.recv() => Err(Stopped::Signal(signal)),
    }
}

/// `--auth ID`: `authenticate` with the method the user named. When it is an `env_var` method
/// whose variables our environment has but `command` does not pass, naming it is taken as
/// leave to pass them: the agent is started again with them (said on stderr, by name, never
/// the value). One our environment lacks is an error that names it.
async fn authenticate_named(
    mut client: Client,
    id: &str,
    command: AgentCommand,
    options: ClientOptions,
    signals: &mut ShutdownSignals,
) -> std::result::Result<Client, Stopped> {
    let method = client
        .auth_methods()
        .iter()
        .find(|method| method.id.as_str() == id)
        .cloned();
    if let Some(method) = method {
        let unpassed = method.unpassed_env_vars(&command);
        if unpassed.iter().any(|var| !var.ours) {
            client.close().await;
            return Err(unpassed_env_advice(&method, &unpassed, "--env").into());
        }
        if !unpassed.is_empty() {
            let names: Vec<&str> = unpassed.iter().map(|var| var.name.as_str()).collect();
            eprintln!(
                "[auth] passing {} to the agent for --auth {id}; starting it again with it",
                names.join(", ")
            );
            client.close().await;
            let command = names.iter().fold(command, |command, name| command.allow_env(name));
            client = connect(command, options, signals).await?;
        }
    }
    if let Err(error) = client.authenticate(&id.into()).await {
        client.close().await;
        return Err(error.into());
    }
    Ok(client)
}

/// Opens the session (saying which auth methods the agent offers when it wants one), then
/// sends every prompt.
async fn converse(
    client: &Client,
    command: &AgentCommand,
    workspace: &std::path::Path,
    prompts: &[String],
    lines: &Lines,
    opened: &mut Option<wire::SessionId>,
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let session = match client.new_session(workspace).await {
        Ok(session) => opened.insert(session).clone(),
        Err(error) => {
            if error.is_auth_required() {
                explain_auth(client, command);
            }
            return Err(error.into());
        }
    };
    let mut chat = Chat {
        client,
        workspace,
        session,
        commands_shown: false,
    };
    chat.announce_commands();
    if prompts.is_empty() {
        loop {
            let line = lines.lock().await.recv().await;
            let Some(line) = line else { break };
            chat.line(&line).await?;
            *opened = Some(chat.session.clone());
        }
    } else {
        for prompt in prompts {
            chat.line(prompt).await?;
            *opened = Some(chat.session.clone());
        }
    }
    Ok(())
}

/// The conversation: the session lines go to, and whether the agent's commands were shown.
struct Chat<'a> {
    client: &'a Client,
    workspace: &'a std::path::Path,
    session: wire::SessionId,
    commands_shown: bool,
}

/// Our own commands; any other line (the agent's slash commands too) is a prompt.
const OUR_COMMANDS: &str = "/mode [ID], /config [ID VALUE], /sessions, /resume ID, /commands";

impl Chat<'_> {
    /// One line: one of our commands, else a prompt.
    async fn line(&mut self, line: &str) -> std::result::Result<(), Box<dyn std::error::Error>> {
        let mut words = line.split_whitespace();
        let outcome = match (words.next().unwrap_or(""), words.next(), words.next()) {
            ("/mode", None, _) => self.modes(),
            ("/mode", Some(id), _) => self.set_mode(id).await,
            ("/config", None, _) => self.config(),
            ("/config", Some(id), Some(value)) => self.set_config(id, value).await,
            ("/config", Some(_), None) => Err("usage: /config ID VALUE".into()),
            ("/sessions", ..) => self.sessions().await,
            ("/resume", Some(id), _) => self.resume(id).await,
            ("/resume", None, _) => Err("usage: /resume SESSION-ID (see /sessions)".into()),
            ("/commands", ..) => self.commands(),
            (word, ..) => {
                self.note_unknown_command(word);
                turn(self.client, &self.session, line).await?;
                self.announce_commands();
                return Ok(());
            }
        };
        // A command that did not work is said, and the conversation goes on.
        if let Err(error) = outcome {
            eprintln!("[client] {error}");
        }
        Ok(())
    }

    fn state(&self) -> SessionState {
        self.client.session_state(&self.session).unwrap_or_default()
    }

    fn modes(&self) -> Result<(), Box<dyn std::error::Error>> {
        let Some(modes) = self.state().modes else {
            return Err("the agent offers no modes in this session".into());
        };
        for mode in &modes.available_modes {
            let current = if mode.id == modes.current_mode_id { "*" } else { " " };
            let description = mode
                .description
                .as_deref()
                .map(|d| format!(" — {d}"))
                .unwrap_or_default();
            out!("[mode] {current} {}: {}{description}", mode.id, mode.name);
        }
        Ok(())
    }

    async fn set_mode(&self, id: &str) -> Result<(), Box<dyn std::error::Error>> {
        self.client.set_mode(&self.session, &id.into()).await?;
        out!("[mode] now {id}");
        Ok(())
    }

    fn config(&self) -> Result<(), Box<dyn std::error::Error>> {
        let Some(options) = self.state().config_options else {
            return Err("the agent offers no config options in this session".into());
        };
        for option in &options {
            let (current, values) = match &option.kind {
                wire::SessionConfigOptionKind::Boolean(flag) => (flag.current_value.to_string(), "true, false".into()),
                wire::SessionConfigOptionKind::Select(select) => {
                    let values: Vec<&str> = select_values(select).iter().map(|v| v.as_str()).collect();
                    (select.current_value.to_string(), values.join(", "))
                }
            };
            out!("[config] {} ({}) = {current}  [{values}]", option.id, option.name);
        }
        Ok(())
    }

    async fn set_config(&self, id: &str, value: &str) -> Result<(), Box<dyn std::error::Error>> {
        let state = self.state();
        let value = match state.config_option(id) {
            Some(option) => config_value(option, value)?,
            // Not one of its options (or none offered): the client says why.
            None => wire::SetSessionConfigOptionRequestKind::ValueId(
                wire::SetSessionConfigOptionRequestKindValueId::new(value.into()),
            ),
        };
        let id = wire::SessionConfigId(id.to_string());
        self.client.set_config_option(&self.session, &id, value).await?;
        out!("[config] {id} set");
        Ok(())
    }

    async fn sessions(&self) -> Result<(), Box<dyn std::error::Error>> {
        let sessions = self
            .client
            .list_all_sessions(Some(self.workspace), LIST_PAGES_MAX)
            .await?;
        if sessions.is_empty() {
            out!("[sessions] none");
        }
        for info in sessions {
            let current = if info.session_id == self.session { "*" } else { " " };
            let title = info.title.as_deref().unwrap_or("(untitled)");
            let updated = info
                .updated_at
                .as_deref()
                .map(|at| format!(" ({at})"))
                .unwrap_or_default();
            out!("[sessions] {current} {}: {title}{updated}", info.session_id);
        }
        Ok(())
    }

    async fn resume(&mut self, id: &str) -> Result<(), Box<dyn std::error::Error>> {
        let session = wire::SessionId::from(id);
        self.client.resume_session(&session, self.workspace).await?;
        out!("[sessions] resumed {id}");
        self.session = session;
        self.commands_shown = false;
        self.announce_commands();
        Ok(())
    }

    fn commands(&self) -> Result<(), Box<dyn std::error::Error>> {
        match self.state().commands {
            Some(commands) if !commands.is_empty() => {
                print_commands(&commands);
                Ok(())
            }
            _ => Err("the agent has offered no slash commands (yet)".into()),
        }
    }

    /// The agent's commands, once, when they first arrive.
    fn announce_commands(&mut self) {
        if self.commands_shown {
            return;
        }
        if let Some(commands) = self.state().commands.filter(|c| !c.is_empty()) {
            print_commands(&commands);
            self.commands_shown = true;
        }
    }

    /// A `/word` that is neither ours nor the agent's is still sent, as text; say so.
    fn note_unknown_command(&self, word: &str) {
        let Some(name) = word.strip_prefix('/').filter(|name| !name.is_empty()) else {
            return;
        };
        let state = self.state();
        if state.commands.is_some() && state.command(name).is_none() {
            eprintln!("[client] /{name} is not one of the agent's commands (ours: {OUR_COMMANDS}); sent as text");
        }
    }
}

fn print_commands(commands: &[wire::AvailableCommand]) {
    out!("[commands] the agent's slash commands (send them as a line):");
    for command in commands {
        let hint = match &command.input {
            Some(wire::AvailableCommandInput::Unstructured(input)) => format!(" <{}>", input.hint),
            None => String::new(),
        };
        // Every line of a description keeps the prefix, under the first.
        let description = command
            .description
            .lines()
            .collect::<Vec<_>>()
            .join("\n[commands]     ");
        out!("[commands]   /{}{hint} — {description}", command.name);
    }
}

/// The agent's auth methods, and how to use one.
fn explain_auth(client: &Client, command: &AgentCommand) {
    let methods = client.auth_methods();
    if methods.is_empty() {
        eprintln!("[auth] the agent wants authentication but advertised no auth methods");
        return;
    }
    eprintln!("[auth] the agent wants authentication; its methods:");
    for method in methods {
        eprintln!("[auth]   {}", method.describe());
    }
    eprintln!("[auth] choose one with --auth METHOD-ID; an env_var method needs its variables passed with --env NAME");
    for method in methods {
        let unpassed = method.unpassed_env_vars(command);
        if !unpassed.is_empty() && unpassed.iter().all(|var| var.ours) {
            eprintln!(
                "[auth] {}; or name the method with `--auth {}`, which passes it",
                unpassed_env_advice(method, &unpassed, "--env"),
                method.id
            );
        }
    }
}

/// Sends one prompt and prints its turn.
async fn turn(
    client: &Client,
    session: &wire::SessionId,
    prompt: &str,
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let mut stream = client.prompt_text(session, prompt).await?;
    let mut titles = std::collections::HashMap::new();
    // The agent's text so far does not end its line: anything else printed starts a new one.
    let mut open_line = false;
    while let Some(event) = stream.next().await {
        let mut out = std::io::stdout().lock();
        let event = match event {
            Ok(PromptEvent::Update(update @ Update::MessageChunk(_))) => {
                let text = update.text().unwrap_or("");
                write!(out, "{text}")?;
                out.flush()?;
                if !text.is_empty() {
                    open_line = !text.ends_with('\n');
                }
                continue;
            }
            event => event,
        };
        if std::mem::take(&mut open_line) {
            writeln!(out)?;
        }
        match event? {
            PromptEvent::Update(update @ Update::ThoughtChunk(_)) => {
                out.flush()?;
                eprintln!("[thought] {}", update.text().unwrap_or(""))
            }
            PromptEvent::Update(update) => {
                if let Update::ToolCall(call) = &update {
                    titles.insert(call.tool_call_id.as_str().to_string(), call.title.clone());
                }
                writeln!(out, "{}", describe(&update, &titles))?
            }
            PromptEvent::Stop(reason) => writeln!(out, "[stop] {}", json!(reason).as_str().unwrap_or("?"))?,
            PromptEvent::Replay(_) | PromptEvent::Loaded => {}
        }
        out.flush()?;
    }
    if open_line {
        writeln!(std::io::stdout().lock())?;
    }
    Ok(())
}

fn describe(update: &Update, titles: &std::collections::HashMap<String, String>) -> String {
    match update {
        // An update without a title: the title its call was announced with.
        Update::ToolCallUpdate(call) if call.title.is_none() => {
            let title = titles
                .get(call.tool_call_id.as_str())
                .map_or(call.tool_call_id.as_str(), String::as_str);
            let status = call.status.as_ref().map_or_else(
                || "updated".to_string(),
                |s| json!(s).as_str().unwrap_or("?").to_string(),
            );
            agentacp::client::clip(&format!("[tool] {title} → {status}"), agentacp::client::ONE_LINE_MAX)
        }
        other => other.one_line(),
    }
}
