//! `[endpoints.NAME] disclosure` and `pinned`: whether an endpoint lists
//! every tool, or lists a few and offers a search for the rest
//! (progressive disclosure), and the names of the two tools of the
//! gateway's own that the search brings.
//!
//! Layer: `config`.

use schemars::JsonSchema;
use serde::Deserialize;

use super::{ConfigError, EndpointConfig, err};

/// The tool that finds an endpoint's tools.
pub const FIND_TOOLS: &str = "find_tools";
/// The tool that calls a found tool.
pub const CALL_TOOL: &str = "call_tool";

/// How the model learns of an endpoint's tools.
#[derive(Clone, Copy, Debug, Default, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Disclosure {
    /// `tools/list` holds every tool (the default).
    #[default]
    List,
    /// `tools/list` holds the `pinned` tools, `find_tools` and
    /// `call_tool`; the model finds the others by what they do and calls
    /// them through `call_tool` (or by name). The list is the same
    /// whatever was searched.
    Search,
}

impl EndpointConfig {
    /// Whether the gateway tool `name` is listed on a searching endpoint.
    pub fn pins(&self, name: &str) -> bool {
        self.pinned
            .iter()
            .any(|g| glob::Pattern::new(g).is_ok_and(|p| p.matches(name)))
    }
}

/// Refuse `pinned` without a search, a glob that is not one, and a shape
/// that would give a tool the name of one of the search's own tools.
pub(super) fn check(name: &str, endpoint: &EndpointConfig) -> Result<(), ConfigError> {
    if endpoint.disclosure == Disclosure::List && !endpoint.pinned.is_empty() {
        return Err(err(format!(
            "[endpoints.{name}] pinned lists tools to show beside a search, but disclosure is \"list\" (every tool is listed); set disclosure = \"search\" or remove pinned"
        )));
    }
    for glob in &endpoint.pinned {
        glob::Pattern::new(glob).map_err(|e| {
            err(format!(
                "[endpoints.{name}] pinned: {glob:?} is not a glob: {e}"
            ))
        })?;
    }
    if endpoint.disclosure == Disclosure::Search {
        for (tool, shape) in &endpoint.shape {
            if let Some(new) = shape.name.as_deref()
                && (new == FIND_TOOLS || new == CALL_TOOL)
            {
                return Err(err(format!(
                    "[endpoints.{name}.shape.\"{tool}\"] name {new:?} is one of the search's own tools on this endpoint; choose another name"
                )));
            }
        }
    }
    Ok(())
}
