//! The console: the approval page's sister views, where the person who
//! runs the gateway sees what it does and acts on it.
//!
//! With `[console] listen`, the approval desk is served there with these
//! views beside the approval page, behind the same one-time login,
//! host check and per-session anti-forgery token: the overview (each
//! upstream's state and restarts, the last hour's calls per minute by
//! outcome and each upstream's latency, see `chart.rs`), the tools
//! (effects, the policy's decision, withheld tools and why, and the
//! definitions the lock file withholds with their change and a button that
//! approves exactly the one shown), the calls (`calls.rs`), the grants
//! (revocable), and the configuration (secrets left out, the last reloads,
//! a reload button). Pages are server-rendered HTML; every value from an
//! upstream or a caller is escaped. The one script, on the calls view, only
//! adds live rows.
//!
//! Layer: `surface`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::{Form, FromRequestParts, Path, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use maud::{Markup, html};

use super::{ApprovalDesk, plain, secured};
use crate::base::time::now_ms;
pub use crate::config::ConsoleConfig;
use crate::decide::grants::Revoked;
use crate::store::StoreError;
use crate::store::sqlite::Filter;
use toolgate_protocol::error::with_causes;

/// The scope an operator's token carries by default.
pub const OPERATOR_SCOPE: &str = "toolgate:operator";

/// Where the console listens by default.
pub use crate::gateway::site::DEFAULT_CONSOLE_LISTEN as DEFAULT_LISTEN;

const NAV: &[(&str, &str)] = &[
    ("/console", "Overview"),
    ("/console/tools", "Tools"),
    ("/approvals", "Approvals"),
    ("/console/calls", "Calls"),
    ("/console/grants", "Grants"),
    ("/console/accounts", "Linked accounts"),
    ("/console/config", "Configuration"),
];

/// The console's navigation bar, `here` marked.
pub(super) fn nav(here: &str) -> Markup {
    html! {
        nav {
            @for (i, (href, label)) in NAV.iter().enumerate() {
                @if i > 0 { " · " }
                @if *href == here { strong { (label) } } @else { a href=(href) { (label) } }
            }
        }
    }
}

/// The gateway behind the console, or the answer that there is none.
fn gateway(desk: &ApprovalDesk) -> Result<crate::gateway::Gateway, Response> {
    desk.console().cloned().ok_or_else(|| {
        plain(
            StatusCode::NOT_FOUND,
            "the console is off: set [console] listen",
        )
    })
}

/// A request for one of the console's views from the logged-in person:
/// the session's anti-forgery token and the gateway. Any other request is
/// answered by the extractor (not logged in, another host, console off).
pub(super) struct Viewer {
    pub(super) token: String,
    pub(super) gateway: crate::gateway::Gateway,
}

impl FromRequestParts<Arc<ApprovalDesk>> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        desk: &Arc<ApprovalDesk>,
    ) -> Result<Self, Response> {
        let token = desk.admit(&parts.headers, false)?;
        Ok(Self {
            token,
            gateway: gateway(desk)?,
        })
    }
}

/// For an act: the gateway, when the request comes from the console's own
/// page with the session's token.
pub(super) fn acting(
    desk: &ApprovalDesk,
    headers: &HeaderMap,
    token: &str,
) -> Result<crate::gateway::Gateway, Response> {
    if desk.admit(headers, true)? != token {
        return Err(plain(
            StatusCode::FORBIDDEN,
            "this form is stale or forged: reload the page",
        ));
    }
    gateway(desk)
}

pub(super) fn page(title: &str, here: &str, body: Markup) -> Response {
    super::html(
        &format!("toolgate: {title}"),
        html! { (nav(here)) h1 { (title) } (body) },
    )
}

/// A table of `head` over `rows` (cells already markup).
pub(super) fn table(head: &[&str], rows: Vec<Vec<Markup>>) -> Markup {
    table_with(head, rows, None)
}

/// The same, its body with the attributes `id` and `data-live` (the live
/// calls' stream), when given.
pub(super) fn table_with(head: &[&str], rows: Vec<Vec<Markup>>, live: Option<&str>) -> Markup {
    html! {
        table {
            thead { tr { @for h in head { th { (h) } } } }
            @if let Some(live) = live {
                tbody id="calls-body" data-live=(live) { (rows_of(rows)) }
            } @else {
                tbody { (rows_of(rows)) }
            }
        }
    }
}

fn rows_of(rows: Vec<Vec<Markup>>) -> Markup {
    html! { @for cells in rows { tr { @for c in cells { td { (c) } } } } }
}

