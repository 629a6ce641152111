//! Headless Chromium over WebDriver, for the browser tests: ChromeDriver on
//! a free port, a browser with a fresh profile, and screenshots kept under
//! `target/browser-artifacts/`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;

use fantoccini::Client;
use serde_json::json;
use tokio::io::AsyncBufReadExt as _;

/// ChromeDriver and the browser it drives; both end when this is dropped.
pub struct Browser {
    pub client: Client,
    _driver: tokio::process::Child,
    _profile: tempfile::TempDir,
}

/// `chromedriver` on a free port, once it says it is listening.
async fn chromedriver() -> (tokio::process::Child, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let program = std::env::var("TOOLGATE_CHROMEDRIVER").unwrap_or("chromedriver".into());
    let mut driver = tokio::process::Command::new(program)
        .arg(format!("--port={port}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("chromedriver (Debian: chromium-driver; `cargo xtask browser` installs it)");
    let mut lines = tokio::io::BufReader::new(driver.stdout.take().unwrap()).lines();
    while let Some(line) = lines.next_line().await.unwrap() {
        if line.contains("started successfully") {
            break;
        }
    }
    // The rest of its output is not read; keep the pipe from filling.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (driver, port)
}

/// Headless Chromium, `width` × `height`, with a profile of its own.
pub async fn chromium(width: u32, height: u32) -> Browser {
    let (driver, port) = chromedriver().await;
    let profile = tempfile::tempdir().unwrap();
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": std::env::var("TOOLGATE_CHROMIUM").unwrap_or("/usr/bin/chromium".into()),
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-quic", format!("--window-size={width},{height}"),
                format!("--user-data-dir={}", profile.path().display()),
            ]
        }),
    );
    // fantoccini's rustls needs a process-wide provider: toolgate's own.
    toolgate_client::install_default_tls_provider();
    let client = fantoccini::ClientBuilder::rustls()
        .unwrap()
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .unwrap();
    Browser {
        client,
        _driver: driver,
        _profile: profile,
    }
}

/// Where screenshots go: `target/browser-artifacts/`.
pub fn artifacts() -> std::path::PathBuf {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/browser-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

impl Browser {
    /// Keep a screenshot of the page as `name.png`.
    pub async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.unwrap();
        assert!(png.starts_with(b"\x89PNG"));
        std::fs::write(artifacts().join(format!("{name}.png")), &png).unwrap();
    }

    /// Click the element `css` names, then wait for the element `xpath`
    /// names to appear (what the click leads to).
    pub async fn click_then(&self, css: &str, xpath: &str) -> fantoccini::elements::Element {
        self.client
            .find(fantoccini::Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css}: {e}"))
            .click()
            .await
            .unwrap();
        self.wait_for(xpath).await
    }

    /// Wait for the element `xpath` names to appear.
    pub async fn wait_for(&self, xpath: &str) -> fantoccini::elements::Element {
        match self
            .client
            .wait()
            .for_element(fantoccini::Locator::XPath(xpath))
            .await
        {
            Ok(element) => element,
            Err(e) => panic!("never saw {xpath} ({e}): {}", self.text().await),
        }
    }

    /// The page's visible text.
    pub async fn text(&self) -> String {
        self.client
            .find(fantoccini::Locator::Css("body"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}
