//! One server's authorization, as its HTTP transport uses it: the token
//! for each request (refreshed shortly before it expires, one refresh for
//! all concurrent callers), and what a `401` or `403` answer means — a
//! DPoP nonce to retry with, a token to renew, or scopes to step up to.

use std::sync::Arc;
use toolgate_protocol::methods::{Discover, Method};

use parking_lot::RwLock;

use reqwest::Url;
use reqwest::header::HeaderMap;
use tokio::sync::Mutex;

use super::challenge::{self, Challenge};
use super::discovery::{self, AuthServer};
use super::fetch::{AuthHttp, fail};
use super::grant::{self, ClientAuth, CodeRequest, TokenEndpoint};
use super::jws::{SigningKey, now};
use super::store::{ClientRegistration, StoredAuth, TokenSet};
use super::{Config, Grant, OAuth};
use crate::ClientError;

/// The token a request was sent with.
#[derive(Clone)]
pub(crate) struct Presented {
    /// `Bearer …` or `DPoP …`.
    authorization: String,
    token: String,
    dpop: Option<Arc<SigningKey>>,
    generation: u64,
}

/// What one request has already tried, so it cannot loop.
#[derive(Default)]
pub(crate) struct Attempt {
    nonce_retries: u8,
    renewed: bool,
    stepped_up: bool,
}

/// What the transport does with an answer.
pub(crate) enum Verdict {
    /// Hand it to the caller.
    Use,
    /// Send the request again (with the new token or nonce).
    Retry,
}

/// What survives between requests.
struct State {
    loaded: bool,
    stored: StoredAuth,
    server: Option<AuthServer>,
    dpop_key: Option<Arc<SigningKey>>,
    as_nonce: Option<String>,
}

/// The authorization of one server.
pub(crate) struct Session {
    config: Arc<Config>,
    server: Url,
    /// The store's key: the server URL as configured.
    key: String,
    http: AuthHttp,
    state: Mutex<State>,
    /// The current token and when to renew it, for the common path that
    /// needs no lock.
    current: RwLock<Option<(Presented, Option<u64>)>>,
    /// The resource server's latest DPoP nonce.
    rs_nonce: RwLock<Option<String>>,
}

fn read<T: Clone>(l: &RwLock<T>) -> T {
    l.read().clone()
}

fn write<T>(l: &RwLock<T>, value: T) {
    *l.write() = value;
}

fn union(mut a: Vec<String>, b: &[String]) -> Vec<String> {
    for s in b {
        if !a.contains(s) {
            a.push(s.clone());
        }
    }
    a
}

impl Session {
    pub fn new(oauth: OAuth, server: &str) -> Result<Self, ClientError> {
        let url = Url::parse(server)
            .map_err(|e| ClientError::unreachable(format!("{server}: not a URL: {e}")))?;
        Ok(Self {
            http: AuthHttp::new(oauth.config.limits.clone())?,
            config: oauth.config,
            server: url,
            key: server.to_owned(),
            state: Mutex::new(State {
                loaded: false,
                stored: StoredAuth::default(),
                server: None,
                dpop_key: None,
                as_nonce: None,
            }),
            current: RwLock::new(None),
            rs_nonce: RwLock::new(None),
        })
    }

    /// An identity for caches of `private` results: a digest of the token.
    pub fn scope_id(&self) -> String {
        read(&self.current).map_or_else(String::new, |(p, _)| {
            super::jws::sha256_b64(&p.token)[..12].to_owned()
        })
    }

