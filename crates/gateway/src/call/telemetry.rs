//! Traces (`[telemetry]`, off unless configured): one span per call a
//! caller makes through the gateway, and a child span per call to an
//! upstream, exported over OTLP (HTTP, JSON) with the OpenTelemetry SDK.
//!
//! W3C trace context crosses the gateway in `_meta`, as the specification
//! reserves `traceparent`, `tracestate` and `baggage` for it: the caller's
//! context is the parent of the gateway's span, and the upstream receives
//! the child span's. With tracing off, the caller's context is passed on
//! unchanged, so a trace still spans caller and upstream.
//!
//! ```toml
//! [telemetry]
//! otlp = "http://127.0.0.1:4318"      # the collector; /v1/traces is added
//! service_name = "toolgate-gateway"    # the default
//! ```
//!
//! Layer: `call`.

use std::sync::atomic::{AtomicBool, Ordering};

pub use crate::config::TelemetryConfig;
#[cfg(feature = "otlp")]
use bytes::Bytes;
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt as _, TraceFlags, TraceId,
    TraceState, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::SdkTracerProvider;
use toolgate_protocol::trace::TraceContext;

use crate::config::ConfigError;

/// The instrumentation scope of the gateway's spans.
const SCOPE: &str = "toolgate-gateway";

/// Whether an exporter is installed. Without one, no span is built at all:
/// OpenTelemetry's no-op spans still cost a name, attributes and a context
/// switch on every poll, a measurable share of a relayed call.
static ENABLED: AtomicBool = AtomicBool::new(false);

fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// The exporter, installed as the process's tracer provider; flush it
/// before the process ends.
pub struct Telemetry {
    provider: SdkTracerProvider,
}

/// The OTLP exporter's HTTP, on the same reqwest and TLS as the rest of
/// toolgate; requests run on the gateway's runtime (the batch exporter
/// calls from a thread of its own).
#[cfg(feature = "otlp")]
#[derive(Debug)]
struct OtlpHttp {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[cfg(feature = "otlp")]
impl opentelemetry_http::HttpClient for OtlpHttp {
    fn send_bytes<'a, 'b>(
        &'a self,
        request: http::Request<Bytes>,
    ) -> std::pin::Pin<
        Box<
            dyn std::future::Future<
                    Output = Result<http::Response<Bytes>, opentelemetry_http::HttpError>,
                > + Send
                + 'b,
        >,
    >
    where
        'a: 'b,
        Self: 'b,
    {
        let client = self.client.clone();
        let sent = self.runtime.spawn(async move {
            let (parts, body) = request.into_parts();
            let mut builder = client
                .request(parts.method, parts.uri.to_string())
                .body(body);
            for (name, value) in &parts.headers {
                builder = builder.header(name, value);
            }
            let response = builder.send().await?.error_for_status()?;
            let status = response.status();
            let body = response.bytes().await?;
            let mut answer = http::Response::new(body);
            *answer.status_mut() = status;
            Ok::<_, reqwest::Error>(answer)
        });
        Box::pin(async move {
            match sent.await {
                Ok(Ok(answer)) => Ok(answer),
                Ok(Err(e)) => Err(Box::new(e) as opentelemetry_http::HttpError),
                Err(e) => Err(Box::new(e) as opentelemetry_http::HttpError),
            }
        })
    }
}

impl Telemetry {
    /// Start exporting as `config` says; `None` when it names no
    /// collector. Must run inside the gateway's tokio runtime.
    pub fn install(config: &TelemetryConfig) -> Result<Option<Self>, ConfigError> {
        let Some(base) = &config.otlp else {
            return Ok(None);
        };
        Self::export_to(base, config).map(Some)
    }

    /// Without the `otlp` feature there is no exporter: a configured
    /// collector is refused, not silently ignored.
    #[cfg(not(feature = "otlp"))]
    fn export_to(_base: &str, _config: &TelemetryConfig) -> Result<Self, ConfigError> {
        Err(ConfigError::new(
            "[telemetry] otlp: this toolgate was built without the OTLP exporter (the gateway's `otlp` feature); build it with the feature, or remove [telemetry] otlp",
        ))
    }

