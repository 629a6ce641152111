//! Interoperability: `toolgate` (and so toolgate-client) against servers
//! written with the official TypeScript SDK v2 and Python SDK, installed
//! from npm and PyPI, over stdio and Streamable HTTP; against the npm
//! reference servers (legacy era); and the other way, the TypeScript SDK
//! 1.x client against toolgate's basket example.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context as _, bail};

use crate::support::{ChildGuard, ScratchDir, npm_install, wait_for};
use crate::{cargo, root};

const TS_SDK: &str = "@modelcontextprotocol/server@2.4.0";
/// The 1.x TypeScript SDK: the client most hosts run today (legacy era).
const TS1_SDK: &str = "@modelcontextprotocol/sdk@1.32.2";
/// The README's example command, pinned.
const EVERYTHING_NPX: &str = "@modelcontextprotocol/server-everything@2026.8.31";
const PY_SDK: &str = "mcp==2.3.0";
/// Reference servers people run today (built on the 1.x SDK: legacy era).
const LEGACY_SERVERS: &str = "@modelcontextprotocol/server-everything@2026.8.31 @modelcontextprotocol/server-filesystem@2026.8.31";

fn tools_dir() -> PathBuf {
    root().join(".tools")
}

fn install_ts(node_bin: &Path) -> anyhow::Result<()> {
    let dir = tools_dir().join("interop-ts");
    npm_install(
        &dir,
        "{\"private\": true, \"type\": \"module\"}\n",
        &[TS_SDK],
        Some(node_bin),
    )
}

fn install_ts1(node_bin: &Path) -> anyhow::Result<PathBuf> {
    let dir = tools_dir().join("interop-ts1");
    npm_install(
        &dir,
        "{\"private\": true, \"type\": \"module\"}\n",
        &[TS1_SDK],
        Some(node_bin),
    )?;
    // The script must sit beside its node_modules.
    let script = dir.join("ts1-client.mjs");
    std::fs::copy(root().join("interop/ts1-client.mjs"), &script)?;
    Ok(script)
}

pub(crate) fn install_legacy(node_bin: &Path) -> anyhow::Result<PathBuf> {
    let dir = tools_dir().join("interop-legacy");
    let packages: Vec<&str> = LEGACY_SERVERS.split(' ').collect();
    npm_install(&dir, "{\"private\": true}\n", &packages, Some(node_bin))?;
    Ok(dir.join("node_modules/.bin"))
}

fn install_py() -> anyhow::Result<PathBuf> {
    let venv = tools_dir().join("interop-py");
    crate::support::pip_venv(&venv, PY_SDK)?;
    Ok(venv.join("bin/python"))
}

/// Run `toolgate ARGS`, returning exit code and stdout.
fn toolgate(args: &[&str], path: &str) -> anyhow::Result<(i32, String)> {
    let out = Command::new(crate::built("debug", "toolgate"))
        .args(args)
        .env("PATH", path)
        .stdin(Stdio::null())
        .output()
        .context("running toolgate")?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    ))
}

