//! Tokens obtained for someone else: a gateway acting for its callers at
//! an upstream's authorization server.
//!
//! A [`TokenBroker`] holds the gateway's own client at one authorization
//! server and asks it for tokens meant for one resource (RFC 8707): by
//! RFC 8693 token exchange of the caller's token, or by a person's
//! authorization code (with PKCE) and its refresh token. Every answer is
//! checked before it is handed out: a token whose audience is not the
//! resource, whose scopes are wider than those asked for, or that is the
//! caller's own token is refused, so a misconfigured or hostile
//! authorization server cannot make the gateway pass on the wrong token.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use toolgate_client::auth::{BrokerConfig, Secret, TokenBroker};
//!
//! let broker = TokenBroker::new(BrokerConfig {
//!     issuer: Some("https://auth.example.com".into()),
//!     client_id: "gateway".into(),
//!     client_secret: Some(Secret::new("…")),
//!     ..BrokerConfig::default()
//! })?;
//! let caller_token = "…"; // verified by the gateway, audience the gateway
//! let upstream = broker
//!     .exchange(caller_token, "https://crm.example.com/mcp", &["crm.read".into()], None)
//!     .await?;
//! # let _ = upstream; Ok(()) }
//! ```

use base64::Engine as _;
use serde_json::Value;

use super::discovery::{AuthServer, authorization_server};
use super::fetch::{AuthHttp, AuthLimits, endpoint, shown};
use super::grant::{ClientAuth, TokenEndpoint, common, method_for, tokens, with_grant};
use super::jws::{random_b64, sha256_b64};
use super::store::{ClientRegistration, TokenSet};
use super::{Secret, shown as show};
use crate::ClientError;

const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";

/// Where the broker's authorization server is and who the gateway is there.
#[derive(Clone, Debug, Default)]
pub struct BrokerConfig {
    /// The issuer: its metadata (RFC 8414, then OpenID Connect discovery)
    /// gives the endpoints not set below.
    pub issuer: Option<String>,
    /// The token endpoint, when it is not to be discovered.
    pub token_endpoint: Option<String>,
    /// The authorization endpoint (for a person's authorization), when it
    /// is not to be discovered.
    pub authorization_endpoint: Option<String>,
    /// The gateway's client id there.
    pub client_id: String,
    /// Its secret (a public client has none).
    pub client_secret: Option<Secret>,
    /// Bounds on each exchange (a short timeout makes calls fail fast
    /// while the server is down).
    pub limits: AuthLimits,
}

/// Why the broker has no token to give.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BrokerError {
    /// The authorization server said no (`invalid_grant`,
    /// `access_denied`, an unknown client…): the subject lacks access.
    #[error("{0}")]
    Refused(String),
    /// The authorization server could not be reached, or failed (5xx).
    #[error("{0}")]
    Unreachable(String),
    /// It answered with something that must not be used: a token for
    /// another audience, wider scopes than asked for, the caller's own
    /// token, or no usable token at all.
    #[error("{0}")]
    Unusable(String),
    /// The broker's own configuration is unusable (no token endpoint, an
    /// endpoint that is not HTTPS).
    #[error("{0}")]
    Config(String),
}

impl BrokerError {
    fn from_request(e: ClientError) -> Self {
        match e {
            ClientError::Unreachable { message, .. } => Self::Unreachable(message),
            other => Self::Refused(other.to_string()),
        }
    }
}

/// What a person's authorization starts from: made by
/// [`TokenBroker::authorization_url`], kept (sealed) by the caller until
/// the redirect comes back.
#[derive(Clone)]
pub struct Authorization {
    /// Where to send the person.
    pub url: String,
    /// The `state` sent, to compare with the one that comes back.
    pub state: String,
    /// The PKCE verifier, for [`TokenBroker::redeem`].
    pub verifier: Secret,
}

impl std::fmt::Debug for Authorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorization")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// The gateway's client at one authorization server, obtaining tokens
/// for the people it acts for.
pub struct TokenBroker {
    http: AuthHttp,
    config: BrokerConfig,
    /// The server's metadata, once found (looked up again after a failure).
    server: tokio::sync::Mutex<Option<AuthServer>>,
}

impl std::fmt::Debug for TokenBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenBroker")
            .field("issuer", &self.config.issuer)
            .field("client_id", &self.config.client_id)
            .finish_non_exhaustive()
    }
}

