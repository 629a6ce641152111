//! With `[auth]`, a person logs in to the console with their own token
//! too: one issued for the gateway by its issuer, carrying the operator
//! scope (`[console] operator_scope`, default `toolgate:operator`). Their
//! subject is then who the audit store records as acting; the session
//! ends when the token does (or after the usual session time).
//!
//! The token is pasted into a form at `/login` (a browser has no other
//! way to present it), posted from the page itself (the same origin check
//! as every act, so no other site can log a browser in as someone else),
//! and never stored: only the session it opens is.
//!
//! Layer: `surface`.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{Form, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use toolgate_server::{TokenError, TokenVerifier};

use super::{ApprovalDesk, html, plain, secured};
use crate::store::logins as login;

/// Who may log in with a token, and with which scope.
pub struct Operator {
    /// Checks tokens issued for the gateway (`[auth]`).
    pub verifier: Arc<dyn TokenVerifier>,
    /// The scope a token must carry.
    pub scope: String,
}

fn form_page(note: Option<&str>) -> maud::Markup {
    maud::html! {
        h1 { "Log in with your token" }
        @if let Some(note) = note { p class="bad" { (note) } }
        p { "Paste an access token issued for this gateway that carries the operator scope. It is checked and forgotten; only the session it opens is kept." }
        form method="post" action="/login" {
            textarea name="token" rows="6" cols="80" autocomplete="off" spellcheck="false" required {}
            p { button class="approve" id="log-in" { "Log in" } }
        }
    }
}

/// `GET /login`: the token form, when `[auth]` is on.
pub(super) async fn form(State(desk): State<Arc<ApprovalDesk>>, headers: HeaderMap) -> Response {
    if let Some(refused) = desk.refuse(&headers, false) {
        return refused;
    }
    match &desk.operator {
        Some(_) => html("toolgate: log in", form_page(None)),
        None => plain(
            StatusCode::NOT_FOUND,
            "log in with the link toolgate serve printed (a token login needs [auth])",
        ),
    }
}

/// The token form.
#[derive(Deserialize)]
pub(super) struct TokenLogin {
    token: String,
}

fn refused(status: StatusCode, said: &str) -> Response {
    let mut page = html("toolgate: log in", form_page(Some(said)));
    *page.status_mut() = status;
    page
}

/// `POST /login`: a session for the operator whose token this is.
pub(super) async fn log_in(
    State(desk): State<Arc<ApprovalDesk>>,
    headers: HeaderMap,
    Form(form): Form<TokenLogin>,
) -> Response {
    if let Some(refused) = desk.refuse(&headers, true) {
        return refused;
    }
    let Some(operator) = &desk.operator else {
        return plain(StatusCode::NOT_FOUND, "a token login needs [auth]");
    };
    let token = form.token.trim();
    let token = token.strip_prefix("Bearer ").unwrap_or(token).trim();
    let auth = match operator.verifier.verify(token).await {
        Ok(auth) => auth,
        Err(TokenError::Invalid(why)) => {
            tracing::info!(%why, "console: a token login was refused");
            return refused(
                StatusCode::UNAUTHORIZED,
                "This token is not valid for this gateway (expired, for another audience, or not from its issuer).",
            );
        }
        Err(TokenError::Unavailable(why)) => {
            tracing::warn!(%why, "console: tokens cannot be checked now");
            return refused(
                StatusCode::SERVICE_UNAVAILABLE,
                "Tokens cannot be checked now (the issuer's keys are unreachable); try again.",
            );
        }
    };
    // Acts are recorded under the subject: a token without one (or with
    // an empty one) cannot act here.
    let Some(subject) = auth
        .subject()
        .filter(|s| !s.trim().is_empty())
        .map(str::to_owned)
    else {
        return refused(StatusCode::UNAUTHORIZED, "This token names no subject.");
    };
    if !auth.has_scope(&operator.scope) {
        return refused(
            StatusCode::FORBIDDEN,
            &format!(
                "This token lacks the operator scope {}: ask the issuer for a token with it.",
                operator.scope
            ),
        );
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let lasts = auth
        .claims()
        .and_then(|c| c.get("exp"))
        .and_then(serde_json::Value::as_u64)
        .map_or(login::SESSION, |exp| {
            Duration::from_secs(exp.saturating_sub(now))
        });
    tracing::info!(subject = %subject, "console: an operator logged in with a token");
    let session = desk.site.logins.log_in_as(subject, lasts);
    cookie_to(&session, lasts, "/console")
}

/// The headers of a session cookie, and where to go.
pub(super) fn cookie_to(session: &str, lasts: Duration, to: &str) -> Response {
    let cookie = format!(
        "{}={session}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
        login::COOKIE,
        lasts.min(login::SESSION).as_secs()
    );
    let mut response = (
        StatusCode::SEE_OTHER,
        secured(),
        [(header::LOCATION, to.to_owned())],
    )
        .into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}
