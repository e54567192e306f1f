//! A three-member etcd cluster: requests and watches of `EtcdStore` fail over to a live
//! member when the one they use dies, and everything recovers after a loss of quorum. Under
//! a running fleet, with a consumer calling through the balanced channel, killing the
//! leader, wiping and rejoining a member, and losing quorum for a while fail no call.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::etcd_cluster::{EtcdCluster, MEMBERS};
use crate::support::fleet::start_provider_with;
use crate::support::greeter::pb::HelloRequest;
use crate::support::greeter::pb::greeter_client::GreeterClient;
use crate::support::greeter::{GreeterNode, start_greeter};
use crate::support::wait::eventually;
use introspect::store::Watch;
use introspect::{EtcdStore, Resolver, ServiceInfo, Store, Subscription, SubscriptionHandle};

/// Lease TTL of the providers: short, so a lease that lapsed would show.
const TTL: Duration = Duration::from_secs(2);
/// Writes made while a member dies, 20 ms apart.
const WRITES: usize = 100;
/// How long a watch may take to deliver an expected event.
const WAIT: Duration = Duration::from_secs(10);

/// Subscribes to the order service and records the size of every published set.
async fn subscribe(store: Arc<dyn Store>) -> (SubscriptionHandle, Arc<Mutex<Vec<usize>>>) {
    let resolver = Resolver::builder(store)
        .store_timeout(Duration::from_secs(3))
        .build();
    let handle = resolver
        .subscribe(Subscription::new("shop.OrderService"))
        .await
        .unwrap();
    let sizes = Arc::new(Mutex::new(vec![handle.current().len()]));
    let mut follower = handle.clone();
    let record = sizes.clone();
    tokio::spawn(async move {
        while let Ok(set) = follower.changed().await {
            record.lock().unwrap().push(set.len());
        }
    });
    (handle, sizes)
}

/// Keys of a watch's events until `count` distinct keys were seen, consecutive repeats
/// folded (a put retried on another member after its answer was lost is a second write of
/// the same key, not a watch duplicate). Panics when the watch ends or stalls.
async fn watched_keys(watch: &mut Watch, count: usize) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    while keys.len() < count {
        let batch = tokio::time::timeout(WAIT, watch.next())
            .await
            .unwrap_or_else(|_| panic!("watch stalled after {} keys", keys.len()))
            .unwrap_or_else(|e| panic!("watch ended after {} keys: {e}", keys.len()));
        for event in batch {
            if keys.last().map(String::as_str) != Some(event.key()) {
                keys.push(event.key().to_owned());
            }
        }
    }
    keys
}

