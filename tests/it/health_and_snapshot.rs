//! Consumer-side health and the local snapshot.
//!
//! Health runs on the paused clock with an injected probe (no sockets): every wait is
//! virtual and every check follows something observed (reports applied, probes made).
//! The snapshot tests write real files, so they run on real time with bounded waits.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::support::faulty::FaultyStore;
use crate::support::records::{Records, ports};
use crate::support::wait::eventually;
use introspect::consumer::{CoalesceOptions, HealthOptions, SnapshotOptions, SubscribeOptions};
use introspect::{MemoryStore, Resolver, ServiceInfo, Store, Subscription};

const ORDERS: &str = "shop.OrderService";
const HOUR: Duration = Duration::from_secs(3600);
/// Bound of every wait.
const LIMIT: Duration = Duration::from_secs(5);
const PROBE_INTERVAL: Duration = Duration::from_millis(50);

fn orders() -> introspect::MetadataInfo {
    Records::metadata("shop-a", &[ServiceInfo::new(ORDERS)])
}

/// A probe whose answer the test sets, counting its calls; with `panics`, the first call
/// panics.
#[derive(Clone, Default)]
struct FakeProbe {
    answers: Arc<AtomicBool>,
    calls: Arc<AtomicU64>,
    panics: bool,
}

impl FakeProbe {
    /// A short coalescing window, and health probing with this probe.
    fn options(&self, threshold: u32) -> (SubscribeOptions, HealthOptions) {
        let probe = self.clone();
        let subscribe = SubscribeOptions::default()
            .coalesce(CoalesceOptions::default().window(Duration::from_millis(10)));
        let health = HealthOptions::default()
            .failure_threshold(threshold)
            .probe_interval(PROBE_INTERVAL)
            .probe(move |_address: String, _timeout: Duration| {
                let call = probe.calls.fetch_add(1, Ordering::SeqCst);
                let answers = probe.answers.load(Ordering::SeqCst);
                let panics = probe.panics && call == 0;
                async move {
                    assert!(!panics, "a probe that panics");
                    answers
                }
            });
        (subscribe, health)
    }

    fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }
}

/// A subscription to two instances (ports 1000 and 1001) in the embedded store.
async fn two_instances(
    (options, health): (SubscribeOptions, HealthOptions),
) -> (
    Resolver,
    introspect::SubscriptionHandle,
    introspect::Endpoint,
) {
    let records = Records::new(Arc::new(MemoryStore::new()));
    records.fleet(&orders(), 1000, 2, HOUR).await;
    let resolver = Resolver::builder(records.store.clone())
        .subscribe_options(options)
        .health(health)
        .build();
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    assert_eq!(ports(&handle.current()), [1000, 1001]);
    let bad = handle.current()[1].clone();
    assert_eq!(bad.port, 1001);
    (resolver, handle, bad)
}

/// Waits until the resolver has applied `n` health reports.
async fn reports_applied(resolver: &Resolver, n: u64) {
    eventually(LIMIT, "the reports to be applied", || async {
        resolver.stats().await.health_reports >= n
    })
    .await;
}

