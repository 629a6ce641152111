//! `toolgate login` and `toolgate logout`, and the kept credentials that
//! every URL target uses.
//!
//! Login runs the authorization-code flow with a loopback redirect
//! (RFC 8252): a listener on 127.0.0.1 receives the browser's redirect.
//! Tokens are kept per server in `credentials.json` under the user's config
//! directory (mode 0600), or where `TOOLGATE_CREDENTIALS` says; `tools`,
//! `call`, `audit`, `lock` and `verify` use them (and refresh them), and
//! say when a server needs `toolgate login` first.

use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use toolgate_client::auth::{
    ClientCredentials, FileTokenStore, OAuth, Secret, TokenStore as _, UserAgent,
};
use toolgate_client::{BoxFuture, ClientError};

use crate::target::{self, Reach};
use crate::{errln, exit, outln, term};

/// The client name shown to people at registration.
const CLIENT_NAME: &str = "toolgate";
/// The longest request the loopback listener reads.
const MAX_REQUEST: usize = 8 * 1024;

/// What `toolgate login` was given.
pub struct LoginArgs {
    /// The server.
    pub target: String,
    /// A pre-registered client id (else the server's registration).
    pub client_id: Option<String>,
    /// Its secret.
    pub client_secret: Option<String>,
    /// This client's Client ID Metadata Document URL.
    pub client_metadata_url: Option<String>,
    /// Print the URL only.
    pub no_browser: bool,
    /// How long to wait for the person.
    pub wait: Duration,
}

/// The credentials file.
pub fn store_path() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("TOOLGATE_CREDENTIALS").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    FileTokenStore::default_path().ok_or_else(|| {
        exit::fail(
            exit::USAGE,
            "no place for credentials: set HOME, XDG_CONFIG_HOME or TOOLGATE_CREDENTIALS",
        )
    })
}

/// OAuth over the kept credentials, for commands that must not ask anyone:
/// a server that needs a person answers with "run toolgate login".
pub fn kept() -> Option<OAuth> {
    let path = store_path().ok()?;
    Some(
        OAuth::builder(CLIENT_NAME)
            .store(Arc::new(FileTokenStore::new(path)))
            .build(),
    )
}

/// The URL of `target` (a URL, address, or config name of an HTTP server).
fn url_of(target: &str, reach: &Reach) -> anyhow::Result<String> {
    let resolved = target::resolve(Some(target), &[], reach)?;
    resolved.url().map(str::to_owned).ok_or_else(|| {
        exit::fail(
            exit::USAGE,
            format!("{target:?} is not an HTTP server: only those use OAuth"),
        )
    })
}

/// `toolgate login`.
pub async fn login(args: LoginArgs, reach: &Reach) -> anyhow::Result<u8> {
    let url = url_of(&args.target, reach)?;
    let path = store_path()?;
    let agent = Loopback::bind(!args.no_browser, args.wait).await?;
    let mut builder = OAuth::builder(CLIENT_NAME)
        .store(Arc::new(FileTokenStore::new(path.clone())))
        .user_agent(Arc::new(agent));
    if let Some(id) = args.client_id {
        builder = builder.credentials(ClientCredentials {
            client_secret: args.client_secret.map(Secret::new),
            ..ClientCredentials::public(id)
        });
    }
    if let Some(cimd) = args.client_metadata_url {
        builder = builder.client_metadata_url(cimd);
    }
    builder
        .build()
        .login(&url)
        .await
        .with_context(|| format!("logging in to {}", toolgate_protocol::redact::url(&url)))?;
    outln!(
        "Logged in to {}; the tokens are kept in {}",
        toolgate_protocol::redact::url(&url),
        path.display()
    );
    Ok(exit::OK)
}

/// `toolgate logout`.
pub fn logout(target: &str, reach: &Reach) -> anyhow::Result<u8> {
    let url = url_of(target, reach)?;
    let path = store_path()?;
    let had = FileTokenStore::new(path)
        .remove(&url)
        .with_context(|| format!("forgetting {}", toolgate_protocol::redact::url(&url)))?;
    let shown = toolgate_protocol::redact::url(&url);
    if had {
        outln!("Logged out of {shown}: its tokens are forgotten");
    } else {
        outln!("Nothing was kept for {shown}");
    }
    Ok(exit::OK)
}

/// The browser side of login: shows the authorization URL and waits on a
/// loopback listener for the redirect.
struct Loopback {
    listener: Mutex<Option<TcpListener>>,
    port: u16,
    open: bool,
    wait: Duration,
}

