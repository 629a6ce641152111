//! The connect page: a person links their account at an upstream with
//! `[servers.X.identity] mode = "user"` (see [`crate::call::linked`]).
//!
//! 1. `GET /connect/{server}?ticket=…` — the link a caller was given. The
//!    ticket (sealed: the caller's subject and the upstream, ten minutes)
//!    must open. The person is sent to sign in at the gateway's own
//!    authorization server (`[auth.sign_in]`, code with PKCE).
//! 2. `GET /connect/signed-in` — the token that sign-in gives is verified
//!    as callers' tokens are; its subject must be the ticket's, or nothing
//!    is linked: a link passed to someone else (phished, stolen) stops
//!    here. The person is then sent to the upstream's authorization server.
//! 3. `GET /connect/callback` — its code is redeemed, the tokens sealed and
//!    kept; the waiting call goes on.
//!
//! Each step's state (the verifier, the `state` sent, the subject) travels
//! in a sealed, HttpOnly cookie of this page: steps 2 and 3 work only in
//! the browser that began step 1, so a victim cannot be handed the middle
//! of someone else's flow. The `state` and RFC 9207 `iss` of each redirect
//! are checked before its code is used. Nothing of a token ever reaches the
//! page's HTML or the log.
//!
//! Layer: `surface`.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use toolgate_client::auth::{BrokerError, TokenBroker};
use toolgate_server::TokenVerifier;

use super::{ApprovalDesk, html, secured};
use crate::call::linked::{Held, Linking, TICKET_LIFE, unix_now};

/// The cookie that carries a connect flow's state.
const COOKIE: &str = "toolgate_connect";

/// What the connect page needs beside the desk.
pub struct Connect {
    /// Linked accounts: the store and the keys.
    pub linking: Arc<Linking>,
    /// The gateway's client at its own authorization server.
    pub sign_in: TokenBroker,
    /// The gateway's audience (`[auth] audience`): what the sign-in token
    /// is for.
    pub audience: String,
    /// The scopes the sign-in asks for.
    pub scopes: Vec<String>,
    /// Verifies it, as callers' tokens are verified.
    pub verifier: Arc<dyn TokenVerifier>,
}

/// Where a flow is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Step {
    SignIn,
    Upstream,
}

/// A connect flow's state, sealed in its cookie.
#[derive(Serialize, Deserialize)]
struct Flow {
    step: Step,
    /// The subject the link was made for (after step 2: verified).
    sub: String,
    server: String,
    /// The `state` sent with this step's redirect.
    state: String,
    /// Its PKCE verifier.
    verifier: String,
    /// When the flow stops working (seconds since the epoch).
    exp: u64,
}

/// `?ticket=`.
#[derive(Deserialize)]
pub(super) struct TicketQuery {
    ticket: String,
}

/// What an authorization server's redirect brings back.
#[derive(Deserialize)]
pub(super) struct Redirected {
    code: Option<String>,
    state: Option<String>,
    iss: Option<String>,
    error: Option<String>,
}

fn page(status: StatusCode, title: &str, said: &str) -> Response {
    let mut out = html(
        &format!("toolgate: {title}"),
        maud::html! { h1 { (title) } p { (said) } },
    );
    *out.status_mut() = status;
    out
}

fn missing() -> Response {
    page(
        StatusCode::NOT_FOUND,
        "Not here",
        "This gateway links no accounts (no upstream with identity mode \"user\").",
    )
}

/// A redirect to `to` that sets the flow cookie (or clears it).
fn go(to: &str, cookie: Option<&str>) -> Response {
    let mut out = (StatusCode::SEE_OTHER, secured()).into_response();
    if let Ok(location) = HeaderValue::from_str(to) {
        out.headers_mut().insert(header::LOCATION, location);
    }
    set_cookie(&mut out, cookie);
    out
}

fn set_cookie(out: &mut Response, value: Option<&str>) {
    // Lax: the authorization servers' redirects back are top-level GETs
    // from another site, which a Strict cookie would not follow.
    let text = match value {
        Some(v) => format!(
            "{COOKIE}={v}; HttpOnly; SameSite=Lax; Path=/connect; Max-Age={}",
            TICKET_LIFE.as_secs()
        ),
        None => format!("{COOKIE}=; HttpOnly; SameSite=Lax; Path=/connect; Max-Age=0"),
    };
    if let Ok(v) = HeaderValue::from_str(&text) {
        out.headers_mut().append(header::SET_COOKIE, v);
    }
}

