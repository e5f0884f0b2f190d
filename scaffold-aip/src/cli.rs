//! The `scaffold-aip` command line. `main` is a thin wrapper over [`run`], so every command
//! can be driven (and tested) as a library call.

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::conform;
use crate::lint;
use crate::regen::{self, RegenArgs};
use crate::scaffold;
use crate::token::{self, TokenArgs};
use acp_manifest::explain;
use acp_manifest::manifest::{self, Checked};
use acp_manifest::render::{self, Summary};

pub use crate::exit::{EXIT_FINDINGS, EXIT_OK, EXIT_USAGE};

/// Tools for AIP-44 ACP.md manifests.
#[derive(Debug, Parser)]
#[command(name = "scaffold-aip", version, about, long_about = None)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// A `scaffold-aip` command.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check manifests; exit 0 when clean, 1 on findings, 2 on usage or I/O errors.
    Lint(LintArgs),
    /// Show what a manifest means: the initialize message, tier, refs and lifecycle mapping.
    Explain(ExplainArgs),
    /// Print the JSON Schema of the ACP.md frontmatter (generated from the Rust types).
    Schema,
    /// Generate the Rust wire types of one upstream ACP revision from its schema.json.
    Regen(RegenArgs),
    /// Check AIP-7 audit logs (hash-chained audit-event lines).
    Audit(AuditArgs),
    /// Create a new operator crate (ACP.md, its refs, src/, a smoke test) in DIR/NAME.
    New(NewArgs),
    /// Bearer tokens for servers reached over WebSocket: generate, hash, revoke.
    Token(TokenArgs),
    /// Run the conformance suite against an agent started as `-- AGENT ARGS…` (or a remote
    /// one, `--connect URL`); exit 0 when every check that applies passes, 1 on a failure, 2
    /// on usage or start-up errors.
    Conform(conform::ConformArgs),
    /// Write the ACP registry's agent.json for an operator from its ACP.md (or `--check` one),
    /// checked against the registry's rules; exit 0 when they hold, 1 on a finding, 2 on usage
    /// or I/O errors.
    Registry(crate::registry::RegistryArgs),
}

/// Arguments of `new`.
#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// The crate, its folder, and the manifest's `name` and `id` (kebab-case).
    pub name: String,
    /// What the operator is.
    #[arg(long, value_enum)]
    pub kind: scaffold::Kind,
    /// `metadata.aip44.tier`.
    #[arg(long, value_enum)]
    pub tier: scaffold::Tier,
    /// Transports, comma-separated (websocket: servers only).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "stdio")]
    pub transport: Vec<scaffold::Transport>,
    /// The folder to create NAME in.
    #[arg(long, default_value = ".")]
    pub path: PathBuf,
    /// Depend on this `agentacp` folder (a path dependency). Default: the checkout this
    /// `scaffold-aip` was built from, if it is still there, else the crates.io release.
    #[arg(long, value_name = "PATH")]
    pub agentacp_path: Option<PathBuf>,
    /// At tier sandboxed: the folder of this machine that SANDBOX.md mounts as the workspace
    /// (sessions must lie inside it). Default: the folder NAME is created in (--path).
    #[arg(long, value_name = "DIR")]
    pub workspace_root: Option<PathBuf>,
}

/// Arguments of `audit`.
#[derive(Debug, clap::Args)]
pub struct AuditArgs {
    /// The `audit` command.
    #[command(subcommand)]
    pub command: AuditCommand,
}

/// An `audit` command.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check audit logs' hash chains (files, or the chains in a database); exit 0 when all are
    /// intact, 1 when one is broken, 2 when one cannot be read.
    Verify(AuditVerifyArgs),
    /// Write the audit chains of a database to files, one `<chain>.jsonl` a chain, that
    /// `audit verify FILE` checks like any log.
    Export(AuditExportArgs),
}

