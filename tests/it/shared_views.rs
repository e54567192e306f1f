//! Shared views and bounded mappings, on the embedded store and the paused clock: one store
//! watch per app and per mapping for a whole resolver, released after a grace when no
//! subscription follows it; mappings over the app limit ignored; junk apps released; an
//! app that serves never stripped by a garbled mapping.

use std::sync::Arc;
use std::time::Duration;

use crate::support::records::{HOUR, ORDERS, memory, orders, ports};
use crate::support::wait::settle;
use introspect::consumer::{APP_RELEASE_GRACE, VIEW_RELEASE_GRACE};
use introspect::{Layout, Resolver, Store, Subscription};

/// Writes the mapping of ORDERS as `apps` joined by commas.
async fn write_mapping(store: &Arc<dyn Store>, apps: &[String]) {
    let key = Layout::default().mapping_key(ORDERS);
    store
        .put(&key, apps.join(",").into_bytes(), None)
        .await
        .expect("mapping written");
}

/// Lets the clock pass `duration`, then lets every task run.
async fn pass(duration: Duration) {
    tokio::time::advance(duration).await;
    settle().await;
}

#[tokio::test(start_paused = true)]
async fn subscriptions_share_one_watch_per_app_released_after_the_grace() {
    let (memory, records) = memory();
    records.fleet(&orders("shop-a"), 1000, 1, HOUR).await;
    records.fleet(&orders("shop-b"), 2000, 1, HOUR).await;
    let resolver = Resolver::new(records.store.clone());
    assert_eq!(memory.watch_count(), 0);
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    let other = resolver
        .subscribe(Subscription::new(ORDERS).provided_by(["shop-a"]))
        .await
        .unwrap();
    let same = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    assert_eq!(
        memory.watch_count(),
        3,
        "the mapping, shop-a and shop-b: one watch each for three subscriptions"
    );
    assert_eq!(resolver.stats().await.shared_views, 3);
    assert_eq!(ports(&other.current()), [1000]);
    assert_eq!(ports(&same.current()), [1000, 2000]);

    // A change is parsed once and reaches every subscription.
    let mut watching = other.clone();
    records.fleet(&orders("shop-a"), 1001, 1, HOUR).await;
    assert_eq!(ports(&watching.changed().await.unwrap()), [1000, 1001]);
    settle().await;
    assert_eq!(ports(&handle.current()), [1000, 1001, 2000]);
    assert_eq!(ports(&same.current()), [1000, 1001, 2000]);
    drop(watching);

    // Dropping some subscriptions keeps the watches the others use.
    drop(handle);
    settle().await;
    assert_eq!(memory.watch_count(), 3, "`same` still follows all three");
    drop(same);
    settle().await;
    assert_eq!(
        memory.watch_count(),
        3,
        "within the grace nothing is released"
    );
    pass(VIEW_RELEASE_GRACE).await;
    assert_eq!(
        memory.watch_count(),
        1,
        "after the grace only shop-a's watch, used by `other`, is left"
    );
    drop(other);
    settle().await;
    assert_eq!(memory.watch_count(), 1);
    pass(VIEW_RELEASE_GRACE).await;
    assert_eq!(memory.watch_count(), 0);
    let stats = resolver.stats().await;
    assert_eq!((stats.subscriptions, stats.shared_views), (0, 0));
}

#[tokio::test(start_paused = true)]
async fn a_resubscription_within_the_grace_reuses_the_watch() {
    let (memory, records) = memory();
    records.fleet(&orders("shop-a"), 1000, 2, HOUR).await;
    let resolver = Resolver::new(records.store.clone());
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    assert_eq!(memory.watch_count(), 2);
    drop(handle);
    pass(VIEW_RELEASE_GRACE / 2).await;
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    assert_eq!(
        ports(&handle.current()),
        [1000, 1001],
        "served from the view"
    );
    pass(VIEW_RELEASE_GRACE).await;
    assert_eq!(memory.watch_count(), 2, "still followed: nothing released");
    assert_eq!(resolver.stats().await.relists, 0);
}