/// The flow in this browser's cookie, at `step`, for a redirect that
/// came back with `state`.
fn flow_of(
    linking: &Linking,
    headers: &HeaderMap,
    step: Step,
    state: Option<&str>,
) -> Option<Flow> {
    let cookie = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_owned())?;
    let flow: Flow = linking.open_flow(&cookie)?;
    (flow.step == step && flow.exp > unix_now() && Some(flow.state.as_str()) == state)
        .then_some(flow)
}

fn not_started() -> Response {
    page(
        StatusCode::BAD_REQUEST,
        "This link did not start here",
        "This step belongs to a linking that was not started in this browser, or took more than ten minutes. Open the link your agent gave you again.",
    )
}

/// An authorization server's error code, fit to show (` (access_denied)`):
/// a code is a short token of letters and `_`; anything else is not shown.
fn said_error(error: Option<&str>) -> String {
    match error {
        Some(e) if e.len() <= 64 && e.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') => {
            format!(" ({e})")
        }
        _ => String::new(),
    }
}

/// Whether a redirect's `iss` is the one expected (RFC 9207).
async fn iss_ok(broker: &TokenBroker, given: Option<&str>) -> bool {
    match broker.expected_iss().await {
        Ok(Some(expected)) => given == Some(expected.as_str()),
        Ok(None) => given.is_none_or(|g| Some(g) == broker.issuer()),
        Err(_) => false,
    }
}

fn unreachable_page(e: &BrokerError) -> Response {
    tracing::warn!(error = %e, "connect: an authorization server could not be used");
    page(
        StatusCode::BAD_GATEWAY,
        "Sign-in is unavailable",
        "An authorization server could not be reached or refused the request; try again in a moment.",
    )
}

/// `GET /connect/{server}?ticket=…`.
pub(super) async fn start(
    State(desk): State<Arc<ApprovalDesk>>,
    Path(server): Path<String>,
    Query(q): Query<TicketQuery>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = desk.refuse(&headers, false) {
        return refused;
    }
    let Some(connect) = &desk.connect else {
        return missing();
    };
    let Some(ticket) = connect.linking.ticket(&server, &q.ticket) else {
        return page(
            StatusCode::BAD_REQUEST,
            "This link does not work",
            "It has expired (links work for ten minutes) or is not a link this gateway made. Call the tool again for a new one.",
        );
    };
    let back = format!("{}/connect/signed-in", connect.linking.base);
    let auth = match connect
        .sign_in
        .authorization_url(&back, &connect.audience, &connect.scopes)
        .await
    {
        Ok(auth) => auth,
        Err(e) => return unreachable_page(&e),
    };
    step_to(connect, &auth, Step::SignIn, ticket.sub, server)
}

/// Send the browser on to `auth`'s authorization server for `step`, the
/// flow's state sealed in its cookie.
fn step_to(
    connect: &Connect,
    auth: &toolgate_client::auth::Authorization,
    step: Step,
    sub: String,
    server: String,
) -> Response {
    let flow = Flow {
        step,
        sub,
        server,
        state: auth.state.clone(),
        verifier: auth.verifier.expose().to_owned(),
        exp: unix_now() + TICKET_LIFE.as_secs(),
    };
    go(&auth.url, Some(&connect.linking.seal_flow(&flow)))
}

/// A step after the first: the page's checks, and the flow this browser
/// began (its cookie, at `step`, for the `state` that came back).
fn resume<'a>(
    desk: &'a ApprovalDesk,
    headers: &HeaderMap,
    step: Step,
    state: Option<&str>,
) -> Result<(&'a Connect, Flow), Response> {
    if let Some(refused) = desk.refuse(headers, false) {
        return Err(refused);
    }
    let connect = desk.connect.as_ref().ok_or_else(missing)?;
    let flow = flow_of(&connect.linking, headers, step, state).ok_or_else(not_started)?;
    Ok((connect, flow))
}

