//! The console's configuration view: what is running (secrets left out),
//! the last reloads, and the reload button.
//!
//! Layer: `surface`.

use std::sync::Arc;

use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::html;

use super::console::{Token, Viewer, acting, back, page, table, text, unreadable};
use super::{ApprovalDesk, plain};
use crate::config::GatewayConfig;
use crate::store::sqlite::Filter;

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
        // `Secret`s print what may be shown: arguments as written (a
        // `${VAR}` by its name), a URL with its credentials masked.
        if let Some(command) = &s.command {
            out.push_str(&format!("command = {command:?}\nargs = {:?}\n", s.args));
        }
        if let Some(url) = &s.url {
            out.push_str(&format!("url = {url:?}\n"));
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
            crate::base::redact::store_url(url)
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
pub(super) async fn config(
    State(desk): State<Arc<ApprovalDesk>>,
    Viewer { token, gateway }: Viewer,
) -> Response {
    let running = gateway.running_config();
    let source = running
        .source
        .as_ref()
        .map_or_else(|| "built in code".to_owned(), |p| p.display().to_string());
    let said = desk.last_reload();
    let history = match gateway.audit_sink() {
        Some(store) => {
            let filter = Filter {
                tool: Some("toolgate.reload".into()),
                limit: Some(10),
                ..Filter::default()
            };
            match store.rows(filter).await {
                Ok(rows) if rows.is_empty() => html! {},
                Ok(rows) => {
                    let rows = rows
                        .iter()
                        .rev()
                        .map(|r| {
                            vec![
                                text(crate::base::duration::utc(r.time_ms, false)),
                                text(r.rule.as_deref().unwrap_or("")),
                            ]
                        })
                        .collect();
                    html! {
                        h2 { "The last reloads" }
                        (table(&["time (UTC)", "what changed"], rows))
                    }
                }
                Err(e) => unreadable(&e),
            }
        }
        None => html! {},
    };
    let body = html! {
        p { "From " (source) "." }
        @if let Some(said) = &said { p { strong { "Last reload:" } " " (said) } }
        @if running.source.is_some() {
            form method="post" action="/console/config/reload" {
                input type="hidden" name="token" value=(token);
                button id="reload" { "Reload the file" }
                " (as " code { "SIGHUP" } ": the file is checked first)"
            }
        }
        pre { (summary(&running)) }
        (history)
    };
    page("Configuration", "/console/config", body)
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
    let said = match gateway.reload_from(&path).await {
        Ok(report) => format!("reloaded: {}", report.summary()),
        Err(e) => format!(
            "not reloaded, the running configuration stays: {}",
            toolgate_protocol::error::with_causes(&e)
        ),
    };
    tracing::info!("console: {said}");
    desk.said_reload(said);
    back("/console/config")
}
