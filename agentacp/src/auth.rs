//! Bearer tokens for remote connections (issue #17): the [`Identity`](crate::auth::Identity) a connection acts as,
//! the [`TokenStore`](crate::auth::TokenStore) of accepted tokens (kept only as SHA-256 hashes), and the helpers
//! `scaffold-aip token` mirrors ([`hash_token`](crate::auth::hash_token), [`generate_token`](crate::auth::generate_token)).
//!
//! A token file holds one entry a line, `<identity> sha256:<64 lowercase hex>`; blank lines
//! and lines starting with `#` are ignored. The server re-reads it when its modification time,
//! length or identity changes, so tokens rotate without a restart. Only a regular file of at most
//! 1 MiB is read ([`acp_tokens::file::read`]); `scaffold-aip token` replaces the file by a
//! rename, so a re-read sees a whole version, never a part.
//!
//! With feature `postgres`, the tokens may live in PostgreSQL instead (`AGENTACP_TOKENS=database`,
//! `TokenStore::from_database`), so that a revocation holds on every replica of a fleet: a new
//! connection's token is looked up in the database ([`TokenStore::check`](crate::auth::TokenStore::check); refused, never
//! admitted, when the database cannot be reached), and a live connection's is checked against
//! the revocations the replica learns by `LISTEN`/`NOTIFY` and by polling.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use acp_tokens::digest;
use subtle::{ConditionallySelectable, ConstantTimeEq};

#[cfg(feature = "postgres")]
mod database;
mod identity;

pub use identity::{Identity, Unchecked};

/// The id of the one authentication method remote servers offer: a bearer token
/// (`Authorization: Bearer` on the WebSocket upgrade, or `_meta.agentacp.token` of
/// `authenticate`).
pub const BEARER: &str = "bearer";

/// The environment variable holding one plain token.
pub const TOKEN_VAR: &str = "AGENTACP_TOKEN";
/// The environment variable naming the identity of [`TOKEN_VAR`]'s token (default `token`).
pub const TOKEN_IDENTITY_VAR: &str = "AGENTACP_TOKEN_IDENTITY";
/// The environment variable naming a token file.
pub const TOKENS_FILE_VAR: &str = "AGENTACP_TOKENS_FILE";
/// The environment variable choosing where tokens live: `file` (the default: the token file
/// [`TOKENS_FILE_VAR`] names, if any) or `database` (PostgreSQL at `AGENTACP_DATABASE_URL`;
/// feature `postgres`).
pub const TOKENS_VAR: &str = "AGENTACP_TOKENS";
/// The environment variable setting how often (milliseconds, at least 100; default 5000) a
/// server whose tokens live in the database reads the revocations again when no notification
/// came.
pub const TOKENS_POLL_VAR: &str = "AGENTACP_TOKENS_POLL_MS";

/// One accepted token: its identity and the SHA-256 of the token.
#[derive(Clone)]
struct Entry {
    identity: Identity,
    hash: [u8; 32],
}

/// What identifies one version of a token file: its modification time, its length, and its
/// identity (device and inode on Unix, volume serial and file index on Windows), which a file
/// replaced by a rename (as `scaffold-aip token` writes it) changes even when the time and the
/// length stay the same.
type Stamp = (Option<SystemTime>, u64, acp_process::file::FileId);

/// The file a store reads, and what was read from it.
struct FileSource {
    path: PathBuf,
    state: Mutex<FileState>,
}

struct FileState {
    entries: Vec<Entry>,
    /// The stamp of the version last tried (read, or failed to read): a change re-reads it.
    /// `None` when the file could not even be looked at.
    stamp: Option<Stamp>,
}

/// The tokens a server accepts, each for one identity; kept only as SHA-256 hashes.
///
/// Cheap to share in an `Arc`. A store read from a file ([`TokenStore::from_file`],
/// `AGENTACP_TOKENS_FILE`) re-reads it when it changes (see [`TokenStore::verify`]).
pub struct TokenStore {
    /// Tokens given directly (`AGENTACP_TOKEN`, [`TokenStore::single`]).
    fixed: Vec<Entry>,
    file: Option<FileSource>,
    /// Tokens in PostgreSQL (`AGENTACP_TOKENS=database`).
    #[cfg(feature = "postgres")]
    database: Option<database::DatabaseSource>,
}

