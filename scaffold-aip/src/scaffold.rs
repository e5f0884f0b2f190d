//! `scaffold-aip new`: a new operator crate from the handlebars templates in
//! `scaffold-aip/templates/`, compiled into the binary so an installed `scaffold-aip` needs no
//! source tree.

use std::fmt;
use std::path::PathBuf;

use clap::ValueEnum;
use handlebars::Handlebars;
use serde_json::json;

use acp_manifest::revisions;

/// The versions a generated `Cargo.toml` asks for when it does not depend on a checkout:
/// the one reviewed table (crate, TOML value). `agentacp` at this `scaffold-aip`'s own version
/// (the crates are released together), so the templates meet the API they were written for.
pub const DEPENDENCIES: &[(&str, &str)] = &[
    ("agentacp", concat!("\"", env!("CARGO_PKG_VERSION"), "\"")),
    (
        "tokio",
        r#"{ version = "1", features = ["rt-multi-thread", "macros"] }"#,
    ),
];

fn dependency(name: &str) -> &'static str {
    DEPENDENCIES
        .iter()
        .find(|(crate_name, _)| *crate_name == name)
        .map(|(_, value)| *value)
        .unwrap_or_else(|| panic!("{name} is missing from scaffold::DEPENDENCIES"))
}

/// `kind` of the new operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// An agent (`…Server` trait, `prompt`).
    Server,
    /// Drives an agent (`…Client` trait).
    Client,
    /// Sits between an editor and an agent (`…Bridge` trait).
    Bridge,
}

/// `metadata.aip44.tier` of the new operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Tier {
    /// No governance.
    Basic,
    /// Governed, audited tool calls; `session/load`.
    GovernanceAware,
    /// Governance-aware plus a sandbox.
    Sandboxed,
}

/// One transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    /// Standard input and output (always offered).
    Stdio,
    /// WebSocket (servers only; adds `authenticate`).
    Websocket,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Server => "server",
            Kind::Client => "client",
            Kind::Bridge => "bridge",
        }
    }
}

impl Tier {
    fn as_str(self) -> &'static str {
        match self {
            Tier::Basic => "basic",
            Tier::GovernanceAware => "governance-aware",
            Tier::Sandboxed => "sandboxed",
        }
    }

    fn type_name(self) -> &'static str {
        match self {
            Tier::Basic => "Basic",
            Tier::GovernanceAware => "GovernanceAware",
            Tier::Sandboxed => "Sandboxed",
        }
    }
}

/// What to generate.
#[derive(Debug, Clone)]
pub struct Options {
    /// The crate, folder, manifest `name` and `id` (kebab-case).
    pub name: String,
    /// `kind`.
    pub kind: Kind,
    /// `tier`.
    pub tier: Tier,
    /// Transports; stdio is added when missing.
    pub transports: Vec<Transport>,
    /// The folder the crate folder is created in.
    pub dir: PathBuf,
    /// An `agentacp` folder, for a path dependency (made absolute); `None` for the crates.io
    /// release. The CLI fills it from `--agentacp-path` or [`checkout_agentacp`].
    pub agentacp_path: Option<PathBuf>,
    /// At tier sandboxed: the folder of this machine that SANDBOX.md mounts as the workspace
    /// (sessions must lie inside it); it must exist. `None`: [`Options::dir`]. The CLI fills
    /// it from `--workspace-root`.
    pub workspace_root: Option<PathBuf>,
}

/// Why nothing was generated.
#[derive(Debug)]
pub enum ScaffoldError {
    /// The name is not usable.
    BadName(String),
    /// The options do not fit together.
    BadOptions(String),
    /// The target folder exists.
    Exists(PathBuf),
    /// Writing failed.
    Io(PathBuf, std::io::Error),
    /// A template failed to render (a bug).
    Template(String),
}

impl fmt::Display for ScaffoldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScaffoldError::BadName(message) | ScaffoldError::BadOptions(message) => f.write_str(message),
            ScaffoldError::Exists(path) => write!(
                f,
                "{} already exists; refusing to overwrite it (pick another name or --path)",
                path.display()
            ),
            ScaffoldError::Io(path, error) => write!(f, "{}: {error}", path.display()),
            ScaffoldError::Template(message) => write!(f, "template error: {message}"),
        }
    }
}

impl std::error::Error for ScaffoldError {}

