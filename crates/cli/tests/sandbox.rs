//! Sandboxed stdio upstreams, end to end: `toolgate serve` starts a hostile
//! server (testdata/sandbox/hostile.py) through its launcher, and every
//! escape the server tries fails while its well-behaved tool keeps
//! answering; the caps end it as the upstream's failure; a sandbox the
//! kernel cannot hold is refused unless best-effort is asked for.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::ErrorKind;
use std::net::{TcpListener, UdpSocket};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use toolgate_client::transport::http::{HttpOptions, HttpTransport};
use toolgate_client::{CallOptions, Client};
use toolgate_gateway::store::calllog::logged::query;
use toolgate_gateway::store::sqlite::Filter;

use support::{http_get as get, serve_in_env, toolgate_in};

/// The real interpreter (not a pyenv shim): the profile must find its
/// install, wherever it is.
fn python() -> String {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import os, sys; print(os.path.realpath(sys.executable))",
        ])
        .output()
        .expect("python3 is installed");
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

fn hostile_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/sandbox/hostile.py")
}

/// A scratch world: a home with a secret, an allowed directory with a
/// symlink to the secret planted in it, and a config for the server.
struct World {
    dir: tempfile::TempDir,
    secret: PathBuf,
    allowed: PathBuf,
    outside: PathBuf,
}

const SECRET: &str = "TOPSECRET-sandbox-canary-7c1f";

fn world(sandbox: &str) -> World {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    let secret = home.join(".ssh/id_ed25519");
    std::fs::write(&secret, SECRET).unwrap();
    let allowed = dir.path().join("allowed");
    std::fs::create_dir(&allowed).unwrap();
    std::os::unix::fs::symlink(&secret, allowed.join("planted")).unwrap();
    let config = format!(
        "[servers.h]\ncommand = {:?}\nargs = [{:?}]\nenv = {{ HOME = {:?} }}\nsandbox = {sandbox}\n\
         [policy]\ndefault = \"allow\"\n[audit]\narguments = true\n",
        python(),
        hostile_script()
            .canonicalize()
            .unwrap()
            .display()
            .to_string(),
        home.display().to_string(),
    )
    .replace("ALLOWED", &allowed.display().to_string());
    std::fs::write(dir.path().join("toolgate.toml"), config).unwrap();
    World {
        outside: dir.path().join("outside.txt"),
        dir,
        secret,
        allowed,
    }
}

async fn connect(url: &str) -> Client {
    let client =
        Client::builder("t", "1").build(HttpTransport::new(url, HttpOptions::default()).unwrap());
    client.list_tools().await.unwrap();
    client
}

