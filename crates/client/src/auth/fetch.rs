//! The client's own HTTP to authorization servers and metadata documents:
//! no redirects followed (a redirect could carry a secret to another
//! origin), a deadline on every exchange, bodies read only up to a bound,
//! and endpoints only over HTTPS (or to this machine).

use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::{StatusCode, Url};
use serde_json::Value;

use crate::ClientError;

/// Bounds on the client's exchanges with authorization servers.
#[derive(Clone, Debug)]
pub struct AuthLimits {
    /// Largest metadata or token response read (default 256 KiB).
    pub max_body_bytes: usize,
    /// Deadline for one exchange, connect to last byte (default 30 s).
    pub timeout: Duration,
}

impl Default for AuthLimits {
    fn default() -> Self {
        Self {
            max_body_bytes: 256 * 1024,
            timeout: Duration::from_secs(30),
        }
    }
}

/// An authorization failure, with the reason.
pub(crate) fn fail(reason: impl Into<String>) -> ClientError {
    ClientError::Authorization(reason.into())
}

/// Text from a peer, fit to show: control characters dropped, cut short.
pub(crate) fn shown(text: &str) -> String {
    let clean: String = text.chars().filter(|c| !c.is_control()).take(200).collect();
    if text.chars().count() > 200 {
        format!("{clean}…")
    } else {
        clean
    }
}

/// Whether `url` may carry credentials: HTTPS, or plain HTTP to this
/// machine (a loopback redirect or a local test server).
pub(crate) fn secure(url: &Url) -> bool {
    match url.scheme() {
        "https" => true,
        "http" => match url.host() {
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        },
        _ => false,
    }
}

/// `text` as an endpoint the client may send credentials to.
pub(crate) fn endpoint(text: &str, what: &str) -> Result<Url, ClientError> {
    let url =
        Url::parse(text).map_err(|_| fail(format!("the {what} {:?} is not a URL", shown(text))))?;
    if !secure(&url) {
        return Err(fail(format!(
            "the {what} {} is not HTTPS; credentials are only sent over HTTPS (or to this machine)",
            shown(text)
        )));
    }
    if url.fragment().is_some() {
        return Err(fail(format!("the {what} {} has a fragment", shown(text))));
    }
    Ok(url)
}

/// A response: status, headers, and the body parsed as JSON when it is.
pub(crate) struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub json: Option<Value>,
}

/// The HTTP client for authorization exchanges.
#[derive(Clone)]
pub(crate) struct AuthHttp {
    client: reqwest::Client,
    limits: AuthLimits,
    /// Say a server that cannot be reached (or fails) is unreachable
    /// rather than refusing: a token broker falls back on the tokens it
    /// holds then, and refuses the caller only when the server says no.
    unreachable_when_down: bool,
}

impl AuthHttp {
    pub fn new(limits: AuthLimits) -> Result<Self, ClientError> {
        let builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(limits.timeout.min(Duration::from_secs(10)))
            .timeout(limits.timeout);
        let client = crate::tls::with_tls(builder)?
            .build()
            .map_err(|e| ClientError::transport_because("cannot build the HTTP client", e))?;
        Ok(Self {
            client,
            limits,
            unreachable_when_down: false,
        })
    }

    /// This client, telling a server that is down from one that refuses.
    pub fn unreachable_when_down(mut self) -> Self {
        self.unreachable_when_down = true;
        self
    }

    /// The error for a server that could not be reached or failed.
    pub fn down(&self, message: String) -> ClientError {
        if self.unreachable_when_down {
            ClientError::unreachable(message)
        } else {
            fail(message)
        }
    }

    /// A raw request; the caller sets method, headers and body.
    pub fn request(&self, method: reqwest::Method, url: Url) -> reqwest::RequestBuilder {
        self.client.request(method, url)
    }

    /// A metadata document: `Ok(None)` when the server has none there
    /// (any 4xx), an error when it could not be read or is not a JSON object.
    pub async fn document(&self, url: &Url) -> Result<Option<Value>, ClientError> {
        let shown = toolgate_protocol::redact::url(url.as_str());
        let answer = self
            .send(
                self.client
                    .get(url.clone())
                    .header("accept", "application/json"),
                url,
            )
            .await?;
        if answer.status.is_client_error() {
            return Ok(None);
        }
        if answer.status.is_redirection() {
            return Err(fail(format!(
                "{shown} answered with a redirect ({}); metadata redirects are not followed",
                answer.status
            )));
        }
        if !answer.status.is_success() {
            return Err(fail(format!("{shown} answered HTTP {}", answer.status)));
        }
        match answer.json {
            Some(doc @ Value::Object(_)) => Ok(Some(doc)),
            _ => Err(fail(format!("{shown} did not answer with a JSON object"))),
        }
    }

    /// Send and read the whole (bounded) answer.
    pub async fn send(
        &self,
        builder: reqwest::RequestBuilder,
        url: &Url,
    ) -> Result<Answer, ClientError> {
        // Errors name the URL with its credentials masked.
        let url = toolgate_protocol::redact::url(url.as_str());
        let mut response = builder.send().await.map_err(|e| {
            if e.is_timeout() {
                self.down(format!(
                    "{url} did not answer within {:?}",
                    self.limits.timeout
                ))
            } else {
                self.down(format!("cannot reach {url}: {}", cause(&e)))
            }
        })?;
        let cap = self.limits.max_body_bytes;
        let too_big = || fail(format!("{url} sent a body larger than {cap} bytes"));
        if response.content_length().is_some_and(|n| n > cap as u64) {
            return Err(too_big());
        }
        let mut body = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if body.len() + chunk.len() > cap {
                        return Err(too_big());
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) if e.is_timeout() => {
                    return Err(fail(format!(
                        "{url} did not finish answering within {:?}",
                        self.limits.timeout
                    )));
                }
                Err(e) => return Err(fail(format!("reading from {url}: {}", cause(&e)))),
            }
        }
        Ok(Answer {
            status: response.status(),
            headers: response.headers().clone(),
            json: serde_json::from_slice(&body).ok(),
        })
    }
}

/// The innermost cause of a reqwest error ("connection refused").
fn cause(error: &reqwest::Error) -> String {
    let mut source: &dyn std::error::Error = error;
    while let Some(next) = source.source() {
        source = next;
    }
    source.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_go_only_over_https_or_to_this_machine() {
        for ok in [
            "https://as.example.com/token",
            "http://localhost:8080/token",
            "http://127.0.0.1/token",
            "http://[::1]:9/token",
        ] {
            assert!(endpoint(ok, "token endpoint").is_ok(), "{ok}");
        }
        for bad in [
            "http://as.example.com/token",
            "ftp://localhost/token",
            "https://as.example.com/token#x",
            "not a url",
        ] {
            assert!(endpoint(bad, "token endpoint").is_err(), "{bad}");
        }
    }

    #[test]
    fn shown_text_is_short_and_has_no_control_characters() {
        assert_eq!(shown("a\u{1b}[31mb\n"), "a[31mb");
        assert_eq!(shown(&"x".repeat(500)).chars().count(), 201);
    }
}