/// Text as a table cell.
pub(super) fn text(v: impl AsRef<str>) -> Markup {
    html! { (v.as_ref()) }
}

/// Text as code in a table cell.
fn code(v: &str) -> Markup {
    html! { code { (v) } }
}

/// A paragraph saying the audit store cannot be read.
pub(super) fn unreadable(e: &StoreError) -> Markup {
    html! { p { "The audit store cannot be read: " (with_causes(e)) } }
}

/// `GET /console`: each upstream's state, and the last hour's calls.
pub(super) async fn overview(Viewer { gateway, .. }: Viewer) -> Response {
    let upstreams: Vec<Vec<Markup>> = gateway
        .status()
        .into_iter()
        .map(|s| {
            let next = match s.retry_in {
                Some(w) if !w.is_zero() => format!(" (restarting in {} s)", w.as_secs() + 1),
                _ => " (restarting at the next call)".to_owned(),
            };
            let state = html! {
                @if !s.enabled { "disabled" }
                @else if let Some(e) = &s.error {
                    span class="bad" { "down" } (next) ": " (e)
                    @if !s.stderr.is_empty() { pre { (s.stderr.join("\n")) } }
                }
                @else { span class="good" { "up" } }
            };
            vec![
                text(&s.name),
                text(s.transport),
                state,
                text(s.offered.to_string()),
                text(s.withheld.to_string()),
                text(s.denied.to_string()),
                text(s.restarts.to_string()),
            ]
        })
        .collect();
    let upstreams = table(
        &[
            "upstream",
            "transport",
            "state",
            "tools",
            "withheld",
            "denied",
            "restarts",
        ],
        upstreams,
    );
    let endpoints: Vec<Vec<Markup>> = gateway
        .endpoints()
        .iter()
        .map(|e| {
            let v = e.view();
            vec![
                text(&v.name),
                code(&v.path),
                text(v.tools.len().to_string()),
                text(v.withheld.len().to_string()),
            ]
        })
        .collect();
    let endpoints = (!endpoints.is_empty()).then(|| {
        html! {
            h2 { "Endpoints" }
            (table(&["endpoint", "path", "tools", "withheld"], endpoints))
        }
    });
    let hour = match gateway.audit_sink() {
        Some(store) => {
            let now = now_ms(SystemTime::now());
            let filter = Filter {
                since_ms: Some(now - 3_600_000),
                limit: Some(HOUR_ROWS),
                ..Filter::default()
            };
            match store.rows(filter).await {
                Ok(rows) => last_hour(&rows, now),
                Err(e) => unreadable(&e),
            }
        }
        None => html! { p { "No audit store: nothing is recorded." } },
    };
    let waiting = match gateway.waiting_for_a_person().await {
        Some(Ok(0)) => html! { p { "No call is waiting for a person." } },
        Some(Ok(n)) => html! {
            p { strong { (n) } " waiting for a person now: " a href="/approvals" { "decide" } "." }
        },
        Some(Err(e)) => unreadable(&e),
        None => html! {},
    };
    page(
        "Overview",
        "/console",
        html! { (waiting) (upstreams) @if let Some(e) = endpoints { (e) } h2 { "The last hour" } (hour) },
    )
}

/// The overview reads at most this many of the last hour's rows (the
/// newest): enough for its charts, bounded for a busy gateway.
const HOUR_ROWS: usize = 20_000;

/// The last hour's calls: per minute by outcome, counts by status, and
/// each upstream's latency.
fn last_hour(rows: &[crate::store::AuditRow], now: i64) -> Markup {
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for r in super::chart::calls(rows) {
        *by.entry(r.status.clone()).or_default() += 1;
    }
    if by.is_empty() {
        return html! { p { "No calls in the last hour." } };
    }
    let statuses = by
        .into_iter()
        .map(|(status, n)| vec![text(status), text(n.to_string())])
        .collect();
    let latency = super::chart::latency_rows(rows);
    html! {
        @if rows.len() >= HOUR_ROWS { p { "Drawn from the newest " (HOUR_ROWS) " rows." } }
        (super::chart::per_minute(rows, now))
        (table(&["status", "calls"], statuses))
        @if !latency.is_empty() {
            h2 { "Latency, the last hour" }
            (table(&["upstream", "calls", "p50 ms", "p99 ms"], latency))
        }
    }
}

