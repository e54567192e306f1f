//! Quiet logs under a long outage: a subscription whose store is down writes at most one
//! warning per cause per interval, each with the count of the ones it suppressed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::faulty::FaultyStore;
use crate::support::records::{HOUR, ORDERS, Records, orders};
use introspect::model::keys;
use introspect::{Error, MemoryStore, Resolver, ServiceInstance, Store, Subscription};
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt as _};

/// The crate's aggregation interval: one line per cause per 10 s.
const INTERVAL: Duration = Duration::from_secs(10);
/// How long the store stays down.
const OUTAGE: Duration = Duration::from_secs(120);

/// One WARN line: its message and its `suppressed` count.
#[derive(Debug)]
struct Line {
    message: String,
    suppressed: u64,
}

/// A layer that keeps the WARN events of the crate.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<Line>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Captured {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        if *event.metadata().level() != tracing::Level::WARN
            || !event.metadata().target().starts_with("introspect")
        {
            return;
        }
        let mut line = Line {
            message: String::new(),
            suppressed: 0,
        };
        event.record(&mut line);
        self.0.lock().unwrap().push(line);
    }
}

impl Visit for Line {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "suppressed" {
            self.suppressed = value;
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_long_outage_writes_one_warning_per_cause_per_interval() {
    let captured = Captured::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(captured.clone()));

    let memory = Arc::new(MemoryStore::new());
    let faulty = Arc::new(FaultyStore::new(memory.clone()));
    let records = Records::new(memory.clone() as Arc<dyn Store>);
    for (app, port) in [("shop-orders", 1000), ("shop-orders-eu", 2000)] {
        records.fleet(&orders(app), port, 3, HOUR).await;
    }
    let resolver = Resolver::new(faulty.clone() as Arc<dyn Store>);
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    assert_eq!(handle.current().len(), 6);
    assert!(captured.0.lock().unwrap().is_empty());

    // The store goes down and its watches break: every source re-reads, and fails, for
    // the whole outage.
    faulty.set_down(true);
    memory.cancel_watches();
    tokio::time::sleep(OUTAGE).await;
    faulty.set_down(false);

    let lines = std::mem::take(&mut *captured.0.lock().unwrap());
    let mut by_cause: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for line in &lines {
        by_cause
            .entry(line.message.as_str())
            .or_default()
            .push(line.suppressed);
    }
    // Causes: the mapping read and each app's list (the message says which; the subject,
    // a field, tells the two apps apart).
    assert!(
        by_cause.contains_key("cannot read the mapping; retrying"),
        "{lines:#?}"
    );
    let lists = &by_cause["cannot list instances; retrying"];
    let per_cause_bound = (OUTAGE.as_secs() / INTERVAL.as_secs() + 1) as usize;
    assert!(
        by_cause["cannot read the mapping; retrying"].len() <= per_cause_bound,
        "{lines:#?}"
    );
    assert!(lists.len() <= 2 * per_cause_bound, "{lines:#?}");
    // The retries did go on (backoff up to 10 s: more tries than lines), and the lines
    // say how many were left out.
    let suppressed: u64 = lines.iter().map(|l| l.suppressed).sum();
    assert!(suppressed > 0, "{lines:#?}");
    // The set held through it all.
    assert_eq!(handle.current().len(), 6);
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[tokio::test]
async fn failed_metadata_fetches_write_one_warning_per_app_per_interval() {
    let captured = Captured::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(captured.clone()));

    // Three instances of one revision whose MetadataService refuses every connection.
    let members: Vec<Arc<ServiceInstance>> = (0..3)
        .map(|_| {
            let port = closed_port();
            let mut i = ServiceInstance::new("shop-orders", "127.0.0.1", port);
            i.metadata.insert(keys::REVISION.into(), "r1".into());
            i.metadata.insert(
                keys::METADATA_SERVICE_URL_PARAMS.into(),
                format!(r#"{{"port":"{port}","protocol":"tri","version":"2.0.0"}}"#),
            );
            i.metadata.insert(keys::META_V.into(), "2.0.0".into());
            Arc::new(i)
        })
        .collect();
    let refs: Vec<&Arc<ServiceInstance>> = members.iter().collect();
    let resolver = Resolver::new(Arc::new(MemoryStore::new()) as Arc<dyn Store>);

    let started = std::time::Instant::now();
    for _ in 0..20 {
        let error = resolver
            .metadata("shop-orders", "r1", &refs)
            .await
            .unwrap_err();
        assert!(
            matches!(error, Error::MetadataUnavailable { .. }),
            "{error}"
        );
    }
    let elapsed = started.elapsed();

    let failures = resolver.stats().await.fetch_failures;
    assert_eq!(failures, 60, "every member tried on every call");
    let lines = captured.0.lock().unwrap();
    let fetch_lines = lines
        .iter()
        .filter(|l| l.message == "metadata fetch failed; trying another instance")
        .count();
    // One line per interval of the run (normally the run takes well under one).
    let bound = (elapsed.as_secs() / INTERVAL.as_secs() + 1) as usize;
    assert!(
        (1..=bound).contains(&fetch_lines),
        "{fetch_lines} lines for {failures} failures in {elapsed:?}: {lines:#?}"
    );
}
