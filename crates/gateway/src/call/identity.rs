//! The caller's identity at one upstream (`[servers.X.identity]`): a token
//! obtained for the verified caller, for that upstream only, and never the
//! caller's own.
//!
//! `mode = "exchange"`: the caller's token (verified by `[auth]`) is
//! exchanged at the upstream's authorization server (RFC 8693, with the
//! upstream as the RFC 8707 `resource` and the scopes the tool's rule
//! names). What comes back is checked by the client's
//! [`TokenBroker`] — the audience must
//! be the upstream and not the gateway, the scopes no wider than asked,
//! the token not the caller's own — and kept per caller until shortly
//! before it expires. While the authorization server is down, calls fail
//! at once (for a few seconds after each failure no new attempt is made),
//! but a kept token is still sent until it expires.
//!
//! Layer: `call`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use toolgate_client::auth::{BrokerConfig, BrokerError, Secret, TokenBroker, TokenSet};
use toolgate_client::transport::Bearer;
use toolgate_server::AuthContext;

use crate::call::linked::{Held, Linking, Unreadable, unix_now};
use crate::config::{IdentityConfig, IdentityMode};
use crate::store::tokens::{CachedToken, TokenCache};

/// How long no new attempt is made after the authorization server could
/// not be reached.
pub const DOWN_PAUSE: Duration = Duration::from_secs(5);

/// How long a token is kept when the server said nothing of its life.
const DEFAULT_LIFE: Duration = Duration::from_secs(60);

/// Why a call gets no token: each is the caller's `isError`, with the
/// audit status [`NoToken::status`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoToken {
    /// The call has no verified caller, or no token of theirs to exchange.
    NoCaller,
    /// The authorization server refused: the caller lacks access.
    Denied,
    /// The authorization server cannot be reached (and nothing is kept).
    Unavailable,
    /// It answered with a token that must not be used (why, in our words).
    Unusable(String),
    /// The gateway's identity configuration cannot be used.
    Config(String),
    /// The caller has no usable account linked at the upstream (`user`
    /// mode): why (never linked, revoked, unreadable).
    NotLinked(&'static str),
}

impl NoToken {
    /// The audit status of a call that ends here.
    pub fn status(&self) -> &'static str {
        match self {
            Self::NoCaller | Self::Denied => "identity_refused",
            Self::NotLinked(_) => "account_not_linked",
            Self::Unavailable => "identity_unavailable",
            Self::Unusable(_) | Self::Config(_) => "identity_failed",
        }
    }

    /// The caller's answer for a call of `server`'s tool.
    pub fn text(&self, server: &str) -> String {
        match self {
            Self::NoCaller => format!(
                "The upstream server {server} acts for the person calling, and this call has no verified caller token to act on. Call through the gateway's HTTP endpoint with an access token."
            ),
            Self::Denied => format!(
                "You lack access to the upstream server {server}: its authorization server refused to issue a token for you. Ask its administrator for access; the call was not sent."
            ),
            Self::Unavailable => format!(
                "The authorization server of the upstream server {server} cannot be reached, so no token could be obtained for you; the call was not sent. Try again shortly."
            ),
            Self::Unusable(why) => format!(
                "The upstream server {server}'s authorization server answered with a token the gateway will not use ({why}); the call was not sent. This is a fault in that server's configuration."
            ),
            Self::Config(why) => format!(
                "The gateway cannot obtain tokens for the upstream server {server} ({why}); the call was not sent."
            ),
            Self::NotLinked(why) => format!(
                "The upstream server {server} acts as you, and your account there is not linked ({why}); the call was not sent."
            ),
        }
    }
}

/// A token obtained for a call, and what the audit store records of it.
pub struct Obtained {
    /// The token to send.
    pub bearer: Bearer,
    /// Whose identity it carries and how (`alice (exchange)`).
    pub label: String,
}

/// One upstream's identity: the broker at its authorization server and
/// the tokens it obtained.
pub struct UpstreamIdentity {
    server: String,
    config: IdentityConfig,
    resource: String,
    broker: Result<TokenBroker, String>,
    cache: TokenCache,
    /// Until when the authorization server is taken to be down.
    down_until: Mutex<Option<Instant>>,
    /// People whose linked access token the upstream refused: refreshed
    /// on their next call whatever its expiry says.
    refresh_next: Mutex<std::collections::HashSet<String>>,
}

impl std::fmt::Debug for UpstreamIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamIdentity")
            .field("server", &self.server)
            .field("mode", &self.config.mode)
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

