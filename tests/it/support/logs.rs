//! The crate's WARN lines, captured for one test: [`capture_warnings`].
//!
//! A capture is a thread-local default subscriber, so it sees what the test's own runtime
//! (a current-thread one, as `#[tokio::test]` makes) logs. tracing-core caches whether a
//! log line is wanted per line of code, for the whole process; while only one dispatcher
//! is registered, it asks only the dispatcher of the thread that first reaches the line,
//! and another test's thread, with none, would make it "never" for every test. A second
//! dispatcher kept alive with the capture keeps every registered one asked.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt as _};

/// One WARN line of the crate: its message and its other fields (` name=value` each).
#[derive(Clone, Debug, Default)]
pub struct Line {
    pub message: String,
    pub fields: String,
}

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }
}

/// The lines captured so far.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<Line>>>);

impl Captured {
    /// The lines whose message is `message`.
    pub fn lines(&self, message: &str) -> Vec<Line> {
        let lines = self.0.lock().unwrap();
        lines
            .iter()
            .filter(|l| l.message == message)
            .cloned()
            .collect()
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Captured {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let meta = event.metadata();
        if *meta.level() == tracing::Level::WARN && meta.target().starts_with("introspect") {
            let mut line = Line::default();
            event.record(&mut line);
            self.0.lock().unwrap().push(line);
        }
    }
}

/// Captures the crate's WARN lines on this thread while the guard lives.
pub struct Capture {
    pub captured: Captured,
    _default: tracing::subscriber::DefaultGuard,
    _second: tracing::Dispatch,
}

/// Starts capturing; see the module docs.
pub fn capture_warnings() -> Capture {
    let second = tracing::Dispatch::new(tracing::subscriber::NoSubscriber::default());
    let captured = Captured::default();
    let default =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(captured.clone()));
    Capture {
        captured,
        _default: default,
        _second: second,
    }
}
