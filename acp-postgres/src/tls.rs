//! TLS to the database (feature `tls`): rustls on the ring provider, verifying the server's
//! certificate and host name against Mozilla's roots plus any CA file given.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::DbError;

/// The connector: Mozilla's roots, plus the certificates of `ca_file` (PEM) when given.
pub(crate) fn connector(ca_file: Option<&Path>) -> Result<MakeRustlsConnect, DbError> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    if let Some(path) = ca_file {
        let unreadable = |why: String| DbError::BadUrl(format!("the CA file {} cannot be used: {why}", path.display()));
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| unreadable(e.to_string()))?
            .collect::<Result<_, _>>()
            .map_err(|e| unreadable(e.to_string()))?;
        if certs.is_empty() {
            return Err(unreadable("it holds no certificate".to_string()));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| unreadable(e.to_string()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| DbError::BadUrl(format!("no TLS version to offer: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

#[cfg(test)]
mod tests {
    use crate::{Database, DbError, Options};

    /// A CA, a server certificate for 127.0.0.1 signed by it, the server's key, and the CA
    /// file that trusts it.
    fn signed_by_a_private_ca(dir: &std::path::Path) -> (String, String, std::path::PathBuf) {
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "agentacp test CA");
        let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap()).unwrap();
        let server_key = rcgen::KeyPair::generate().unwrap();
        let mut server = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        server.distinguished_name.push(rcgen::DnType::CommonName, "127.0.0.1");
        let server = server.signed_by(&server_key, &ca).unwrap();
        let ca_file = dir.join("ca.pem");
        std::fs::write(&ca_file, ca.pem()).unwrap();
        (server.pem(), server_key.serialize_pem(), ca_file)
    }

    #[test]
    fn tls_is_used_and_the_server_certificate_is_checked() {
        let Some(cluster) = test_support::postgres::cluster() else {
            return;
        };
        let dir = tempfile_dir();
        let (cert, key, ca) = signed_by_a_private_ca(&dir);
        cluster.enable_tls(&cert, &key).unwrap();
        let url = format!("{}?sslmode=require", cluster.database("tls"));

        let trusted = Options {
            ca_file: Some(ca),
            ..Options::default()
        };
        let db = Database::connect(&url, trusted).expect("TLS with the CA file");
        let on = db
            .run(|c| c.query_one("select ssl from pg_stat_ssl where pid = pg_backend_pid()", &[]))
            .unwrap();
        assert!(on.get::<_, bool>(0), "the connection is encrypted");

        // Without the CA file, the server's certificate is refused.
        let error = Database::connect(&url, Options::default()).unwrap_err();
        assert!(matches!(error, DbError::Unreachable { .. }), "{error}");
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused_in_words() {
        let dir = tempfile_dir();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "nothing here\n").unwrap();
        let error = super::connector(Some(&empty)).map(|_| ()).unwrap_err().to_string();
        assert!(
            error.starts_with(&format!(
                "the database URL cannot be read: the CA file {}",
                empty.display()
            )),
            "{error}"
        );
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "acp-postgres-tls-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
