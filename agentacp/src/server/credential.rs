//! A credential a sign-in produced, and the file an operator keeps it in (see
//! [`sign_in`](super::sign_in) for how the runtime uses them).

use std::io::Write;
use std::path::{Path, PathBuf};

/// A credential a sign-in produced (a token, an API key): shown nowhere, not even in `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential(String);

impl Credential {
    /// A credential holding `secret`.
    pub fn new(secret: impl Into<String>) -> Credential {
        Credential(secret.into())
    }

    /// The secret.
    pub fn secret(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credential(…)")
    }
}

/// Where an operator keeps its credential: one file, readable by its owner only (mode 0600 on
/// Unix), replaced whole on each store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialFile(PathBuf);

/// The most a credential file may hold.
const MAX_CREDENTIAL_BYTES: u64 = 64 * 1024;

impl CredentialFile {
    /// The file at `path`.
    pub fn at(path: impl Into<PathBuf>) -> CredentialFile {
        CredentialFile(path.into())
    }

    /// `credential` in the state folder of the operator `id`: `AGENTACP_STATE_DIR` when set,
    /// else `$XDG_STATE_HOME/agentacp/<id>` (`~/.local/state/agentacp/<id>`). The default of
    /// the generated `credential_file`.
    pub fn in_state_dir(id: &str) -> CredentialFile {
        let dir = crate::env::env_path("AGENTACP_STATE_DIR").unwrap_or_else(|| crate::env::default_state_dir(id));
        CredentialFile(dir.join("credential"))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The stored credential; `None` when there is none (no file, or an empty one).
    pub fn load(&self) -> std::io::Result<Option<Credential>> {
        let metadata = match std::fs::metadata(&self.0) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(error),
        };
        if !metadata.is_file() || metadata.len() > MAX_CREDENTIAL_BYTES {
            return Err(std::io::Error::other(format!(
                "{} is not a credential file (a regular file of at most {MAX_CREDENTIAL_BYTES} bytes)",
                self.0.display()
            )));
        }
        let text = std::fs::read_to_string(&self.0)?;
        let secret = text.trim_end_matches(['\r', '\n']);
        Ok((!secret.is_empty()).then(|| Credential::new(secret)))
    }

    /// Whether a credential is stored (an unreadable file counts as none, and is logged).
    pub fn holds_one(&self) -> bool {
        self.load()
            .unwrap_or_else(|error| {
                tracing::warn!(file = %self.0.display(), %error, "cannot read the credential file");
                None
            })
            .is_some()
    }

    /// Stores `credential`: written to a new file beside it (owner-only), synced, then renamed
    /// over it, so a reader sees the old credential or the new one, never half of one.
    pub fn store(&self, credential: &Credential) -> std::io::Result<()> {
        let dir = self
            .0
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let name = self
            .0
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let temporary = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let written = options.open(&temporary).and_then(|mut file| {
            file.write_all(credential.secret().as_bytes())?;
            file.sync_all()
        });
        match written.and_then(|()| std::fs::rename(&temporary, &self.0)) {
            Ok(()) => Ok(()),
            Err(error) => {
                let _ = std::fs::remove_file(&temporary);
                Err(error)
            }
        }
    }

    /// Removes the stored credential (signing out); none stored is not an error.
    pub fn remove(&self) -> std::io::Result<()> {
        match std::fs::remove_file(&self.0) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        }
    }
}
