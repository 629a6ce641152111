//! The built-in [`TokenVerifier`]: JWT access tokens signed with a key from
//! a JWKS (RFC 7517), checked with the `jsonwebtoken` crate.
//!
//! A token is accepted only if all of these hold:
//! - its signature verifies under the JWKS key its `kid` names (or the only
//!   key, when there is one and the token names none), with an asymmetric
//!   algorithm of that key's family — `alg: none` and every HMAC algorithm
//!   are refused, so a token "signed" with the public key as an HMAC secret
//!   (algorithm confusion) never verifies;
//! - `iss` is the configured issuer and `aud` contains the server's
//!   canonical resource URI (RFC 8707: tokens for other resources are
//!   refused, never passed through);
//! - `exp` is present and not past, `nbf` (if present) is not ahead, both
//!   with a small leeway (30 s by default).
//!
//! Scopes come from the `scope` claim (space-separated, RFC 8693) or an
//! `scp` array; the subject from `sub`.
//!
//! Keys come from a file or JSON given at start, or from an HTTPS URL fetched
//! with a timeout on first use and cached by `kid`; a token naming an
//! unknown `kid` triggers at most one refetch a minute (key rotation).
//!
//! A client sends the same token with every request, and checking an RSA
//! signature costs far more than the rest of a call. So a verified token is
//! remembered, by its SHA-256 digest, for at most a minute and never past its
//! own `exp`: each later request with the same bytes skips the signature
//! (its lifetime is still checked). At most 4,096 tokens are remembered.

use parking_lot::RwLock;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::{AuthContext, TokenError, TokenVerifier, VerifyFuture};

/// How often an unknown `kid` may cause the JWKS URL to be fetched again.
const REFETCH_EVERY: Duration = Duration::from_secs(60);
/// How long fetching the JWKS may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest JWKS document accepted.
const MAX_JWKS_BYTES: usize = 1024 * 1024;

/// How long a verified token is remembered.
const REMEMBER_FOR: Duration = Duration::from_secs(60);
/// How many verified tokens are remembered.
const REMEMBERED: usize = 4096;

/// Fetches the JWKS document at a URL, bounded in time and size. Boxed,
/// and made only by [`JwtVerifier::from_jwks_url`], so the HTTPS client is
/// linked only into programs that fetch keys from a URL: a server with a
/// key file or no tokens at all carries none of it.
type Fetch = Box<
    dyn Fn(
            &str,
        )
            -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Vec<u8>, String>> + Send>>
        + Send
        + Sync,
>;

/// Where keys are fetched from, when they come from a URL.
struct Remote {
    url: String,
    fetch: Fetch,
}

/// A verified token's outcome, and until when it holds.
struct Verified {
    auth: AuthContext,
    /// `exp` (seconds since the epoch), leeway included.
    until: u64,
    at: Instant,
}

struct Key {
    key: DecodingKey,
    algorithms: Vec<Algorithm>,
}

#[derive(Default)]
struct Keys {
    by_kid: HashMap<String, Key>,
    /// Keys without a `kid` (usable only when the set has exactly one key).
    unnamed: Vec<Key>,
    fetched: Option<Instant>,
}

/// Verifies JWT bearer tokens against a JWKS. See the module docs.
///
/// ```
/// use toolgate_server::JwtVerifier;
/// let jwks = r#"{"keys": [{"kty": "RSA", "kid": "k1", "alg": "RS256",
///   "n": "tEQUe6oF1MBrdujb6qQrb8vG6p11OEu93b7gVk0pLllIzb_AFJdJDABBQn6KjOyCw3WjYoxfCVICalIPJu7EGxU0gKtToNTLSDdkVWm3EepPE34AvGb4KewX1Gt0LAyHRjo3WE_kyWR7XGGm0Qzi5ZYMCwXtgaAHJc9v8M_YtzyAQDLAE777IrOe2umA-q6tD0uxqbGvYo78hrSd2DbJea_VUAlVhIQil4YycJKR5vobR4_Z4RPOma6KCv6NT0tFdToE7HdqvzAVkTc-a4jOvzQVlhThvRY0fFn6Vlq8tFBiiKQfqH3y0OSTmIhXi_iRlFQmLlPk2eUo6PLeD4iWpw",
///   "e": "AQAB"}]}"#;
/// let verifier = JwtVerifier::from_jwks_json(jwks, "https://auth.example.com", "https://mcp.example.com/mcp").unwrap();
/// # let _ = verifier;
/// ```
pub struct JwtVerifier {
    issuer: String,
    audience: String,
    leeway: Duration,
    remote: Option<Remote>,
    keys: RwLock<Keys>,
    verified: RwLock<HashMap<[u8; 32], Verified>>,
}

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("url", &self.remote.as_ref().map(|r| &r.url))
            .finish_non_exhaustive()
    }
}

fn invalid(reason: impl Into<String>) -> TokenError {
    TokenError::Invalid(reason.into())
}

