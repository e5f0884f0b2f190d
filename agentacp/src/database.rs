//! The database a process's stores share, when one is configured (issue #49): its URL
//! (`AGENTACP_DATABASE_URL`), one pool per URL for the process, and how it is shown (never
//! with its password). What is kept there: the server's sessions and memory, the audit
//! chains, the tokens ([`auth`](crate::auth)); docs/store.md.

/// The variable that names the database (a `postgres://` URL or a `key=value` string).
pub const DATABASE_URL_VARIABLE: &str = "AGENTACP_DATABASE_URL";

/// The variable that names a file of CA certificates (PEM) trusted for the database's
/// certificate, besides Mozilla's roots, when the URL says `sslmode=require` (feature `tls`).
pub const DATABASE_CA_VARIABLE: &str = "AGENTACP_DATABASE_CA";

/// The opened database a process's stores share: one pool per URL.
#[cfg(feature = "postgres")]
pub(crate) type Shared = acp_postgres::Database;

/// Without feature `postgres` there is no database to share: nothing has this type.
#[cfg(not(feature = "postgres"))]
#[derive(Debug, Clone)]
pub(crate) struct Shared(std::convert::Infallible);

#[cfg(not(feature = "postgres"))]
impl Shared {
    /// What a value that cannot exist does: nothing.
    pub(crate) fn absurd(&self) -> ! {
        match self.0 {}
    }
}

/// Opens the database `url` names, when one is configured; an error in a sentence when it
/// cannot be reached (naming it, never its password) or when this build has no PostgreSQL
/// support. One pool per URL for the process: a second call (a listener's tokens, then the
/// server's stores) shares the first one's. Each store applies its own schema.
pub(crate) fn open_database(url: Option<&str>) -> std::io::Result<Option<Shared>> {
    let Some(url) = url else { return Ok(None) };
    #[cfg(feature = "postgres")]
    {
        static OPENED: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<String, Shared>>> =
            std::sync::OnceLock::new();
        // Held while opening: two starts at once open one pool.
        let mut opened = crate::sync::lock(OPENED.get_or_init(Default::default));
        if let Some(database) = opened.get(url) {
            return Ok(Some(database.clone()));
        }
        let options = acp_postgres::Options {
            ca_file: std::env::var_os(DATABASE_CA_VARIABLE)
                .filter(|path| !path.is_empty())
                .map(std::path::PathBuf::from),
            ..acp_postgres::Options::default()
        };
        let database = acp_postgres::Database::connect(url, options).map_err(std::io::Error::from)?;
        opened.insert(url.to_string(), database.clone());
        Ok(Some(database))
    }
    #[cfg(not(feature = "postgres"))]
    {
        let _ = url;
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            format!(
                "a database is configured ({DATABASE_URL_VARIABLE} or `ServerOptions::database`), but this server was built without feature `postgres` of agentacp: build it with the feature, or unset the variable to keep sessions in files"
            ),
        ))
    }
}

/// A database URL as messages show it: without its password.
pub(crate) fn shown_url(url: &str) -> String {
    #[cfg(feature = "postgres")]
    {
        acp_postgres::shown_url(url)
    }
    #[cfg(not(feature = "postgres"))]
    {
        let _ = url;
        "a database URL (shown with feature `postgres`)".to_string()
    }
}

#[cfg(test)]
mod tests {
    /// Issue #49: a database configured for a build without PostgreSQL stops the start-up,
    /// saying so, rather than keeping the sessions in files unseen.
    #[cfg(not(feature = "postgres"))]
    #[test]
    fn a_database_without_feature_postgres_stops_the_start() {
        let error = super::open_database(Some("postgres://agent:s3cret@db/agents")).unwrap_err();
        let said = error.to_string();
        assert!(said.contains("built without feature `postgres` of agentacp"), "{said}");
        assert!(!said.contains("s3cret"), "{said}");
        assert!(super::open_database(None).unwrap().is_none());
    }
}
