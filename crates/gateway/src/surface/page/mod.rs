//! The approval page: a person approves pending calls in a browser, for
//! clients that cannot show a form.
//!
//! With `[approval] page = true`, a call that needs confirmation from a
//! client without form elicitation opens a pending approval here. A client
//! that supports URL-mode elicitation is sent to its page; any other client
//! gets an `isError` telling the model to ask the user to approve at that
//! address and call again. The retried call (same caller, tool and
//! arguments) goes through once, if the person approved; a denial ends it.
//!
//! The page is small, self-contained HTML from `maud` templates (checked at
//! compile time, every value escaped): no scripts, no external assets.
//! It is served on its own listener, loopback by default. Only the person
//! who started the gateway can see or decide anything on it: they log in
//! through a one-time link (see `login.rs`). It refuses requests whose `Host`
//! is not the page's own (DNS rebinding), and a decision is accepted only
//! with the session's anti-forgery token and from the page's own origin
//! (an `Origin` naming it, or `Sec-Fetch-Site: same-origin`; a request
//! with neither is refused).
//!
//! Layer: `surface`.

mod accounts;
mod calls;
mod chart;
mod connect;
pub mod console;
mod operator;
mod settings;

use parking_lot::Mutex;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use crate::call::approvals::Approvals;
use crate::gateway::site::Site;
use crate::gateway::{Gateway, GatewayError};
use crate::store::StoreError;
use crate::store::logins::{LINK_PERSON, SESSION};
use crate::store::pending::{Status, Waiting};
pub use operator::Operator;
use toolgate_protocol::error::with_causes;

/// The approval page (and the console) of one running gateway: what its
/// handlers share.
pub struct ApprovalDesk {
    gateway: Gateway,
    site: Arc<Site>,
    approvals: Arc<dyn Approvals>,
    /// What the console's last reload said.
    reloaded: Mutex<Option<String>>,
    /// With `[auth]` and `[console]`: who may log in with a token.
    operator: Option<Operator>,
    /// With linked accounts and `[auth.sign_in]`: the connect page.
    connect: Option<connect::Connect>,
}

/// Serve the approval page (and, with `[console]`, the console's views) of
/// `gateway` on the socket it bound at start, until the gateway stops:
/// the address it is served at, or `None` when neither is configured.
/// `toolgate serve` calls this after [`Gateway::start`], as it serves
/// health and metrics.
pub async fn serve(gateway: &Gateway) -> Result<Option<SocketAddr>, GatewayError> {
    let (Some(site), Some(approvals)) = (gateway.site(), gateway.approvals()) else {
        return Ok(None);
    };
    let Some(listener) = site.take_listener() else {
        // Served already (by an earlier call): one page per gateway.
        return Ok(Some(site.local));
    };
    let config = gateway.running_config();
    // With [auth], an operator may log in to the console with their own
    // token.
    let operator = match (&config.auth, &config.console) {
        (Some(auth), Some(console)) => Some(Operator {
            verifier: Arc::new(auth.verifier()?),
            scope: console
                .operator_scope
                .clone()
                .unwrap_or_else(|| console::OPERATOR_SCOPE.to_owned()),
        }),
        _ => None,
    };
    let connect = match (gateway.linking(), &config.auth) {
        (Some(linking), Some(auth)) => match &auth.sign_in {
            Some(sign_in) => Some(connect::Connect {
                linking: linking.clone(),
                sign_in: toolgate_client::auth::TokenBroker::new(
                    toolgate_client::auth::BrokerConfig {
                        issuer: Some(auth.issuer.clone()),
                        client_id: sign_in.client_id.clone(),
                        client_secret: sign_in
                            .client_secret
                            .as_ref()
                            .map(|s| toolgate_client::auth::Secret::new(s.expose().to_owned())),
                        ..Default::default()
                    },
                )
                .map_err(|e| crate::config::ConfigError::new(format!("[auth.sign_in]: {e}")))?,
                audience: auth.audience.clone(),
                scopes: sign_in.scopes(),
                verifier: Arc::new(auth.verifier()?),
            }),
            None => None,
        },
        _ => None,
    };
    let desk = Arc::new(ApprovalDesk {
        gateway: gateway.clone(),
        site: site.clone(),
        approvals: approvals.clone(),
        reloaded: Mutex::default(),
        operator,
        connect,
    });
    let app = desk.router();
    let stopped = gateway.stopped();
    tokio::spawn(async move {
        tokio::select! {
            served = axum::serve(listener, app) => {
                if let Err(e) = served {
                    tracing::error!(error = %e, "approval page stopped");
                }
            }
            () = stopped => {}
        }
    });
    Ok(Some(site.local))
}

