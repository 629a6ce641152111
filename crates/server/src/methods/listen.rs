//! `subscriptions/listen`: an acknowledgement, then only the requested
//! change notifications, each tagged with the subscription id, until the
//! client goes away or the server shuts down.

use std::collections::VecDeque;
use std::sync::Arc;

use futures::stream;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::sync::broadcast::{self, error::RecvError};
use toolgate_protocol::jsonrpc::{Request, encode_notification};
use toolgate_protocol::meta::RequestMeta;
use toolgate_protocol::meta::SUBSCRIPTION_ID;
use toolgate_protocol::types::{SubscriptionFilter, TASKS_EXTENSION, methods};
use toolgate_protocol::{RequestId, RpcError};

use super::{Failure, params};
use crate::Server;
use crate::dispatch::TransportContext;
use crate::exchange::{Exchange, Frame, Reply};
use crate::registry::Change;
use crate::tasks::TaskEvent;

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
    let tasks = &server.inner.tasks;
    let task_ids = requested
        .task_ids
        .clone()
        .filter(|ids| tasks.enabled() && !ids.is_empty());
    if task_ids.is_some() && !meta.client_capabilities.has_extension(TASKS_EXTENSION) {
        return Err((
            req.id,
            crate::tasks::extension_required("subscribing to task notifications"),
        ));
    }
    let honoured = honoured(server, &requested);
    let mut pending = VecDeque::with_capacity(1);
    if task_ids.is_none() {
        pending.push_back(ack(&honoured, &tag(&req.id)));
    }
    // Subscribe before acknowledging, so no change between the two is lost.
    let state = Listening {
        changes: server.inner.bus.subscribe(),
        tasks: task_ids.map(|ids| {
            Box::new(Following {
                changes: tasks.events.subscribe(),
                unresolved: Some(ids),
                owner: transport
                    .auth
                    .as_ref()
                    .and_then(|a| a.subject())
                    .map(str::to_owned),
            })
        }),
        server: server.clone(),
        id: req.id,
        honoured,
        shared_channel: !transport.stream_per_request,
        pending,
        ended: false,
    };
    // A stream rather than work behind a channel: an open subscription is
    // then just this state and the future waiting on the change bus. The
    // state is boxed apart from that future: `unfold` keeps room for both
    // side by side, and thousands of idle streams pay for every byte.
    Ok(Reply::Streaming(Exchange::from_stream(Box::pin(
        stream::unfold(Box::new(state), |mut state| async move {
            let frame = state.next().await?;
            Some((frame, state))
        }),
    ))))
}

/// An open subscription.
struct Listening {
    server: Server,
    changes: broadcast::Receiver<Change>,
    /// What following tasks takes, when the stream asked for tasks
    /// (boxed: most streams follow none, and every byte here is paid by
    /// each open stream).
    tasks: Option<Box<Following>>,
    /// The listen request's id, which tags every frame (the tag is built
    /// when a frame is: notifications are rare, open streams many).
    id: RequestId,
    honoured: SubscriptionFilter,
    shared_channel: bool,
    /// Frames ready to go, oldest first.
    pending: VecDeque<Frame>,
    /// The closing frames are queued; nothing follows them.
    ended: bool,
}

/// The task side of a subscription.
struct Following {
    /// Task changes.
    changes: broadcast::Receiver<Arc<TaskEvent>>,
    /// Task ids asked for and not yet looked up; the acknowledgement
    /// waits for them.
    unresolved: Option<Vec<String>>,
    /// The caller's subject: only its own tasks are reported.
    owner: Option<String>,
}

/// What woke a waiting subscription.
enum Woken {
    Shutdown,
    Change(Result<Change, RecvError>),
    /// A task event (`None`: some were missed).
    Task(Option<Arc<TaskEvent>>),
}

