//! Live subscriptions and the registry-center protections, on the embedded store and the
//! paused clock. Instances are written straight into the store with storage type `remote`,
//! so metadata comes from the report and no network is involved.

use std::sync::Arc;
use std::time::Duration;

use crate::support::faulty::FaultyStore;
use crate::support::records::{HOUR, ORDERS, Records, memory, orders, ports};
use crate::support::wait::settle;
use introspect::consumer::{ProtectionOptions, SubscribeOptions};
use introspect::{MemoryStore, Resolver, ServiceInfo, Store, Subscription};

/// `ProtectionOptions`' longest hold of an expired instance (the default).
fn max_hold() -> Duration {
    introspect::consumer::ProtectionOptions::default().get_max_hold()
}

fn window() -> Duration {
    introspect::consumer::CoalesceOptions::default().get_window()
}

#[tokio::test(start_paused = true)]
async fn a_new_app_exporting_the_interface_appears_without_a_restart() {
    let (_memory, records) = memory();
    records.fleet(&orders("shop-a"), 1000, 2, HOUR).await;
    let resolver = Resolver::new(records.store.clone());
    let mut handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    assert_eq!(ports(&handle.current()), [1000, 1001]);

    records.fleet(&orders("shop-b"), 2000, 1, HOUR).await;
    let set = handle.changed().await.unwrap();
    assert_eq!(ports(&set), [1000, 1001, 2000]);
    assert!(set.iter().any(|e| &*e.app == "shop-b"));
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_a_thousand_changes_is_coalesced_into_a_handful_of_pushes() {
    let (_memory, records) = memory();
    let info = orders("shop-a");
    records.fleet(&info, 1000, 10, HOUR).await;
    let resolver = Resolver::new(records.store.clone());
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    assert_eq!(handle.current().len(), 10);
    let before = resolver.stats().await.pushes;
    let mut rx = handle.watch();

    // 1,000 changes in no time: 600 registrations, 300 deregistrations (graceful), 100
    // rewrites; the subscription task runs between them.
    for port in 3000..3600u16 {
        records
            .register(&Records::instance(&info, port), None)
            .await;
        tokio::task::yield_now().await;
    }
    for port in 3000..3300u16 {
        records.graceful_stop(&info, port, None).await;
        tokio::task::yield_now().await;
    }
    for port in 3300..3350u16 {
        let mut instance = Records::instance(&info, port);
        instance.metadata.insert("weight".into(), "1".into());
        records.register(&instance, None).await;
        records
            .register(&Records::instance(&info, port), None)
            .await;
        tokio::task::yield_now().await;
    }
    tokio::time::advance(window() * 2).await;
    settle().await;

    let pushes = resolver.stats().await.pushes - before;
    assert!((1..=3).contains(&pushes), "{pushes} pushes");
    let mut seen = 0;
    while rx.has_changed().unwrap() {
        rx.borrow_and_update();
        seen += 1;
    }
    assert!(seen <= 1, "the watch receiver holds the latest set only");
    let mut expected: Vec<u16> = (1000..1010).chain(3300..3600).collect();
    expected.sort_unstable();
    assert_eq!(ports(&handle.current()), expected);
}

#[tokio::test(start_paused = true)]
async fn an_update_that_leaves_the_set_equal_is_not_pushed() {
    let (_memory, records) = memory();
    let info = orders("shop-a");
    records.fleet(&info, 1000, 2, HOUR).await;
    let resolver = Resolver::new(records.store.clone());
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    let before = resolver.stats().await;
    // A rewrite with an extra, irrelevant metadata entry: the endpoints stay the same.
    let mut instance = Records::instance(&info, 1000);
    instance.metadata.insert("zone".into(), "a".into());
    records.register(&instance, None).await;
    tokio::time::advance(window() * 2).await;
    settle().await;
    let after = resolver.stats().await;
    assert_eq!(after.pushes, before.pushes);
    assert_eq!(after.unchanged_updates, before.unchanged_updates + 1);
    assert_eq!(ports(&handle.current()), [1000, 1001]);
}

/// Subscribes twice: with the given protection and with none (the control).
/// A subscription on a resolver with `protection` (returned) and one on a resolver without.
async fn two_subscriptions(
    store: &Arc<dyn Store>,
    protection: ProtectionOptions,
) -> (
    Resolver,
    introspect::SubscriptionHandle,
    introspect::SubscriptionHandle,
) {
    let with = |protection| {
        Resolver::builder(store.clone())
            .protection(protection)
            .build()
    };
    let resolver = with(protection);
    let protected = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    let unprotected = with(ProtectionOptions::disabled())
        .subscribe(Subscription::new(ORDERS))
        .await
        .unwrap();
    (resolver, protected, unprotected)
}

/// Shop-a's fleet of 20: 18 instances (ports 1000..) whose leases lapse after 10 s, a
/// partition as the store sees it, and 2 (ports 2000..) that keep theirs.
async fn ninety_percent_lapsing(records: &Records) {
    let info = orders("shop-a");
    records
        .fleet(&info, 1000, 18, Duration::from_secs(10))
        .await;
    records.fleet(&info, 2000, 2, HOUR).await;
}

#[tokio::test(start_paused = true)]
async fn mass_expiry_of_ninety_percent_is_held() {
    let (_memory, records) = memory();
    ninety_percent_lapsing(&records).await;
    let (resolver, protected, control) =
        two_subscriptions(&records.store, ProtectionOptions::default()).await;
    assert_eq!(protected.current().len(), 20);

    tokio::time::advance(Duration::from_secs(11)).await;
    settle().await;
    assert_eq!(
        control.current().len(),
        2,
        "without protection the cluster is stripped"
    );
    assert_eq!(protected.current().len(), 20, "the expiries are held");
    assert!(protected.protection_active());
    assert!(!control.protection_active());
    let stats = resolver.stats().await;
    assert_eq!(stats.held_removals, 18);
    assert!(stats.protection_active);
    assert_eq!(stats.protected_apps, 1);

    // Released after the maximum hold.
    tokio::time::advance(max_hold()).await;
    settle().await;
    assert_eq!(ports(&protected.current()), [2000, 2001]);
    assert!(!protected.protection_active());
    assert!(!resolver.stats().await.protection_active);
}

/// `protection_active()` describes the set `current()` returns: with a coalescing window
/// far longer than the test, a released hold still goes out with the set it leaves, so no
/// reader sees "no hold" beside the released instances.
#[tokio::test(start_paused = true)]
async fn a_released_hold_and_the_set_it_leaves_go_out_together() {
    let (_memory, records) = memory();
    ninety_percent_lapsing(&records).await;
    let resolver = Resolver::builder(records.store.clone())
        .subscribe_options(
            SubscribeOptions::default()
                .coalesce(introspect::consumer::CoalesceOptions::default().window(HOUR)),
        )
        .build();
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    tokio::time::advance(Duration::from_secs(11)).await;
    settle().await;
    assert!(handle.protection_active(), "a hold shows at once");
    assert_eq!(handle.current().len(), 20);

    tokio::time::advance(max_hold()).await;
    settle().await;
    assert!(!handle.protection_active());
    assert_eq!(
        ports(&handle.current()),
        [2000, 2001],
        "the release went out with the flag, not a window later"
    );
}

#[tokio::test(start_paused = true)]
async fn a_single_expiry_of_twenty_is_removed_at_once() {
    let (_memory, records) = memory();
    let info = orders("shop-a");
    records.fleet(&info, 1000, 1, Duration::from_secs(10)).await;
    records.fleet(&info, 2000, 19, HOUR).await;
    let resolver = Resolver::new(records.store.clone());
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    assert_eq!(handle.current().len(), 20);
    tokio::time::advance(Duration::from_secs(10)).await;
    settle().await;
    assert_eq!(handle.current().len(), 19);
    assert!(!ports(&handle.current()).contains(&1000));
    assert!(!handle.protection_active());
}

#[tokio::test(start_paused = true)]
async fn held_instances_are_released_when_they_return() {
    let (_memory, records) = memory();
    let info = orders("shop-a");
    let leases = records.fleet(&info, 1000, 20, HOUR).await;
    let resolver = Resolver::new(records.store.clone());
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    // Expiry, as the store sees it: the lease goes and its key with it.
    for lease in &leases[..15] {
        records.store.revoke_lease(*lease).await.unwrap();
    }
    settle().await;
    assert!(handle.protection_active());
    assert_eq!(handle.current().len(), 20);
    // The partition heals: the providers register again under new leases.
    for port in 1000..1015 {
        records
            .register(&Records::instance(&info, port), None)
            .await;
    }
    settle().await;
    assert!(!handle.protection_active(), "every held instance returned");
    assert_eq!(handle.current().len(), 20);
    // Now a real crash of one is applied at once.
    records
        .registry
        .deregister("shop-a", "127.0.0.1", 1019)
        .await
        .unwrap();
    tokio::time::advance(window()).await;
    settle().await;
    assert_eq!(handle.current().len(), 19);
}

#[tokio::test(start_paused = true)]
async fn graceful_shutdowns_are_removed_at_once_never_held() {
    let (_memory, records) = memory();
    let info = orders("shop-a");
    let leases = records.fleet(&info, 1000, 20, HOUR).await;
    let resolver = Resolver::new(records.store.clone());
    let mut handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    // One graceful stop: disabled first, so it leaves the set at once.
    let mut disabled = Records::instance(&info, 1000);
    disabled.enabled = false;
    records.register(&disabled, Some(leases[0])).await;
    let set = handle.changed().await.unwrap();
    assert_eq!(set.len(), 19, "a disabled instance leaves at once");
    // 18 more stop gracefully at the same time (a deploy): nothing is held.
    for (i, port) in (1000..1019).enumerate() {
        records.graceful_stop(&info, port, Some(leases[i])).await;
    }
    tokio::time::advance(window()).await;
    settle().await;
    assert_eq!(ports(&handle.current()), [1019]);
    assert!(!handle.protection_active());
    assert_eq!(resolver.stats().await.held_removals, 0);
}

#[tokio::test(start_paused = true)]
async fn small_apps_are_exempt_from_protection() {
    let (_memory, records) = memory();
    let info = orders("shop-a");
    let leases = records.fleet(&info, 1000, 3, HOUR).await;
    let resolver = Resolver::new(records.store.clone());
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    for lease in &leases[..2] {
        records.store.revoke_lease(*lease).await.unwrap();
    }
    tokio::time::advance(window()).await;
    settle().await;
    assert_eq!(ports(&handle.current()), [1002]);
    assert!(!handle.protection_active());
}

#[tokio::test(start_paused = true)]
async fn store_errors_never_empty_the_set() {
    let memory = Arc::new(MemoryStore::new());
    let flaky = Arc::new(FaultyStore::new(memory.clone()));
    let records = Records::new(flaky.clone() as Arc<dyn Store>);
    records.fleet(&orders("shop-a"), 1000, 3, HOUR).await;
    let resolver = Resolver::new(records.store.clone());
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    assert_eq!(handle.current().len(), 3);
    resolver.clear_cache().await;

    // The store goes away and every watch ends: re-lists fail for a long time.
    flaky.set_down(true);
    memory.cancel_watches();
    for _ in 0..20 {
        tokio::time::advance(Duration::from_secs(15)).await;
        settle().await;
        assert_eq!(handle.current().len(), 3, "errors never empty the set");
    }
    // The store comes back with one instance gone meanwhile: only that one leaves.
    records.store.get("/").await.unwrap_err(); // still down
    memory
        .delete("/services/shop-a/127.0.0.1:1002")
        .await
        .unwrap();
    flaky.set_down(false);
    tokio::time::advance(Duration::from_secs(15)).await;
    settle().await;
    assert_eq!(ports(&handle.current()), [1000, 1001]);
    assert!(resolver.stats().await.relists >= 1);
}

#[tokio::test(start_paused = true)]
async fn a_watch_error_relists_and_publishes_only_the_difference() {
    let (memory, records) = memory();
    let info = orders("shop-a");
    records.fleet(&info, 1000, 3, HOUR).await;
    let resolver = Resolver::new(records.store.clone());
    let mut handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    let before = resolver.stats().await.pushes;
    // Lose the watches, change the store meanwhile, and compact its history away.
    memory.cancel_watches();
    records
        .register(&Records::instance(&info, 1003), None)
        .await;
    memory.compact(memory.revision()).await.unwrap();
    let set = handle.changed().await.unwrap();
    assert_eq!(ports(&set), [1000, 1001, 1002, 1003]);
    tokio::time::advance(window() * 2).await;
    settle().await;
    assert_eq!(
        resolver.stats().await.pushes,
        before + 1,
        "one push: the difference"
    );
    assert!(resolver.stats().await.relists >= 1);
}

#[tokio::test(start_paused = true)]
async fn a_gone_instance_leaves_while_another_revision_cannot_be_fetched() {
    let (_memory, records) = memory();
    let good = orders("shop-a");
    records.fleet(&good, 1000, 1, HOUR).await;
    // Another revision of the same app whose metadata nobody can give: no report, and its
    // MetadataService port is closed.
    let bad = Records::metadata(
        "shop-a",
        &[ServiceInfo::new(ORDERS).with_param("weight", "7")],
    );
    records.register(&Records::instance(&bad, 1), None).await;
    let resolver = Resolver::builder(records.store.clone())
        .fetch_timeout(Duration::from_millis(200))
        .build();
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    assert_eq!(ports(&handle.current()), [1000]);

    records
        .registry
        .deregister("shop-a", "127.0.0.1", 1000)
        .await
        .unwrap();
    tokio::time::advance(window()).await;
    settle().await;
    assert!(
        handle.current().is_empty(),
        "the gone instance left: {:?}",
        handle.current()
    );
}

#[tokio::test(start_paused = true)]
async fn an_instance_keeps_its_endpoints_while_its_new_revision_cannot_be_fetched() {
    let (_memory, records) = memory();
    let old = orders("shop-a");
    records.fleet(&old, 1000, 2, HOUR).await;
    let resolver = Resolver::builder(records.store.clone())
        .fetch_timeout(Duration::from_millis(200))
        .build();
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    // Both instances move to a revision whose metadata cannot be had.
    let new = Records::metadata("shop-a", &[ServiceInfo::new(ORDERS).with_param("w", "1")]);
    for port in [1000, 1001] {
        records.register(&Records::instance(&new, port), None).await;
    }
    for _ in 0..10 {
        tokio::time::advance(Duration::from_secs(1)).await;
        settle().await;
        assert_eq!(
            ports(&handle.current()),
            [1000, 1001],
            "never emptied by an error"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_revision_whose_fetches_all_fail_is_retried_and_joins() {
    let (_memory, records) = memory();
    let good = orders("shop-a");
    records.fleet(&good, 1000, 1, HOUR).await;
    // A second revision: registered before its report exists, MetadataService closed.
    let late = Records::metadata(
        "shop-a",
        &[ServiceInfo::new(ORDERS).with_param("weight", "7")],
    );
    for port in [1, 2] {
        records
            .register(&Records::instance(&late, port), None)
            .await;
    }
    let resolver = Resolver::builder(records.store.clone())
        .fetch_timeout(Duration::from_millis(200))
        .subscribe_options(
            SubscribeOptions::default()
                .fetch_retry(Duration::from_millis(500), Duration::from_secs(4)),
        )
        .build();
    let mut handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    assert_eq!(
        ports(&handle.current()),
        [1000],
        "the good revision is not blocked"
    );

    // A while of failed retries, spaced by backoff.
    for _ in 0..100 {
        tokio::time::advance(Duration::from_millis(100)).await;
        settle().await;
    }
    let stats = resolver.stats().await;
    assert!(stats.metadata_retries >= 2, "{stats:?}");
    assert!(
        stats.metadata_retries <= 10,
        "backoff spaces the retries: {stats:?}"
    );
    assert_eq!(ports(&handle.current()), [1000]);

    // Its metadata becomes available: the next retry succeeds and its instances join.
    records.report.publish(&late).await.unwrap();
    let set = loop {
        let set = handle.changed().await.unwrap();
        if set.len() == 3 {
            break set;
        }
    };
    assert_eq!(ports(&set), [1, 2, 1000]);
    assert_eq!(
        set.iter()
            .filter(|e| e.params().get("weight").is_some())
            .count(),
        2
    );
}

#[tokio::test(start_paused = true)]
async fn a_record_rewritten_under_the_same_revision_gets_new_endpoints() {
    let (_memory, records) = memory();
    let info = orders("shop-a");
    records.fleet(&info, 1000, 2, HOUR).await;
    let resolver = Resolver::new(records.store.clone());
    let mut handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    assert_eq!(ports(&handle.current()), [1000, 1001]);
    // Same revision (the metadata is cached), but the record now announces its protocol on
    // another port: the instance's endpoints are rebuilt, not reused.
    let mut moved = Records::instance(&info, 1001);
    let protocol = &info.services.values().next().unwrap().protocol;
    moved.metadata.insert(
        introspect::model::keys::ENDPOINTS.into(),
        format!(r#"[{{"port":3001,"protocol":"{protocol}"}}]"#),
    );
    records.register(&moved, None).await;
    let set = handle.changed().await.unwrap();
    assert_eq!(ports(&set), [1000, 3001]);
    // And back: rewritten again, it is rebuilt again.
    records
        .register(&Records::instance(&info, 1001), None)
        .await;
    let set = handle.changed().await.unwrap();
    assert_eq!(ports(&set), [1000, 1001]);
}