/// Names cargo or the generated code cannot use: Rust keywords (cargo refuses them as package
/// names), the generated crate's own dependencies and the standard crates.
const RESERVED_NAMES: &[&str] = &[
    "agentacp",
    "tokio",
    "std",
    "core",
    "alloc",
    "test",
    "proc-macro",
    "as",
    "async",
    "await",
    "break",
    "const",
    "continue",
    "crate",
    "dyn",
    "else",
    "enum",
    "extern",
    "false",
    "fn",
    "for",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "match",
    "mod",
    "move",
    "mut",
    "pub",
    "ref",
    "return",
    "self",
    "static",
    "struct",
    "super",
    "trait",
    "true",
    "type",
    "unsafe",
    "use",
    "where",
    "while",
    "abstract",
    "become",
    "box",
    "do",
    "final",
    "gen",
    "macro",
    "override",
    "priv",
    "try",
    "typeof",
    "unsized",
    "virtual",
    "yield",
];

/// Type names the generated code already uses (the prelude's, the standard prelude's and its
/// own imports): a struct by one of these names gets an `Operator` suffix.
const TAKEN_TYPE_NAMES: &[&str] = &[
    "Self",
    "Error",
    "Result",
    "Decision",
    "Governance",
    "ToolKind",
    "ToolRequest",
    "Serve",
    "ServerOptions",
    "SessionContext",
    "ToolOutcome",
    "Turn",
    "Basic",
    "GovernanceAware",
    "Sandboxed",
    "Value",
    "Option",
    "Some",
    "None",
    "Ok",
    "Err",
    "String",
    "Vec",
    "Box",
    "Send",
    "Sync",
    "Sized",
    "Copy",
    "Clone",
    "Default",
    "Drop",
    "Fn",
    "FnMut",
    "FnOnce",
    "Iterator",
    "ToString",
    "From",
    "Into",
    "ClientContext",
    "RpcError",
    "AgentCommand",
    "ClientOptions",
    "Connect",
    "PromptEvent",
    "Update",
    "ExitCode",
    "RunBridge",
    "Operator",
    "ClientOperator",
    "ClientHandlers",
    "BridgeOperator",
];

/// Checks that `name` is kebab-case (`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`) and usable as a crate.
pub fn validate_name(name: &str) -> Result<(), ScaffoldError> {
    if !acp_manifest::manifest::is_kebab_id(name) {
        return Err(ScaffoldError::BadName(format!(
            "`{name}` is not kebab-case: use lowercase letters, digits and single hyphens, starting with \
             a letter (e.g. `my-agent`); it names the crate, the folder and the manifest"
        )));
    }
    if RESERVED_NAMES.contains(&name) {
        return Err(ScaffoldError::BadName(format!(
            "`{name}` is a Rust keyword or a crate the new crate depends on; pick another name"
        )));
    }
    Ok(())
}

/// `my-agent` → `MyAgent` (with an `Operator` suffix when that name is taken).
pub fn struct_name(name: &str) -> String {
    let pascal: String = name
        .split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect();
    let taken =
        TAKEN_TYPE_NAMES.contains(&pascal.as_str()) || pascal.chars().next().is_some_and(|c| c.is_ascii_digit());
    if taken { pascal + "Operator" } else { pascal }
}

/// The templates, compiled in: (name, text).
const TEMPLATES: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("../templates/Cargo.toml.hbs")),
    ("ACP.md", include_str!("../templates/ACP.md.hbs")),
    ("OPERATOR.md", include_str!("../templates/OPERATOR.md.hbs")),
    ("GOVERNANCE.md", include_str!("../templates/GOVERNANCE.md.hbs")),
    ("SANDBOX.md", include_str!("../templates/SANDBOX.md.hbs")),
    ("policies/reads.md", include_str!("../templates/policies/reads.md.hbs")),
    ("README.md", include_str!("../templates/README.md.hbs")),
    ("gitignore", include_str!("../templates/gitignore.hbs")),
    ("server/lib.rs", include_str!("../templates/server/lib.rs.hbs")),
    ("server/main.rs", include_str!("../templates/server/main.rs.hbs")),
    ("server/smoke.rs", include_str!("../templates/server/smoke.rs.hbs")),
    ("client/lib.rs", include_str!("../templates/client/lib.rs.hbs")),
    ("client/main.rs", include_str!("../templates/client/main.rs.hbs")),
    ("client/smoke.rs", include_str!("../templates/client/smoke.rs.hbs")),
    ("bridge/lib.rs", include_str!("../templates/bridge/lib.rs.hbs")),
    ("bridge/main.rs", include_str!("../templates/bridge/main.rs.hbs")),
    ("bridge/smoke.rs", include_str!("../templates/bridge/smoke.rs.hbs")),
];

