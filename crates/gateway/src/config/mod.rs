//! The gateway's configuration: `toolgate.toml`, or the `mcpServers` JSON
//! file desktop and editor hosts write. Both name each upstream by its key.
//!
//! TOML is strict: an unknown key is an error naming the key and its line.
//! A hosts' JSON file is read as hosts read it: `"disabled": true` keeps
//! the entry without starting it, `autoApprove` becomes an allow rule for
//! those tools (everything else is confirmed, the built-in default), and
//! keys toolgate does not use are reported once and otherwise ignored.
//! `${VAR}` in `command`, `args`, `env`, `cwd`, `url`, `headers`,
//! `oauth`, `identity` and a sandbox's paths is
//! replaced by the environment variable `VAR` (an unset one is an error);
//! `$${` writes a literal `${`.
//!
//! ```
//! use toolgate_gateway::config::GatewayConfig;
//! let config = GatewayConfig::parse_toml(r#"
//!     [servers.basket]
//!     command = "target/release/basket"
//!     [servers.remote]
//!     url = "http://127.0.0.1:9000/mcp"
//!     prefix = "r"
//! "#, |_| None).unwrap();
//! assert_eq!(config.servers["remote"].prefix(), "r");
//! assert_eq!(config.servers["basket"].prefix(), "basket");
//! # let dotted = GatewayConfig::parse_json(r#"{"mcpServers": {"github.com/org": {"url": "https://h/mcp"}}}"#, |_| None).unwrap();
//! # assert_eq!(dotted.servers["github.com/org"].prefix(), "github_com_org");
//! ```
//!
//! Layer: `config`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod approval;
mod auth;
mod disclosure;
mod endpoint;
mod flows;
mod identity;
mod limits;
mod observe;
mod policy;
mod sandbox;
mod secret;
mod size;
mod upstream;

pub use approval::{ApprovalConfig, ConsoleConfig};
pub use auth::{AuthConfig, SignIn};
pub use disclosure::{CALL_TOOL, Disclosure, FIND_TOOLS};
pub use endpoint::{
    DEFAULT_PATH, EndpointAuth, EndpointConfig, EndpointRateLimit, Narrow, ShapeConfig,
    valid_endpoint_name,
};
pub use flows::{ClassesConfig, FlowKey, FlowRule, FlowRuleConfig, FlowsConfig};
pub use identity::{IdentityConfig, IdentityMode, IdentityScopes};
pub use limits::{
    BudgetConfig, Cap, LoopsConfig, OnOutage, Period, RateLimitConfig, RateLimitRule,
};
pub(crate) use limits::{Cost, check_budgets};
pub use observe::{AuditConfig, AuditDurability, TelemetryConfig};
pub use policy::{Action, LONGEST, PolicyConfig, RuleConfig};
pub use sandbox::{NetworkConfig, SandboxConfig, SandboxMode, SandboxTable};
pub use secret::{Secret, Secrets, Shape};
pub use size::{ByteSize, SizeError};
pub use upstream::{HttpKind, UpstreamConfig, UpstreamOAuth, default_prefix};

/// A configuration problem, said so a person can fix it, with what failed
/// underneath when something did (a file that cannot be read, a TOML
/// syntax error, a server setting the SDK refuses).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ConfigError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl ConfigError {
    /// A problem said in `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }

    /// A problem said in `message`, caused by `source`.
    pub fn because(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    /// The same problem, said as being in `place` (a file).
    pub fn within(self, place: &str) -> Self {
        Self {
            message: format!("{place}: {}", self.message),
            source: self.source,
        }
    }

    /// What is wrong, without its cause.
    pub fn message(&self) -> &str {
        &self.message
    }
}

fn err(message: impl Into<String>) -> ConfigError {
    ConfigError::new(message)
}

/// The 1-based line of the first TOML string that holds exactly `value`.
fn line_of(text: &str, value: &str) -> Option<usize> {
    let quoted = [format!("{value:?}"), format!("'{value}'")];
    text.lines()
        .position(|line| quoted.iter().any(|q| line.contains(q.as_str())))
        .map(|i| i + 1)
}

