//! The official Python SDK's client against two endpoints of one `toolgate
//! serve` (`interop/py-client-endpoints.py`), over the Python SDK server of
//! `interop/py-server.py`.

use std::process::{Command, Stdio};

use anyhow::Context as _;

use crate::root;
use crate::support::{ScratchDir, free_port, start_quiet};

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
    let _server = start_quiet(
        Command::new(python)
            .arg(root().join("interop/py-server.py"))
            .args(["--http", &upstream.to_string()])
            .env("PATH", path),
        upstream,
        "py-server.py --http",
    )?;
    let dir = ScratchDir::new("toolgate-interop-endpoints")?;
    let file = dir.path().join("toolgate.toml");
    std::fs::write(&file, config(upstream))?;
    let port = free_port()?;
    let _gateway = serve(&file, port, path)?;
    client(
        python,
        "interop/py-client-endpoints.py",
        &format!("http://127.0.0.1:{port}"),
        path,
        label,
        failures,
    )
}

/// `toolgate serve --config file --http 127.0.0.1:port`, until dropped.
pub(crate) fn serve(
    file: &std::path::Path,
    port: u16,
    path: &str,
) -> anyhow::Result<crate::support::ChildGuard> {
    start_quiet(
        Command::new(crate::built("debug", "toolgate"))
            .arg("serve")
            .arg("--config")
            .arg(file)
            .args(["--http", &format!("127.0.0.1:{port}")])
            .env("PATH", path),
        port,
        "toolgate serve",
    )
}

/// Run the Python client `script` with `arg`, its lines echoed; a failure
/// is pushed onto `failures` under `label`.
pub(crate) fn client(
    python: &str,
    script: &str,
    arg: &str,
    path: &str,
    label: &str,
    failures: &mut Vec<String>,
) -> anyhow::Result<()> {
    let out = Command::new(python)
        .arg(root().join(script))
        .arg(arg)
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
    let ok = out.status.success();
    eprintln!("{} {label}", if ok { "ok  " } else { "FAIL" });
    if !ok {
        failures.push(format!("{label}:\n{said}"));
    }
    Ok(())
}