/// Check one server: list, call, tool error, bad arguments.
fn check(
    label: &str,
    target: &[&str],
    path: &str,
    failures: &mut Vec<String>,
) -> anyhow::Result<()> {
    let with = |command: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = command.iter().map(|s| (*s).to_owned()).collect();
        let (url, stdio): (Vec<&str>, Vec<&str>) = if target[0].starts_with("http") {
            (vec![target[0]], vec![])
        } else {
            (vec![], target.to_vec())
        };
        // toolgate SUBCOMMAND [URL] ... [-- COMMAND]
        v.splice(1..1, url.into_iter().map(str::to_owned));
        if !stdio.is_empty() {
            v.push("--".into());
            v.extend(stdio.into_iter().map(str::to_owned));
        }
        v
    };
    let run =
        |argv: Vec<String>| toolgate(&argv.iter().map(String::as_str).collect::<Vec<_>>(), path);
    let mut expect = |what: &str, ok: bool| {
        let line = format!("{label}: {what}");
        eprintln!("{} {line}", if ok { "ok  " } else { "FAIL" });
        if !ok {
            failures.push(line);
        }
    };
    let (code, out) = run(with(&["tools"]))?;
    expect(
        "tools lists add and fail",
        code == 0 && out.contains("add") && out.contains("fail"),
    );
    let (code, out) = run(with(&[
        "call",
        "--yes",
        "add",
        "--args",
        r#"{"a":2,"b":3}"#,
    ]))?;
    expect(
        "call add(2, 3) prints 5",
        code == 0 && out.lines().next() == Some("5"),
    );
    let (code, _) = run(with(&["call", "--yes", "fail"]))?;
    expect("a tool error exits 1", code == 1);
    let (code, _) = run(with(&["call", "--yes", "add", "--args", r#"{"a":"x"}"#]))?;
    // Both SDKs report invalid arguments as tool execution errors.
    expect(
        "bad arguments come back as the server's tool error (exit 1)",
        code == 1,
    );
    Ok(())
}

/// Install the peers and run every check.
pub fn run() -> anyhow::Result<()> {
    let node_bin = crate::conformance::install()?;
    install_ts(&node_bin)?;
    let python = install_py()?;
    cargo(&[
        "build",
        "--quiet",
        "--package",
        "toolgate",
        "--package",
        "basket",
    ])?;
    let path = format!(
        "{}:{}",
        node_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let ts_dir = tools_dir().join("interop-ts");
    // The script must sit beside its node_modules.
    std::fs::copy(
        root().join("interop/ts-server.mjs"),
        ts_dir.join("ts-server.mjs"),
    )?;
    let ts_script = ts_dir.join("ts-server.mjs").display().to_string();
    let py_script = root().join("interop/py-server.py").display().to_string();
    let node = node_bin.join("node").display().to_string();
    let python = python.display().to_string();
    let mut failures = Vec::new();

    check(
        "TypeScript SDK v2, stdio",
        &[&node, &ts_script],
        &path,
        &mut failures,
    )?;
    check(
        "Python SDK, stdio",
        &[&python, &py_script],
        &path,
        &mut failures,
    )?;
    for (label, program, script) in [
        ("TypeScript SDK v2, HTTP", &node, &ts_script),
        ("Python SDK, HTTP", &python, &py_script),
    ] {
        let (_guard, port) = start_on_free_port(label, program, &[script, "--http"], &path)?;
        let url = format!("http://127.0.0.1:{port}/mcp");
        check(label, &[&url], &path, &mut failures)?;
    }
    checks_old_sse(&node_bin, &python, &py_script, &path, &mut failures)?;
    checks_legacy(&node_bin, &path, &mut failures)?;
    checks_ts1_client(&node_bin, &path, &mut failures)?;
    crate::interop_endpoints::check(&python, &path, &mut failures)?;
    crate::interop_sandbox::check(&path, &mut failures)?;
    crate::interop_search::check(&python, &node_bin, &path, &mut failures)?;
    let total = 16 + 8 + 3 + 9 + 1 + 2 + 1 + 1 + crate::interop_sandbox::CHECKS;
    println!(
        "interop: {} passed, {} failed",
        total - failures.len(),
        failures.len()
    );
    if !failures.is_empty() {
        bail!("interop checks failed:\n{}", failures.join("\n"));
    }
    Ok(())
}

/// Start `program ARGS… PORT` on a free port; its guard, and the port.
fn start_on_free_port(
    label: &str,
    program: &str,
    args: &[&str],
    path: &str,
) -> anyhow::Result<(ChildGuard, u16)> {
    let port = crate::support::free_port()?;
    let guard = crate::support::start_quiet(
        Command::new(program)
            .args(args)
            .arg(port.to_string())
            .env("PATH", path),
        port,
        label,
    )?;
    Ok((guard, port))
}

/// Servers on the deprecated HTTP+SSE transport (2024-11-05), written with
/// the Python SDK and the TypeScript SDK 1.x: the CLI detects it from the
/// URL alone; the gateway serves them, one chosen by `transport = "sse"`,
/// one detected.
fn checks_old_sse(
    node_bin: &Path,
    python: &str,
    py_script: &str,
    path: &str,
    failures: &mut Vec<String>,
) -> anyhow::Result<()> {
    let ts1_sse = install_ts1(node_bin)?.with_file_name("ts1-sse-server.mjs");
    std::fs::copy(root().join("interop/ts1-sse-server.mjs"), &ts1_sse)?;
    let ts1_sse = ts1_sse.display().to_string();
    let node = node_bin.join("node").display().to_string();
    let py_label = "Python SDK, HTTP+SSE (2024-11-05)";
    let (_py, py_port) = start_on_free_port(py_label, python, &[py_script, "--sse"], path)?;
    let ts_label = "TypeScript SDK 1.x, HTTP+SSE (2024-11-05)";
    let (_ts, ts_port) = start_on_free_port(ts_label, &node, &[&ts1_sse], path)?;
    let py_url = format!("http://127.0.0.1:{py_port}/sse");
    let ts_url = format!("http://127.0.0.1:{ts_port}/sse");
    check(py_label, &[&py_url], path, failures)?;
    check(ts_label, &[&ts_url], path, failures)?;

    let scratch = ScratchDir::new("toolgate-interop-sse")?;
    let config = scratch.path().join("toolgate.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.py]\nurl = {py_url:?}\ntransport = \"sse\"\n[servers.ts]\nurl = {ts_url:?}\n[policy]\ndefault = \"allow\"\n"
        ),
    )?;
    let config = config.display().to_string();
    let gateway_bin = crate::built("debug", "toolgate").display().to_string();
    let mut expect = |what: &str, ok: bool| {
        eprintln!(
            "{} gateway over HTTP+SSE: {what}",
            if ok { "ok  " } else { "FAIL" }
        );
        if !ok {
            failures.push(format!("gateway over HTTP+SSE: {what}"));
        }
    };
    let (code, out) = toolgate(&["serve", "--check", "--config", &config], path)?;
    expect(
        "serve --check lists both upstreams' tools",
        code == 0
            && out.lines().any(|l| l.starts_with("py "))
            && out.lines().any(|l| l.starts_with("ts ")),
    );
    for (tool, label) in [("py.add", "chosen"), ("ts.add", "detected")] {
        let argv = [
            "call",
            "--yes",
            tool,
            "--args",
            r#"{"a":2,"b":3}"#,
            "--",
            gateway_bin.as_str(),
            "serve",
            "--stdio",
            "--config",
            config.as_str(),
        ];
        let (code, out) = toolgate(&argv, path)?;
        expect(
            &format!("{tool} ({label}) prints 5"),
            code == 0 && out.lines().next() == Some("5"),
        );
    }
    Ok(())
}

/// The npm reference servers (legacy era) over stdio: list, call, tool
/// error, audit, lock and verify.
fn checks_legacy(node_bin: &Path, path: &str, failures: &mut Vec<String>) -> anyhow::Result<()> {
    let bin = install_legacy(node_bin)?;
    let everything = bin.join("mcp-server-everything").display().to_string();
    let filesystem = bin.join("mcp-server-filesystem").display().to_string();
    let scratch = ScratchDir::new("toolgate-interop-fs")?;
    let root_dir = scratch.path();
    std::fs::write(root_dir.join("hello.txt"), "hello from toolgate\n")?;
    let root = root_dir.display().to_string();
    let lock = root_dir.join("toolgate.lock").display().to_string();
    let mut expect = |what: &str, ok: bool| {
        eprintln!("{} legacy: {what}", if ok { "ok  " } else { "FAIL" });
        if !ok {
            failures.push(format!("legacy: {what}"));
        }
    };
    let ev = |args: &[&str]| -> anyhow::Result<(i32, String)> {
        let mut argv: Vec<&str> = args.to_vec();
        argv.extend(["--", everything.as_str()]);
        toolgate(&argv, path)
    };
    let fs = |args: &[&str]| -> anyhow::Result<(i32, String)> {
        let mut argv: Vec<&str> = args.to_vec();
        argv.extend(["--", filesystem.as_str(), root.as_str()]);
        toolgate(&argv, path)
    };
    let (code, out) = ev(&["tools"])?;
    expect(
        "server-everything: tools lists echo",
        code == 0 && out.contains("echo"),
    );
    let (code, out) = ev(&["call", "--yes", "echo", "--args", r#"{"message":"hi"}"#])?;
    expect(
        "server-everything: call echo",
        code == 0 && out.contains("hi"),
    );
    let (code, _) = ev(&["call", "--yes", "get-sum", "--args", r#"{"a":"x"}"#])?;
    expect(
        "server-everything: bad arguments yield its tool error (exit 1)",
        code == 1,
    );
    // The server's own directory: without --no-roots the CLI would offer the
    // working directory as its root, which server-filesystem would use instead.
    let (code, out) = fs(&[
        "call",
        "--yes",
        "--no-roots",
        "read_text_file",
        "--args",
        &format!(r#"{{"path":"{root}/hello.txt"}}"#),
    ])?;
    expect(
        "server-filesystem: read_text_file reads the file",
        code == 0 && out.contains("hello from toolgate"),
    );
    // Started with no directory, it takes its allowed directories from the
    // roots it asks for right after `initialized`, outside any call: the
    // CLI answers (five times, since a lost race shows only now and then).
    for attempt in 1..=5 {
        let argv = [
            "call",
            "--yes",
            "--root",
            root.as_str(),
            "read_text_file",
            "--args",
            &format!(r#"{{"path":"{root}/hello.txt"}}"#),
            "--",
            filesystem.as_str(),
        ];
        let (code, out) = toolgate(&argv, path)?;
        expect(
            &format!("server-filesystem without a directory: --root reaches it (try {attempt})"),
            code == 0 && out.contains("hello from toolgate"),
        );
    }
    let (code, out) = ev(&["audit"])?;
    expect(
        "server-everything: audit reports",
        // Listed as the gateway lists it: with its client capabilities,
        // server-everything offers four tools more than to a bare client.
        code == 0 && out.contains("Audited 17 tool(s)"),
    );
    let (code, out) = fs(&["audit"])?;
    expect(
        "server-filesystem: audit names the tools that write",
        code == 0 && out.contains("write_file: write"),
    );
    let (code, _) = ev(&["lock", "--lock", &lock])?;
    expect("server-everything: lock", code == 0);
    let (code, _) = fs(&["lock", "--lock", &lock])?;
    expect("server-filesystem: lock", code == 0);
    let (code, out) = ev(&["verify", "--lock", &lock])?;
    expect(
        "server-everything: verify matches the lock",
        code == 0 && out.contains("match the lock"),
    );
    // Both behind the gateway: listed, called (allowed, and approved by
    // --answer), refused when nobody approves, recorded.
    let config = root_dir.join("toolgate.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.everything]\ncommand = {everything:?}\n[servers.files]\ncommand = {filesystem:?}\nargs = [{root:?}]\n[policy]\ndefault = \"confirm\"\n[[policy.rules]]\ntools = [\"everything.echo\", \"files.read_text_file\"]\naction = \"allow\"\n"
        ),
    )?;
    let config = config.display().to_string();
    let gateway_bin = crate::built("debug", "toolgate").display().to_string();
    let via = |args: &[&str]| -> anyhow::Result<(i32, String)> {
        let mut argv: Vec<&str> = args.to_vec();
        argv.extend([
            "--",
            gateway_bin.as_str(),
            "serve",
            "--stdio",
            "--config",
            config.as_str(),
        ]);
        toolgate(&argv, path)
    };
    let (code, out) = toolgate(&["serve", "--check", "--config", &config], path)?;
    expect(
        "gateway: serve --check starts and lists both",
        code == 0 && out.contains("everything") && out.contains("files"),
    );
    // A lock written by the CLI holds what the gateway offers: server-everything
    // lists more tools to a client that can answer more, and the CLI lists
    // as the gateway does, so nothing is withheld as "added after the lock".
    let lock = root_dir.join("toolgate.lock").display().to_string();
    let (code, _) = toolgate(
        &["lock", "--config", &config, "--all", "--lock", &lock],
        path,
    )?;
    expect("gateway: lock --all writes the lock", code == 0);
    let (code, out) = toolgate(
        &["serve", "--check", "--config", &config, "--lock", &lock],
        path,
    )?;
    let withheld = out
        .lines()
        .filter(|l| l.starts_with("everything") || l.starts_with("files"))
        .all(|l| l.split_whitespace().nth(3) == Some("0"));
    expect(
        "gateway: serve --check --lock withholds nothing the CLI locked",
        code == 0 && withheld,
    );
    let (code, out) = via(&[
        "call",
        "--yes",
        "everything.echo",
        "--args",
        r#"{"message":"via gateway"}"#,
    ])?;
    expect(
        "gateway: everything.echo (allowed)",
        code == 0 && out.contains("via gateway"),
    );
    let (code, out) = via(&[
        "call",
        "--yes",
        "--no-roots",
        "files.read_text_file",
        "--args",
        &format!(r#"{{"path":"{root}/hello.txt"}}"#),
    ])?;
    expect(
        "gateway: files.read_text_file (allowed)",
        code == 0 && out.contains("hello from toolgate"),
    );
    let (code, out) = via(&[
        "call",
        "--yes",
        "--answer",
        "approve=true",
        "everything.get-sum",
        "--args",
        r#"{"a":1,"b":2}"#,
    ])?;
    expect(
        "gateway: everything.get-sum runs once approved",
        code == 0 && out.contains('3'),
    );
    let (code, _) = via(&[
        "call",
        "--yes",
        "everything.get-sum",
        "--args",
        r#"{"a":1,"b":2}"#,
    ])?;
    expect(
        "gateway: nobody approves, nothing runs (declined: exit 6)",
        code == 6,
    );
    let (code, out) = toolgate(&["log", "--config", &config, "--json"], path)?;
    expect(
        "gateway: toolgate log shows the approved and the declined call",
        code == 0
            && out.contains(r#""confirmation":"approved""#)
            && out.contains(r#""confirmation":"declined""#),
    );
    // The README's command, as written there (version pinned).
    let (code, out) = toolgate(&["tools", "--", "npx", "-y", EVERYTHING_NPX], path)?;
    expect(
        "toolgate tools -- npx -y @modelcontextprotocol/server-everything",
        code == 0 && out.contains("echo"),
    );
    Ok(())
}

/// The TypeScript SDK 1.x client (initialize handshake) against the basket
/// example over stdio and HTTP: list, call, structured results, a tool
/// error for bad arguments, and checkout's elicitation answered as a
/// server-initiated request.
fn checks_ts1_client(
    node_bin: &Path,
    path: &str,
    failures: &mut Vec<String>,
) -> anyhow::Result<()> {
    let script = install_ts1(node_bin)?.display().to_string();
    let node = node_bin.join("node");
    let basket = crate::built("debug", "basket").display().to_string();
    let mut run = |label: &str, args: &[&str]| -> anyhow::Result<()> {
        let out = Command::new(&node)
            .arg(&script)
            .args(args)
            .env("PATH", path)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running {label}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        for line in stdout.lines() {
            eprintln!("     {label}: {line}");
        }
        let ok = out.status.success();
        eprintln!("{} {label}", if ok { "ok  " } else { "FAIL" });
        if !ok {
            failures.push(format!("{label}:\n{stdout}"));
        }
        Ok(())
    };
    run(
        "TypeScript SDK 1.x client -> basket, stdio",
        &["stdio", &basket],
    )?;
    let port = crate::support::free_port()?;
    let child = Command::new(&basket)
        .args(["--http", &format!("127.0.0.1:{port}")])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .spawn()
        .context("starting basket --http")?;
    let _guard = ChildGuard(child);
    wait_for(SocketAddr::from(([127, 0, 0, 1], port)), "basket")?;
    let url = format!("http://127.0.0.1:{port}/mcp");
    run("TypeScript SDK 1.x client -> basket, HTTP", &["http", &url])?;
    Ok(())
}
