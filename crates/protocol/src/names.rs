//! Tool-name rules of the 2026-07-28 tools page, and the one rule by which
//! toolgate names a server's tool among many servers' ([`qualify`]).

use std::fmt;

use sha2::{Digest as _, Sha256};

/// Longest tool name allowed.
pub const TOOL_NAME_MAX_LEN: usize = 128;

/// Why a tool name breaks the rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ToolNameError {
    /// The name is empty.
    Empty,
    /// The name is longer than [`TOOL_NAME_MAX_LEN`] characters.
    TooLong(usize),
    /// The name contains a character outside `[A-Za-z0-9_.-]`.
    InvalidChar {
        /// The offending character.
        ch: char,
        /// Its character index.
        index: usize,
    },
}

impl fmt::Display for ToolNameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolNameError::Empty => write!(
                f,
                "a tool name must be 1 to 128 characters long; it is empty"
            ),
            ToolNameError::TooLong(n) => {
                write!(
                    f,
                    "a tool name must be 1 to 128 characters long; it has {n}"
                )
            }
            ToolNameError::InvalidChar { ch, index } => write!(
                f,
                "a tool name may only contain ASCII letters, digits, '_', '-' and '.'; found {ch:?} at position {index}"
            ),
        }
    }
}

impl std::error::Error for ToolNameError {}

/// Check a tool name: 1–128 characters, each one of `[A-Za-z0-9_.-]`.
///
/// ```
/// use toolgate_protocol::names::validate_tool_name;
/// assert!(validate_tool_name("admin.tools.list").is_ok());
/// assert!(validate_tool_name("get weather").is_err());
/// ```
pub fn validate_tool_name(name: &str) -> Result<(), ToolNameError> {
    if name.is_empty() {
        return Err(ToolNameError::Empty);
    }
    for (index, ch) in name.chars().enumerate() {
        if !(ch.is_ascii_alphanumeric() || matches!(ch, '_' | '-' | '.')) {
            return Err(ToolNameError::InvalidChar { ch, index });
        }
    }
    // All characters are ASCII here, so the byte length is the char count.
    if name.len() > TOOL_NAME_MAX_LEN {
        return Err(ToolNameError::TooLong(name.len()));
    }
    Ok(())
}

/// The name of `tool` of the server with `prefix` (`""`: no prefix) among
/// many servers' tools: `prefix.tool`, dots being the specification's
/// namespace separator. A name over [`TOOL_NAME_MAX_LEN`] characters keeps
/// its beginning and ends with `-` and 8 hex digits of the SHA-256 of the
/// full name, so it stays unique and is the same on every start. The
/// gateway and `MultiClient` both name tools by it.
///
/// ```
/// use toolgate_protocol::names::qualify;
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
    if full.chars().count() <= TOOL_NAME_MAX_LEN {
        return full;
    }
    let digest = Sha256::digest(full.as_bytes());
    let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    let keep: String = full
        .chars()
        .take(TOOL_NAME_MAX_LEN - hex.len() - 1)
        .collect();
    format!("{keep}-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_spec_examples() {
        for n in [
            "getUser",
            "DATA_EXPORT_v2",
            "admin.tools.list",
            "a",
            &"x".repeat(128),
        ] {
            assert_eq!(validate_tool_name(n), Ok(()), "{n}");
        }
    }

    #[test]
    fn names_the_broken_rule() {
        assert_eq!(validate_tool_name(""), Err(ToolNameError::Empty));
        assert_eq!(
            validate_tool_name(&"x".repeat(129)),
            Err(ToolNameError::TooLong(129))
        );
        assert_eq!(
            validate_tool_name("a/b"),
            Err(ToolNameError::InvalidChar { ch: '/', index: 1 })
        );
        assert_eq!(
            validate_tool_name("a,b"),
            Err(ToolNameError::InvalidChar { ch: ',', index: 1 })
        );
        assert!(matches!(
            validate_tool_name("天気"),
            Err(ToolNameError::InvalidChar { index: 0, .. })
        ));
    }
}