impl TokenBroker {
    /// A broker for `config`; it needs an issuer or a token endpoint.
    pub fn new(config: BrokerConfig) -> Result<Self, ClientError> {
        if config.issuer.is_none() && config.token_endpoint.is_none() {
            return Err(ClientError::Authorization(
                "a token broker needs an issuer or a token endpoint".into(),
            ));
        }
        for url in [&config.token_endpoint, &config.authorization_endpoint]
            .into_iter()
            .flatten()
        {
            endpoint(url, "endpoint")?;
        }
        Ok(Self {
            http: AuthHttp::new(config.limits.clone())?.unreachable_when_down(),
            config,
            server: tokio::sync::Mutex::new(None),
        })
    }

    /// The issuer this broker's tokens come from, if configured.
    pub fn issuer(&self) -> Option<&str> {
        self.config.issuer.as_deref()
    }

    /// The server's metadata: discovered from the issuer (once), with the
    /// configured endpoints in place of the discovered ones.
    async fn server(&self) -> Result<AuthServer, BrokerError> {
        let mut known = self.server.lock().await;
        if let Some(server) = &*known {
            return Ok(server.clone());
        }
        let discover =
            self.config.token_endpoint.is_none() || self.config.authorization_endpoint.is_none();
        let mut server = match (&self.config.issuer, discover) {
            (Some(issuer), true) => authorization_server(&self.http, issuer, false)
                .await
                .map_err(|e| match e {
                    ClientError::Unreachable { message, .. } => BrokerError::Unreachable(message),
                    other => BrokerError::Config(other.to_string()),
                })?,
            (issuer, _) => AuthServer {
                issuer: issuer.clone().unwrap_or_default(),
                ..AuthServer::default()
            },
        };
        let configured = |url: &Option<String>, what| {
            url.as_deref()
                .map(|u| endpoint(u, what).map_err(|e| BrokerError::Config(e.to_string())))
                .transpose()
        };
        if let Some(url) = configured(&self.config.token_endpoint, "token endpoint")? {
            server.token_endpoint = Some(url);
        }
        if let Some(url) = configured(
            &self.config.authorization_endpoint,
            "authorization endpoint",
        )? {
            server.authorization_endpoint = Some(url);
        }
        *known = Some(server.clone());
        Ok(server)
    }

    /// POST a grant to the token endpoint with the gateway's client
    /// authentication; the tokens, unchecked.
    async fn grant(&self, params: Vec<(&'static str, String)>) -> Result<TokenSet, BrokerError> {
        let server = self.server().await?;
        let url = server
            .token_endpoint()
            .map_err(|e| BrokerError::Config(e.to_string()))?
            .clone();
        let registration = ClientRegistration {
            client_id: self.config.client_id.clone(),
            client_secret: self
                .config
                .client_secret
                .as_ref()
                .map(|s| s.expose().to_owned()),
            ..ClientRegistration::default()
        };
        let client = ClientAuth {
            method: method_for(&registration, None, &server),
            registration: &registration,
            key: None,
        };
        let mut nonce = None;
        let mut endpoint = TokenEndpoint {
            http: &self.http,
            url: &url,
            issuer: &server.issuer,
            dpop: None,
            nonce: &mut nonce,
        };
        let body = endpoint
            .post(Some(&client), params)
            .await
            .map_err(BrokerError::from_request)?;
        if let Some(kind) = body
            .as_ref()
            .and_then(|b| b.get("issued_token_type"))
            .and_then(Value::as_str)
            .filter(|k| *k != ACCESS_TOKEN)
        {
            return Err(BrokerError::Unusable(format!(
                "the authorization server issued a {} rather than an access token",
                shown(kind)
            )));
        }
        tokens(body.as_ref(), false).map_err(|e| BrokerError::Unusable(e.to_string()))
    }

    /// RFC 8693: exchange `subject_token` (the caller's, verified) for an
    /// access token for `resource` with `scopes`. `not_audience` is the
    /// audience the subject token was issued for (the gateway): a token
    /// for it is never handed on.
    pub async fn exchange(
        &self,
        subject_token: &str,
        resource: &str,
        scopes: &[String],
        not_audience: Option<&str>,
    ) -> Result<TokenSet, BrokerError> {
        let mut params = with_grant(
            TOKEN_EXCHANGE,
            vec![
                ("subject_token", subject_token.to_owned()),
                ("subject_token_type", ACCESS_TOKEN.into()),
                ("requested_token_type", ACCESS_TOKEN.into()),
            ],
        );
        params.extend(common(resource, scopes));
        let set = self.grant(params).await?;
        check_issued(&set, resource, scopes, Some(subject_token), not_audience)?;
        Ok(set)
    }

    /// Start a person's authorization for `resource`: the URL to send
    /// them to (authorization code, PKCE S256, the resource indicator),
    /// with a fresh `state` and verifier.
    pub async fn authorization_url(
        &self,
        redirect_uri: &str,
        resource: &str,
        scopes: &[String],
    ) -> Result<Authorization, BrokerError> {
        let server = self.server().await?;
        let at = server.authorization_endpoint.clone().ok_or_else(|| {
            BrokerError::Config(format!("{} has no authorization endpoint", server.issuer))
        })?;
        let pkce = server
            .code_challenge_methods
            .as_ref()
            .is_some_and(|m| m.iter().any(|m| m == "S256"));
        if !pkce && self.config.authorization_endpoint.is_none() {
            return Err(BrokerError::Config(format!(
                "{} does not advertise PKCE with S256 (code_challenge_methods_supported)",
                server.issuer
            )));
        }
        let random = |n| random_b64(n).map_err(|e| BrokerError::Config(e.to_string()));
        let verifier = random(32)?;
        let state = random(24)?;
        let mut url = at;
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("response_type", "code")
                .append_pair("client_id", &self.config.client_id)
                .append_pair("redirect_uri", redirect_uri)
                .append_pair("state", &state)
                .append_pair("code_challenge", &sha256_b64(&verifier))
                .append_pair("code_challenge_method", "S256")
                .append_pair("resource", resource);
            if !scopes.is_empty() {
                q.append_pair("scope", &scopes.join(" "));
            }
        }
        Ok(Authorization {
            url: url.to_string(),
            state,
            verifier: Secret::new(verifier),
        })
    }

