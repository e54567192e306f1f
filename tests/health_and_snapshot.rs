//! Consumer-side health and the local snapshot. Real time with short, bounded waits: probes
//! are real TCP connects and snapshot writes real files.

mod support;

use std::sync::Arc;
use std::time::Duration;

use introspect::consumer::{CoalesceOptions, HealthOptions, SnapshotOptions, SubscribeOptions};
use introspect::{Endpoint, MemoryStore, Resolver, ServiceInfo, Store, Subscription};
use support::faulty::FaultyStore;
use support::records::{Records, ports};
use tokio::net::TcpListener;
use tokio::time::timeout;

const ORDERS: &str = "shop.OrderService";
const HOUR: Duration = Duration::from_secs(3600);

fn orders() -> introspect::MetadataInfo {
    Records::metadata("shop-a", &[ServiceInfo::new(ORDERS)])
}

/// Waits (at most 5 s) until the handle's set satisfies `done`.
async fn until(
    handle: &mut introspect::SubscriptionHandle,
    done: impl Fn(&[Endpoint]) -> bool,
) -> Arc<Vec<Endpoint>> {
    timeout(Duration::from_secs(5), async {
        loop {
            let set = handle.current();
            if done(&set) {
                return set;
            }
            handle.changed().await.unwrap();
        }
    })
    .await
    .expect("the set reached the expected state in time")
}

#[tokio::test]
async fn a_failing_endpoint_is_set_aside_and_probed_until_it_answers() {
    let up = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up_port = up.local_addr().unwrap().port();
    let down = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let down_port = down.local_addr().unwrap().port();
    drop(down);

    let records = Records::new(Arc::new(MemoryStore::new()));
    let info = orders();
    records.publish(&info).await;
    for port in [up_port, down_port] {
        records
            .register(&Records::instance(&info, port), None)
            .await;
    }
    let resolver = Resolver::new(records.store.clone());
    let options = SubscribeOptions::default()
        .coalesce(CoalesceOptions::default().window(Duration::from_millis(10)))
        .health(
            HealthOptions::default()
                .failure_threshold(3)
                .probe_interval(Duration::from_millis(50))
                .probe_timeout(Duration::from_millis(500)),
        );
    let mut handle = resolver
        .subscribe_with(Subscription::new(ORDERS), options)
        .await
        .unwrap();
    assert_eq!(handle.current().len(), 2);
    let bad = handle
        .current()
        .iter()
        .find(|e| e.port == down_port)
        .cloned()
        .unwrap();

    // Failures that are not consecutive do not count.
    handle.report_failure(&bad);
    handle.report_failure(&bad);
    handle.report_success(&bad);
    handle.report_failure(&bad);
    handle.report_failure(&bad);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(handle.current().len(), 2);
    // The third consecutive failure sets it aside.
    handle.report_failure(&bad);
    let set = until(&mut handle, |s| s.len() == 1).await;
    assert_eq!(ports(&set), [up_port]);
    assert_eq!(resolver.stats().await.set_aside, 1);

    // Probes keep failing while nothing listens.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(handle.current().len(), 1);
    assert!(resolver.stats().await.probes >= 2);

    // It answers again: the next probe brings it back.
    let _back = TcpListener::bind(("127.0.0.1", down_port)).await.unwrap();
    let set = until(&mut handle, |s| s.len() == 2).await;
    let mut expected = vec![up_port, down_port];
    expected.sort_unstable();
    assert_eq!(ports(&set), expected);

    // Setting every endpoint aside would leave nothing: then none is left out.
    for _ in 0..3 {
        for e in handle.current().iter() {
            handle.report_failure(e);
        }
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(handle.current().len(), 2);
    drop(up);
}

#[tokio::test]
async fn a_consumer_started_with_the_store_down_serves_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("orders.snapshot");
    let options = SubscribeOptions::default()
        .snapshot(SnapshotOptions::new(&path))
        .start_timeout(Duration::from_millis(200));
    let info = orders();

    // A first run writes the snapshot.
    {
        let records = Records::new(Arc::new(MemoryStore::new()));
        records.fleet(&info, 1000, 3, HOUR).await;
        let resolver = Resolver::new(records.store.clone());
        let handle = resolver
            .subscribe_with(Subscription::new(ORDERS), options.clone())
            .await
            .unwrap();
        assert_eq!(handle.current().len(), 3);
        timeout(Duration::from_secs(5), async {
            while resolver.stats().await.snapshot_writes == 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("snapshot written");
        assert!(!handle.serving_snapshot());
    }
    assert!(path.exists());

    // The next start finds the store down: it serves the snapshot, and keeps trying.
    let memory = Arc::new(MemoryStore::new());
    let flaky = Arc::new(FaultyStore::new(memory.clone()));
    flaky.set_down(true);
    let resolver = Resolver::new(flaky.clone() as Arc<dyn Store>);
    let mut handle = resolver
        .subscribe_with(Subscription::new(ORDERS), options.clone())
        .await
        .unwrap();
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
    let set = until(&mut handle, |s| s.len() == 4).await;
    assert_eq!(ports(&set), [1000, 1001, 1002, 1003]);
    // Live once the mapping is read too; then the live set's snapshot is written (let it
    // land before tampering with the file).
    timeout(Duration::from_secs(5), async {
        while handle.serving_snapshot() || resolver.stats().await.snapshot_writes == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("live snapshot written");
    drop(handle);
    tokio::time::sleep(Duration::from_millis(100)).await;

    // A truncated snapshot is ignored with a warning; the store being down, the set is empty.
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    flaky.set_down(true);
    let handle = resolver
        .subscribe_with(Subscription::new(ORDERS), options)
        .await
        .unwrap();
    assert!(handle.current().is_empty());
    assert!(!handle.serving_snapshot());
    assert_eq!(resolver.stats().await.snapshot_loads, 1);
}