/// Waits until the subscription's healthy view has these ports.
async fn set_is(handle: &introspect::SubscriptionHandle, expected: &[u16], what: &str) {
    eventually(LIMIT, what, || async {
        ports(&handle.healthy()) == expected
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn a_failing_endpoint_is_set_aside_and_probed_until_it_answers() {
    let probe = FakeProbe::default();
    let (resolver, handle, bad) = two_instances(probe.options(3)).await;

    // Failures that are not consecutive do not count.
    handle.report_failure(&bad);
    handle.report_failure(&bad);
    handle.report_success(&bad);
    handle.report_failure(&bad);
    handle.report_failure(&bad);
    reports_applied(&resolver, 5).await;
    assert_eq!(resolver.stats().await.set_aside, 0);
    assert_eq!(ports(&handle.current()), [1000, 1001]);
    assert_eq!(probe.calls(), 0, "nothing to probe");

    // The third consecutive failure sets it aside.
    handle.report_failure(&bad);
    set_is(&handle, &[1000], "the failing endpoint set aside").await;
    assert_eq!(resolver.stats().await.set_aside, 1);
    assert!(handle.is_set_aside(&bad));
    assert_eq!(
        ports(&handle.current()),
        [1000, 1001],
        "discovery still lists it: health is a view beside the set"
    );

    // Probes keep failing while it does not answer: it stays aside.
    eventually(LIMIT, "three failed probes", || async {
        probe.calls() >= 3
    })
    .await;
    assert_eq!(ports(&handle.healthy()), [1000]);
    assert!(resolver.stats().await.probes >= 3);

    // It answers again: the next probe brings it back.
    probe.answers.store(true, Ordering::SeqCst);
    set_is(&handle, &[1000, 1001], "the endpoint back after a probe").await;

    // Setting every endpoint aside would leave nothing: then none is left out.
    for _ in 0..3 {
        for e in handle.current().iter() {
            handle.report_failure(e);
        }
    }
    eventually(LIMIT, "both endpoints set aside", || async {
        resolver.stats().await.set_aside == 3
    })
    .await;
    assert!(handle.current().iter().all(|e| handle.is_set_aside(e)));
    assert_eq!(ports(&handle.healthy()), [1000, 1001]);
}

#[tokio::test(start_paused = true)]
async fn a_probe_that_panics_counts_as_failed_and_probing_goes_on() {
    let probe = FakeProbe {
        answers: Arc::new(AtomicBool::new(true)),
        panics: true,
        ..Default::default()
    };
    let (_resolver, handle, bad) = two_instances(probe.options(1)).await;
    handle.report_failure(&bad);
    set_is(&handle, &[1000], "the failing endpoint set aside").await;
    // The first probe panics; the next one answers and brings the endpoint back.
    set_is(&handle, &[1000, 1001], "the endpoint back after the panic").await;
    assert_eq!(probe.calls(), 2);
}

#[tokio::test]
async fn a_consumer_started_with_the_store_down_serves_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let snapshots = SnapshotOptions::new(dir.path());
    let path = snapshots.path_for(&Subscription::new(ORDERS));
    let options = SubscribeOptions::default()
        .snapshot(snapshots)
        .start_timeout(Duration::from_millis(200));
    let with = |store: Arc<dyn Store>| {
        Resolver::builder(store)
            .subscribe_options(options.clone())
            .build()
    };
    let info = orders();

    // A first run writes the snapshot.
    {
        let records = Records::new(Arc::new(MemoryStore::new()));
        records.fleet(&info, 1000, 3, HOUR).await;
        let resolver = with(records.store.clone());
        let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
        assert_eq!(handle.current().len(), 3);
        eventually(LIMIT, "the snapshot written", || async {
            resolver.stats().await.snapshot_writes > 0
        })
        .await;
        assert!(!handle.serving_snapshot());
    }
    assert!(path.exists());

    // The next start finds the store down: it serves the snapshot, and keeps trying.
    let memory = Arc::new(MemoryStore::new());
    let flaky = Arc::new(FaultyStore::new(memory.clone()));
    flaky.set_down(true);
    let resolver = with(flaky.clone() as Arc<dyn Store>);
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    assert_eq!(ports(&handle.current()), [1000, 1001, 1002]);
    assert!(handle.serving_snapshot());
    assert_eq!(resolver.stats().await.snapshot_loads, 1);
    assert_eq!(
        resolver.stats().await.report_reads,
        0,
        "metadata came from the snapshot"
    );

    // The store comes back with one more instance: the subscription goes live.
    let records = Records::new(memory.clone() as Arc<dyn Store>);
    records.fleet(&info, 1000, 4, HOUR).await;
    flaky.set_down(false);
    set_is(&handle, &[1000, 1001, 1002, 1003], "the live set").await;
    // Live once the mapping is read too; then the live set's snapshot is written (let it
    // land before tampering with the file).
    eventually(LIMIT, "the live snapshot written", || async {
        !handle.serving_snapshot() && resolver.stats().await.snapshot_writes > 0
    })
    .await;
    drop(handle);
    eventually(
        LIMIT,
        "the subscription (and its writes) to end",
        || async { resolver.stats().await.subscriptions == 0 },
    )
    .await;

    // A truncated snapshot is ignored with a warning; the store being down, the set is empty.
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    flaky.set_down(true);
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    assert!(handle.current().is_empty());
    assert!(!handle.serving_snapshot());
    assert_eq!(resolver.stats().await.snapshot_loads, 1);
}
