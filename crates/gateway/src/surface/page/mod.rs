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

mod calls;
mod chart;
pub mod console;
mod login;
mod operator;

use parking_lot::Mutex;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use crate::base::ids::new_nonce;
pub use crate::config::ApprovalConfig;
use crate::store::StoreError;
pub use crate::store::pending::{MemoryPending, Pending, Status, Waiting};
use login::Logins;
pub use operator::Operator;
use toolgate_protocol::error::with_causes;

/// Where the page listens by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8790";

/// Pending approvals and the page that decides them.
pub struct ApprovalDesk {
    pending: Arc<dyn Pending>,
    /// The gateway whose console this is, when `[console]` is on.
    console: Mutex<Option<crate::gateway::Gateway>>,
    /// What the console's last reload said.
    reloaded: Mutex<Option<String>>,
    base: String,
    hosts: Vec<String>,
    logins: Logins,
    /// With `[auth]`: who may log in with a token.
    operator: Option<Operator>,
}

/// A call waiting for a person, as the guard sees it.
pub struct Opened {
    /// The pending approval's id.
    pub id: String,
    /// Its page.
    pub url: String,
}

impl ApprovalDesk {
    /// A desk whose pages live under `base` (`http://host:port`), answering
    /// requests for the hosts `hosts` (`host:port`), keeping its pending
    /// approvals in `pending`; its login link also goes to `login_file`.
    pub fn new(
        base: String,
        hosts: Vec<String>,
        pending: Arc<dyn Pending>,
        login_file: Option<std::path::PathBuf>,
    ) -> Result<Self, String> {
        let base = base.trim_end_matches('/').to_owned();
        Ok(Self {
            pending,
            console: Mutex::default(),
            reloaded: Mutex::default(),
            logins: Logins::new(&base, login_file)?,
            base,
            hosts,
            operator: None,
        })
    }

    /// The link that logs a browser in to the page, once. Show it only to
    /// the person (never to a client or the model).
    pub fn login_url(&self) -> String {
        self.logins.link()
    }

    /// The page listing every pending approval.
    pub fn page_url(&self) -> String {
        format!("{}/approvals", self.base)
    }

    /// How many calls wait for a person's decision now (not those decided
    /// and not yet taken).
    pub async fn waiting_now(&self) -> Result<usize, crate::store::StoreError> {
        let entries = self.pending.all().await?;
        Ok(entries
            .iter()
            .filter(|e| e.status == Status::Waiting)
            .count())
    }

    /// The login link, and each new one as the one before it is used.
    pub fn login_links(&self) -> tokio::sync::watch::Receiver<String> {
        self.logins.links()
    }

    /// The console's overview (served when a gateway is attached).
    pub fn console_url(&self) -> String {
        format!("{}/console", self.base)
    }

    /// Take the decision on this call, if there is one: an approval is
    /// spent by taking it (one call), a denial ends with it.
    pub async fn take(
        &self,
        caller: Option<&str>,
        tool: &str,
        digest: &str,
    ) -> Result<Option<Status>, StoreError> {
        self.pending
            .take(
                caller.map(str::to_owned),
                tool.to_owned(),
                digest.to_owned(),
            )
            .await
    }

    /// Open (or find the open) pending approval of this call; with
    /// `remember`, the page also offers that wider approval.
    pub async fn open(
        &self,
        caller: Option<&str>,
        tool: &str,
        server: &str,
        digest: &str,
        question: &str,
        remember: Option<String>,
    ) -> Result<Opened, StoreError> {
        let entry = Waiting {
            id: new_nonce(),
            caller: caller.map(str::to_owned),
            tool: tool.to_owned(),
            server: server.to_owned(),
            digest: digest.to_owned(),
            question: question.to_owned(),
            remember,
            opened_ms: crate::base::time::now_ms(std::time::SystemTime::now()),
            status: Status::Waiting,
        };
        let id = self.pending.open(entry).await?;
        Ok(Opened {
            url: format!("{}/approvals/{id}", self.base),
            id,
        })
    }

    /// Decide a waiting approval (what the page's buttons do): `false`
    /// when it is not waiting, or `Remembered` was not offered.
    pub async fn decide(&self, id: &str, status: Status) -> Result<bool, StoreError> {
        self.pending.decide(id.to_owned(), status).await
    }

    /// Serve the console's views of `gateway` beside the approval page.
    pub fn attach(&self, gateway: crate::gateway::Gateway) {
        *self.console.lock() = Some(gateway);
    }

    /// Stop serving the console's views (the gateway stops).
    pub fn detach(&self) {
        self.console.lock().take();
    }

    fn console(&self) -> Option<crate::gateway::Gateway> {
        self.console.lock().clone()
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
        self.logins
            .who(headers)
            .unwrap_or_else(|| login::LINK_PERSON.to_owned())
    }

