//! `scaffold-aip registry`: the ACP registry's `agent.json` for an operator, from its `ACP.md`
//! and the flags for what a manifest does not hold (license, repository, authors, the release
//! archives or packages), checked against the registry's rules ([`rules`], [`icon`]) before it
//! is written; `--check FILE` checks an existing one. A finding about a value taken from the
//! manifest names the manifest line it came from.

pub mod icon;
pub mod rules;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use acp_manifest::explain;
use acp_manifest::manifest::{self, Checked, Kind};
use acp_manifest::render;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::exit::{EXIT_FINDINGS, EXIT_OK, EXIT_USAGE};
use rules::{Allow, Finding, PLATFORMS, Severity};

/// Arguments of `registry`.
#[derive(Debug, clap::Args)]
pub struct RegistryArgs {
    /// The operator's manifest.
    #[arg(value_name = "MANIFEST", default_value = "ACP.md")]
    pub manifest: PathBuf,
    /// Check this existing agent.json (and the icon.svg beside it, or --icon) instead of
    /// writing one; the manifest is not read.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["name", "license", "repository", "authors", "archives", "cmd", "args", "env", "npx", "uvx", "out", "sums"])]
    pub check: Option<PathBuf>,
    /// The name the registry shows [default: the manifest's `name`].
    #[arg(long, value_name = "TEXT")]
    pub name: Option<String>,
    /// `license`: an SPDX expression, or `proprietary`.
    #[arg(long, value_name = "SPDX")]
    pub license: Option<String>,
    /// `repository`: the source repository's URL.
    #[arg(long, value_name = "URL")]
    pub repository: Option<String>,
    /// One of `authors` (repeat for more).
    #[arg(long = "author", value_name = "NAME")]
    pub authors: Vec<String>,
    /// A release archive of the binary for one target: `TARGET=URL`, optionally followed by
    /// `,file=PATH` (the local copy whose SHA-256 is computed), `,sha256=HEX` and `,cmd=CMD`.
    /// TARGET is one of darwin-aarch64, darwin-x86_64, linux-aarch64, linux-x86_64,
    /// windows-aarch64, windows-x86_64.
    #[arg(long = "archive", value_name = "TARGET=URL[,file=PATH][,sha256=HEX][,cmd=CMD]")]
    pub archives: Vec<String>,
    /// The command in each archive \[default: `./<manifest name>`, `.exe` added on Windows\].
    #[arg(long, value_name = "CMD")]
    pub cmd: Option<String>,
    /// An argument the client starts the agent with (repeat for more; every distribution).
    #[arg(long = "arg", value_name = "ARG", allow_hyphen_values = true)]
    pub args: Vec<String>,
    /// An environment variable the client sets, `KEY=VALUE` (repeat for more).
    #[arg(long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// An npm package the client runs with `npx`, its version pinned (`name@1.2.3`).
    #[arg(long, value_name = "PACKAGE")]
    pub npx: Option<String>,
    /// A PyPI package the client runs with `uvx`, its version pinned (`name==1.2.3`).
    #[arg(long, value_name = "PACKAGE")]
    pub uvx: Option<String>,
    /// Check this icon.svg against the registry's icon rules (it goes beside agent.json).
    #[arg(long, value_name = "FILE")]
    pub icon: Option<PathBuf>,
    /// Write agent.json to FILE instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Also write the archives' SHA-256 sums to FILE (`sha256sum` format, one line an archive).
    #[arg(long, value_name = "FILE")]
    pub sums: Option<PathBuf>,
    /// List windows-* targets although the runtime does not build for Windows (a warning
    /// instead of an error).
    #[arg(long)]
    pub allow_unbuilt_targets: bool,
}

/// One `--archive`: its target, URL, command, and SHA-256 when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Archive {
    /// The registry target (`linux-x86_64`, …).
    pub target: String,
    /// Where clients download it.
    pub url: String,
    /// The local file, when given.
    pub file: Option<PathBuf>,
    /// Lower-case hex SHA-256 (computed from `file`, or given).
    pub sha256: Option<String>,
    /// Its own `cmd=`, when given.
    pub cmd: Option<String>,
}

/// The rule on the running agent's `authMethods`.
const AUTH_RULE: &str = "auth-methods";

/// Where each value of an entry came from: manifest spans by JSON pointer.
type Origins = BTreeMap<String, std::ops::Range<usize>>;

