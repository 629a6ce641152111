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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::{ApprovalDesk, escape, html, plain, secured};
use crate::audit::{Filter, now_ms};
use crate::config::GatewayConfig;
use crate::grants::Revoked;

/// `[console]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsoleConfig {
    /// Where the console listens (default `127.0.0.1:8791`; keep it on
    /// loopback unless a proxy in front authenticates people). The
    /// approval page is then served here too.
    pub listen: Option<String>,
    /// The address people open, when it differs from `http://LISTEN`.
    pub url: Option<String>,
    /// With `[auth]`: the scope a person's token must carry to log in with
    /// it (at `/login`), beside the one-time link (default
    /// `toolgate:operator`). Their subject is recorded as who acted.
    pub operator_scope: Option<String>,
}

/// The scope an operator's token carries by default.
pub const OPERATOR_SCOPE: &str = "toolgate:operator";

/// Where the console listens by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8791";

const NAV: &[(&str, &str)] = &[
    ("/console", "Overview"),
    ("/console/tools", "Tools"),
    ("/approvals", "Approvals"),
    ("/console/calls", "Calls"),
    ("/console/grants", "Grants"),
    ("/console/config", "Configuration"),
];

/// The console's navigation bar, `here` marked.
pub(super) fn nav(here: &str) -> String {
    let links: Vec<String> = NAV
        .iter()
        .map(|(href, label)| {
            if *href == here {
                format!("<strong>{label}</strong>")
            } else {
                format!("<a href=\"{href}\">{label}</a>")
            }
        })
        .collect();
    format!("<nav>{}</nav>", links.join(" · "))
}

/// The gateway behind the console, or the answer that there is none.
fn gateway(desk: &ApprovalDesk) -> Result<crate::Gateway, Response> {
    desk.console().ok_or_else(|| {
        plain(
            StatusCode::NOT_FOUND,
            "the console is off: set [console] listen",
        )
    })
}

/// For a view: the session's anti-forgery token and the gateway, or the
/// answer to a request not from the logged-in person.
pub(super) fn viewing(
    desk: &ApprovalDesk,
    headers: &HeaderMap,
) -> Result<(String, crate::Gateway), Response> {
    let token = desk.admit(headers, false)?;
    Ok((token, gateway(desk)?))
}

/// For an act: the gateway, when the request comes from the console's own
/// page with the session's token.
fn acting(
    desk: &ApprovalDesk,
    headers: &HeaderMap,
    token: &str,
) -> Result<crate::Gateway, Response> {
    if desk.admit(headers, true)? != token {
        return Err(plain(
            StatusCode::FORBIDDEN,
            "this form is stale or forged: reload the page",
        ));
    }
    gateway(desk)
}

pub(super) fn page(title: &str, here: &str, body: &str) -> Response {
    html(
        &format!("toolgate: {title}"),
        &format!("{}<h1>{}</h1>{body}", nav(here), escape(title)),
    )
}

