//! toolgate's gateway: many MCP servers behind one endpoint.
//!
//! Hosts talk to each MCP server directly today, so every host has to get
//! validation, sanitizing and pinning right on its own. The gateway does
//! it once, for servers nobody here wrote:
//!
//! - [`config`]: `toolgate.toml`, or the `mcpServers` JSON hosts write.
//! - [`names`]: `<prefix>.<tool>`, at most 128 characters, stable.
//! - [`upstream`]: one connection per upstream, restarted with backoff.
//! - [`Gateway`]: the upstreams' tools on one toolgate server. Arguments
//!   are checked against the upstream's `inputSchema` before anything is
//!   forwarded; results are sanitized and checked against its
//!   `outputSchema`; a lock file withholds tools whose definition changed;
//!   the upstream's questions reach the downstream client and its answers
//!   go back. A call an upstream runs as a task (the tasks extension)
//!   becomes a gateway task its caller polls.
//!
//! - [`policy`], [`guard`], [`confirm`]: rules decide which calls are
//!   allowed, denied, or put to a person first, through the protocol's own
//!   elicitation; an approval counts once, for one call.
//! - [`audit`]: every decision and call in SQLite, durable before the
//!   answer is sent; [`state`]: the key shared by instances.
//!
//! The `toolgate serve` command runs a gateway over Streamable HTTP or
//! stdio; `docs/gateway.md` documents the configuration key by key.

pub mod approval;
pub mod audit;
pub mod audit_pg;
pub mod budget;
pub mod config;
pub mod confirm;
pub mod duration;
mod forward;
mod gateway;
pub mod grants;
pub mod guard;
pub mod health;
pub mod inbound;
pub mod loops;
pub mod metrics;
pub mod names;
mod parked;
mod pending_pg;
pub mod policy;
pub mod shared_limit;
pub mod state;
pub mod telemetry;
pub mod upstream;
mod upstream_task;

pub use gateway::{
    Drift, Gateway, GatewayError, GatewayOptions, NotApproved, Reloaded, ToolView, UpstreamStatus,
};

// The README is the registry page: its examples are compiled and run as
// doctests, so the page never shows code that does not build.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
