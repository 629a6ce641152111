//! Tests of the configuration.
//!
//! Layer: `config`.

use super::*;

fn env(var: &str) -> Option<String> {
    (var == "TOKEN").then(|| "s3cret".to_owned())
}

#[test]
fn unknown_keys_are_errors_naming_the_key_and_line() {
    let e = GatewayConfig::parse_toml("[servers.a]\ncommand = \"x\"\ncomand = \"y\"\n", env)
        .unwrap_err()
        .to_string();
    assert!(e.contains("comand") && e.contains("line 3"), "{e}");
    let e = GatewayConfig::parse_toml("[server.a]\ncommand = \"x\"\n", env)
        .unwrap_err()
        .to_string();
    assert!(e.contains("server") && e.contains("line 1"), "{e}");
}

#[test]
fn variables_are_expanded_and_unset_ones_named() {
    let c = GatewayConfig::parse_toml(
        "[servers.r]\nurl = \"http://h/mcp\"\nheaders = { Authorization = \"Bearer ${TOKEN}\", X = \"$${TOKEN}\" }\n",
        env,
    )
    .unwrap();
    assert_eq!(c.servers["r"].headers["Authorization"], "Bearer s3cret");
    assert_eq!(c.servers["r"].headers["X"], "${TOKEN}");
    let e = GatewayConfig::parse_toml("[servers.r]\ncommand = \"x\"\nargs = [\"${NOPE}\"]\n", env)
        .unwrap_err()
        .to_string();
    assert!(e.contains("${NOPE}") && e.contains("\"r\""), "{e}");
}

#[test]
fn entries_need_exactly_one_way_to_reach_the_server() {
    for (text, says) in [
        ("[servers.a]\n", "neither"),
        ("[servers.a]\ncommand = \"x\"\nurl = \"http://h\"\n", "both"),
        ("[servers.a]\nurl = \"ftp://h\"\n", "not http"),
        ("[servers.a]\ncommand = \"x\"\nprefix = \"p.q\"\n", "prefix"),
        ("[servers.a]\ncommand = \"x\"\ninclude = [\"[\"]\n", "glob"),
    ] {
        let e = GatewayConfig::parse_toml(text, env)
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{text:?}: {e}");
    }
}

#[test]
fn policy_limits_and_state_are_checked_when_loaded() {
    for (text, says) in [
        (
            "[servers.a]\ncommand = \"x\"\nper_minute = 0\n",
            "server \"a\": per_minute must be at least 1",
        ),
        (
            "[[ratelimit.rules]]\ntools = [\"*\"]\nper_minute = 0\n",
            "ratelimit rule 1: per_minute must be at least 1",
        ),
        (
            "[[ratelimit.rules]]\ntools = [\"[\"]\nper_minute = 5\n",
            "ratelimit rule 1: glob \"[\"",
        ),
        (
            "[state]\nttl = 0\n",
            "[state] ttl must be at least 1 second",
        ),
        (
            "[policy]\ndefault = \"allow\"\n\n[[policy.rules]]\ntools = [\"rec.read\", \"rec.{wipe,delete_all}\"]\naction = \"deny\"\n",
            "line 5: policy rule 1, key `tools`: glob \"rec.{wipe,delete_all}\": braces are not supported",
        ),
        (
            "[state]\nttl = 1801\n",
            "[state] ttl must be at most 1800 seconds",
        ),
        (
            "[[policy.rules]]\ntools = [\"[\"]\naction = \"deny\"\n",
            "policy rule 1: glob \"[\"",
        ),
        ("[policy]\ndefault = \"maybe\"\n", "unknown variant `maybe`"),
        (
            "[[policy.rules]]\neffects = [\"teleport\"]\naction = \"deny\"\n",
            "unknown variant `teleport`",
        ),
        ("[audit]\npth = \"x.db\"\n", "unknown field `pth`"),
        (
            "[servers.a]\ncommand = \"x\"\ntransport = \"sse\"\n",
            "server \"a\": transport applies to HTTP servers (give a url)",
        ),
        (
            "[servers.a]\nurl = \"http://h/sse\"\ntransport = \"websocket\"\n",
            "unknown variant `websocket`, expected `streamable-http` or `sse`",
        ),
    ] {
        let e = GatewayConfig::parse_toml(text, env)
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{text:?}: {e}");
    }
}