#[tokio::test(start_paused = true)]
async fn a_mapping_over_the_limit_is_ignored_and_the_real_app_keeps_its_endpoints() {
    let (memory, records) = memory();
    records.fleet(&orders("shop-a"), 1000, 6, HOUR).await;
    let resolver = Resolver::new(records.store.clone());
    let mut handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    assert_eq!(handle.current().len(), 6);
    let limit = introspect::Limits::default().max_apps_per_mapping;

    // 20,000 names, the real app among them, written twice.
    let mut names: Vec<String> = (0..20_000).map(|i| format!("junk-{i}")).collect();
    names.push("shop-a".into());
    write_mapping(&records.store, &names).await;
    settle().await;
    names.push("junk-more".into());
    write_mapping(&records.store, &names).await;
    settle().await;
    let stats = resolver.stats().await;
    assert_eq!(stats.oversized_mappings, 2, "both reads seen and refused");
    assert!(stats.shared_views as usize <= limit + 1);
    assert_eq!(
        memory.watch_count(),
        2,
        "the mapping's and shop-a's, nothing more"
    );
    assert_eq!(
        handle.current().len(),
        6,
        "the real app keeps its endpoints"
    );
    assert!(
        !handle.watch().has_changed().unwrap(),
        "nothing was pushed: the set never changed"
    );

    // A valid mapping again: the app is still followed, as before.
    write_mapping(&records.store, &["shop-a".to_owned()]).await;
    records.fleet(&orders("shop-a"), 1006, 1, HOUR).await;
    assert_eq!(handle.changed().await.unwrap().len(), 7);
}

#[tokio::test(start_paused = true)]
async fn junk_apps_that_left_the_mapping_are_released_after_the_grace() {
    let (memory, records) = memory();
    records.fleet(&orders("shop-a"), 1000, 2, HOUR).await;
    let resolver = Resolver::new(records.store.clone());
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    let mut names: Vec<String> = (0..5).map(|i| format!("junk-{i}")).collect();
    names.push("shop-a".into());
    write_mapping(&records.store, &names).await;
    settle().await;
    assert_eq!(
        memory.watch_count(),
        7,
        "the mapping, shop-a and five junk apps"
    );

    write_mapping(&records.store, &["shop-a".to_owned()]).await;
    settle().await;
    pass(APP_RELEASE_GRACE).await;
    assert_eq!(resolver.stats().await.released_apps, 5);
    pass(VIEW_RELEASE_GRACE).await;
    assert_eq!(memory.watch_count(), 2, "the junk apps' watches are gone");
    assert_eq!(ports(&handle.current()), [1000, 1001]);
}

#[tokio::test(start_paused = true)]
async fn an_app_with_routable_instances_is_never_released_by_a_garbled_mapping() {
    let (memory, records) = memory();
    let info = orders("shop-a");
    records.fleet(&info, 1000, 3, HOUR).await;
    let resolver = Resolver::new(records.store.clone());
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();

    // A valid mapping that no longer names the app, for far longer than the grace.
    write_mapping(&records.store, &["somebody-else".to_owned()]).await;
    settle().await;
    pass(APP_RELEASE_GRACE * 4).await;
    assert_eq!(ports(&handle.current()), [1000, 1001, 1002]);
    assert_eq!(resolver.stats().await.released_apps, 0);
    assert_eq!(
        memory.watch_count(),
        3,
        "the mapping, shop-a, somebody-else"
    );

    // Once its instances are gone too, it is released.
    for port in 1000..1003 {
        records.graceful_stop(&info, port, None).await;
    }
    settle().await;
    pass(APP_RELEASE_GRACE).await;
    assert_eq!(resolver.stats().await.released_apps, 1);
    assert!(handle.current().is_empty());
}

#[tokio::test(start_paused = true)]
async fn registry_events_that_change_nothing_reach_no_subscription() {
    let (memory, records) = memory();
    let info = orders("shop-a");
    let leases = records.fleet(&info, 1000, 3, HOUR).await;
    let resolver = Resolver::new(records.store.clone());
    let handle = resolver.subscribe(Subscription::new(ORDERS)).await.unwrap();
    let mut updates = handle.watch();
    updates.borrow_and_update();
    pass(Duration::from_secs(1)).await;
    let before = resolver.stats().await;

    // The same record written again.
    let same = crate::support::records::Records::instance(&info, 1000);
    records.register(&same, Some(leases[0])).await;
    settle().await;
    // A record nobody can read, then its deletion: neither was ever routable.
    let stray = Layout::default().instance_key("shop-a", "10.9.9.9", 1);
    records
        .store
        .put(&stray, b"not json".to_vec(), None)
        .await
        .unwrap();
    settle().await;
    records.store.delete(&stray).await.unwrap();
    settle().await;
    // A re-list that finds what the view has (the watch ended under it).
    memory.cancel_watches();
    settle().await;
    pass(Duration::from_secs(1)).await;

    let after = resolver.stats().await;
    assert_eq!(after.relists, before.relists + 1, "the watch was re-listed");
    assert!(
        after.unchanged_view_updates >= before.unchanged_view_updates + 4,
        "each event counted as changing nothing: {} then {}",
        before.unchanged_view_updates,
        after.unchanged_view_updates
    );
    assert_eq!(after.pushes, before.pushes, "no push");
    assert_eq!(
        after.unchanged_updates, before.unchanged_updates,
        "no subscription even recomputed its set"
    );
    assert!(
        !updates.has_changed().unwrap(),
        "the handle saw nothing new"
    );
    assert_eq!(ports(&handle.current()), [1000, 1001, 1002]);
}