/// `GET /console/tools`: every offered tool, what it can do and what the
/// policy decides; the withheld ones and why.
pub(super) async fn tools(Viewer { token, gateway }: Viewer) -> Response {
    let (offered, withheld) = gateway.tool_views();
    let findings = review(&offered);
    let lock = if gateway.is_locked() {
        "pinned"
    } else {
        "no lock file"
    };
    let rows = offered
        .into_iter()
        .map(|t| {
            let decision = match t.decision {
                Some(d) => html! { (d.action) " " small { "(" (d.rule) ")" } },
                None => text("depends on the caller"),
            };
            let found = findings
                .iter()
                .filter(|f| f.server == t.upstream && f.tool == t.definition.name);
            let found = html! {
                @for f in found {
                    details {
                        summary { (f.severity) " " code { (f.rule) } ": " (f.message) }
                        p { "Evidence: " code { (f.evidence) } }
                        p { "Fix: " (f.fix) }
                    }
                }
            };
            vec![
                code(&t.name),
                text(&t.upstream),
                text(t.effects.join(", ")),
                text(t.classes.explain()),
                decision,
                text(lock),
                text(t.definition.description.as_deref().unwrap_or("")),
                found,
            ]
        })
        .collect();
    let drift = gateway.drift();
    let flows = gateway.flow_findings();
    let withheld: Vec<Vec<Markup>> = withheld
        .into_iter()
        .filter(|(name, _)| !drift.iter().any(|(n, _)| n == name))
        .map(|(name, why)| vec![code(&name), text(why)])
        .collect();
    let body = html! {
        (table(&["tool", "upstream", "effects", "flow classes", "policy", "lock", "description", "findings"], rows))
        @if !flows.is_empty() {
            h2 { "Flows that can leak or destroy" }
            @for f in &flows {
                details {
                    summary { (f.severity) " " code { (f.rule) } " " code { (f.tool) } ": " (f.message) }
                    p { "Evidence: " (f.evidence) }
                    p { (f.fix) }
                }
            }
        }
        @if !drift.is_empty() {
            h2 { "Not approved in the lock file" }
            @for (name, d) in &drift { (drifted(&token, name, d)) }
        }
        @if !withheld.is_empty() {
            h2 { "Withheld" }
            (table(&["tool", "what a caller is told"], withheld))
        }
        @for e in gateway.endpoints() { (endpoint_tools(&e.view())) }
    };
    page("Tools", "/console/tools", body)
}

/// One endpoint's tools: each as the model calls it there, and the
/// gateway tool (what is approved and recorded) behind it.
fn endpoint_tools(v: &crate::gateway::EndpointView) -> Markup {
    let rows = v
        .tools
        .iter()
        .map(|(shown, tool)| vec![code(shown), code(tool)])
        .collect();
    let withheld: Vec<Vec<Markup>> = v
        .withheld
        .iter()
        .map(|(shown, why)| vec![code(shown), text(why)])
        .collect();
    html! {
        h2 { "Endpoint " (v.name) " at " code { (v.path) } }
        (table(&["called as", "gateway tool"], rows))
        @if !withheld.is_empty() {
            (table(&["withheld", "what a caller is told"], withheld))
        }
    }
}

/// What `toolgate audit` finds in the offered tools, upstream by upstream.
fn review(offered: &[crate::gateway::ToolView]) -> Vec<toolgate_review::Finding> {
    let mut servers: BTreeMap<&str, Vec<toolgate_protocol::types::Tool>> = BTreeMap::new();
    for t in offered {
        servers
            .entry(&t.upstream)
            .or_default()
            .push(t.definition.clone());
    }
    let servers: Vec<toolgate_review::ServerTools> = servers
        .into_iter()
        .map(|(server, tools)| toolgate_review::ServerTools {
            server: server.to_owned(),
            tools,
        })
        .collect();
    toolgate_review::audit(&servers)
}

/// One tool the lock file withholds: why, the field-by-field change or
/// the whole new definition, and the button that approves exactly it.
fn drifted(token: &str, name: &str, d: &crate::gateway::Drift) -> Markup {
    let why = match d.kind {
        "changed" => "its definition changed since it was approved",
        "added" => "its server added it after the lock file was written",
        _ => "its server is not in the lock file",
    };
    let shown = if d.changes.is_empty() {
        serde_json::to_string_pretty(&d.definition).unwrap_or_default()
    } else {
        d.changes.join("\n")
    };
    let id = name.replace(|c: char| !c.is_ascii_alphanumeric(), "-");
    html! {
        section id={ "drift-" (id) } {
            h3 { code { (name) } " " small { "on " (d.server) } }
            p { "Withheld: " (why) "." }
            pre class="diff" { (shown) }
            form method="post" action="/console/tools/approve" {
                input type="hidden" name="token" value=(token);
                input type="hidden" name="tool" value=(name);
                input type="hidden" name="digest" value=(d.digest);
                button class="approve" id={ "lock-" (id) } { "Approve this definition" }
                " " small { (d.digest) }
            }
        }
    }
}