    /// The issuer a redirect's `iss` must name (RFC 9207), when the
    /// server promises one.
    pub async fn expected_iss(&self) -> Result<Option<String>, BrokerError> {
        let server = self.server().await?;
        Ok(server.iss_supported.then_some(server.issuer))
    }

    /// Redeem a person's authorization code for tokens for `resource`.
    pub async fn redeem(
        &self,
        code: &str,
        verifier: &Secret,
        redirect_uri: &str,
        resource: &str,
        scopes: &[String],
    ) -> Result<TokenSet, BrokerError> {
        let mut params = with_grant(
            "authorization_code",
            vec![
                ("code", code.to_owned()),
                ("code_verifier", verifier.expose().to_owned()),
                ("redirect_uri", redirect_uri.to_owned()),
            ],
        );
        params.push(("resource", resource.to_owned()));
        let set = self.grant(params).await?;
        check_issued(&set, resource, scopes, None, None)?;
        Ok(set)
    }

    /// Refresh a person's tokens for `resource`. A refused refresh (the
    /// token revoked or expired) is [`BrokerError::Refused`]: they must
    /// authorize again.
    pub async fn refresh(
        &self,
        refresh_token: &Secret,
        resource: &str,
        scopes: &[String],
    ) -> Result<TokenSet, BrokerError> {
        let mut params = with_grant(
            "refresh_token",
            vec![("refresh_token", refresh_token.expose().to_owned())],
        );
        params.push(("resource", resource.to_owned()));
        let mut set = self.grant(params).await?;
        check_issued(&set, resource, scopes, None, None)?;
        // RFC 6749 §6: without a new refresh token, the old one stays.
        if set.refresh_token.is_none() {
            set.refresh_token = Some(refresh_token.expose().to_owned());
        }
        Ok(set)
    }
}

/// The audiences a JWT access token names (its `aud`), read without
/// verifying it: `None` for a token that is not a JWT or has no `aud`.
/// The broker reads them to refuse a token meant for someone else; the
/// token's recipient still verifies it.
pub fn jwt_audiences(token: &str) -> Option<Vec<String>> {
    match unverified_claims(token)?.get("aud")? {
        Value::String(one) => Some(vec![one.clone()]),
        Value::Array(many) => Some(
            many.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
        ),
        _ => None,
    }
}

/// When a JWT access token expires (its `exp`, seconds since the epoch),
/// read without verifying it: `None` for a token that is not a JWT.
pub fn jwt_expiry(token: &str) -> Option<u64> {
    unverified_claims(token)?.get("exp")?.as_u64()
}

