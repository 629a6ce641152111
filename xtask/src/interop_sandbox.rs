//! The servers people run, in the `strict` sandbox: npm's
//! server-filesystem (`npx -y …` with its directory writable),
//! server-everything and server-memory (`npx -y …`), and PyPI's
//! mcp-server-time (a virtual environment), each started by `toolgate`'s
//! launcher and called. npx runs from a cache inside `.tools` (primed by
//! one unsandboxed start, as a user's first `npx` would), so nothing
//! outside the repository is read or written.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::Context as _;

use crate::root;
use crate::support::ScratchDir;

const FILESYSTEM: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";
const EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";
const MEMORY: &str = "@modelcontextprotocol/server-memory@2026.8.31";
const TIME: &str = "mcp-server-time==2026.10.19";

/// How many checks [`check`] makes.
pub const CHECKS: usize = 7;

/// Run the checks; failures are pushed onto `failures`.
pub fn check(path: &str, failures: &mut Vec<String>) -> anyhow::Result<()> {
    let tools = root().join(".tools");
    let cache = tools.join("npm-cache");
    let venv = tools.join("interop-time");
    crate::support::pip_venv(&venv, TIME)?;
    let scratch = ScratchDir::new("toolgate-interop-sandbox")?;
    let data = scratch.path().join("data");
    let memory = scratch.path().join("memory");
    std::fs::create_dir_all(&data)?;
    std::fs::create_dir_all(&memory)?;
    let cache_text = cache.display().to_string();
    // A user's first `npx -y` fetches the package; later ones (in the
    // sandbox, without network) run it from the cache.
    for package in [FILESYSTEM, EVERYTHING, MEMORY] {
        let mut args = vec!["-y", package];
        if package == FILESYSTEM {
            args.push(scratch.path().to_str().unwrap_or("/tmp"));
        }
        crate::run(
            Command::new("npx")
                .args(&args)
                .env("PATH", path)
                .env("npm_config_cache", &cache_text)
                .env("npm_config_update_notifier", "false")
                .stdin(Stdio::null())
                .stdout(Stdio::null()),
        )
        .with_context(|| format!("priming npx's cache with {package}"))?;
    }
    let config = format!(
        r#"[servers.fs]
command = "npx"
args = ["-y", "{FILESYSTEM}", "{data}"]
env = {{ PATH = "{path}", npm_config_cache = "{cache}" }}
sandbox = {{ profile = "strict", write = ["{data}"] }}

[servers.everything]
command = "npx"
args = ["-y", "{EVERYTHING}"]
env = {{ PATH = "{path}", npm_config_cache = "{cache}" }}
sandbox = "strict"

[servers.memory]
command = "npx"
args = ["-y", "{MEMORY}"]
env = {{ PATH = "{path}", npm_config_cache = "{cache}", MEMORY_FILE_PATH = "{memory}/graph.jsonl" }}
sandbox = {{ profile = "strict", write = ["{memory}"] }}

[servers.readonly]
command = "npx"
args = ["-y", "{MEMORY}"]
env = {{ PATH = "{path}", npm_config_cache = "{cache}" }}
sandbox = "strict"

[servers.time]
command = "{time}"
sandbox = "strict"

[policy]
default = "allow"
"#,
        data = data.display(),
        cache = cache_text,
        memory = memory.display(),
        time = venv.join("bin/mcp-server-time").display(),
    );
    let file = scratch.path().join("toolgate.toml");
    std::fs::write(&file, config)?;
    let file = file.display().to_string();
    let mut expect = |what: &str, ok: bool, out: &str| {
        eprintln!("{} sandbox: {what}", if ok { "ok  " } else { "FAIL" });
        if !ok {
            eprintln!("{out}");
            failures.push(format!("sandbox: {what}"));
        }
    };
    let toolgate = |args: &[&str]| -> anyhow::Result<(i32, String)> {
        let out = Command::new(crate::built("debug", "toolgate"))
            .args(args)
            .args(["--config", &file])
            .env("PATH", path)
            .env("RUST_LOG", "error")
            .current_dir(scratch.path())
            .stdin(Stdio::null())
            .output()
            .context("running toolgate")?;
        Ok((
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned()
                + &String::from_utf8_lossy(&out.stderr),
        ))
    };
    let (code, out) = toolgate(&["serve", "--check"])?;
    expect(
        "all start under strict, enforced in full",
        code == 0 && out.matches("enforced in full").count() == 5,
        &out,
    );
    let written = data.join("note.txt");
    let (code, out) = toolgate(&[
        "call",
        "fs",
        "write_file",
        "--yes",
        // Without it the CLI offers its working directory as the root,
        // which server-filesystem would use instead of its argument.
        "--no-roots",
        "--args",
        &format!(
            r#"{{"path": "{}", "content": "sandboxed"}}"#,
            written.display()
        ),
    ])?;
    expect(
        "server-filesystem writes its directory",
        code == 0 && read(&written) == "sandboxed",
        &out,
    );
    let (code, out) = toolgate(&[
        "call",
        "fs",
        "read_text_file",
        "--yes",
        "--no-roots",
        "--args",
        &format!(r#"{{"path": "{}"}}"#, written.display()),
    ])?;
    expect(
        "server-filesystem reads it back",
        code == 0 && out.contains("sandboxed"),
        &out,
    );
    let (code, out) = toolgate(&[
        "call",
        "everything",
        "echo",
        "--yes",
        "--args",
        r#"{"message": "from the sandbox"}"#,
    ])?;
    expect(
        "server-everything echoes",
        code == 0 && out.contains("from the sandbox"),
        &out,
    );
    let (code, out) = toolgate(&[
        "call",
        "memory",
        "create_entities",
        "--yes",
        "--args",
        r#"{"entities": [{"name": "toolgate", "entityType": "gateway", "observations": ["sandboxed"]}]}"#,
    ])?;
    expect(
        "server-memory keeps its graph in its directory",
        code == 0 && read(&memory.join("graph.jsonl")).contains("toolgate"),
        &out,
    );
    let (code, out) = toolgate(&[
        "call",
        "time",
        "get_current_time",
        "--yes",
        "--args",
        r#"{"timezone": "Europe/Paris"}"#,
    ])?;
    expect(
        "mcp-server-time answers",
        code == 0 && out.contains("Europe/Paris"),
        &out,
    );
    // Without a directory of its own, server-memory writes beside its code
    // (in npx's cache): the kernel refuses, and it says so as a tool error.
    let (code, out) = toolgate(&[
        "call",
        "readonly",
        "create_entities",
        "--yes",
        "--args",
        r#"{"entities": [{"name": "x", "entityType": "y", "observations": []}]}"#,
    ])?;
    expect(
        "server-memory cannot write into its install",
        code == 1 && (out.contains("EACCES") || out.contains("permission denied")),
        &out,
    );
    Ok(())
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}