/// `GET /connect/signed-in`: the person is who the link was for.
pub(super) async fn signed_in(
    State(desk): State<Arc<ApprovalDesk>>,
    Query(r): Query<Redirected>,
    headers: HeaderMap,
) -> Response {
    let (connect, flow) = match resume(&desk, &headers, Step::SignIn, r.state.as_deref()) {
        Ok(resumed) => resumed,
        Err(page) => return page,
    };
    if r.error.is_some() || !iss_ok(&connect.sign_in, r.iss.as_deref()).await {
        return page(
            StatusCode::FORBIDDEN,
            "Sign-in did not complete",
            &format!(
                "The gateway's sign-in was refused{} or came back from another issuer; nothing was linked.",
                said_error(r.error.as_deref())
            ),
        );
    }
    let Some(code) = r.code else {
        return not_started();
    };
    let verifier = toolgate_client::auth::Secret::new(flow.verifier.clone());
    let back = format!("{}/connect/signed-in", connect.linking.base);
    let set = match connect
        .sign_in
        .redeem(&code, &verifier, &back, &connect.audience, &connect.scopes)
        .await
    {
        Ok(set) => set,
        Err(e) => return unreachable_page(&e),
    };
    let who = match connect.verifier.verify(&set.access_token).await {
        Ok(auth) => auth.subject().map(str::to_owned),
        Err(e) => {
            tracing::warn!(error = %e, "connect: the sign-in token did not verify");
            None
        }
    };
    if who.as_deref() != Some(flow.sub.as_str()) {
        tracing::warn!(server = %flow.server, "connect: a link was opened by someone other than the person it was made for; nothing was linked");
        return page(
            StatusCode::FORBIDDEN,
            "This link is for someone else",
            "You signed in as another person than the one this link was made for, so nothing was linked. Links work only for the person whose agent asked; ask your own agent for a link.",
        );
    }
    let Some(identity) = desk.gateway.identity_of(&flow.server) else {
        return missing();
    };
    let broker = match identity.broker() {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(error = ?e, "connect: the upstream's broker is unusable");
            return missing();
        }
    };
    let back = format!("{}/connect/callback", connect.linking.base);
    let auth = match broker
        .authorization_url(&back, identity.resource(), &identity.account_scopes())
        .await
    {
        Ok(auth) => auth,
        Err(e) => return unreachable_page(&e),
    };
    step_to(connect, &auth, Step::Upstream, flow.sub, flow.server)
}

/// `GET /connect/callback`: the upstream's authorization server's answer.
pub(super) async fn callback(
    State(desk): State<Arc<ApprovalDesk>>,
    Query(r): Query<Redirected>,
    headers: HeaderMap,
) -> Response {
    let (connect, flow) = match resume(&desk, &headers, Step::Upstream, r.state.as_deref()) {
        Ok(resumed) => resumed,
        Err(page) => return page,
    };
    let Some(identity) = desk.gateway.identity_of(&flow.server) else {
        return missing();
    };
    let Ok(broker) = identity.broker() else {
        return missing();
    };
    if r.error.is_some() || !iss_ok(broker, r.iss.as_deref()).await {
        return page(
            StatusCode::FORBIDDEN,
            "Linking did not complete",
            &format!(
                "The upstream's authorization server refused{}, or the answer came from another issuer; nothing was linked.",
                said_error(r.error.as_deref())
            ),
        );
    }
    let Some(code) = r.code else {
        return not_started();
    };
    let verifier = toolgate_client::auth::Secret::new(flow.verifier.clone());
    let back = format!("{}/connect/callback", connect.linking.base);
    let set = match broker
        .redeem(
            &code,
            &verifier,
            &back,
            identity.resource(),
            &identity.account_scopes(),
        )
        .await
    {
        Ok(set) => set,
        Err(e) => return unreachable_page(&e),
    };
    if let Err(e) = connect
        .linking
        .save(&flow.sub, &flow.server, &Held::of(&set))
        .await
    {
        tracing::warn!(error = %e, "connect: the account could not be kept");
        return page(
            StatusCode::SERVICE_UNAVAILABLE,
            "Not linked",
            "The gateway could not keep the account now; try again.",
        );
    }
    tracing::info!(server = %flow.server, subject = %flow.sub, "an account was linked");
    let mut out = page(
        StatusCode::OK,
        "Linked",
        &format!(
            "Your account at {} is linked. Go back to your agent: the call goes on.",
            flow.server
        ),
    );
    set_cookie(&mut out, None);
    out
}