/// Arguments of `audit verify`.
#[derive(Debug, clap::Args)]
pub struct AuditVerifyArgs {
    /// The audit logs, regular files: one AIP-7 audit-event JSON object per line (at most 16
    /// MiB each; read line by line). Each is verified, whatever the others are.
    #[arg(
        required_unless_present = "database",
        conflicts_with = "database",
        value_name = "FILE"
    )]
    pub files: Vec<PathBuf>,
    /// Verify the audit chains kept in this PostgreSQL database (one a replica), each whatever
    /// the others are: `postgres://user@host:port/dbname`. Without a URL, the one in
    /// `AGENTACP_DATABASE_URL` (which keeps its password out of the process list).
    #[arg(long, value_name = "URL", num_args = 0..=1)]
    pub database: Option<Option<String>>,
    /// With `--database`: only this chain (a replica's name).
    #[arg(long, value_name = "NAME", requires = "database")]
    pub chain: Option<String>,
    /// `human` for one line a log, `json` for the same as one JSON document a log (an array
    /// of them for several logs).
    #[arg(long, value_enum, default_value_t = AuditFormat::Human)]
    pub format: AuditFormat,
}

/// Arguments of `audit export`.
#[derive(Debug, clap::Args)]
pub struct AuditExportArgs {
    /// The PostgreSQL database holding the chains: `postgres://user@host:port/dbname`. Without
    /// a URL, the one in `AGENTACP_DATABASE_URL` (which keeps its password out of the process
    /// list).
    #[arg(long, value_name = "URL", num_args = 0..=1, required = true)]
    pub database: Option<Option<String>>,
    /// The folder to write `<chain>.jsonl` files in (created when absent; an earlier export of
    /// a chain is replaced).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Only this chain.
    #[arg(long, value_name = "NAME")]
    pub chain: Option<String>,
}

/// Output format of `audit verify`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuditFormat {
    /// A line of text.
    Human,
    /// JSON.
    Json,
}

/// An output format of `lint`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Source snippets with carets, like rustc.
    Human,
    /// One JSON document with every diagnostic and a summary.
    Json,
    /// GitHub Actions `::error`/`::warning` workflow commands.
    Github,
}

/// When to colour output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// On a terminal, unless NO_COLOR is set.
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

/// Arguments of `lint`.
#[derive(Debug, clap::Args)]
pub struct LintArgs {
    /// Manifests, or folders searched recursively for ACP.md [default: .]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Treat warnings as findings (exit 1).
    #[arg(long)]
    pub deny_warnings: bool,
    /// Colour for the human format (NO_COLOR, when set, always wins).
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto)]
    pub color: ColorChoice,
}

/// Arguments of `explain`.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// The manifest.
    pub path: PathBuf,
    /// `human` for a report, `json` for the same as one JSON document.
    #[arg(long, value_enum, default_value_t = ExplainFormat::Human)]
    pub format: ExplainFormat,
}

/// Output format of `explain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExplainFormat {
    /// A readable report.
    Human,
    /// JSON.
    Json,
}

/// Runs `scaffold-aip` with `args` (including the program name); returns the exit status.
pub fn run<I, T>(args: I, out: &mut dyn Write, err: &mut dyn Write) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(error) => {
            let text = error.render().to_string();
            let to_stdout = !error.use_stderr();
            let _ = if to_stdout {
                out.write_all(text.as_bytes())
            } else {
                err.write_all(text.as_bytes())
            };
            return if to_stdout { EXIT_OK } else { EXIT_USAGE };
        }
    };
    let result = match cli.command {
        Command::Lint(args) => run_lint(&args, out, err),
        Command::Explain(args) => run_explain(&args, out, err),
        Command::Schema => out
            .write_all(manifest::generated_json_schema_text().as_bytes())
            .map(|_| EXIT_OK),
        Command::Regen(args) => regen::run(&args, out, err),
        Command::Audit(AuditArgs {
            command: AuditCommand::Verify(args),
        }) => match &args.database {
            Some(given) => match database_url("scaffold-aip audit verify", given.as_deref(), err) {
                Ok(url) => crate::audit_db::verify(&url, args.chain.as_deref(), args.format, out, err),
                Err(code) => Ok(code),
            },
            None => run_audit_verify(&args, out, err),
        },
        Command::Audit(AuditArgs {
            command: AuditCommand::Export(args),
        }) => match database_url(
            "scaffold-aip audit export",
            args.database.as_ref().and_then(Option::as_deref),
            err,
        ) {
            Ok(url) => crate::audit_db::export(&url, &args.out, args.chain.as_deref(), out, err),
            Err(code) => Ok(code),
        },
        Command::New(args) => run_new(&args, out, err),
        Command::Token(args) => token::run(&args, &mut std::io::stdin().lock(), out, err),
        Command::Conform(args) => conform::run(&args, out, err),
        Command::Registry(args) => crate::registry::run(&args, out, err),
    };
    result.unwrap_or_else(|error| {
        let _ = writeln!(err, "scaffold-aip: {error}");
        EXIT_USAGE
    })
}

