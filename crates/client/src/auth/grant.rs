//! Token requests: client authentication (none, `client_secret_basic`,
//! `client_secret_post`, `private_key_jwt`), DPoP proofs with the
//! authorization server's nonce, and the grants themselves — authorization
//! code with PKCE and the RFC 9207 `iss` check, refresh, client
//! credentials, JWT bearer, and the enterprise token exchange.

use base64::Engine as _;
use reqwest::Url;
use serde_json::Value;

use super::discovery::AuthServer;
use super::fetch::{AuthHttp, fail, shown};
use super::jws::{SigningKey, now, random_b64, sha256_b64};
use super::store::{ClientRegistration, TokenSet};
use super::{Assertion, EnterpriseIdp, UserAgent};
use crate::ClientError;

/// The longest access or refresh token accepted.
const MAX_TOKEN: usize = 16 * 1024;

const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";
const ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";

/// Who the client is at the token endpoint, and how it proves it.
pub(crate) struct ClientAuth<'a> {
    pub registration: &'a ClientRegistration,
    /// For `private_key_jwt`.
    pub key: Option<&'a SigningKey>,
    /// The method, as [`method_for`] chose it.
    pub method: String,
}

/// The token endpoint authentication method for `registration` at `server`.
pub(crate) fn method_for(
    registration: &ClientRegistration,
    key: Option<&SigningKey>,
    server: &AuthServer,
) -> String {
    if key.is_some() {
        return "private_key_jwt".into();
    }
    if let Some(m) = &registration.auth_method {
        return m.clone();
    }
    if registration.client_secret.is_none() {
        return "none".into();
    }
    if !server.accepts_auth("client_secret_basic") && server.accepts_auth("client_secret_post") {
        "client_secret_post".into()
    } else {
        "client_secret_basic".into()
    }
}

/// One token endpoint, with what every request to it needs.
pub(crate) struct TokenEndpoint<'a> {
    pub http: &'a AuthHttp,
    pub url: &'a Url,
    /// The audience of client assertions (the issuer).
    pub issuer: &'a str,
    pub dpop: Option<&'a SigningKey>,
    /// The authorization server's latest DPoP nonce (updated here).
    pub nonce: &'a mut Option<String>,
}