/// The claims of a JWT, unverified.
fn unverified_claims(token: &str) -> Option<Value> {
    let mut parts = token.split('.');
    let (_, payload, _) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// `a` and `b` name the same resource (a trailing slash aside).
fn same_resource(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

/// Refuse an issued token that must not be used for `resource`.
fn check_issued(
    set: &TokenSet,
    resource: &str,
    scopes: &[String],
    subject_token: Option<&str>,
    not_audience: Option<&str>,
) -> Result<(), BrokerError> {
    if subject_token == Some(set.access_token.as_str()) {
        return Err(BrokerError::Unusable(
            "the authorization server answered with the caller's own token".into(),
        ));
    }
    if let Some(audiences) = jwt_audiences(&set.access_token) {
        if let Some(own) = not_audience
            && audiences.iter().any(|a| same_resource(a, own))
        {
            return Err(BrokerError::Unusable(
                "the authorization server issued a token whose audience includes the gateway"
                    .into(),
            ));
        }
        if !audiences.iter().any(|a| same_resource(a, resource)) {
            let named: Vec<String> = audiences.iter().take(3).map(|a| show(a)).collect();
            return Err(BrokerError::Unusable(format!(
                "the authorization server issued a token for another audience ({}), not {resource}",
                named.join(", ")
            )));
        }
    }
    if let (false, Some(granted)) = (scopes.is_empty(), &set.scope) {
        let wider: Vec<&str> = granted
            .split_whitespace()
            .filter(|s| !scopes.iter().any(|asked| asked == s))
            .collect();
        if !wider.is_empty() {
            return Err(BrokerError::Unusable(format!(
                "the authorization server granted scopes that were not asked for ({}); the token was not used",
                wider
                    .iter()
                    .take(5)
                    .map(|s| show(s))
                    .collect::<Vec<_>>()
                    .join(" ")
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jwt(claims: Value) -> String {
        let enc = |v: &Value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string().as_bytes())
        };
        format!(
            "{}.{}.sig",
            enc(&serde_json::json!({"alg": "ES256"})),
            enc(&claims)
        )
    }

    fn set(token: String, scope: Option<&str>) -> TokenSet {
        TokenSet {
            access_token: token,
            token_type: "Bearer".into(),
            scope: scope.map(str::to_owned),
            ..TokenSet::default()
        }
    }

    #[test]
    fn a_token_for_another_audience_or_the_gateway_is_refused() {
        let up = "https://crm.example.com/mcp";
        let gw = "https://gw.example.com/mcp";
        let ok = set(
            jwt(serde_json::json!({"aud": "https://crm.example.com/mcp/"})),
            None,
        );
        assert!(check_issued(&ok, up, &[], Some("x"), Some(gw)).is_ok());
        let other = set(
            jwt(serde_json::json!({"aud": "https://other.example.com"})),
            None,
        );
        assert!(matches!(
            check_issued(&other, up, &[], None, Some(gw)),
            Err(BrokerError::Unusable(m)) if m.contains("another audience")
        ));
        let both = set(jwt(serde_json::json!({"aud": [up, gw]})), None);
        assert!(matches!(
            check_issued(&both, up, &[], None, Some(gw)),
            Err(BrokerError::Unusable(m)) if m.contains("gateway")
        ));
        // An opaque token cannot be read; the upstream verifies it.
        assert!(check_issued(&set("opaque".into(), None), up, &[], None, Some(gw)).is_ok());
    }

    #[test]
    fn the_callers_own_token_and_widened_scopes_are_refused() {
        let up = "https://crm.example.com/mcp";
        let mine = set("caller-token".into(), None);
        assert!(matches!(
            check_issued(&mine, up, &[], Some("caller-token"), None),
            Err(BrokerError::Unusable(m)) if m.contains("own token")
        ));
        let asked = vec!["crm.read".to_owned()];
        let wider = set("t".into(), Some("crm.read crm.admin"));
        assert!(matches!(
            check_issued(&wider, up, &asked, None, None),
            Err(BrokerError::Unusable(m)) if m.contains("crm.admin")
        ));
        let narrower = set("t".into(), Some(""));
        assert!(check_issued(&narrower, up, &asked, None, None).is_ok());
    }

    #[test]
    fn audiences_are_read_from_a_jwt_only() {
        assert_eq!(
            jwt_audiences(&jwt(serde_json::json!({"aud": ["a", "b"]}))),
            Some(vec!["a".into(), "b".into()])
        );
        assert_eq!(jwt_audiences("not-a-jwt"), None);
        assert_eq!(jwt_audiences("a.b.c.d"), None);
        assert_eq!(jwt_audiences(&jwt(serde_json::json!({"sub": "x"}))), None);
    }
}
