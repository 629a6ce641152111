//! Transports: they move bytes and know nothing about tools.
//!
//! - [`stdio`]: newline-delimited JSON over a byte stream (stdin/stdout).
//! - [`http`]: Streamable HTTP on axum/hyper.

pub mod http;
pub mod stdio;
