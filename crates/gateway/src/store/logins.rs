//! Who may decide on the approval page (layer `store`: sessions kept in
//! this process): the person who started the gateway, logged in through a
//! one-time link.
//!
//! Knowing the page's address is not enough — the model is told it, and
//! any local process can reach loopback. At start the gateway prints (and,
//! with `[approval] login_file`, writes to a file only its user can read)
//! a link carrying a 128-bit secret. Opening it spends the secret and sets
//! an `HttpOnly`, `SameSite=Strict` session cookie; every page and every
//! decision needs that session, and each form carries the session's own
//! anti-forgery token. A fresh link replaces a spent one (printed, and
//! written to the file), so a second browser can log in too.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, header};

use crate::base::ids::new_nonce;
use crate::store::StoreError;

/// The session cookie's name.
pub const COOKIE: &str = "toolgate_approval";

/// How long a login lasts.
pub const SESSION: Duration = Duration::from_secs(12 * 3600);

/// A logged-in browser.
struct Session {
    /// The anti-forgery token its forms carry.
    token: String,
    /// Who it is, as the audit store records their acts.
    who: String,
    /// Whether they logged in with their own (verified) token, so `who` is
    /// their subject rather than [`LINK_PERSON`].
    verified: bool,
    /// When it ends.
    until: Instant,
}

/// Who logged in with the one-time link: whoever holds it (`toolgate
/// serve` shows it only to the person who started the gateway).
pub const LINK_PERSON: &str = "console";

/// The login secret and the sessions it opened.
pub struct Logins {
    state: Mutex<State>,
    /// The current link, for whoever shows it to the person (`serve`
    /// prints each new one where it printed the first).
    links: tokio::sync::watch::Sender<String>,
    /// Where the current link is written, if anywhere.
    file: Option<PathBuf>,
    base: String,
}

struct State {
    secret: String,
    sessions: HashMap<String, Session>,
}

/// Compare secrets in time independent of where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

impl Logins {
    /// Logins to the page at `base`; the link goes to `file` too.
    pub fn new(base: &str, file: Option<PathBuf>) -> Result<Self, StoreError> {
        let secret = new_nonce();
        let logins = Self {
            links: tokio::sync::watch::Sender::new(format!("{base}/login/{secret}")),
            state: Mutex::new(State {
                secret,
                sessions: HashMap::new(),
            }),
            file,
            base: base.to_owned(),
        };
        logins.publish()?;
        Ok(logins)
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, State> {
        let mut state = self.state.lock();
        let now = Instant::now();
        state.sessions.retain(|_, s| s.until > now);
        state
    }

    /// The link that logs a browser in, once.
    pub fn link(&self) -> String {
        format!("{}/login/{}", self.base, self.lock().secret)
    }

    /// Each new link as the one before it is used.
    pub fn links(&self) -> tokio::sync::watch::Receiver<String> {
        self.links.subscribe()
    }

    /// Write the current link to the login file, readable by its owner only.
    fn publish(&self) -> Result<(), StoreError> {
        let Some(path) = &self.file else {
            return Ok(());
        };
        let link = self.link();
        write_private(path, &format!("{link}\n")).map_err(|source| StoreError::File {
            context: format!("[approval] login_file {}", path.display()),
            source,
        })
    }

    /// Spend `secret`: a new session (its id and anti-forgery token), and a
    /// fresh link in its place. `None` when the secret is not the current one.
    pub fn log_in(&self, secret: &str) -> Option<String> {
        let session = {
            let mut state = self.lock();
            if !same(secret, &state.secret) {
                return None;
            }
            state.secret = new_nonce();
            Self::open(&mut state, LINK_PERSON.to_owned(), false, SESSION)
        };
        let link = self.link();
        self.links.send_replace(link.clone());
        match self.publish() {
            Ok(()) => {
                tracing::info!("approval page: the login link was used; the next one is {link}")
            }
            Err(e) => {
                tracing::warn!(error = %toolgate_protocol::error::with_causes(&e), "approval page: the next login link is {link}")
            }
        }
        Some(session)
    }

    fn open(state: &mut State, who: String, verified: bool, lasts: Duration) -> String {
        let id = new_nonce();
        let session = Session {
            token: new_nonce(),
            who,
            verified,
            until: Instant::now() + lasts.min(SESSION),
        };
        state.sessions.insert(id.clone(), session);
        id
    }

    /// A session for `who` (an operator whose token was verified), lasting
    /// `lasts` at most; its id.
    pub fn log_in_as(&self, who: String, lasts: Duration) -> String {
        Self::open(&mut self.lock(), who, true, lasts)
    }

    /// The verified subject of the session the request's cookie names:
    /// `None` for one opened by the login link, which names no one.
    pub fn subject(&self, headers: &HeaderMap) -> Option<String> {
        self.find(headers, |s| s.verified.then(|| s.who.clone()))
            .flatten()
    }

    /// The anti-forgery token of the session the request's cookie names.
    pub fn session(&self, headers: &HeaderMap) -> Option<String> {
        self.find(headers, |s| s.token.clone())
    }

    /// Who the session the request's cookie names is.
    pub fn who(&self, headers: &HeaderMap) -> Option<String> {
        self.find(headers, |s| s.who.clone())
    }

    fn find<T>(&self, headers: &HeaderMap, take: impl Fn(&Session) -> T) -> Option<T> {
        let state = self.lock();
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .filter(|(name, _)| *name == COOKIE)
            .find_map(|(_, id)| {
                state
                    .sessions
                    .iter()
                    .find(|(known, _)| same(known, id))
                    .map(|(_, s)| take(s))
            })
    }

    /// Where the link is written, for messages.
    pub fn file(&self) -> Option<&std::path::Path> {
        self.file.as_deref()
    }
}

/// Write `text` to `path`, readable and writable by its owner only.
fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    // An existing file keeps its mode on open: narrow it.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    file.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cookie(id: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            format!("other=1; {COOKIE}={id}").parse().unwrap(),
        );
        h
    }

    #[test]
    fn a_link_logs_in_once_and_a_fresh_one_replaces_it_in_the_private_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("login");
        let logins = Logins::new("http://127.0.0.1:9", Some(file.clone())).unwrap();
        let first = logins.link();
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            format!("{first}\n")
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let secret = first.rsplit('/').next().unwrap().to_owned();
        assert_eq!(logins.log_in("0".repeat(32).as_str()), None);
        let id = logins.log_in(&secret).unwrap();
        assert_eq!(logins.log_in(&secret), None, "spent");
        let second = logins.link();
        assert_ne!(first, second);
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            format!("{second}\n")
        );
        let token = logins.session(&cookie(&id)).unwrap();
        assert_eq!(token.len(), 32);
        assert_eq!(logins.session(&cookie("forged")), None);
        assert_eq!(logins.session(&HeaderMap::new()), None);
    }
}
