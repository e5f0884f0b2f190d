//! `scaffold-aip token`: bearer tokens for ACP servers reached over WebSocket (issue #17).
//!
//! `new` (or `issue`) makes a token and adds its hash to a token file, `rotate` replaces an
//! identity's tokens by a new one, `hash` prints a token's hash, `revoke` removes an identity's
//! entries, and `list` shows them. With `--database URL` instead of `--file PATH` the same
//! commands change the tokens a fleet of servers keeps in PostgreSQL (module `database`; feature
//! `postgres`). A token file holds one entry a line,
//! `<identity> sha256:<64 lowercase hex>`, the format `agentacp::auth::TokenStore` reads (both
//! use `acp-tokens`). `new --file` and `revoke` hold the file's lock (`<file>.lock`) from
//! reading the file to replacing it by a rename, so concurrent commands never undo each other
//! and a server never reads half a file.

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use acp_tokens::file as token_file;

mod database;

use crate::atomic;
use crate::exit::{EXIT_OK, EXIT_USAGE};

/// Arguments of `token`.
#[derive(Debug, clap::Args)]
pub struct TokenArgs {
    /// The `token` command.
    #[command(subcommand)]
    pub command: TokenCommand,
}

/// A `token` command.
#[derive(Debug, clap::Subcommand)]
pub enum TokenCommand {
    /// Generate a token: print it once on stdout, and add its hash to a token file or the
    /// database (or print the line to add on stderr).
    #[command(visible_alias = "issue")]
    New(NewTokenArgs),
    /// A new token for an identity, replacing its tokens (`new --replace`).
    Rotate(RotateArgs),
    /// Read one token from stdin and print its hash (`sha256:<hex>`).
    Hash,
    /// Remove an identity's tokens from a token file, or revoke them in the database.
    Revoke(RevokeArgs),
    /// Show the tokens of a token file or the database (identities and hashes).
    List(ListArgs),
}

/// Where the tokens are: a token file or a database (one of the two).
#[derive(Debug, clap::Args)]
#[group(id = "store", multiple = false)]
pub struct StoreArgs {
    /// The token file (`<identity> sha256:<hex>` lines; created with mode 0600).
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
    /// The PostgreSQL database of a fleet of servers (`postgres://user@host/db`; the schema is
    /// applied first). A revocation reaches every server that listens. Without a URL, the one
    /// in `AGENTACP_DATABASE_URL` (which keeps its password out of the process list).
    #[arg(long, value_name = "URL", num_args = 0..=1)]
    pub database: Option<Option<String>>,
}

/// Where a command that needs the tokens finds them.
enum Store<'a> {
    File(&'a Path),
    /// The database's URL, from the command line or `AGENTACP_DATABASE_URL`.
    Database(String),
}

impl StoreArgs {
    /// The store given, if any (a bare `--database` reads its URL from the environment; a
    /// password on the command line is warned about on `err`).
    fn given(&self, err: &mut dyn Write) -> Result<Option<Store<'_>>, Failure> {
        match (&self.file, &self.database) {
            (Some(path), _) => Ok(Some(Store::File(path))),
            (None, Some(given)) => crate::database_url::resolve(given.as_deref(), "scaffold-aip token", err)
                .map(|url| Some(Store::Database(url)))
                .map_err(Failure::Usage),
            (None, None) => Ok(None),
        }
    }

    /// The store given, or an error saying to give one.
    fn required(&self, err: &mut dyn Write) -> Result<Store<'_>, Failure> {
        self.given(err)?.ok_or_else(missing_store)
    }

    /// Whether `--file` or `--database` was given.
    fn is_given(&self) -> bool {
        self.file.is_some() || self.database.is_some()
    }
}

/// The error of a command given neither `--file` nor `--database`.
fn missing_store() -> Failure {
    Failure::Usage("give the tokens' place: --file PATH or --database [URL]".to_string())
}

