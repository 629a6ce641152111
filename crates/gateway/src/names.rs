//! Gateway tool names: `<prefix>.<tool>`, at most 128 characters, the same
//! on every start.

use std::collections::BTreeMap;

use sha2::{Digest as _, Sha256};

/// The longest tool name the specification allows.
pub const MAX_NAME: usize = 128;

/// The name a downstream client sees for `tool` of an upstream with
/// `prefix` (`""`: no prefix). Dots are the specification's namespace
/// separator. A name over 128 characters keeps its beginning and
/// ends with `-` and 8 hex digits of the SHA-256 of the full name, so it
/// stays unique and does not change between restarts.
///
/// ```
/// use toolgate_gateway::qualify;
/// assert_eq!(qualify("basket", "add_item"), "basket.add_item");
/// assert_eq!(qualify("", "add_item"), "add_item");
/// let long = qualify("p", &"x".repeat(200));
/// assert_eq!(long.len(), 128);
/// assert_eq!(long, qualify("p", &"x".repeat(200)));
/// ```
pub fn qualify(prefix: &str, tool: &str) -> String {
    let full = if prefix.is_empty() {
        tool.to_owned()
    } else {
        format!("{prefix}.{tool}")
    };
    if full.chars().count() <= MAX_NAME {
        return full;
    }
    let digest = Sha256::digest(full.as_bytes());
    let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    let keep: String = full.chars().take(MAX_NAME - hex.len() - 1).collect();
    format!("{keep}-{hex}")
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
        assert_eq!(a.chars().count(), MAX_NAME);
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
