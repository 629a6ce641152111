//! The console's view of linked accounts: a person logged in with their
//! own token sees the accounts *they* linked at upstreams (`identity` mode
//! `user`) — never anyone else's — and can unlink them. The gateway then
//! forgets the tokens; the next call asks them to link again.
//!
//! Layer: `surface`.

use std::sync::Arc;

use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::html;

use super::console::{Token, Viewer, acting, back, page, table, text, unreadable};
use super::{ApprovalDesk, plain};

/// `GET /console/accounts`.
pub(super) async fn list(
    State(desk): State<Arc<ApprovalDesk>>,
    headers: HeaderMap,
    Viewer { token, gateway }: Viewer,
) -> Response {
    let Some(linking) = gateway.linking() else {
        return page(
            "Linked accounts",
            "/console/accounts",
            html! { p { "No upstream here acts as the person calling (identity mode \"user\"), or the gateway has no state key to keep accounts under." } },
        );
    };
    // Only a person who logged in with their own token has accounts: the
    // login link names no one.
    let Some(subject) = desk.site.logins.subject(&headers) else {
        return page(
            "Linked accounts",
            "/console/accounts",
            html! { p { "Log in with your own token (" a href="/login" { "here" } ") to see the accounts you linked." } },
        );
    };
    let body = match linking.accounts.accounts_of(subject.clone()).await {
        Ok(list) if list.is_empty() => html! { p { "You have linked no account." } },
        Ok(list) => {
            let rows = list
                .iter()
                .map(|a| {
                    vec![
                        text(&a.server),
                        text(crate::base::duration::utc(a.linked_ms, false)),
                        text(crate::base::duration::utc(a.updated_ms, false)),
                        html! {
                            form method="post" action={ "/console/accounts/" (a.server) "/unlink" } {
                                input type="hidden" name="token" value=(token);
                                button class="deny" id={ "unlink-" (a.server) } { "Unlink" }
                            }
                        },
                    ]
                })
                .collect();
            table(
                &["upstream", "linked (UTC)", "tokens renewed (UTC)", ""],
                rows,
            )
        }
        Err(e) => unreadable(&e),
    };
    page(
        "Linked accounts",
        "/console/accounts",
        html! { p { "Accounts of " strong { (subject) } "." } (body) },
    )
}

/// `POST /console/accounts/{server}/unlink`: the person's own account.
pub(super) async fn unlink(
    State(desk): State<Arc<ApprovalDesk>>,
    Path(server): Path<String>,
    headers: HeaderMap,
    Form(form): Form<Token>,
) -> Response {
    let gateway = match acting(&desk, &headers, &form.token) {
        Ok(g) => g,
        Err(r) => return r,
    };
    let (Some(linking), Some(subject)) = (gateway.linking(), desk.site.logins.subject(&headers))
    else {
        return plain(StatusCode::NOT_FOUND, "no linked accounts here");
    };
    match linking.unlink(&subject, &server).await {
        Ok(true) => {
            if let Some(identity) = gateway.identity_of(&server) {
                identity.forget_person(&subject);
            }
            tracing::info!(%server, %subject, "an account was unlinked on the console");
            back("/console/accounts")
        }
        Ok(false) => plain(StatusCode::NOT_FOUND, "no such linked account"),
        Err(e) => {
            tracing::warn!(error = %e, "an account could not be unlinked");
            plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "the store cannot be written now; try again",
            )
        }
    }
}
