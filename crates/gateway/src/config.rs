//! The gateway's configuration: `toolgate.toml`, or the `mcpServers` JSON
//! file desktop and editor hosts write. Both name each upstream by its key.
//!
//! TOML is strict: an unknown key is an error naming the key and its line.
//! A hosts' JSON file is read as hosts read it: `"disabled": true` keeps
//! the entry without starting it, `autoApprove` becomes an allow rule for
//! those tools (everything else is confirmed, the built-in default), and
//! keys toolgate does not use are reported once and otherwise ignored.
//! `${VAR}` in `command`, `args`, `env`, `cwd`, `url`, `headers` and
//! `oauth` is
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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A configuration problem, said so a person can fix it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

fn err(message: impl Into<String>) -> ConfigError {
    ConfigError(message.into())
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
    /// Who may call which tool, and which calls a person approves first.
    #[serde(default)]
    pub policy: crate::policy::PolicyConfig,
    /// Calls per minute, per caller and tool.
    #[serde(default)]
    pub ratelimit: RateLimitConfig,
    /// A model that keeps retrying a failing call is stopped.
    #[serde(default)]
    pub loops: crate::loops::LoopsConfig,
    /// What calls cost, and caps on what callers spend.
    #[serde(default)]
    pub budget: Vec<crate::budget::BudgetConfig>,
    /// How `requestState` is sealed (approvals and relayed questions).
    #[serde(default)]
    pub state: StateConfig,
    /// The audit store.
    #[serde(default)]
    pub audit: crate::audit::AuditConfig,
    /// State shared by several instances (the audit store and approval
    /// nonces in PostgreSQL).
    #[serde(default)]
    pub store: StoreConfig,
    /// Traces exported over OTLP.
    #[serde(default)]
    pub telemetry: crate::telemetry::TelemetryConfig,
    /// The approval page, for clients that cannot show a form.
    #[serde(default)]
    pub approval: crate::approval::ApprovalConfig,
    /// The console: upstreams, tools, approvals, calls, grants and the
    /// configuration, in a browser (off unless given).
    pub console: Option<crate::approval::console::ConsoleConfig>,
    /// Verified callers over HTTP (JWT bearer tokens); without it, callers
    /// are anonymous and the gateway should stay on loopback.
    pub auth: Option<crate::inbound::AuthConfig>,
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
            .field("url", &self.url.as_deref().map(crate::audit_pg::redact))
            .finish()
    }
}

/// `[ratelimit]`.
#[derive(Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Checked in order; the first whose globs match a tool sets its limit.
    #[serde(default)]
    pub rules: Vec<RateLimitRule>,
    /// `redis://[:password@]host[:port][/db]`: every budget (these rules'
    /// and each upstream's `per_minute`) is kept there, shared by every
    /// instance. Write the password as `${VAR}`.
    pub redis: Option<String>,
    /// What happens to a call while Redis cannot be asked: `refuse` (the
    /// default: fail closed) or `allow` (unlimited until it is back).
    #[serde(default)]
    pub on_outage: OnOutage,
}

/// `[ratelimit] on_outage`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OnOutage {
    /// Refuse the call (fail closed).
    #[default]
    Refuse,
    /// Let it through, unlimited, and log that it was.
    Allow,
}

impl std::fmt::Debug for RateLimitConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitConfig")
            .field("rules", &self.rules)
            .field("redis", &self.redis.as_deref().map(crate::audit_pg::redact))
            .field("on_outage", &self.on_outage)
            .finish()
    }
}

impl RateLimitConfig {
    /// The rate limit of the gateway tool `name`, per caller: the first
    /// matching rule's.
    pub fn per_minute(&self, name: &str) -> Option<u32> {
        self.rules
            .iter()
            .find(|r| {
                r.tools
                    .iter()
                    .any(|g| glob::Pattern::new(g).is_ok_and(|p| p.matches(name)))
            })
            .map(|r| r.per_minute)
    }
}

/// One `[[ratelimit.rules]]` entry.
#[derive(Clone, Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitRule {
    /// Globs on the gateway tool name.
    pub tools: Vec<String>,
    /// Calls per minute per caller and tool: a burst of this many, refilled
    /// at this rate (GCRA). Callers without a verified subject share one
    /// budget.
    pub per_minute: u32,
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