/// The `acp_rev` written into new manifests: an 8-digit prefix of the default revision.
pub fn default_acp_rev() -> &'static str {
    &revisions::DEFAULT.sha[..8]
}

/// What was generated.
#[derive(Debug, Clone)]
pub struct Scaffolded {
    /// The new crate's folder.
    pub root: PathBuf,
    /// The files written, relative to `root`, in order.
    pub files: Vec<PathBuf>,
    /// The crate's kind.
    pub kind: Kind,
    /// The `agentacp` dependency written to its `Cargo.toml` (the TOML value).
    pub agentacp_dependency: String,
}

/// The `agentacp` folder of the checkout this `scaffold-aip` was built from, if that checkout
/// is still there: what `scaffold-aip new` depends on by path without `--agentacp-path`. An
/// installed release (built from crates.io's package) finds none and uses the published crate.
pub fn checkout_agentacp() -> Option<PathBuf> {
    checkout_agentacp_of(std::path::Path::new(env!("CARGO_MANIFEST_DIR")))
}

/// The `agentacp` folder beside `package_dir` (a `scaffold-aip` package folder) when both are
/// members of an agentacp workspace: the root's `Cargo.toml` is a workspace and
/// `agentacp/Cargo.toml` is the `agentacp` package.
pub fn checkout_agentacp_of(package_dir: &std::path::Path) -> Option<PathBuf> {
    let root = package_dir.parent()?;
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).ok()?;
    let agentacp = root.join("agentacp");
    let package = std::fs::read_to_string(agentacp.join("Cargo.toml")).ok()?;
    let is_agentacp = package.lines().any(|line| line.trim() == r#"name = "agentacp""#);
    (workspace.lines().any(|line| line.trim() == "[workspace]") && is_agentacp).then_some(agentacp)
}

/// Generates the crate `options.dir/options.name`; refuses to touch an existing folder.
pub fn new_crate(options: &Options) -> Result<Scaffolded, ScaffoldError> {
    let root = new_root(options)?;
    let agentacp_dep = agentacp_dependency(options)?;
    let workspace_mount = sandbox_mount(options)?;
    let data = template_data(options, &agentacp_dep, &workspace_mount);
    let rendered = render(&plan(options.kind, options.tier), &data)?;
    write_crate(options, &root, &rendered)?;
    Ok(Scaffolded {
        root,
        files: rendered.into_iter().map(|(path, _)| path).collect(),
        kind: options.kind,
        agentacp_dependency: agentacp_dep,
    })
}

/// Whether the new crate offers WebSocket.
fn offers_websocket(options: &Options) -> bool {
    options.transports.contains(&Transport::Websocket)
}

/// The new crate's folder, after checking its name, that its transports fit its kind, and
/// that nothing is there yet.
fn new_root(options: &Options) -> Result<PathBuf, ScaffoldError> {
    validate_name(&options.name)?;
    if offers_websocket(options) && options.kind != Kind::Server {
        return Err(ScaffoldError::BadOptions(
            "--transport websocket is offered by servers only (it adds `authenticate` to the server trait)".into(),
        ));
    }
    let root = options.dir.join(&options.name);
    if root.symlink_metadata().is_ok() {
        return Err(ScaffoldError::Exists(root));
    }
    Ok(root)
}

/// The `agentacp` dependency of the new `Cargo.toml` (the TOML value): a path (made
/// absolute) or the release, with the features the crate needs.
fn agentacp_dependency(options: &Options) -> Result<String, ScaffoldError> {
    // A server that offers WebSocket serves it with agentacp's `websocket` feature; a
    // sandboxed server uses the session's MCP servers, and a sandboxed bridge offers the
    // editor's to its agent, with its `mcp` feature.
    let features: Vec<&str> = [
        (offers_websocket(options), "\"websocket\""),
        (
            options.kind != Kind::Client && options.tier == Tier::Sandboxed,
            "\"mcp\"",
        ),
    ]
    .into_iter()
    .filter_map(|(wanted, feature)| wanted.then_some(feature))
    .collect();
    let dep = match &options.agentacp_path {
        Some(path) => {
            let absolute = std::path::absolute(path).map_err(|error| ScaffoldError::Io(path.clone(), error))?;
            let text = absolute.to_string_lossy().replace('\\', "/");
            format!("{{ path = {} }}", serde_json::to_string(&text).unwrap_or_default())
        }
        None if !features.is_empty() => format!("{{ version = {} }}", dependency("agentacp")),
        None => dependency("agentacp").to_string(),
    };
    if features.is_empty() {
        return Ok(dep);
    }
    Ok(dep.replacen(" }", &format!(", features = [{}] }}", features.join(", ")), 1))
}

