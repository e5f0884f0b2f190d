//! TLS for `wss://`: the certificate chain and key a listener serves with, and the client
//! configuration dialers use (the webpki roots). rustls with the ring provider.

use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A listener's certificate chain and private key, PEM files.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The certificate chain (leaf first).
    pub cert: PathBuf,
    /// The private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

impl TlsFiles {
    /// `AGENTACP_TLS_CERT` and `AGENTACP_TLS_KEY`: both or neither.
    pub fn from_env() -> Result<Option<TlsFiles>, String> {
        match (
            std::env::var_os("AGENTACP_TLS_CERT"),
            std::env::var_os("AGENTACP_TLS_KEY"),
        ) {
            (Some(cert), Some(key)) => Ok(Some(TlsFiles {
                cert: cert.into(),
                key: key.into(),
            })),
            (None, None) => Ok(None),
            _ => Err("set both AGENTACP_TLS_CERT and AGENTACP_TLS_KEY, or neither".into()),
        }
    }

    /// The acceptor for these files; an error names the file that cannot be used.
    pub(crate) fn acceptor(&self) -> Result<tokio_rustls::TlsAcceptor, String> {
        let certs = CertificateDer::pem_file_iter(&self.cert)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|error| format!("cannot read the certificate chain {}: {error}", self.cert.display()))?;
        let key = PrivateKeyDer::from_pem_file(&self.key)
            .map_err(|error| format!("cannot read the private key {}: {error}", self.key.display()))?;
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|error| error.to_string())?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|error| {
                format!(
                    "{} and {} do not make a certificate: {error}",
                    self.cert.display(),
                    self.key.display()
                )
            })?;
        Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
    }
}

/// The client configuration for `wss://`: the webpki roots, plus `extra_roots` (PEM
/// certificates, e.g. a private CA's).
pub fn client_config(extra_roots: &[CertificateDer<'static>]) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for root in extra_roots {
        roots
            .add(root.clone())
            .map_err(|error| format!("a root certificate is not usable: {error}"))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|error| error.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}