/// The prefix an upstream keyed `name` gets when it sets none: the key, with
/// characters but letters, digits and `-` replaced by `_`.
pub fn default_prefix(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// One upstream MCP server.
#[derive(Clone, Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// Start and serve it (default true). `false` keeps the entry without
    /// starting it (a host's `"disabled": true`).
    #[serde(default = "yes")]
    #[schemars(default = "yes")]
    pub enabled: bool,
    /// The program of a stdio server.
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment it gets on top of the minimal one (PATH, HOME, locale,
    /// temporary directory, proxy and CA settings).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its working directory.
    pub cwd: Option<PathBuf>,
    /// Give it the gateway's whole environment instead of the minimal one.
    #[serde(default)]
    pub inherit_env: bool,
    /// The HTTP endpoint of a remote server: Streamable HTTP (either era),
    /// or the event stream of a server on the deprecated 2024-11-05
    /// HTTP+SSE transport (detected, or see `transport`).
    pub url: Option<String>,
    /// How to speak to `url`: `streamable-http` or `sse` (the deprecated
    /// 2024-11-05 HTTP+SSE transport). Default: Streamable HTTP, falling
    /// back to HTTP+SSE as the spec's backwards-compatibility section
    /// describes.
    pub transport: Option<HttpKind>,
    /// Extra HTTP headers sent to it (credentials for the upstream; never
    /// the caller's token).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Prefix of its tools' names (`prefix.tool`); default: the key; `""`
    /// for none.
    pub prefix: Option<String>,
    /// Tool-name globs to offer (default: all).
    #[serde(default)]
    pub include: Vec<String>,
    /// Tool-name globs to withhold.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Count its annotations as facts rather than hints.
    #[serde(default)]
    pub trusted: bool,
    /// Seconds a call may take before it is cancelled (default 60).
    pub timeout: Option<u64>,
    /// Calls per minute this upstream takes from the gateway, all callers
    /// and tools together: a burst of this many, refilled at this rate.
    /// Default: unlimited.
    pub per_minute: Option<u32>,
    /// OAuth credentials of the gateway itself at an HTTP upstream that
    /// requires authorization (the caller's token is never passed on).
    pub oauth: Option<UpstreamOAuth>,
    /// The key this entry has in the file (filled in after loading).
    #[serde(skip)]
    #[schemars(skip)]
    pub name: String,
}

/// `transport` of an HTTP upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum HttpKind {
    /// Streamable HTTP only.
    StreamableHttp,
    /// The deprecated HTTP+SSE transport of 2024-11-05 (the `url` is its
    /// event stream, often `/sse`).
    Sse,
}

impl HttpKind {
    /// What the client transport does with it (`None`: detect).
    pub fn sse_mode(kind: Option<Self>) -> toolgate_client::transport::http::SseMode {
        use toolgate_client::transport::http::SseMode;
        match kind {
            None => SseMode::Detect,
            Some(HttpKind::StreamableHttp) => SseMode::Never,
            Some(HttpKind::Sse) => SseMode::Only,
        }
    }
}

/// The gateway's own OAuth client at an upstream: `client_credentials`
/// with a secret or a private key, or a workload identity token as a
/// JWT-bearer grant. Tokens are obtained on the upstream's first `401` and
/// renewed as they expire.
#[derive(Clone, Default, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpstreamOAuth {
    /// The gateway's client id at the upstream's authorization server.
    pub client_id: String,
    /// Its secret (write `${VAR}` to keep it out of the file).
    pub client_secret: Option<String>,
    /// A PKCS#8 PEM private key for `private_key_jwt`, instead of a secret.
    pub private_key_file: Option<PathBuf>,
    /// The key's algorithm: `ES256` (default) or `RS256`.
    pub signing_algorithm: Option<String>,
    /// A file holding a workload identity JWT, read afresh for each token:
    /// the JWT-bearer grant instead of client credentials.
    pub assertion_file: Option<PathBuf>,
    /// The issuer these credentials belong to; another authorization
    /// server is refused rather than sent them.
    pub issuer: Option<String>,
}

