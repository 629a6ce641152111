//! The official Python SDK's client against a searching endpoint
//! (`disclosure = "search"`) of one `toolgate serve` over the basket,
//! server-everything and server-filesystem (`interop/py-client-search.py`).

use crate::support::{ScratchDir, free_port};
use std::path::Path;

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
    let _gateway = crate::interop_endpoints::serve(&file, port, path)?;
    crate::interop_endpoints::client(
        python,
        "interop/py-client-search.py",
        &format!("http://127.0.0.1:{port}/mcp/found"),
        path,
        label,
        failures,
    )
}
