//! What can go wrong with the stores a gateway keeps its state in, with the
//! database's own error kept as the cause.
//!
//! Layer: `store`.

/// A store could not be opened, reached or used.
///
/// Its text says which store and what was being done (a PostgreSQL or
/// Redis URL without its password); the driver's error is its
/// [`source`](std::error::Error::source), shown by `anyhow`'s `{:#}` or
/// [`with_causes`](toolgate_protocol::error::with_causes).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The SQLite audit file.
    #[error("{context}")]
    Sqlite {
        /// Which file, and what failed.
        context: String,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// A write of the SQLite audit store's writer: every call whose row was
    /// in the failed batch gets this error, sharing SQLite's as its cause.
    #[error("{context}")]
    SqliteWrite {
        /// Which file.
        context: String,
        /// SQLite's error.
        #[source]
        source: std::sync::Arc<rusqlite::Error>,
    },
    /// The PostgreSQL store (`[store] url`).
    #[cfg(feature = "postgres")]
    #[error("{context}")]
    Postgres {
        /// Which database, and what failed.
        context: String,
        /// The driver's error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The Redis rate-limit store (`[ratelimit] redis`).
    #[cfg(feature = "redis")]
    #[error("{context}")]
    Redis {
        /// Which server, and what failed.
        context: String,
        /// The driver's error.
        #[source]
        source: redis::RedisError,
    },
    /// A file the gateway keeps beside its stores (the login link's file).
    #[error("{context}")]
    File {
        /// Which file, and what failed.
        context: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Anything else, said in full (a store of a newer schema, a writer
    /// that stopped, TLS that could not be set up).
    #[error("{0}")]
    Other(String),
}

impl From<String> for StoreError {
    fn from(text: String) -> Self {
        StoreError::Other(text)
    }
}