impl TokenEndpoint<'_> {
    /// POST `params` (plus client authentication); the tokens, or why not.
    pub async fn request(
        &mut self,
        client: Option<&ClientAuth<'_>>,
        params: Vec<(&'static str, String)>,
    ) -> Result<TokenSet, ClientError> {
        let body = self.post(client, params).await?;
        tokens(body.as_ref(), self.dpop.is_some())
    }

    /// POST `params` with client authentication (and a DPoP proof, retried
    /// once with the server's nonce when it asks, RFC 9449 §8); the JSON of
    /// a successful answer, or the server's refusal.
    pub(crate) async fn post(
        &mut self,
        client: Option<&ClientAuth<'_>>,
        mut params: Vec<(&'static str, String)>,
    ) -> Result<Option<Value>, ClientError> {
        let mut basic = None;
        if let Some(client) = client {
            let reg = client.registration;
            match client.method.as_str() {
                "client_secret_basic" => {
                    // RFC 6749 §2.3.1: both parts form-encoded before base64.
                    let enc =
                        |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
                    let secret = reg.client_secret.as_deref().unwrap_or_default();
                    basic = Some(base64::engine::general_purpose::STANDARD.encode(format!(
                        "{}:{}",
                        enc(&reg.client_id),
                        enc(secret)
                    )));
                }
                "client_secret_post" => {
                    params.push(("client_id", reg.client_id.clone()));
                    params.push((
                        "client_secret",
                        reg.client_secret.clone().unwrap_or_default(),
                    ));
                }
                "private_key_jwt" => {
                    let key = client
                        .key
                        .ok_or_else(|| fail("private_key_jwt needs a private key"))?;
                    params.push(("client_id", reg.client_id.clone()));
                    params.push((
                        "client_assertion_type",
                        "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".into(),
                    ));
                    params.push((
                        "client_assertion",
                        key.client_assertion(&reg.client_id, self.issuer)?,
                    ));
                }
                _ => params.push(("client_id", reg.client_id.clone())),
            }
        }
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(params.iter().map(|(k, v)| (*k, v.as_str())))
            .finish();
        let grant = params
            .iter()
            .find(|(k, _)| *k == "grant_type")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        for attempt in 0..2 {
            let mut builder = self
                .http
                .request(reqwest::Method::POST, self.url.clone())
                .header("content-type", "application/x-www-form-urlencoded")
                .header("accept", "application/json")
                .body(body.clone());
            if let Some(b) = &basic {
                builder = builder.header("authorization", format!("Basic {b}"));
            }
            if let Some(key) = self.dpop {
                builder = builder.header(
                    "dpop",
                    key.dpop_proof("POST", self.url, None, self.nonce.as_deref())?,
                );
            }
            let answer = self.http.send(builder, self.url).await?;
            if let Some(n) = answer
                .headers
                .get("dpop-nonce")
                .and_then(|v| v.to_str().ok())
            {
                *self.nonce = Some(n.to_owned());
            }
            if answer.status.is_success() {
                return Ok(answer.json);
            }
            let error = answer
                .json
                .as_ref()
                .and_then(|j| j.get("error"))
                .and_then(Value::as_str);
            if error == Some("use_dpop_nonce") && self.dpop.is_some() && attempt == 0 {
                continue;
            }
            if answer.status.is_server_error() {
                return Err(self.http.down(format!(
                    "the authorization server failed the {grant} token request (HTTP {})",
                    answer.status
                )));
            }
            return Err(refusal(&grant, answer.status, answer.json.as_ref()));
        }
        Err(fail(
            "the authorization server kept asking for a new DPoP nonce",
        ))
    }
}

/// The server's refusal, short and safe to show.
fn refusal(grant: &str, status: reqwest::StatusCode, body: Option<&Value>) -> ClientError {
    let field = |k: &str| {
        body.and_then(|b| b.get(k))
            .and_then(Value::as_str)
            .map(shown)
    };
    let what = match (field("error"), field("error_description")) {
        (Some(e), Some(d)) => format!("{e} ({d})"),
        (Some(e), None) => e,
        _ => format!("HTTP {status}"),
    };
    fail(format!(
        "the authorization server refused the {grant} token request: {what}"
    ))
}

/// A successful token response.
pub(crate) fn tokens(body: Option<&Value>, sent_dpop: bool) -> Result<TokenSet, ClientError> {
    let body = body.ok_or_else(|| fail("the token response is not JSON"))?;
    let text = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_owned);
    let access_token = text("access_token")
        .filter(|t| {
            !t.is_empty() && t.len() <= MAX_TOKEN && t.bytes().all(|b| b.is_ascii_graphic())
        })
        .ok_or_else(|| fail("the token response has no usable access_token"))?;
    let token_type = match text("token_type")
        .unwrap_or_default()
        .to_ascii_lowercase()
        .as_str()
    {
        "bearer" => "Bearer",
        "dpop" if sent_dpop => "DPoP",
        "dpop" => {
            return Err(fail(
                "the server issued a DPoP token to a client that sent no proof",
            ));
        }
        other => return Err(fail(format!("unsupported token_type {:?}", shown(other)))),
    };
    let refresh_token = text("refresh_token").filter(|t| !t.is_empty() && t.len() <= MAX_TOKEN);
    Ok(TokenSet {
        access_token,
        token_type: token_type.into(),
        expires_at: body
            .get("expires_in")
            .and_then(Value::as_u64)
            .map(|s| now().saturating_add(s)),
        issued_at: Some(now()),
        refresh_token,
        scope: text("scope"),
    })
}

/// What an authorization-code exchange needs.
pub(crate) struct CodeRequest<'a> {
    pub server: &'a AuthServer,
    pub client_id: &'a str,
    pub redirect_uri: &'a str,
    pub resource: &'a str,
    pub scopes: &'a [String],
}