impl UpstreamIdentity {
    /// The identity of the upstream `server` at `url` under `config`.
    pub fn new(server: &str, url: &str, config: &IdentityConfig) -> Self {
        let broker = TokenBroker::new(BrokerConfig {
            issuer: config.issuer.clone(),
            token_endpoint: config.token_endpoint.clone(),
            authorization_endpoint: None,
            client_id: config.client_id.clone(),
            client_secret: config
                .client_secret
                .as_ref()
                .map(|s| Secret::new(s.expose().to_owned())),
            limits: toolgate_client::auth::AuthLimits {
                timeout: config.request_timeout(),
                ..Default::default()
            },
        })
        .map_err(|e| e.to_string());
        Self {
            server: server.to_owned(),
            resource: config.resource_for(url),
            config: config.clone(),
            broker,
            cache: TokenCache::default(),
            down_until: Mutex::new(None),
            refresh_next: Mutex::default(),
        }
    }

    /// The resource its tokens are for.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// Its mode.
    pub fn mode(&self) -> IdentityMode {
        self.config.mode
    }

    /// How many callers' tokens are kept.
    pub fn kept(&self) -> usize {
        self.cache.len()
    }

    /// The token for a call of `tool` (its upstream name) by `auth`.
    /// `linking` is the gateway's side of linked accounts (`user` mode).
    pub async fn token_for(
        &self,
        auth: Option<&AuthContext>,
        tool: &str,
        linking: Option<&Linking>,
    ) -> Result<Obtained, NoToken> {
        let broker = self
            .broker
            .as_ref()
            .map_err(|e| NoToken::Config(e.clone()))?;
        let (Some(auth), Some(subject)) = (auth, auth.and_then(AuthContext::subject)) else {
            return Err(NoToken::NoCaller);
        };
        match self.config.mode {
            IdentityMode::Exchange => self.exchanged(broker, auth, subject, tool).await,
            IdentityMode::User => {
                let linking = linking.ok_or_else(|| {
                    NoToken::Config("linked accounts need the connect page and a state key".into())
                })?;
                self.linked(broker, linking, subject).await
            }
        }
    }

    /// The broker, for the connect page (`user` mode).
    pub fn broker(&self) -> Result<&TokenBroker, NoToken> {
        self.broker.as_ref().map_err(|e| NoToken::Config(e.clone()))
    }