/// Runs `registry`.
pub fn run(args: &RegistryArgs, out: &mut dyn Write, err: &mut dyn Write) -> std::io::Result<i32> {
    let allow = Allow {
        unbuilt_targets: args.allow_unbuilt_targets,
    };
    match &args.check {
        Some(file) => check_existing(file, args.icon.as_deref(), allow, err),
        None => match write_entry(args, allow, out, err) {
            Ok(code) => Ok(code),
            Err(Usage(message)) => {
                writeln!(err, "scaffold-aip registry: {message}")?;
                Ok(EXIT_USAGE)
            }
        },
    }
}

/// A usage or I/O problem, as a sentence (exit 2).
#[derive(Debug)]
struct Usage(String);

impl From<std::io::Error> for Usage {
    fn from(error: std::io::Error) -> Self {
        Usage(error.to_string())
    }
}

fn write_entry(args: &RegistryArgs, allow: Allow, out: &mut dyn Write, err: &mut dyn Write) -> Result<i32, Usage> {
    let shown = render::display_path(&args.manifest);
    let checked = manifest::check_file(&args.manifest).map_err(|e| Usage(format!("{shown}: {e}")))?;
    let (Some(manifest), Some(explained), false) =
        (&checked.manifest, explain::explain(&checked), checked.has_errors())
    else {
        for diagnostic in checked.diagnostics.iter().filter(|d| d.is_error()) {
            err.write_all(render::human(&checked.document.source, diagnostic, false).as_bytes())?;
        }
        writeln!(
            err,
            "scaffold-aip registry: {shown} has errors; fix them first (scaffold-aip lint)"
        )?;
        return Ok(EXIT_FINDINGS);
    };
    let (archives, env) = parse_flags(args)?;
    let entry = build_entry(manifest, args, &archives, &env);
    let mut found = rules::check_entry(&entry, allow);
    found.extend(manifest_findings(manifest.kind, &explained.initialize_response));
    // Only the running agent's `authMethods` can fail while the file itself is right: the
    // file is written then, so it can be reviewed while the operator gains a sign-in method.
    let entry_errors = found
        .iter()
        .any(|f| f.severity == Severity::Error && f.rule != AUTH_RULE);
    found.extend(archive_findings(&archives));
    let icon_failed = match &args.icon {
        Some(path) => report_icon(path, err)?,
        None => false,
    };
    let (errors, text) = report(&found, &checked, &origins(&checked, args), &shown);
    err.write_all(text.as_bytes())?;
    for archive in &archives {
        if let Some(sum) = &archive.sha256 {
            writeln!(err, "sha256 {sum}  {}  ({})", archive.url, archive.target)?;
        }
    }
    if entry_errors {
        writeln!(
            err,
            "scaffold-aip registry: agent.json not written: the registry would refuse it"
        )?;
        return Ok(EXIT_FINDINGS);
    }
    emit(&entry, &archives, args, out)?;
    Ok(if errors > 0 || icon_failed {
        EXIT_FINDINGS
    } else {
        EXIT_OK
    })
}

/// The `--archive`s (hashed, in the registry's target order, each target once) and `--env`s.
fn parse_flags(args: &RegistryArgs) -> Result<(Vec<Archive>, Map<String, Value>), Usage> {
    let mut archives = args
        .archives
        .iter()
        .map(|spec| parse_archive(spec))
        .collect::<Result<Vec<_>, _>>()?;
    archives.sort_by_key(|archive| PLATFORMS.iter().position(|target| *target == archive.target));
    if let Some(pair) = archives.windows(2).find(|pair| pair[0].target == pair[1].target) {
        return Err(Usage(format!("--archive names `{}` twice", pair[0].target)));
    }
    let env = args
        .env
        .iter()
        .map(|pair| parse_env(pair))
        .collect::<Result<Map<_, _>, _>>()?;
    Ok((archives, env))
}

/// The manifest spans of the entry's values taken from it (and of `kind` and `transport`,
/// which the manifest rules point at).
fn origins(checked: &Checked, args: &RegistryArgs) -> Origins {
    let mut origins = Origins::new();
    let frontmatter = checked.document.frontmatter.as_ref();
    for key in ["id", "name", "version", "description", "kind", "transport"] {
        let from_flag = key == "name" && args.name.is_some();
        if let Some(node) = frontmatter.and_then(|f| f.get(key)).filter(|_| !from_flag) {
            origins.insert(format!("/{key}"), node.span.clone());
        }
    }
    origins
}

