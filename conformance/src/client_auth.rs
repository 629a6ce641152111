//! How `everything-client` authorizes in the suite's `auth/*` scenarios:
//! the grant and credentials a deployment would configure, chosen from
//! what the scenario's context provides, and a user agent that "clicks
//! approve" by following the authorization server's redirect.

use std::sync::Arc;

use serde_json::Value;
use toolgate_client::auth::{
    Assertion, ClientCredentials, EnterpriseIdp, Grant, OAuth, Secret, UserAgent,
};
use toolgate_client::{BoxFuture, ClientError};

/// The Client ID Metadata Document URL the suite expects.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// A person who approves at once: the authorization endpoint's redirect
/// (to the loopback URI) is the answer.
struct Approver {
    http: reqwest::Client,
}

impl UserAgent for Approver {
    fn redirect_uri(&self) -> String {
        "http://localhost:3000/callback".into()
    }

    fn authorize(&self, url: String) -> BoxFuture<'_, Result<String, ClientError>> {
        Box::pin(async move {
            let response = self
                .http
                .get(&url)
                .send()
                .await
                .map_err(|e| ClientError::Authorization(format!("authorization page: {e}")))?;
            response
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
                .ok_or_else(|| {
                    ClientError::Authorization(format!(
                        "the authorization page answered HTTP {} without a redirect",
                        response.status()
                    ))
                })
        })
    }
}

fn text(context: &Value, key: &str) -> Option<String> {
    context.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// The OAuth settings for `scenario`, or `None` outside `auth/*`.
pub fn for_scenario(scenario: &str, context: &Value) -> anyhow::Result<Option<OAuth>> {
    if !scenario.starts_with("auth/") {
        return Ok(None);
    }
    toolgate_client::install_default_tls_provider();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let mut builder = OAuth::builder("toolgate-everything-client")
        .user_agent(Arc::new(Approver { http }))
        .client_metadata_url(CLIENT_METADATA_URL);
    let client_id = text(context, "client_id");
    let secret = text(context, "client_secret");
    if let (Some(id), Some(pem)) = (&client_id, text(context, "private_key_pem")) {
        let alg = text(context, "signing_algorithm").unwrap_or_else(|| "ES256".into());
        builder = builder
            .grant(Grant::ClientCredentials)
            .credentials(ClientCredentials::private_key(id.clone(), pem, alg));
    } else if let Some(id_token) = text(context, "idp_id_token") {
        let idp = EnterpriseIdp {
            token_endpoint: text(context, "idp_token_endpoint").unwrap_or_default(),
            client_id: text(context, "idp_client_id").unwrap_or_default(),
            client_secret: None,
            id_token: Assertion::Token(id_token),
        };
        builder =
            builder
                .grant(Grant::EnterpriseManaged(idp))
                .credentials(ClientCredentials::secret(
                    client_id.unwrap_or_default(),
                    secret.unwrap_or_default(),
                ));
    } else if let Some(jwt) = text(context, "valid_jwt") {
        builder = builder.grant(Grant::JwtBearer(Assertion::Token(jwt)));
        if let Some(id) = client_id {
            builder = builder.credentials(ClientCredentials::public(id));
        }
    } else if let (Some(id), Some(secret)) = (client_id, secret) {
        let mut credentials = ClientCredentials {
            client_secret: Some(Secret::new(secret)),
            ..ClientCredentials::public(id)
        };
        if let Some(issuer) = text(context, "issuer") {
            credentials = credentials.for_issuer(issuer);
        }
        if scenario.contains("client-credentials") {
            builder = builder.grant(Grant::ClientCredentials);
        }
        builder = builder.credentials(credentials);
    }
    Ok(Some(builder.build()))
}
