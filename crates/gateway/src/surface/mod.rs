//! Layer 6, `surface`: what people and monitors see, each an axum router
//! over a handle to a running [`Gateway`](crate::gateway::Gateway) — the
//! approval page and the console ([`page`]), health and status
//! ([`health`]), and what the MCP listener serves: the default endpoint
//! and every `[endpoints.NAME]` beside it ([`listener`]). Nothing below reaches a surface: a call asks for a
//! person's decision through [`crate::call::approvals::Approvals`].

pub mod health;
pub mod listener;
pub mod page;