/// Writes the entry (stdout or `--out`) and the `--sums` file.
fn emit(entry: &Value, archives: &[Archive], args: &RegistryArgs, out: &mut dyn Write) -> Result<(), Usage> {
    let text = format!("{}\n", serde_json::to_string_pretty(entry).unwrap_or_default());
    let written = |path: &Path, text: &str| {
        crate::atomic::write_file(path, text.as_bytes()).map_err(|e| Usage(format!("{}: {e}", path.display())))
    };
    match &args.out {
        Some(path) => written(path, &text)?,
        None => out.write_all(text.as_bytes())?,
    }
    if let Some(path) = &args.sums {
        written(path, &sums(archives))?;
    }
    Ok(())
}

/// The entry, fields in the registry's order; what the flags leave out is left out.
fn build_entry(
    manifest: &manifest::Manifest,
    args: &RegistryArgs,
    archives: &[Archive],
    env: &Map<String, Value>,
) -> Value {
    let mut entry = Map::new();
    entry.insert("id".into(), json!(manifest.id));
    entry.insert("name".into(), json!(args.name.as_deref().unwrap_or(&manifest.name)));
    entry.insert("version".into(), json!(manifest.version));
    entry.insert("description".into(), json!(manifest.description));
    if let Some(repository) = &args.repository {
        entry.insert("repository".into(), json!(repository));
    }
    if !args.authors.is_empty() {
        entry.insert("authors".into(), json!(args.authors));
    }
    if let Some(license) = &args.license {
        entry.insert("license".into(), json!(license));
    }
    let with_extras = |mut fields: Map<String, Value>| {
        if !args.args.is_empty() {
            fields.insert("args".into(), json!(args.args));
        }
        if !env.is_empty() {
            fields.insert("env".into(), Value::Object(env.clone()));
        }
        Value::Object(fields)
    };
    let mut distribution = Map::new();
    if !archives.is_empty() {
        let mut binary = Map::new();
        for archive in archives {
            let exe = if archive.target.starts_with("windows-") {
                ".exe"
            } else {
                ""
            };
            let cmd = (archive.cmd.clone().or_else(|| args.cmd.clone()))
                .unwrap_or_else(|| format!("./{}{exe}", manifest.name));
            let fields = Map::from_iter([
                ("archive".to_string(), json!(archive.url)),
                ("cmd".to_string(), json!(cmd)),
            ]);
            binary.insert(archive.target.clone(), with_extras(fields));
        }
        distribution.insert("binary".into(), Value::Object(binary));
    }
    for (kind, package) in [("npx", &args.npx), ("uvx", &args.uvx)] {
        if let Some(package) = package {
            let fields = Map::from_iter([("package".to_string(), json!(package))]);
            distribution.insert(kind.into(), with_extras(fields));
        }
    }
    entry.insert("distribution".into(), Value::Object(distribution));
    Value::Object(entry)
}

/// The rules that need the manifest: the registry lists agents (not clients), and its CI
/// starts each agent and wants at least one `authMethods` entry of type `agent` or `terminal`
/// in its `initialize` answer (`AUTHENTICATION.md`) — read here from the answer the manifest
/// gives (`scaffold-aip explain`), which is what the operator sends over stdio to a client
/// that runs terminal sign-ins (the registry's check says it does, in
/// `clientCapabilities._meta["terminal-auth"]`).
fn manifest_findings(kind: Kind, initialize: &Value) -> Vec<Finding> {
    let mut found = Vec::new();
    if kind == Kind::Client {
        let message = "the manifest's `kind` is client; the registry lists agents (a server, or a bridge)";
        found.push(Finding::error("kind", "/kind", message));
        return found;
    }
    let methods = initialize["authMethods"].as_array().cloned().unwrap_or_default();
    let typed = methods
        .iter()
        .any(|method| matches!(auth_type(method), "agent" | "terminal"));
    if !typed {
        let message = if methods.is_empty() {
            "the operator answers `initialize` over stdio with no `authMethods`, and the registry's CI lists only agents that offer one of type `agent` or `terminal`: declare one in `metadata.agentacp.auth` (see docs/editors.md, \"The ACP registry\")".to_string()
        } else {
            "none of the operator's `authMethods` is of type `agent` or `terminal`, which the registry's CI requires"
                .to_string()
        };
        found.push(Finding::error(AUTH_RULE, "/transport", message));
    }
    found
}