    /// The token to send now, if there is one (loaded from the store on
    /// first use, renewed when about to expire).
    pub async fn presented(&self) -> Result<Option<Presented>, ClientError> {
        if let Some((p, renew_at)) = read(&self.current)
            && renew_at.is_none_or(|t| now() < t)
        {
            return Ok(Some(p));
        }
        let mut state = self.state.lock().await;
        if !state.loaded {
            state.loaded = true;
            match self.config.store.load(&self.key) {
                Ok(Some(stored)) => {
                    state.dpop_key = stored
                        .dpop_key
                        .as_deref()
                        .and_then(|k| SigningKey::from_stored(k).ok())
                        .map(Arc::new);
                    state.stored = stored;
                    self.publish(&state);
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "cannot read stored credentials"),
            }
        }
        let expiring = state
            .stored
            .token
            .as_ref()
            .and_then(TokenSet::renew_at)
            .is_some_and(|t| now() >= t);
        if expiring && !self.refresh(&mut state).await {
            // Expired and not renewable: send nothing, and let the server's
            // 401 start a new authorization.
            state.stored.token = None;
            self.publish(&state);
        }
        Ok(read(&self.current).map(|(p, _)| p))
    }

    /// Add the token (and a fresh DPoP proof) to a request for `method url`.
    pub fn apply(
        &self,
        request: &mut crate::transport::http::Outbound,
        presented: Option<&Presented>,
        url: &Url,
    ) -> Result<(), ClientError> {
        let Some(p) = presented else {
            return Ok(());
        };
        request.add("authorization", &p.authorization)?;
        if let Some(key) = &p.dpop {
            let nonce = read(&self.rs_nonce);
            let proof = key.dpop_proof(
                request.method.as_str(),
                url,
                Some(&p.token),
                nonce.as_deref(),
            )?;
            request.add("dpop", &proof)?;
        }
        Ok(())
    }

    /// Decide about an answer to a request sent with `presented`.
    pub async fn judge(
        &self,
        status: reqwest::StatusCode,
        headers: &HeaderMap,
        presented: Option<&Presented>,
        attempt: &mut Attempt,
    ) -> Result<Verdict, ClientError> {
        if let Some(n) = headers.get("dpop-nonce").and_then(|v| v.to_str().ok()) {
            write(&self.rs_nonce, Some(n.to_owned()));
        }
        let (challenges, main) = challenge::from_headers(headers);
        match status.as_u16() {
            401 => {
                let nonce_asked = challenges
                    .iter()
                    .any(|c| c.error() == Some("use_dpop_nonce"));
                if nonce_asked
                    && presented.is_some_and(|p| p.dpop.is_some())
                    && attempt.nonce_retries < 2
                {
                    attempt.nonce_retries += 1;
                    return Ok(Verdict::Retry);
                }
                if attempt.renewed {
                    return Err(fail(format!(
                        "{} refused the token it was just issued{}",
                        self.server,
                        describe(&main)
                    )));
                }
                attempt.renewed = true;
                self.renew(&main, presented, false).await?;
                Ok(Verdict::Retry)
            }
            403 if main.error() == Some("insufficient_scope") => {
                if attempt.stepped_up {
                    return Err(fail(format!(
                        "{} still refuses after authorizing the scopes it asked for{}; giving up",
                        self.server,
                        describe(&main)
                    )));
                }
                attempt.stepped_up = true;
                self.renew(&main, presented, true).await?;
                Ok(Verdict::Retry)
            }
            _ => Ok(Verdict::Use),
        }
    }

    /// Authorize from scratch (`toolgate login`): the server's challenge
    /// to an unauthenticated request guides discovery.
    pub async fn login(&self) -> Result<(), ClientError> {
        let probe = self
            .http
            .request(reqwest::Method::POST, self.server.clone())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-method", Discover::NAME)
            .body(format!(
                r#"{{"jsonrpc":"2.0","id":0,"method":"{}","params":{{}}}}"#,
                Discover::NAME
            ));
        let answer = self.http.send(probe, &self.server).await?;
        let (_, main) = challenge::from_headers(&answer.headers);
        let mut state = self.state.lock().await;
        if !state.loaded {
            state.loaded = true;
            if let Ok(Some(stored)) = self.config.store.load(&self.key) {
                state.stored = stored;
            }
        }
        state.stored.token = None;
        self.obtain(&mut state, &main, false).await
    }

