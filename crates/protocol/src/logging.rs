//! Log setup shared by every binary of the workspace (the `logging`
//! feature): the CLI, the example servers and the conformance programs log
//! the same way.
//!
//! - Logs go to stderr. On stdio, stdout carries protocol messages only.
//! - Colour and timestamps only when stderr is a terminal. `NO_COLOR` (any
//!   non-empty value, <https://no-color.org>) turns colour off everywhere.
//! - `RUST_LOG` overrides the level given by the program (for example
//!   `RUST_LOG=toolgate_client=debug`).
//! - A warning or error with the same text is shown once per process: a
//!   user cannot act on the twentieth copy of the same complaint.
//! - Field values are printed by `tracing-subscriber`, which escapes
//!   terminal control sequences in them.
//!
//! ```no_run
//! toolgate_protocol::logging::init("info");
//! tracing::info!("serving");
//! ```

use parking_lot::Mutex;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::io::IsTerminal as _;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::{Context, Filter, SubscriberExt as _};
use tracing_subscriber::util::SubscriberInitExt as _;

/// Install the process's log subscriber. `default_level` applies when
/// `RUST_LOG` is unset (`"warn"`, `"info"`, or any `EnvFilter` directive).
/// Calling it twice keeps the first subscriber.
pub fn init(default_level: &str) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let terminal = std::io::stderr().is_terminal();
    let colour = terminal && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let format = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_target(false);
    let registry = tracing_subscriber::registry().with(filter);
    let result = if terminal {
        registry
            .with(format.with_filter(Once::default()))
            .try_init()
    } else {
        registry
            .with(format.without_time().with_filter(Once::default()))
            .try_init()
    };
    // A subscriber already installed (a test harness, a second call) wins.
    drop(result);
}

/// Lets each distinct warning or error through once; lower levels pass.
#[derive(Default)]
struct Once {
    seen: Mutex<HashSet<String>>,
}

impl<S: Subscriber> Filter<S> for Once {
    fn enabled(&self, _meta: &Metadata<'_>, _cx: &Context<'_, S>) -> bool {
        true
    }

    fn event_enabled(&self, event: &Event<'_>, _cx: &Context<'_, S>) -> bool {
        if *event.metadata().level() > Level::WARN {
            return true;
        }
        let mut key = Key(format!("{}:", event.metadata().name()));
        event.record(&mut key);
        let mut seen = self.seen.lock();
        // Bounded: past this many distinct texts, repeats are no longer
        // tracked (and shown again) rather than the set growing forever.
        if seen.len() >= 4096 {
            return !seen.contains(&key.0);
        }
        seen.insert(key.0)
    }
}

/// The text of an event's fields, as a deduplication key.
struct Key(String);

impl Visit for Key {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, " {}={value:?}", field.name());
    }
}

#[cfg(test)]
mod tests {
    use parking_lot::Mutex;
    use std::sync::Arc;

    use tracing_subscriber::fmt::MakeWriter;
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::Once;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'a self) -> Buffer {
            self.clone()
        }
    }

    #[test]
    fn a_repeated_warning_is_shown_once_and_info_is_not_deduplicated() {
        let buffer = Buffer::default();
        let layer = tracing_subscriber::fmt::layer()
            .with_writer(buffer.clone())
            .with_ansi(false)
            .without_time();
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::Layer::with_filter(layer, Once::default()),
        );
        tracing::subscriber::with_default(subscriber, || {
            for _ in 0..3 {
                tracing::warn!(tool = "a", "ignoring a malformed tool definition");
                tracing::info!("progress");
            }
            tracing::warn!(tool = "b", "ignoring a malformed tool definition");
        });
        let text = String::from_utf8(buffer.0.lock().clone()).unwrap_or_default();
        assert_eq!(text.matches("tool=\"a\"").count(), 1, "{text}");
        assert_eq!(text.matches("tool=\"b\"").count(), 1, "{text}");
        assert_eq!(text.matches("progress").count(), 3, "{text}");
        assert!(!text.contains('\u{1b}'), "no colour codes: {text}");
    }
}
