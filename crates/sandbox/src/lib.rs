//! Sandboxed stdio servers: a server nobody here wrote runs with the files,
//! network and resources it needs, and nothing else — on Linux, without a
//! container runtime and without `unsafe` code here.
//!
//! # A tour
//!
//! - A configuration asks for a [`Profile`] (`strict`, `network`) and what to
//!   add ([`Request`]); [`Request::resolve`] turns it, with the server's
//!   command, into a [`Policy`]: absolute read and write paths (the system's
//!   read-only paths, the server's own install found by [`install`]), the
//!   network, and caps on processes, memory and CPU time.
//! - [`Support`] says what this machine can enforce (asked of the kernel in
//!   a process of its own), and [`Policy::gaps`] what of a policy would not
//!   hold here: `serve --check` and `toolgate sandbox check` print them.
//! - The launcher ([`launch`], [`enter`]) is a mode of the `toolgate` binary
//!   the gateway starts instead of the server: it makes namespaces (PID and
//!   mount for a `/proc` of the server's own, network for `none` and
//!   `loopback`), cgroups for the caps, restricts itself with Landlock, drops
//!   every capability, then starts the server, which inherits all of it.
//!   With [`Mode::Enforce`] (the default) a rule the kernel cannot enforce
//!   refuses the start; with [`Mode::BestEffort`] each is logged.
//!
//! Elsewhere than Linux there is no launcher: [`Support`] reports nothing
//! enforceable, so an enforced sandbox refuses to start.

#[cfg(target_os = "linux")]
mod cgroup;
pub mod install;
#[cfg(target_os = "linux")]
mod landlock;
#[cfg(target_os = "linux")]
pub use landlock::CEILING_VAR;
#[cfg(target_os = "linux")]
mod launch;
#[cfg(target_os = "linux")]
mod netlink;
mod policy;
mod probe;
mod profile;

pub use install::ServerCommand;
#[cfg(target_os = "linux")]
pub use launch::{REFUSED, enter, launch};
pub use policy::{Endpoint, LANDLOCK_ABI, Mode, Network, Policy, Stage};
pub use probe::Support;
pub use profile::{DEFAULT_PROCESSES, DEVICES, Profile, Request, SYSTEM_READ};

/// Why a sandbox could not be set up or described.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The launcher was given a policy it cannot read.
    #[error("the sandbox policy is not valid: {0}")]
    Policy(String),
    /// The launcher could not be run or found.
    #[error("cannot run the sandbox launcher: {0}")]
    Launcher(String),
    /// Landlock refused the rules.
    #[error("Landlock: {0}")]
    Landlock(String),
    /// A step of setting up the sandbox failed.
    #[error("{0}")]
    Setup(String),
    /// A configured path is not usable.
    #[error("{0}")]
    Path(String),
}