impl ApprovalDesk {
    /// The gateway, when its console is on.
    fn console(&self) -> Option<&Gateway> {
        self.site.console.then_some(&self.gateway)
    }

    fn last_reload(&self) -> Option<String> {
        self.reloaded.lock().clone()
    }

    fn said_reload(&self, said: String) {
        *self.reloaded.lock() = Some(said);
    }

    /// Who the request's session is, as the audit store records their
    /// acts: the operator's subject, or `console` for the login link.
    fn who(&self, headers: &HeaderMap) -> String {
        self.site
            .logins
            .who(headers)
            .unwrap_or_else(|| LINK_PERSON.to_owned())
    }

    /// The page's routes.
    fn router(self: Arc<Self>) -> axum::Router {
        use axum::routing::post;
        axum::Router::new()
            .route("/", get(home))
            .route("/console", get(console::overview))
            .route("/console/tools", get(console::tools))
            .route("/console/tools/approve", post(console::approve_definition))
            .route("/console/calls", get(calls::calls))
            .route("/console/calls/live", get(calls::live))
            .route("/console/calls/{id}", get(calls::one))
            .route("/console/assets/console.js", get(calls::script))
            .route("/console/grants", get(console::grants))
            .route("/console/grants/{id}/revoke", post(console::revoke))
            .route("/console/accounts", get(accounts::list))
            .route("/console/accounts/{server}/unlink", post(accounts::unlink))
            .route("/console/config", get(settings::config))
            .route("/console/config/reload", post(settings::reload))
            .route("/approvals", get(list))
            .route("/approvals/{id}", get(one).post(decide))
            .route("/connect/signed-in", get(connect::signed_in))
            .route("/connect/callback", get(connect::callback))
            .route("/connect/{server}", get(connect::start))
            .route("/login", get(operator::form).post(operator::log_in))
            .route("/login/{secret}", get(log_in))
            .with_state(self)
    }

    /// The session's anti-forgery token, or the answer to a request that
    /// is not for this page or not from the logged-in person.
    fn admit(&self, headers: &HeaderMap, deciding: bool) -> Result<String, Response> {
        if let Some(refused) = self.refuse(headers, deciding) {
            return Err(refused);
        }
        self.site.logins.session(headers).ok_or_else(|| {
            let file = self.site.logins.file().map(|f| f.display().to_string());
            let token = self.operator.is_some();
            let mut page = html(
                "toolgate: log in",
                maud::html! {
                    h1 { "Log in" }
                    p {
                        "Only the person who started the gateway can see and act here. Open the login link "
                        code { "toolgate serve" }
                        " printed when it started"
                        @if let Some(file) = &file { " (it is also in " (file) ")" }
                        "; each link works once."
                        @if token { " Or " a href="/login" { "log in with your token" } "." }
                    }
                },
            );
            *page.status_mut() = StatusCode::UNAUTHORIZED;
            page
        })
    }

    /// Whether a request is for this page (its `Host`), and for a decision,
    /// from the page itself (`Origin`, `Sec-Fetch-Site`).
    fn refuse(&self, headers: &HeaderMap, deciding: bool) -> Option<Response> {
        let host = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("");
        if !self.site.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            return Some(plain(StatusCode::MISDIRECTED_REQUEST, "unknown host"));
        }
        if deciding {
            let origin = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok());
            let origin_ok = origin.map(|o| {
                o.eq_ignore_ascii_case(&self.site.base)
                    || self
                        .site
                        .hosts
                        .iter()
                        .any(|h| o.eq_ignore_ascii_case(&format!("http://{h}")))
            });
            let site = headers.get("sec-fetch-site").and_then(|s| s.to_str().ok());
            let site_ok = site.map(|s| s == "same-origin");
            // A browser sends at least one of them; a request with neither
            // is a script, and a script does not decide.
            let from_page = match (origin_ok, site_ok) {
                (None, None) => false,
                (o, s) => o != Some(false) && s != Some(false),
            };
            if !from_page {
                return Some(plain(
                    StatusCode::FORBIDDEN,
                    "refused: a decision must come from the approval page itself",
                ));
            }
        }
        None
    }
}

