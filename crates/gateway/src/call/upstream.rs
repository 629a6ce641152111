//! One upstream server: its connection, restarted with backoff when it
//! fails, and its current tool list.
//!
//! Layer: `call`.

use parking_lot::Mutex;
use std::num::NonZeroU32;
use std::sync::Arc;

use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use std::time::{Duration, Instant};

use toolgate_client::auth::{Assertion, ClientCredentials, Grant, OAuth, Secret};
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::transport::stdio::{ExitWatch, StderrTail, StdioCommand, StdioTransport};
use toolgate_client::{Client, ClientError, InputHandler};
use toolgate_protocol::error::with_causes;
use toolgate_protocol::methods::{ListPrompts, ListResourceTemplates, ListResources, Paginated};
use toolgate_protocol::types::{ClientCapabilities, Prompt, Resource, ResourceTemplate, Tool};

use crate::config::UpstreamConfig;

/// The gateway's own OAuth client for an upstream.
fn oauth(c: &crate::config::UpstreamOAuth) -> Result<OAuth, ClientError> {
    let mut credentials = ClientCredentials::public(c.client_id.clone());
    credentials.client_secret = c
        .client_secret
        .as_ref()
        .map(|s| Secret::new(s.expose().to_owned()));
    if let Some(path) = &c.private_key_file {
        let pem = std::fs::read_to_string(path).map_err(|e| {
            ClientError::Authorization(format!("reading the private key {}: {e}", path.display()))
        })?;
        let alg = c
            .signing_algorithm
            .clone()
            .unwrap_or_else(|| "ES256".into());
        credentials.private_key = Some((Secret::new(pem), alg));
    }
    if let Some(issuer) = &c.issuer {
        credentials = credentials.for_issuer(issuer.clone());
    }
    let grant = match &c.assertion_file {
        Some(path) => Grant::JwtBearer(Assertion::File(path.clone())),
        None => Grant::ClientCredentials,
    };
    Ok(OAuth::builder("toolgate-gateway")
        .grant(grant)
        .credentials(credentials)
        .build())
}

/// The first wait before reconnecting a failed upstream (by default); it
/// doubles up to [`MAX_BACKOFF`] and resets after a success.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// The longest wait between reconnection attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// An upstream's prompts, resources and resource templates.
#[derive(Clone, Debug, Default)]
pub struct Others {
    /// Its prompts.
    pub prompts: Vec<Prompt>,
    /// Its resources.
    pub resources: Vec<Resource>,
    /// Its resource templates.
    pub templates: Vec<ResourceTemplate>,
}

/// The items that parse as `T` (a malformed one is left out, and logged).
/// Called with each new connection to an upstream (to follow its changes).
pub type OnStart = Arc<dyn Fn(&Client) + Send + Sync>;

/// A call the upstream's own rate limit (`per_minute`) refused: the
/// model's answer, with when to try again.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RateLimited(pub String);

/// An upstream server and the gateway's connection to it.
pub struct Upstream {
    /// Its configuration (the key is `config.name`).
    pub config: UpstreamConfig,
    link: Mutex<Link>,
    /// The first wait before a restart.
    first_backoff: Duration,
    /// The program sandboxed stdio servers are started through.
    launcher: Option<std::path::PathBuf>,
    /// Signalled when the connection fails.
    failed: tokio::sync::Notify,
    on_start: Mutex<Option<OnStart>>,
    /// `per_minute`: the upstream's budget, all callers together.
    budget: Option<DefaultDirectRateLimiter>,
    /// A legacy upstream's calls waiting for their callers' answers.
    pub(crate) parked: Arc<crate::call::parked::Parked>,
    /// What must never show of its configuration.
    secrets: crate::config::Secrets,
    /// Itself, for the tasks that watch its connection.
    me: std::sync::Weak<Upstream>,
    /// Whose identity its calls carry (`[servers.X.identity]`).
    identity: Option<crate::call::identity::SharedIdentity>,
}

#[derive(Default)]
struct Link {
    client: Option<Client>,
    stderr: Option<StderrTail>,
    /// When the last attempt failed, and the wait before the next.
    failed: Option<(Instant, Duration)>,
    /// What went wrong last, for errors and `serve --check`.
    last_error: Option<String>,
    /// Connections started so far (the first, then each restart).
    starts: u64,
}

/// Why an upstream cannot be used right now.
#[derive(Clone, Debug, thiserror::Error)]
#[error("the upstream server {server} is unavailable: {reason}")]
pub struct Unavailable {
    /// The upstream's name.
    pub server: String,
    /// What failed.
    pub reason: String,
}

