//! `[endpoints.NAME]`: virtual servers on the gateway's listener, each
//! with the tools it offers, its own policy rules, budgets and callers,
//! and the tools shaped for the model that reads them (`[endpoints.NAME.
//! shape."prefix.tool"]`).
//!
//! Layer: `config`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{BudgetConfig, ConfigError, PolicyConfig, RateLimitRule, UpstreamConfig, err, line_of};

/// Where the default endpoint is served; an endpoint given this path takes
/// its place.
pub const DEFAULT_PATH: &str = "/mcp";

/// `[endpoints.NAME]`: what one endpoint offers, and to whom.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EndpointConfig {
    /// Where it is served on the `--http` listener (default `/mcp/NAME`).
    /// An endpoint at `/mcp` takes the default endpoint's place.
    pub path: Option<String>,
    /// Globs on the gateway tool name (`prefix.tool`) of the tools it
    /// offers; any of them.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Upstreams (by their key in `[servers]`) whose every tool it offers.
    #[serde(default)]
    pub servers: Vec<String>,
    /// What `server/discover` tells the model about this endpoint.
    pub instructions: Option<String>,
    /// Rules checked after the global `[policy]`, which always applies
    /// first: the stricter decision holds (deny over confirm over allow),
    /// so an endpoint narrows and never widens. Its `default`, when set,
    /// decides the calls none of its rules match.
    #[serde(default)]
    pub policy: PolicyConfig,
    /// Budgets of calls through this endpoint, on top of the global
    /// `[[budget]]`. Unnamed ones are kept as `NAME/<globs>`.
    #[serde(default)]
    pub budget: Vec<BudgetConfig>,
    /// Rate limits of calls through this endpoint, on top of the file's
    /// `[ratelimit]` (which count a caller's calls of a tool wherever they
    /// come from).
    #[serde(default)]
    pub ratelimit: EndpointRateLimit,
    /// With `[auth]`: who may call this endpoint.
    pub auth: Option<EndpointAuth>,
    /// How its tools look to the model, by gateway tool name.
    #[serde(default)]
    pub shape: BTreeMap<String, ShapeConfig>,
    /// How the model learns of its tools: `"list"` (default) lists every
    /// one; `"search"` lists the `pinned` ones beside `find_tools` and
    /// `call_tool`, through which the model finds and calls the rest.
    #[serde(default)]
    pub disclosure: super::Disclosure,
    /// With `disclosure = "search"`: globs on the gateway tool name
    /// (`prefix.tool`) of the tools listed anyway.
    #[serde(default)]
    pub pinned: Vec<String>,
}

/// `[endpoints.NAME.ratelimit]`.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EndpointRateLimit {
    /// Checked in order; the first whose globs match a tool sets its
    /// limit per caller on this endpoint.
    #[serde(default)]
    pub rules: Vec<RateLimitRule>,
}

impl EndpointRateLimit {
    /// The per-caller limit of the gateway tool `name` on this endpoint:
    /// the first matching rule's.
    pub fn per_minute(&self, name: &str) -> Option<u32> {
        super::limits::first_rule(&self.rules, name)
    }
}

/// `[endpoints.NAME.auth]`.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EndpointAuth {
    /// The canonical URI callers reach this endpoint at, which tokens
    /// must be issued for (`aud`). Default: `[auth] audience`'s origin
    /// followed by the endpoint's path.
    pub audience: Option<String>,
    /// Scopes a token needs, all of them, to call this endpoint at all.
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// `[endpoints.NAME.shape."prefix.tool"]`: what the model reads of one
/// tool. What the person approves and the audit store keeps is the
/// upstream's tool and the arguments as forwarded.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShapeConfig {
    /// The tool's name on this endpoint.
    pub name: Option<String>,
    /// Its title.
    pub title: Option<String>,
    /// Its description, instead of the upstream's.
    pub description: Option<String>,
    /// Said after the description (the upstream's, or `description`).
    pub description_append: Option<String>,
    /// Parameters the model never sees, with the value every call sends:
    /// removed from the schema, put into the forwarded arguments. A call
    /// that supplies one anyway is refused.
    #[serde(default)]
    pub fixed: BTreeMap<String, Value>,
    /// Parameters the model may only give narrower values for.
    #[serde(default)]
    pub narrow: BTreeMap<String, Narrow>,
    /// Not offered on this endpoint at all.
    #[serde(default)]
    pub hidden: bool,
}

/// Tighter bounds for one parameter; each must accept no value the
/// upstream's schema refuses (checked when the upstream lists the tool).
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Narrow {
    /// The only values allowed.
    #[serde(rename = "enum")]
    pub one_of: Option<Vec<Value>>,
    /// The smallest number allowed.
    pub minimum: Option<f64>,
    /// The largest number allowed.
    pub maximum: Option<f64>,
    /// The fewest characters allowed.
    pub min_length: Option<u64>,
    /// The most characters allowed.
    pub max_length: Option<u64>,
    /// A regular expression a string must match (besides any of the
    /// upstream's).
    pub pattern: Option<String>,
}