pub(super) fn table(head: &[&str], rows: Vec<Vec<String>>) -> String {
    let head: String = head.iter().map(|h| format!("<th>{h}</th>")).collect();
    let body: String = rows
        .into_iter()
        .map(|cells| {
            let cells: String = cells.into_iter().map(|c| format!("<td>{c}</td>")).collect();
            format!("<tr>{cells}</tr>")
        })
        .collect();
    format!("<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
}

/// `GET /console`: each upstream's state, and the last hour's calls.
pub(super) async fn overview(
    State(desk): State<Arc<ApprovalDesk>>,
    headers: HeaderMap,
) -> Response {
    let (_, gateway) = match viewing(&desk, &headers) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let upstreams: Vec<Vec<String>> = gateway
        .status()
        .into_iter()
        .map(|s| {
            let state = if !s.enabled {
                "disabled".to_owned()
            } else if let Some(e) = &s.error {
                let next = match s.retry_in {
                    Some(w) if !w.is_zero() => format!(" (restarting in {} s)", w.as_secs() + 1),
                    _ => " (restarting at the next call)".to_owned(),
                };
                format!("<span class=\"bad\">down</span>{next}: {}", escape(e))
            } else {
                "<span class=\"good\">up</span>".to_owned()
            };
            let stderr = if s.stderr.is_empty() || s.error.is_none() {
                String::new()
            } else {
                format!("<pre>{}</pre>", escape(&s.stderr.join("\n")))
            };
            vec![
                escape(&s.name),
                s.transport.to_owned(),
                format!("{state}{stderr}"),
                s.offered.to_string(),
                s.withheld.to_string(),
                s.denied.to_string(),
                s.restarts.to_string(),
            ]
        })
        .collect();
    let mut body = table(
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
    body.push_str("<h2>The last hour</h2>");
    match gateway.audit_sink() {
        Some(store) => {
            let now = now_ms(SystemTime::now());
            let filter = Filter {
                since_ms: Some(now - 3_600_000),
                limit: Some(HOUR_ROWS),
                ..Filter::default()
            };
            match store.rows(filter).await {
                Ok(rows) => body.push_str(&last_hour(&rows, now)),
                Err(e) => body.push_str(&format!(
                    "<p>The audit store cannot be read: {}</p>",
                    escape(&e)
                )),
            }
        }
        None => body.push_str("<p>No audit store: nothing is recorded.</p>"),
    }
    page("Overview", "/console", &body)
}

/// The overview reads at most this many of the last hour's rows (the
/// newest): enough for its charts, bounded for a busy gateway.
const HOUR_ROWS: usize = 20_000;

/// The last hour's calls: per minute by outcome, counts by status, and
/// each upstream's latency.
fn last_hour(rows: &[crate::audit::AuditRow], now: i64) -> String {
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for r in super::chart::calls(rows) {
        *by.entry(r.status.clone()).or_default() += 1;
    }
    if by.is_empty() {
        return "<p>No calls in the last hour.</p>".to_owned();
    }
    let mut out = String::new();
    if rows.len() >= HOUR_ROWS {
        out.push_str(&format!("<p>Drawn from the newest {HOUR_ROWS} rows.</p>"));
    }
    out.push_str(&super::chart::per_minute(rows, now));
    let statuses = by
        .into_iter()
        .map(|(status, n)| vec![escape(&status), n.to_string()])
        .collect();
    out.push_str(&table(&["status", "calls"], statuses));
    let latency = super::chart::latency_rows(rows);
    if !latency.is_empty() {
        out.push_str("<h2>Latency, the last hour</h2>");
        out.push_str(&table(&["upstream", "calls", "p50 ms", "p99 ms"], latency));
    }
    out
}

/// `GET /console/tools`: every offered tool, what it can do and what the
/// policy decides; the withheld ones and why.
pub(super) async fn tools(State(desk): State<Arc<ApprovalDesk>>, headers: HeaderMap) -> Response {
    let (token, gateway) = match viewing(&desk, &headers) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let (offered, withheld) = gateway.tool_views();
    let rows = offered
        .into_iter()
        .map(|t| {
            let decision = t.decision.map_or_else(
                || "depends on the caller".to_owned(),
                |d| format!("{} <small>({})</small>", d.action, escape(&d.rule)),
            );
            vec![
                format!("<code>{}</code>", escape(&t.name)),
                escape(&t.upstream),
                escape(&t.effects.join(", ")),
                decision,
                escape(t.definition.description.as_deref().unwrap_or("")),
            ]
        })
        .collect();
    let mut body = table(
        &["tool", "upstream", "effects", "policy", "description"],
        rows,
    );
    let drift = gateway.drift();
    if !drift.is_empty() {
        body.push_str("<h2>Not approved in the lock file</h2>");
        for (name, d) in &drift {
            body.push_str(&drifted(&token, name, d));
        }
    }
    let withheld: Vec<Vec<String>> = withheld
        .into_iter()
        .filter(|(name, _)| !drift.iter().any(|(n, _)| n == name))
        .map(|(name, why)| vec![format!("<code>{}</code>", escape(&name)), escape(&why)])
        .collect();
    if !withheld.is_empty() {
        body.push_str("<h2>Withheld</h2>");
        body.push_str(&table(&["tool", "what a caller is told"], withheld));
    }
    page("Tools", "/console/tools", &body)
}

/// One tool the lock file withholds: why, the field-by-field change or
/// the whole new definition, and the button that approves exactly it.
fn drifted(token: &str, name: &str, d: &crate::Drift) -> String {
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
    format!(
        "<section id=\"drift-{id}\"><h3><code>{}</code> <small>on {}</small></h3><p>Withheld: {why}.</p><pre class=\"diff\">{}</pre><form method=\"post\" action=\"/console/tools/approve\"><input type=\"hidden\" name=\"token\" value=\"{token}\"><input type=\"hidden\" name=\"tool\" value=\"{}\"><input type=\"hidden\" name=\"digest\" value=\"{}\"><button class=\"approve\" id=\"lock-{id}\">Approve this definition</button> <small>{}</small></form></section>",
        escape(name),
        escape(&d.server),
        escape(&shown),
        escape(name),
        escape(&d.digest),
        escape(&d.digest),
    )
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
        Err(e @ crate::NotApproved::Write(..)) => {
            tracing::warn!(error = %e, "a definition could not be approved");
            plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "the lock file cannot be written; see the gateway's log",
            )
        }
        Err(crate::NotApproved::Moved(_)) => plain(
            StatusCode::CONFLICT,
            "the definition changed again since this page showed it: reload the page and review it anew",
        ),
        Err(crate::NotApproved::Unknown(_)) => plain(
            StatusCode::CONFLICT,
            "this tool is not withheld by the lock file now (approved already?): reload the page",
        ),
    }
}