/// The workspace mount the templates get: [`workspace_mount`] at tier sandboxed, else
/// nothing (and `--workspace-root` is refused).
fn sandbox_mount(options: &Options) -> Result<String, ScaffoldError> {
    match options.tier {
        Tier::Sandboxed => workspace_mount(options),
        _ if options.workspace_root.is_some() => Err(ScaffoldError::BadOptions(
            "--workspace-root names the folder SANDBOX.md mounts: it is for --tier sandboxed only".into(),
        )),
        _ => Ok(String::new()),
    }
}

/// Whether the new operator declares `fs.readTextFile`: clients and bridges from tier
/// governance-aware on (it is beyond tier basic, ACP208).
fn declares_read(kind: Kind, tier: Tier) -> bool {
    kind != Kind::Server && tier != Tier::Basic
}

/// The new operator's `description`, its README's summary and its role, in words.
fn descriptions(kind: Kind, tier: Tier) -> (String, String, &'static str) {
    let reading = |text: &'static str| if declares_read(kind, tier) { text } else { "" };
    let governed_reads = match tier {
        Tier::Basic => "",
        _ => " and reads files through a governed tool call on `/read PATH`",
    };
    let tier = tier.as_str();
    match kind {
        Kind::Server => (
            format!("An AIP-44 ACP server at tier {tier} that echoes each prompt back."),
            format!("An ACP server (`kind: server`, tier `{tier}`) that echoes each prompt back{governed_reads}."),
            "Echo every prompt back to the user.",
        ),
        Kind::Client => (
            format!("An AIP-44 ACP client at tier {tier} that sends an agent one prompt and prints the answer."),
            format!(
                "An ACP client (`kind: client`, tier `{tier}`): it starts an agent, sends it one prompt and \
                 prints the answer{}.",
                reading(", letting the agent read files in the current folder")
            ),
            "Drive an agent with one prompt and show its answer.",
        ),
        Kind::Bridge => (
            format!("An AIP-44 ACP bridge at tier {tier} between an editor and an agent."),
            format!(
                "An ACP bridge (`kind: bridge`, tier `{tier}`): the editor talks to it as to an agent; it starts \
                 the agent named on its command line and relays the session{}.",
                reading(", letting the agent read files through the editor")
            ),
            "Relay a session between an editor and an agent.",
        ),
    }
}