/// Send a person to authorize; the code and its PKCE verifier, once the
/// redirect passed the `state` and RFC 9207 `iss` checks.
pub(crate) async fn authorize(
    agent: &dyn UserAgent,
    req: &CodeRequest<'_>,
) -> Result<(String, String), ClientError> {
    let server = req.server;
    let pkce = server
        .code_challenge_methods
        .as_ref()
        .is_some_and(|m| m.iter().any(|m| m == "S256"));
    if !pkce && !server.defaults {
        return Err(fail(format!(
            "{} does not advertise PKCE with S256 (code_challenge_methods_supported); refusing to authorize there",
            server.issuer
        )));
    }
    let endpoint = server
        .authorization_endpoint
        .as_ref()
        .ok_or_else(|| fail(format!("{} has no authorization endpoint", server.issuer)))?;
    let verifier = random_b64(32)?;
    let state = random_b64(16)?;
    let mut url = endpoint.clone();
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", req.client_id)
            .append_pair("redirect_uri", req.redirect_uri)
            .append_pair("state", &state)
            .append_pair("code_challenge", &sha256_b64(&verifier))
            .append_pair("code_challenge_method", "S256")
            .append_pair("resource", req.resource);
        if !req.scopes.is_empty() {
            q.append_pair("scope", &req.scopes.join(" "));
        }
    }
    let back = agent.authorize(url.to_string()).await?;
    let back = Url::parse(&back).map_err(|_| fail("the authorization response is not a URL"))?;
    let param = |k: &str| {
        back.query_pairs()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.into_owned())
    };
    // RFC 9207 §2.4, before anything else in the response is acted on: a
    // present iss must be the recorded issuer, exactly as a string.
    match param("iss") {
        Some(iss) if iss != server.issuer => {
            return Err(fail(format!(
                "the authorization response came from issuer {:?}, not {:?}; the code was not used (mix-up protection)",
                shown(&iss),
                server.issuer
            )));
        }
        None if server.iss_supported => {
            return Err(fail(format!(
                "{} promises an iss parameter in authorization responses but sent none; the code was not used",
                server.issuer
            )));
        }
        _ => {}
    }
    if param("state").as_deref() != Some(state.as_str()) {
        return Err(fail(
            "the authorization response's state does not match the request; the code was not used",
        ));
    }
    if let Some(error) = param("error") {
        let detail = param("error_description")
            .map(|d| format!(" ({})", shown(&d)))
            .unwrap_or_default();
        return Err(fail(format!(
            "authorization was refused: {}{detail}",
            shown(&error)
        )));
    }
    let code = param("code").ok_or_else(|| fail("the authorization response has no code"))?;
    Ok((code, verifier))
}

/// The parameters every grant shares: the resource, and the scopes if any.
pub(crate) fn common(resource: &str, scopes: &[String]) -> Vec<(&'static str, String)> {
    let mut p = vec![("resource", resource.to_owned())];
    if !scopes.is_empty() {
        p.push(("scope", scopes.join(" ")));
    }
    p
}