    /// A new token after a 401 (or, with `step_up`, a 403), unless another
    /// request renewed it meanwhile.
    async fn renew(
        &self,
        challenge: &Challenge,
        presented: Option<&Presented>,
        step_up: bool,
    ) -> Result<(), ClientError> {
        let mut state = self.state.lock().await;
        let current = read(&self.current).map(|(p, _)| p.generation);
        if current.is_some() && current != presented.map(|p| p.generation) {
            return Ok(());
        }
        if !step_up
            && state
                .stored
                .token
                .as_ref()
                .is_some_and(|t| t.refresh_token.is_some())
        {
            // A refresh serves only if the server still names the same issuer.
            let meta = discovery::protected_resource(
                &self.http,
                &self.server,
                challenge.resource_metadata(),
            )
            .await?;
            let same = meta.as_ref().and_then(|m| m.authorization_servers.first())
                == state.stored.issuer.as_ref();
            if same && self.refresh(&mut state).await {
                return Ok(());
            }
        }
        self.obtain(&mut state, challenge, step_up).await
    }

    /// Publish the stored token as the current one.
    fn publish(&self, state: &State) {
        let current = read(&self.current).map_or(0, |(p, _)| p.generation);
        let presented = state.stored.token.as_ref().map(|t| {
            let dpop = (t.token_type == "DPoP")
                .then(|| state.dpop_key.clone())
                .flatten();
            (
                Presented {
                    authorization: format!("{} {}", t.token_type, t.access_token),
                    token: t.access_token.clone(),
                    dpop,
                    generation: current + 1,
                },
                t.renew_at(),
            )
        });
        write(&self.current, presented);
    }

    fn save(&self, state: &mut State) {
        state.stored.dpop_key = state.dpop_key.as_ref().and_then(|k| k.pkcs8_b64());
        if let Err(e) = self.config.store.save(&self.key, &state.stored) {
            tracing::warn!(error = %e, "cannot keep the new credentials");
        }
        self.publish(state);
    }

    /// Renew with the refresh token; `false` if there is none or it failed.
    async fn refresh(&self, state: &mut State) -> bool {
        let Some(token) = state.stored.token.clone() else {
            return false;
        };
        let Some(refresh) = token.refresh_token.clone() else {
            return false;
        };
        let (Some(issuer), Some(endpoint)) = (
            state.stored.issuer.clone(),
            state.stored.token_endpoint.clone(),
        ) else {
            return false;
        };
        let Ok(url) = super::fetch::endpoint(&endpoint, "token endpoint") else {
            return false;
        };
        let Some(registration) = self.registration_for(state, &issuer) else {
            return false;
        };
        let key = self.client_key();
        let method = registration.auth_method.clone().unwrap_or_else(|| {
            grant::method_for(&registration, key.as_deref(), &AuthServer::default())
        });
        let client = ClientAuth {
            registration: &registration,
            key: key.as_deref(),
            method,
        };
        let mut params =
            grant::with_grant("refresh_token", vec![("refresh_token", refresh.clone())]);
        params.push((
            "resource",
            state.stored.resource.clone().unwrap_or_default(),
        ));
        let dpop = (token.token_type == "DPoP")
            .then(|| state.dpop_key.clone())
            .flatten();
        let mut nonce = state.as_nonce.take();
        let result = TokenEndpoint {
            http: &self.http,
            url: &url,
            issuer: &issuer,
            dpop: dpop.as_deref(),
            nonce: &mut nonce,
        }
        .request(Some(&client), params)
        .await;
        state.as_nonce = nonce;
        match result {
            Ok(mut fresh) => {
                // A server that does not rotate refresh tokens keeps the old one valid.
                fresh.refresh_token = fresh.refresh_token.or(Some(refresh));
                state.stored.token = Some(fresh);
                self.save(state);
                true
            }
            Err(e) => {
                tracing::info!(error = %e, "refreshing the token failed; authorizing anew");
                false
            }
        }
    }

