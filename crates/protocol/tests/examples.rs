//! Every example of the specification that concerns these types survives a
//! trip through them: deserialize, serialize, and compare with the original.
// Tests fail loudly by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use toolgate_protocol::RpcError;
use toolgate_protocol::jsonrpc::{Incoming, encode_notification, encode_request, parse_value};
use toolgate_protocol::types::*;

fn examples_dir() -> PathBuf {
    toolgate_protocol::wire_check::spec_dir().join("2026-07-28/examples")
}

fn examples(folder: &str) -> Vec<(String, Value)> {
    let dir = examples_dir().join(folder);
    let mut out: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("dir entry").path();
            let text = std::fs::read_to_string(&path).expect("read example");
            (
                path.display().to_string(),
                serde_json::from_str(&text).expect("example is JSON"),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(!out.is_empty(), "no examples in {folder}");
    out
}

/// Numbers compare by value, so `1` and `1.0` are the same.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn round_trip<T: DeserializeOwned + Serialize>(folder: &str) -> usize {
    let all = examples(folder);
    for (path, original) in &all {
        let typed: T = serde_json::from_value(original.clone())
            .unwrap_or_else(|e| panic!("{path} does not deserialize: {e}"));
        let back = serde_json::to_value(&typed).expect("serialize");
        assert!(
            same(original, &back),
            "{path} changed on round trip:\n{original}\n{back}"
        );
    }
    all.len()
}

#[test]
fn data_types_round_trip() {
    let mut n = 0;
    n += round_trip::<Tool>("Tool");
    n += round_trip::<CallToolRequestParams>("CallToolRequestParams");
    n += round_trip::<CallToolResult>("CallToolResult");
    n += round_trip::<ListToolsResult>("ListToolsResult");
    n += round_trip::<DiscoverResult>("DiscoverResult");
    for folder in [
        "TextContent",
        "ImageContent",
        "AudioContent",
        "EmbeddedResource",
        "ResourceLink",
    ] {
        n += round_trip::<ContentBlock>(folder);
    }
    n += round_trip::<ResourceContents>("TextResourceContents");
    n += round_trip::<ResourceContents>("BlobResourceContents");
    n += round_trip::<Resource>("Resource");
    n += round_trip::<ServerCapabilities>("ServerCapabilities");
    n += round_trip::<ClientCapabilities>("ClientCapabilities");
    n += round_trip::<ProgressNotificationParams>("ProgressNotificationParams");
    n += round_trip::<CancelledNotificationParams>("CancelledNotificationParams");
    n += round_trip::<LoggingMessageNotificationParams>("LoggingMessageNotificationParams");
    n += round_trip::<ResourceUpdatedParams>("ResourceUpdatedNotificationParams");
    n += round_trip::<PaginatedRequestParams>("PaginatedRequestParams");
    n += round_trip::<ListResourcesResult>("ListResourcesResult");
    n += round_trip::<ListResourceTemplatesResult>("ListResourceTemplatesResult");
    n += round_trip::<ReadResourceResult>("ReadResourceResult");
    n += round_trip::<ListPromptsResult>("ListPromptsResult");
    n += round_trip::<GetPromptResult>("GetPromptResult");
    n += round_trip::<InputRequiredResult>("InputRequiredResult");
    for folder in [
        "InvalidParamsError",
        "MethodNotFoundError",
        "ParseError",
        "InternalError",
    ] {
        n += round_trip::<RpcError>(folder);
    }
    assert!(n >= 40, "only {n} examples were checked");
}

/// Full JSON-RPC messages: parse with the envelope parser, check the params
/// or result against its type, re-encode, and compare.
/// A folder of examples and the check its payload gets.
type Case = (&'static str, fn(&Value));

#[test]
fn messages_round_trip() {
    let requests: &[Case] = &[
        ("CallToolRequest", |p| check::<CallToolRequestParams>(p)),
        ("DiscoverRequest", |_| {}),
        ("ListToolsRequest", |p| check::<PaginatedRequestParams>(p)),
        ("ListResourcesRequest", |p| {
            check::<PaginatedRequestParams>(p)
        }),
        ("ListPromptsRequest", |p| check::<PaginatedRequestParams>(p)),
        ("SubscriptionsListenRequest", |p| {
            check::<SubscriptionsListenRequestParams>(p)
        }),
    ];
    for (folder, check_params) in requests {
        for (path, original) in examples(folder) {
            let Ok(Incoming::Request(req)) = parse_value(original.clone()) else {
                panic!("{path} is not a request")
            };
            let params = Value::Object(req.params_with_meta().unwrap_or_default());
            check_params(&params);
            let back: Value =
                serde_json::from_slice(&encode_request(&req.id, &req.method, &params))
                    .expect("json");
            assert!(same(&original, &back), "{path}");
        }
    }
    let notifications: &[Case] = &[
        ("ProgressNotification", |p| {
            check::<ProgressNotificationParams>(p)
        }),
        ("CancelledNotification", |p| {
            check::<CancelledNotificationParams>(p)
        }),
        ("ToolListChangedNotification", |_| {}),
        ("SubscriptionsAcknowledgedNotification", |p| {
            check::<SubscriptionsAcknowledgedParams>(p)
        }),
        ("ResourceUpdatedNotification", |p| {
            check::<ResourceUpdatedParams>(p)
        }),
    ];
    for (folder, check_params) in notifications {
        for (path, original) in examples(folder) {
            let Ok(Incoming::Notification(n)) = parse_value(original.clone()) else {
                panic!("{path} is not a notification")
            };
            let params = n.params.clone().map(Value::Object);
            if let Some(p) = &params {
                check_params(p);
            }
            let back: Value =
                serde_json::from_slice(&encode_notification(&n.method, params.as_ref()))
                    .expect("json");
            assert!(same(&original, &back), "{path}");
        }
    }
    let responses: &[Case] = &[
        ("CallToolResultResponse", |r| check::<CallToolResult>(r)),
        ("ListToolsResultResponse", |r| check::<ListToolsResult>(r)),
        ("DiscoverResultResponse", |r| check::<DiscoverResult>(r)),
        ("ListResourcesResultResponse", |r| {
            check::<ListResourcesResult>(r)
        }),
        ("ReadResourceResultResponse", |r| {
            check::<ReadResourceResult>(r)
        }),
        ("ListPromptsResultResponse", |r| {
            check::<ListPromptsResult>(r)
        }),
        ("GetPromptResultResponse", |r| check::<GetPromptResult>(r)),
    ];
    for (folder, check_result) in responses {
        for (path, original) in examples(folder) {
            let Ok(Incoming::Response(resp)) = parse_value(original.clone()) else {
                panic!("{path} is not a response")
            };
            let result = resp.outcome.unwrap_or_else(|e| panic!("{path}: {e}"));
            check_result(&result);
        }
    }
    for folder in [
        "UnsupportedProtocolVersionError",
        "HeaderMismatchError",
        "MissingRequiredClientCapabilityError",
    ] {
        for (path, original) in examples(folder) {
            let Ok(Incoming::Response(resp)) = parse_value(original.clone()) else {
                panic!("{path} is not a response")
            };
            assert!(
                resp.outcome.is_err_and(|e| e.is_modern_protocol_error()),
                "{path}"
            );
        }
    }
}

fn check<T: DeserializeOwned + Serialize>(value: &Value) {
    let typed: T = serde_json::from_value(value.clone()).unwrap_or_else(|e| panic!("{value}: {e}"));
    let back = serde_json::to_value(&typed).expect("serialize");
    assert!(
        same(value, &back),
        "changed on round trip:\n{value}\n{back}"
    );
}