/// `GET /console/grants`: the grants that hold, each revocable.
pub(super) async fn grants(State(desk): State<Arc<ApprovalDesk>>, headers: HeaderMap) -> Response {
    let (token, gateway) = match viewing(&desk, &headers) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let Some(store) = gateway.audit_sink() else {
        return page(
            "Grants",
            "/console/grants",
            "<p>No audit store: grants need one.</p>",
        );
    };
    let body = match store.grants(false).await {
        Ok(list) if list.is_empty() => "<p>No grants hold now.</p>".to_owned(),
        Ok(list) => {
            let rows = list
                .iter()
                .map(|g| {
                    vec![
                        format!("<code>{}</code>", escape(&g.id)),
                        g.caller.as_deref().map_or_else(|| "every caller without credentials".to_owned(), escape),
                        escape(&g.tool),
                        crate::duration::utc(g.expires_ms, false),
                        format!(
                            "<form method=\"post\" action=\"/console/grants/{id}/revoke\"><input type=\"hidden\" name=\"token\" value=\"{token}\"><button class=\"deny\" id=\"revoke-{id}\">Revoke</button></form>",
                            id = escape(&g.id)
                        ),
                    ]
                })
                .collect();
            table(&["grant", "caller", "tool", "until (UTC)", ""], rows)
        }
        Err(e) => format!("<p>The audit store cannot be read: {}</p>", escape(&e)),
    };
    page("Grants", "/console/grants", &body)
}

