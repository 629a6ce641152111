//! The console's calls: the audit store filtered, one call in full, and
//! new calls followed as they are recorded.
//!
//! Following is progressive: the page is complete without script; with
//! it, `console.js` (served from the binary, the only script the
//! Content-Security-Policy lets run) opens `/console/calls/live`, a stream
//! of server-sent events that polls the audit store. Polling the store,
//! not this process, is what lets the console of one instance follow the
//! calls every instance records in a shared PostgreSQL store.
//!
//! Layer: `surface`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use maud::{Markup, html};

use super::console::{Viewer, page, table, table_with, text, unreadable};
use super::{ApprovalDesk, plain, secured};
use crate::base::time::now_ms;
use crate::store::AuditRow;
use crate::store::AuditSink;
use crate::store::sqlite::Filter;

/// The calls view's filters (empty fields are no filter).
#[derive(Deserialize, Default)]
pub(super) struct CallsQuery {
    tool: Option<String>,
    caller: Option<String>,
    decision: Option<String>,
    /// The endpoint the calls came through (`-`: the default one).
    endpoint: Option<String>,
    /// How far back: `10m`, `1h`, `24h`.
    since: Option<String>,
    /// For the live stream: rows after this id.
    after: Option<i64>,
}

fn given(v: &Option<String>) -> Option<String> {
    v.as_ref()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

impl CallsQuery {
    fn filter(&self) -> Result<Filter, String> {
        let since_ms = match given(&self.since) {
            Some(s) => {
                let back = crate::base::duration::parse_duration(&s)
                    .map_err(|e| format!("since: {e} (for example 10m, 1h, 24h)"))?;
                let back = i64::try_from(back.as_millis()).unwrap_or(i64::MAX);
                Some(now_ms(SystemTime::now()).saturating_sub(back))
            }
            None => None,
        };
        if let Some(tool) = given(&self.tool) {
            glob::Pattern::new(&tool).map_err(|e| format!("tool {tool:?}: {e}"))?;
        }
        Ok(Filter {
            tool: given(&self.tool),
            caller: given(&self.caller),
            decision: given(&self.decision),
            endpoint: given(&self.endpoint),
            since_ms,
            ..Filter::default()
        })
    }

    /// The filters as a query string (for the live stream's address).
    fn query(&self) -> String {
        let mut out = Vec::new();
        for (key, value) in [
            ("tool", &self.tool),
            ("caller", &self.caller),
            ("decision", &self.decision),
            ("endpoint", &self.endpoint),
        ] {
            if let Some(v) = given(value) {
                out.push(format!("{key}={}", encode(&v)));
            }
        }
        out.join("&")
    }
}

/// Percent-encoding for a query value.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'*' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

const HEAD: &[&str] = &[
    "time (UTC)",
    "caller",
    "endpoint",
    "tool",
    "decision",
    "confirmation",
    "status",
    "cost",
    "ms",
];

/// A row's cells as text (the page escapes them; the script sets them as
/// text).
fn cells(r: &AuditRow) -> Vec<String> {
    vec![
        crate::base::duration::utc(r.time_ms, true),
        r.caller.clone().unwrap_or_default(),
        r.endpoint.clone().unwrap_or_default(),
        match &r.shown {
            Some(shown) => format!("{} (as {shown})", r.tool),
            None => r.tool.clone(),
        },
        r.decision.clone().unwrap_or_default(),
        r.confirmation_shown(),
        r.status.clone(),
        r.cost.map(|c| c.to_string()).unwrap_or_default(),
        format!("{:.1}", r.latency_ms),
    ]
}

fn row_html(r: &AuditRow) -> Vec<Markup> {
    let mut out: Vec<Markup> = cells(r).iter().map(text).collect();
    out[0] = html! { a href={ "/console/calls/" (r.id) } { (out[0]) } };
    out
}

fn store_of(gateway: &crate::gateway::Gateway) -> Option<Arc<dyn AuditSink>> {
    gateway.audit_sink().cloned()
}

/// `GET /console/calls`: the newest 100 calls, filtered; followed live
/// when script runs.
pub(super) async fn calls(Viewer { gateway, .. }: Viewer, Query(q): Query<CallsQuery>) -> Response {
    let value = |v: &Option<String>| v.clone().unwrap_or_default();
    let form = html! {
        form method="get" action="/console/calls" {
            "tool " input name="tool" value=(value(&q.tool)) placeholder="shop.*";
            " caller " input name="caller" value=(value(&q.caller));
            " decision " input name="decision" value=(value(&q.decision)) placeholder="allow, confirm, deny";
            " endpoint " input name="endpoint" value=(value(&q.endpoint)) placeholder="- for the default" size="10";
            " since " input name="since" value=(value(&q.since)) placeholder="1h" size="5";
            " " button { "Filter" }
        }
    };
    let Some(store) = store_of(&gateway) else {
        return page(
            "Calls",
            "/console/calls",
            html! { p { "No audit store: nothing is recorded." } },
        );
    };
    let filter = match q.filter() {
        Ok(f) => Filter {
            limit: Some(100),
            ..f
        },
        Err(e) => {
            let mut r = page(
                "Calls",
                "/console/calls",
                html! { (form) p class="bad" { (e) } },
            );
            *r.status_mut() = StatusCode::BAD_REQUEST;
            return r;
        }
    };
    let body = match store.rows(filter).await {
        Ok(mut rows) => {
            let last = rows.last().map_or(0, |r| r.id);
            rows.reverse();
            let query = q.query();
            let live = format!(
                "/console/calls/live?after={last}{}{query}",
                if query.is_empty() { "" } else { "&" }
            );
            html! {
                (form)
                p id="live-state" { "The newest 100; reload for new calls." }
                (table_with(HEAD, rows.iter().map(row_html).collect(), Some(&live)))
                script src="/console/assets/console.js" defer {}
            }
        }
        Err(e) => html! { (form) (unreadable(&e)) },
    };
    page("Calls", "/console/calls", body)
}

/// `GET /console/calls/{id}`: one call, everything the store kept of it.
pub(super) async fn one(Viewer { gateway, .. }: Viewer, Path(id): Path<String>) -> Response {
    let Ok(id) = id.parse::<i64>() else {
        return plain(StatusCode::NOT_FOUND, "no such call: ids are numbers");
    };
    let Some(store) = store_of(&gateway) else {
        return plain(StatusCode::NOT_FOUND, "no audit store: nothing is recorded");
    };
    let filter = Filter {
        after_id: Some(id.saturating_sub(1)),
        before_id: Some(id.saturating_add(1)),
        ..Filter::default()
    };
    let row = match store.rows(filter).await {
        Ok(rows) => rows.into_iter().next(),
        Err(e) => {
            tracing::warn!(error = %e, "the console could not read a call");
            return plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "the audit store cannot be read now; try again",
            );
        }
    };
    let Some(r) = row else {
        return plain(StatusCode::NOT_FOUND, "no such call in the audit store");
    };
    let arguments = match &r.arguments {
        Some(text) => serde_json::from_str::<serde_json::Value>(text)
            .ok()
            .and_then(|v| serde_json::to_string_pretty(&v).ok())
            .unwrap_or_else(|| text.clone()),
        None => "(not kept: set [audit] arguments = true to keep them)".to_owned(),
    };
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "—".to_owned());
    let fields = [
        ("time (UTC)", crate::base::duration::utc(r.time_ms, true)),
        ("caller", opt(&r.caller)),
        ("upstream", opt(&r.upstream)),
        (
            "endpoint",
            r.endpoint
                .clone()
                .unwrap_or_else(|| "the default".to_owned()),
        ),
        ("tool", r.tool.clone()),
        ("called as", opt(&r.shown)),
        ("via", opt(&r.via)),
        ("decision", opt(&r.decision)),
        ("rule", opt(&r.rule)),
        ("confirmation", r.confirmation_shown()),
        ("status", r.status.clone()),
        ("grant", opt(&r.grant)),
        ("cost", r.cost.map_or_else(|| "—".into(), |c| c.to_string())),
        ("took", format!("{:.1} ms", r.latency_ms)),
        ("result", opt(&r.result)),
        ("trace id", opt(&r.trace_id)),
        ("arguments digest", r.arguments_digest.clone()),
    ];
    let rounds = rounds_of(store.as_ref(), &r).await;
    let body = html! {
        dl { @for (k, v) in &fields { dt { (k) } dd { (v) } } }
        h2 { "Arguments" }
        pre { (arguments) }
        @if rounds.len() > 1 {
            h2 { "Its rounds" }
            p { "The rows of the same caller, tool and arguments within " (ROUNDS_WITHIN_MIN) " minutes of it: a call asked, approved, answered in rounds." }
            (table(HEAD, rounds.iter().map(|x| {
                let mut cells = row_html(x);
                if x.id == r.id {
                    cells[0] = html! { strong { (cells[0]) } };
                }
                cells
            }).collect()))
        }
        p {
            a href={ "/console/calls?tool=" (encode(&r.tool)) } { "this tool's calls" }
            @if let Some(c) = &r.caller {
                " · " a href={ "/console/calls?caller=" (encode(c)) } { "this caller's calls" }
            }
        }
    };
    page(&format!("Call {}", r.id), "/console/calls", body)
}