impl fmt::Debug for TokenStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the tokens' hashes: only how many there are and where they come from.
        f.debug_struct("TokenStore")
            .field("tokens", &self.count())
            .field("file", &self.file.as_ref().map(|file| &file.path))
            .field("database", &self.in_database())
            .finish()
    }
}

impl TokenStore {
    /// `AGENTACP_TOKEN` (one token; identity from `AGENTACP_TOKEN_IDENTITY`, default `token`)
    /// and/or `AGENTACP_TOKENS_FILE` (a token file), or with `AGENTACP_TOKENS=database` the
    /// tokens in the database `AGENTACP_DATABASE_URL` names (feature `postgres`; see
    /// `TokenStore::from_database`). `Ok(None)` when none is set (or all are empty).
    /// `Err(message)` for an unreadable or malformed file (the message names the file and
    /// line), an empty token (or one with leading or trailing whitespace), a bad identity,
    /// `AGENTACP_TOKEN_IDENTITY` without `AGENTACP_TOKEN`, a database that cannot be reached, or
    /// a token file and the database both.
    pub fn from_env() -> Result<Option<TokenStore>, String> {
        Self::from_vars(|name| std::env::var_os(name).map(|value| value.to_string_lossy().into_owned()))
    }

    /// [`TokenStore::from_env`] over `get`, which returns a variable's value when it is set.
    fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Option<TokenStore>, String> {
        let file = get(TOKENS_FILE_VAR).filter(|path| !path.is_empty());
        let token = get(TOKEN_VAR);
        let identity = get(TOKEN_IDENTITY_VAR).filter(|id| !id.is_empty());
        if token.is_none() && identity.is_some() {
            return Err(format!("{TOKEN_IDENTITY_VAR} is set but {TOKEN_VAR} is not"));
        }
        let in_database = match get(TOKENS_VAR).as_deref().map(str::trim) {
            None | Some("" | "file") => false,
            Some("database") => true,
            Some(other) => {
                return Err(format!(
                    "{TOKENS_VAR}: `{other}` is not where tokens can live: `file` (the default) or `database`"
                ));
            }
        };
        if in_database && file.is_some() {
            return Err(format!(
                "{TOKENS_VAR}=database and {TOKENS_FILE_VAR} are both set: tokens live in one place; unset one"
            ));
        }
        let mut store = match &file {
            Some(path) => TokenStore::from_file(Path::new(path))?,
            None if in_database => TokenStore::from_database_vars(&get)?,
            None if token.is_none() => return Ok(None),
            None => TokenStore::empty(),
        };
        if let Some(token) = token {
            if token.is_empty() {
                return Err(format!("{TOKEN_VAR} is set but empty"));
            }
            if token.trim() != token {
                return Err(format!("{TOKEN_VAR} has leading or trailing whitespace"));
            }
            let identity = Identity::new(identity.unwrap_or_else(|| "token".to_string()))
                .map_err(|error| format!("{TOKEN_IDENTITY_VAR}: {error}"))?;
            store.fixed.push(Entry {
                identity,
                hash: digest(&token),
            });
        }
        Ok(Some(store))
    }

    /// A store with no token yet.
    fn empty() -> TokenStore {
        TokenStore {
            fixed: Vec::new(),
            file: None,
            #[cfg(feature = "postgres")]
            database: None,
        }
    }

    /// One plain token for `identity` (hashed at once; the plain text is not kept). An empty
    /// token is kept too, but [`TokenStore::verify`] never accepts an empty token.
    pub fn single(identity: Identity, token: &str) -> TokenStore {
        TokenStore {
            fixed: vec![Entry {
                identity,
                hash: digest(token),
            }],
            ..TokenStore::empty()
        }
    }

    /// The tokens in `database` (feature `postgres`): its schema is applied (component
    /// `tokens`, table `agentacp_tokens`), its revocations read, and the replica listens for
    /// new ones (`agentacp_tokens`) and reads them all again every `poll` (at least 100 ms;
    /// `TokenStore::from_database` takes 5 s) in case a notification was lost. An error (a
    /// sentence naming the database, without its password) when it cannot be reached.
    #[cfg(feature = "postgres")]
    pub fn from_database_polled(
        database: acp_postgres::Database,
        poll: std::time::Duration,
    ) -> Result<TokenStore, String> {
        Ok(TokenStore {
            database: Some(database::DatabaseSource::open(database, poll)?),
            ..TokenStore::empty()
        })
    }

