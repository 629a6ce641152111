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
//! - [`audit`] and [`audit_pg`]: every decision and call in SQLite or
//!   PostgreSQL, durable before the answer is sent; [`grants`]: approvals
//!   that remember a tool; [`metrics`] and [`telemetry`]: Prometheus and
//!   OpenTelemetry.
//!
//! The `toolgate serve` command runs a gateway over Streamable HTTP or
//! stdio; `docs/gateway.md` documents the configuration key by key.

mod approval;
pub mod audit;
pub mod audit_pg;
mod audit_query;
mod audit_writer;
pub mod budget;
pub mod config;
mod confirm;
pub mod duration;
mod forward;
mod gateway;
pub mod grants;
mod guard;
mod health;
mod inbound;
pub mod ledger_sqlite;
mod loops;
pub mod metrics;
mod names;
mod parked;
mod pending_pg;
mod policy;
mod shared_limit;
mod state;
mod store_error;
pub mod telemetry;
mod upstream;
mod upstream_task;

pub use health::Readiness;
pub use names::{exactly, qualify};
pub use store_error::StoreError;
pub use upstream::declared_capabilities;

pub use gateway::{
    Drift, Gateway, GatewayError, GatewayOptions, LastReload, NotApproved, Reloaded, ToolView,
    UpstreamStatus,
};

// The README is the registry page: its examples are compiled and run as
// doctests, so the page never shows code that does not build.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
