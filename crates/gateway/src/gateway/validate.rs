//! The one validation a configuration passes before it runs: at start and
//! at every reload (SIGHUP, `--watch`, the console's Reload button), so a
//! file start would refuse is never applied by a reload.
//!
//! Layer: the gateway's lifecycle, below start and reload (it imports the
//! configuration, the policy, budgets and loops, and names; nothing that
//! imports it). Two checks: what the file says compiles ([`check`]), and
//! the tools the upstreams list do not share a gateway name
//! ([`unique_offered`]), counted after each upstream's `include` and
//! `exclude`, since excluding a tool is one way to settle a clash.
//!
//! Layer: `gateway`.

use std::sync::Arc;

use toolgate_protocol::types::Tool;

use crate::base::names::{Collision, check_unique, qualify};
use crate::config::{GatewayConfig, UpstreamConfig};
use crate::decide::budget::Budgets;
use crate::decide::policy::Policy;

use super::GatewayError;

/// What a configuration compiles to, once checked.
pub(super) struct Checked {
    /// `[policy]`, compiled.
    pub policy: Arc<Policy>,
    /// `[[budget]]`, compiled.
    pub budgets: Arc<Budgets>,
}

/// Check what `config` says by itself: its policy, `[loops]` and
/// `[[budget]]` compile.
pub(super) fn check(config: &GatewayConfig) -> Result<Checked, GatewayError> {
    let policy = Arc::new(Policy::new(&config.policy)?);
    crate::decide::loops::Loops::new(&config.loops)?;
    let budgets = Arc::new(Budgets::new(&config.budget)?);
    Ok(Checked { policy, budgets })
}

/// Check that the tools the upstreams offer have distinct gateway names:
/// each upstream's configuration with the names of the tools it listed.
pub(super) fn unique_offered<'a>(
    listed: impl IntoIterator<Item = (&'a UpstreamConfig, Vec<&'a str>)>,
) -> Result<(), Collision> {
    let names: Vec<(String, &str, &str)> = listed
        .into_iter()
        .flat_map(|(config, tools)| {
            let prefix = config.prefix();
            tools
                .into_iter()
                .filter(|t| config.offers(t))
                .map(move |t| (qualify(&prefix, t), config.name.as_str(), t))
                .collect::<Vec<_>>()
        })
        .collect();
    check_unique(names.iter().map(|(n, s, t)| (n.as_str(), *s, *t)))
}

/// The names of `tools`, for [`unique_offered`].
pub(super) fn names_of(tools: &[Tool]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream(name: &str, prefix: &str, exclude: &[&str]) -> UpstreamConfig {
        let mut text =
            format!("[servers.{name}]\nurl = \"http://127.0.0.1:9/mcp\"\nprefix = \"{prefix}\"\n");
        if !exclude.is_empty() {
            text.push_str(&format!("exclude = {exclude:?}\n"));
        }
        let config = GatewayConfig::parse_toml(&text, |_| None).unwrap();
        config.servers[name].clone()
    }

    #[test]
    fn a_clash_is_named_unless_one_side_excludes_it() {
        let a = upstream("a", "rec", &[]);
        let b = upstream("b", "rec", &[]);
        let e = unique_offered([(&a, vec!["memo", "x"]), (&b, vec!["memo"])]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "tool name \"rec.memo\" is offered by both a/memo and b/memo; give one of them another prefix"
        );
        let b = upstream("b", "rec", &["memo"]);
        assert!(unique_offered([(&a, vec!["memo"]), (&b, vec!["memo"])]).is_ok());
    }
}