/// The URL of an audit command's `--database` ([`crate::database_url::resolve`]), or the exit
/// code after saying on `err` why there is none.
fn database_url(command: &str, given: Option<&str>, err: &mut dyn Write) -> Result<String, i32> {
    crate::database_url::resolve(given, command, err).map_err(|message| {
        let _ = writeln!(err, "{command}: {message}");
        EXIT_USAGE
    })
}

/// Colour for stdout: never when `NO_COLOR` is set (whatever `--color` says), otherwise as
/// asked, `auto` meaning "stdout is a terminal".
fn use_color(choice: ColorChoice) -> bool {
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    match choice {
        _ if no_color => false,
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => std::io::stdout().is_terminal(),
    }
}

fn run_lint(args: &LintArgs, out: &mut dyn Write, err: &mut dyn Write) -> std::io::Result<i32> {
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    let files = match lint::discover(&paths) {
        Ok(files) => files,
        Err(message) => {
            writeln!(err, "scaffold-aip lint: {message}")?;
            return Ok(EXIT_USAGE);
        }
    };
    let color = use_color(args.color);
    let mut summary = Summary::default();
    let mut io_failed = false;
    let mut any_json = false;
    // JSON is written as it goes, like the other formats, one diagnostic at a time: the
    // output for a file with 100,000 findings then costs its text, not a tree of values.
    let mut text = String::new();
    if args.format == Format::Json {
        text += "{\n  \"diagnostics\": [";
    }
    for (path, outcome) in lint::check_all(&files) {
        let checked = match outcome {
            Ok(checked) => checked,
            Err(error) => {
                writeln!(err, "scaffold-aip lint: {}: {error}", render::display_path(&path))?;
                io_failed = true;
                continue;
            }
        };
        summary.add(&checked.diagnostics);
        let source = &checked.document.source;
        for diagnostic in &checked.diagnostics {
            match args.format {
                Format::Human => text += &render::human(source, diagnostic, color),
                Format::Github => text += &render::github(source, diagnostic),
                Format::Json => {
                    text += if any_json { ",\n    " } else { "\n    " };
                    any_json = true;
                    text += &pretty_nested(&render::json_diagnostic(source, diagnostic), 4);
                }
            }
        }
        if text.len() > 1 << 16 {
            out.write_all(text.as_bytes())?;
            text.clear();
        }
    }
    match args.format {
        Format::Human => text += &format!("{}\n", summary.line()),
        Format::Github => {}
        Format::Json => {
            let counts = serde_json::json!({
                "files": summary.files, "errors": summary.errors, "warnings": summary.warnings,
            });
            text += if any_json { "\n  ]" } else { "]" };
            text += &format!(",\n  \"summary\": {}\n}}\n", pretty_nested(&counts, 2));
        }
    }
    out.write_all(text.as_bytes())?;
    if io_failed {
        return Ok(EXIT_USAGE);
    }
    let failing = summary.errors > 0 || (args.deny_warnings && summary.warnings > 0);
    Ok(if failing { EXIT_FINDINGS } else { EXIT_OK })
}

/// `value` pretty-printed as it is when nested `indent` spaces deep in a pretty document
/// (every line but the first indented).
fn pretty_nested(value: &serde_json::Value, indent: usize) -> String {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.replace('\n', &format!("\n{}", " ".repeat(indent)))
}

fn run_explain(args: &ExplainArgs, out: &mut dyn Write, err: &mut dyn Write) -> std::io::Result<i32> {
    let checked: Checked = match manifest::check_file(&args.path) {
        Ok(checked) => checked,
        Err(error) => {
            writeln!(err, "scaffold-aip explain: {}: {error}", args.path.display())?;
            return Ok(EXIT_USAGE);
        }
    };
    let color = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stderr().is_terminal();
    for diagnostic in &checked.diagnostics {
        err.write_all(render::human(&checked.document.source, diagnostic, color).as_bytes())?;
    }
    let Some(explanation) = explain::explain(&checked) else {
        match &checked.generated_wire {
            Some(module) if !checked.has_errors() => writeln!(
                err,
                "scaffold-aip explain: `acp_rev` has no built-in wire types, and the crate's generated {} has no \
                 readable `PROTOCOL_VERSION`; regenerate it with `scaffold-aip regen --rev {}`",
                module.path.display(),
                module.sha
            )?,
            _ => writeln!(err, "scaffold-aip explain: the manifest has errors; fix them first")?,
        }
        return Ok(EXIT_FINDINGS);
    };
    match args.format {
        ExplainFormat::Human => out.write_all(explanation.to_text().as_bytes())?,
        ExplainFormat::Json => {
            let text = serde_json::to_string_pretty(&explanation).unwrap_or_default();
            writeln!(out, "{text}")?;
        }
    }
    Ok(EXIT_OK)
}