/// Arguments of `token new`.
#[derive(Debug, clap::Args)]
pub struct NewTokenArgs {
    /// Who connections presenting the token act as: letters, digits and `-_.@:` (1 to 128).
    #[arg(long)]
    pub identity: String,
    /// Where to add the token.
    #[command(flatten)]
    pub store: StoreArgs,
    /// Replace the identity's tokens instead of refusing a second one (rotation).
    #[arg(long, requires = "store", conflicts_with = "add")]
    pub replace: bool,
    /// Add a token beside the identity's others (an overlapping rotation: revoke the old one
    /// once its clients use the new one).
    #[arg(long, requires = "store")]
    pub add: bool,
}

/// Arguments of `token rotate`.
#[derive(Debug, clap::Args)]
pub struct RotateArgs {
    /// The identity whose tokens are replaced by a new one.
    #[arg(long)]
    pub identity: String,
    /// Where the tokens are.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Arguments of `token list`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// Where the tokens are.
    #[command(flatten)]
    pub store: StoreArgs,
    /// With `--database`: the revoked tokens too.
    #[arg(long)]
    pub all: bool,
}

/// Arguments of `token revoke`.
#[derive(Debug, clap::Args)]
pub struct RevokeArgs {
    /// The identity whose tokens are removed.
    #[arg(long)]
    pub identity: String,
    /// Where the tokens are.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Runs a `token` command; `stdin` is read by `token hash` only.
pub fn run(args: &TokenArgs, stdin: &mut dyn Read, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<i32> {
    let result = match &args.command {
        TokenCommand::New(args) => run_new(&args.identity, &args.store, others_of(args), out, err),
        TokenCommand::Rotate(args) if !args.store.is_given() => Err(missing_store()),
        TokenCommand::Rotate(args) => run_new(&args.identity, &args.store, Others::Revoke, out, err),
        TokenCommand::Hash => run_hash(stdin, out),
        TokenCommand::Revoke(args) => run_revoke(args, err),
        TokenCommand::List(args) => run_list(args, out, err),
    };
    match result {
        Ok(()) => Ok(EXIT_OK),
        Err(Failure::Io(error)) => Err(error),
        Err(Failure::Usage(message)) => {
            writeln!(err, "scaffold-aip token: {message}")?;
            Ok(EXIT_USAGE)
        }
    }
}

/// Why a `token` command failed.
enum Failure {
    /// Writing the command's own output failed.
    Io(io::Error),
    /// Bad arguments, input or token file; the message says which.
    Usage(String),
}

impl From<io::Error> for Failure {
    fn from(error: io::Error) -> Self {
        Failure::Io(error)
    }
}

/// What `token new`'s flags ask for the identity's other tokens.
fn others_of(args: &NewTokenArgs) -> Others {
    match (args.replace, args.add) {
        (true, _) => Others::Revoke,
        (false, true) => Others::Keep,
        (false, false) => Others::Refuse,
    }
}

/// A new token for `identity`, added where `store` says (its other tokens kept, revoked or a
/// reason to refuse, as `others` says), printed once on stdout.
fn run_new(
    identity: &str,
    store: &StoreArgs,
    others: Others,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), Failure> {
    check_identity(identity).map_err(|error| Failure::Usage(format!("`{identity}` is not an identity: {error}")))?;
    let token = generate_token().map_err(|error| Failure::Usage(format!("cannot generate a token: {error}")))?;
    let line = format!("{identity} {}", hash_token(&token));
    let added = match store.given(err)? {
        Some(Store::File(path)) => {
            add_entry(path, identity, &line, others).map_err(Failure::Usage)?;
            Some(path.display().to_string())
        }
        Some(Store::Database(url)) => {
            let (shown, revoked) = database::issue(&url, identity, &token, others).map_err(Failure::Usage)?;
            if revoked > 0 {
                writeln!(
                    err,
                    "scaffold-aip token: revoked {} of `{identity}`",
                    tokens_noun(revoked)
                )?;
            }
            Some(format!("the database at {shown}"))
        }
        None => None,
    };
    writeln!(out, "{token}")?;
    writeln!(
        err,
        "scaffold-aip token: this is the only time the token is shown: store it now; only its hash is kept"
    )?;
    match added {
        Some(place) => writeln!(err, "scaffold-aip token: `{identity}` added to {place}")?,
        None => writeln!(err, "add this line to the token file:\n{line}")?,
    }
    if let Some(path) = &store.file {
        warn_if_shared(path, err)?;
    }
    Ok(())
}

/// `1 token`, `2 tokens`.
fn tokens_noun(count: u64) -> String {
    format!("{count} {}", if count == 1 { "token" } else { "tokens" })
}

fn run_list(args: &ListArgs, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), Failure> {
    match args.store.required(err)? {
        Store::File(path) => {
            let text = read_text(&followed(path))
                .map_err(Failure::Usage)?
                .ok_or_else(|| Failure::Usage(format!("{}: no such file", path.display())))?;
            for (number, line) in text.lines().enumerate() {
                let entry = acp_tokens::parse_line(line)
                    .map_err(|error| Failure::Usage(format!("{}:{}: {error}", path.display(), number + 1)))?;
                if let Some((identity, _)) = entry {
                    writeln!(out, "{identity} {}", line.split_whitespace().nth(1).unwrap_or_default())?;
                }
            }
        }
        Store::Database(url) => {
            for line in database::list(&url, args.all).map_err(Failure::Usage)? {
                writeln!(out, "{line}")?;
            }
        }
    }
    Ok(())
}

/// Warns on `err` when the token file `path` may be read or written by its group or others
/// (the server accepts it, with the same warning).
fn warn_if_shared(path: &Path, err: &mut dyn Write) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(metadata) = std::fs::metadata(path) {
            let mode = metadata.permissions().mode() & 0o777;
            if mode & 0o066 != 0 {
                writeln!(
                    err,
                    "scaffold-aip token: warning: {} (mode {mode:o}) may be read or written by other users; `chmod 600` it",
                    path.display()
                )?;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = (path, err);
    Ok(())
}

fn run_hash(stdin: &mut dyn Read, out: &mut dyn Write) -> Result<(), Failure> {
    let mut text = String::new();
    stdin
        .take(64 * 1024)
        .read_to_string(&mut text)
        .map_err(|error| Failure::Usage(format!("cannot read the token from stdin: {error}")))?;
    let token = text.strip_suffix('\n').unwrap_or(&text);
    let token = token.strip_suffix('\r').unwrap_or(token);
    if token.is_empty() {
        return Err(Failure::Usage("no token on stdin".to_string()));
    }
    if token.contains('\n') {
        return Err(Failure::Usage(
            "stdin holds more than one line; give one token".to_string(),
        ));
    }
    writeln!(out, "{}", hash_token(token))?;
    Ok(())
}

fn run_revoke(args: &RevokeArgs, err: &mut dyn Write) -> Result<(), Failure> {
    let path = match args.store.required(err)? {
        Store::File(path) => path,
        Store::Database(url) => {
            let (shown, revoked) = database::revoke(&url, &args.identity).map_err(Failure::Usage)?;
            writeln!(
                err,
                "scaffold-aip token: revoked {} of `{}` in the database at {shown}; every server listening to it refuses them now",
                tokens_noun(revoked),
                args.identity
            )?;
            return Ok(());
        }
    };
    let path = &followed(path);
    let missing = || Failure::Usage(format!("{}: no such file", path.display()));
    if !path.try_exists().unwrap_or(true) {
        return Err(missing()); // before the lock, which would leave a lock file for nothing
    }
    let _lock = token_file::lock(path).map_err(Failure::Usage)?;
    let text = read_text(path).map_err(Failure::Usage)?.ok_or_else(missing)?;
    let (kept, removed) = without_identity(&text, &args.identity);
    if removed == 0 {
        return Err(Failure::Usage(format!(
            "{}: no token for `{}`",
            path.display(),
            args.identity
        )));
    }
    atomic::write_file(path, kept.as_bytes())
        .map_err(|error| Failure::Usage(format!("{}: {error}", path.display())))?;
    writeln!(
        err,
        "scaffold-aip token: removed {} of `{}` from {}",
        tokens_noun(removed as u64),
        args.identity,
        path.display()
    )?;
    warn_if_shared(path, err)?;
    Ok(())
}

/// The text of the token file `path`, `None` when it does not exist (a regular file of at most
/// 1 MiB: see [`token_file::read`]).
fn read_text(path: &Path) -> Result<Option<String>, String> {
    let Some(bytes) = token_file::read(path)? else {
        return Ok(None);
    };
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| format!("{}: not UTF-8 text", path.display()))
}

/// The file a symbolic link `path` points to, also one not made yet (so that replacing the
/// token file by a rename changes that file, not the link), or `path` itself.
fn followed(path: &Path) -> PathBuf {
    let mut path = path.to_path_buf();
    // As many links as Linux follows (SYMLOOP_MAX); past that the open fails anyway.
    for _ in 0..40 {
        match std::fs::read_link(&path) {
            // A relative target is relative to the link's folder; an absolute one replaces it.
            Ok(target) => path = path.parent().unwrap_or(Path::new("")).join(target),
            Err(_) => break,
        }
    }
    path
}

/// The identity an entry line is for: its first field, unless the line is blank or a comment.
fn line_identity(line: &str) -> Option<&str> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    line.split_whitespace().next()
}

/// `text` without the entries of `identity` (comments and other lines kept as they are), and
/// how many were removed.
fn without_identity(text: &str, identity: &str) -> (String, usize) {
    let mut kept = String::with_capacity(text.len());
    let mut removed = 0;
    for line in text.split_inclusive('\n') {
        if line_identity(line) == Some(identity) {
            removed += 1;
        } else {
            kept.push_str(line);
        }
    }
    (kept, removed)
}

/// Adds `line` (the entry of `identity`) to the token file `path`, created with mode 0600 if
/// new. An identity already in the file is refused, or its entries are kept (`--add`) or
/// removed first (rotation), as `others` says. The file is locked from reading to writing, and
/// replaced whole by a rename: a concurrent `token` command waits, and a server reading it
/// sees the old or the new version, never a part.
fn add_entry(path: &Path, identity: &str, line: &str, others: Others) -> Result<(), String> {
    let path = &followed(path);
    let _lock = token_file::lock(path)?;
    let text = read_text(path)?.unwrap_or_default();
    let (without, removed) = without_identity(&text, identity);
    if removed > 0 && others == Others::Refuse {
        return Err(format!(
            "{}: `{identity}` already has a token; pass --replace to rotate it, --add to give it another, or `token revoke` first",
            path.display()
        ));
    }
    let mut new_text = if others == Others::Keep { text } else { without };
    if !new_text.is_empty() && !new_text.ends_with('\n') {
        new_text.push('\n');
    }
    new_text.push_str(line);
    new_text.push('\n');
    atomic::write_file(path, new_text.as_bytes()).map_err(|error| format!("{}: {error}", path.display()))
}

pub use acp_tokens::{Others, check_identity, generate_token, hash_token};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revoking_keeps_comments_and_other_identities() {
        let text = "# team\nalice sha256:aa\nbob sha256:bb\n  alice sha256:cc\nalice-2 sha256:dd";
        let (kept, removed) = without_identity(text, "alice");
        assert_eq!(removed, 2);
        assert_eq!(kept, "# team\nbob sha256:bb\nalice-2 sha256:dd");
    }

    #[test]
    fn hash_reads_one_line() {
        let mut out = Vec::new();
        assert!(run_hash(&mut "abc\n".as_bytes(), &mut out).is_ok());
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n"
        );
        for bad in ["", "\n", "a\nb\n"] {
            assert!(run_hash(&mut bad.as_bytes(), &mut Vec::new()).is_err(), "{bad:?}");
        }
    }
}