impl std::fmt::Debug for UpstreamOAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamOAuth")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("private_key_file", &self.private_key_file)
            .field("assertion_file", &self.assertion_file)
            .field("issuer", &self.issuer)
            .finish()
    }
}

impl UpstreamConfig {
    /// The prefix of its tool names: `prefix`, or the key with anything
    /// but letters, digits, `_` and `-` replaced by `_` (hosts' files use
    /// keys like `github.com/org`).
    pub fn prefix(&self) -> String {
        match &self.prefix {
            Some(prefix) => prefix.clone(),
            None => default_prefix(&self.name),
        }
    }

    /// How long one call may take.
    pub fn call_timeout(&self) -> Duration {
        Duration::from_secs(self.timeout.unwrap_or(60).max(1))
    }

    /// Whether the tool named `tool` (its upstream name) is offered.
    pub fn offers(&self, tool: &str) -> bool {
        let matches = |globs: &[String]| {
            globs
                .iter()
                .any(|g| glob::Pattern::new(g).is_ok_and(|p| p.matches(tool)))
        };
        (self.include.is_empty() || matches(&self.include)) && !matches(&self.exclude)
    }

    fn check(&self) -> Result<(), ConfigError> {
        let name = &self.name;
        if name.is_empty() {
            return Err(err("a server has an empty name"));
        }
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => {
                return Err(err(format!(
                    "server {name:?} has both a command and a url; give one"
                )));
            }
            (None, None) => {
                return Err(err(format!(
                    "server {name:?} has neither a command (stdio) nor a url (HTTP)"
                )));
            }
            (None, Some(url)) if !(url.starts_with("http://") || url.starts_with("https://")) => {
                return Err(err(format!(
                    "server {name:?}: url {url:?} is not http:// or https://"
                )));
            }
            _ => {}
        }
        if let Some(prefix) = &self.prefix
            && !prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(err(format!(
                "server {name:?}: prefix {prefix:?} may use letters, digits, '_' and '-' only"
            )));
        }
        for g in self.include.iter().chain(&self.exclude) {
            glob::Pattern::new(g).map_err(|e| err(format!("server {name:?}: glob {g:?}: {e}")))?;
        }
        if self.per_minute == Some(0) {
            return Err(err(format!(
                "server {name:?}: per_minute must be at least 1 (exclude its tools instead)"
            )));
        }
        if self.timeout == Some(0) {
            return Err(err(format!(
                "server {name:?}: timeout must be at least 1 second"
            )));
        }
        if self.transport.is_some() && self.url.is_none() {
            return Err(err(format!(
                "server {name:?}: transport applies to HTTP servers (give a url)"
            )));
        }
        if let Some(o) = &self.oauth {
            if self.url.is_none() {
                return Err(err(format!(
                    "server {name:?}: oauth applies to HTTP servers (give a url)"
                )));
            }
            let ways = [
                o.client_secret.is_some(),
                o.private_key_file.is_some(),
                o.assertion_file.is_some(),
            ];
            if ways.iter().filter(|w| **w).count() != 1 {
                return Err(err(format!(
                    "server {name:?}: oauth needs exactly one of client_secret, private_key_file or assertion_file"
                )));
            }
        }
        Ok(())
    }

    fn expand(&mut self, env: &dyn Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        let name = self.name.clone();
        let x = |text: &mut String| -> Result<(), ConfigError> {
            *text = expand(text, env).map_err(|var| {
                err(format!(
                    "server {name:?}: ${{{var}}} is not set in the environment"
                ))
            })?;
            Ok(())
        };
        if let Some(c) = &mut self.command {
            x(c)?;
        }
        for a in &mut self.args {
            x(a)?;
        }
        for v in self.env.values_mut() {
            x(v)?;
        }
        if let Some(u) = &mut self.url {
            x(u)?;
        }
        for v in self.headers.values_mut() {
            x(v)?;
        }
        if let Some(o) = &mut self.oauth {
            x(&mut o.client_id)?;
            for v in [&mut o.client_secret, &mut o.issuer].into_iter().flatten() {
                x(v)?;
            }
            for path in [&mut o.private_key_file, &mut o.assertion_file]
                .into_iter()
                .flatten()
            {
                let mut text = path.to_string_lossy().into_owned();
                x(&mut text)?;
                *path = PathBuf::from(text);
            }
        }
        if let Some(cwd) = &mut self.cwd {
            let mut text = cwd.to_string_lossy().into_owned();
            x(&mut text)?;
            *cwd = PathBuf::from(text);
        }
        Ok(())
    }
}

