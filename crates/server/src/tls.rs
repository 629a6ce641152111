//! TLS for the server's own outgoing requests (fetching a JWKS), without
//! touching process-wide state: the application's rustls provider when it
//! installed one, else a configuration of our own (ring and the platform's
//! verifier). The client crate does the same for its connections.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls_platform_verifier::BuilderVerifierExt as _;

pub(crate) fn with_tls(builder: reqwest::ClientBuilder) -> Result<reqwest::ClientBuilder, String> {
    if CryptoProvider::get_default().is_some() {
        return Ok(builder);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_platform_verifier())
        .map_err(|e| format!("cannot set up TLS: {e}"))?
        .with_no_client_auth();
    Ok(builder.tls_backend_preconfigured(config))
}