/// The answer when the store of pending approvals cannot be reached (the
/// reason goes to the log, not to the page).
fn unavailable(e: &StoreError) -> Response {
    tracing::warn!(error = %with_causes(e), "the pending approvals cannot be read or written");
    plain(
        StatusCode::SERVICE_UNAVAILABLE,
        "the pending approvals cannot be reached now; try again",
    )
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    (status, secured(), text).into_response()
}

/// Headers every answer carries: nothing runs, loads or frames it.
fn secured() -> [(header::HeaderName, HeaderValue); 5] {
    [
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(
                "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
            ),
        ),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
    ]
}

const STYLE: &str = "body{font:15px/1.4 system-ui,sans-serif;max-width:72rem;margin:2rem auto;padding:0 1rem;color:#111}\
pre{white-space:pre-wrap;background:#f4f4f4;padding:.75rem;border-radius:4px}\
section{border:1px solid #ccc;border-radius:6px;padding:0 1rem 1rem;margin:1rem 0}\
button{font-size:1rem;padding:.4rem 1.2rem;margin-right:.5rem}\
table{border-collapse:collapse;width:100%;margin:1rem 0}td,th{border-bottom:1px solid #ddd;padding:.3rem .5rem;text-align:left;vertical-align:top}\
nav{margin-bottom:1rem}.good{color:#1a7f37}.bad{color:#cf222e}\
.approve{background:#1a7f37;color:#fff;border:0}.deny{background:#cf222e;color:#fff;border:0}";

/// A whole page: `body` in the page's frame, with the headers every
/// answer carries.
fn html(title: &str, body: maud::Markup) -> Response {
    let page = maud::html! {
        (maud::DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width";
                title { (title) }
                style { (maud::PreEscaped(STYLE)) }
            }
            body { (body) }
        }
    };
    (
        StatusCode::OK,
        secured(),
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        page.into_string(),
    )
        .into_response()
}

fn section(token: &str, e: &Waiting) -> maud::Markup {
    let id = &e.id;
    let caller = e.caller.as_deref().unwrap_or("(no verified caller)");
    let asked =
        (crate::base::time::now_ms(std::time::SystemTime::now()) - e.opened_ms).max(0) / 1000;
    maud::html! {
        section id={ "call-" (id) } {
            h2 { (e.tool) " " small { "on " (e.server) } }
            p { "Caller: " (caller) ". Asked " (asked) " s ago." }
            pre { (e.question) }
            @match e.status {
                Status::Waiting => form method="post" action={ "/approvals/" (id) } {
                    input type="hidden" name="token" value=(token);
                    button class="approve" name="decision" value="approve" id={ "approve-" (id) } { "Approve this call" }
                    @if let Some(label) = &e.remember {
                        button class="approve" name="decision" value="remember" id={ "remember-" (id) } { "Approve: " (label) }
                    }
                    button class="deny" name="decision" value="deny" id={ "deny-" (id) } { "Deny" }
                },
                Status::Approved => p { strong { "Approved." } " The next identical call goes through." },
                Status::Remembered => p {
                    strong { "Approved: " (e.remember.as_deref().unwrap_or_default()) "." }
                    " The next identical call goes through and starts it; "
                    code { "toolgate grants --revoke" }
                    " ends it."
                },
                Status::Denied => p { strong { "Denied." } " The next identical call is refused." },
            }
        }
    }
}

async fn list(State(desk): State<Arc<ApprovalDesk>>, headers: HeaderMap) -> Response {
    let token = match desk.admit(&headers, false) {
        Ok(token) => token,
        Err(refused) => return refused,
    };
    let entries = match desk.approvals.all().await {
        Ok(entries) => entries,
        Err(e) => return unavailable(&e),
    };
    let console = desk.console().is_some();
    html(
        "toolgate: calls waiting for approval",
        maud::html! {
            @if console { (console::nav("/approvals")) }
            h1 { "Calls waiting for approval" }
            @for e in &entries { (section(&token, e)) }
            @if entries.is_empty() { p { "No calls are waiting for approval." } }
        },
    )
}