/// The body of the JWKS at `url`, at most [`MAX_JWKS_BYTES`].
async fn fetch_jwks(client: reqwest::Client, url: String) -> Result<Vec<u8>, String> {
    let mut response = client
        .get(&url)
        .send()
        .await
        .map_err(|e| format!("fetching {url}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("fetching {url}: HTTP {}", response.status()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > MAX_JWKS_BYTES {
            return Err(format!("{url} sent a JWKS over {MAX_JWKS_BYTES} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

impl JwtVerifier {
    fn with_keys(issuer: &str, audience: &str, keys: Keys) -> Self {
        Self {
            issuer: issuer.to_owned(),
            audience: audience.to_owned(),
            leeway: Duration::from_secs(30),
            remote: None,
            keys: RwLock::new(keys),
            verified: RwLock::new(HashMap::new()),
        }
    }

    /// A token verified within the last minute and not yet expired.
    fn remembered(&self, digest: &[u8; 32]) -> Option<AuthContext> {
        let verified = self.verified.read();
        let hit = verified.get(digest)?;
        (hit.at.elapsed() < REMEMBER_FOR && epoch_now() < hit.until).then(|| hit.auth.clone())
    }

    fn remember(&self, digest: [u8; 32], auth: &AuthContext) {
        let Some(exp) = auth
            .claims()
            .and_then(|c| c.get("exp"))
            .and_then(Value::as_u64)
        else {
            return;
        };
        let mut verified = self.verified.write();
        if verified.len() >= REMEMBERED {
            let now = epoch_now();
            verified.retain(|_, v| v.at.elapsed() < REMEMBER_FOR && now < v.until);
            if verified.len() >= REMEMBERED {
                verified.clear();
            }
        }
        verified.insert(
            digest,
            Verified {
                auth: auth.clone(),
                until: exp.saturating_add(self.leeway.as_secs()),
                at: Instant::now(),
            },
        );
    }

    /// Keys from a JWKS document.
    pub fn from_jwks_json(jwks: &str, issuer: &str, audience: &str) -> Result<Self, TokenError> {
        Ok(Self::with_keys(
            issuer,
            audience,
            parse_jwks(jwks.as_bytes())?,
        ))
    }

    /// Keys from a JWKS file, read now.
    pub fn from_jwks_file(
        path: impl AsRef<Path>,
        issuer: &str,
        audience: &str,
    ) -> Result<Self, TokenError> {
        let path = path.as_ref();
        let text = std::fs::read(path).map_err(|e| {
            TokenError::Unavailable(format!("cannot read the JWKS file {}: {e}", path.display()))
        })?;
        Ok(Self::with_keys(issuer, audience, parse_jwks(&text)?))
    }

    /// Keys from a JWKS URL (`https://`, or `http://` on a loopback host for
    /// tests), fetched on first use with a 10 s timeout.
    pub fn from_jwks_url(url: &str, issuer: &str, audience: &str) -> Result<Self, TokenError> {
        let parsed = url::Url::parse(url)
            .map_err(|e| TokenError::Unavailable(format!("the JWKS URL {url:?}: {e}")))?;
        let loopback = matches!(parsed.host_str(), Some("127.0.0.1" | "localhost" | "[::1]"));
        if parsed.scheme() != "https" && !(parsed.scheme() == "http" && loopback) {
            return Err(TokenError::Unavailable(format!(
                "the JWKS URL {url:?} must use https"
            )));
        }
        let builder = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none());
        let client = crate::tls::with_tls(builder)
            .map_err(|e| TokenError::Unavailable(format!("cannot set up TLS: {e}")))?
            .build()
            .map_err(|e| TokenError::Unavailable(e.to_string()))?;
        let mut verifier = Self::with_keys(issuer, audience, Keys::default());
        verifier.remote = Some(Remote {
            url: url.to_owned(),
            fetch: Box::new(move |url| Box::pin(fetch_jwks(client.clone(), url.to_owned()))),
        });
        Ok(verifier)
    }

    /// The clock skew tolerated on `exp` and `nbf` (default 30 s).
    pub fn leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway;
        self
    }

    fn read(&self) -> parking_lot::RwLockReadGuard<'_, Keys> {
        self.keys.read()
    }

    /// Fetch the JWKS again if a URL is configured and the last fetch is old
    /// enough (or there was none).
    async fn refresh(&self) -> Result<(), TokenError> {
        let Some(remote) = &self.remote else {
            return Ok(());
        };
        if self
            .read()
            .fetched
            .is_some_and(|t| t.elapsed() < REFETCH_EVERY)
        {
            return Ok(());
        }
        let fetched = (remote.fetch)(&remote.url)
            .await
            .map_err(TokenError::Unavailable);
        let mut keys = self.keys.write();
        keys.fetched = Some(Instant::now());
        let mut fresh = parse_jwks(&fetched?)?;
        fresh.fetched = keys.fetched;
        *keys = fresh;
        Ok(())
    }

    fn check(&self, token: &str) -> Result<AuthContext, TokenError> {
        let header = decode_header(token).map_err(|_| invalid("malformed or unsigned"))?;
        if matches!(
            header.alg,
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
        ) {
            return Err(invalid("symmetric (HMAC) algorithms are not accepted"));
        }
        let keys = self.read();
        let key = match &header.kid {
            Some(kid) => keys.by_kid.get(kid),
            None if keys.by_kid.len() + keys.unnamed.len() == 1 => {
                keys.by_kid.values().chain(&keys.unnamed).next()
            }
            None => None,
        }
        .ok_or_else(|| invalid("signed by an unknown key"))?;
        if !key.algorithms.contains(&header.alg) {
            return Err(invalid(format!(
                "{:?} is not accepted for this key",
                header.alg
            )));
        }
        let mut validation = Validation::new(header.alg);
        validation.algorithms = key.algorithms.clone();
        validation.leeway = self.leeway.as_secs();
        validation.validate_nbf = true;
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let data = decode::<Map<String, Value>>(token, &key.key, &validation).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind;
            invalid(match e.kind() {
                ErrorKind::ExpiredSignature => "expired",
                ErrorKind::ImmatureSignature => "not yet valid",
                ErrorKind::InvalidAudience => "issued for another audience",
                ErrorKind::InvalidIssuer => "issued by another issuer",
                ErrorKind::InvalidSignature => "the signature does not verify",
                ErrorKind::MissingRequiredClaim(_) => "a required claim (exp, iss, aud) is missing",
                ErrorKind::InvalidAlgorithm => "the algorithm is not accepted for this key",
                _ => "malformed",
            })
        })?;
        let claims = data.claims;
        let subject = claims
            .get("sub")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut scopes: Vec<String> = claims
            .get("scope")
            .and_then(Value::as_str)
            .map(|s| s.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default();
        if let Some(Value::Array(scp)) = claims.get("scp") {
            scopes.extend(scp.iter().filter_map(Value::as_str).map(str::to_owned));
        }
        Ok(AuthContext::new(subject)
            .with_scopes(scopes)
            .with_claims(claims))
    }
}

fn epoch_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl TokenVerifier for JwtVerifier {
    fn verify<'a>(&'a self, token: &'a str) -> VerifyFuture<'a> {
        Box::pin(async move {
            let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
            if let Some(auth) = self.remembered(&digest) {
                return Ok(auth);
            }
            let outcome = self.verify_fully(token).await;
            if let Ok(auth) = &outcome {
                self.remember(digest, auth);
            }
            outcome
        })
    }
}

impl JwtVerifier {
    /// Check the signature and claims, fetching keys first if needed.
    async fn verify_fully(&self, token: &str) -> Result<AuthContext, TokenError> {
        if self.remote.is_some() && self.read().fetched.is_none() {
            self.refresh().await?;
        }
        match self.check(token) {
            Err(TokenError::Invalid(reason)) if reason == "signed by an unknown key" => {
                // Perhaps the issuer rotated its keys: look again, rarely.
                self.refresh().await?;
                self.check(token)
            }
            other => other,
        }
    }
}

/// The accepted algorithms of a key: the one its `alg` names, or its family's.
fn algorithms(params: &AlgorithmParameters, named: Option<Algorithm>) -> Vec<Algorithm> {
    let family: &[Algorithm] = match params {
        AlgorithmParameters::RSA(_) => &[
            Algorithm::RS256,
            Algorithm::RS384,
            Algorithm::RS512,
            Algorithm::PS256,
            Algorithm::PS384,
            Algorithm::PS512,
        ],
        AlgorithmParameters::EllipticCurve(_) => &[Algorithm::ES256, Algorithm::ES384],
        AlgorithmParameters::OctetKeyPair(_) => &[Algorithm::EdDSA],
        // Symmetric keys are never accepted from a JWKS.
        AlgorithmParameters::OctetKey(_) => &[],
    };
    match named {
        Some(alg) if family.contains(&alg) => vec![alg],
        Some(_) => Vec::new(),
        None => family.to_vec(),
    }
}

fn parse_jwks(bytes: &[u8]) -> Result<Keys, TokenError> {
    let set: JwkSet = serde_json::from_slice(bytes)
        .map_err(|e| TokenError::Unavailable(format!("the JWKS is not valid: {e}")))?;
    let mut keys = Keys::default();
    for jwk in &set.keys {
        let named = jwk
            .common
            .key_algorithm
            .and_then(|a| a.to_string().parse::<Algorithm>().ok());
        let algorithms = algorithms(&jwk.algorithm, named);
        if algorithms.is_empty() {
            continue;
        }
        let Ok(key) = DecodingKey::from_jwk(jwk) else {
            continue;
        };
        let key = Key { key, algorithms };
        match &jwk.common.key_id {
            Some(kid) => {
                keys.by_kid.insert(kid.clone(), key);
            }
            None => keys.unnamed.push(key),
        }
    }
    if keys.by_kid.is_empty() && keys.unnamed.is_empty() {
        return Err(TokenError::Unavailable(
            "the JWKS holds no usable signing key".into(),
        ));
    }
    Ok(keys)
}