impl Listening {
    async fn next(&mut self) -> Option<Frame> {
        if let Some(ids) = self.tasks.as_mut().and_then(|t| t.unresolved.take()) {
            // Boxed: once per stream, and its store lookups would otherwise
            // size every idle stream's waiting future.
            Box::pin(self.resolve_tasks(ids)).await;
        }
        loop {
            if let Some(frame) = self.pending.pop_front() {
                if self.pending.is_empty() {
                    // An idle stream holds no queue (frames are rare).
                    self.pending.shrink_to_fit();
                }
                return Some(frame);
            }
            if self.ended {
                return None;
            }
            // Streams that follow tasks wait on a third source, boxed so
            // that the many that follow none keep a smaller waiting future.
            let woken = if self.tasks.is_some() {
                Box::pin(self.wait_with_tasks()).await
            } else {
                self.wait().await
            };
            let change = match woken {
                Woken::Shutdown => None,
                Woken::Change(change) => Some(change),
                Woken::Task(event) => {
                    if let Some(event) = event {
                        self.task_event(&event);
                    }
                    continue;
                }
            };
            let frames = match change {
                Some(Ok(change)) => notifications_for(&self.honoured, &change, &tag(&self.id)),
                // We fell behind: say everything this stream cares about
                // may have changed rather than miss something.
                Some(Err(RecvError::Lagged(_))) => everything(&self.honoured, &tag(&self.id)),
                None | Some(Err(RecvError::Closed)) => {
                    self.close();
                    continue;
                }
            };
            self.pending
                .extend(frames.into_iter().map(Frame::Notification));
        }
    }

    /// The next change, or shutdown.
    async fn wait(&mut self) -> Woken {
        tokio::select! {
            _ = self.server.inner.shutdown.cancelled() => Woken::Shutdown,
            change = self.changes.recv() => Woken::Change(change),
        }
    }

    /// [`Listening::wait`], or the next event of a followed task.
    async fn wait_with_tasks(&mut self) -> Woken {
        tokio::select! {
            _ = self.server.inner.shutdown.cancelled() => Woken::Shutdown,
            change = self.changes.recv() => Woken::Change(change),
            event = next_task_event(&mut self.tasks) => Woken::Task(event),
        }
    }

    /// Acknowledge with the task ids this caller may follow, then send each
    /// one's current state (it may have changed before the stream opened).
    async fn resolve_tasks(&mut self, ids: Vec<String>) {
        let tasks = &self.server.inner.tasks;
        let mut honoured_ids = Vec::new();
        let mut states = Vec::new();
        let owner = self.tasks.as_ref().and_then(|t| t.owner.as_deref());
        // A bounded list: each id costs a store read.
        for id in ids.into_iter().take(MAX_TASK_IDS) {
            if honoured_ids.contains(&id) {
                continue;
            }
            if let Ok(record) = tasks.find(&id, owner).await {
                honoured_ids.push(id);
                states.push(record.task);
            }
        }
        self.honoured.task_ids = Some(honoured_ids);
        let tag = tag(&self.id);
        self.pending.push_back(ack(&self.honoured, &tag));
        for task in &states {
            self.pending.extend(crate::tasks::notification(task, &tag));
        }
    }

    fn task_event(&mut self, event: &TaskEvent) {
        let followed = self
            .honoured
            .task_ids
            .as_ref()
            .is_some_and(|ids| ids.contains(&event.task.task.task_id));
        let owner = self.tasks.as_ref().and_then(|t| t.owner.as_ref());
        if followed && event.owner.as_ref() == owner {
            self.pending
                .extend(crate::tasks::notification(&event.task, &tag(&self.id)));
        }
    }

    /// Server-initiated end: a graceful completion result, and on a shared
    /// channel the cancellation that ends the subscription.
    fn close(&mut self) {
        self.ended = true;
        let mut result = Map::new();
        result.insert("_meta".into(), Value::Object(tag(&self.id)));
        self.pending
            .push_back(self.server.result_frame(&self.id, &result));
        if self.shared_channel {
            let cancelled = json!({ "requestId": self.id, "reason": "server shutting down" });
            self.pending
                .push_back(Frame::Notification(encode_notification(
                    methods::CANCELLED,
                    Some(&cancelled),
                )));
        }
    }
}

/// At most this many task ids are followed per stream.
const MAX_TASK_IDS: usize = 256;

/// The next task change; never resolves when the stream follows no task.
/// A lagging receiver skips what it missed (the client can poll).
async fn next_task_event(following: &mut Option<Box<Following>>) -> Option<Arc<TaskEvent>> {
    let Some(rx) = following.as_mut().map(|f| &mut f.changes) else {
        return std::future::pending().await;
    };
    match rx.recv().await {
        Ok(event) => Some(event),
        Err(RecvError::Lagged(_)) => None,
        Err(RecvError::Closed) => std::future::pending().await,
    }
}

fn ack(honoured: &SubscriptionFilter, tag: &Map<String, Value>) -> Frame {
    let ack = json!({ "notifications": honoured, "_meta": tag });
    Frame::Notification(encode_notification(
        methods::SUBSCRIPTIONS_ACKNOWLEDGED,
        Some(&ack),
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
        task_ids: None,
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