/// `grant_type=…` first, then `rest`.
pub(crate) fn with_grant(
    grant: &str,
    rest: Vec<(&'static str, String)>,
) -> Vec<(&'static str, String)> {
    let mut p = vec![("grant_type", grant.to_owned())];
    p.extend(rest);
    p
}

/// The JWT-bearer grant with `assertion`.
pub(crate) fn jwt_bearer(
    assertion: String,
    resource: &str,
    scopes: &[String],
) -> Vec<(&'static str, String)> {
    let mut p = with_grant(JWT_BEARER, vec![("assertion", assertion)]);
    p.extend(common(resource, scopes));
    p
}

/// Exchange the user's ID token at the enterprise identity provider for
/// an identity assertion grant for `issuer` and `resource`.
pub(crate) async fn id_jag(
    http: &AuthHttp,
    idp: &EnterpriseIdp,
    issuer: &str,
    resource: &str,
    scopes: &[String],
) -> Result<String, ClientError> {
    let url = super::fetch::endpoint(&idp.token_endpoint, "identity provider token endpoint")?;
    let registration = ClientRegistration {
        client_id: idp.client_id.clone(),
        client_secret: idp.client_secret.as_ref().map(|s| s.expose().to_owned()),
        ..ClientRegistration::default()
    };
    let method = if registration.client_secret.is_some() {
        "client_secret_basic"
    } else {
        "none"
    };
    let client = ClientAuth {
        registration: &registration,
        key: None,
        method: method.into(),
    };
    let mut params = with_grant(
        TOKEN_EXCHANGE,
        vec![
            ("requested_token_type", ID_JAG.into()),
            ("audience", issuer.to_owned()),
            ("subject_token", idp.id_token.read()?),
            ("subject_token_type", ID_TOKEN.into()),
        ],
    );
    params.extend(common(resource, scopes));
    let mut nonce = None;
    let mut endpoint = TokenEndpoint {
        http,
        url: &url,
        issuer,
        dpop: None,
        nonce: &mut nonce,
    };
    // The identity provider answers with token_type N_A: read it by hand.
    let answer = endpoint
        .post(Some(&client), params)
        .await?
        .ok_or_else(|| fail("the identity provider's answer is not JSON"))?;
    if answer.get("issued_token_type").and_then(Value::as_str) != Some(ID_JAG) {
        return Err(fail(
            "the identity provider did not issue an identity assertion grant (ID-JAG)",
        ));
    }
    answer
        .get("access_token")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty() && t.len() <= MAX_TOKEN)
        .map(str::to_owned)
        .ok_or_else(|| fail("the identity provider's answer has no assertion"))
}

/// The assertion a grant presents.
pub(crate) fn read_assertion(a: &Assertion) -> Result<String, ClientError> {
    let token = a.read()?;
    if token.is_empty() {
        return Err(fail("the assertion is empty"));
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_token_response_is_checked_before_it_is_used() {
        let ok = tokens(
            Some(&json!({"access_token": "abc", "token_type": "bearer", "expires_in": 60})),
            false,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ok.token_type, "Bearer");
        assert!(ok.expires_at.is_some_and(|t| t > now()));
        for bad in [
            json!({"token_type": "Bearer"}),
            json!({"access_token": "", "token_type": "Bearer"}),
            json!({"access_token": "a b", "token_type": "Bearer"}),
            json!({"access_token": "abc", "token_type": "mac"}),
            json!({"access_token": "abc", "token_type": "DPoP"}),
            json!({"access_token": "x".repeat(MAX_TOKEN + 1), "token_type": "Bearer"}),
        ] {
            assert!(tokens(Some(&bad), false).is_err(), "{bad}");
        }
        assert!(tokens(None, false).is_err());
    }

    #[test]
    fn the_method_follows_the_registration_then_the_servers_list() {
        let server = AuthServer {
            auth_methods: Some(vec!["client_secret_post".into()]),
            ..AuthServer::default()
        };
        let mut reg = ClientRegistration {
            client_id: "c".into(),
            client_secret: Some("s".into()),
            ..ClientRegistration::default()
        };
        assert_eq!(method_for(&reg, None, &server), "client_secret_post");
        assert_eq!(
            method_for(&reg, None, &AuthServer::default()),
            "client_secret_basic"
        );
        reg.auth_method = Some("client_secret_basic".into());
        assert_eq!(method_for(&reg, None, &server), "client_secret_basic");
        reg.client_secret = None;
        reg.auth_method = None;
        assert_eq!(method_for(&reg, None, &server), "none");
    }

    #[test]
    fn refusals_are_short_and_clean() {
        let e = refusal(
            "authorization_code",
            reqwest::StatusCode::BAD_REQUEST,
            Some(&json!({"error": "invalid_grant", "error_description": "bad\u{1b}[2J code"})),
        );
        let text = e.to_string();
        assert!(text.contains("invalid_grant (bad[2J code)"), "{text}");
    }
}