/// An auth method's type as the registry's CI reads it: `type`, else an `agent-auth` /
/// `terminal-auth` key in `_meta`, else `agent`.
fn auth_type(method: &Value) -> &str {
    if let Some(kind) = method["type"].as_str() {
        return kind;
    }
    match method["_meta"].as_object() {
        Some(meta) if meta.contains_key("terminal-auth") => "terminal",
        _ => "agent",
    }
}

/// A warning for an archive whose local file has another name than the URL's last segment
/// (the file uploaded must be the one hashed).
fn archive_findings(archives: &[Archive]) -> Vec<Finding> {
    let mut found = Vec::new();
    for archive in archives {
        let Some(file) = &archive.file else { continue };
        let local = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if url_file_name(&archive.url) != local {
            let at = format!("/distribution/binary/{}/archive", archive.target);
            let message = format!(
                "the archive of `{}` is `{local}` here, but its URL ends in `{}`: upload the file you hashed under that name",
                archive.target,
                url_file_name(&archive.url)
            );
            found.push(Finding::warning("archive-file", at, message));
        }
    }
    found
}

fn url_file_name(url: &str) -> &str {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    path.rsplit('/').next().unwrap_or(path)
}

/// The findings as text, one a line (a value from the manifest at its `file:line:column`),
/// and how many are errors.
fn report(found: &[Finding], checked: &Checked, origins: &Origins, shown: &str) -> (usize, String) {
    let mut text = String::new();
    for finding in found {
        let place = match origins.get(&finding.at) {
            Some(span) => {
                let at = checked.document.source.position(span.start);
                format!("{shown}:{}:{}", at.line, at.column)
            }
            None if finding.at.is_empty() => "agent.json".to_string(),
            None => format!("agent.json {}", finding.at),
        };
        text += &line(&place, finding);
    }
    (found.iter().filter(|f| f.severity == Severity::Error).count(), text)
}

fn line(place: &str, finding: &Finding) -> String {
    let level = match finding.severity {
        Severity::Error => "error",
        Severity::Warning => "warning",
    };
    format!("{place}: {level}[{}]: {}\n", finding.rule, finding.message)
}

/// Checks an icon file; prints each problem; `true` when it has any.
fn report_icon(path: &Path, err: &mut dyn Write) -> Result<bool, Usage> {
    let shown = render::display_path(path);
    let svg = read_small(path).map_err(|e| Usage(format!("{shown}: {e}")))?;
    let problems = icon::check_icon(&svg);
    for problem in &problems {
        writeln!(err, "{shown}: error[icon]: {problem}")?;
    }
    Ok(!problems.is_empty())
}

/// `--check FILE`: the registry's rules on an existing entry, its icon (`--icon`, else an
/// `icon.svg` beside it), and the registry's rule that its folder is named after its id.
fn check_existing(file: &Path, icon: Option<&Path>, allow: Allow, err: &mut dyn Write) -> std::io::Result<i32> {
    let shown = render::display_path(file);
    let entry: Value =
        match read_small(file).and_then(|text| serde_json::from_str(&text).map_err(|e| format!("not JSON: {e}"))) {
            Ok(entry) => entry,
            Err(message) => {
                writeln!(err, "scaffold-aip registry: {shown}: {message}")?;
                return Ok(EXIT_USAGE);
            }
        };
    let mut found = rules::check_entry(&entry, allow);
    let folder = file.canonicalize().ok().and_then(|f| {
        f.parent()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
    });
    if let (Some(id), Some(folder)) = (entry["id"].as_str(), folder)
        && id != folder
    {
        let message = format!(
            "the entry lies in folder `{folder}`; in the registry its folder must be named after its id, `{id}`"
        );
        found.push(Finding::warning("folder", "/id", message));
    }
    for finding in &found {
        let place = if finding.at.is_empty() {
            shown.clone()
        } else {
            format!("{shown} {}", finding.at)
        };
        err.write_all(line(&place, finding).as_bytes())?;
    }
    let beside = file.with_file_name("icon.svg");
    let icon = icon
        .map(Path::to_path_buf)
        .or_else(|| beside.is_file().then_some(beside));
    let icon_failed = match icon.as_deref().map(|path| report_icon(path, err)) {
        Some(Ok(failed)) => failed,
        Some(Err(Usage(message))) => {
            writeln!(err, "scaffold-aip registry: {message}")?;
            return Ok(EXIT_USAGE);
        }
        None => false,
    };
    let errors = found.iter().filter(|f| f.severity == Severity::Error).count();
    if errors == 0 && !icon_failed {
        writeln!(err, "{shown}: the registry's rules hold")?;
        return Ok(EXIT_OK);
    }
    Ok(EXIT_FINDINGS)
}

