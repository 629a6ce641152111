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
