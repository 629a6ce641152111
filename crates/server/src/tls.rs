//! TLS for the server's own outgoing requests (fetching a JWKS), verified
//! as everywhere in toolgate ([`toolgate_protocol::tls`]), without touching
//! process-wide state.

pub(crate) fn with_tls(
    builder: reqwest::ClientBuilder,
) -> Result<reqwest::ClientBuilder, rustls::Error> {
    if toolgate_protocol::tls::has_default_provider() {
        return Ok(builder);
    }
    Ok(builder.tls_backend_preconfigured(toolgate_protocol::tls::rustls_config()?))
}
