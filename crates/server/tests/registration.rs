//! Registration rules: names, uniqueness, schemas.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use toolgate_server::{RegistrationError, Server, ToolDef};

fn noop(name: &str) -> toolgate_server::ToolEntry {
    ToolDef::new(name).handler(|| async { Ok("ok") })
}

#[test]
fn bad_names_name_the_rule() {
    for (name, needle) in [
        ("", "empty"),
        ("has space", "' '"),
        ("a/b", "'/'"),
        (&"x".repeat(129)[..], "129"),
    ] {
        let err = Server::builder("s", "1")
            .tool(noop(name))
            .build()
            .err()
            .expect("rejected");
        assert!(
            matches!(err, RegistrationError::InvalidName { .. }),
            "{err}"
        );
        assert!(err.to_string().contains(needle), "{name}: {err}");
    }
}

#[test]
fn duplicates_are_rejected_at_build_and_at_run_time() {
    let err = Server::builder("s", "1")
        .tool(noop("a"))
        .tool(noop("a"))
        .build()
        .err()
        .expect("rejected");
    assert_eq!(err, RegistrationError::Duplicate("a".into()));
    let server = Server::builder("s", "1").tool(noop("a")).build().unwrap();
    assert_eq!(
        server.add_tool(noop("a")),
        Err(RegistrationError::Duplicate("a".into()))
    );
    assert!(server.add_tool(noop("b")).is_ok());
    assert_eq!(server.tool_names(), ["a", "b"]);
}

#[test]
fn input_schemas_must_be_objects_and_compile() {
    let handler =
        |_args, _ctx| async { Ok(toolgate_server::ToolReply::Complete(Default::default())) };
    let not_object = ToolDef::new("t").dynamic(
        json!({"type": "string"}).as_object().cloned().unwrap(),
        None,
        handler,
    );
    let err = Server::builder("s", "1")
        .tool(not_object)
        .build()
        .err()
        .expect("rejected");
    assert!(
        matches!(err, RegistrationError::InputNotObject { .. }),
        "{err}"
    );
    let broken = ToolDef::new("t").dynamic(
        json!({"type": "object", "minProperties": "many"})
            .as_object()
            .cloned()
            .unwrap(),
        None,
        handler,
    );
    let err = Server::builder("s", "1")
        .eager_schemas()
        .tool(broken)
        .build()
        .err()
        .expect("rejected");
    assert!(
        matches!(
            err,
            RegistrationError::InvalidSchema {
                which: "inputSchema",
                ..
            }
        ),
        "{err}"
    );
    let remote = ToolDef::new("t").dynamic(
        json!({"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}})
            .as_object()
            .cloned()
            .unwrap(),
        None,
        handler,
    );
    assert!(
        Server::builder("s", "1")
            .eager_schemas()
            .tool(remote)
            .build()
            .is_err(),
        "remote $ref must not be fetched or accepted"
    );
}

/// Without `eager_schemas`, a schema is compiled on its tool's first call:
/// a broken one then answers that call (and every later one) with a tool
/// error that puts the fault on the server, and other tools are unharmed.
#[tokio::test]
async fn lazily_compiled_schemas_fail_the_call_not_the_server() {
    use serde_json::Value;
    use toolgate_server::TransportContext;
    use toolgate_server::transport::Reply;

    let handler =
        |_args, _ctx| async { Ok(toolgate_server::ToolReply::Complete(Default::default())) };
    let schema = |v: Value| v.as_object().cloned().unwrap();
    let server = Server::builder("s", "1")
        .tool(ToolDef::new("broken").dynamic(
            schema(json!({"type": "object", "minProperties": "many"})),
            None,
            handler,
        ))
        .tool(ToolDef::new("remote").dynamic(
            schema(json!({"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}})),
            None,
            handler,
        ))
        .tool(noop("fine"))
        .build()
        .expect("registration checks only the dialect and the limits");
    let call = |name: &str| {
        let message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": name, "arguments": {}, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}}});
        server.handle_message(
            &serde_json::to_vec(&message).unwrap(),
            &TransportContext::default(),
        )
    };
    async fn answer(reply: Reply) -> Value {
        let frame = match reply {
            Reply::Done(frame) => frame,
            Reply::Streaming(mut exchange) => exchange.next().await.expect("a response"),
            Reply::Nothing => panic!("no reply"),
        };
        serde_json::from_slice(frame.bytes()).unwrap()
    }
    for round in 0..2 {
        for (name, needle) in [
            ("broken", "\"many\" is not of type"),
            ("remote", "https://example.com/s.json"),
        ] {
            let v = answer(call(name)).await;
            assert_eq!(v["result"]["isError"], true, "{round} {name}: {v}");
            let text = v["result"]["content"][0]["text"].as_str().unwrap();
            assert!(text.contains("inputSchema"), "{text}");
            assert!(text.contains("fault in the server"), "{text}");
            assert!(text.contains(needle), "{name}: {text}");
        }
    }
    let v = answer(call("fine")).await;
    assert_eq!(v["result"]["content"][0]["text"], "ok", "{v}");
}

#[test]
fn x_mcp_header_rules_are_checked_at_registration() {
    let handler =
        |_args, _ctx| async { Ok(toolgate_server::ToolReply::Complete(Default::default())) };
    let schema = json!({"type": "object", "properties": {"amount": {"type": "number", "x-mcp-header": "Amount"}}});
    let tool = ToolDef::new("pay").dynamic(schema.as_object().cloned().unwrap(), None, handler);
    let err = Server::builder("s", "1")
        .tool(tool)
        .build()
        .err()
        .expect("rejected");
    assert!(
        matches!(&err, RegistrationError::HeaderRule { name, error } if name == "pay" && error.location == "/properties/amount"),
        "{err}"
    );
    assert!(err.to_string().contains("number"), "{err}");
}

#[test]
fn schema_limits_are_configurable_and_name_the_bound() {
    let mut config = toolgate_server::ServerConfig::default();
    config.schema_limits.max_schema_depth = 2;
    let deep = json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "object", "properties": {"c": {"type": "string"}}}}}}});
    let handler =
        |_args, _ctx| async { Ok(toolgate_server::ToolReply::Complete(Default::default())) };
    let tool = ToolDef::new("deep").dynamic(deep.as_object().cloned().unwrap(), None, handler);
    let err = Server::builder("s", "1")
        .config(config)
        .tool(tool)
        .build()
        .err()
        .expect("refused");
    assert!(err.to_string().contains("schema depth"), "{err}");
    // The default bounds accept it.
    let tool = ToolDef::new("deep").dynamic(deep.as_object().cloned().unwrap(), None, handler);
    assert!(Server::builder("s", "1").tool(tool).build().is_ok());
}