    /// Export spans to the collector at `base` (OTLP/HTTP, JSON).
    #[cfg(feature = "otlp")]
    fn export_to(base: &str, config: &TelemetryConfig) -> Result<Self, ConfigError> {
        use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
        let endpoint = if base.trim_end_matches('/').ends_with("/v1/traces") {
            base.to_owned()
        } else {
            format!("{}/v1/traces", base.trim_end_matches('/'))
        };
        let client = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none());
        let client = toolgate_client::with_tls(client)
            .and_then(|b| {
                b.build()
                    .map_err(|e| toolgate_client::ClientError::transport(e.to_string()))
            })
            .map_err(|e| ConfigError::because("[telemetry]", e))?;
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| ConfigError::because("[telemetry]: no async runtime to export from", e))?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(OtlpHttp { client, runtime })
            .with_protocol(opentelemetry_otlp::Protocol::HttpJson)
            .with_endpoint(endpoint)
            .build()
            .map_err(|e| {
                ConfigError::because(
                    format!("[telemetry] otlp {}", toolgate_protocol::redact::url(base)),
                    e,
                )
            })?;
        let service = config.service_name.clone().unwrap_or_else(|| SCOPE.into());
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name(service)
                    .build(),
            )
            .build();
        opentelemetry::global::set_tracer_provider(provider.clone());
        ENABLED.store(true, Ordering::Relaxed);
        Ok(Self { provider })
    }

    /// Export what is buffered (waits for the collector, bounded by its
    /// timeout).
    pub async fn flush(&self) {
        let provider = self.provider.clone();
        let _ = tokio::task::spawn_blocking(move || provider.force_flush()).await;
    }
}

/// The caller's trace context as an OpenTelemetry parent.
fn parent(trace: Option<&TraceContext>) -> Context {
    let Some(t) = trace else {
        return Context::new();
    };
    let (Ok(trace_id), Ok(span_id)) = (
        TraceId::from_hex(t.trace_id()),
        SpanId::from_hex(t.parent_id()),
    ) else {
        return Context::new();
    };
    let flags = if t.sampled() {
        TraceFlags::SAMPLED
    } else {
        TraceFlags::default()
    };
    let state = t
        .tracestate
        .as_deref()
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    Context::new().with_remote_span_context(SpanContext::new(trace_id, span_id, flags, true, state))
}

/// The span of a call a caller made to gateway tool `tool` of `upstream`;
/// `None` with tracing off.
pub fn call_span(trace: Option<&TraceContext>, tool: &str, upstream: &str) -> Option<Context> {
    if !enabled() {
        return None;
    }
    let tracer = opentelemetry::global::tracer_provider().tracer(SCOPE);
    let parent = parent(trace);
    let span = tracer
        .span_builder(format!("tools/call {tool}"))
        .with_kind(SpanKind::Server)
        .with_attributes([
            KeyValue::new("mcp.method.name", "tools/call"),
            KeyValue::new("gen_ai.operation.name", "execute_tool"),
            KeyValue::new("gen_ai.tool.name", tool.to_owned()),
            KeyValue::new("toolgate.upstream", upstream.to_owned()),
        ])
        .start_with_context(&tracer, &parent);
    Some(parent.with_span(span))
}

/// A span for the request `method` (of the upstream's `tool`, for a call)
/// under the current one, and the trace context to send with it: the new
/// span's, or (tracing off: no span) the caller's own.
pub fn upstream_span(
    method: &str,
    tool: Option<&str>,
    caller: Option<&TraceContext>,
) -> (Option<Context>, Option<TraceContext>) {
    if !enabled() {
        return (None, caller.cloned());
    }
    let tracer = opentelemetry::global::tracer_provider().tracer(SCOPE);
    let current = Context::current();
    let mut attributes = vec![KeyValue::new("mcp.method.name", method.to_owned())];
    let name = match tool {
        Some(tool) => {
            attributes.push(KeyValue::new("gen_ai.tool.name", tool.to_owned()));
            format!("{method} {tool}")
        }
        None => method.to_owned(),
    };
    let span = tracer
        .span_builder(name)
        .with_kind(SpanKind::Client)
        .with_attributes(attributes)
        .start_with_context(&tracer, &current);
    let sc = span.span_context().clone();
    let cx = current.with_span(span);
    let trace = if sc.is_valid() {
        TraceContext::child(
            &sc.trace_id().to_string(),
            &sc.span_id().to_string(),
            sc.is_sampled(),
        )
        .map(|mut t| {
            t.tracestate = caller.and_then(|c| c.tracestate.clone());
            t.baggage = caller.and_then(|c| c.baggage.clone());
            t
        })
    } else {
        caller.cloned()
    };
    (Some(cx), trace)
}

/// Mark the span of `cx` (if tracing is on) failed with `why`.
pub fn failed(cx: Option<&Context>, why: &str) {
    if let Some(cx) = cx {
        cx.span().set_status(Status::error(why.to_owned()));
    }
}
