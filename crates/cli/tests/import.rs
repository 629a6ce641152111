//! `toolgate import`: a host's file becomes a configuration the gateway
//! serves, and `--install` puts the host's servers behind it.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::{echo_upstream, toolgate_in};

#[tokio::test(flavor = "multi_thread")]
async fn a_hosts_servers_move_behind_the_gateway_and_the_host_starts_it() {
    let upstream = echo_upstream().await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let cursor = home.path().join(".cursor");
    std::fs::create_dir_all(&cursor).unwrap();
    let host_file = cursor.join("mcp.json");
    let original = serde_json::json!({
        "theme": "dark",
        "mcpServers": {
            "up": {"url": upstream, "autoApprove": ["echo"], "transportType": "http"},
            "old": {"command": "/nonexistent/server", "disabled": true}
        }
    });
    std::fs::write(&host_file, serde_json::to_string_pretty(&original).unwrap()).unwrap();
    let home_env = [("HOME", home.path().to_str().unwrap())];

    let r = toolgate_in(work.path(), &["import", "cursor"], &home_env).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("up: not carried over (toolgate has no such setting): transportType"),
        "{}",
        r.stderr
    );
    let written = std::fs::read_to_string(work.path().join("toolgate.toml")).unwrap();
    assert!(written.contains("enabled = false"), "{written}");
    // The configuration serves: the disabled entry is listed, not started.
    let r = toolgate_in(work.path(), &["serve", "--check"], &[]).await;
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("disabled (not started)"), "{}", r.stdout);
    // A second import does not overwrite it unasked.
    let r = toolgate_in(work.path(), &["import", "cursor"], &home_env).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("pass --force"), "{}", r.stderr);

    let r = toolgate_in(
        work.path(),
        &["import", "cursor", "--install", "--force"],
        &home_env,
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let backup = cursor.join("mcp.json.toolgate-backup");
    let kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&backup).unwrap()).unwrap();
    assert_eq!(kept, original);
    assert!(
        r.stdout.contains(&backup.display().to_string()),
        "{}",
        r.stdout
    );
    let installed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&host_file).unwrap()).unwrap();
    assert_eq!(installed["theme"], "dark", "the host's own settings stay");
    let entry = &installed["mcpServers"]["toolgate"];
    assert_eq!(installed["mcpServers"].as_object().unwrap().len(), 1);
    assert_eq!(
        entry["args"].as_array().unwrap()[0..3],
        ["serve", "--stdio", "--config"]
    );
    let config = entry["args"][3].as_str().unwrap();
    assert!(std::path::Path::new(config).is_absolute() && config.ends_with("toolgate.toml"));
    // The host file now starts toolgate: importing it again is refused.
    let r = toolgate_in(work.path(), &["import", "cursor", "--force"], &home_env).await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("the entry toolgate already runs toolgate"),
        "{}",
        r.stderr
    );
    // Unknown hosts and missing files are named.
    let r = toolgate_in(work.path(), &["import", "notepad"], &home_env).await;
    assert!(
        r.code == 2 && r.stderr.contains("unknown host \"notepad\""),
        "{}",
        r.stderr
    );
    let r = toolgate_in(work.path(), &["import", "windsurf"], &home_env).await;
    assert!(
        r.code == 2 && r.stderr.contains("no windsurf configuration at"),
        "{}",
        r.stderr
    );
}

/// Installed into a host whose client cannot show a form, the gateway's
/// approval page is turned on (its link written beside the
/// configuration), the configuration is its owner's alone, and `*` in
/// `autoApprove` allows no tool but one named `*`.
#[tokio::test(flavor = "multi_thread")]
async fn installing_into_a_formless_host_turns_the_approval_page_on() {
    use std::os::unix::fs::PermissionsExt as _;
    let upstream = echo_upstream().await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = home.path().join(".codeium/windsurf");
    std::fs::create_dir_all(&dir).unwrap();
    let host_file = dir.join("mcp_config.json");
    let original = serde_json::json!({
        "mcpServers": {
            "up": {"url": upstream, "headers": {"Authorization": "Bearer host-secret"}, "autoApprove": ["*"]}
        }
    });
    std::fs::write(&host_file, original.to_string()).unwrap();
    std::fs::set_permissions(&host_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let home_env = [("HOME", home.path().to_str().unwrap())];
    let r = toolgate_in(work.path(), &["import", "windsurf", "--install"], &home_env).await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("\"*\" names a tool exactly"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("(0600)"), "{}", r.stderr);
    let config = work.path().join("toolgate.toml");
    let mode = std::fs::metadata(&config).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the configuration carries the host's header");
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(
        written.contains("[approval]\nlogin_file = \"toolgate-login.txt\"\npage = true\n"),
        "{written}"
    );
    assert!(
        r.stdout
            .contains("This host cannot show approval forms, so the approval page is on"),
        "{}",
        r.stdout
    );
    // The allow rule lets nothing but a tool named `*` through: the echo
    // tool is confirmed (the built-in default), as the host never allowed it.
    let r = toolgate_in(work.path(), &["serve", "--check"], &[]).await;
    assert!(
        r.stdout.contains("matches no tool of any upstream"),
        "{}{}",
        r.stdout,
        r.stderr
    );
}

/// `--endpoint NAME` puts the host's servers behind an endpoint of their
/// own, and `--install` points the host at it over stdio.
#[tokio::test(flavor = "multi_thread")]
async fn importing_into_an_endpoint_points_the_host_at_it() {
    let upstream = echo_upstream().await;
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let cursor = home.path().join(".cursor");
    std::fs::create_dir_all(&cursor).unwrap();
    let host_file = cursor.join("mcp.json");
    let original = serde_json::json!({"mcpServers": {"up": {"url": upstream}}});
    std::fs::write(&host_file, original.to_string()).unwrap();
    let home_env = [("HOME", home.path().to_str().unwrap())];
    let r = toolgate_in(
        work.path(),
        &["import", "cursor", "--endpoint", "Bad Name"],
        &home_env,
    )
    .await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("an endpoint name is 1 to 64 of a-z"),
        "{}",
        r.stderr
    );
    let r = toolgate_in(
        work.path(),
        &["import", "cursor", "--install", "--endpoint", "cursor"],
        &home_env,
    )
    .await;
    assert_eq!(r.code, 0, "{}", r.stderr);
    let written = std::fs::read_to_string(work.path().join("toolgate.toml")).unwrap();
    assert!(
        written.contains("[endpoints.cursor]\nservers = [\"up\"]\n"),
        "{written}"
    );
    let r = toolgate_in(work.path(), &["serve", "--check"], &[]).await;
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let installed: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&host_file).unwrap()).unwrap();
    let args = installed["mcpServers"]["toolgate"]["args"]
        .as_array()
        .unwrap();
    assert_eq!(args[args.len() - 2..], ["--endpoint", "cursor"]);
    // An endpoint the file does not have is named, with those it has.
    let r = toolgate_in(
        work.path(),
        &["serve", "--stdio", "--endpoint", "nope"],
        &[],
    )
    .await;
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("--endpoint nope: toolgate.toml has no [endpoints.nope] (it has: cursor)"),
        "{}",
        r.stderr
    );
}