/// `GET /`: the console when it is on, else the approval page.
async fn home(State(desk): State<Arc<ApprovalDesk>>) -> Response {
    let to = if desk.console().is_some() {
        "/console"
    } else {
        "/approvals"
    };
    (
        StatusCode::SEE_OTHER,
        secured(),
        [(header::LOCATION, to.to_owned())],
    )
        .into_response()
}

async fn one(
    State(desk): State<Arc<ApprovalDesk>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let token = match desk.admit(&headers, false) {
        Ok(token) => token,
        Err(refused) => return refused,
    };
    let entries = match desk.approvals.all().await {
        Ok(entries) => entries,
        Err(e) => return unavailable(&e),
    };
    match entries.iter().find(|e| e.id == id) {
        Some(e) => html(
            "toolgate: approve this call?",
            maud::html! {
                h1 { "Approve this call?" }
                (section(&token, e))
                p { a href="/approvals" { "All waiting calls" } }
            },
        ),
        None => html(
            "toolgate: no such call",
            maud::html! {
                h1 { "No such call" }
                p { "It was decided, or it expired. " a href="/approvals" { "All waiting calls" } }
            },
        ),
    }
}

#[derive(Deserialize)]
struct Decision {
    token: String,
    decision: String,
}

async fn decide(
    State(desk): State<Arc<ApprovalDesk>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Form(form): Form<Decision>,
) -> Response {
    let token = match desk.admit(&headers, true) {
        Ok(token) => token,
        Err(refused) => return refused,
    };
    if form.token != token {
        return plain(
            StatusCode::FORBIDDEN,
            "this form is stale or forged: reload the page",
        );
    }
    let status = match form.decision.as_str() {
        "approve" => Status::Approved,
        "remember" => Status::Remembered,
        "deny" => Status::Denied,
        _ => {
            return plain(
                StatusCode::BAD_REQUEST,
                "decision is approve, remember or deny",
            );
        }
    };
    match desk.approvals.decide(&id, status).await {
        Ok(true) => {}
        Ok(false) => {
            return plain(
                StatusCode::CONFLICT,
                "this call was already decided, or expired",
            );
        }
        Err(e) => return unavailable(&e),
    }
    (
        StatusCode::SEE_OTHER,
        secured(),
        [(header::LOCATION, format!("/approvals/{id}"))],
    )
        .into_response()
}

/// `GET /login/{secret}`: a session for the browser that opens the link.
async fn log_in(
    State(desk): State<Arc<ApprovalDesk>>,
    Path(secret): Path<String>,
    headers: HeaderMap,
) -> Response {
    if let Some(refused) = desk.refuse(&headers, false) {
        return refused;
    }
    let Some(session) = desk.site.logins.log_in(&secret) else {
        return plain(
            StatusCode::FORBIDDEN,
            "this login link is not valid: it was used already, or is from an earlier start; use the newest link toolgate printed",
        );
    };
    // The console's overview when it is served, else the approvals.
    let to = if desk.console().is_some() {
        "/console"
    } else {
        "/approvals"
    };
    operator::cookie_to(&session, SESSION, to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_servers_is_escaped_in_the_page() {
        let e = Waiting {
            id: "i".into(),
            caller: Some("<b>".into()),
            tool: "t".into(),
            server: "s".into(),
            digest: "d".into(),
            question: "<script>alert('x')</script>&\"".into(),
            remember: None,
            opened_ms: 0,
            status: Status::Waiting,
        };
        let shown = section("tok", &e).into_string();
        assert!(
            shown.contains("&lt;script&gt;alert('x')&lt;/script&gt;&amp;&quot;"),
            "{shown}"
        );
        assert!(shown.contains("Caller: &lt;b&gt;."), "{shown}");
        assert!(
            !shown.contains("<script>") && !shown.contains("<b>"),
            "{shown}"
        );
    }
}
