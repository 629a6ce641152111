//! The official Python SDK's client against two endpoints of one `toolgate
//! serve` (`interop/py-client-endpoints.py`), over the Python SDK server of
//! `interop/py-server.py`.

use std::net::SocketAddr;
use std::process::{Command, Stdio};

use anyhow::Context as _;

use crate::root;
use crate::support::{ChildGuard, free_port, wait_for};

/// The gateway's configuration: `calc` shapes `py.add` (fixed `b`, a
/// description added), `plain` allows what the file denies.
fn config(upstream: u16) -> String {
    format!(
        r#"[servers.py]
url = "http://127.0.0.1:{upstream}/mcp"
prefix = "py"

[policy]
default = "allow"
[[policy.rules]]
tools = ["py.fail"]
action = "deny"

[audit]
disabled = true

[endpoints.calc]
tools = ["py.add"]
instructions = "Arithmetic, with ten added."
[endpoints.calc.shape."py.add"]
name = "add_ten"
description_append = "Adds ten to it."
fixed = {{ b = 10 }}

[endpoints.plain]
servers = ["py"]
[[endpoints.plain.policy.rules]]
tools = ["py.fail"]
action = "allow"
"#
    )
}

/// Run the check; a failure is pushed onto `failures`.
pub fn check(python: &str, path: &str, failures: &mut Vec<String>) -> anyhow::Result<()> {
    let label = "Python SDK client -> toolgate serve endpoints";
    let upstream = free_port()?;
    let server = Command::new(python)
        .arg(root().join("interop/py-server.py"))
        .args(["--http", &upstream.to_string()])
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting py-server.py --http")?;
    let _server = ChildGuard(server);
    wait_for(SocketAddr::from(([127, 0, 0, 1], upstream)), "py-server.py")?;
    let dir =
        std::env::temp_dir().join(format!("toolgate-interop-endpoints-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("toolgate.toml");
    std::fs::write(&file, config(upstream))?;
    let port = free_port()?;
    let gateway = Command::new(root().join("target/debug/toolgate"))
        .arg("serve")
        .arg("--config")
        .arg(&file)
        .args(["--http", &format!("127.0.0.1:{port}")])
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting toolgate serve")?;
    let _gateway = ChildGuard(gateway);
    wait_for(SocketAddr::from(([127, 0, 0, 1], port)), "toolgate serve")?;
    let out = Command::new(python)
        .arg(root().join("interop/py-client-endpoints.py"))
        .arg(format!("http://127.0.0.1:{port}"))
        .env("PATH", path)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {label}"))?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for line in said.lines() {
        eprintln!("     {line}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    let ok = out.status.success();
    eprintln!("{} {label}", if ok { "ok  " } else { "FAIL" });
    if !ok {
        failures.push(format!("{label}:\n{said}"));
    }
    Ok(())
}