fn key(i: usize) -> String {
    format!("/cluster/{i:04}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_leader_fails_requests_and_watches_over() {
    let Some(mut cluster) = EtcdCluster::start().await else {
        return;
    };
    let leader = cluster.leader().await;
    // The store prefers the leader: the kill hits the member it talks to.
    let options = cluster.options_in_order(&[leader]);
    let store: Arc<dyn Store> = Arc::new(EtcdStore::connect(options).await.unwrap());
    let services = vec![ServiceInfo::new("shop.OrderService")];
    let provider = start_provider_with(&store, "shop-orders", services, |b| {
        b.lease_ttl(TTL).store_timeout(Duration::from_secs(3))
    })
    .await;
    let (handle, sizes) = subscribe(store.clone()).await;
    assert_eq!(handle.current().len(), 1);
    let mut watch = store.watch_prefix("/cluster/", 0).await.unwrap();

    let writer = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut failures = Vec::new();
            for i in 0..WRITES {
                if let Err(e) = store.put(&key(i), b"v".to_vec(), None).await {
                    failures.push(format!("{}: {e}", key(i)));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            failures
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    cluster.kill(leader);
    let failures = writer.await.unwrap();
    assert!(failures.is_empty(), "writes failed: {failures:?}");

    // The watch resumed on a live member: every write, in order, no gap, no end.
    let expected: Vec<String> = (0..WRITES).map(key).collect();
    assert_eq!(watched_keys(&mut watch, WRITES).await, expected);

    // The provider's keep-alives failed over too: its lease did not lapse.
    tokio::time::sleep(TTL + Duration::from_secs(1)).await;
    let instances = store.get_prefix("/services/shop-orders/").await.unwrap();
    assert_eq!(instances.kvs.len(), 1, "the provider's record is gone");
    assert_eq!(handle.current().len(), 1);
    let sizes = sizes.lock().unwrap().clone();
    assert!(sizes.iter().all(|&n| n == 1), "sets published: {sizes:?}");

    // The killed member rejoins and the store goes on.
    cluster.restart(leader).await;
    store
        .put("/cluster/after", b"v".to_vec(), None)
        .await
        .unwrap();
    assert_eq!(watched_keys(&mut watch, 1).await, vec!["/cluster/after"]);
    provider.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_that_loses_quorum_recovers() {
    let Some(cluster) = EtcdCluster::start().await else {
        return;
    };
    let leader = cluster.leader().await;
    let store: Arc<dyn Store> = Arc::new(
        EtcdStore::connect(cluster.options_in_order(&[leader]))
            .await
            .unwrap(),
    );
    let services = vec![ServiceInfo::new("shop.OrderService")];
    let provider = start_provider_with(&store, "shop-orders", services, |b| {
        b.lease_ttl(TTL).store_timeout(Duration::from_secs(3))
    })
    .await;
    let (handle, sizes) = subscribe(store.clone()).await;
    let mut watch = store.watch_prefix("/cluster/", 0).await.unwrap();
    store.put(&key(0), b"v".to_vec(), None).await.unwrap();
    assert_eq!(watched_keys(&mut watch, 1).await, vec![key(0)]);

    // Two of three members frozen: no quorum. A request fails, transient, within about
    // its request timeout (2 s), rather than hanging.
    let frozen: Vec<usize> = (0..MEMBERS).filter(|&i| i != leader).collect();
    for &i in &frozen {
        cluster.pause(i);
    }
    let started = Instant::now();
    let error = store.put(&key(1), b"v".to_vec(), None).await.unwrap_err();
    assert!(error.is_transient(), "{error}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    for &i in &frozen {
        cluster.resume(i);
    }

    // Quorum is back: writes succeed again ...
    eventually(
        Duration::from_secs(15),
        "a write after quorum returns",
        || {
            let store = store.clone();
            async move { store.put(&key(2), b"v".to_vec(), None).await.is_ok() }
        },
    )
    .await;
    // ... the watch either went on or ended with a transient error; watching again from
    // the revision after the last event seen misses nothing.
    let mut seen = vec![key(0)];
    let mut last_revision = store.get(&key(0)).await.unwrap().unwrap().mod_revision;
    loop {
        match tokio::time::timeout(WAIT, watch.next()).await {
            Ok(Ok(batch)) => {
                for event in batch {
                    last_revision = event.mod_revision();
                    if seen.last().map(String::as_str) != Some(event.key()) {
                        seen.push(event.key().to_owned());
                    }
                }
                if seen.contains(&key(2)) {
                    break;
                }
            }
            Ok(Err(end)) => {
                assert!(end.is_transient(), "{end}");
                watch = store
                    .watch_prefix("/cluster/", last_revision + 1)
                    .await
                    .unwrap();
            }
            Err(_) => panic!("watch stalled; seen {seen:?}"),
        }
    }
    // key(1) may or may not have been written, even late (its answer was lost, and a
    // frozen member may still carry out the attempt it was sent); key(2) was written.
    seen.retain(|k| k != &key(1));
    seen.dedup();
    assert_eq!(seen, vec![key(0), key(2)]);

    // The provider is (again) registered, and the subscriber never published an empty set.
    eventually(Duration::from_secs(15), "the provider registered", || {
        let store = store.clone();
        async move {
            store
                .get_prefix("/services/shop-orders/")
                .await
                .is_ok_and(|r| r.kvs.len() == 1)
        }
    })
    .await;
    assert_eq!(handle.current().len(), 1);
    let sizes = sizes.lock().unwrap().clone();
    assert!(sizes.iter().all(|&n| n > 0), "an empty set: {sizes:?}");
    provider.shutdown().await.unwrap();
}

/// Providers of the running fleet in the scenarios below.
const FLEET: usize = 4;
/// Pause between calls of the consumer.
const CALL_EVERY: Duration = Duration::from_millis(50);
/// How long quorum stays lost: long enough to outlast the request timeouts, leader
/// elections and the providers' renewal periods several times, short enough for CI (an
/// outage of 30 s behaves the same, it only takes longer).
const NO_QUORUM: Duration = Duration::from_secs(10);

/// Calls made through the balanced channel, and how they ended.
#[derive(Default)]
struct Calls {
    ok: AtomicU64,
    failed: AtomicU64,
    stop: AtomicBool,
}

/// A fleet of Greeter providers on the cluster, and a consumer calling it through the
/// balanced channel every [`CALL_EVERY`], counting every call and every published set.
struct Scene {
    cluster: EtcdCluster,
    store: Arc<dyn Store>,
    leader: usize,
    nodes: Vec<GreeterNode>,
    handle: SubscriptionHandle,
    sizes: Arc<Mutex<Vec<usize>>>,
    calls: Arc<Calls>,
    caller: tokio::task::JoinHandle<()>,
}

impl Scene {
    async fn start() -> Option<Scene> {
        let cluster = EtcdCluster::start().await?;
        let leader = cluster.leader().await;
        let options = cluster.options_in_order(&[leader]);
        let store: Arc<dyn Store> = Arc::new(EtcdStore::connect(options).await.unwrap());
        let mut nodes = Vec::new();
        for _ in 0..FLEET {
            nodes.push(start_greeter(&store, "greeter", Duration::ZERO).await);
        }
        let resolver = Resolver::builder(store.clone())
            .store_timeout(Duration::from_secs(3))
            .build();
        let handle = resolver
            .subscribe(Subscription::new("helloworld.Greeter"))
            .await
            .unwrap();
        assert_eq!(handle.current().len(), FLEET);
        let sizes = Arc::new(Mutex::new(vec![FLEET]));
        let mut follower = handle.clone();
        let record = sizes.clone();
        tokio::spawn(async move {
            while let Ok(set) = follower.changed().await {
                record.lock().unwrap().push(set.len());
            }
        });
        let (channel, _) = resolver.balanced_channel(&handle).unwrap();
        let calls = Arc::new(Calls::default());
        let counting = calls.clone();
        let caller = tokio::spawn(async move {
            let mut client = GreeterClient::new(channel);
            while !counting.stop.load(Ordering::Relaxed) {
                let mut request = tonic::Request::new(HelloRequest { name: "x".into() });
                request.set_timeout(Duration::from_secs(1));
                let call = tokio::time::timeout(Duration::from_secs(2), client.say_hello(request));
                let counter = match call.await {
                    Ok(Ok(_)) => &counting.ok,
                    _ => &counting.failed,
                };
                counter.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(CALL_EVERY).await;
            }
        });
        let scene = Scene {
            cluster,
            store,
            leader,
            nodes,
            handle,
            sizes,
            calls,
            caller,
        };
        scene.calls_go_on("before the fault").await;
        Some(scene)
    }

    /// Waits until some more calls succeeded.
    async fn calls_go_on(&self, when: &str) {
        let before = self.calls.ok.load(Ordering::Relaxed);
        eventually(WAIT, &format!("calls to succeed {when}"), || async {
            self.calls.ok.load(Ordering::Relaxed) >= before + 10
        })
        .await;
    }

    /// After the fault: the providers are (again) registered, the subscriber follows all
    /// of them and never published an empty set, and no call failed.
    async fn check(self, fault: &str) {
        let Scene {
            cluster,
            store,
            nodes,
            handle,
            sizes,
            calls,
            caller,
            ..
        } = self;
        eventually(Duration::from_secs(20), "the fleet registered", || {
            let store = store.clone();
            async move {
                store
                    .get_prefix("/services/greeter/")
                    .await
                    .is_ok_and(|r| r.kvs.len() == FLEET)
            }
        })
        .await;
        let before = calls.ok.load(Ordering::Relaxed);
        eventually(WAIT, "calls after the fault", || async {
            calls.ok.load(Ordering::Relaxed) >= before + 10
        })
        .await;
        calls.stop.store(true, Ordering::Relaxed);
        caller.await.unwrap();
        let (ok, failed) = (
            calls.ok.load(Ordering::Relaxed),
            calls.failed.load(Ordering::Relaxed),
        );
        assert_eq!(
            failed,
            0,
            "{fault}: {failed} of {} calls failed",
            ok + failed
        );
        let answered: u64 = nodes.iter().map(GreeterNode::calls).sum();
        assert_eq!(
            answered, ok,
            "{fault}: every successful call was answered once"
        );
        assert!(
            nodes.iter().all(|n| n.calls() > 0),
            "{fault}: the balancer spread the calls"
        );
        assert_eq!(handle.current().len(), FLEET, "{fault}");
        let sizes = sizes.lock().unwrap().clone();
        assert!(
            sizes.iter().all(|&n| n > 0),
            "{fault}: an empty set: {sizes:?}"
        );
        for node in nodes {
            node.shutdown().await;
        }
        drop(cluster);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_go_on_while_the_leader_is_killed() {
    let Some(mut scene) = Scene::start().await else {
        return;
    };
    let leader = scene.leader;
    scene.cluster.kill(leader);
    scene.calls_go_on("with the leader dead").await;
    // A write still goes through (to the new leader).
    scene
        .store
        .put("/cluster/after-kill", b"v".to_vec(), None)
        .await
        .unwrap();
    scene.cluster.restart(leader).await;
    scene.check("leader killed").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_go_on_while_a_member_is_wiped_and_rejoins() {
    let Some(mut scene) = Scene::start().await else {
        return;
    };
    let follower = (0..MEMBERS).find(|&i| i != scene.leader).unwrap();
    scene.cluster.wipe_and_rejoin(follower).await;
    scene.calls_go_on("after the member rejoined").await;
    // The new member serves the whole registry: a store that talks to it alone sees the
    // fleet.
    let alone = EtcdStore::connect(introspect::EtcdOptions::new([scene
        .cluster
        .endpoint(follower)]))
    .await
    .unwrap();
    eventually(WAIT, "the rejoined member to hold the fleet", || async {
        alone
            .get_prefix("/services/greeter/")
            .await
            .is_ok_and(|r| r.kvs.len() == FLEET)
    })
    .await;
    scene.check("member wiped and rejoined").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_go_on_through_a_loss_of_quorum() {
    let Some(scene) = Scene::start().await else {
        return;
    };
    let frozen: Vec<usize> = (0..MEMBERS).filter(|&i| i != scene.leader).collect();
    for &i in &frozen {
        scene.cluster.pause(i);
    }
    // No quorum: writes fail (transient), calls do not.
    let error = scene
        .store
        .put("/cluster/no-quorum", b"v".to_vec(), None)
        .await
        .unwrap_err();
    assert!(error.is_transient(), "{error}");
    tokio::time::sleep(NO_QUORUM).await;
    scene.calls_go_on("without quorum").await;
    for &i in &frozen {
        scene.cluster.resume(i);
    }
    scene.check("quorum lost and restored").await;
}