    /// The page's routes.
    pub fn router(self: Arc<Self>) -> axum::Router {
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
            .route("/console/config", get(console::config))
            .route("/console/config/reload", post(console::reload))
            .route("/approvals", get(list))
            .route("/approvals/{id}", get(one).post(decide))
            .route("/login", get(operator::form).post(operator::log_in))
            .route("/login/{secret}", get(log_in))
            .with_state(self)
    }

    /// Bind `listen` and serve the page in the background: the desk, the
    /// address it is served at, and the task serving it. With `console`,
    /// the console's address and URL are used, and its views served.
    pub async fn serve(
        config: &ApprovalConfig,
        console: Option<&console::ConsoleConfig>,
        login_file: Option<std::path::PathBuf>,
        pending: Arc<dyn Pending>,
        operator: Option<Operator>,
    ) -> Result<(Arc<Self>, SocketAddr, tokio::task::AbortHandle), String> {
        let (section, listen, url) = match console {
            Some(c) => (
                "[console]",
                c.listen.as_deref().unwrap_or(console::DEFAULT_LISTEN),
                c.url.clone(),
            ),
            None => (
                "[approval]",
                config.listen.as_deref().unwrap_or(DEFAULT_LISTEN),
                config.url.clone(),
            ),
        };
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| format!("{section} cannot listen on {listen}: {e}"))?;
        let local = listener
            .local_addr()
            .map_err(|e| format!("{section} {listen}: {e}"))?;
        let base = url.unwrap_or_else(|| format!("http://{local}"));
        let mut hosts = vec![local.to_string(), format!("localhost:{}", local.port())];
        if let Some(host) = base
            .split("://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
        {
            hosts.push(host.to_owned());
        }
        let mut desk = Self::new(base, hosts, pending, login_file)?;
        desk.operator = operator;
        let desk = Arc::new(desk);
        let app = desk.clone().router();
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "approval page stopped");
            }
        });
        Ok((desk, local, task.abort_handle()))
    }

    /// The session's anti-forgery token, or the answer to a request that
    /// is not for this page or not from the logged-in person.
    fn admit(&self, headers: &HeaderMap, deciding: bool) -> Result<String, Response> {
        if let Some(refused) = self.refuse(headers, deciding) {
            return Err(refused);
        }
        self.logins.session(headers).ok_or_else(|| {
            let file = self.logins.file().map(|f| f.display().to_string());
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
        if !self.hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            return Some(plain(StatusCode::MISDIRECTED_REQUEST, "unknown host"));
        }
        if deciding {
            let origin = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok());
            let origin_ok = origin.map(|o| {
                o.eq_ignore_ascii_case(&self.base)
                    || self
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
    let entries = match desk.pending.all().await {
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
    let entries = match desk.pending.all().await {
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
    match desk.decide(&id, status).await {
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
    let Some(session) = desk.logins.log_in(&secret) else {
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
    operator::cookie_to(&session, login::SESSION, to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn desk() -> ApprovalDesk {
        ApprovalDesk::new(
            "http://127.0.0.1:9".into(),
            vec!["127.0.0.1:9".into()],
            Arc::new(MemoryPending::new(Duration::from_secs(60))),
            None,
        )
        .unwrap()
    }

    #[tokio::test]
    async fn an_approval_is_taken_once_and_only_by_the_same_call() {
        let d = desk();
        let open = async |caller: Option<&str>, digest: &str| {
            d.open(caller, "t", "s", digest, "q", None).await.unwrap()
        };
        let take =
            async |caller: Option<&str>, digest: &str| d.take(caller, "t", digest).await.unwrap();
        let a = open(Some("alice"), "d1").await;
        let again = open(Some("alice"), "d1").await;
        assert_eq!(a.id, again.id, "one pending entry per call");
        assert_eq!(a.url, format!("http://127.0.0.1:9/approvals/{}", a.id));
        assert_eq!(take(Some("alice"), "d1").await, None, "still waiting");
        assert!(
            !d.decide(&a.id, Status::Remembered).await.unwrap(),
            "not offered"
        );
        assert!(d.decide(&a.id, Status::Approved).await.unwrap());
        assert!(
            !d.decide(&a.id, Status::Denied).await.unwrap(),
            "decided once"
        );
        assert_eq!(take(Some("bob"), "d1").await, None);
        assert_eq!(take(Some("alice"), "d2").await, None);
        assert_eq!(take(Some("alice"), "d1").await, Some(Status::Approved));
        assert_eq!(take(Some("alice"), "d1").await, None, "spent");
        let b = open(None, "d1").await;
        assert!(d.decide(&b.id, Status::Denied).await.unwrap());
        assert_eq!(take(Some("alice"), "d1").await, None, "another caller's");
        assert_eq!(take(None, "d1").await, Some(Status::Denied));
    }

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