    /// The registration known for `issuer`: the configured one (if bound to
    /// it, or unbound), else one made there earlier.
    fn registration_for(&self, state: &State, issuer: &str) -> Option<ClientRegistration> {
        if let Some(c) = &self.config.credentials
            && c.issuer.as_deref().is_none_or(|i| i == issuer)
        {
            return Some(ClientRegistration {
                client_id: c.client_id.clone(),
                client_secret: c.client_secret.as_ref().map(|s| s.expose().to_owned()),
                ..ClientRegistration::default()
            });
        }
        state.stored.registrations.get(issuer).cloned()
    }

    fn client_key(&self) -> Option<Arc<SigningKey>> {
        let (pem, alg) = self.config.credentials.as_ref()?.private_key.as_ref()?;
        match SigningKey::from_pem(pem.expose(), alg) {
            Ok(k) => Some(Arc::new(k)),
            Err(e) => {
                tracing::warn!(error = %e, "the configured client key cannot be used");
                None
            }
        }
    }

    /// Discover, register if needed, and run the grant.
    async fn obtain(
        &self,
        state: &mut State,
        challenge: &Challenge,
        step_up: bool,
    ) -> Result<(), ClientError> {
        let meta =
            discovery::protected_resource(&self.http, &self.server, challenge.resource_metadata())
                .await?;
        let (issuer, resource) = match &meta {
            Some(m) => (m.authorization_servers[0].clone(), m.resource.clone()),
            None => (
                self.server.origin().ascii_serialization(),
                discovery::canonical_resource(&self.server),
            ),
        };
        let server = discovery::authorization_server(&self.http, &issuer, meta.is_none()).await?;
        if state.stored.issuer.as_ref().is_some_and(|i| *i != issuer) {
            tracing::info!(from = ?state.stored.issuer, to = %issuer, "the server moved to another authorization server");
            state.stored.token = None;
            state.stored.scopes.clear();
            state.as_nonce = None;
        }
        // Scopes: the challenge's, else the server's scopes_supported, else
        // none; a step-up (or re-authorization) keeps what was asked before.
        let mut scopes = challenge
            .scopes()
            .or_else(|| meta.as_ref().and_then(|m| m.scopes_supported.clone()))
            .unwrap_or_default();
        if step_up || state.stored.issuer.as_deref() == Some(issuer.as_str()) {
            scopes = union(state.stored.scopes.clone(), &scopes);
        }
        let mut requested = scopes.clone();
        let wants_refresh = matches!(self.config.grant, Grant::AuthorizationCode)
            && self.config.offline_access
            && server.refreshes()
            && server
                .scopes_supported
                .as_ref()
                .is_some_and(|s| s.iter().any(|s| s == "offline_access"));
        if wants_refresh && !requested.iter().any(|s| s == "offline_access") {
            requested.push("offline_access".into());
        }
        let dpop = (self.config.dpop
            && server
                .dpop_algs
                .as_ref()
                .is_some_and(|a| a.iter().any(|a| a == "ES256")))
        .then(|| match state.dpop_key.clone() {
            Some(k) => Ok(k),
            None => SigningKey::generate().map(Arc::new),
        })
        .transpose()?;
        state.dpop_key = dpop.clone().or(state.dpop_key.take());
        let token_url = server.token_endpoint()?.clone();
        let key = self.client_key();
        let mut nonce = state.as_nonce.take();
        let mut endpoint = TokenEndpoint {
            http: &self.http,
            url: &token_url,
            issuer: &issuer,
            dpop: dpop.as_deref(),
            nonce: &mut nonce,
        };
        let (token, registration) = match &self.config.grant {
            Grant::AuthorizationCode => {
                let agent = self.config.user_agent.clone().ok_or_else(|| {
                    ClientError::LoginRequired(format!(
                        "{} needs a person to authorize this client in a browser",
                        self.server
                    ))
                })?;
                let redirect_uri = agent.redirect_uri();
                let registration = self
                    .register(state, &server, &redirect_uri, wants_refresh, &requested)
                    .await?;
                let (code, verifier) = grant::authorize(
                    agent.as_ref(),
                    &CodeRequest {
                        server: &server,
                        client_id: &registration.client_id,
                        redirect_uri: &redirect_uri,
                        resource: &resource,
                        scopes: &requested,
                    },
                )
                .await?;
                let method = grant::method_for(&registration, key.as_deref(), &server);
                let client = ClientAuth {
                    registration: &registration,
                    key: key.as_deref(),
                    method: method.clone(),
                };
                let params = grant::with_grant(
                    "authorization_code",
                    vec![
                        ("code", code),
                        ("redirect_uri", redirect_uri.clone()),
                        ("code_verifier", verifier),
                        ("resource", resource.clone()),
                    ],
                );
                let token = endpoint.request(Some(&client), params).await?;
                (
                    token,
                    Some(ClientRegistration {
                        auth_method: Some(method),
                        ..registration
                    }),
                )
            }
            Grant::ClientCredentials => {
                let registration = self
                    .registration_for(state, &issuer)
                    .ok_or_else(|| fail(format!("client credentials for {issuer} are needed for the client_credentials grant")))?;
                let method = grant::method_for(&registration, key.as_deref(), &server);
                let client = ClientAuth {
                    registration: &registration,
                    key: key.as_deref(),
                    method,
                };
                let params =
                    grant::with_grant("client_credentials", grant::common(&resource, &requested));
                (endpoint.request(Some(&client), params).await?, None)
            }
            Grant::JwtBearer(assertion) => {
                let registration = self.registration_for(state, &issuer);
                let assertion = grant::read_assertion(assertion)?;
                let client = registration.as_ref().map(|r| ClientAuth {
                    registration: r,
                    key: key.as_deref(),
                    method: grant::method_for(r, key.as_deref(), &server),
                });
                let params = grant::jwt_bearer(assertion, &resource, &requested);
                (endpoint.request(client.as_ref(), params).await?, None)
            }
            Grant::EnterpriseManaged(idp) => {
                let registration = self
                    .registration_for(state, &issuer)
                    .ok_or_else(|| fail(format!("client credentials for {issuer} are needed for enterprise-managed authorization")))?;
                let jag = grant::id_jag(&self.http, idp, &issuer, &resource, &requested).await?;
                let method = grant::method_for(&registration, key.as_deref(), &server);
                let client = ClientAuth {
                    registration: &registration,
                    key: key.as_deref(),
                    method,
                };
                let params = grant::jwt_bearer(jag, &resource, &requested);
                (endpoint.request(Some(&client), params).await?, None)
            }
        };
        state.as_nonce = nonce;
        if let Some(reg) = registration.filter(|_| self.config.credentials.is_none()) {
            state.stored.registrations.insert(issuer.clone(), reg);
        }
        state.stored.issuer = Some(issuer);
        state.stored.token_endpoint = Some(token_url.to_string());
        state.stored.resource = Some(resource);
        state.stored.scopes = scopes;
        state.stored.token = Some(TokenSet {
            scope: token
                .scope
                .clone()
                .or_else(|| (!requested.is_empty()).then(|| requested.join(" "))),
            ..token
        });
        state.server = Some(server);
        self.save(state);
        Ok(())
    }