    /// [`TokenStore::from_database_polled`] every 5 s.
    #[cfg(feature = "postgres")]
    pub fn from_database(database: acp_postgres::Database) -> Result<TokenStore, String> {
        Self::from_database_polled(database, database::DEFAULT_POLL)
    }

    /// The store `AGENTACP_TOKENS=database` asks for: the database `AGENTACP_DATABASE_URL`
    /// names, polled every `AGENTACP_TOKENS_POLL_MS`.
    fn from_database_vars(get: &impl Fn(&str) -> Option<String>) -> Result<TokenStore, String> {
        let url = get(crate::database::DATABASE_URL_VARIABLE).filter(|url| !url.is_empty());
        let Some(url) = url else {
            return Err(format!(
                "{TOKENS_VAR}=database needs the database: set {}",
                crate::database::DATABASE_URL_VARIABLE
            ));
        };
        #[cfg(feature = "postgres")]
        {
            let poll =
                database::poll_period(get(TOKENS_POLL_VAR)).map_err(|why| format!("{TOKENS_POLL_VAR}: {why}"))?;
            let database = crate::database::open_database(Some(&url))
                .map_err(|error| error.to_string())?
                .ok_or_else(|| format!("{TOKENS_VAR}=database: the database could not be opened"))?;
            Self::from_database_polled(database, poll)
        }
        #[cfg(not(feature = "postgres"))]
        {
            let _ = url;
            Err(format!(
                "{TOKENS_VAR}=database, but this server was built without feature `postgres` of agentacp: build it with the feature, or keep the tokens in a file ({TOKENS_FILE_VAR})"
            ))
        }
    }

    /// Whether the tokens live in a database.
    fn in_database(&self) -> bool {
        #[cfg(feature = "postgres")]
        {
            self.database.is_some()
        }
        #[cfg(not(feature = "postgres"))]
        {
            false
        }
    }

    /// Reads a token file. Format: one entry a line, `<identity> sha256:<64 lowercase hex>`;
    /// blank lines and lines starting with `#` are ignored; anything else is an error naming
    /// `path:line`. A file that is group/world readable or writable is accepted, but a warning
    /// is logged.
    pub fn from_file(path: &Path) -> Result<TokenStore, String> {
        let stamp = stamp_of(path).map_err(|error| format!("{}: {error}", path.display()))?;
        let entries = read_file(path)?;
        warn_if_shared(path);
        if entries.is_empty() {
            tracing::warn!(file = %path.display(), "the token file holds no token: every connection is refused");
        }
        Ok(TokenStore {
            file: Some(FileSource {
                path: path.to_path_buf(),
                state: Mutex::new(FileState {
                    entries,
                    stamp: Some(stamp),
                }),
            }),
            ..TokenStore::empty()
        })
    }

    /// The identity whose token `presented` is, or `None`: [`TokenStore::check`], refusing
    /// (`None`) a token that cannot be checked.
    pub fn verify(&self, presented: &str) -> Option<Identity> {
        self.check(presented).unwrap_or(None)
    }

    /// The identity whose token `presented` is, `Ok(None)` when it is not accepted, or
    /// [`Unchecked`] when the tokens live in a database that cannot be reached: what a new
    /// connection's token is checked with. The entries of [`TokenStore::single`] and
    /// `AGENTACP_TOKEN`, and a token file's, are compared in constant time; then a database's are looked up (by the token's SHA-256) in the database itself, so
    /// a token issued or revoked on any replica counts at once.
    pub fn check(&self, presented: &str) -> Result<Option<Identity>, Unchecked> {
        if presented.is_empty() {
            return Ok(None);
        }
        if let Some(identity) = self.verify_entries(presented) {
            return Ok(Some(identity));
        }
        #[cfg(feature = "postgres")]
        if let Some(database) = &self.database {
            return database.check(digest(presented));
        }
        Ok(None)
    }