#[test]
fn hosts_json_files_are_read_with_their_own_keys_ignored() {
    let c = GatewayConfig::parse_json(
        r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "x"], "type": "stdio", "disabled": false},
                           "web": {"url": "https://h/mcp", "headers": {"A": "${TOKEN}"}}}}"#,
        env,
    )
    .unwrap();
    assert_eq!(c.servers["fs"].args, ["-y", "x"]);
    assert_eq!(c.servers["web"].headers["A"], "s3cret");
    assert!(c.servers["fs"].enabled && c.servers["web"].enabled);
    assert!(GatewayConfig::parse_json("{}", env).is_err());
    // A host's `"type": "sse"` is the deprecated HTTP+SSE transport.
    let old = GatewayConfig::parse_json(
        r#"{"mcpServers": {"old": {"type": "sse", "url": "https://h/sse"}, "new": {"type": "http", "url": "https://h/mcp"}}}"#,
        env,
    )
    .unwrap();
    assert_eq!(old.servers["old"].transport, Some(HttpKind::Sse));
    assert_eq!(old.servers["new"].transport, None);
}

#[test]
fn include_and_exclude_globs_select_tools() {
    let c = GatewayConfig::parse_toml(
        "[servers.a]\ncommand = \"x\"\ninclude = [\"get_*\", \"list\"]\nexclude = [\"get_secret\"]\n",
        env,
    )
    .unwrap();
    let a = &c.servers["a"];
    assert!(a.offers("get_basket") && a.offers("list"));
    assert!(!a.offers("get_secret") && !a.offers("delete"));
}

#[test]
fn the_published_schema_is_current() {
    let published = include_str!("../../../../docs/gateway.schema.json");
    let published: Value = serde_json::from_str(published).unwrap();
    assert_eq!(
        published,
        GatewayConfig::json_schema(),
        "regenerate docs/gateway.schema.json: cargo run -p toolgate -- serve --print-schema > docs/gateway.schema.json"
    );
}

#[test]
fn a_file_that_cannot_be_read_keeps_the_reason() {
    let missing = std::env::temp_dir().join("toolgate-no-such-config.toml");
    let e = GatewayConfig::load(&missing).unwrap_err();
    assert_eq!(e.message(), format!("cannot read {}", missing.display()));
    let cause = std::error::Error::source(&e).expect("the I/O error is kept");
    assert_eq!(
        cause
            .downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind),
        Some(std::io::ErrorKind::NotFound)
    );
    assert!(toolgate_protocol::error::with_causes(&e).starts_with("cannot read "));
}