    /// The client id for an authorization-code grant at `server`:
    /// pre-registered, kept from before, a Client ID Metadata Document, or
    /// dynamic registration, in the specification's order.
    async fn register(
        &self,
        state: &State,
        server: &AuthServer,
        redirect_uri: &str,
        refresh: bool,
        scopes: &[String],
    ) -> Result<ClientRegistration, ClientError> {
        let issuer = &server.issuer;
        if let Some(c) = &self.config.credentials
            && let Some(bound) = c.issuer.as_deref().filter(|i| *i != issuer.as_str())
        {
            return Err(fail(format!(
                "the pre-registered client is for {bound}, but the server now uses {issuer}; register this client there"
            )));
        }
        if let Some(reg) = self.registration_for(state, issuer)
            && reg
                .redirect_uri
                .as_deref()
                .is_none_or(|r| r == redirect_uri)
        {
            return Ok(reg);
        }
        if let Some(url) = self
            .config
            .client_metadata_url
            .as_deref()
            .filter(|_| server.cimd_supported)
        {
            let parsed =
                Url::parse(url).map_err(|_| fail("the client metadata URL is not a URL"))?;
            if parsed.scheme() != "https" || parsed.path().len() <= 1 {
                return Err(fail("a client metadata URL must be HTTPS with a path"));
            }
            return Ok(ClientRegistration {
                client_id: url.to_owned(),
                auth_method: Some("none".into()),
                redirect_uri: Some(redirect_uri.to_owned()),
                ..ClientRegistration::default()
            });
        }
        let Some(endpoint) = &server.registration_endpoint else {
            return Err(fail(format!(
                "{issuer} offers no way to obtain a client id here (no dynamic registration{}); configure a pre-registered client id",
                if self.config.client_metadata_url.is_some() {
                    ", no Client ID Metadata Documents"
                } else {
                    ""
                }
            )));
        };
        self.dynamic_registration(endpoint, server, redirect_uri, refresh, scopes)
            .await
    }