/// The whole configuration.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GatewayConfig {
    /// One table per upstream server; the key is its name.
    #[serde(default)]
    pub servers: BTreeMap<String, UpstreamConfig>,
    /// `[endpoints.NAME]`: virtual servers beside the default one at
    /// `/mcp`, each with its own tools, policy, budgets and callers.
    #[serde(default)]
    pub endpoints: BTreeMap<String, EndpointConfig>,
    /// Who may call which tool, and which calls a person approves first.
    #[serde(default)]
    pub policy: PolicyConfig,
    /// Calls per minute, per caller and tool.
    #[serde(default)]
    pub ratelimit: RateLimitConfig,
    /// A model that keeps retrying a failing call is stopped.
    #[serde(default)]
    pub loops: LoopsConfig,
    /// Flow control: what a call may do after untrusted content or
    /// private data entered its conversation.
    #[serde(default)]
    pub flows: FlowsConfig,
    /// What calls cost, and caps on what callers spend.
    #[serde(default)]
    pub budget: Vec<BudgetConfig>,
    /// How `requestState` is sealed (approvals and relayed questions).
    #[serde(default)]
    pub state: StateConfig,
    /// The audit store.
    #[serde(default)]
    pub audit: AuditConfig,
    /// State shared by several instances (the audit store and approval
    /// nonces in PostgreSQL).
    #[serde(default)]
    pub store: StoreConfig,
    /// Traces exported over OTLP.
    #[serde(default)]
    pub telemetry: TelemetryConfig,
    /// The approval page, for clients that cannot show a form.
    #[serde(default)]
    pub approval: ApprovalConfig,
    /// The console: upstreams, tools, approvals, calls, grants and the
    /// configuration, in a browser (off unless given).
    pub console: Option<ConsoleConfig>,
    /// Verified callers over HTTP (JWT bearer tokens); without it, callers
    /// are anonymous and the gateway should stay on loopback.
    pub auth: Option<AuthConfig>,
    /// The file this configuration was read from.
    #[serde(skip)]
    #[schemars(skip)]
    pub source: Option<PathBuf>,
}

/// `[store]`.
#[derive(Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// `postgres://user:password@host/db`: the audit store and the
    /// approval nonces live there, shared by every instance, instead of the
    /// SQLite file. Write the password as `${VAR}`.
    pub url: Option<String>,
}

impl std::fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreConfig")
            .field(
                "url",
                &self.url.as_deref().map(crate::base::redact::store_url),
            )
            .finish()
    }
}

/// `[state]`.
#[derive(Clone, Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StateConfig {
    /// A file holding the secret that seals `requestState` (at least 32
    /// characters, e.g. `openssl rand -hex 32`); every instance behind one
    /// endpoint needs the same. The environment variable
    /// `TOOLGATE_STATE_KEY` wins over it. Without either, a random key per
    /// process is used: approvals then only complete on the instance that
    /// asked.
    pub key_file: Option<PathBuf>,
    /// Seconds an approval question (and any relayed question) stays
    /// answerable. Default 300, at most 1800.
    pub ttl: Option<u64>,
}

fn yes() -> bool {
    true
}

/// A `${VAR}` of the configuration whose variable is not set (its name).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("${{{0}}} is not set in the environment")]
pub struct UnsetVariable(pub String);

