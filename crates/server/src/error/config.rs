//! What is wrong with a server's settings, kept apart by kind.

/// A setting the server cannot work with, said so a person can fix it.
///
/// ```
/// use toolgate_server::{ConfigError, ServerConfig};
/// let config = ServerConfig::default().with_page_size(0);
/// let refused = config.validate().unwrap_err();
/// assert!(matches!(refused, ConfigError::Zero { field: "page_size", .. }));
/// assert_eq!(refused.to_string(), "page_size is zero; a list page must hold at least one item");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A bound or duration is zero where it must not be.
    #[error("{field} is zero; {why}")]
    Zero {
        /// The setting.
        field: &'static str,
        /// What would go wrong.
        why: &'static str,
    },
    /// A setting needs a feature this build of `toolgate-server` lacks.
    #[error("{setting} needs toolgate-server's feature `{feature}`, which this build lacks")]
    MissingFeature {
        /// The setting.
        setting: &'static str,
        /// The Cargo feature.
        feature: &'static str,
    },
    /// A rate limit that could never let a call through as meant.
    #[error("{field}: {reason}")]
    RateLimit {
        /// Where it was set (`rate_limit`, `tool "x"`).
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A `requestState` key cannot be used (its id, or two sharing one).
    #[error("{0}")]
    StateKey(String),
    /// The HTTP endpoint's path is not absolute.
    #[error("path {0:?} must start with '/'")]
    Path(String),
    /// Two endpoints on one listener have the same path.
    #[error("two endpoints are served at {0:?}; give each its own path")]
    SamePath(String),
    /// The protected resource's URI is not a URL.
    #[error("resource URI {uri:?} is not a URL")]
    ResourceUri {
        /// The URI given.
        uri: String,
        /// Why it does not parse.
        #[source]
        source: UrlError,
    },
    /// The protected resource's URI is a URL clients could not use, or does
    /// not match the endpoint.
    #[error("{0}")]
    Resource(String),
}

/// Why a URL did not parse (the `url` crate's error, or nothing without the
/// `http` and `jwt` features).
#[cfg(any(feature = "http", feature = "jwt"))]
pub type UrlError = url::ParseError;
/// Why a URL did not parse (the `url` crate's error, or nothing without the
/// `http` and `jwt` features).
#[cfg(not(any(feature = "http", feature = "jwt")))]
pub type UrlError = std::convert::Infallible;