/// Rows this close to a call, of the same caller, tool and arguments, are
/// shown as its rounds.
const ROUNDS_WITHIN_MIN: i64 = 30;

/// The rows of `r`'s call: same caller, tool and arguments digest, within
/// [`ROUNDS_WITHIN_MIN`] of it, oldest first (at most 50).
async fn rounds_of(store: &dyn AuditSink, r: &AuditRow) -> Vec<AuditRow> {
    let window = ROUNDS_WITHIN_MIN * 60_000;
    let filter = Filter {
        since_ms: Some(r.time_ms.saturating_sub(window)),
        caller: r.caller.clone(),
        // A tool name has no glob characters but these, which are matched
        // as themselves when escaped.
        tool: Some(glob::Pattern::escape(&r.tool)),
        ..Filter::default()
    };
    match store.rows(filter).await {
        Ok(rows) => rows
            .into_iter()
            .filter(|x| {
                x.caller == r.caller
                    && x.arguments_digest == r.arguments_digest
                    && x.time_ms <= r.time_ms.saturating_add(window)
            })
            .take(50)
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// How often the live stream looks for new rows.
const POLL: Duration = Duration::from_secs(1);
/// A stream ends after this, and the browser opens a new one (its session
/// is checked again then).
const STREAM_FOR: Duration = Duration::from_secs(15 * 60);
/// At most this many rows in one event (a burst beyond is skipped to the
/// newest).
const BURST: usize = 500;

/// `GET /console/calls/live`: new calls as server-sent events, each event
/// (`calls`) a JSON array of rows, its id the last row's id (so a
/// reconnecting browser resumes where it was).
pub(super) async fn live(
    Viewer { gateway, .. }: Viewer,
    headers: HeaderMap,
    Query(q): Query<CallsQuery>,
) -> Response {
    let Some(store) = store_of(&gateway) else {
        return plain(StatusCode::NOT_FOUND, "no audit store: nothing is recorded");
    };
    let filter = match q.filter() {
        Ok(f) => f,
        Err(_) => return plain(StatusCode::BAD_REQUEST, "bad filter: fix it on the page"),
    };
    let resumed = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i64>().ok());
    let after = resumed.or(q.after).unwrap_or(0);
    let ends = tokio::time::Instant::now() + STREAM_FOR;
    let mut ticks = tokio::time::interval(POLL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let state = (store, filter, after, ticks);
    let stream =
        futures::stream::unfold(state, move |(store, filter, after, mut ticks)| async move {
            loop {
                ticks.tick().await;
                if tokio::time::Instant::now() >= ends {
                    return None;
                }
                let asked = Filter {
                    after_id: Some(after),
                    limit: Some(BURST),
                    ..filter.clone()
                };
                let Ok(rows) = store.rows(asked).await else {
                    // A store that cannot be read now may be readable at the
                    // next tick; the browser keeps what it has.
                    continue;
                };
                let Some(last) = rows.last().map(|r| r.id) else {
                    continue;
                };
                let data: Vec<serde_json::Value> = rows
                    .iter()
                    .map(|r| {
                        serde_json::json!({
                            "id": r.id,
                            "href": format!("/console/calls/{}", r.id),
                            "cells": cells(r),
                        })
                    })
                    .collect();
                let event = Event::default()
                    .event("calls")
                    .id(last.to_string())
                    .data(serde_json::Value::Array(data).to_string());
                return Some((
                    Ok::<_, std::convert::Infallible>(event),
                    (store, filter, last, ticks),
                ));
            }
        });
    let mut response = Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response();
    response.headers_mut().extend(secured());
    response
}

/// The console's one script: following the calls live.
const SCRIPT: &str = include_str!("console.js");

/// `GET /console/assets/console.js`.
pub(super) async fn script(State(desk): State<Arc<ApprovalDesk>>, headers: HeaderMap) -> Response {
    if let Some(refused) = desk.refuse(&headers, false) {
        return refused;
    }
    (
        StatusCode::OK,
        secured(),
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/javascript; charset=utf-8"),
        )],
        SCRIPT,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_are_checked_and_carried_to_the_live_stream() {
        let q = CallsQuery {
            tool: Some("shop.*".into()),
            caller: Some("a b&c".into()),
            since: Some("1h".into()),
            ..CallsQuery::default()
        };
        let f = q.filter().unwrap();
        assert_eq!(f.tool.as_deref(), Some("shop.*"));
        assert!(f.since_ms.is_some());
        assert_eq!(q.query(), "tool=shop.*&caller=a%20b%26c");
        let bad = CallsQuery {
            since: Some("yesterday".into()),
            ..CallsQuery::default()
        };
        assert!(bad.filter().unwrap_err().starts_with("since: "));
        let bad = CallsQuery {
            tool: Some("[".into()),
            ..CallsQuery::default()
        };
        assert!(bad.filter().is_err());
    }
}