/// What the gateway declares to upstreams: every kind of input, since it
/// relays each question to the downstream client (which refuses with
/// `-32021` what it cannot answer).
struct Relay;

/// The capabilities the gateway declares to every upstream. A server may
/// list more tools to a client that can answer more (server-everything
/// does), so whatever reviews or locks what the gateway will offer lists
/// with these (`toolgate lock`, `audit`, `verify`).
pub fn declared_capabilities() -> ClientCapabilities {
    ClientCapabilities {
        elicitation: serde_json::from_value(serde_json::json!({"form": {}, "url": {}})).ok(),
        sampling: Some(serde_json::Map::new()),
        roots: Some(serde_json::Map::new()),
        ..Default::default()
    }
}

impl InputHandler for Relay {
    fn capabilities(&self) -> ClientCapabilities {
        declared_capabilities()
    }

    // A legacy upstream's questions in the middle of a call are relayed to
    // that call's caller (`CallOptions::questions`, see `parked`); one that
    // belongs to no call gets the default answers: refused with an error,
    // and the upstream decides what follows. Nobody's answer is made up.
}

/// How upstreams are started.
#[derive(Clone, Debug)]
pub struct Starting {
    /// The first wait before restarting a failed one.
    pub backoff: Duration,
    /// The program sandboxed stdio servers are started through (the
    /// `toolgate` binary's `sandbox exec`); without it a server with a
    /// sandbox is not started.
    pub launcher: Option<std::path::PathBuf>,
}

impl Upstream {
    /// An upstream, not yet started, restarted after failures with a
    /// backoff from `starting.backoff` (doubling up to [`MAX_BACKOFF`]).
    pub fn new(config: UpstreamConfig, starting: &Starting) -> Arc<Self> {
        let first_backoff = starting.backoff;
        Arc::new_cyclic(|me| Upstream {
            me: me.clone(),
            link: Mutex::new(Link::default()),
            first_backoff,
            launcher: starting.launcher.clone(),
            failed: tokio::sync::Notify::new(),
            on_start: Mutex::new(None),
            budget: config
                .per_minute
                .and_then(NonZeroU32::new)
                .map(|n| RateLimiter::direct(Quota::per_minute(n))),
            parked: Arc::default(),
            secrets: config.secrets(),
            identity: match (&config.identity, &config.url) {
                (Some(identity), Some(url)) => {
                    Some(Arc::new(crate::call::identity::UpstreamIdentity::new(
                        &config.name,
                        url.expose(),
                        identity,
                    )))
                }
                _ => None,
            },
            config,
        })
    }