/// The documents the new manifest refers to, as a phrase (`A, B and C`).
fn refs_text(kind: Kind, tier: Tier) -> String {
    let governed = tier != Tier::Basic;
    let refs = [
        (kind == Kind::Server || governed, "`OPERATOR.md` (AIP-9)"),
        (governed, "`GOVERNANCE.md` (AIP-7)"),
        (tier == Tier::Sandboxed, "`SANDBOX.md` (AIP-36)"),
    ];
    let refs: Vec<&str> = refs.iter().filter(|(on, _)| *on).map(|(_, text)| *text).collect();
    match refs.as_slice() {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// What the templates are rendered with.
fn template_data(options: &Options, agentacp_dep: &str, workspace_mount: &str) -> serde_json::Value {
    let (kind, tier) = (options.kind, options.tier);
    let governed = tier != Tier::Basic;
    let websocket = offers_websocket(options);
    let (description, summary, role) = descriptions(kind, tier);
    json!({
        "name": options.name,
        "crate_name": options.name.replace('-', "_"),
        "struct_name": struct_name(&options.name),
        "kind": kind.as_str(),
        "tier": tier.as_str(),
        "tier_type": tier.type_name(),
        "is_server": kind == Kind::Server,
        "is_client": kind == Kind::Client,
        "is_bridge": kind == Kind::Bridge,
        "governed": governed,
        "sandboxed": tier == Tier::Sandboxed,
        "sandboxed_server": kind == Kind::Server && tier == Tier::Sandboxed,
        "workspace_mount": workspace_mount,
        "needs_operator": kind == Kind::Server || governed,
        "declares_read": declares_read(kind, tier),
        "refs_text": refs_text(kind, tier),
        "websocket": websocket,
        "transport_yaml": if websocket { "[stdio, websocket]" } else { "stdio" },
        "acp_rev": default_acp_rev(),
        "agentacp_dep": agentacp_dep,
        "tokio_dep": dependency("tokio"),
        "description": description,
        "summary": summary,
        "role": role,
    })
}

/// The files of the new crate, in order: (path in the crate, template).
fn plan(kind: Kind, tier: Tier) -> Vec<(&'static str, String)> {
    let governed = tier != Tier::Basic;
    let k = kind.as_str();
    let mut plan: Vec<(&str, String)> = vec![("Cargo.toml", "Cargo.toml".into()), ("ACP.md", "ACP.md".into())];
    if kind == Kind::Server || governed {
        plan.push(("OPERATOR.md", "OPERATOR.md".into()));
    }
    if governed {
        plan.push(("GOVERNANCE.md", "GOVERNANCE.md".into()));
        plan.push(("policies/reads.md", "policies/reads.md".into()));
    }
    if tier == Tier::Sandboxed {
        plan.push(("SANDBOX.md", "SANDBOX.md".into()));
    }
    plan.push(("README.md", "README.md".into()));
    plan.push((".gitignore", "gitignore".into()));
    plan.push(("src/lib.rs", format!("{k}/lib.rs")));
    plan.push(("src/main.rs", format!("{k}/main.rs")));
    plan.push(("tests/smoke.rs", format!("{k}/smoke.rs")));
    plan
}

/// Each file of `plan` rendered with `data`: (path in the crate, text).
fn render(plan: &[(&str, String)], data: &serde_json::Value) -> Result<Vec<(PathBuf, String)>, ScaffoldError> {
    let mut registry = Handlebars::new();
    registry.set_strict_mode(true);
    registry.register_escape_fn(handlebars::no_escape);
    for (name, text) in TEMPLATES {
        registry
            .register_template_string(name, *text)
            .map_err(|error| ScaffoldError::Template(format!("{name}: {error}")))?;
    }
    plan.iter()
        .map(|(path, template)| {
            let text = registry
                .render(template, data)
                .map_err(|error| ScaffoldError::Template(format!("{template}: {error}")))?;
            Ok((PathBuf::from(path), text))
        })
        .collect()
}

/// Writes the `rendered` files as the folder `root`, all at once: the crate is made in a
/// temporary folder beside its place and renamed there, never over a folder that exists (one
/// that appeared meanwhile included), so a crash leaves no half-made crate.
fn write_crate(options: &Options, root: &std::path::Path, rendered: &[(PathBuf, String)]) -> Result<(), ScaffoldError> {
    std::fs::create_dir_all(&options.dir).map_err(|error| ScaffoldError::Io(options.dir.clone(), error))?;
    crate::atomic::create_folder(root, rendered).map_err(|error| match error.kind() {
        std::io::ErrorKind::AlreadyExists if root.exists() => ScaffoldError::Exists(root.to_path_buf()),
        _ => ScaffoldError::Io(root.to_path_buf(), error),
    })
}

/// The folder SANDBOX.md mounts as the workspace, as YAML: [`Options::workspace_root`] (else
/// [`Options::dir`]), absolute and canonical, so that the scaffold works on the machine it is
/// made on (a fixed `/workspace` refused every session where there is none). An error when it
/// is not a folder here, or when it is the file system's root.
fn workspace_mount(options: &Options) -> Result<String, ScaffoldError> {
    let folder = options.workspace_root.as_ref().unwrap_or(&options.dir);
    let bad = |why: String| {
        ScaffoldError::BadOptions(format!(
            "the sandbox's workspace mount (--workspace-root) `{}` {why}",
            folder.display()
        ))
    };
    let canonical = match &options.workspace_root {
        Some(folder) => folder.canonicalize(),
        // The folder the crate is made in: made with it when it does not exist yet.
        None => folder.canonicalize().or_else(|_| std::path::absolute(folder)),
    }
    .map_err(|error| bad(format!("cannot be used: {error}")))?;
    if canonical.exists() && !canonical.is_dir() {
        return Err(bad("is not a folder".into()));
    }
    if canonical.parent().is_none() {
        return Err(bad(
            "is the whole file system: name the folder your projects are in".into()
        ));
    }
    let text = canonical
        .to_str()
        .ok_or_else(|| bad("is not UTF-8, which a manifest cannot hold".into()))?;
    Ok(serde_json::to_string(text).unwrap_or_default())
}

/// The `new` command's report: the files written and what to do next.
pub fn report(scaffolded: &Scaffolded) -> String {
    let root = scaffolded.root.strip_prefix(".").unwrap_or(&scaffolded.root);
    let mut text = format!("created {}\n", root.display());
    for file in &scaffolded.files {
        text += &format!("  {}\n", root.join(file).display());
    }
    let run = match scaffolded.kind {
        Kind::Server => "cargo run",
        Kind::Client | Kind::Bridge => "cargo run -- AGENT [ARGS...]",
    };
    let root = root.display();
    text += &format!("next:\n  cd {root} && {run}\n  scaffold-aip lint {root}\n");
    text
}