/// `${VAR}` replaced from `env`; `$${` is a literal `${`. `Err(VAR)` for
/// the first unset variable.
pub fn expand(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
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
            out.push_str(&env(var).ok_or_else(|| var.to_owned())?);
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
        .map(|t| glob::Pattern::escape(&crate::names::qualify(&upstream.prefix(), t)))
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
        Ok(config)
    }

    /// Refuse, naming the key and the line, a policy glob written in
    /// another dialect's syntax (braces), which would load and match
    /// nothing — so a deny rule would quietly let its tools run.
    fn refuse_foreign_globs(&self, text: &str) -> Result<(), ConfigError> {
        for (i, rule) in self.policy.rules.iter().enumerate() {
            for (key, globs) in [("tools", &rule.tools), ("subjects", &rule.subjects)] {
                for glob in globs {
                    if let Some(why) = crate::policy::unsupported(glob) {
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
            serde_json::from_str(text).map_err(|e| err(format!("not valid JSON: {e}")))?;
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
            config.policy.rules.push(crate::policy::RuleConfig {
                tools: auto_approved,
                effects: Vec::new(),
                subjects: Vec::new(),
                scopes: Vec::new(),
                action: crate::policy::Action::Allow,
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
            .map_err(|e| err(format!("cannot read {}: {e}", path.display())))?;
        let env = |var: &str| std::env::var(var).ok();
        let json =
            path.extension().is_some_and(|e| e == "json") || text.trim_start().starts_with('{');
        let parsed = if json {
            Self::parse_json(&text, env)
        } else {
            Self::parse_toml(&text, env)
        };
        let mut config = parsed.map_err(|e| err(format!("{}: {}", path.display(), e.0)))?;
        config.source = Some(path.to_owned());
        Ok(config)
    }

    fn finish(&mut self, env: &dyn Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        for (name, upstream) in &mut self.servers {
            upstream.name = name.clone();
            upstream.check()?;
            upstream.expand(env)?;
        }
        crate::policy::Policy::new(&self.policy)?;
        crate::loops::Loops::new(&self.loops)?;
        crate::budget::Budgets::new(&self.budget)?;
        for (i, rule) in self.ratelimit.rules.iter().enumerate() {
            if rule.per_minute == 0 {
                return Err(err(format!(
                    "ratelimit rule {}: per_minute must be at least 1 (deny the tools in [policy] instead)",
                    i + 1
                )));
            }
            for g in &rule.tools {
                glob::Pattern::new(g)
                    .map_err(|e| err(format!("ratelimit rule {}: glob {g:?}: {e}", i + 1)))?;
            }
        }
        if self.state.ttl == Some(0) {
            return Err(err("[state] ttl must be at least 1 second"));
        }
        // A spent round is remembered for NONCE_MARGIN: a state must expire
        // well before its nonce is forgotten, or it could be answered again.
        let most = crate::audit::NONCE_MARGIN.as_secs() / 2;
        if self.state.ttl.is_some_and(|t| t > most) {
            return Err(err(format!(
                "[state] ttl must be at most {most} seconds (a spent round is remembered for {} s, and a state must expire well before that)",
                crate::audit::NONCE_MARGIN.as_secs()
            )));
        }
        if let Some(url) = &mut self.ratelimit.redis {
            *url = expand(url, env).map_err(|var| {
                err(format!(
                    "[ratelimit] redis: ${{{var}}} is not set in the environment"
                ))
            })?;
            if !url.starts_with("redis://") {
                return Err(err(format!(
                    "[ratelimit] redis {}: only redis:// URLs are supported",
                    crate::audit_pg::redact(url)
                )));
            }
        }
        if let Some(url) = &mut self.store.url {
            *url = expand(url, env).map_err(|var| {
                err(format!(
                    "[store] url: ${{{var}}} is not set in the environment"
                ))
            })?;
            if !url.starts_with("postgres://") && !url.starts_with("postgresql://") {
                return Err(err(format!(
                    "[store] url {}: only postgres:// URLs are supported",
                    crate::audit_pg::redact(url)
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
mod tests {
    use super::*;

    fn env(var: &str) -> Option<String> {
        (var == "TOKEN").then(|| "s3cret".to_owned())
    }

    #[test]
    fn unknown_keys_are_errors_naming_the_key_and_line() {
        let e = GatewayConfig::parse_toml("[servers.a]\ncommand = \"x\"\ncomand = \"y\"\n", env)
            .unwrap_err()
            .0;
        assert!(e.contains("comand") && e.contains("line 3"), "{e}");
        let e = GatewayConfig::parse_toml("[server.a]\ncommand = \"x\"\n", env)
            .unwrap_err()
            .0;
        assert!(e.contains("server") && e.contains("line 1"), "{e}");
    }

    #[test]
    fn variables_are_expanded_and_unset_ones_named() {
        let c = GatewayConfig::parse_toml(
            "[servers.r]\nurl = \"http://h/mcp\"\nheaders = { Authorization = \"Bearer ${TOKEN}\", X = \"$${TOKEN}\" }\n",
            env,
        )
        .unwrap();
        assert_eq!(c.servers["r"].headers["Authorization"], "Bearer s3cret");
        assert_eq!(c.servers["r"].headers["X"], "${TOKEN}");
        let e =
            GatewayConfig::parse_toml("[servers.r]\ncommand = \"x\"\nargs = [\"${NOPE}\"]\n", env)
                .unwrap_err()
                .0;
        assert!(e.contains("${NOPE}") && e.contains("\"r\""), "{e}");
    }

    #[test]
    fn entries_need_exactly_one_way_to_reach_the_server() {
        for (text, says) in [
            ("[servers.a]\n", "neither"),
            ("[servers.a]\ncommand = \"x\"\nurl = \"http://h\"\n", "both"),
            ("[servers.a]\nurl = \"ftp://h\"\n", "not http"),
            ("[servers.a]\ncommand = \"x\"\nprefix = \"p.q\"\n", "prefix"),
            ("[servers.a]\ncommand = \"x\"\ninclude = [\"[\"]\n", "glob"),
        ] {
            let e = GatewayConfig::parse_toml(text, env).unwrap_err().0;
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn policy_limits_and_state_are_checked_when_loaded() {
        for (text, says) in [
            (
                "[servers.a]\ncommand = \"x\"\nper_minute = 0\n",
                "server \"a\": per_minute must be at least 1",
            ),
            (
                "[[ratelimit.rules]]\ntools = [\"*\"]\nper_minute = 0\n",
                "ratelimit rule 1: per_minute must be at least 1",
            ),
            (
                "[[ratelimit.rules]]\ntools = [\"[\"]\nper_minute = 5\n",
                "ratelimit rule 1: glob \"[\"",
            ),
            (
                "[state]\nttl = 0\n",
                "[state] ttl must be at least 1 second",
            ),
            (
                "[policy]\ndefault = \"allow\"\n\n[[policy.rules]]\ntools = [\"rec.read\", \"rec.{wipe,delete_all}\"]\naction = \"deny\"\n",
                "line 5: policy rule 1, key `tools`: glob \"rec.{wipe,delete_all}\": braces are not supported",
            ),
            (
                "[state]\nttl = 1801\n",
                "[state] ttl must be at most 1800 seconds",
            ),
            (
                "[[policy.rules]]\ntools = [\"[\"]\naction = \"deny\"\n",
                "policy rule 1: glob \"[\"",
            ),
            ("[policy]\ndefault = \"maybe\"\n", "unknown variant `maybe`"),
            (
                "[[policy.rules]]\neffects = [\"teleport\"]\naction = \"deny\"\n",
                "unknown variant `teleport`",
            ),
            ("[audit]\npth = \"x.db\"\n", "unknown field `pth`"),
            (
                "[servers.a]\ncommand = \"x\"\ntransport = \"sse\"\n",
                "server \"a\": transport applies to HTTP servers (give a url)",
            ),
            (
                "[servers.a]\nurl = \"http://h/sse\"\ntransport = \"websocket\"\n",
                "unknown variant `websocket`, expected `streamable-http` or `sse`",
            ),
        ] {
            let e = GatewayConfig::parse_toml(text, env).unwrap_err().0;
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn hosts_json_files_are_read_with_their_own_keys_ignored() {
        let c = GatewayConfig::parse_json(
            r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "x"], "type": "stdio", "disabled": false},
                               "web": {"url": "https://h/mcp", "headers": {"A": "${TOKEN}"}}}}"#,
            env,
        )
        .unwrap();
        assert_eq!(c.servers["fs"].args, ["-y", "x"]);
        assert_eq!(c.servers["web"].headers["A"], "s3cret");
        assert!(c.servers["fs"].enabled && c.servers["web"].enabled);
        assert!(GatewayConfig::parse_json("{}", env).is_err());
        // A host's `"type": "sse"` is the deprecated HTTP+SSE transport.
        let old = GatewayConfig::parse_json(
            r#"{"mcpServers": {"old": {"type": "sse", "url": "https://h/sse"}, "new": {"type": "http", "url": "https://h/mcp"}}}"#,
            env,
        )
        .unwrap();
        assert_eq!(old.servers["old"].transport, Some(HttpKind::Sse));
        assert_eq!(old.servers["new"].transport, None);
    }

    #[test]
    fn a_hosts_disabled_entries_stay_off_and_its_auto_approved_tools_are_allowed() {
        use crate::policy::{Action, Policy, ToolFacts};
        let c = GatewayConfig::parse_json(
            r#"{"mcpServers": {"fs": {"command": "npx", "autoApprove": ["read_file", "list[1]"]},
                               "old": {"command": "x", "disabled": true}}}"#,
            env,
        )
        .unwrap();
        assert!(!c.servers["old"].enabled && c.servers["fs"].enabled);
        let policy = Policy::new(&c.policy).unwrap();
        let decide = |name: &str| {
            let tool = name.split_once('.').unwrap().1;
            policy.decide(&ToolFacts::new(name, tool, None, None, false), None)
        };
        let read = decide("fs.read_file");
        assert_eq!(read.action, Action::Allow);
        assert_eq!(
            read.rule,
            r#"rule 1 (tools ["fs.read_file", "fs.list[[]1[]]"])"#
        );
        // Exactly those names: a glob character in a name is literal.
        assert_eq!(decide("fs.list[1]").action, Action::Allow);
        assert_eq!(decide("fs.list1").action, Action::Confirm);
        assert_eq!(decide("fs.write_file").action, Action::Confirm);
        for (text, says) in [
            (
                r#"{"mcpServers": {"a": {"command": "x", "disabled": "yes"}}}"#,
                "mcpServers.a.disabled is not true or false",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x", "autoApprove": "all"}}}"#,
                "mcpServers.a.autoApprove is not a list of tool names",
            ),
        ] {
            assert_eq!(GatewayConfig::parse_json(text, env).unwrap_err().0, says);
        }
    }

    #[test]
    fn include_and_exclude_globs_select_tools() {
        let c = GatewayConfig::parse_toml(
            "[servers.a]\ncommand = \"x\"\ninclude = [\"get_*\", \"list\"]\nexclude = [\"get_secret\"]\n",
            env,
        )
        .unwrap();
        let a = &c.servers["a"];
        assert!(a.offers("get_basket") && a.offers("list"));
        assert!(!a.offers("get_secret") && !a.offers("delete"));
    }

    #[test]
    fn the_published_schema_is_current() {
        let published = include_str!("../../../docs/gateway.schema.json");
        let published: Value = serde_json::from_str(published).unwrap();
        assert_eq!(
            published,
            GatewayConfig::json_schema(),
            "regenerate docs/gateway.schema.json: cargo run -p toolgate -- serve --print-schema > docs/gateway.schema.json"
        );
    }
}
