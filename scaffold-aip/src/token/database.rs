//! `scaffold-aip token … --database URL`: the tokens a fleet of servers keeps in PostgreSQL
//! (`acp_tokens::database`), changed in one transaction each; a revocation is announced to
//! every server listening in the same transaction. Without feature `postgres`, each command
//! says so.

use super::Others;

/// Adds `token`'s hash for `identity` (see `acp_tokens::database::issue`): the database as
/// shown (no password) and how many of the identity's tokens were revoked.
pub(super) fn issue(url: &str, identity: &str, token: &str, others: Others) -> Result<(String, u64), String> {
    #[cfg(feature = "postgres")]
    {
        let database = open(url)?;
        let revoked = acp_tokens::database::issue(&database, identity, acp_tokens::digest(token), others)?;
        Ok((database.shown().to_string(), revoked))
    }
    #[cfg(not(feature = "postgres"))]
    {
        let _ = (identity, token, others);
        Err(unsupported(url))
    }
}

/// Revokes `identity`'s tokens: the database as shown and how many.
pub(super) fn revoke(url: &str, identity: &str) -> Result<(String, u64), String> {
    #[cfg(feature = "postgres")]
    {
        let database = open(url)?;
        let revoked = acp_tokens::database::revoke(&database, identity)?;
        Ok((database.shown().to_string(), revoked))
    }
    #[cfg(not(feature = "postgres"))]
    {
        let _ = identity;
        Err(unsupported(url))
    }
}

/// One line a token: `<identity> sha256:<hex> issued <UTC time>`, and ` revoked <UTC time>`
/// for a revoked one (shown with `all`).
pub(super) fn list(url: &str, all: bool) -> Result<Vec<String>, String> {
    #[cfg(feature = "postgres")]
    {
        let database = open(url)?;
        let listed = acp_tokens::database::list(&database, all).map_err(|error| error.to_string())?;
        Ok(listed
            .into_iter()
            .map(|token| {
                let revoked = token.revoked.map(|at| format!(" revoked {at}")).unwrap_or_default();
                format!(
                    "{} {} issued {}{revoked}",
                    token.identity,
                    acp_tokens::hash_text(&token.hash),
                    token.created
                )
            })
            .collect())
    }
    #[cfg(not(feature = "postgres"))]
    {
        let _ = all;
        Err(unsupported(url))
    }
}

/// The database at `url`, with the tokens' schema applied. One connection: a command makes
/// one change.
#[cfg(feature = "postgres")]
fn open(url: &str) -> Result<acp_postgres::Database, String> {
    let options = acp_postgres::Options {
        connections: 1,
        application_name: "scaffold-aip token".to_string(),
        ..acp_postgres::Options::default()
    };
    let database = acp_postgres::Database::connect(url, options).map_err(|error| error.to_string())?;
    acp_tokens::database::prepare(&database).map_err(|error| error.to_string())?;
    Ok(database)
}

#[cfg(not(feature = "postgres"))]
fn unsupported(url: &str) -> String {
    let _ = url;
    "--database: this scaffold-aip was built without feature `postgres`; build it with the feature, or use --file"
        .to_string()
}