    /// The scopes a linked account is asked for: every rule's, since one
    /// account serves every tool of the upstream.
    pub fn account_scopes(&self) -> Vec<String> {
        let mut all: Vec<String> = self.config.scopes.clone();
        for rule in &self.config.tools {
            for s in &rule.scopes {
                if !all.contains(s) {
                    all.push(s.clone());
                }
            }
        }
        all
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// A linked account's access token for `subject`: kept, read from the
    /// store, or refreshed.
    async fn linked(
        &self,
        broker: &TokenBroker,
        linking: &Linking,
        subject: &str,
    ) -> Result<Obtained, NoToken> {
        let label = format!("{subject} (user)");
        let slot = self.cache.slot(&user_key(subject));
        let mut kept = slot.lock().await;
        if let Some(t) = kept.as_ref().filter(|t| t.fresh(Instant::now())) {
            return Ok(Obtained {
                bearer: t.bearer.clone(),
                label,
            });
        }
        // The store first: another instance may have refreshed already (a
        // refresh token is often good once).
        let held = match linking.load(subject, &self.server).await {
            Ok(None) => return Err(NoToken::NotLinked("you have not linked it yet")),
            Ok(Some(Err(Unreadable))) => {
                let _ = linking.unlink(subject, &self.server).await;
                tracing::warn!(server = %self.server, %subject, "a linked account no longer opens (the state key changed?); asking to link again");
                return Err(NoToken::NotLinked(
                    "the gateway can no longer read it; link it again",
                ));
            }
            Ok(Some(Ok(held))) => held,
            Err(e) => return Err(NoToken::Config(format!("the account store: {e}"))),
        };
        let now = unix_now();
        let keep = |held: &Held, kept: &mut Option<CachedToken>| {
            let life = held.expires_at.map_or(DEFAULT_LIFE, |exp| {
                Duration::from_secs(exp.saturating_sub(now))
            });
            let token = CachedToken::new(
                Bearer::new(held.access_token.as_str()),
                Instant::now(),
                life,
            );
            let bearer = token.bearer.clone();
            *kept = Some(token);
            bearer
        };
        let refused_upstream = self.refresh_next.lock().remove(subject);
        if held.fresh(now) && !refused_upstream {
            return Ok(Obtained {
                bearer: keep(&held, &mut kept),
                label,
            });
        }
        let Some(refresh) = held.refresh_token.clone() else {
            if held.usable(now) && !refused_upstream {
                return Ok(Obtained {
                    bearer: keep(&held, &mut kept),
                    label,
                });
            }
            let _ = linking.unlink(subject, &self.server).await;
            return Err(NoToken::NotLinked(
                "its token expired and cannot be refreshed",
            ));
        };
        let answer = broker
            .refresh(
                &Secret::new(refresh),
                &self.resource,
                &self.account_scopes(),
            )
            .await;
        match answer {
            Ok(set) => {
                let fresh = Held::of(&set);
                if let Err(e) = linking.save(subject, &self.server, &fresh).await {
                    return Err(NoToken::Config(format!("the account store: {e}")));
                }
                Ok(Obtained {
                    bearer: keep(&fresh, &mut kept),
                    label,
                })
            }
            Err(BrokerError::Refused(why)) => {
                *kept = None;
                let _ = linking.unlink(subject, &self.server).await;
                tracing::info!(server = %self.server, %subject, reason = %why, "a linked account's refresh was refused; asking to link again");
                Err(NoToken::NotLinked(
                    "its authorization was revoked or has expired; link it again",
                ))
            }
            Err(BrokerError::Unreachable(why)) => {
                tracing::warn!(server = %self.server, reason = %why, "the upstream's authorization server cannot be reached");
                if held.usable(now) {
                    Ok(Obtained {
                        bearer: keep(&held, &mut kept),
                        label,
                    })
                } else {
                    Err(NoToken::Unavailable)
                }
            }
            Err(BrokerError::Unusable(why)) => Err(NoToken::Unusable(why)),
            Err(BrokerError::Config(why)) => Err(NoToken::Config(why)),
        }
    }

    /// An exchanged token for `subject`'s call of `tool`.
    async fn exchanged(
        &self,
        broker: &TokenBroker,
        auth: &AuthContext,
        subject: &str,
        tool: &str,
    ) -> Result<Obtained, NoToken> {
        let Some(presented) = auth.presented_token() else {
            return Err(NoToken::NoCaller);
        };
        let scopes = self.config.scopes_for(tool);
        let key = key_of(subject, auth, scopes);
        let label = format!("{subject} ({})", self.config.mode.as_str());
        let slot = self.cache.slot(&key);
        let mut held = slot.lock().await;
        let now = Instant::now();
        if let Some(kept) = held.as_ref().filter(|t| t.fresh(now)) {
            return Ok(Obtained {
                bearer: kept.bearer.clone(),
                label,
            });
        }
        let kept = held.as_ref().filter(|t| t.usable(now)).cloned();
        let down = self.down_until.lock().is_some_and(|until| now < until);
        if down {
            return match kept {
                Some(t) => Ok(Obtained {
                    bearer: t.bearer,
                    label,
                }),
                None => Err(NoToken::Unavailable),
            };
        }
        // The gateway's own audience (the caller's token's `aud`): a token
        // for it is never handed on.
        let own = audience_of(auth);
        let answer = broker
            .exchange(presented.expose(), &self.resource, scopes, own.as_deref())
            .await;
        match answer {
            Ok(set) => {
                let Some(life) = life_of(&set, unix_now()) else {
                    *held = None;
                    return Err(NoToken::Unusable(
                        "the token had expired by this machine's clock when it arrived; check the clocks".into(),
                    ));
                };
                let token =
                    CachedToken::new(Bearer::new(set.access_token.as_str()), Instant::now(), life);
                let bearer = token.bearer.clone();
                *held = Some(token);
                *self.down_until.lock() = None;
                Ok(Obtained { bearer, label })
            }
            Err(BrokerError::Unreachable(why)) => {
                *self.down_until.lock() = Some(Instant::now() + DOWN_PAUSE);
                tracing::warn!(server = %self.server, reason = %scrub(&why, presented.expose()), "the upstream's authorization server cannot be reached");
                match kept {
                    Some(t) => Ok(Obtained {
                        bearer: t.bearer,
                        label,
                    }),
                    None => Err(NoToken::Unavailable),
                }
            }
            Err(BrokerError::Refused(why)) => {
                *held = None;
                tracing::info!(server = %self.server, %subject, reason = %scrub(&why, presented.expose()), "token exchange refused");
                Err(NoToken::Denied)
            }
            Err(BrokerError::Unusable(why)) => {
                *held = None;
                let why = scrub(&why, presented.expose());
                tracing::warn!(server = %self.server, reason = %why, "the upstream's authorization server issued an unusable token");
                Err(NoToken::Unusable(why))
            }
            Err(BrokerError::Config(why)) => Err(NoToken::Config(why)),
        }
    }
}

/// The cache key: the subject, what their token grants (the exchange may
/// depend on it), and the scopes asked for; hashed, so the key is short.
fn key_of(subject: &str, auth: &AuthContext, scopes: &[String]) -> String {
    let mut h = Sha256::new();
    for part in std::iter::once(subject)
        .chain(auth.scopes())
        .chain(std::iter::once("\0"))
        .chain(scopes.iter().map(String::as_str))
    {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// The cache key of `subject`'s linked account.
fn user_key(subject: &str) -> String {
    format!("user\0{subject}")
}

/// The audience of the caller's verified token (the gateway), if it
/// names one.
fn audience_of(auth: &AuthContext) -> Option<String> {
    match auth.claims()?.get("aud")? {
        serde_json::Value::String(a) => Some(a.clone()),
        serde_json::Value::Array(a) => a.first()?.as_str().map(str::to_owned),
        _ => None,
    }
}

/// How long a token is kept: what the answer's `expires_in` says
/// (relative to the answer), but never past the token's own `exp` by this
/// machine's clock — an authorization server whose clock is behind issues
/// tokens that upstreams (on this clock) take to expire sooner. `None`: it
/// has expired already by this clock.
fn life_of(set: &TokenSet, now_unix: u64) -> Option<Duration> {
    let said = match (set.expires_at, set.issued_at) {
        (Some(expires), Some(issued)) => Duration::from_secs(expires.saturating_sub(issued)),
        _ => DEFAULT_LIFE,
    };
    match toolgate_client::auth::jwt_expiry(&set.access_token) {
        Some(exp) if exp <= now_unix => None,
        Some(exp) => Some(said.min(Duration::from_secs(exp - now_unix))),
        None => Some(said),
    }
}

/// `text` with `secret` masked, should an authorization server have
/// echoed it.
fn scrub(text: &str, secret: &str) -> String {
    if secret.len() >= 8 {
        text.replace(secret, "…")
    } else {
        text.to_owned()
    }
}

impl UpstreamIdentity {
    /// Forget what is kept of `subject`'s linked account (it was
    /// unlinked): the next call reads the store, and finds none.
    pub fn forget_person(&self, subject: &str) {
        self.cache.forget(&user_key(subject));
    }

    /// Forget the token kept for `auth`'s calls of `tool` (the upstream
    /// refused it), so the next call obtains another.
    pub fn forget(&self, auth: Option<&AuthContext>, tool: &str) {
        if let Some((auth, subject)) = auth.and_then(|a| Some((a, a.subject()?))) {
            match self.config.mode {
                IdentityMode::Exchange => {
                    self.cache
                        .forget(&key_of(subject, auth, self.config.scopes_for(tool)))
                }
                // The stored tokens are refreshed on the next call.
                IdentityMode::User => {
                    self.cache.forget(&user_key(subject));
                    self.refresh_next.lock().insert(subject.to_owned());
                }
            }
        }
    }
}

/// Shared by the upstream and the stacks of its tools.
pub type SharedIdentity = Arc<UpstreamIdentity>;

#[cfg(test)]
mod tests {
    use super::*;

    fn set_with(exp: Option<u64>, expires_in: u64) -> TokenSet {
        use base64::Engine as _;
        let claims = serde_json::json!({"exp": exp, "aud": "x"});
        let body = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims.to_string());
        TokenSet {
            access_token: format!("e30.{body}.sig"),
            token_type: "Bearer".into(),
            issued_at: Some(1_000),
            expires_at: Some(1_000 + expires_in),
            ..TokenSet::default()
        }
    }

    #[test]
    fn a_token_is_kept_no_longer_than_either_clock_allows() {
        let now = 50_000;
        // The server's clock agrees: its word.
        assert_eq!(
            life_of(&set_with(Some(now + 600), 600), now),
            Some(Duration::from_secs(600))
        );
        // Its clock is 500 s behind: the token expires here in 100 s.
        assert_eq!(
            life_of(&set_with(Some(now + 100), 600), now),
            Some(Duration::from_secs(100))
        );
        // Ahead: `expires_in` still bounds it.
        assert_eq!(
            life_of(&set_with(Some(now + 1_100), 600), now),
            Some(Duration::from_secs(600))
        );
        // Expired on arrival.
        assert_eq!(life_of(&set_with(Some(now - 100), 600), now), None);
    }

    #[test]
    fn refusals_say_what_happened_and_never_hold_a_token() {
        for no in [
            NoToken::NoCaller,
            NoToken::Denied,
            NoToken::Unavailable,
            NoToken::Unusable("a token for another audience".into()),
            NoToken::Config("no token endpoint".into()),
        ] {
            let text = no.text("crm");
            assert!(text.contains("crm") && text.len() < 300, "{text}");
            assert!(no.status().starts_with("identity_"));
        }
        assert!(NoToken::Denied.text("crm").contains("lack access"));
    }
}
