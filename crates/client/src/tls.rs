//! TLS for the HTTP transport, without touching process-wide state.
//!
//! rustls needs a cryptography provider. An application may have chosen
//! one already (`CryptoProvider::install_default`); then the client uses it.
//! Otherwise the client configures *its own* connections with the `ring`
//! provider and the platform's certificate verifier — it never installs a
//! provider for the whole process behind the application's back, since that
//! would decide for every other TLS user in the program.

use std::sync::Arc;

use crate::ClientError;

/// Give `builder` TLS: the application's default provider when it installed
/// one, else a configuration of the client's own (`ring` and the
/// platform's verifier). For other HTTP an application makes beside the
/// client (an exporter, a webhook), so it verifies servers the same way.
pub fn with_tls(builder: reqwest::ClientBuilder) -> Result<reqwest::ClientBuilder, ClientError> {
    if toolgate_protocol::tls::has_default_provider() {
        return Ok(builder);
    }
    Ok(builder.tls_backend_preconfigured(rustls_config()?))
}

/// A rustls client configuration that verifies servers as the client does
/// (the application's default provider when it installed one, else `ring`;
/// the platform's verifier), for other TLS an application makes beside the
/// client, such as a database connection.
pub fn rustls_config() -> Result<rustls::ClientConfig, ClientError> {
    toolgate_protocol::tls::rustls_config()
        .map_err(|e| ClientError::transport_because("cannot set up TLS", e))
}

/// The TLS configuration of the transport's own connections: the
/// application's default provider when it installed one, else `ring`; the
/// platform's verifier either way; HTTP/1.1 by ALPN.
pub(crate) fn client_config() -> Result<Arc<rustls::ClientConfig>, ClientError> {
    let mut config = rustls_config()?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Install `ring` as the process-wide rustls provider, for applications
/// that want one and have not chosen another. Returns `false` if a provider
/// was installed already (which then stays). The client does not need this:
/// it is a convenience for programs that build other rustls users too.
///
/// ```
/// toolgate_client::install_default_tls_provider();
/// ```
pub fn install_default_tls_provider() -> bool {
    rustls::crypto::ring::default_provider()
        .install_default()
        .is_ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn building_a_client_installs_no_process_wide_provider() {
        // This test binary installs none, so the client must bring its own.
        let transport = crate::transport::http::HttpTransport::new(
            "https://127.0.0.1:1/mcp",
            Default::default(),
        );
        assert!(transport.is_ok());
        assert!(!toolgate_protocol::tls::has_default_provider());
    }
}