/// `${VAR}` replaced from `env`; `$${` is a literal `${`. Fails on the
/// first unset variable.
///
/// ```
/// use toolgate_gateway::config::{UnsetVariable, expand};
/// let env = |name: &str| (name == "HOST").then(|| "db.internal".to_owned());
/// assert_eq!(expand("postgres://${HOST}/audit", &env).unwrap(), "postgres://db.internal/audit");
/// assert_eq!(expand("$${HOST}", &env).unwrap(), "${HOST}");
/// assert_eq!(expand("${TOKEN}", &env), Err(UnsetVariable("TOKEN".into())));
/// ```
pub fn expand(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, UnsetVariable> {
    if !text.contains('$') {
        return Ok(text.to_owned());
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i..];
        if let Some(tail) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = tail;
        } else if let Some(tail) = after.strip_prefix("${") {
            let Some(end) = tail.find('}') else {
                out.push_str(after);
                return Ok(out);
            };
            let var = &tail[..end];
            out.push_str(&env(var).ok_or_else(|| UnsetVariable(var.to_owned()))?);
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = &after[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Keys of a hosts' JSON entry that toolgate reads.
const JSON_KEYS: &[&str] = &[
    "command", "args", "env", "cwd", "url", "headers", "trusted", "type", "prefix", "include",
    "exclude", "timeout",
];

/// `autoApprove` of host entry `name`: the gateway names of those tools, as
/// globs matching exactly them.
fn auto_approve(
    name: &str,
    upstream: &UpstreamConfig,
    list: Option<&Value>,
) -> Result<Vec<String>, ConfigError> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    let tools: Option<Vec<&str>> = list
        .as_array()
        .and_then(|items| items.iter().map(Value::as_str).collect());
    let tools = tools.ok_or_else(|| {
        err(format!(
            "mcpServers.{name}.autoApprove is not a list of tool names"
        ))
    })?;
    let globs: Vec<String> = tools
        .iter()
        .map(|t| crate::base::names::exactly(&crate::base::names::qualify(&upstream.prefix(), t)))
        .collect();
    tracing::info!(server = %name, tools = ?globs, "autoApprove: these run without asking (allow rule)");
    Ok(globs)
}

/// Keys of a host's entry that toolgate reads as something of its own:
/// `disabled` (the entry is kept, not started) and `autoApprove` (tools the
/// host ran without asking: allow rules).
const HOST_KEYS: &[&str] = &["disabled", "autoApprove"];

impl GatewayConfig {
    /// Parse `toolgate.toml` text; `env` looks up `${VAR}`s.
    pub fn parse_toml(
        text: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let mut config: GatewayConfig =
            toml::from_str(text).map_err(|e| err(e.to_string().trim_end().to_owned()))?;
        config.refuse_foreign_globs(text)?;
        config.finish(&env)?;
        endpoint::check_endpoints(&config.endpoints, &config.servers, text)?;
        for (name, endpoint) in &config.endpoints {
            endpoint
                .policy
                .check()
                .map_err(|e| err(format!("[endpoints.{name}.policy] {}", e.message())))?;
            limits::check_budgets(&endpoint.budget)
                .map_err(|e| err(format!("[endpoints.{name}] {}", e.message())))?;
        }
        Ok(config)
    }

    /// Refuse, naming the key and the line, a policy glob written in
    /// another dialect's syntax (braces), which would load and match
    /// nothing — so a deny rule would quietly let its tools run.
    fn refuse_foreign_globs(&self, text: &str) -> Result<(), ConfigError> {
        for (i, rule) in self.policy.rules.iter().enumerate() {
            for (key, globs) in [("tools", &rule.tools), ("subjects", &rule.subjects)] {
                for glob in globs {
                    if let Some(why) = policy::unsupported(glob) {
                        let at =
                            line_of(text, glob).map_or(String::new(), |n| format!("line {n}: "));
                        return Err(err(format!(
                            "{at}policy rule {}, key `{key}`: glob {glob:?}: {why}",
                            i + 1
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Parse a hosts' `{"mcpServers": {…}}` JSON file.
    pub fn parse_json(
        text: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let root: Value =
            serde_json::from_str(text).map_err(|e| ConfigError::because("not valid JSON", e))?;
        let Some(servers) = root.get("mcpServers").and_then(Value::as_object) else {
            return Err(err(
                "no \"mcpServers\" object (the format desktop and editor hosts write)",
            ));
        };
        let mut config = GatewayConfig::default();
        let mut auto_approved = Vec::new();
        for (name, entry) in servers {
            let Some(object) = entry.as_object() else {
                return Err(err(format!("mcpServers.{name} is not an object")));
            };
            let ignored: Vec<&String> = object
                .keys()
                .filter(|k| !JSON_KEYS.contains(&k.as_str()) && !HOST_KEYS.contains(&k.as_str()))
                .collect();
            if !ignored.is_empty() {
                tracing::warn!(server = %name, keys = ?ignored, "keys toolgate does not use; ignored");
            }
            let known: serde_json::Map<String, Value> = object
                .iter()
                .filter(|(k, _)| JSON_KEYS.contains(&k.as_str()) && k.as_str() != "type")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let mut upstream: UpstreamConfig = serde_json::from_value(Value::Object(known))
                .map_err(|e| err(format!("mcpServers.{name}: {e}")))?;
            upstream.name = name.clone();
            // Hosts name the deprecated HTTP+SSE transport `"type": "sse"`.
            if object.get("type").and_then(Value::as_str) == Some("sse") {
                upstream.transport = Some(HttpKind::Sse);
            }
            match object.get("disabled") {
                None | Some(Value::Bool(false)) => {}
                Some(Value::Bool(true)) => upstream.enabled = false,
                Some(_) => {
                    return Err(err(format!(
                        "mcpServers.{name}.disabled is not true or false"
                    )));
                }
            }
            auto_approved.extend(auto_approve(name, &upstream, object.get("autoApprove"))?);
            config.servers.insert(name.clone(), upstream);
        }
        // What the host ran without asking runs without asking here too;
        // everything else follows the built-in default (confirm).
        if !auto_approved.is_empty() {
            config.policy.rules.push(RuleConfig {
                tools: auto_approved,
                effects: Vec::new(),
                subjects: Vec::new(),
                scopes: Vec::new(),
                action: Action::Allow,
                remember: None,
            });
        }
        config.finish(&env)?;
        Ok(config)
    }

    /// Read a configuration file: JSON when it ends in `.json` or starts
    /// with `{`, TOML otherwise. `${VAR}`s come from the process environment.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::because(format!("cannot read {}", path.display()), e))?;
        let env = |var: &str| std::env::var(var).ok();
        let json =
            path.extension().is_some_and(|e| e == "json") || text.trim_start().starts_with('{');
        let parsed = if json {
            Self::parse_json(&text, env)
        } else {
            Self::parse_toml(&text, env)
        };
        let mut config = parsed.map_err(|e| e.within(&path.display().to_string()))?;
        config.source = Some(path.to_owned());
        Ok(config)
    }

    fn finish(&mut self, env: &dyn Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        for (name, upstream) in &mut self.servers {
            upstream.name = name.clone();
            upstream.check()?;
            upstream.expand(env)?;
            if upstream.identity.is_some() && self.auth.is_none() {
                return Err(err(format!(
                    "server {name:?}: identity acts for the verified caller; it needs [auth]"
                )));
            }
            let user = upstream
                .identity
                .as_ref()
                .is_some_and(|i| i.mode == IdentityMode::User);
            if user && self.auth.as_ref().is_some_and(|a| a.sign_in.is_none()) {
                return Err(err(format!(
                    "server {name:?}: identity mode \"user\" signs people in on the connect page; give [auth.sign_in] (the gateway's client at the [auth] issuer)"
                )));
            }
            if user && !self.approval.page && self.console.is_none() {
                return Err(err(format!(
                    "server {name:?}: identity mode \"user\" sends people to the connect page; turn on [approval] page (or [console])"
                )));
            }
        }
        if let Some(secret) = self
            .auth
            .as_mut()
            .and_then(|a| a.sign_in.as_mut())
            .and_then(|s| s.client_secret.as_mut())
        {
            secret
                .expand(Shape::Hidden, env)
                .map_err(|unset| err(format!("[auth.sign_in]: {unset}")))?;
        }
        self.policy.check()?;
        self.loops.checked_window()?;
        self.flows.check()?;
        limits::check_budgets(&self.budget)?;
        limits::check_rate_rules(&self.ratelimit.rules, "ratelimit rule")?;
        if self.state.ttl == Some(0) {
            return Err(err("[state] ttl must be at least 1 second"));
        }
        // A spent round is remembered for NONCE_MARGIN: a state must expire
        // well before its nonce is forgotten, or it could be answered again.
        let most = crate::base::time::NONCE_MARGIN.as_secs() / 2;
        if self.state.ttl.is_some_and(|t| t > most) {
            return Err(err(format!(
                "[state] ttl must be at most {most} seconds (a spent round is remembered for {} s, and a state must expire well before that)",
                crate::base::time::NONCE_MARGIN.as_secs()
            )));
        }
        if let Some(url) = &mut self.ratelimit.redis {
            *url = expand(url, env).map_err(|unset| err(format!("[ratelimit] redis: {unset}")))?;
            if !url.starts_with("redis://") {
                return Err(err(format!(
                    "[ratelimit] redis {}: only redis:// URLs are supported",
                    crate::base::redact::store_url(url)
                )));
            }
        }
        if let Some(url) = &mut self.store.url {
            *url = expand(url, env).map_err(|unset| err(format!("[store] url: {unset}")))?;
            if !url.starts_with("postgres://") && !url.starts_with("postgresql://") {
                return Err(err(format!(
                    "[store] url {}: only postgres:// URLs are supported",
                    crate::base::redact::store_url(url)
                )));
            }
            if self.audit.path.is_some() {
                return Err(err(
                    "[store] url and [audit] path both name the audit store; keep one",
                ));
            }
        }
        Ok(())
    }

    /// `[approval] login_file`, a relative path taken beside the
    /// configuration file (as the audit store's).
    pub fn approval_login_file(&self) -> Option<PathBuf> {
        let file = self.approval.login_file.as_ref()?;
        if file.is_absolute() {
            return Some(file.clone());
        }
        let dir = self.source.as_deref().and_then(Path::parent);
        Some(dir.map_or_else(|| file.clone(), |d| d.join(file)))
    }

    /// Where the audit store lives: `[audit] path` (relative to the
    /// configuration file), or `toolgate-audit.db` beside the
    /// configuration file; `None` when `[audit] disabled`.
    pub fn audit_path(&self) -> Option<PathBuf> {
        if self.audit.disabled {
            return None;
        }
        let dir = self
            .source
            .as_deref()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .unwrap_or_default();
        Some(match &self.audit.path {
            Some(p) if p.is_absolute() => p.clone(),
            Some(p) => dir.join(p),
            None => dir.join("toolgate-audit.db"),
        })
    }

    /// The JSON Schema of `toolgate.toml` (published as
    /// `docs/gateway.schema.json`).
    pub fn json_schema() -> Value {
        serde_json::to_value(schemars::schema_for!(GatewayConfig)).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests;