fn run_new(args: &NewArgs, out: &mut dyn Write, err: &mut dyn Write) -> std::io::Result<i32> {
    let options = scaffold::Options {
        name: args.name.clone(),
        kind: args.kind,
        tier: args.tier,
        transports: args.transport.clone(),
        dir: args.path.clone(),
        agentacp_path: None,
        workspace_root: args.workspace_root.clone(),
    };
    let (agentacp_path, why) = match &args.agentacp_path {
        Some(path) => (Some(path.clone()), "--agentacp-path"),
        None => match scaffold::checkout_agentacp() {
            Some(path) => (
                Some(path),
                "the checkout scaffold-aip was built from; --agentacp-path PATH names another",
            ),
            None => (
                None,
                "the crates.io release; --agentacp-path PATH depends on a checkout instead",
            ),
        },
    };
    let options = scaffold::Options {
        agentacp_path,
        ..options
    };
    match scaffold::new_crate(&options) {
        Ok(scaffolded) => {
            out.write_all(scaffold::report(&scaffolded).as_bytes())?;
            writeln!(out, "agentacp = {} ({why})", scaffolded.agentacp_dependency)?;
            Ok(EXIT_OK)
        }
        Err(error) => {
            writeln!(err, "scaffold-aip new: {error}")?;
            Ok(EXIT_USAGE)
        }
    }
}

fn run_audit_verify(args: &AuditVerifyArgs, out: &mut dyn Write, err: &mut dyn Write) -> std::io::Result<i32> {
    let mut documents = Vec::new();
    let mut worst = EXIT_OK;
    for path in &args.files {
        match verify_one(path) {
            Ok((document, text, code)) => {
                if args.format == AuditFormat::Human {
                    out.write_all(text.as_bytes())?;
                }
                documents.push(document);
                worst = worst.max(code);
            }
            Err(message) => {
                writeln!(err, "scaffold-aip audit verify: {message}")?;
                worst = EXIT_USAGE;
            }
        }
    }
    if args.format == AuditFormat::Json {
        let document = match documents.as_slice() {
            [one] if args.files.len() == 1 => one.clone(),
            _ => serde_json::Value::Array(documents),
        };
        writeln!(out, "{}", serde_json::to_string_pretty(&document).unwrap_or_default())?;
    }
    Ok(worst)
}

/// One log's verdict: its JSON document, its human text and its exit status; `Err` is why it
/// could not be read (naming the file).
fn verify_one(path: &std::path::Path) -> Result<(serde_json::Value, String, i32), String> {
    use acp_audit::AuditError;
    let file = render::display_path(path);
    match acp_audit::verify_file(path) {
        Ok(summary) => {
            let records = summary.records;
            let noun = if records == 1 { "record" } else { "records" };
            let text = match &summary.last_hash {
                Some(hash) => format!("{file}: {records} {noun}, chain intact (last hash {hash})\n"),
                None => format!("{file}: 0 records, chain intact (empty log)\n"),
            };
            let document = serde_json::json!({
                "file": file, "intact": true, "records": records, "lastHash": summary.last_hash,
            });
            Ok((document, text, EXIT_OK))
        }
        Err(AuditError::Broken(error)) => {
            let before = match error.line.saturating_sub(1) {
                0 => String::new(),
                1 => "  the record before it is intact\n".to_string(),
                n => format!("  the {n} records before it are intact\n"),
            };
            let text = format!("{file}: chain broken at {error}\n{before}");
            let document = serde_json::json!({
                "file": file, "intact": false, "line": error.line, "seq": error.seq, "offset": error.offset,
                "reason": error.reason,
            });
            Ok((document, text, EXIT_FINDINGS))
        }
        // The I/O error says what it is by itself.
        Err(AuditError::Io(error)) => Err(format!("{file}: {error}")),
        Err(error) => Err(format!("{file}: {error}")),
    }
}