/// The approve-definition form.
#[derive(Deserialize)]
pub(super) struct ApproveDefinition {
    token: String,
    tool: String,
    digest: String,
}

/// `POST /console/tools/approve`: the definition shown goes into the lock
/// file, and the tool is offered again.
pub(super) async fn approve_definition(
    State(desk): State<Arc<ApprovalDesk>>,
    headers: HeaderMap,
    Form(form): Form<ApproveDefinition>,
) -> Response {
    let gateway = match acting(&desk, &headers, &form.token) {
        Ok(g) => g,
        Err(r) => return r,
    };
    let who = desk.who(&headers);
    match gateway
        .approve_definition(&form.tool, &form.digest, &who)
        .await
    {
        Ok(()) => back("/console/tools"),
        Err(e @ crate::gateway::NotApproved::Write { .. }) => {
            tracing::warn!(error = %with_causes(&e), "a definition could not be approved");
            plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "the lock file cannot be written; see the gateway's log",
            )
        }
        Err(crate::gateway::NotApproved::Moved(_)) => plain(
            StatusCode::CONFLICT,
            "the definition changed again since this page showed it: reload the page and review it anew",
        ),
        Err(crate::gateway::NotApproved::Unknown(_)) => plain(
            StatusCode::CONFLICT,
            "this tool is not withheld by the lock file now (approved already?): reload the page",
        ),
    }
}

/// `GET /console/grants`: the grants that hold, each revocable.
pub(super) async fn grants(Viewer { token, gateway }: Viewer) -> Response {
    let Some(store) = gateway.audit_sink() else {
        return page(
            "Grants",
            "/console/grants",
            html! { p { "No audit store: grants need one." } },
        );
    };
    let body = match store.grants(false).await {
        Ok(list) if list.is_empty() => html! { p { "No grants hold now." } },
        Ok(list) => {
            let rows = list
                .iter()
                .map(|g| {
                    vec![
                        code(&g.id),
                        text(
                            g.caller
                                .as_deref()
                                .unwrap_or("every caller without credentials"),
                        ),
                        text(&g.tool),
                        text(crate::base::duration::utc(g.expires_ms, false)),
                        html! {
                            form method="post" action={ "/console/grants/" (g.id) "/revoke" } {
                                input type="hidden" name="token" value=(token);
                                button class="deny" id={ "revoke-" (g.id) } { "Revoke" }
                            }
                        },
                    ]
                })
                .collect();
            table(&["grant", "caller", "tool", "until (UTC)", ""], rows)
        }
        Err(e) => unreadable(&e),
    };
    page("Grants", "/console/grants", body)
}

/// A form's anti-forgery token.
#[derive(Deserialize)]
pub(super) struct Token {
    pub(super) token: String,
}

pub(super) fn back(to: &str) -> Response {
    (
        StatusCode::SEE_OTHER,
        secured(),
        [(header::LOCATION, to.to_owned())],
    )
        .into_response()
}

/// `POST /console/grants/{id}/revoke`.
pub(super) async fn revoke(
    State(desk): State<Arc<ApprovalDesk>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Form(form): Form<Token>,
) -> Response {
    let gateway = match acting(&desk, &headers, &form.token) {
        Ok(g) => g,
        Err(r) => return r,
    };
    let Some(store) = gateway.audit_sink() else {
        return plain(StatusCode::NOT_FOUND, "no audit store: grants need one");
    };
    // The revocation is recorded under who did it.
    let who = desk.who(&headers);
    match store.revoke(id, who).await {
        Ok(Revoked::Now(g)) => {
            tracing::info!(grant = %g.id, tool = %g.tool, "grant revoked on the console");
            back("/console/grants")
        }
        Ok(Revoked::Already(_)) => back("/console/grants"),
        Ok(Revoked::Unknown) => plain(StatusCode::NOT_FOUND, "no such grant"),
        Err(e) => {
            tracing::warn!(error = %e, "a grant could not be revoked");
            plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "the audit store cannot be written now; try again",
            )
        }
    }
}
