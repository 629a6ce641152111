//! Transports: they move bytes and know nothing about tools.
//!
//! - [`stdio`]: newline-delimited JSON over a byte stream (stdin/stdout).
//! - `http`: Streamable HTTP on axum/hyper (feature `http`, on by default).

//! - Your own: feed [`Server::handle_message`](crate::Server::handle_message)
//!   and send what the [`Reply`] holds; [`http_status_for`] maps an error
//!   code to an HTTP status.

#[cfg(feature = "http")]
pub mod http;
pub mod stdio;

pub use crate::dispatch::{HeaderCheck, NotificationAction, http_status_for};
pub use crate::exchange::{Exchange, Frame, Reply};
