//! Running the `toolgate` binary in tests, and an upstream for it to front.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::Path;
use std::process::Stdio;

use schemars::JsonSchema;
use serde::Deserialize;
use tokio::io::AsyncBufReadExt as _;
use tokio::net::TcpListener;
use toolgate_server::transport::http::{HttpConfig, serve_listener};
use toolgate_server::{Server, ToolDef};

/// What a run of `toolgate` did.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Run `toolgate ARGS` in `dir` with `envs` added, no stdin.
pub async fn toolgate_in(dir: &Path, args: &[&str], envs: &[(&str, &str)]) -> Run {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .envs(envs.iter().copied())
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[derive(Deserialize, JsonSchema)]
struct Numbered {
    /// Which call this is.
    n: u64,
}

/// An upstream over HTTP whose one tool, `echo`, returns the number `n` it
/// is given; its endpoint URL.
pub async fn echo_upstream() -> String {
    counting_upstream(std::sync::Arc::default()).await
}

/// [`echo_upstream`], counting in `seen` the calls that reach it.
pub async fn counting_upstream(seen: std::sync::Arc<std::sync::atomic::AtomicUsize>) -> String {
    let server = Server::builder("up", "1")
        .tool(
            ToolDef::new("echo")
                .description("Returns its number.")
                .read_only()
                .handler(move |args: Numbered| {
                    let seen = seen.clone();
                    async move {
                        seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        Ok(args.n.to_string())
                    }
                }),
        )
        .build()
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(serve_listener(server, HttpConfig::default(), listener));
    url
}

/// A running `toolgate serve --http`, killed when dropped.
pub struct Serving {
    pub child: tokio::process::Child,
    /// Its MCP endpoint.
    pub url: String,
    /// Its `/metrics` address, when `--metrics` was given.
    pub metrics: Option<String>,
}

/// Start `toolgate serve --http 127.0.0.1:0 ARGS` in `dir` and wait until
/// it says where it serves. The rest of its stderr is read away, so that
/// it never blocks on a full pipe.
pub async fn serve_in(dir: &Path, args: &[&str]) -> Serving {
    serve_in_telling(dir, args).await.0
}

/// [`serve_in`], and the lines it writes to stderr after it said where it
/// serves.
pub async fn serve_in_telling(
    dir: &Path,
    args: &[&str],
) -> (Serving, tokio::sync::mpsc::UnboundedReceiver<String>) {
    serve_in_env(dir, args, &[]).await
}

/// [`serve_in_telling`], with `envs` added to the gateway's environment.
pub async fn serve_in_env(
    dir: &Path,
    args: &[&str],
    envs: &[(&str, &str)],
) -> (Serving, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["serve", "--http", "127.0.0.1:0"])
        .args(args)
        .envs(envs.iter().copied())
        .current_dir(dir)
        .env("RUST_LOG", "error")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let (mut url, mut metrics) = (None, None);
    while let Some(line) = lines.next_line().await.unwrap() {
        let at = line.split(" at ").nth(1).map(|a| a.trim().to_owned());
        if line.contains("metrics at") {
            metrics = at;
        } else if line.contains("serving") {
            url = at;
            break;
        }
    }
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = tx.send(line);
        }
    });
    let serving = Serving {
        child,
        url: url.expect("the gateway says where it serves"),
        metrics,
    };
    (serving, rx)
}

/// The whole response (status line, headers, body) to a plain HTTP/1.1 GET
/// of `url` (`http://HOST:PORT/PATH`).
pub async fn http_get(url: &str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let rest = url.strip_prefix("http://").unwrap_or(url);
    let (host, path) = rest.split_once('/').unwrap();
    let mut stream = tokio::net::TcpStream::connect(host).await.unwrap();
    stream
        .write_all(
            format!("GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
}
