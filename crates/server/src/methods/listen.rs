//! `subscriptions/listen`: an acknowledgement, then only the requested
//! change notifications, each tagged with the subscription id, until the
//! client goes away or the server shuts down.

use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast::error::RecvError;
use toolgate_protocol::jsonrpc::{Request, encode_notification};
use toolgate_protocol::meta::{RequestMeta, SUBSCRIPTION_ID};
use toolgate_protocol::types::{SubscriptionFilter, methods};
use toolgate_protocol::{RequestId, RpcError};

use super::{Failure, exchange, params};
use crate::Server;
use crate::dispatch::TransportContext;
use crate::exchange::Frame;
use crate::exchange::Reply;
use crate::registry::Change;

#[derive(Deserialize)]
struct ListenParams {
    notifications: Option<SubscriptionFilter>,
}

pub(super) fn listen(
    server: &Server,
    req: Request,
    meta: RequestMeta,
    transport: &TransportContext,
) -> Result<Reply, Failure> {
    let p: ListenParams = params(&req)?;
    let Some(requested) = p.notifications else {
        return Err((
            req.id,
            RpcError::invalid_params(
                "subscriptions/listen needs a \"notifications\" filter object",
            ),
        ));
    };
    let honoured = honoured(server, &requested);
    let server = server.clone();
    let id = req.id;
    let shared_channel = !transport.stream_per_request;
    // Subscribe before acknowledging, so no change between the two is lost.
    let mut changes = server.inner.bus.subscribe();
    Ok(exchange(
        id.clone(),
        meta,
        transport,
        Default::default(),
        move |ctx| async move {
            let tag = tag(&id);
            let ack = json!({ "notifications": honoured, "_meta": tag });
            ctx.inner
                .sink
                .send(Frame::Notification(encode_notification(
                    methods::SUBSCRIPTIONS_ACKNOWLEDGED,
                    Some(&ack),
                )))
                .await
                .ok()?;
            loop {
                let change = tokio::select! {
                    _ = server.inner.shutdown.cancelled() => break,
                    change = changes.recv() => change,
                };
                let frames = match change {
                    Ok(change) => notifications_for(&honoured, &change, &tag),
                    // We fell behind: say everything this stream cares about
                    // may have changed rather than miss something.
                    Err(RecvError::Lagged(_)) => everything(&honoured, &tag),
                    Err(RecvError::Closed) => break,
                };
                for frame in frames {
                    ctx.inner.sink.send(Frame::Notification(frame)).await.ok()?;
                }
            }
            // Server-initiated end: a graceful completion result, and on a
            // shared channel the cancellation that ends the subscription.
            let mut result = Map::new();
            result.insert("_meta".into(), Value::Object(tag.clone()));
            let final_frame = server.result_frame(&id, &result);
            if shared_channel {
                ctx.inner.sink.send(final_frame).await.ok()?;
                let cancelled = json!({ "requestId": id, "reason": "server shutting down" });
                return Some(Frame::Notification(encode_notification(
                    methods::CANCELLED,
                    Some(&cancelled),
                )));
            }
            Some(final_frame)
        },
    ))
}

fn tag(id: &RequestId) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert(SUBSCRIPTION_ID.into(), id.to_value());
    meta
}

/// The part of the request this server can honour.
fn honoured(server: &Server, requested: &SubscriptionFilter) -> SubscriptionFilter {
    let inner = &server.inner;
    let yes = |asked: Option<bool>, offered: bool| (asked == Some(true) && offered).then_some(true);
    SubscriptionFilter {
        tools_list_changed: yes(requested.tools_list_changed, true),
        prompts_list_changed: yes(requested.prompts_list_changed, inner.prompts_enabled),
        resources_list_changed: yes(requested.resources_list_changed, inner.resources_enabled),
        resource_subscriptions: requested
            .resource_subscriptions
            .clone()
            .filter(|uris| inner.resources_enabled && !uris.is_empty()),
    }
}

fn notifications_for(
    filter: &SubscriptionFilter,
    change: &Change,
    tag: &Map<String, Value>,
) -> Vec<Vec<u8>> {
    let list = |method: &str| vec![encode_notification(method, Some(&json!({ "_meta": tag })))];
    match change {
        Change::ToolsListChanged if filter.tools_list_changed == Some(true) => {
            list(methods::TOOLS_LIST_CHANGED)
        }
        Change::PromptsListChanged if filter.prompts_list_changed == Some(true) => {
            list(methods::PROMPTS_LIST_CHANGED)
        }
        Change::ResourcesListChanged if filter.resources_list_changed == Some(true) => {
            list(methods::RESOURCES_LIST_CHANGED)
        }
        Change::ResourceUpdated(uri)
            if filter
                .resource_subscriptions
                .as_ref()
                .is_some_and(|uris| uris.iter().any(|u| u == &**uri)) =>
        {
            vec![encode_notification(
                methods::RESOURCE_UPDATED,
                Some(&json!({ "uri": &**uri, "_meta": tag })),
            )]
        }
        _ => Vec::new(),
    }
}

fn everything(filter: &SubscriptionFilter, tag: &Map<String, Value>) -> Vec<Vec<u8>> {
    let mut changes = vec![
        Change::ToolsListChanged,
        Change::PromptsListChanged,
        Change::ResourcesListChanged,
    ];
    changes.extend(
        filter
            .resource_subscriptions
            .iter()
            .flatten()
            .map(|u| Change::ResourceUpdated(u.as_str().into())),
    );
    changes
        .iter()
        .flat_map(|c| notifications_for(filter, c, tag))
        .collect()
}
