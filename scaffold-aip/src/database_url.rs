//! `--database [URL]`, the flag of the commands that reach a fleet's PostgreSQL database
//! (`audit verify`, `audit export`, `token new|rotate|revoke|list`). A URL on the command line
//! is visible to every user of the machine (the process list), so the flag may be given
//! without one: the URL is then read from `AGENTACP_DATABASE_URL`, the variable the servers
//! read. A URL with a password on the command line is taken, with a warning.

use std::io::Write;

/// The variable a bare `--database` reads (the runtime's own).
pub const VARIABLE: &str = "AGENTACP_DATABASE_URL";

/// The URL `--database` names: its value, or without one `AGENTACP_DATABASE_URL`'s. A value
/// that holds a password is warned about on `err` (the sentence starts with `command`). `Err`:
/// a sentence, when neither gives a URL.
pub fn resolve(given: Option<&str>, command: &str, err: &mut dyn Write) -> Result<String, String> {
    match given {
        Some(url) => {
            if has_password(url) {
                let _ = writeln!(
                    err,
                    "{command}: warning: the database URL on the command line holds a password, which other users of \
                     this machine can read in the process list; set {VARIABLE} and give `--database` without a URL"
                );
            }
            Ok(url.to_string())
        }
        None => match std::env::var(VARIABLE) {
            Ok(url) if !url.trim().is_empty() => Ok(url),
            Ok(_) | Err(std::env::VarError::NotPresent) => Err(format!(
                "`--database` without a URL reads it from {VARIABLE}, which is not set: set it, or give the URL \
                 after `--database`"
            )),
            Err(std::env::VarError::NotUnicode(_)) => Err(format!("{VARIABLE} is not valid UTF-8")),
        },
    }
}

/// Whether a `postgres://` URL or `key=value` string gives a password. Without feature
/// `postgres` nothing can be connected to, so nothing is said.
fn has_password(url: &str) -> bool {
    #[cfg(feature = "postgres")]
    {
        url.parse::<acp_postgres::postgres::Config>()
            .is_ok_and(|config| config.get_password().is_some_and(|password| !password.is_empty()))
    }
    #[cfg(not(feature = "postgres"))]
    {
        let _ = url;
        false
    }
}

#[cfg(all(test, feature = "postgres"))]
mod tests {
    use super::has_password;

    #[test]
    fn a_password_is_found_in_either_form_of_url() {
        assert!(has_password("postgres://alice:s3cret@db.example/agents"));
        assert!(has_password("host=db user=alice password=s3cret dbname=agents"));
        assert!(!has_password("postgres://alice@db.example/agents"));
        assert!(!has_password("host=db user=alice dbname=agents"));
    }
}
