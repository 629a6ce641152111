//! Gateway tool names: `<prefix>.<tool>` by [`qualify`] (the protocol
//! crate's one rule), and the check that no two upstream tools share one.
//!
//! Layer: `base`.

use std::collections::BTreeMap;

pub use toolgate_protocol::names::qualify;

/// A policy pattern that matches the tool `name` and nothing else (its
/// `*`, `?`, `[` and `]` taken literally): how a host's exact tool names
/// (`autoApprove`) become rules.
pub fn exactly(name: &str) -> String {
    glob::Pattern::escape(name)
}

/// Two upstream tools that would share a gateway name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "tool name {name:?} is offered by both {first} and {second}; give one of them another prefix"
)]
pub struct Collision {
    /// The gateway name.
    pub name: String,
    /// `server/tool` of the first.
    pub first: String,
    /// `server/tool` of the second.
    pub second: String,
}

/// Check that `(gateway name, server, tool)` triples are unique by name.
pub fn check_unique<'a>(
    names: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
) -> Result<(), Collision> {
    let mut seen: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
    for (name, server, tool) in names {
        if let Some((s, t)) = seen.insert(name, (server, tool)) {
            return Err(Collision {
                name: name.to_owned(),
                first: format!("{s}/{t}"),
                second: format!("{server}/{tool}"),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_shortened_deterministically_and_stay_distinct() {
        let a = qualify("server", &format!("{}a", "t".repeat(130)));
        let b = qualify("server", &format!("{}b", "t".repeat(130)));
        assert_eq!(
            a.chars().count(),
            toolgate_protocol::names::TOOL_NAME_MAX_LEN
        );
        assert_ne!(a, b);
        assert_eq!(a, qualify("server", &format!("{}a", "t".repeat(130))));
    }

    #[test]
    fn collisions_name_both_upstreams_and_the_tool() {
        let e = check_unique([("x.t", "a", "t"), ("x.t", "b", "t")]).unwrap_err();
        assert_eq!(e.first, "a/t");
        assert_eq!(e.second, "b/t");
        assert!(e.to_string().contains("\"x.t\""));
        assert!(check_unique([("a.t", "a", "t"), ("b.t", "b", "t")]).is_ok());
    }
}
