//! The Landlock domain of a sandbox: which paths it reads and writes, which
//! TCP ports it connects to, and the scopes that keep it from signalling
//! processes or reaching abstract unix sockets outside it. Inherited across
//! `exec` and by every child, and it cannot be lifted.
//!
//! Layer: used by the launcher's second stage (and the probe).

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, LandlockStatus, NetPort,
    Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};

use crate::SandboxError;
use crate::policy::{Mode, Network, Policy};

/// The ABI the rules are written for (see [`crate::policy::LANDLOCK_ABI`]).
const RULES: ABI = ABI::V6;

/// `TOOLGATE_SANDBOX_ABI=N`: act as if the kernel offered Landlock ABI `N`
/// at most — to see how a profile fares on an older kernel (`sandbox
/// check`, `best-effort`), and to test refusals on this one.
pub const CEILING_VAR: &str = "TOOLGATE_SANDBOX_ABI";

fn ceiling() -> Option<u8> {
    std::env::var(CEILING_VAR).ok()?.trim().parse().ok()
}

/// The rules' ABI under the ceiling, if one is set.
fn rules_abi() -> ABI {
    match ceiling() {
        Some(n) if n < crate::policy::LANDLOCK_ABI => ABI::from(i32::from(n)),
        _ => RULES,
    }
}

/// The kernel's Landlock ABI, as far as this crate knows ABIs (0: none).
/// Restricts the calling thread with an empty best-effort domain to ask.
pub fn abi() -> u8 {
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::Execute)
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self());
    let kernel = match status {
        Ok(status) => match status.landlock {
            LandlockStatus::Available { effective_abi, .. } => {
                effective_abi.to_string().parse().unwrap_or(0)
            }
            _ => 0,
        },
        Err(_) => 0,
    };
    ceiling().map_or(kernel, |c| kernel.min(c))
}

/// Restrict this process (and all it starts) to `policy`'s paths and
/// ports. `extra_read` are paths the launcher adds (its own `/proc`).
/// In [`Mode::BestEffort`] returns what the kernel did not enforce.
pub fn restrict(policy: &Policy, extra_read: &[&str]) -> Result<Vec<String>, SandboxError> {
    let level = match policy.mode {
        Mode::Enforce => CompatLevel::HardRequirement,
        Mode::BestEffort => CompatLevel::BestEffort,
    };
    let fail = |e: landlock::RulesetError| SandboxError::Landlock(e.to_string());
    let rules = rules_abi();
    if rules != RULES && policy.mode == Mode::Enforce {
        return Err(SandboxError::Landlock(format!(
            "ABI {rules} (of {}, {CEILING_VAR} is set): {}",
            crate::policy::LANDLOCK_ABI,
            crate::policy::missing_below(rules.to_string().parse().unwrap_or(0), &policy.network)
        )));
    }
    let mut ruleset = Ruleset::default()
        .set_compatibility(level)
        .handle_access(AccessFs::from_all(rules))
        .map_err(fail)?;
    // Below ABI 6 there are no scopes, below 4 no TCP rules: asking for an
    // empty set is an error, not a no-op.
    let scopes = Scope::from_all(rules);
    if !scopes.is_empty() {
        ruleset = ruleset.scope(scopes).map_err(fail)?;
    }
    let tcp = AccessNet::from_all(rules);
    let (net, ports): (_, Vec<u16>) = match &policy.network {
        // Outbound TCP is allowed: only listening is handled (and denied).
        Network::Outbound => (tcp & AccessNet::BindTcp, Vec::new()),
        Network::Ports(endpoints) => (tcp, endpoints.iter().map(|e| e.port).collect()),
        // Its own network namespace is the boundary: it may listen and
        // connect there (a server driving a helper over localhost).
        Network::Loopback => (BitFlags::EMPTY, Vec::new()),
        Network::None => (tcp, Vec::new()),
    };
    let ports = if net.is_empty() { Vec::new() } else { ports };
    if !net.is_empty() {
        ruleset = ruleset.handle_access(net).map_err(fail)?;
    }
    let read = policy
        .read
        .iter()
        .map(|p| p.as_path())
        .chain(extra_read.iter().map(std::path::Path::new));
    let created = ruleset
        .create()
        .map_err(fail)?
        .add_rules(path_beneath_rules(read, AccessFs::from_read(rules)))
        .map_err(fail)?
        .add_rules(path_beneath_rules(&policy.write, AccessFs::from_all(rules)))
        .map_err(fail)?
        .add_rules(
            ports
                .into_iter()
                .map(|p| Ok::<_, landlock::RulesetError>(NetPort::new(p, AccessNet::ConnectTcp))),
        )
        .map_err(fail)?;
    let status = created.restrict_self().map_err(fail)?;
    let mut gaps = Vec::new();
    match status.ruleset {
        RulesetStatus::FullyEnforced if rules == RULES => {}
        RulesetStatus::PartiallyEnforced => gaps.push(format!(
            "Landlock enforced part of the rules (kernel ABI below {})",
            crate::policy::LANDLOCK_ABI
        )),
        RulesetStatus::FullyEnforced => gaps.push(format!(
            "Landlock ABI {rules} (of {}): {}",
            crate::policy::LANDLOCK_ABI,
            crate::policy::missing_below(rules.to_string().parse().unwrap_or(0), &policy.network)
        )),
        RulesetStatus::NotEnforced => gaps.push(
            "Landlock enforced nothing: the server can read and write every file the gateway can"
                .to_owned(),
        ),
    }
    if !status.no_new_privs {
        gaps.push("no_new_privs is not set".to_owned());
    }
    Ok(gaps)
}