/// Call `h.attempt`: whether it was blocked, and what it said.
async fn attempt(client: &Client, what: &str, target: &str) -> (bool, String) {
    let args = json!({ "what": what, "target": target });
    let result = client
        .call_tool(
            "h.attempt",
            args.as_object().unwrap().clone(),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    let text = result.content[0].as_text().unwrap().to_owned();
    let report: Value = serde_json::from_str(&text).unwrap();
    (
        report["blocked"].as_bool().unwrap(),
        report["detail"].as_str().unwrap().to_owned(),
    )
}

async fn echo(client: &Client) -> String {
    let args = json!({ "text": "still here" });
    let result = client
        .call_tool(
            "h.echo",
            args.as_object().unwrap().clone(),
            &CallOptions::default(),
        )
        .await
        .unwrap();
    result.content[0].as_text().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_server_in_the_strict_profile_reaches_nothing_outside_it() {
    let w = world(
        "{ profile = \"strict\", write = [\"ALLOWED\"], processes = 32, memory = \"64 MiB\" }",
    );
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    // What the gateway's environment holds (a state key, a credential)
    // must not be readable through /proc.
    let marker = "TOOLGATE-ENV-CANARY-91d2";
    let (gateway, _lines) = serve_in_env(
        w.dir.path(),
        &[],
        &[("TOOLGATE_TEST_CREDENTIAL", marker), ("RUST_LOG", "error")],
    )
    .await;
    let client = connect(&gateway.url).await;
    let (secret, allowed, outside) = (
        w.secret.display().to_string(),
        w.allowed.display().to_string(),
        w.outside.display().to_string(),
    );
    let attempts = [
        ("read", secret.clone()),
        ("write", outside.clone()),
        ("tcp", tcp.local_addr().unwrap().to_string()),
        ("udp", udp.local_addr().unwrap().to_string()),
        ("shell", format!("{secret}|{outside}")),
        ("fork", "200".to_owned()),
        ("memory", "256".to_owned()),
        ("environ", marker.to_owned()),
        ("read", format!("/proc/self/root{secret}")),
        ("read", format!("/proc/1/root{secret}")),
        ("read", format!("{allowed}/planted")),
        ("symlink", format!("{secret}|{allowed}/made-link")),
        ("link", format!("{secret}|{allowed}/hard-link")),
        ("read", "/etc/shadow".to_owned()),
    ];
    for (what, target) in attempts {
        let (blocked, detail) = attempt(&client, what, &target).await;
        assert!(blocked, "{what} {target} got through: {detail}");
        assert!(
            !detail.contains(SECRET) && !detail.contains(marker),
            "{what} {target} read a secret: {detail}"
        );
        // The server's well-behaved tool keeps answering.
        assert_eq!(echo(&client).await, "still here", "after {what}");
    }
    // The canaries saw nothing, and nothing was written outside.
    assert_eq!(
        tcp.accept().map(|_| ()).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    let mut buf = [0u8; 16];
    assert_eq!(
        udp.recv_from(&mut buf).map(|_| ()).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    assert!(!w.outside.exists());
    // What it may do, it can: write its directory.
    let (blocked, detail) = attempt(&client, "write", &format!("{allowed}/notes.txt")).await;
    assert!(!blocked, "{detail}");
    assert_eq!(
        std::fs::read_to_string(w.allowed.join("notes.txt")).unwrap(),
        "escaped"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_network_is_what_the_sandbox_names() {
    let allowed_port = TcpListener::bind("127.0.0.1:0").unwrap();
    let other_port = TcpListener::bind("127.0.0.1:0").unwrap();
    other_port.set_nonblocking(true).unwrap();
    let allowed = allowed_port.local_addr().unwrap().to_string();
    let other = other_port.local_addr().unwrap().to_string();

    // TCP to listed ports only (the host network, Landlock per port).
    let w = world(&format!("{{ network = [{allowed:?}] }}"));
    let (gateway, _lines) = serve_in_env(w.dir.path(), &[], &[]).await;
    let client = connect(&gateway.url).await;
    let (blocked, detail) = attempt(&client, "tcp", &allowed).await;
    assert!(!blocked, "the listed port was refused: {detail}");
    let (blocked, detail) = attempt(&client, "tcp", &other).await;
    assert!(blocked, "an unlisted port was reached: {detail}");
    assert_eq!(
        other_port.accept().map(|_| ()).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
    drop(gateway);

    // Its own loopback: it talks to itself, never to the host's.
    let w = world("{ network = \"loopback\" }");
    let (gateway, _lines) = serve_in_env(w.dir.path(), &[], &[]).await;
    let client = connect(&gateway.url).await;
    let (blocked, detail) = attempt(&client, "selfloop", "").await;
    assert!(!blocked, "its own loopback failed: {detail}");
    let (blocked, detail) = attempt(&client, "tcp", &other).await;
    assert!(blocked, "the host's loopback was reached: {detail}");
    assert_eq!(
        other_port.accept().map(|_| ()).unwrap_err().kind(),
        ErrorKind::WouldBlock
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_past_its_cpu_time_fails_as_the_upstream_and_comes_back() {
    let w = world("{ profile = \"strict\", cpu_seconds = 1 }");
    let (gateway, _lines) = serve_in_env(w.dir.path(), &["--metrics", "127.0.0.1:0"], &[]).await;
    let client = connect(&gateway.url).await;
    let burned = client
        .call_tool("h.burn", serde_json::Map::new(), &CallOptions::default())
        .await;
    let said = match burned {
        Ok(result) => {
            assert_eq!(result.is_error, Some(true));
            result.content[0].as_text().unwrap().to_owned()
        }
        Err(e) => e.to_string(),
    };
    assert!(!said.contains("still alive"), "{said}");
    // The audit store records the upstream's failure.
    let rows = query(&w.dir.path().join("toolgate-audit.db"), &Filter::default()).unwrap();
    let burn = rows
        .iter()
        .find(|r| r.tool == "h.burn")
        .expect("a row for burn");
    assert_eq!(burn.status, "upstream_error");
    // /status shows why, in the sandbox's words.
    let metrics = gateway.metrics.as_ref().unwrap();
    let status = get(&metrics.replace("/metrics", "/status")).await;
    assert!(
        status.contains("cpu_seconds = 1"),
        "status does not say why: {status}"
    );
    // The gateway starts it again by itself (after its backoff).
    let ready = gateway.url.replace("/mcp", "/readyz");
    tokio::time::timeout(std::time::Duration::from_secs(20), async {
        while !get(&ready).await.starts_with("HTTP/1.1 200") {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the upstream is back");
    assert_eq!(echo(&client).await, "still here");
}

/// A sandbox this kernel cannot hold (TOOLGATE_SANDBOX_ABI caps the ABI
/// the launcher uses): refused in full under "enforce", started under
/// "best-effort" with each missing rule said.
#[tokio::test(flavor = "multi_thread")]
async fn a_sandbox_the_kernel_cannot_hold_is_refused_unless_best_effort() {
    let w = world("\"strict\"");
    let run = toolgate_in(
        w.dir.path(),
        &["serve", "--check"],
        &[("TOOLGATE_SANDBOX_ABI", "3")],
    )
    .await;
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(
        run.stdout
            .contains("NOT STARTED (sandbox_mode = \"enforce\"): not enforced here"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("TCP connect and bind rules"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("sandbox_mode = \\\"best-effort\\\"")
            || run.stdout.contains("best-effort"),
        "{}",
        run.stdout
    );

    let config = std::fs::read_to_string(w.dir.path().join("toolgate.toml")).unwrap();
    std::fs::write(
        w.dir.path().join("toolgate.toml"),
        config.replace(
            "sandbox = \"strict\"",
            "sandbox = \"strict\"\nsandbox_mode = \"best-effort\"",
        ),
    )
    .unwrap();
    let run = toolgate_in(
        w.dir.path(),
        &["serve", "--check"],
        &[("TOOLGATE_SANDBOX_ABI", "3")],
    )
    .await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("started best-effort; not enforced here"),
        "{}",
        run.stdout
    );
    // Without the cap, this kernel holds all of it.
    let run = toolgate_in(w.dir.path(), &["serve", "--check"], &[]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("enforced in full"), "{}", run.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn sandbox_check_says_what_this_machine_enforces() {
    let dir = tempfile::tempdir().unwrap();
    let run = toolgate_in(dir.path(), &["sandbox", "check", "--json"], &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let support: Value = serde_json::from_str(&run.stdout).unwrap();
    // This project's machines: Landlock ABI 6 or later, and namespaces.
    assert!(support["landlock_abi"].as_u64().unwrap() >= 6, "{support}");
    assert_eq!(support["pid_namespace"], true);
    let run = toolgate_in(
        dir.path(),
        &["sandbox", "check"],
        &[("TOOLGATE_SANDBOX_ABI", "2")],
    )
    .await;
    assert_eq!(run.code, 1);
    assert!(
        run.stdout.contains("no  Landlock ABI 2 (the rules need 6)"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("truncating files"), "{}", run.stdout);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_path_the_sandbox_names_must_exist() {
    let w = world("{ write = [\"/nonexistent/toolgate-sandbox-test\"] }");
    let run = toolgate_in(w.dir.path(), &["serve", "--check"], &[]).await;
    assert_ne!(run.code, 0);
    assert!(
        run.stdout.contains(
            "sandbox path /nonexistent/toolgate-sandbox-test does not exist: create it, or remove it from the sandbox"
        ),
        "{}",
        run.stdout
    );
}

/// A user who is not root gets the same sandbox, through a user namespace:
/// its own PID namespace, the files denied, the process cap (then
/// `RLIMIT_NPROC`, counted in that namespace). Run as `nobody` when the
/// tests run as root.
#[tokio::test(flavor = "multi_thread")]
async fn a_user_who_is_not_root_gets_the_sandbox_through_a_user_namespace() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let secret = dir.path().join("secret");
    std::fs::write(&secret, SECRET).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o644)).unwrap();
    let launcher = dir.path().join("toolgate");
    std::fs::copy(env!("CARGO_BIN_EXE_toolgate"), &launcher).unwrap();
    let policy = json!({
        "profile": "strict",
        "read": ["/usr", "/bin", "/lib", "/lib64", "/etc/ld.so.cache", launcher],
        "write": ["/dev/null"],
        "network": "none",
        "processes": 8,
        "memory": null,
        "cpu_seconds": null,
        "mode": "enforce",
        "private_tmp": true
    });
    let script = format!(
        "echo pid=$$; cat {} || echo denied; for i in 1 2 3 4 5 6 7 8 9 10 11 12; do sleep 5 & done; echo forked",
        secret.display()
    );
    let root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    let mut command = if root {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&launcher);
        c
    } else {
        std::process::Command::new(&launcher)
    };
    let out = command
        .args(["sandbox", "exec", "--policy", &policy.to_string(), "--"])
        .args(["/bin/sh", "-c", &script])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("TMPDIR", dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("pid=2"),
        "not in a PID namespace: {stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("denied") && !stdout.contains(SECRET),
        "{stdout}"
    );
    assert!(
        stderr.contains("Cannot fork"),
        "the process cap did not hold: {stdout}\n{stderr}"
    );
}