/// A form's anti-forgery token.
#[derive(Deserialize)]
pub(super) struct Token {
    token: String,
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
    match store.revoke(id).await {
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

/// The configuration as the console shows it: what each key says, with
/// every value that may be a secret left out (environment values, header
/// values, OAuth secrets, passwords in URLs).
fn summary(c: &GatewayConfig) -> String {
    let mut out = String::new();
    for (name, s) in &c.servers {
        out.push_str(&format!("[servers.{name}]\n"));
        if !s.enabled {
            out.push_str("enabled = false\n");
        }
        if let Some(command) = &s.command {
            out.push_str(&format!("command = {command:?}\nargs = {:?}\n", s.args));
        }
        if let Some(url) = &s.url {
            out.push_str(&format!("url = {:?}\n", crate::audit_pg::redact(url)));
        }
        if let Some(t) = s.transport {
            out.push_str(&format!("transport = {t:?}\n"));
        }
        if !s.env.is_empty() {
            let names: Vec<&String> = s.env.keys().collect();
            out.push_str(&format!("env = {names:?}  # values not shown\n"));
        }
        if !s.headers.is_empty() {
            let names: Vec<&String> = s.headers.keys().collect();
            out.push_str(&format!("headers = {names:?}  # values not shown\n"));
        }
        if s.oauth.is_some() {
            out.push_str("oauth = …  # credentials not shown\n");
        }
        if s.trusted {
            out.push_str("trusted = true\n");
        }
    }
    out.push_str("\n[policy]\n");
    if let Some(default) = c.policy.default {
        out.push_str(&format!("default = \"{default}\"\n"));
    }
    for r in &c.policy.rules {
        out.push_str("[[policy.rules]]\n");
        let effects: Vec<&str> = r.effects.iter().map(|e| e.label()).collect();
        for (key, list) in [
            ("tools", r.tools.clone()),
            ("effects", effects.iter().map(|e| (*e).to_owned()).collect()),
            ("subjects", r.subjects.clone()),
            ("scopes", r.scopes.clone()),
        ] {
            if !list.is_empty() {
                out.push_str(&format!("{key} = {list:?}\n"));
            }
        }
        out.push_str(&format!("action = \"{}\"\n", r.action));
        if let Some(remember) = &r.remember {
            out.push_str(&format!("remember = {remember:?}\n"));
        }
    }
    for r in &c.ratelimit.rules {
        out.push_str(&format!(
            "\n[[ratelimit.rules]]\ntools = {:?}\nper_minute = {}\n",
            r.tools, r.per_minute
        ));
    }
    let l = &c.loops;
    if l.identical_failures.is_some() || l.tool_failures.is_some() {
        out.push_str("\n[loops]\n");
        if let Some(n) = l.identical_failures {
            out.push_str(&format!("identical_failures = {n}\n"));
        }
        if let Some(n) = l.tool_failures {
            out.push_str(&format!("tool_failures = {n}\n"));
        }
        if let Some(w) = &l.window {
            out.push_str(&format!("window = {w:?}\n"));
        }
    }
    for b in &c.budget {
        out.push_str(&format!("\n[[budget]]\ntools = {:?}\n", b.tools));
        if let Some(n) = b.cost {
            out.push_str(&format!("cost = {n}\n"));
        }
        if let Some(from) = &b.cost_from {
            out.push_str(&format!("cost_from = {from:?}\n"));
        }
        for (key, cap) in [("per_caller", b.per_caller), ("total", b.total)] {
            if let Some(cap) = cap {
                out.push_str(&format!(
                    "{key} = {{ amount = {}, per = {:?} }}\n",
                    cap.amount,
                    format!("{:?}", cap.per).to_lowercase()
                ));
            }
        }
    }
    if let Some(url) = &c.store.url {
        out.push_str(&format!(
            "\n[store]\nurl = {:?}\n",
            crate::audit_pg::redact(url)
        ));
    }
    if let Some(auth) = &c.auth {
        out.push_str(&format!(
            "\n[auth]\nissuer = {:?}\naudience = {:?}\n",
            auth.issuer, auth.audience
        ));
    }
    out
}

/// `GET /console/config`.
pub(super) async fn config(State(desk): State<Arc<ApprovalDesk>>, headers: HeaderMap) -> Response {
    let (token, gateway) = match viewing(&desk, &headers) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let running = gateway.running_config();
    let source = running
        .source
        .as_ref()
        .map_or_else(|| "built in code".to_owned(), |p| p.display().to_string());
    let reload = if running.source.is_some() {
        format!(
            "<form method=\"post\" action=\"/console/config/reload\"><input type=\"hidden\" name=\"token\" value=\"{token}\"><button id=\"reload\">Reload the file</button> (as <code>SIGHUP</code>: the file is checked first)</form>"
        )
    } else {
        String::new()
    };
    let said = desk.last_reload().map_or_else(String::new, |s| {
        format!("<p><strong>Last reload:</strong> {}</p>", escape(&s))
    });
    let history = match gateway.audit_sink() {
        Some(store) => {
            let filter = Filter {
                tool: Some("toolgate.reload".into()),
                limit: Some(10),
                ..Filter::default()
            };
            match store.rows(filter).await {
                Ok(rows) if rows.is_empty() => String::new(),
                Ok(rows) => {
                    let rows = rows
                        .iter()
                        .rev()
                        .map(|r| {
                            vec![
                                crate::duration::utc(r.time_ms, false),
                                escape(r.rule.as_deref().unwrap_or("")),
                            ]
                        })
                        .collect();
                    format!(
                        "<h2>The last reloads</h2>{}",
                        table(&["time (UTC)", "what changed"], rows)
                    )
                }
                Err(e) => format!("<p>The audit store cannot be read: {}</p>", escape(&e)),
            }
        }
        None => String::new(),
    };
    let body = format!(
        "<p>From {}.</p>{said}{reload}<pre>{}</pre>{history}",
        escape(&source),
        escape(&summary(&running))
    );
    page("Configuration", "/console/config", &body)
}

/// `POST /console/config/reload`.
pub(super) async fn reload(
    State(desk): State<Arc<ApprovalDesk>>,
    headers: HeaderMap,
    Form(form): Form<Token>,
) -> Response {
    let gateway = match acting(&desk, &headers, &form.token) {
        Ok(g) => g,
        Err(r) => return r,
    };
    let Some(path) = gateway.running_config().source.clone() else {
        return plain(
            StatusCode::CONFLICT,
            "this gateway was configured in code: there is no file to reload",
        );
    };
    let said = match GatewayConfig::load(&path) {
        Ok(config) => match gateway.reload(config).await {
            Ok(report) => format!("reloaded: {}", report.summary()),
            Err(e) => format!("not reloaded, the running configuration stays: {e}"),
        },
        Err(e) => format!("not reloaded, the running configuration stays: {}", e.0),
    };
    tracing::info!("console: {said}");
    desk.said_reload(said);
    back("/console/config")
}
