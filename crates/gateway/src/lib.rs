//! toolgate's gateway: many MCP servers behind one endpoint.
//!
//! Hosts talk to each MCP server directly today, so every host has to get
//! validation, sanitizing and pinning right on its own. The gateway does
//! it once, for servers nobody here wrote:
//!
//! - [`config`]: `toolgate.toml`, or the `mcpServers` JSON hosts write;
//!   every section's declaration lives there.
//! - [`Gateway`]: the upstreams' tools on one toolgate server. Arguments
//!   are checked against the upstream's `inputSchema` before anything is
//!   forwarded; results are sanitized and checked against its
//!   `outputSchema`; a lock file withholds tools whose definition changed;
//!   the upstream's questions reach the downstream client and its answers
//!   go back. A call an upstream runs as a task (the tasks extension)
//!   becomes a gateway task its caller polls. Names are `<prefix>.<tool>`,
//!   at most 128 characters, stable ([`qualify`]); upstreams are restarted
//!   with backoff.
//! - The policy decides which calls are allowed, denied, or put to a
//!   person first, through the protocol's own elicitation; an approval
//!   counts once, for one call.
//! - [`store::sqlite`] and [`store::pg`]: every decision and call in
//!   SQLite or PostgreSQL, durable before the answer is sent;
//!   [`decide::grants`]: approvals that remember a tool;
//!   [`call::metrics`] and [`call::telemetry`]: Prometheus and
//!   OpenTelemetry.
//!
//! The `toolgate serve` command runs a gateway over Streamable HTTP or
//! stdio; `docs/gateway.md` documents the configuration key by key.
//!
//! # Layers
//!
//! The crate is built in layers, bottom to top; a module imports only from
//! its own layer or those below it, and no two folders import each other
//! (the test `tests::layering` reads the sources and fails otherwise):
//!
//! 1. [`base`]: names, durations, time, ids, redaction — nothing of the
//!    gateway.
//! 2. [`config`]: the configuration as plain data, and its validation.
//! 3. [`decide`]: policy, confirmations, grants, loops, budgets — pure
//!    decisions over the configuration, the call and facts read from
//!    stores.
//! 4. [`store`]: narrow traits for what is kept (audit rows, nonces,
//!    grants, the ledger, pending approvals, shared limits) and their
//!    SQLite, PostgreSQL, Redis and memory backends.
//! 5. [`call`]: one request — upstream connections, the stages a
//!    `tools/call` passes, the relay, the record of the call.
//! 6. `gateway`: the lifecycle — start, supervise, reload, stop
//!    ([`Gateway`]).
//! 7. [`surface`]: routers over a running gateway — the approval page, the
//!    console, health.
//!
//! A surface sits above the lifecycle because it is built from a running
//! gateway's handle; nothing below it can reach a page.

pub mod base;
pub mod call;
pub mod config;
pub mod decide;
mod gateway;
pub mod store;
pub mod surface;

#[cfg(test)]
mod tests;

pub use base::names::{exactly, qualify};
pub use call::upstream::declared_capabilities;
pub use store::StoreError;
pub use surface::health::Readiness;

pub use gateway::{
    Drift, Endpoint, EndpointView, EndpointsHook, Gateway, GatewayError, GatewayOptions,
    LastReload, NotApproved, Reloaded, ToolView, UpstreamStatus,
};

// The README is the registry page: its examples are compiled and run as
// doctests, so the page never shows code that does not build.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
