//! Layer 4, `call`: what happens to one request — the upstream
//! connections, the handlers that relay a request round by round, the
//! guard that asks the policy and a person, and the record of each call
//! (audit rows, metrics, traces). Calls use decisions and stores; they
//! never reach a page or the gateway's lifecycle.

pub mod approvals;
pub(crate) mod forward;
pub(crate) mod guard;
pub mod identity;
pub mod inbound;
pub mod linked;
pub mod metrics;
pub(crate) mod parked;
pub(crate) mod rounds;
pub mod sandbox;
pub mod stack;
pub mod telemetry;
pub mod upstream;
pub(crate) mod upstream_task;
