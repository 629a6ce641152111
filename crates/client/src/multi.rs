//! Several servers behind one tool namespace.
//!
//! Each server gets a prefix; its tools appear as `prefix.tool`, named by the
//! same rule as the gateway's ([`qualify`]: a name over 128 characters is
//! shortened with a hash of the whole). Prefixes may not contain `.`, so no
//! server can shadow another's tool, whatever names they choose.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use toolgate_protocol::names::{qualify, validate_tool_name};
use toolgate_protocol::types::{CallToolResult, Tool};

use crate::{CallOptions, Client, ClientError};

/// Why a set of servers cannot be combined.
#[derive(Debug, thiserror::Error)]
pub enum MultiError {
    /// A prefix is not a usable name fragment.
    #[error("prefix {0:?} must be 1-64 characters of letters, digits, '_' or '-'")]
    BadPrefix(String),
    /// Two servers share a prefix.
    #[error("two servers use the prefix {0:?}")]
    DuplicatePrefix(String),
}

/// A tool of one of the servers, under its qualified name.
#[derive(Clone, Debug)]
pub struct QualifiedTool {
    /// `prefix.name`.
    pub qualified_name: String,
    /// The server's prefix.
    pub server: String,
    /// The definition as the server sent it (with its own name).
    pub tool: Tool,
}

/// Clients of several servers, each under a prefix.
pub struct MultiClient {
    servers: BTreeMap<String, Client>,
    /// Qualified name → (prefix, the server's name), from the last listing:
    /// a shortened name cannot be split back.
    named: parking_lot::RwLock<BTreeMap<String, (String, String)>>,
}

impl MultiClient {
    /// Combine `servers` (prefix, client).
    pub fn new(servers: impl IntoIterator<Item = (String, Client)>) -> Result<Self, MultiError> {
        let mut map = BTreeMap::new();
        for (prefix, client) in servers {
            let ok = !prefix.is_empty()
                && prefix.len() <= 64
                && prefix
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !ok {
                return Err(MultiError::BadPrefix(prefix));
            }
            if map.insert(prefix.clone(), client).is_some() {
                return Err(MultiError::DuplicatePrefix(prefix));
            }
        }
        Ok(Self {
            servers: map,
            named: Default::default(),
        })
    }

    /// Every server's tools, qualified. A server that fails to list is
    /// reported with its error; the others stay usable.
    pub async fn list_tools(&self) -> (Vec<QualifiedTool>, Vec<(String, ClientError)>) {
        let mut tools = Vec::new();
        let mut failures = Vec::new();
        let mut named = BTreeMap::new();
        for (prefix, client) in &self.servers {
            match client.list_tools().await {
                Ok(list) => {
                    for tool in list {
                        let qualified_name = qualify(prefix, &tool.name);
                        if let Err(e) = validate_tool_name(&qualified_name) {
                            tracing::warn!(server = %prefix, tool = %tool.name, reason = %e, "excluded: its qualified name is not a valid tool name");
                            continue;
                        }
                        named.insert(qualified_name.clone(), (prefix.clone(), tool.name.clone()));
                        tools.push(QualifiedTool {
                            qualified_name,
                            server: prefix.clone(),
                            tool,
                        });
                    }
                }
                Err(e) => failures.push((prefix.clone(), e)),
            }
        }
        *self.named.write() = named;
        (tools, failures)
    }

    /// Call `prefix.tool` (a name [`MultiClient::list_tools`] gave).
    pub async fn call_tool(
        &self,
        qualified_name: &str,
        arguments: Map<String, Value>,
        options: &CallOptions,
    ) -> Result<CallToolResult, ClientError> {
        let listed = self.named.read().get(qualified_name).cloned();
        let (prefix, name) = match &listed {
            Some((prefix, name)) => (prefix.as_str(), name.as_str()),
            None => qualified_name
                .split_once('.')
                .ok_or_else(|| ClientError::UnknownTool(qualified_name.to_owned()))?,
        };
        let client = self
            .servers
            .get(prefix)
            .ok_or_else(|| ClientError::UnknownTool(qualified_name.to_owned()))?;
        client.call_tool(name, arguments, options).await
    }
}