    /// Whether `token`, which proved `identity` (through [`TokenStore::check`]), still does:
    /// what a live connection's token is checked again with, at each request and while it is
    /// quiet. Without a round trip to a database: its tokens count until this replica learns
    /// that they were revoked (by a notification, or its poll).
    pub fn still_proves(&self, identity: &Identity, token: &str) -> bool {
        if let Some(found) = self.verify_entries(token) {
            return &found == identity;
        }
        #[cfg(feature = "postgres")]
        if let Some(database) = &self.database {
            return !token.is_empty() && database.still_in_force(identity, &digest(token));
        }
        false
    }

    /// Changes whenever this store learns that a token was revoked (tokens in a database:
    /// by a notification or its poll); `None` for the other stores, whose changes are seen at
    /// the next check.
    pub fn revocations(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        #[cfg(feature = "postgres")]
        if let Some(database) = &self.database {
            return Some(database.revocations());
        }
        None
    }

    /// How often the revocations are read again from the database when no notification came
    /// (`AGENTACP_TOKENS_POLL_MS`); `None` for the other stores.
    pub(crate) fn poll_period(&self) -> Option<std::time::Duration> {
        #[cfg(feature = "postgres")]
        if let Some(database) = &self.database {
            return Some(database.poll());
        }
        None
    }

    /// The identity of `presented` among the fixed tokens and the token file's. Its hash is
    /// compared against every entry in constant time, with no early exit. When the store
    /// came from a file, the file is first re-read if its modification time or length
    /// changed since the last read; a re-read that fails keeps the previous entries and
    /// logs a warning (once per version of the file).
    fn verify_entries(&self, presented: &str) -> Option<Identity> {
        let hash = digest(presented);
        let file_entries = self.file.as_ref().map(FileSource::current);
        let entries = self.fixed.iter().chain(file_entries.iter().flatten());
        let mut found = subtle::Choice::from(0);
        let mut index = 0u64;
        for (position, entry) in entries.clone().enumerate() {
            let equal = entry.hash.ct_eq(&hash);
            index.conditional_assign(&(position as u64), equal);
            found |= equal;
        }
        if presented.is_empty() || !bool::from(found) {
            return None;
        }
        entries
            .clone()
            .nth(usize::try_from(index).ok()?)
            .map(|entry| entry.identity.clone())
    }

    /// How many tokens are accepted (after re-reading a changed file); a database's tokens
    /// are not counted.
    pub fn len(&self) -> usize {
        self.fixed.len() + self.file.as_ref().map_or(0, |file| file.current().len())
    }

    /// Whether no token is accepted (after re-reading a changed file).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many tokens were accepted at the last read, without looking at the file.
    fn count(&self) -> usize {
        self.fixed.len()
            + self
                .file
                .as_ref()
                .map_or(0, |file| file.state.lock().map_or(0, |state| state.entries.len()))
    }
}

impl FileSource {
    /// The entries, re-read first if the file changed.
    fn current(&self) -> Vec<Entry> {
        let mut state = match self.state.lock() {
            Ok(state) => state,
            Err(poisoned) => poisoned.into_inner(),
        };
        let stamp = stamp_of(&self.path).ok();
        if stamp != state.stamp {
            let previous = state.stamp;
            state.stamp = stamp;
            match stamp {
                None => tracing::warn!(
                    file = %self.path.display(),
                    "cannot read the token file; keeping the tokens read before"
                ),
                Some(_) => match read_file(&self.path) {
                    Ok(entries) => {
                        if previous.is_some_and(|(_, length, _)| length > 0) || !entries.is_empty() {
                            tracing::info!(file = %self.path.display(), tokens = entries.len(), "token file re-read");
                        }
                        state.entries = entries;
                    }
                    Err(error) => {
                        tracing::warn!(%error, "cannot re-read the token file; keeping the tokens read before")
                    }
                },
            }
        }
        state.entries.clone()
    }
}

/// The modification time, length and identity of `path`.
fn stamp_of(path: &Path) -> std::io::Result<Stamp> {
    let metadata = std::fs::metadata(path)?;
    let identity = acp_process::file::identity_of_path(path)?;
    Ok((metadata.modified().ok(), metadata.len(), identity))
}

