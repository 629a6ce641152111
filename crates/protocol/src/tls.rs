//! How toolgate verifies the servers it connects to over TLS (feature
//! `tls`), kept in one place for the client's transport, the server's JWKS
//! fetch and the gateway's database connection.
//!
//! rustls needs a cryptography provider. An application may have chosen
//! one already (`CryptoProvider::install_default`); then it is used.
//! Otherwise toolgate configures *its own* connections with the `ring`
//! provider — it never installs a provider for the whole process behind the
//! application's back, since that would decide for every other TLS user in
//! the program. Servers are checked by the platform's verifier either way.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls_platform_verifier::BuilderVerifierExt as _;

/// Whether the application installed a process-wide rustls provider (then
/// an HTTP client's own TLS defaults already use it).
pub fn has_default_provider() -> bool {
    CryptoProvider::get_default().is_some()
}

/// A client configuration that verifies servers with the platform's
/// verifier, over the application's default provider when it installed one,
/// else `ring`.
///
/// ```
/// let config = toolgate_protocol::tls::rustls_config().unwrap();
/// assert!(config.alpn_protocols.is_empty());
/// ```
pub fn rustls_config() -> Result<rustls::ClientConfig, rustls::Error> {
    let provider = CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_platform_verifier())?
        .with_no_client_auth())
}
