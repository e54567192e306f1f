//! Calls that survive what the protections hold, on a real etcd: a fleet of Greeters
//! crashing under a consumer calling through the balanced channel, and a small app living
//! through a store wipe.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::support::calls::{Caller, channel_over};
use crate::support::etcd::EtcdServer;
use crate::support::killable::{GREETER, Killable, greeter_info};
use crate::support::records::Records;
use crate::support::wait::eventually;
use introspect::backend::RegisterOptions;
use introspect::consumer::ProtectionOptions;
use introspect::{Resolver, Store, Subscription};

/// The instances' lease TTL (the harness's etcd allows 1 s).
const TTL: Duration = Duration::from_secs(2);
/// The maximum hold, shortened so the test ends in bounded time.
const MAX_HOLD: Duration = Duration::from_secs(8);
const LIMIT: Duration = Duration::from_secs(20);
/// How long the wipe may take to be seen once etcd answers again: the longest re-list
/// backoff (10 s) plus a store deadline (5 s) and a try's own time, with room for a busy
/// machine.
const WIPE_SEEN: Duration = Duration::from_secs(40);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_instances_cost_at_most_two_calls_each_while_the_hold_keeps_them_listed() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let store: Arc<dyn Store> = etcd.store().await;
    let records = Records::new(store.clone());
    let info = greeter_info("greeter");
    records.publish(&info).await;
    let mut nodes = Vec::new();
    for _ in 0..8 {
        nodes.push(Killable::register(&records, &info, TTL).await);
    }
    let protection = ProtectionOptions::default().max_hold(MAX_HOLD);
    let resolver = Resolver::builder(store.clone())
        .protection(protection)
        .build();
    let handle = resolver
        .subscribe(Subscription::new(GREETER))
        .await
        .unwrap();
    assert_eq!(handle.current().len(), 8);
    let channel = channel_over(&resolver, &handle, 8).await;
    let caller = Caller::start(channel, Duration::from_millis(20));
    eventually(LIMIT, "calls flowing", || async { caller.ok() >= 50 }).await;
    assert_eq!(caller.failed(), 0);

    // One crashes; its lease expires and it leaves (one of eight is no partition).
    nodes[0].kill();
    eventually(LIMIT, "the first crash applied", || async {
        handle.current().len() == 7
    })
    .await;
    assert!(!handle.protection_active());
    // Five more crash inside the protection window: self-preservation holds the six
    // (the first again, retroactively). The registry view holds them; the channel, whose
    // calls found them dead, and the probes keep them out.
    for node in &mut nodes[1..6] {
        node.kill();
    }
    eventually(LIMIT, "the mass expiry held", || async {
        handle.protection_active() && resolver.stats().await.held_removals >= 6
    })
    .await;
    let held = resolver.stats().await.held_removals;
    assert_eq!(held, 6, "the five and, retroactively, the first");
    // The held instances are listed but set aside: calls keep succeeding.
    let ok = caller.ok();
    let failed = caller.failed();
    eventually(LIMIT, "calls flowing while held", || async {
        caller.ok() >= ok + 50
    })
    .await;
    assert_eq!(
        caller.failed(),
        failed,
        "no call goes to a held dead instance"
    );
    let dead: Vec<u16> = nodes[..6].iter().map(Killable::port).collect();
    for endpoint in handle.current().iter().filter(|e| dead.contains(&e.port)) {
        assert!(handle.is_set_aside(endpoint), "{} is marked", endpoint.port);
    }

    // The maximum hold passes: the holds are released, logged and counted.
    eventually(LIMIT, "the holds released", || async {
        !handle.protection_active()
    })
    .await;
    assert_eq!(handle.current().len(), 2);
    let ok = caller.ok();
    eventually(LIMIT, "calls flowing after the release", || async {
        caller.ok() >= ok + 20
    })
    .await;
    let (ok, failed, errors) = caller.finish().await;
    eprintln!("{ok} calls succeeded, {failed} failed: {errors:?}");
    let stats = resolver.stats().await;
    assert!(stats.hold_releases >= 6, "{stats:?}");
    assert!(ok > 150, "{ok} calls succeeded");
    // At most two failed calls per killed endpoint after its first failure.
    assert!(
        failed <= 6 * 3,
        "{failed} calls failed for 6 crashes: {errors:?}"
    );
    assert!(stats.call_failures <= 6 * 3, "{stats:?}");
    assert!(stats.set_aside >= 1);
}

