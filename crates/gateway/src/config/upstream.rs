//! `[servers.NAME]`: one upstream server, how it is started or reached, and
//! what of it is offered.
//!
//! Layer: `config`.

use super::*;

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
    pub command: Option<Secret>,
    /// Its arguments (shown as written: a `${VAR}` by its name).
    #[serde(default)]
    pub args: Vec<Secret>,
    /// Environment it gets on top of the minimal one (PATH, HOME, locale,
    /// temporary directory, proxy and CA settings). Values never show.
    #[serde(default)]
    pub env: BTreeMap<String, Secret>,
    /// Its working directory.
    pub cwd: Option<PathBuf>,
    /// Give it the gateway's whole environment instead of the minimal one.
    #[serde(default)]
    pub inherit_env: bool,
    /// Run it in a sandbox (Linux): `"strict"`, `"network"`, or a table
    /// `{ profile, read, write, network, processes, memory, cpu_seconds }`.
    /// See docs/gateway.md, "Sandboxed stdio servers".
    pub sandbox: Option<SandboxConfig>,
    /// `"enforce"` (default): refuse to start it unless this machine
    /// enforces every rule of its sandbox; `"best-effort"`: start it with
    /// what holds, logging each rule that does not.
    pub sandbox_mode: Option<SandboxMode>,
    /// The HTTP endpoint of a remote server: Streamable HTTP (either era),
    /// or the event stream of a server on the deprecated 2024-11-05
    /// HTTP+SSE transport (detected, or see `transport`).
    pub url: Option<Secret>,
    /// How to speak to `url`: `streamable-http` or `sse` (the deprecated
    /// 2024-11-05 HTTP+SSE transport). Default: Streamable HTTP, falling
    /// back to HTTP+SSE as the spec's backwards-compatibility section
    /// describes.
    pub transport: Option<HttpKind>,
    /// Extra HTTP headers sent to it (credentials for the upstream; never
    /// the caller's token). Values never show.
    #[serde(default)]
    pub headers: BTreeMap<String, Secret>,
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
    /// Whose identity calls carry upstream: the verified caller's, by
    /// token exchange or their linked account (see [`IdentityConfig`]).
    /// Without it, the gateway's own (`oauth`).
    pub identity: Option<IdentityConfig>,
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
    pub client_secret: Option<Secret>,
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
            .field("client_secret", &self.client_secret)
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

    /// Every value of this entry that must never show, for scrubbing what
    /// the upstream and its transport say.
    pub fn secrets(&self) -> Secrets {
        let mut out = Secrets::default();
        let oauth = self
            .oauth
            .iter()
            .flat_map(|o| o.client_secret.iter())
            .chain(self.identity.iter().flat_map(|i| i.client_secret.iter()));
        for s in self
            .command
            .iter()
            .chain(&self.args)
            .chain(self.env.values())
            .chain(&self.url)
            .chain(self.headers.values())
            .chain(oauth)
        {
            out.add(s);
        }
        out
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

    pub(super) fn check(&self) -> Result<(), ConfigError> {
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
            (None, Some(url))
                if !(url.written().starts_with("http://")
                    || url.written().starts_with("https://")) =>
            {
                return Err(err(format!(
                    "server {name:?}: url {:?} is not http:// or https://",
                    toolgate_protocol::redact::url(url.written())
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
        if let Some(identity) = &self.identity {
            identity.check(name, self)?;
        }
        match &self.sandbox {
            Some(_) if self.command.is_none() => {
                return Err(err(format!(
                    "server {name:?}: sandbox applies to stdio servers (a command), not to a url"
                )));
            }
            Some(_) if self.inherit_env => {
                return Err(err(format!(
                    "server {name:?}: a sandbox with inherit_env = true would hand the server every secret in the gateway's environment; name what it needs in env instead"
                )));
            }
            Some(sandbox) => sandbox.check(name)?,
            None if self.sandbox_mode.is_some() => {
                return Err(err(format!(
                    "server {name:?}: sandbox_mode needs a sandbox (e.g. sandbox = \"strict\")"
                )));
            }
            None => {}
        }
        Ok(())
    }

    pub(super) fn expand(
        &mut self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        let name = self.name.clone();
        let x = |text: &mut String| -> Result<(), ConfigError> {
            *text = expand(text, env).map_err(|unset| err(format!("server {name:?}: {unset}")))?;
            Ok(())
        };
        let placed = |secret: &mut Secret, shape: Shape| -> Result<(), ConfigError> {
            secret
                .expand(shape, env)
                .map_err(|unset| err(format!("server {name:?}: {unset}")))
        };
        if let Some(c) = &mut self.command {
            placed(c, Shape::Written)?;
        }
        for a in &mut self.args {
            placed(a, Shape::Written)?;
        }
        for v in self.env.values_mut() {
            placed(v, Shape::Hidden)?;
        }
        if let Some(u) = &mut self.url {
            placed(u, Shape::Url)?;
        }
        for v in self.headers.values_mut() {
            placed(v, Shape::Hidden)?;
        }
        if let Some(o) = &mut self.oauth {
            x(&mut o.client_id)?;
            if let Some(secret) = &mut o.client_secret {
                placed(secret, Shape::Hidden)?;
            }
            if let Some(issuer) = &mut o.issuer {
                x(issuer)?;
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
        if let Some(identity) = &mut self.identity {
            identity.expand(&name, env)?;
        }
        if let Some(sandbox) = &mut self.sandbox {
            sandbox.expand(&name, env)?;
        }
        if let Some(cwd) = &mut self.cwd {
            let mut text = cwd.to_string_lossy().into_owned();
            x(&mut text)?;
            *cwd = PathBuf::from(text);
        }
        Ok(())
    }
}
