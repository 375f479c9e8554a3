//! TLS (`net.tls`) with rustls on the ring provider.
//!
//! - `certificateKeyFile`: one PEM file with the server's certificate chain and private key.
//! - `CAFile`: the CAs client certificates are checked against. With it, clients must present
//!   a certificate signed by one of them, unless `allowConnectionsWithoutCertificates` (then a
//!   certificate is optional, but checked when given).
//! - Modes: `requireTLS` accepts TLS connections only (a plain one is closed); `allowTLS` and
//!   `preferTLS` accept both, telling them apart by the first three bytes, as mongod does: a
//!   TLS handshake record starts 0x16 0x03 0x00..=0x04; a MongoDB message starts with its
//!   little-endian length, which matches only for lengths 790 + k·65536 (k < 5), and no
//!   driver's first message (a handshake of a few hundred bytes) has such a length;
//!   `disabled` accepts plain connections only.

use crate::config::{TlsMode, TlsSettings};
use rustls::server::WebPkiClientVerifier;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;

/// The acceptor for a configuration (None when TLS is disabled).
pub fn acceptor(cfg: &TlsSettings) -> Result<Option<tokio_rustls::TlsAcceptor>, String> {
    if cfg.mode == TlsMode::Disabled {
        return Ok(None);
    }
    let key_file = cfg
        .certificate_key_file
        .as_ref()
        .ok_or("net.tls.certificateKeyFile is required")?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(key_file)
        .map_err(|e| format!("net.tls.certificateKeyFile {}: {e}", key_file.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("net.tls.certificateKeyFile {}: {e}", key_file.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "net.tls.certificateKeyFile {}: no certificate in it",
            key_file.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key_file).map_err(|e| {
        format!(
            "net.tls.certificateKeyFile {}: no usable private key: {e}",
            key_file.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match &cfg.ca_file {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_file_iter(ca)
                .map_err(|e| format!("net.tls.CAFile {}: {e}", ca.display()))?
            {
                let c = c.map_err(|e| format!("net.tls.CAFile {}: {e}", ca.display()))?;
                roots
                    .add(c)
                    .map_err(|e| format!("net.tls.CAFile {}: {e}", ca.display()))?;
            }
            let v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let v = if cfg.allow_connections_without_certificates {
                v.allow_unauthenticated()
            } else {
                v
            };
            builder.with_client_cert_verifier(v.build().map_err(|e| e.to_string())?)
        }
        None => builder.with_no_client_auth(),
    };
    let server = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("net.tls.certificateKeyFile: {e}"))?;
    Ok(Some(tokio_rustls::TlsAcceptor::from(Arc::new(server))))
}

/// Whether the first bytes of a connection are a TLS handshake record.
pub fn looks_like_tls(first: &[u8; 3]) -> bool {
    first[0] == 0x16 && first[1] == 0x03 && first[2] <= 0x04
}