/// A provider as far as the registry sees it: its record registered through the seam
/// (which creates the registry's epoch when absent, as every provider of this crate does),
/// kept alive every quarter TTL, registered again (with its report and mapping) when the
/// registration is lost, as after a store wipe. Failures are retried, never a panic: a
/// provider task that died would look like a provider that never comes back.
fn simulated_provider(records: Records, port: u16, stop: Arc<AtomicBool>) {
    tokio::spawn(async move {
        let info = greeter_info("small");
        let backend = introspect::Backend::from(records.store.clone());
        let limits = introspect::Limits::default();
        while !stop.load(Ordering::Relaxed) {
            let published = async {
                records.report.publish(&info).await?;
                for service in info.services.values() {
                    records.mapping.add(&service.name, &info.app).await?;
                }
                backend
                    .instances()
                    .register(
                        &Records::instance(&info, port),
                        &RegisterOptions::new(TTL, &limits),
                    )
                    .await
            };
            let Ok(registration) = published.await else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            while !stop.load(Ordering::Relaxed) {
                tokio::time::sleep(TTL / 4).await;
                if let Err(introspect::Error::RegistrationLost { .. }) =
                    registration.keep_alive().await
                {
                    // Lost: a real provider notices at its next keep-alive and registers
                    // again a moment later.
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    break;
                }
            }
        }
    });
}

/// Prints every re-list (its revision, epoch and outcome) and each change of the
/// resolver's re-list and wipe counters, with the time since `start`: shown when the test
/// fails, so a failure says what the consumer saw.
fn log_relists(resolver: &Resolver, start: tokio::time::Instant) -> tokio::task::JoinHandle<()> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("introspect=info,introspect::store=debug")
        .with_test_writer()
        .try_init();
    let resolver = resolver.clone();
    tokio::spawn(async move {
        let mut last = (0, 0);
        loop {
            let stats = resolver.stats().await;
            if (stats.relists, stats.wipes) != last {
                last = (stats.relists, stats.wipes);
                eprintln!(
                    "[+{:.1}s] re-lists {} wipes {} watch restarts {}",
                    start.elapsed().as_secs_f64(),
                    stats.relists,
                    stats.wipes,
                    stats.watch_restarts
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_instance_app_survives_a_store_wipe_without_an_empty_publication() {
    let Some(mut etcd) = EtcdServer::start().await else {
        return;
    };
    let store: Arc<dyn Store> = etcd.store().await;
    let records = Records::new(store.clone());
    // A store that has lived: its revision is well above what re-registering writes.
    for i in 0..100 {
        store
            .put("/filler", format!("{i}").into_bytes(), None)
            .await
            .unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    simulated_provider(records.clone(), 41001, stop.clone());
    simulated_provider(records.clone(), 41002, stop.clone());
    let resolver = Resolver::new(store.clone());
    eventually(LIMIT, "both registered", || async {
        resolver
            .resolve(&Subscription::new(GREETER))
            .await
            .is_ok_and(|e| e.len() == 2)
    })
    .await;
    let handle = resolver
        .subscribe(Subscription::new(GREETER))
        .await
        .unwrap();
    assert_eq!(handle.current().len(), 2);
    let started = tokio::time::Instant::now();
    let logging = log_relists(&resolver, started);
    let mut watcher = handle.watch();
    let watching = Arc::new(AtomicBool::new(true));
    let still = watching.clone();
    let smallest = tokio::spawn(async move {
        let mut smallest = usize::MAX;
        while still.load(Ordering::Relaxed) {
            let next = tokio::time::timeout(Duration::from_millis(100), watcher.changed());
            if let Ok(Ok(())) = next.await {
                smallest = smallest.min(watcher.borrow_and_update().len());
            }
        }
        smallest
    });

    etcd.restart_empty().await;
    eprintln!(
        "[+{:.1}s] etcd restarted empty",
        started.elapsed().as_secs_f64()
    );
    // The consumer's re-list backoff grows while etcd is down (up to 10 s between tries),
    // and a try may cost a store deadline (5 s): a slow restart delays the first re-list
    // by that much after etcd answers again.
    eventually(WIPE_SEEN, "the wipe seen", || async {
        resolver.stats().await.wipes >= 1
    })
    .await;
    eventually(WIPE_SEEN, "both re-registered and listed", || async {
        resolver
            .resolve(&Subscription::new(GREETER))
            .await
            .is_ok_and(|e| e.len() == 2)
            && !handle.protection_active()
    })
    .await;
    assert_eq!(handle.current().len(), 2);
    stop.store(true, Ordering::Relaxed);
    watching.store(false, Ordering::Relaxed);
    let smallest = smallest.await.unwrap();
    logging.abort();
    assert!(smallest >= 2, "a set of {smallest} was published");
}