/// Logs a warning when `path` may be read or written by its group or others.
fn warn_if_shared(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(metadata) = std::fs::metadata(path) {
            let mode = metadata.permissions().mode();
            if mode & 0o066 != 0 {
                tracing::warn!(
                    file = %path.display(),
                    mode = format_args!("{:o}", mode & 0o777),
                    "the token file may be read or written by other users; `chmod 600` it"
                );
            }
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// Reads and parses a token file; errors name `path` (and `path:line`). Only a regular file of
/// at most [`acp_tokens::file::MAX_FILE_BYTES`] (1 MiB) is read, never blocking on a FIFO.
fn read_file(path: &Path) -> Result<Vec<Entry>, String> {
    let bytes = acp_tokens::file::read(path)?.ok_or_else(|| format!("{}: no such file", path.display()))?;
    let mut entries: Vec<Entry> = Vec::new();
    let mut hashes = std::collections::HashSet::new();
    for (number, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let at = || format!("{}:{}", path.display(), number + 1);
        let line = std::str::from_utf8(line).map_err(|_| format!("{}: not UTF-8 text", at()))?;
        let entry = parse_line(line).map_err(|error| format!("{}: {error}", at()))?;
        let Some(entry) = entry else { continue };
        if !hashes.insert(entry.hash) {
            return Err(format!("{}: the same token is listed twice", at()));
        }
        entries.push(entry);
    }
    Ok(entries)
}

/// One line of a token file: `None` for a blank line or a comment.
fn parse_line(line: &str) -> Result<Option<Entry>, String> {
    let Some((identity, hash)) = acp_tokens::parse_line(line)? else {
        return Ok(None);
    };
    Ok(Some(Entry {
        identity: Identity(identity.to_string()),
        hash,
    }))
}

pub use acp_tokens::{generate_token, hash_token};

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::time::Duration;

    fn id(text: &str) -> Identity {
        Identity::new(text).unwrap()
    }

    fn write(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
    }

    /// A folder with the token file `tokens` in it, holding `text`.
    fn token_file(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        write(&path, text);
        (dir, path)
    }

    /// Rewrites `path` and moves its modification time, so a re-read is due even when the
    /// length stays the same and the clock did not tick.
    fn rewrite(path: &Path, text: &str) {
        let before = std::fs::metadata(path).unwrap().modified().unwrap();
        write(path, text);
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(before + Duration::from_secs(5)).unwrap();
    }

    /// Review of #18 (session 25): a token file replaced by a rename (as `scaffold-aip token
    /// revoke` writes it) with the same length within one tick of the clock was not read
    /// again, so the token it revoked stayed in force. Its inode changed, and now counts.
    #[test]
    fn a_file_replaced_with_the_same_length_and_time_is_read_again() {
        let (dir, path) = token_file(&format!("alice {}\n", hash_token("token-a")));
        let store = TokenStore::from_file(&path).unwrap();
        assert_eq!(store.verify("token-a"), Some(id("alice")));
        let before = std::fs::metadata(&path).unwrap().modified().unwrap();
        let replacement = dir.path().join("tokens.new");
        write(&replacement, &format!("alice {}\n", hash_token("token-b")));
        let file = std::fs::File::options().write(true).open(&replacement).unwrap();
        file.set_modified(before).unwrap();
        std::fs::rename(&replacement, &path).unwrap();
        assert_eq!(store.verify("token-a"), None, "the revoked token is still accepted");
        assert_eq!(store.verify("token-b"), Some(id("alice")));
    }

    #[test]
    fn sha256_of_abc_is_the_published_test_vector() {
        assert_eq!(
            hash_token("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hash_token(""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn generated_tokens_are_distinct_prefixed_hex() {
        let a = generate_token().unwrap();
        let b = generate_token().unwrap();
        assert_ne!(a, b);
        for token in [&a, &b] {
            assert_eq!(token.len(), 68, "{token}");
            let hex = token.strip_prefix("acp_").unwrap();
            assert!(hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')), "{token}");
        }
    }

    #[test]
    fn identities_are_checked() {
        for good in ["alice", "ci-bot", "a.b_c@example.com", "svc:deploy", &"x".repeat(128)] {
            assert_eq!(Identity::new(good).unwrap().as_str(), good);
        }
        for bad in ["", "al ice", "alice\n", "ünï", "a/b", &"x".repeat(129)] {
            assert!(Identity::new(bad).is_err(), "{bad:?}");
        }
        assert_eq!(id("alice").to_string(), "alice");
    }

    #[test]
    fn verify_accepts_the_right_token_and_refuses_others() {
        let store = TokenStore::single(id("alice"), "s3cret");
        assert_eq!(store.verify("s3cret"), Some(id("alice")));
        assert_eq!(store.verify("s3cret "), None);
        assert_eq!(store.verify("S3cret"), None);
        assert_eq!(store.verify(""), None);
        assert_eq!(store.len(), 1);
        assert!(!store.is_empty());
        // An empty token is never accepted, even when it is the one configured.
        assert_eq!(TokenStore::single(id("x"), "").verify(""), None);
    }

    #[test]
    fn verify_finds_each_identity_among_many() {
        let (_dir, path) = token_file(&format!(
            "# tokens\n\nalice {}\n  bob   {}  \nci-bot {}\n",
            hash_token("a"),
            hash_token("b"),
            hash_token("c")
        ));
        let store = TokenStore::from_file(&path).unwrap();
        assert_eq!(store.len(), 3);
        assert_eq!(store.verify("a"), Some(id("alice")));
        assert_eq!(store.verify("b"), Some(id("bob")));
        assert_eq!(store.verify("c"), Some(id("ci-bot")));
        assert_eq!(store.verify("d"), None);
    }

    #[test]
    fn debug_shows_neither_tokens_nor_hashes() {
        let store = TokenStore::single(id("alice"), "s3cret");
        let text = format!("{store:?}");
        let hex = hash_token("s3cret");
        assert!(!text.contains("s3cret") && !text.contains(&hex[7..15]), "{text}");
        assert!(text.contains("tokens: 1"), "{text}");
    }

    #[test]
    fn malformed_lines_are_errors_naming_path_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        let good = format!("alice {}\n", hash_token("a"));
        let upper = hash_token("b").to_uppercase().replace("SHA256", "sha256");
        for (bad, why) in [
            ("alice".to_string(), "expected"),
            (format!("alice {} extra", hash_token("b")), "expected"),
            ("bob sha256:abc".to_string(), "64 lowercase hex"),
            (format!("bob {}", &hash_token("b")[7..]), "starts with `sha256:`"),
            (upper, "64 lowercase hex"),
            (
                format!(
                    "bob sha256:{}",
                    hash_token("b")[7..].replace(|c: char| c.is_ascii_digit(), "g")
                ),
                "hex",
            ),
            (format!("b/ob {}", hash_token("b")), "identity"),
            (format!("bob {}", hash_token("a")), "twice"),
        ] {
            write(&path, &format!("# comment\n{good}\n{bad}\n"));
            let error = TokenStore::from_file(&path).unwrap_err();
            let at = format!("{}:4: ", path.display());
            assert!(error.starts_with(&at), "{bad}: {error}");
            assert!(error.contains(why), "{bad}: {error}");
        }
        let missing = dir.path().join("missing");
        let error = TokenStore::from_file(&missing).unwrap_err();
        assert!(error.contains(&missing.display().to_string()), "{error}");
    }

    #[test]
    fn a_changed_file_is_re_read() {
        let (_dir, path) = token_file(&format!("alice {}\nbob {}\n", hash_token("old"), hash_token("b")));
        let store = TokenStore::from_file(&path).unwrap();
        assert_eq!(store.verify("old"), Some(id("alice")));
        // The same length (a token of the same length): only the modification time moves.
        rewrite(
            &path,
            &format!("alice {}\nbob {}\n", hash_token("new"), hash_token("b")),
        );
        assert_eq!(store.verify("new"), Some(id("alice")));
        assert_eq!(store.verify("old"), None, "the rotated-out token is refused");
        assert_eq!(store.verify("b"), Some(id("bob")));
        // A different length alone.
        write(&path, &format!("carol {}\n", hash_token("c")));
        assert_eq!(store.len(), 1);
        assert_eq!(store.verify("c"), Some(id("carol")));
        assert_eq!(store.verify("b"), None);
    }

    #[test]
    fn a_failed_re_read_keeps_the_previous_tokens() {
        let (_dir, path) = token_file(&format!("alice {}\n", hash_token("a")));
        let store = TokenStore::from_file(&path).unwrap();
        rewrite(&path, &format!("alice {}\nbob sha256:nothex\n", hash_token("a2")));
        assert_eq!(store.verify("a"), Some(id("alice")));
        assert_eq!(store.verify("a2"), None, "nothing of the invalid version is taken");
        assert_eq!(store.len(), 1);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            store.verify("a"),
            Some(id("alice")),
            "a vanished file keeps the tokens too"
        );
        // Once fixed, the file is read again.
        write(&path, &format!("bob {}\n", hash_token("b")));
        assert_eq!(store.verify("b"), Some(id("bob")));
        assert_eq!(store.verify("a"), None);
    }

    /// Runs `body` on a thread and returns what it returns, failing the test if it has not
    /// returned within a minute (a guard against a read that hangs, not a timing assertion).
    #[cfg(unix)]
    fn within_a_minute<T: Send + 'static>(body: impl FnOnce() -> T + Send + 'static) -> T {
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || sender.send(body()));
        receiver
            .recv_timeout(Duration::from_secs(60))
            .expect("still reading the token file after a minute")
    }

    #[cfg(unix)]
    fn mkfifo(path: &Path) {
        let status = std::process::Command::new("mkfifo").arg(path).status().unwrap();
        assert!(status.success(), "mkfifo {}", path.display());
    }

    /// Issue #44, item 6: `AGENTACP_TOKENS_FILE` naming a FIFO hung the server, and a huge
    /// file was read whole. Both are refused at once, with a sentence naming the file.
    /// (`/dev/zero` is tested on a server process, with its memory bounded:
    /// examples/echo-server/tests/token_file.rs.)
    #[cfg(unix)]
    #[test]
    fn a_fifo_or_a_file_over_the_limit_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let (fifo, big) = (dir.path().join("fifo"), dir.path().join("big"));
        mkfifo(&fifo);
        let file = std::fs::File::create(&big).unwrap();
        file.set_len(acp_tokens::file::MAX_FILE_BYTES + 1).unwrap();
        for (path, why) in [
            (fifo, "not a regular file (a FIFO); a token file is a regular file"),
            (big, "the file is larger than a token file may be (1048577 bytes)"),
        ] {
            let setting = path.to_str().unwrap().to_string();
            let error =
                within_a_minute(move || TokenStore::from_vars(vars(&[(TOKENS_FILE_VAR, &setting)])).unwrap_err());
            assert!(error.starts_with(&format!("{}: {why}", path.display())), "{error}");
        }
    }

    /// A token file replaced by a FIFO, or grown past the limit, is not read on reload (a
    /// FIFO would hang every connection's token check): the tokens read before stay.
    #[cfg(unix)]
    #[test]
    fn a_reload_refuses_a_fifo_or_a_file_over_the_limit_and_keeps_the_tokens() {
        let (dir, path) = token_file(&format!("alice {}\n", hash_token("a")));
        let store = std::sync::Arc::new(TokenStore::from_file(&path).unwrap());
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        std::fs::rename(&fifo, &path).unwrap();
        let check = store.clone();
        assert_eq!(within_a_minute(move || check.verify("a")), Some(id("alice")));
        std::fs::remove_file(&path).unwrap();
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(acp_tokens::file::MAX_FILE_BYTES + 1).unwrap();
        assert_eq!(store.verify("a"), Some(id("alice")));
        assert_eq!(store.len(), 1);
    }

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn from_vars_reads_a_token_a_file_or_both() {
        assert!(TokenStore::from_vars(vars(&[])).unwrap().is_none());
        assert!(TokenStore::from_vars(vars(&[(TOKENS_FILE_VAR, "")])).unwrap().is_none());

        let store = TokenStore::from_vars(vars(&[(TOKEN_VAR, "t0k")])).unwrap().unwrap();
        assert_eq!(store.verify("t0k"), Some(id("token")));
        let store = TokenStore::from_vars(vars(&[(TOKEN_VAR, "t0k"), (TOKEN_IDENTITY_VAR, "ci-bot")]))
            .unwrap()
            .unwrap();
        assert_eq!(store.verify("t0k"), Some(id("ci-bot")));

        let (_dir, path) = token_file(&format!("alice {}\n", hash_token("a")));
        let file = path.to_str().unwrap();
        let store = TokenStore::from_vars(vars(&[(TOKENS_FILE_VAR, file)]))
            .unwrap()
            .unwrap();
        assert_eq!(store.verify("a"), Some(id("alice")));
        let store = TokenStore::from_vars(vars(&[(TOKENS_FILE_VAR, file), (TOKEN_VAR, "t0k")]))
            .unwrap()
            .unwrap();
        assert_eq!(store.len(), 2);
        assert_eq!(store.verify("a"), Some(id("alice")));
        assert_eq!(store.verify("t0k"), Some(id("token")));
    }

    /// Issue #49: `AGENTACP_TOKENS=database` reads the tokens from the database
    /// `AGENTACP_DATABASE_URL` names; a file beside it, an unknown place or no database is
    /// refused in a sentence.
    #[cfg(feature = "postgres")]
    #[test]
    fn from_vars_reads_the_tokens_of_the_database() {
        let Some(cluster) = test_support::postgres::cluster() else {
            return;
        };
        let url = cluster.database("auth_from_vars");
        let store = TokenStore::from_vars(vars(&[
            (TOKENS_VAR, "database"),
            (crate::database::DATABASE_URL_VARIABLE, &url),
            (TOKENS_POLL_VAR, "250"),
            (TOKEN_VAR, "t0k"),
        ]))
        .unwrap()
        .unwrap();
        let admin = crate::database::open_database(Some(&url)).unwrap().unwrap();
        acp_tokens::database::issue(&admin, "alice", digest("a"), acp_tokens::Others::Refuse).unwrap();
        assert_eq!(store.check("a"), Ok(Some(id("alice"))));
        assert_eq!(
            store.check("t0k"),
            Ok(Some(id("token"))),
            "AGENTACP_TOKEN counts beside"
        );
        assert_eq!(store.check("b"), Ok(None));
        assert!(format!("{store:?}").contains("database: true"), "{store:?}");
    }

    #[test]
    fn where_tokens_live_is_checked() {
        let database_var = crate::database::DATABASE_URL_VARIABLE;
        for (pairs, why) in [
            (vec![(TOKENS_VAR, "redis")], "`redis` is not where tokens can live"),
            (
                vec![
                    (TOKENS_VAR, "database"),
                    (TOKENS_FILE_VAR, "/tmp/t"),
                    (database_var, "postgres://x/y"),
                ],
                "both set",
            ),
            (vec![(TOKENS_VAR, "database")], "needs the database"),
        ] {
            let error = TokenStore::from_vars(vars(&pairs)).unwrap_err();
            assert!(error.contains(why), "{pairs:?}: {error}");
        }
        #[cfg(not(feature = "postgres"))]
        {
            let error =
                TokenStore::from_vars(vars(&[(TOKENS_VAR, "database"), (database_var, "postgres://x/y")])).unwrap_err();
            assert!(error.contains("without feature `postgres`"), "{error}");
        }
        #[cfg(feature = "postgres")]
        {
            let pairs = [
                (TOKENS_VAR, "database"),
                (database_var, "postgres://x/y"),
                (TOKENS_POLL_VAR, "5"),
            ];
            let error = TokenStore::from_vars(vars(&pairs)).unwrap_err();
            assert!(error.contains("at least 100"), "{error}");
        }
    }

    #[test]
    fn from_vars_refuses_bad_settings() {
        for (pairs, why) in [
            (vec![(TOKEN_VAR, "")], "empty"),
            (vec![(TOKEN_VAR, " t0k")], "whitespace"),
            (
                vec![(TOKEN_VAR, "t0k"), (TOKEN_IDENTITY_VAR, "not ok")],
                TOKEN_IDENTITY_VAR,
            ),
            (vec![(TOKEN_IDENTITY_VAR, "alice")], "is not"),
            (
                vec![(TOKENS_FILE_VAR, "/nonexistent/agentacp-tokens")],
                "/nonexistent/agentacp-tokens",
            ),
        ] {
            let error = TokenStore::from_vars(vars(&pairs)).unwrap_err();
            assert!(error.contains(why), "{pairs:?}: {error}");
        }
    }
}