/// Parses `TARGET=URL[,file=PATH][,sha256=HEX][,cmd=CMD]`, hashing the file.
pub fn parse_archive(spec: &str) -> Result<Archive, String> {
    let Some((target, rest)) = spec.split_once('=') else {
        return Err(format!("--archive `{spec}` is not TARGET=URL"));
    };
    if !PLATFORMS.contains(&target) {
        return Err(format!(
            "--archive: `{target}` is not a registry target (one of {})",
            PLATFORMS.join(", ")
        ));
    }
    let mut parts = rest.split(',');
    let url = parts.next().unwrap_or_default().to_string();
    let mut archive = Archive {
        target: target.to_string(),
        url,
        file: None,
        sha256: None,
        cmd: None,
    };
    let mut given = None;
    for part in parts {
        match part.split_once('=') {
            Some(("file", path)) => archive.file = Some(PathBuf::from(path)),
            Some(("sha256", hex)) => given = Some(hex.to_ascii_lowercase()),
            Some(("cmd", cmd)) => archive.cmd = Some(cmd.to_string()),
            _ => {
                return Err(format!(
                    "--archive {target}: `{part}` is not file=PATH, sha256=HEX or cmd=CMD (a comma in the URL is written %2C)"
                ));
            }
        }
    }
    if let Some(hex) = &given
        && (hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err(format!("--archive {target}: sha256 `{hex}` is not 64 hex digits"));
    }
    let computed = match &archive.file {
        Some(path) => Some(sha256_of(path).map_err(|e| format!("--archive {target}: {}: {e}", path.display()))?),
        None => None,
    };
    archive.sha256 = match (computed, given) {
        (Some(computed), Some(given)) if computed != given => {
            return Err(format!(
                "--archive {target}: the file's SHA-256 is {computed}, not the {given} given: the file is not the release archive"
            ));
        }
        (computed, given) => computed.or(given),
    };
    Ok(archive)
}

/// The most an `agent.json` or an `icon.svg` may hold (the registry's are a few KiB).
const MAX_SMALL_FILE: u64 = 1 << 20;

/// A regular file of at most [`MAX_SMALL_FILE`] bytes, as UTF-8 text; a FIFO or a device is
/// refused before it is opened (opening a FIFO would wait for a writer).
fn read_small(path: &Path) -> Result<String, String> {
    let metadata = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !metadata.is_file() {
        return Err("not a regular file".to_string());
    }
    if metadata.len() > MAX_SMALL_FILE {
        return Err(format!(
            "{} bytes, more than the {MAX_SMALL_FILE} read here",
            metadata.len()
        ));
    }
    let mut text = String::new();
    File::open(path)
        .and_then(|file| file.take(MAX_SMALL_FILE + 1).read_to_string(&mut text))
        .map_err(|e| e.to_string())?;
    Ok(text)
}

/// The lower-case hex SHA-256 of a regular file (a FIFO or a device is refused before it is
/// opened), read in pieces.
pub fn sha256_of(path: &Path) -> std::io::Result<String> {
    if !std::fs::metadata(path)?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 16];
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

fn parse_env(pair: &str) -> Result<(String, Value), String> {
    match pair.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_string(), json!(value))),
        _ => Err(format!("--env `{pair}` is not KEY=VALUE")),
    }
}

/// `sha256sum` lines for the archives with a known sum, named by the URL's file name.
fn sums(archives: &[Archive]) -> String {
    archives
        .iter()
        .filter_map(|a| {
            a.sha256
                .as_ref()
                .map(|sum| format!("{sum}  {}\n", url_file_name(&a.url)))
        })
        .collect()
}

impl From<String> for Usage {
    fn from(message: String) -> Self {
        Usage(message)
    }
}