impl Loopback {
    async fn bind(open: bool, wait: Duration) -> anyhow::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("cannot listen on 127.0.0.1 for the browser's redirect")?;
        let port = listener.local_addr()?.port();
        Ok(Self {
            listener: Mutex::new(Some(listener)),
            port,
            open,
            wait,
        })
    }

    /// Read one request from `stream`; its target if it is the callback.
    async fn callback(stream: &mut tokio::net::TcpStream) -> Option<String> {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 1024];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < MAX_REQUEST {
            let n = stream.read(&mut chunk).await.ok()?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let head = String::from_utf8_lossy(&buf);
        let mut line = head.lines().next()?.split(' ');
        let (method, target) = (line.next()?, line.next()?);
        (method == "GET" && target.starts_with("/callback")).then(|| target.to_owned())
    }
}

fn open_browser(url: &str) {
    let program = if cfg!(target_os = "macos") {
        "open"
    } else if std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some()
    {
        "xdg-open"
    } else {
        return;
    };
    let _ = std::process::Command::new(program)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}

const DONE_PAGE: &str =
    "<!doctype html><title>toolgate</title><p>toolgate is authorized. You can close this tab.</p>";

impl UserAgent for Loopback {
    fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }

    fn authorize(&self, url: String) -> BoxFuture<'_, Result<String, ClientError>> {
        Box::pin(async move {
            let listener =
                self.listener.lock().take().ok_or_else(|| {
                    ClientError::Authorization("one authorization per login".into())
                })?;
            errln!("toolgate: open this page to authorize toolgate:");
            errln!("  {}", term::one_line(&url));
            if self.open {
                open_browser(&url);
            }
            let wait = async {
                loop {
                    let Ok((mut stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let read =
                        tokio::time::timeout(Duration::from_secs(10), Self::callback(&mut stream));
                    match read.await {
                        Ok(Some(target)) => {
                            let response = format!(
                                "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{DONE_PAGE}",
                                DONE_PAGE.len()
                            );
                            let _ = stream.write_all(response.as_bytes()).await;
                            return format!("http://127.0.0.1:{}{target}", self.port);
                        }
                        _ => {
                            let _ = stream
                                .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                                .await;
                        }
                    }
                }
            };
            tokio::time::timeout(self.wait, wait).await.map_err(|_| {
                ClientError::Authorization(format!(
                    "nobody completed the authorization within {}s",
                    self.wait.as_secs()
                ))
            })
        })
    }
}

/// The options of `toolgate login`.
#[derive(clap::Args)]
pub struct LoginCommand {
    /// A URL, HOST:PORT, or a server name from the config file.
    pub target: String,
    /// A client id registered with the authorization server beforehand.
    #[arg(long)]
    pub client_id: Option<String>,
    /// The HTTPS URL of toolgate's Client ID Metadata Document, where
    /// the authorization server supports them.
    #[arg(long, value_name = "URL")]
    pub client_metadata_url: Option<String>,
    /// Print the authorization URL instead of opening a browser.
    #[arg(long)]
    pub no_browser: bool,
    /// Seconds to wait for the authorization to complete.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub wait: u64,
    /// An mcpServers config file, for server names.
    #[arg(long, value_name = "FILE", default_value = "mcp.json")]
    pub config: PathBuf,
}

/// `toolgate login`, as the command line gave it.
pub async fn login_command(command: LoginCommand) -> anyhow::Result<u8> {
    let LoginCommand {
        target,
        client_id,
        client_metadata_url,
        no_browser,
        wait,
        config,
    } = command;
    let args = LoginArgs {
        target,
        client_id,
        client_secret: std::env::var("TOOLGATE_CLIENT_SECRET")
            .ok()
            .filter(|s| !s.is_empty()),
        client_metadata_url,
        no_browser,
        wait: std::time::Duration::from_secs(wait.max(1)),
    };
    login(args, &crate::args::config_only(config)).await
}

/// The options of `toolgate logout`.
#[derive(clap::Args)]
pub struct LogoutCommand {
    /// A URL, HOST:PORT, or a server name from the config file.
    pub target: String,
    /// An mcpServers config file, for server names.
    #[arg(long, value_name = "FILE", default_value = "mcp.json")]
    pub config: PathBuf,
}

/// `toolgate logout`, as the command line gave it.
pub async fn logout_command(command: LogoutCommand) -> anyhow::Result<u8> {
    let LogoutCommand { target, config } = command;
    logout(&target, &crate::args::config_only(config))
}