    /// `Err` with the text for the caller when the upstream's `per_minute`
    /// budget is spent.
    pub fn take_budget(&self) -> Result<(), RateLimited> {
        let Some(budget) = &self.budget else {
            return Ok(());
        };
        budget.check().map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            let tenths = wait.as_millis().div_ceil(100).max(1);
            RateLimited(format!(
                "Rate limit reached for the upstream server {}: it takes at most {} calls per minute through this gateway, from all callers together. Try again in {}.{} s.",
                self.config.name,
                self.config.per_minute.unwrap_or_default(),
                tenths / 10,
                tenths % 10
            ))
        })
    }

    /// Whose identity its calls carry, when not the gateway's.
    pub fn identity(&self) -> Option<&crate::call::identity::SharedIdentity> {
        self.identity.as_ref()
    }

    /// Call `hook` with every new connection (`None`: no longer).
    pub fn on_start(&self, hook: Option<OnStart>) {
        *self.on_start.lock() = hook;
    }

    /// The connection, if one is up (never starts one).
    pub fn current(&self) -> Option<Client> {
        self.link.lock().client.clone()
    }

    /// Whether a connection is up.
    pub fn is_connected(&self) -> bool {
        self.link.lock().client.is_some()
    }

    /// Wait until the connection fails (at once if a failure was recorded
    /// since the last wait).
    pub async fn failure(&self) {
        self.failed.notified().await;
    }

    /// `"stdio"`, `"http"`, or `"sse"` (the deprecated HTTP+SSE
    /// transport, chosen or detected).
    pub fn transport_kind(&self) -> &'static str {
        use toolgate_client::transport::TransportKind;
        let connected = self.link.lock().client.as_ref().map(Client::transport_kind);
        match connected {
            Some(TransportKind::Sse) => "sse",
            _ if self.config.transport == Some(crate::config::HttpKind::Sse) => "sse",
            _ if self.config.url.is_some() => "http",
            _ => "stdio",
        }
    }

    /// The last error, if the upstream is failing (its secrets masked).
    pub fn last_error(&self) -> Option<String> {
        self.link.lock().last_error.clone()
    }

    /// What `e` says, with its causes, scrubbed: how an upstream's failure
    /// is told to anyone.
    pub fn said(&self, e: &ClientError) -> String {
        self.scrub(&with_causes(e))
    }

    /// `text` (something the upstream or its transport said) with every
    /// secret of its configuration masked: what the gateway says about an
    /// upstream goes through here before anyone sees it.
    pub fn scrub(&self, text: &str) -> String {
        self.secrets.scrub(text).into_owned()
    }

    /// How many times it was restarted (connections started after the
    /// first).
    pub fn restarts(&self) -> u64 {
        self.link.lock().starts.saturating_sub(1)
    }

    /// The last lines a stdio upstream wrote to stderr.
    pub fn stderr_tail(&self) -> Vec<String> {
        let lines = self
            .link
            .lock()
            .stderr
            .as_ref()
            .map(StderrTail::lines)
            .unwrap_or_default();
        lines.iter().map(|l| self.scrub(l)).collect()
    }

    /// Start a connection: the client, and for a stdio server its stderr
    /// tail and its exit.
    fn start(&self) -> Result<(Client, Option<(StderrTail, ExitWatch)>), ClientError> {
        let c = &self.config;
        let builder = Client::builder("toolgate-gateway", env!("CARGO_PKG_VERSION"))
            .name(c.name.clone())
            .trusted(c.trusted)
            .timeout(c.call_timeout())
            .input_handler(Relay)
            // Accept tasks; a call declares the extension only when its
            // caller did (see `forward`).
            .tasks();
        if let Some(url) = &c.url {
            let options = HttpOptions {
                headers: c
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.expose().to_owned()))
                    .collect(),
                oauth: c.oauth.as_ref().map(oauth).transpose()?,
                sse: crate::config::HttpKind::sse_mode(c.transport),
                ..Default::default()
            };
            return Ok((
                builder.build(HttpTransport::new(url.expose(), options)?),
                None,
            ));
        }
        let mut command = StdioCommand {
            program: c
                .command
                .as_ref()
                .map(|c| c.expose().to_owned())
                .unwrap_or_default(),
            args: c.args.iter().map(|a| a.expose().to_owned()).collect(),
            env: c
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.expose().to_owned()))
                .collect(),
            cwd: c.cwd.clone(),
            inherit_env: c.inherit_env,
            process_group: true,
        };
        if c.sandbox.is_some() {
            command = crate::call::sandbox::wrap(command, c, self.launcher.as_deref())?;
        }
        let transport = StdioTransport::spawn(&command)?;
        let stderr = transport.stderr_handle();
        let exit = transport.exit_handle();
        Ok((builder.build(transport), Some((stderr, exit))))
    }

    /// Mark this connection down the moment its process exits: readiness
    /// and `/status` tell the truth at once, and the supervisor restarts it
    /// without waiting for a call to fail.
    fn watch_exit(&self, exit: ExitWatch, start: u64) {
        let me = self.me.clone();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            let status = exit.exited().await;
            let Some(upstream) = me.upgrade() else { return };
            let mut link = upstream.link.lock();
            // Still the same connection (not one started since, nor one
            // already marked down and dropped).
            if link.starts == start && link.client.is_some() {
                tracing::warn!(server = %upstream.config.name, %status, "the upstream's process exited; it will be restarted");
                upstream.note_failure(&mut link, format!("the server exited ({status})"));
            }
        });
    }

    /// The connected client, starting (or restarting, once the backoff has
    /// passed) the upstream if needed.
    pub fn client(&self) -> Result<Client, Unavailable> {
        let mut link = self.link.lock();
        if let Some(client) = &link.client {
            return Ok(client.clone());
        }
        if let Some((at, wait)) = link.failed
            && at.elapsed() < wait
        {
            return Err(self.unavailable(&link));
        }
        match self.start() {
            Ok((client, process)) => {
                link.client = Some(client.clone());
                link.starts += 1;
                if let Some((stderr, exit)) = process {
                    link.stderr = Some(stderr);
                    self.watch_exit(exit, link.starts);
                } else {
                    link.stderr = None;
                }
                drop(link);
                let hook = self.on_start.lock().clone();
                if let Some(hook) = hook {
                    hook(&client);
                }
                Ok(client)
            }
            Err(e) => {
                self.note_failure(&mut link, with_causes(&e));
                Err(self.unavailable(&link))
            }
        }
    }

    fn unavailable(&self, link: &Link) -> Unavailable {
        Unavailable {
            server: self.config.name.clone(),
            reason: link
                .last_error
                .clone()
                .unwrap_or_else(|| "not started".into()),
        }
    }

    fn note_failure(&self, link: &mut Link, reason: String) {
        let wait = match link.failed {
            Some((_, wait)) => (wait * 2).clamp(self.first_backoff, MAX_BACKOFF),
            None => self.first_backoff,
        };
        self.failed.notify_one();
        link.failed = Some((Instant::now(), wait));
        // A sandbox's launcher says last why the server ended (a cap it
        // reached): the failure is reported in those words.
        let said = link
            .stderr
            .as_ref()
            .filter(|_| self.config.sandbox.is_some())
            .and_then(|tail| tail.lines().pop())
            .and_then(|last| last.strip_prefix("toolgate sandbox: ").map(str::to_owned));
        let reason = match said {
            Some(why) => format!("{reason}: {why}"),
            None => reason,
        };
        link.last_error = Some(self.scrub(&reason));
        // Dropping the client ends a stdio child (kill on drop).
        link.client = None;
    }

    /// Record how a request went: a failure that says the connection is
    /// gone drops it (the next use restarts, after the backoff); a success
    /// resets the backoff.
    pub fn outcome<T>(&self, result: &Result<T, ClientError>) {
        let mut link = self.link.lock();
        match result {
            Err(
                e @ (ClientError::ServerExited(_)
                | ClientError::Unreachable { .. }
                | ClientError::Transport { .. }),
            ) => {
                tracing::warn!(server = %self.config.name, error = %self.scrub(&e.to_string()), "upstream failed; it will be restarted");
                self.note_failure(&mut link, with_causes(e));
            }
            Ok(_) => {
                link.failed = None;
                link.last_error = None;
            }
            Err(_) => {}
        }
    }

    /// Record that the upstream did not answer a listing usefully (an
    /// answer it cannot read, an endpoint it may not post to, a timeout):
    /// it is not ready, whether or not its connection is kept.
    fn not_answering(&self, e: &ClientError) {
        let mut link = self.link.lock();
        if link.last_error.is_none() {
            link.last_error = Some(self.said(e));
        }
    }

    /// The wait before the next restart attempt, if the upstream is down.
    pub fn backoff(&self) -> Option<Duration> {
        self.link
            .lock()
            .failed
            .map(|(at, wait)| wait.saturating_sub(at.elapsed()))
    }

    /// List the upstream's tools (all pages), restarting it if needed.
    pub async fn list(&self) -> Result<Vec<Tool>, Unavailable> {
        let client = self.client()?;
        let listed = client.list_tools().await;
        self.outcome(&listed);
        // A protocol error is an answer (the server is alive and said
        // no); anything else leaves it not ready.
        if let Err(e) = &listed
            && !matches!(e, ClientError::Protocol(_))
        {
            self.not_answering(e);
        }
        listed.map_err(|e| Unavailable {
            server: self.config.name.clone(),
            reason: format!("listing its tools failed: {}", self.said(&e)),
        })
    }

    /// List what the upstream offers besides tools: its prompts,
    /// resources and resource templates (empty for a kind it does not
    /// serve).
    pub async fn list_others(&self) -> Result<Others, Unavailable> {
        let client = self.client()?;
        let mut others = Others::default();
        // Only what the upstream says it serves: a server that ignores an
        // unknown method would otherwise hold each listing to the timeout.
        let discovered = client.discover().await;
        self.outcome(&discovered);
        let capabilities = discovered
            .map(|d| d.capabilities)
            .map_err(|e| Unavailable {
                server: self.config.name.clone(),
                reason: format!("discovery failed: {}", self.said(&e)),
            })?;
        if capabilities.prompts.is_some() {
            others.prompts = self.list_kind::<ListPrompts>(&client).await?;
        }
        if capabilities.resources.is_some() {
            others.resources = self.list_kind::<ListResources>(&client).await?;
            others.templates = self.list_kind::<ListResourceTemplates>(&client).await?;
        }
        Ok(others)
    }

    /// Every item of the list method `M`; none from a server that refuses
    /// it (one without the feature says so, and that is no failure).
    async fn list_kind<M: Paginated>(&self, client: &Client) -> Result<Vec<M::Item>, Unavailable> {
        match client.list::<M>().await {
            Ok(items) => Ok(items),
            Err(ClientError::Protocol(_)) => Ok(Vec::new()),
            Err(e) => {
                let reason = self.said(&e);
                self.outcome::<()>(&Err(e));
                Err(Unavailable {
                    server: self.config.name.clone(),
                    reason: format!("listing its {} failed: {reason}", M::FIELD),
                })
            }
        }
    }

    /// Stop the upstream (a stdio child is killed).
    pub fn stop(&self) {
        let mut link = self.link.lock();
        link.client = None;
    }
}