#[test]
fn an_identity_is_checked_when_loaded() {
    let auth =
        "[auth]\nissuer = \"https://as\"\naudience = \"https://gw/mcp\"\njwks = \"j.json\"\n";
    let exchange =
        "[servers.a.identity]\nmode = \"exchange\"\nissuer = \"https://as\"\nclient_id = \"gw\"\n";
    for (text, says) in [
        (
            format!("[servers.a]\nurl = \"https://up/mcp\"\n{exchange}"),
            "identity acts for the verified caller; it needs [auth]",
        ),
        (
            format!("{auth}[servers.a]\ncommand = \"x\"\n{exchange}"),
            "identity: applies to HTTP servers",
        ),
        (
            format!("{auth}[servers.a]\nurl = \"https://up/sse\"\ntransport = \"sse\"\n{exchange}"),
            "cannot carry a token per call",
        ),
        (
            format!(
                "{auth}[servers.a]\nurl = \"https://up/mcp\"\n[servers.a.identity]\nmode = \"exchange\"\nclient_id = \"gw\"\n"
            ),
            "give the authorization server's issuer",
        ),
        (
            format!(
                "{auth}[servers.a]\nurl = \"https://up/mcp\"\n[servers.a.identity]\nmode = \"exchange\"\nissuer = \"https://as\"\nclient_id = \" \"\n"
            ),
            "client_id is empty",
        ),
        (
            format!(
                "{auth}[servers.a]\nurl = \"https://up/mcp\"\n{exchange}[[servers.a.identity.tools]]\nmatch = [\"[\"]\nscopes = []\n"
            ),
            "identity: glob",
        ),
        (
            format!(
                "{auth}[servers.a]\nurl = \"https://up/mcp\"\n[servers.a.identity]\nmode = \"impersonate\"\nissuer = \"https://as\"\nclient_id = \"gw\"\n"
            ),
            "unknown variant",
        ),
    ] {
        let e = GatewayConfig::parse_toml(&text, env)
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{text:?}: {e}");
    }
    // Scopes by tool, first match; the resource is the server's URL.
    let text = format!(
        "{auth}[servers.a]\nurl = \"https://up.example.com/mcp/?x=1\"\n{exchange}scopes = [\"r\"]\n[[servers.a.identity.tools]]\nmatch = [\"write_*\"]\nscopes = [\"r\", \"w\"]\n"
    );
    let config = GatewayConfig::parse_toml(&text, env).unwrap();
    let identity = config.servers["a"].identity.as_ref().unwrap();
    assert_eq!(identity.scopes_for("write_note"), ["r", "w"]);
    assert_eq!(identity.scopes_for("read_note"), ["r"]);
    assert_eq!(
        identity.resource_for(config.servers["a"].url.as_ref().unwrap().expose()),
        "https://up.example.com/mcp"
    );
}

#[test]
fn a_user_identity_needs_its_sign_in_and_page_and_a_name_the_page_does_not_use() {
    let auth =
        "[auth]\nissuer = \"https://as\"\naudience = \"https://gw/mcp\"\njwks = \"j.json\"\n";
    let user =
        "[servers.a.identity]\nmode = \"user\"\nissuer = \"https://as\"\nclient_id = \"gw\"\n";
    for (text, says) in [
        (
            format!("{auth}[approval]\npage = true\n[servers.a]\nurl = \"https://up/mcp\"\n{user}"),
            "give [auth.sign_in]",
        ),
        (
            format!(
                "{auth}[auth.sign_in]\nclient_id = \"c\"\n[servers.a]\nurl = \"https://up/mcp\"\n{user}"
            ),
            "turn on [approval] page",
        ),
        (
            format!(
                "{auth}[auth.sign_in]\nclient_id = \"c\"\n[approval]\npage = true\n[servers.callback]\nurl = \"https://up/mcp\"\n[servers.callback.identity]\nmode = \"user\"\nissuer = \"https://as\"\nclient_id = \"gw\"\n"
            ),
            "rename it",
        ),
        (
            format!(
                "{auth}[auth.sign_in]\nclient_id = \"c\"\n[approval]\npage = true\n[servers.a]\nurl = \"https://up/mcp\"\n[servers.a.identity]\nmode = \"user\"\ntoken_endpoint = \"https://as/t\"\nclient_id = \"gw\"\n"
            ),
            "needs the issuer (or its authorization_endpoint",
        ),
    ] {
        let e = GatewayConfig::parse_toml(&text, env)
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{text:?}: {e}");
    }
    let ok = format!(
        "{auth}[auth.sign_in]\nclient_id = \"c\"\n[approval]\npage = true\n[servers.a]\nurl = \"https://up/mcp\"\n{user}"
    );
    let config = GatewayConfig::parse_toml(&ok, env).unwrap();
    assert_eq!(config.auth.unwrap().sign_in.unwrap().scopes(), ["openid"]);
}

