//! The official Python SDK's client against a searching endpoint
//! (`disclosure = "search"`) of one `toolgate serve` over the basket,
//! server-everything and server-filesystem (`interop/py-client-search.py`).

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::Context as _;

use crate::root;
use crate::support::{ScratchDir, free_port, start_quiet};

/// The gateway's configuration: one searching endpoint over three
/// servers, the basket's clock pinned, creating a basket confirmed.
fn config(basket: &str, bin: &Path, data: &Path) -> String {
    let everything = bin.join("mcp-server-everything").display().to_string();
    let filesystem = bin.join("mcp-server-filesystem").display().to_string();
    let data = data.display().to_string();
    format!(
        r#"[servers.basket]
command = "{basket}"
prefix = "basket"

[servers.everything]
command = "{everything}"
prefix = "everything"

[servers.fs]
command = "{filesystem}"
args = ["{data}"]
prefix = "fs"

[policy]
default = "allow"
[[policy.rules]]
tools = ["basket.create_basket"]
action = "confirm"

[audit]
disabled = true

[endpoints.found]
servers = ["basket", "everything", "fs"]
disclosure = "search"
pinned = ["basket.get_current_time"]
"#
    )
}

/// Run the check; a failure is pushed onto `failures`.
pub fn check(
    python: &str,
    node_bin: &Path,
    path: &str,
    failures: &mut Vec<String>,
) -> anyhow::Result<()> {
    let label = "Python SDK client -> toolgate serve, a searching endpoint";
    let bin = crate::interop::install_legacy(node_bin)?;
    let dir = ScratchDir::new("toolgate-interop-search")?;
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data)?;
    std::fs::write(data.join("hello.txt"), "hello\n")?;
    let file = dir.path().join("toolgate.toml");
    let basket = crate::built("debug", "basket").display().to_string();
    std::fs::write(&file, config(&basket, &bin, &data))?;
    let port = free_port()?;
    let _gateway = start_quiet(
        Command::new(crate::built("debug", "toolgate"))
            .arg("serve")
            .arg("--config")
            .arg(&file)
            .args(["--http", &format!("127.0.0.1:{port}")])
            .env("PATH", path),
        port,
        "toolgate serve",
    )?;
    let out = Command::new(python)
        .arg(root().join("interop/py-client-search.py"))
        .arg(format!("http://127.0.0.1:{port}/mcp/found"))
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