#[test]
fn nonsensical_configuration_is_an_error_from_build_not_a_panic() {
    use std::time::Duration;
    use toolgate_server::ServerConfig;
    type Edit = fn(&mut ServerConfig);
    let cases: [(&str, Edit); 7] = [
        ("call_timeout", |c| c.call_timeout = Duration::ZERO),
        ("max_legacy_sessions_per_principal", |c| {
            c.max_legacy_sessions_per_principal = 0
        }),
        ("page_size", |c| c.page_size = 0),
        ("state_ttl", |c| c.state_ttl = Duration::ZERO),
        ("max_legacy_sessions", |c| c.max_legacy_sessions = 0),
        ("legacy_idle", |c| c.legacy_idle = Duration::ZERO),
        ("max_instance_bytes", |c| {
            c.schema_limits.max_instance_bytes = 0
        }),
    ];
    for (field, edit) in cases {
        let mut config = ServerConfig::default();
        edit(&mut config);
        let err = Server::builder("s", "1").config(config).build().err();
        let err = err.unwrap_or_else(|| panic!("{field} = 0 was accepted"));
        assert!(matches!(err, RegistrationError::Config(_)), "{err:?}");
        assert!(err.to_string().contains(field), "{err}");
    }
    // The builder's own setter goes through the same check.
    assert!(Server::builder("s", "1").page_size(0).build().is_err());
    // Without legacy service, zero legacy sessions is fine.
    let config = ServerConfig::default()
        .with_legacy(false)
        .with_max_legacy_sessions(0);
    assert!(Server::builder("s", "1").config(config).build().is_ok());
}

#[tokio::test]
async fn a_zero_keep_alive_is_refused_before_serving() {
    use std::time::Duration;
    use toolgate_server::transport::http::{HttpConfig, router, serve_listener};
    let server = Server::builder("s", "1").build().unwrap();
    for edit in [
        (|c: &mut HttpConfig| c.keep_alive = Duration::ZERO) as fn(&mut HttpConfig),
        |c| c.body_limit = 0,
        |c| c.header_timeout = Duration::ZERO,
        |c| c.path = "mcp".into(),
        |c| c.max_connections = 0,
        |c| c.max_in_flight = 0,
        |c| c.http2_keep_alive = Some(Duration::ZERO),
    ] {
        let mut config = HttpConfig::default();
        edit(&mut config);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let err = serve_listener(server.clone(), config.clone(), listener)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        assert!(
            err.to_string().starts_with("invalid HTTP configuration"),
            "{err}"
        );
        assert!(router(server.clone(), config).is_err());
    }
}

#[test]
fn unsupported_uri_templates_are_refused_at_registration() {
    use toolgate_protocol::types::ResourceTemplate;
    use toolgate_server::TemplateEntry;
    let entry = |t: &str| {
        let template = ResourceTemplate {
            uri_template: t.into(),
            name: "t".into(),
            title: None,
            description: None,
            mime_type: None,
            annotations: None,
            icons: None,
            meta: None,
        };
        TemplateEntry::new(template, |_, _, _| async { Ok(vec![]) })
    };
    for (template, says) in [
        ("test://search{?q}", "operator '?'"),
        ("test://{a,b}", "one variable per expression"),
        ("test://{id", "never closed"),
    ] {
        let err = Server::builder("s", "1")
            .resource_template(entry(template))
            .build()
            .err()
            .unwrap_or_else(|| panic!("{template} was accepted"));
        assert!(err.to_string().contains(says), "{template}: {err}");
        assert!(err.to_string().contains(template), "{err}");
    }
    assert!(
        Server::builder("s", "1")
            .resource_template(entry("test://items/{id}/{+rest}"))
            .build()
            .is_ok()
    );
}
