use toolgate_protocol::RequestId;
use toolgate_protocol::types::{
    CacheScope, DiscoverResult, ListCapability, ResourcesCapability, ResultType, ServerCapabilities,
};
use toolgate_protocol::version::MODERN_VERSIONS;

use crate::Server;
use crate::exchange::Reply;

pub(super) fn discover(server: &Server, id: &RequestId) -> Reply {
    let result = DiscoverResult {
        result_type: ResultType::Complete,
        supported_versions: MODERN_VERSIONS.iter().map(|v| (*v).to_owned()).collect(),
        capabilities: capabilities(server),
        instructions: server.inner.instructions.clone(),
        ttl_ms: Some(millis(server.inner.config.discover_ttl)),
        cache_scope: Some(CacheScope::Public),
        meta: None,
    };
    Reply::Done(server.result_frame(id, &result))
}

pub(crate) fn millis(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// What this server offers. Lists always support change notifications,
/// delivered on `subscriptions/listen`.
pub(crate) fn capabilities(server: &Server) -> ServerCapabilities {
    let inner = &server.inner;
    let list = || {
        Some(ListCapability {
            list_changed: Some(true),
        })
    };
    ServerCapabilities {
        tools: list(),
        prompts: if inner.prompts_enabled { list() } else { None },
        resources: inner.resources_enabled.then_some(ResourcesCapability {
            subscribe: Some(true),
            list_changed: Some(true),
        }),
        logging: Some(Default::default()),
        completions: inner.completions_enabled.then(Default::default),
        extensions: inner.tasks.enabled().then(|| {
            let mut extensions = serde_json::Map::new();
            extensions.insert(
                toolgate_protocol::types::TASKS_EXTENSION.into(),
                serde_json::Value::Object(serde_json::Map::new()),
            );
            extensions
        }),
        ..Default::default()
    }
}