#[test]
fn a_sandbox_is_read_as_a_profile_or_a_table_and_its_mistakes_are_named() {
    let env = |name: &str| match name {
        "HOME" => Some("/home/ann".to_owned()),
        "DATA" => Some("/srv/data".to_owned()),
        _ => None,
    };
    let c = GatewayConfig::parse_toml(
        "[servers.a]\ncommand = \"x\"\nsandbox = \"network\"\n\
         [servers.b]\ncommand = \"y\"\nsandbox_mode = \"best-effort\"\n\
         sandbox = { write = [\"~/notes\", \"${DATA}/out\"], network = [\"api.example.com:443\"], memory = \"512 MiB\", processes = 8, cpu_seconds = 60 }\n",
        env,
    )
    .unwrap();
    let a = c.servers["a"].sandbox.as_ref().unwrap();
    assert_eq!(a.profile_name(), "network");
    let b = c.servers["b"].sandbox.as_ref().unwrap().table();
    assert_eq!(b.write, ["/home/ann/notes", "/srv/data/out"]);
    assert_eq!(b.memory, Some(ByteSize(512 << 20)));
    let request = c.servers["b"]
        .sandbox
        .as_ref()
        .unwrap()
        .request(c.servers["b"].sandbox_mode);
    assert_eq!(request.mode, toolgate_sandbox::Mode::BestEffort);
    assert_eq!(
        request.network,
        Some(toolgate_sandbox::Network::Ports(vec![
            toolgate_sandbox::Endpoint {
                host: "api.example.com".to_owned(),
                port: 443
            }
        ]))
    );
    for (text, says) in [
        (
            "[servers.a]\nurl = \"http://h/mcp\"\nsandbox = \"strict\"\n",
            "server \"a\": sandbox applies to stdio servers (a command), not to a url",
        ),
        (
            "[servers.a]\ncommand = \"x\"\nsandbox = \"paranoid\"\n",
            "server \"a\": sandbox profile \"paranoid\" is unknown: use \"strict\" or \"network\"",
        ),
        (
            "[servers.a]\ncommand = \"x\"\nsandbox = { network = \"internet\" }\n",
            "server \"a\": sandbox network: \"internet\" is unknown",
        ),
        (
            "[servers.a]\ncommand = \"x\"\nsandbox = { network = [\"example.com\"] }\n",
            "server \"a\": sandbox network: \"example.com\" is not host:port",
        ),
        (
            "[servers.a]\ncommand = \"x\"\nsandbox = { network = [\"example.com:99999\"] }\n",
            "the port is not 1 to 65535",
        ),
        (
            "[servers.a]\ncommand = \"x\"\nsandbox = { processes = 0 }\n",
            "server \"a\": sandbox processes must be at least 1",
        ),
        (
            "[servers.a]\ncommand = \"x\"\nsandbox = { cpu_seconds = 0 }\n",
            "server \"a\": sandbox cpu_seconds must be at least 1",
        ),
        (
            "[servers.a]\ncommand = \"x\"\ninherit_env = true\nsandbox = \"strict\"\n",
            "would hand the server every secret in the gateway's environment",
        ),
        (
            "[servers.a]\ncommand = \"x\"\nsandbox_mode = \"best-effort\"\n",
            "server \"a\": sandbox_mode needs a sandbox",
        ),
        (
            "[servers.a]\ncommand = \"x\"\nsandbox_mode = \"lenient\"\n",
            "unknown variant `lenient`, expected `enforce` or `best-effort`",
        ),
        (
            "[servers.a]\ncommand = \"x\"\nsandbox = { write = [\"${NOPE}/x\"] }\n",
            "NOPE",
        ),
        (
            "[servers.a]\ncommand = \"x\"\nsandbox = { writes = [\"/x\"] }\n",
            "sandbox",
        ),
    ] {
        let e = GatewayConfig::parse_toml(text, env)
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{text:?}: {e}");
    }
}