/// What an endpoint name may be: a path segment and a metric label,
/// starting with a letter or digit (`-` alone means the default endpoint
/// to `toolgate log --endpoint`).
pub fn valid_endpoint_name(name: &str) -> bool {
    name.len() <= 64
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

impl EndpointConfig {
    /// Where the endpoint `name` is served.
    pub fn path_of(&self, name: &str) -> String {
        self.path.clone().unwrap_or_else(|| format!("/mcp/{name}"))
    }

    /// Whether it offers the gateway tool `tool` of the upstream `server`
    /// (its key): named by a glob, or its upstream listed.
    pub fn selects(&self, server: &str, tool: &str) -> bool {
        self.servers.iter().any(|s| s == server)
            || self
                .tools
                .iter()
                .any(|g| glob::Pattern::new(g).is_ok_and(|p| p.matches(tool)))
    }
}

/// Whether `endpoint` can offer the gateway tool `tool`, judged by name:
/// some upstream it lists has the tool's prefix, or a glob matches it.
fn offers(
    endpoint: &EndpointConfig,
    servers: &BTreeMap<String, UpstreamConfig>,
    tool: &str,
) -> bool {
    servers.iter().any(|(key, upstream)| {
        let prefix = upstream.prefix();
        let under = prefix.is_empty()
            || tool
                .strip_prefix(prefix.as_str())
                .is_some_and(|rest| rest.starts_with('.'));
        under && endpoint.selects(key, tool)
    })
}

/// Refuse, naming the key and its line, endpoints that cannot work: a bad
/// name or path, two at one path, no tools named, an upstream that is not
/// configured, two shapes giving one name, a shape of a tool the endpoint
/// does not offer.
pub(crate) fn check_endpoints(
    endpoints: &BTreeMap<String, EndpointConfig>,
    servers: &BTreeMap<String, UpstreamConfig>,
    text: &str,
) -> Result<(), ConfigError> {
    let at = |value: &str| line_of(text, value).map_or(String::new(), |n| format!("line {n}: "));
    let mut paths: BTreeMap<String, &str> = BTreeMap::new();
    for (name, endpoint) in endpoints {
        if !valid_endpoint_name(name) {
            return Err(err(format!(
                "[endpoints.{name}]: an endpoint name is 1 to 64 of a-z, 0-9, - and _, starting with a letter or digit (it is a path segment and a metric label)"
            )));
        }
        let path = endpoint.path_of(name);
        if !path.starts_with('/') || path.contains(['?', '#', ' ']) || path.ends_with('/') {
            return Err(err(format!(
                "{}[endpoints.{name}] path {path:?} is not an absolute path without a trailing '/', query or fragment",
                at(&path)
            )));
        }
        if path.starts_with("/.well-known/") || path == "/healthz" || path == "/readyz" {
            return Err(err(format!(
                "{}[endpoints.{name}] path {path:?} is taken by the gateway itself",
                at(&path)
            )));
        }
        if let Some(other) = paths.insert(path.clone(), name) {
            return Err(err(format!(
                "{}[endpoints.{name}] path {path:?} is also [endpoints.{other}]'s; give each its own",
                at(&path)
            )));
        }
        if endpoint.tools.is_empty() && endpoint.servers.is_empty() {
            return Err(err(format!(
                "[endpoints.{name}] offers nothing: name its tools (`tools = [\"prefix.*\"]`) or its upstreams (`servers = [\"key\"]`)"
            )));
        }
        for server in &endpoint.servers {
            if !servers.contains_key(server) {
                let known: Vec<&str> = servers.keys().map(String::as_str).collect();
                return Err(err(format!(
                    "{}[endpoints.{name}] servers names {server:?}, which is not in [servers] (known: {})",
                    at(server),
                    known.join(", ")
                )));
            }
        }
        super::disclosure::check(name, endpoint)?;
        super::limits::check_rate_rules(
            &endpoint.ratelimit.rules,
            &format!("[endpoints.{name}.ratelimit] rule"),
        )?;
        for glob in &endpoint.tools {
            glob::Pattern::new(glob).map_err(|e| {
                err(format!(
                    "{}[endpoints.{name}] tools: {glob:?} is not a glob: {e}",
                    at(glob)
                ))
            })?;
        }
        let mut shown: BTreeMap<&str, &str> = BTreeMap::new();
        for (tool, shape) in &endpoint.shape {
            if let Some(new) = &shape.name
                && let Err(why) = toolgate_protocol::names::validate_tool_name(new)
            {
                return Err(err(format!(
                    "{}[endpoints.{name}.shape.\"{tool}\"] name {new:?}: {why}",
                    at(new)
                )));
            }
            if !offers(endpoint, servers, tool) {
                return Err(err(format!(
                    "{}[endpoints.{name}.shape.\"{tool}\"]: the endpoint does not offer {tool:?} (not matched by its tools or servers); shape only what it offers",
                    at(tool)
                )));
            }
            if shape.hidden {
                continue;
            }
            let as_shown = shape.name.as_deref().unwrap_or(tool);
            if let Some(other) = shown.insert(as_shown, tool) {
                return Err(err(format!(
                    "{}[endpoints.{name}.shape]: \"{tool}\" and \"{other}\" would both be called {as_shown:?}; give one another name",
                    at(as_shown)
                )));
            }
            for (param, narrow) in &shape.narrow {
                if let Some(pattern) = &narrow.pattern {
                    let schema = serde_json::json!({"type": "string", "pattern": pattern});
                    toolgate_schema::CompiledSchema::compile(&schema).map_err(|e| {
                        err(format!(
                            "{}[endpoints.{name}.shape.\"{tool}\".narrow.{param}] pattern is not a regular expression: {e}",
                            at(pattern)
                        ))
                    })?;
                }
                if let (Some(lo), Some(hi)) = (narrow.minimum, narrow.maximum)
                    && lo > hi
                {
                    return Err(err(format!(
                        "[endpoints.{name}.shape.\"{tool}\".narrow.{param}] minimum {lo} is above maximum {hi}"
                    )));
                }
                if shape.fixed.contains_key(param) {
                    return Err(err(format!(
                        "[endpoints.{name}.shape.\"{tool}\"]: {param:?} is both fixed and narrowed; a fixed parameter has one value"
                    )));
                }
            }
        }
    }
    Ok(())
}