    /// RFC 7591 registration.
    async fn dynamic_registration(
        &self,
        endpoint: &Url,
        server: &AuthServer,
        redirect_uri: &str,
        refresh: bool,
        scopes: &[String],
    ) -> Result<ClientRegistration, ClientError> {
        let method = if server.accepts_auth("none") {
            "none"
        } else if server.accepts_auth("client_secret_basic") {
            "client_secret_basic"
        } else {
            "client_secret_post"
        };
        let local = Url::parse(redirect_uri)
            .is_ok_and(|u| super::fetch::secure(&u) && u.scheme() == "http");
        let mut grants = vec!["authorization_code"];
        if refresh || server.refreshes() {
            grants.push("refresh_token");
        }
        let mut body = serde_json::json!({
            "client_name": self.config.client_name,
            "redirect_uris": [redirect_uri],
            "grant_types": grants,
            "response_types": ["code"],
            "token_endpoint_auth_method": method,
            "application_type": if local { "native" } else { "web" },
        });
        if !scopes.is_empty() {
            body["scope"] = scopes.join(" ").into();
        }
        let request = self
            .http
            .request(reqwest::Method::POST, endpoint.clone())
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(body.to_string());
        let answer = self.http.send(request, endpoint).await?;
        let doc = answer.json.unwrap_or_default();
        let text = |k: &str| {
            doc.get(k)
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        };
        if !answer.status.is_success() {
            let why = text("error_description")
                .or_else(|| text("error"))
                .unwrap_or_else(|| format!("HTTP {}", answer.status));
            return Err(fail(format!(
                "{} refused to register this client: {}",
                server.issuer,
                super::fetch::shown(&why)
            )));
        }
        let client_id = text("client_id")
            .filter(|c| !c.is_empty())
            .ok_or_else(|| fail("the registration answer has no client_id"))?;
        Ok(ClientRegistration {
            client_id,
            client_secret: text("client_secret").filter(|s| !s.is_empty()),
            auth_method: text("token_endpoint_auth_method"),
            redirect_uri: Some(redirect_uri.to_owned()),
        })
    }
}

/// `: error (description)` of a challenge, for messages.
fn describe(c: &Challenge) -> String {
    match (c.error(), c.params.get("error_description")) {
        (Some(e), Some(d)) => format!(": {e} ({})", super::fetch::shown(d)),
        (Some(e), None) => format!(": {e}"),
        _ => String::new(),
    }
}
