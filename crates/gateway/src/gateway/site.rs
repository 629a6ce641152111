//! Where the approval page and the console will be served: their socket,
//! bound at start so calls can name the page's address before a surface
//! serves it, the addresses they answer to, and the login link.
//!
//! The lifecycle opens the site; [`crate::surface::page::serve`] takes its
//! listener and serves the page over the running gateway.
//!
//! Layer: `gateway`.

use std::net::SocketAddr;

use parking_lot::Mutex;
use tokio::net::TcpListener;

use super::GatewayError;
use crate::config::GatewayConfig;
use crate::store::logins::Logins;

/// Where the approval page listens by default.
pub const DEFAULT_PAGE_LISTEN: &str = "127.0.0.1:8790";

/// Where the console listens by default (it serves the page too).
pub const DEFAULT_CONSOLE_LISTEN: &str = "127.0.0.1:8791";

/// The page's bound socket and what it answers to.
pub struct Site {
    /// `http://host:port` (the configured `url`, or the bound address).
    pub base: String,
    /// The `Host` values the page answers (DNS rebinding is refused).
    pub hosts: Vec<String>,
    /// The bound address.
    pub local: SocketAddr,
    /// The one-time login links and the sessions they opened.
    pub logins: Logins,
    /// Whether the console's views are served beside the page.
    pub console: bool,
    /// The socket, until a surface takes it to serve the page.
    listener: Mutex<Option<TcpListener>>,
}

impl Site {
    /// Bind the page's listener (`[console] listen` when the console is on,
    /// else `[approval] listen`).
    pub(super) async fn bind(config: &GatewayConfig) -> Result<Self, GatewayError> {
        let (section, listen, url) = match &config.console {
            Some(c) => (
                "[console]",
                c.listen.as_deref().unwrap_or(DEFAULT_CONSOLE_LISTEN),
                c.url.clone(),
            ),
            None => (
                "[approval]",
                config
                    .approval
                    .listen
                    .as_deref()
                    .unwrap_or(DEFAULT_PAGE_LISTEN),
                config.approval.url.clone(),
            ),
        };
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|source| GatewayError::Listen {
                what: format!("{section} cannot listen on {listen}"),
                source,
            })?;
        let local = listener
            .local_addr()
            .map_err(|source| GatewayError::Listen {
                what: format!("{section} {listen}"),
                source,
            })?;
        let base = url
            .unwrap_or_else(|| format!("http://{local}"))
            .trim_end_matches('/')
            .to_owned();
        let mut hosts = vec![local.to_string(), format!("localhost:{}", local.port())];
        if let Some(host) = base
            .split("://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
        {
            hosts.push(host.to_owned());
        }
        let logins = Logins::new(&base, config.approval_login_file())?;
        Ok(Self {
            base,
            hosts,
            local,
            logins,
            console: config.console.is_some(),
            listener: Mutex::new(Some(listener)),
        })
    }

    /// The listener, once: the surface that serves the page takes it.
    pub fn take_listener(&self) -> Option<TcpListener> {
        self.listener.lock().take()
    }

    /// The page listing every pending approval.
    pub fn page_url(&self) -> String {
        format!("{}/approvals", self.base)
    }

    /// The console's overview.
    pub fn console_url(&self) -> String {
        format!("{}/console", self.base)
    }
}
