//! `toolgate serve` reloads its configuration on SIGHUP and, with
//! `--watch`, when the file changes; a file that does not load keeps the
//! running configuration.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::{echo_upstream, serve_in_telling};
use toolgate_client::Client;
use toolgate_client::transport::http::{HttpOptions, HttpTransport};

/// The next line the gateway writes that mentions reloading.
async fn next_reload(lines: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> String {
    let wait = async {
        while let Some(line) = lines.recv().await {
            if line.contains("reloaded") {
                return line;
            }
        }
        panic!("the gateway ended without reloading");
    };
    tokio::time::timeout(std::time::Duration::from_secs(20), wait)
        .await
        .expect("a reload within 20 s")
}

async fn tool_names(url: &str) -> Vec<String> {
    let c =
        Client::builder("t", "1").build(HttpTransport::new(url, HttpOptions::default()).unwrap());
    c.list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn sighup_and_a_changed_file_reload_and_a_broken_file_keeps_the_running_one() {
    let (one, two) = (echo_upstream().await, echo_upstream().await);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("toolgate.toml");
    let policy = "[policy]\ndefault = \"allow\"\n";
    std::fs::write(&file, format!("[servers.one]\nurl = \"{one}\"\n{policy}")).unwrap();
    let (serving, mut lines) = serve_in_telling(dir.path(), &["--watch"]).await;
    assert_eq!(tool_names(&serving.url).await, ["one.echo"]);

    // SIGHUP after the file gained a server.
    std::fs::write(
        &file,
        format!("[servers.one]\nurl = \"{one}\"\n[servers.two]\nurl = \"{two}\"\n{policy}"),
    )
    .unwrap();
    let pid = serving.child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let said = next_reload(&mut lines).await;
    assert!(said.contains("added two"), "{said}");
    assert_eq!(tool_names(&serving.url).await, ["one.echo", "two.echo"]);

    // A broken file: the running configuration stays, and the log says why.
    std::fs::write(&file, "[servers.one]\nurll = \"x\"\n").unwrap();
    let said = next_reload(&mut lines).await;
    assert!(
        said.contains("not reloaded, the running configuration stays") && said.contains("urll"),
        "{said}"
    );
    assert_eq!(tool_names(&serving.url).await, ["one.echo", "two.echo"]);

    // --watch: the file fixed, without a signal.
    std::fs::write(&file, format!("[servers.two]\nurl = \"{two}\"\n{policy}")).unwrap();
    let said = next_reload(&mut lines).await;
    assert!(said.contains("removed one"), "{said}");
    assert_eq!(tool_names(&serving.url).await, ["two.echo"]);
}
