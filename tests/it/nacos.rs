//! Nacos, as Dubbo Java 3.3 and dubbo-go 3.3 write it, on a real server (rnacos): the
//! record as Dubbo Java's `NacosServiceDiscovery` reads it, Java- and Go-shaped records read
//! back, Rust providers and consumers end to end, and faults judged by the calls routed
//! through the balanced channel: server restarts, a provider process killed, a consumer
//! started while the server is down. Last, apps whose lists are over the SDK's 4 MiB gRPC
//! limit: listed over HTTP and followed by polling, up to 10,000 instances.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use introspect::backend::{ConnectOptions, InstanceRead};
use introspect::consumer::{SnapshotOptions, SubscribeOptions};
use introspect::model::keys;
use introspect::{Limits, Resolver, Subscription};
use serde_json::Value;

use crate::support::calls::Caller;
use crate::support::greeter::{GreeterNode, start_greeter_on};
use crate::support::killable::GREETER;
use crate::support::nacos::{
    ADMIN_PASSWORD, DETECTION_TIMEOUT, NacosServer, raw_naming, register_raw,
};
use crate::support::peer_cases::KILL_ALLOWANCE;
use crate::support::wait::eventually;

/// Providers' TTL: on Nacos the keep-alive rhythm (the connection is the lease).
const TTL: Duration = Duration::from_secs(3);
const LIMIT: Duration = Duration::from_secs(40);
const DRAIN: Duration = Duration::from_millis(500);

/// The instances of `service` in `DEFAULT_GROUP` as the server's HTTP API lists them.
async fn hosts(server: &NacosServer, service: &str) -> Vec<Value> {
    server.instances_http("DEFAULT_GROUP", service).await["hosts"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_we_register_is_what_dubbo_java_reads_and_java_and_go_records_read_back() {
    let Some(server) = NacosServer::start().await else {
        return;
    };
    let node = start_greeter_on(server.backend().await, "shop$v2", TTL, DRAIN).await;
    // Dubbo Java's NacosServiceDiscovery: selectInstances("shop___v2", group, healthy=true),
    // then toServiceInstance: service name without its group, ip, port, metadata, enabled,
    // healthy. Every field it reads, as the server holds them.
    let listed = hosts(&server, "shop___v2").await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    let host = &listed[0];
    assert_eq!(host["ip"], "127.0.0.1");
    assert_eq!(host["port"], node.address.port());
    assert_eq!(host["weight"], 1.0);
    assert_eq!(host["healthy"], true);
    assert_eq!(host["enabled"], true);
    assert_eq!(host["ephemeral"], true);
    assert_eq!(host["clusterName"], "DEFAULT");
    assert_eq!(host["serviceName"], "DEFAULT_GROUP@@shop___v2");
    let metadata = host["metadata"].as_object().unwrap();
    for key in [
        keys::REVISION,
        keys::STORAGE_TYPE,
        keys::ENDPOINTS,
        keys::METADATA_SERVICE_URL_PARAMS,
        "meta-v",
    ] {
        assert!(
            metadata.contains_key(key),
            "{key} missing from {metadata:?}"
        );
    }
    assert_eq!(metadata[keys::STORAGE_TYPE], "local");
    assert!(!metadata.contains_key(keys::STOPPING));
    assert_eq!(metadata[keys::REVISION].as_str().unwrap().len(), 64);

    // A Java-shaped and a Go-shaped record (dubbo-go adds its instance id under `id`).
    let raw = raw_naming(&server).await;
    let revision = "a7c1d3e1f1b7b0b4c3a0f1c2d3e4f5a6";
    let java = [
        (keys::REVISION, revision),
        (keys::STORAGE_TYPE, "local"),
        (
            keys::METADATA_SERVICE_URL_PARAMS,
            r#"{"version":"2.0.0","protocol":"tri","port":"20880"}"#,
        ),
        (keys::ENDPOINTS, r#"[{"port":20880,"protocol":"tri"}]"#),
        ("meta-v", "2.0.0"),
        (
            "dubbo.metadata-service.url-params",
            r#"{"version":"2.0.0","protocol":"tri","port":"20880"}"#,
        ),
    ];
    register_raw(&raw, "DEFAULT_GROUP", "java-app", "10.0.0.7", 20880, &java).await;
    let go = [
        (keys::REVISION, revision),
        (keys::STORAGE_TYPE, "local"),
        ("id", "10.0.0.8:20000"),
        (keys::ENDPOINTS, r#"[{"port":20000,"protocol":"tri"}]"#),
    ];
    register_raw(&raw, "DEFAULT_GROUP", "go-app", "10.0.0.8", 20000, &go).await;
    let backend = server.backend().await;
    let limits = Limits::default();
    let read = InstanceRead::new(&limits);
    let java_read = backend.instances().list("java-app", read).await.unwrap();
    let i = &java_read.instances["10.0.0.7:20880"];
    assert_eq!(i.service_name, "java-app");
    assert_eq!(i.revision(), revision);
    assert_eq!(i.metadata_service_port(), 20880);
    let go_read = backend.instances().list("go-app", read).await.unwrap();
    let i = &go_read.instances["10.0.0.8:20000"];
    assert!(
        !i.metadata.contains_key("id"),
        "dubbo-go's id is not metadata"
    );
    assert_eq!(i.port_for_protocol("tri"), 20000);
    let apps = backend.instances().list_apps(&limits).await.unwrap();
    assert!(
        ["go-app", "java-app", "shop$v2"]
            .iter()
            .all(|app| apps.contains_key(*app)),
        "{:?}",
        apps.keys()
    );
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_providers_of_one_app_in_one_process_are_eight_instances() {
    let Some(server) = NacosServer::start().await else {
        return;
    };
    let backend = server.backend().await;
    let mut nodes = Vec::new();
    for _ in 0..8 {
        nodes.push(start_greeter_on(backend.clone(), "eight", TTL, DRAIN).await);
    }
    let list = backend
        .instances()
        .list("eight", InstanceRead::new(&Limits::default()))
        .await
        .unwrap();
    assert_eq!(list.instances.len(), 8, "{:?}", list.instances.keys());
    assert_eq!(hosts(&server, "eight").await.len(), 8);
    let resolver = Resolver::new(backend);
    let endpoints = resolver.resolve(&Subscription::new(GREETER)).await.unwrap();
    assert_eq!(endpoints.len(), 8);
    assert_eq!(
        resolver.stats().await.metadata_fetches,
        1,
        "one call per revision"
    );
    for node in nodes {
        node.shutdown().await;
    }
    eventually(LIMIT, "all eight deregistered", || async {
        hosts(&server, "eight").await.is_empty()
    })
    .await;
}

/// A consumer calling the Greeter through a balanced channel.
async fn caller(resolver: &Resolver) -> (introspect::SubscriptionHandle, Caller) {
    let handle = resolver
        .subscribe(Subscription::new(GREETER))
        .await
        .unwrap();
    let (channel, mut channel_handle) = resolver.balanced_channel(&handle).unwrap();
    while channel_handle.addresses().is_empty() {
        channel_handle.changed().await.unwrap();
    }
    let caller = Caller::start(channel, Duration::from_millis(20));
    eventually(LIMIT, "calls flowing", || async { caller.ok() >= 20 }).await;
    (handle, caller)
}

async fn calls_keep_flowing(caller: &Caller, what: &str) {
    let ok = caller.ok();
    eventually(LIMIT, what, || async { caller.ok() >= ok + 30 }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn greeters_on_nacos_are_called_and_a_graceful_stop_costs_no_call() {
    let Some(server) = NacosServer::start().await else {
        return;
    };
    let url = server.url();
    let connect = || async { introspect::backend::connect(&url).await.unwrap() };
    let a = start_greeter_on(connect().await, "greeter", TTL, DRAIN).await;
    let b = start_greeter_on(connect().await, "greeter", TTL, DRAIN).await;
    let resolver = Resolver::new(server.backend().await);
    let endpoints = resolver.resolve(&Subscription::new(GREETER)).await.unwrap();
    assert_eq!(endpoints.len(), 2);
    assert_eq!(resolver.stats().await.metadata_fetches, 1);
    let (handle, caller) = caller(&resolver).await;
    // The stop registers the record again marked as stopping, drains, then deregisters.
    let port = a.address.port();
    let http = server.address();
    let marked = tokio::spawn(async move {
        let server_port: u16 = http.rsplit_once(':').unwrap().1.parse().unwrap();
        for _ in 0..300 {
            let list = crate::support::nacos::instances_http_at(server_port, "greeter").await;
            let marked = list["hosts"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|h| h["port"] == port && h["metadata"][keys::STOPPING] == "true");
            if marked {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    });
    a.shutdown().await;
    assert!(
        marked.await.unwrap(),
        "the record was marked as stopping before it went"
    );
    eventually(LIMIT, "one endpoint left", || async {
        handle.current().len() == 1
    })
    .await;
    assert!(!handle.protection_active(), "a graceful stop is never held");
    calls_keep_flowing(&caller, "calls after the stop").await;
    let (ok, failed, errors) = caller.finish().await;
    assert_eq!(failed, 0, "{ok} calls, failures: {errors:?}");
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_survive_a_restart_on_the_same_data_and_on_an_empty_data_dir() {
    let Some(mut server) = NacosServer::start().await else {
        return;
    };
    let mut nodes: Vec<GreeterNode> = Vec::new();
    for _ in 0..2 {
        nodes.push(start_greeter_on(server.backend().await, "small", TTL, DRAIN).await);
    }
    let resolver = Resolver::new(server.backend().await);
    let (handle, caller) = caller(&resolver).await;
    let mut watcher = handle.watch();
    let watching = Arc::new(AtomicBool::new(true));
    let still = watching.clone();
    let smallest = tokio::spawn(async move {
        // From the set current now: one that never changes never went below it.
        let mut smallest = watcher.borrow_and_update().len();
        while still.load(Ordering::Relaxed) {
            let next = tokio::time::timeout(Duration::from_millis(100), watcher.changed());
            if let Ok(Ok(())) = next.await {
                smallest = smallest.min(watcher.borrow_and_update().len());
            }
        }
        smallest
    });

    server.restart().await;
    eventually(LIMIT, "both re-registered after the restart", || async {
        hosts(&server, "small").await.len() == 2
    })
    .await;
    calls_keep_flowing(&caller, "calls after a restart on the same data").await;
    server.restart_empty().await;
    eventually(LIMIT, "both re-registered on the empty server", || async {
        hosts(&server, "small").await.len() == 2
    })
    .await;
    eventually(LIMIT, "both routed again", || async {
        handle.current().len() == 2
    })
    .await;
    calls_keep_flowing(&caller, "calls after the empty restart").await;
    watching.store(false, Ordering::Relaxed);
    let smallest = smallest.await.unwrap();
    let (ok, failed, errors) = caller.finish().await;
    eprintln!("{ok} calls, {failed} failed, smallest set {smallest}: {errors:?}");
    assert!(smallest >= 1, "an empty set was published");
    // A restart drops connections: calls in flight at that moment may fail, no more.
    assert!(failed <= 4, "{failed} failed: {errors:?}");
    for node in nodes {
        node.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_login_ends_with_a_permanent_error() {
    let Some(server) = NacosServer::start_with_auth().await else {
        return;
    };
    let url = server.url();
    let right = ConnectOptions::default().with_credentials("nacos", ADMIN_PASSWORD);
    // rnacos creates its admin user shortly after it starts serving.
    let mut backend = None;
    for _ in 0..50 {
        match introspect::backend::connect_with(&url, &right).await {
            Ok(b) => {
                backend = Some(b);
                break;
            }
            Err(e) => {
                eprintln!("login not yet accepted: {e}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    let backend = backend.expect("the right credentials are accepted");
    backend
        .mapping()
        .add(GREETER, "secret-app", &Limits::default())
        .await
        .unwrap();
    let wrong = ConnectOptions::default().with_credentials("nacos", "wrong-pw");
    let refused = match introspect::backend::connect_with(&url, &wrong).await {
        Err(e) => e,
        Ok(backend) => backend
            .instances()
            .list("secret-app", InstanceRead::new(&Limits::default()))
            .await
            .expect_err("refused"),
    };
    assert!(refused.is_permanent(), "{refused}");
    assert!(!refused.to_string().contains("wrong-pw"), "{refused}");
    let none = match introspect::backend::connect(&url).await {
        Err(e) => e,
        Ok(backend) => backend
            .instances()
            .list("secret-app", InstanceRead::new(&Limits::default()))
            .await
            .expect_err("no credentials"),
    };
    assert!(none.is_permanent(), "{none}");
}

/// The smallest set a subscription and its balanced channel publish until `watching` is
/// cleared: `(endpoints, addresses, sets published)`, from the sizes they started with.
fn smallest_sets(
    handle: &introspect::SubscriptionHandle,
    mut channel: introspect::consumer::ChannelHandle,
    watching: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<(usize, usize, u64)> {
    let mut watcher = handle.watch();
    tokio::spawn(async move {
        let mut endpoints = watcher.borrow_and_update().len();
        let mut addresses = channel.addresses().len();
        let mut published = 0;
        while watching.load(Ordering::Relaxed) {
            let tick = Duration::from_millis(50);
            tokio::select! {
                Ok(Ok(())) = tokio::time::timeout(tick, watcher.changed()) => {
                    published += 1;
                    endpoints = endpoints.min(watcher.borrow_and_update().len());
                }
                Ok(Ok(now)) = tokio::time::timeout(tick, channel.changed()) => {
                    addresses = addresses.min(now.len());
                }
                else => {}
            }
        }
        (endpoints, addresses, published)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nacos_restarted_under_a_two_instance_app_never_publishes_it_empty_and_no_call_fails() {
    let Some(mut server) = NacosServer::start().await else {
        return;
    };
    let mut nodes = Vec::new();
    for _ in 0..2 {
        nodes.push(start_greeter_on(server.backend().await, "pair", TTL, DRAIN).await);
    }
    let resolver = Resolver::new(server.backend().await);
    let handle = resolver
        .subscribe(Subscription::new(GREETER))
        .await
        .unwrap();
    let (channel, channel_handle) = resolver.balanced_channel(&handle).unwrap();
    let known = async {
        let mut channel_handle = channel_handle;
        while channel_handle.addresses().len() < 2 {
            channel_handle.changed().await.unwrap();
        }
        channel_handle
    };
    let channel_handle = tokio::time::timeout(LIMIT, known)
        .await
        .expect("the channel learns both addresses");
    let caller = Caller::start(channel, Duration::from_millis(20));
    eventually(LIMIT, "calls flowing", || async { caller.ok() >= 20 }).await;
    let watching = Arc::new(AtomicBool::new(true));
    let smallest = smallest_sets(&handle, channel_handle, watching.clone());

    // Twice: the server forgets both ephemeral instances and the providers' SDK clients
    // register them again once they reconnect.
    for round in 1..=2 {
        server.restart().await;
        eventually(LIMIT, "both registered again", || async {
            hosts(&server, "pair").await.len() == 2
        })
        .await;
        eventually(LIMIT, "both routed", || async {
            handle.current().len() == 2
        })
        .await;
        calls_keep_flowing(&caller, &format!("calls after restart {round}")).await;
        assert!(nodes.iter().all(|n| n.calls() > 0), "both providers called");
    }
    // The consumer still follows: a third provider is routed to and called.
    let third = start_greeter_on(server.backend().await, "pair", TTL, DRAIN).await;
    eventually(LIMIT, "the third one routed and called", || async {
        handle.current().len() == 3 && third.calls() >= 5
    })
    .await;
    nodes.push(third);
    watching.store(false, Ordering::Relaxed);
    let (endpoints, addresses, published) = smallest.await.unwrap();
    let (ok, failed, errors) = caller.finish().await;
    eprintln!(
        "{ok} calls, {failed} failed; smallest set {endpoints} endpoints, {addresses} \
         addresses, {published} sets published"
    );
    assert!(endpoints >= 1, "an empty set was published");
    assert!(addresses >= 1, "the balancer was left with no address");
    assert_eq!(failed, 0, "{ok} calls, failures: {errors:?}");
    for node in nodes {
        node.shutdown().await;
    }
}

/// Set by [`a_provider_killed_is_dropped_by_nacos_and_costs_at_most_the_allowance`] for
/// the process it starts: the registry URL [`crash_child_provider`] registers in.
const CHILD_REGISTRY: &str = "INTROSPECT_TEST_CRASH_CHILD_REGISTRY";
/// What the child prints once registered, followed by its address.
const CHILD_READY: &str = "crash-child-registered ";
/// The app of the crash test.
const CRASHING: &str = "crashing";

/// The provider process of the crash test: this test binary run again for this one test,
/// with [`CHILD_REGISTRY`] set. It registers a Greeter of [`CRASHING`], prints where it
/// listens and waits to be killed. Without the variable it does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the provider process of the crash test, which runs it"]
async fn crash_child_provider() {
    let Ok(url) = std::env::var(CHILD_REGISTRY) else {
        return;
    };
    let backend = introspect::backend::connect(&url).await.unwrap();
    let node = start_greeter_on(backend, CRASHING, TTL, DRAIN).await;
    println!("{CHILD_READY}{}", node.address);
    std::future::pending::<()>().await;
}

/// Starts [`crash_child_provider`] in a process of its own registered in `server`; returns
/// the process and where it serves.
async fn crash_child(server: &NacosServer) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "nacos::crash_child_provider",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_REGISTRY, server.url())
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the test binary runs again as the provider process");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            // The test harness's "test … " may precede it on the line.
            if let Some((_, address)) = line.split_once(CHILD_READY) {
                return address.trim().to_owned();
            }
        }
        panic!("the provider process ended before it registered");
    };
    let address = tokio::time::timeout(LIMIT, ready)
        .await
        .expect("the provider process registered in time");
    // Keep reading its output, so that it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, address)
}

/// Whether the server lists an instance of `app` at `port`.
async fn listed(server: &NacosServer, app: &str, port: u16) -> bool {
    hosts(server, app).await.iter().any(|h| h["port"] == port)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_killed_is_dropped_by_nacos_and_costs_at_most_the_allowance() {
    let Some(server) = NacosServer::start().await else {
        return;
    };
    let staying = start_greeter_on(server.backend().await, CRASHING, TTL, DRAIN).await;
    let (mut child, address) = crash_child(&server).await;
    let killed_port: u16 = address.rsplit_once(':').unwrap().1.parse().unwrap();
    assert!(listed(&server, CRASHING, killed_port).await);
    let resolver = Resolver::new(server.backend().await);
    let handle = resolver
        .subscribe(Subscription::new(GREETER))
        .await
        .unwrap();
    let channel = crate::support::calls::channel_over(&resolver, &handle, 2).await;
    let caller = Caller::start(channel, Duration::from_millis(10));
    // Both are called: the calls the staying one did not answer went to the other process.
    eventually(LIMIT, "calls reaching both providers", || async {
        caller.ok() >= 50 && caller.ok() >= staying.calls() + 10
    })
    .await;
    assert_eq!(caller.failed(), 0, "before the kill");

    // SIGKILL: no goodbye, no deregistration; the kernel closes the process's sockets.
    child.start_kill().unwrap();
    let killed = std::time::Instant::now();
    child.wait().await.unwrap();
    let mut dropped_by_server = None;
    let mut dropped_by_consumer = None;
    while dropped_by_server.is_none() || dropped_by_consumer.is_none() {
        if dropped_by_server.is_none() && !listed(&server, CRASHING, killed_port).await {
            dropped_by_server = Some(killed.elapsed());
        }
        if dropped_by_consumer.is_none() && !handle.current().iter().any(|e| e.port == killed_port)
        {
            dropped_by_consumer = Some(killed.elapsed());
        }
        assert!(
            killed.elapsed() < LIMIT,
            "the killed instance still there after {LIMIT:?}: listed by the server {}, \
             routed by the consumer {}",
            dropped_by_server.is_none(),
            dropped_by_consumer.is_none()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let failed_when_dropped = caller.failed();
    let ok = caller.ok();
    eventually(LIMIT, "100 more calls", || async {
        caller.ok() >= ok + 100
    })
    .await;
    let (ok, failed, errors) = caller.finish().await;
    let stats = resolver.stats().await;
    eprintln!(
        "killed provider: dropped by rnacos after {:?}, by the consumer after {:?}; {ok} calls \
         answered, {failed} failed ({failed_when_dropped} before the drop): {errors:?}; \
         set aside {}",
        dropped_by_server.unwrap(),
        dropped_by_consumer.unwrap(),
        stats.set_aside
    );
    assert!(
        dropped_by_server.unwrap() < DETECTION_TIMEOUT,
        "a killed process's connection closes: the server drops its instance before any \
         detection timeout"
    );
    assert!(
        failed <= KILL_ALLOWANCE,
        "{failed} of {} calls failed after the kill: {errors:?}; {stats:?}",
        ok + failed
    );
    assert_eq!(
        failed, failed_when_dropped,
        "no failure once the instance was gone: {errors:?}"
    );
    staying.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_started_with_nacos_down_serves_its_snapshot_then_catches_up() {
    let Some(mut server) = NacosServer::start().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let options = SubscribeOptions::default()
        .snapshot(SnapshotOptions::new(dir.path()))
        .snapshot_wait(Duration::from_millis(500))
        .start_timeout(Duration::from_secs(3));
    let mut nodes = Vec::new();
    for _ in 0..2 {
        nodes.push(start_greeter_on(server.backend().await, "snapshot", TTL, DRAIN).await);
    }
    let mut known: Vec<u16> = nodes.iter().map(|n| n.address.port()).collect();
    known.sort_unstable();
    let ports = |handle: &introspect::SubscriptionHandle| {
        let mut ports: Vec<u16> = handle.current().iter().map(|e| e.port).collect();
        ports.sort_unstable();
        ports
    };
    // A first consumer writes the snapshot of the two.
    {
        let resolver = Resolver::builder(server.backend().await)
            .subscribe_options(options.clone())
            .build();
        let handle = resolver
            .subscribe(Subscription::new(GREETER))
            .await
            .unwrap();
        eventually(LIMIT, "the snapshot of both written", || async {
            ports(&handle) == known && resolver.stats().await.snapshot_writes > 0
        })
        .await;
        drop(handle);
        eventually(LIMIT, "the first consumer's subscription over", || async {
            resolver.stats().await.subscriptions == 0
        })
        .await;
    }

    // Nacos goes down; a consumer starts: its backend connects in the background and the
    // subscription serves the snapshot.
    server.kill();
    let backend = crate::support::nacos::connect(
        server
            .options()
            .with_connect_timeout(Duration::from_secs(2))
            .with_connect_in_background(true),
    )
    .await;
    let resolver = Resolver::builder(backend)
        .subscribe_options(options)
        .build();
    let handle = resolver
        .subscribe(Subscription::new(GREETER))
        .await
        .unwrap();
    assert!(
        handle.serving_snapshot(),
        "Nacos is down: the snapshot is served"
    );
    assert_eq!(ports(&handle), known);
    assert_eq!(resolver.stats().await.snapshot_loads, 1);
    let channel = crate::support::calls::channel_over(&resolver, &handle, 2).await;
    let caller = Caller::start(channel, Duration::from_millis(20));
    eventually(LIMIT, "calls flowing on the snapshot", || async {
        caller.ok() >= 50
    })
    .await;
    assert_eq!(caller.failed(), 0, "calls on the snapshot: {}", caller.ok());
    assert!(handle.serving_snapshot(), "still down, still the snapshot");

    // Nacos comes back (its instances forgotten; the providers register again) and a third
    // provider starts: the consumer goes live and routes to all three.
    server.restart().await;
    let third = start_greeter_on(server.backend().await, "snapshot", TTL, DRAIN).await;
    known.push(third.address.port());
    known.sort_unstable();
    eventually(LIMIT, "the consumer live with all three", || async {
        !handle.serving_snapshot() && ports(&handle) == known
    })
    .await;
    eventually(LIMIT, "the third provider called", || async {
        third.calls() >= 5
    })
    .await;
    calls_keep_flowing(&caller, "calls after the catch-up").await;
    let (ok, failed, errors) = caller.finish().await;
    assert_eq!(failed, 0, "{ok} calls, failures: {errors:?}");
    nodes.push(third);
    for node in nodes {
        node.shutdown().await;
    }
}

/// Instances one raw client registers in the large-app tests: one batch request each
/// (Nacos keeps one batch per service per connection), under the server's own 4 MiB limit
/// on the requests it reads.
const BATCH: usize = 1_500;
/// The app of the oversized test.
const HUGE: &str = "huge";

/// [`BATCH`] Dubbo Java-shaped instances of [`HUGE`] (`10.{n}.x.y`).
fn huge_batch(n: usize) -> Vec<nacos_sdk::api::naming::ServiceInstance> {
    let revision = "b7c1d3e1f1b7b0b4c3a0f1c2d3e4f5a6";
    let metadata: std::collections::HashMap<String, String> = [
        (keys::REVISION, revision),
        (keys::STORAGE_TYPE, "local"),
        (
            keys::METADATA_SERVICE_URL_PARAMS,
            r#"{"version":"2.0.0","protocol":"tri","port":"20880"}"#,
        ),
        (keys::ENDPOINTS, r#"[{"port":20880,"protocol":"tri"}]"#),
        ("meta-v", "2.0.0"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    (0..BATCH)
        .map(|j| nacos_sdk::api::naming::ServiceInstance {
            ip: format!("10.{n}.{}.{}", j / 250, j % 250 + 1),
            port: 20880,
            metadata: metadata.clone(),
            ..Default::default()
        })
        .collect()
}

/// Registers `instances` of `service` in one batch through `raw` (replacing what `raw`
/// registered of `service` before).
async fn batch_register(
    raw: &nacos_sdk::api::naming::NamingService,
    service: &str,
    instances: Vec<nacos_sdk::api::naming::ServiceInstance>,
) {
    let n = instances.len();
    raw.batch_register_instance(service.into(), Some("DEFAULT_GROUP".into()), instances)
        .await
        .unwrap_or_else(|e| panic!("a batch of {n} into {service}: {e}"));
}

/// A raw client holding batch `n` of [`HUGE`].
async fn batch_of_huge(server: &NacosServer, n: usize) -> nacos_sdk::api::naming::NamingService {
    let raw = raw_naming(server).await;
    batch_register(&raw, HUGE, huge_batch(n)).await;
    raw
}

/// Applies the next event of `follow` to `held` (the addresses it holds).
async fn next_event(
    follow: &mut introspect::backend::InstanceFollow,
    held: &mut std::collections::BTreeSet<String>,
) {
    use introspect::backend::{InstanceChange, InstanceEvent};
    match follow.next().await.expect("the follow goes on") {
        InstanceEvent::Reset(list) => *held = list.instances.keys().cloned().collect(),
        InstanceEvent::Changes(changes) => {
            for change in changes {
                match change {
                    InstanceChange::Upsert(i) => {
                        held.insert(format!("{}:{}", i.host, i.port));
                    }
                    InstanceChange::Removed(address) | InstanceChange::Skipped { address, .. } => {
                        held.remove(&address);
                    }
                }
            }
        }
    }
}

/// Follows events of `follow` until it holds `count` instances, within `limit`.
async fn follow_until(
    follow: &mut introspect::backend::InstanceFollow,
    held: &mut std::collections::BTreeSet<String>,
    count: usize,
    limit: Duration,
    what: &str,
) {
    let reached = tokio::time::timeout(limit, async {
        while held.len() != count {
            next_event(follow, held).await;
        }
    })
    .await;
    assert!(
        reached.is_ok(),
        "{what}: the follow holds {}, not {count}",
        held.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_that_grows_past_grpc_s_4_mib_is_still_listed_and_followed() {
    let Some(server) = NacosServer::start().await else {
        return;
    };
    let limits = Limits::default();
    let read = InstanceRead::new(&limits);
    let mut raw = vec![batch_of_huge(&server, 0).await];
    let backend = server.backend().await;
    eventually(LIMIT, "the first batch listed", || async {
        hosts(&server, HUGE).await.len() == BATCH
    })
    .await;
    let small = backend.instances().list(HUGE, read).await.unwrap();
    assert_eq!(small.instances.len(), BATCH);
    // A follow of the app while it is small enough for pushes.
    let mut follow = backend.instances().follow(HUGE, read).await.unwrap();
    let mut held = std::collections::BTreeSet::new();
    next_event(&mut follow, &mut held).await;
    assert_eq!(
        held.len(),
        BATCH,
        "a follow starts with a reset of the list"
    );

    // Grown to two batches, which the follow receives pushed, then to six at once: the
    // server's answer (and its push) is over 4 MiB, which the SDK cannot receive.
    raw.push(batch_of_huge(&server, 1).await);
    follow_until(&mut follow, &mut held, 2 * BATCH, LIMIT, "two batches").await;
    // (Registered at once, the four batches most often reach the follow in one push.)
    let grown = futures::future::join_all((2..6).map(|n| batch_of_huge(&server, n))).await;
    let at = std::time::Instant::now();
    raw.extend(grown);
    eventually(LIMIT, "all six batches listed", || async {
        hosts(&server, HUGE).await.len() == 6 * BATCH
    })
    .await;
    let http = server
        .instances_http("DEFAULT_GROUP", HUGE)
        .await
        .to_string();
    eprintln!(
        "{} instances: {} bytes of JSON over HTTP",
        6 * BATCH,
        http.len()
    );
    assert!(http.len() > 4 << 20, "the list is over 4 MiB");

    // A list and the list of every app read it whole (over HTTP).
    let listed = backend.instances().list(HUGE, read).await.unwrap();
    assert_eq!(listed.instances.len(), 6 * BATCH);
    let all = backend.instances().list_apps(&limits).await.unwrap();
    assert_eq!(all[HUGE].instances.len(), 6 * BATCH);

    // The follow finds the grown app on its next check of the server (within 20 s) and
    // polls it from then on: it follows half a batch deregistered.
    follow_until(&mut follow, &mut held, 6 * BATCH, LIMIT, "six batches").await;
    eprintln!("the follow holds six batches after {:?}", at.elapsed());
    {
        use futures::StreamExt;
        let raw = &raw[5];
        futures::stream::iter(huge_batch(5).into_iter().take(BATCH / 2))
            .map(|instance| async move {
                raw.deregister_instance(HUGE.into(), Some("DEFAULT_GROUP".into()), instance)
                    .await
                    .unwrap_or_else(|e| panic!("deregister: {e}"));
            })
            .buffer_unordered(32)
            .collect::<()>()
            .await;
    }
    follow_until(
        &mut follow,
        &mut held,
        5 * BATCH + BATCH / 2,
        LIMIT,
        "half a batch deregistered",
    )
    .await;
    // A new follow starts polling at once.
    let mut again = backend.instances().follow(HUGE, read).await.unwrap();
    let mut held_again = std::collections::BTreeSet::new();
    next_event(&mut again, &mut held_again).await;
    assert_eq!(held_again, held);
    drop(raw);
}

/// The app of the 10,000-instance test.
const FLEET: &str = "fleet";
/// Its size: more than one gRPC answer of the SDK holds of its records (about 6 MB).
const FLEET_SIZE: usize = 10_000;
/// Records per batch registration of the fleet (about 1.4 MB a request).
const FLEET_BATCH: usize = 2_000;

/// Record `i` of the fleet: `template` (a real provider's record) at port `20000 + i` of
/// loopback, every protocol on that port, its MetadataService still the template's.
fn fleet_record(template: &introspect::ServiceInstance, i: usize) -> introspect::ServiceInstance {
    let port = u16::try_from(20_000 + i).expect("a port");
    let mut record = template.clone();
    record.host = "127.0.0.1".into();
    record.port = port;
    let endpoints: Vec<introspect::model::ProtocolPort> = template
        .protocol_ports()
        .into_iter()
        .map(|p| introspect::model::ProtocolPort {
            port,
            protocol: p.protocol,
        })
        .collect();
    record.metadata.insert(
        keys::ENDPOINTS.into(),
        serde_json::to_string(&endpoints).unwrap(),
    );
    record
}

/// Registers records `range` of the fleet in one batch on a client of its own.
async fn fleet_batch(
    server: &NacosServer,
    template: &introspect::ServiceInstance,
    range: std::ops::Range<usize>,
) -> nacos_sdk::api::naming::NamingService {
    let raw = raw_naming(server).await;
    let records = range
        .map(|i| introspect::backend::nacos::record::to_nacos(&fleet_record(template, i)))
        .collect();
    batch_register(&raw, FLEET, records).await;
    raw
}

/// Deregisters records `range` of the fleet through `raw`, 32 at a time.
async fn deregister(
    raw: &nacos_sdk::api::naming::NamingService,
    template: &introspect::ServiceInstance,
    range: std::ops::Range<usize>,
) {
    use futures::StreamExt;
    futures::stream::iter(range)
        .map(|i| async move {
            let record = introspect::backend::nacos::record::to_nacos(&fleet_record(template, i));
            raw.deregister_instance(FLEET.into(), Some("DEFAULT_GROUP".into()), record)
                .await
                .unwrap_or_else(|e| panic!("deregister record {i}: {e}"));
        })
        .buffer_unordered(32)
        .collect::<()>()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_of_ten_thousand_instances_resolves_follows_and_survives_churn() {
    let Some(server) = NacosServer::start().await else {
        return;
    };
    let started = std::time::Instant::now();
    // A real provider serves the metadata the fleet's records point at.
    let provider = start_greeter_on(server.backend().await, FLEET, TTL, DRAIN).await;
    let backend = server.backend().await;
    let limits = Limits::default();
    let template = backend
        .instances()
        .list(FLEET, InstanceRead::new(&limits))
        .await
        .unwrap();
    let template = template.instances.values().next().unwrap().as_ref().clone();
    let mut raw = Vec::new();
    for first in (0..FLEET_SIZE).step_by(FLEET_BATCH) {
        raw.push(fleet_batch(&server, &template, first..first + FLEET_BATCH).await);
    }
    let all = FLEET_SIZE + 1;
    eventually(LIMIT, "the fleet registered", || async {
        hosts(&server, FLEET).await.len() == all
    })
    .await;
    let size = server
        .instances_http("DEFAULT_GROUP", FLEET)
        .await
        .to_string()
        .len();
    eprintln!(
        "{all} instances: {size} bytes of JSON over HTTP; registered in {:?}",
        started.elapsed()
    );
    assert!(size > 4 << 20, "the list is over the SDK's 4 MiB");

    // Resolved cold, then followed by a live subscription.
    let resolver = Resolver::new(backend.clone());
    let subscription = Subscription::new(GREETER).provided_by([FLEET]);
    let at = std::time::Instant::now();
    let resolved = resolver.resolve(&subscription).await.unwrap();
    eprintln!(
        "resolved {} endpoints in {:?}",
        resolved.len(),
        at.elapsed()
    );
    assert_eq!(resolved.len(), all);
    let mut handle = resolver.subscribe(subscription).await.unwrap();
    let until = |handle: &mut introspect::SubscriptionHandle, count: usize, what: &'static str| {
        let mut handle = handle.clone();
        async move {
            tokio::time::timeout(LIMIT, async {
                while handle.current().len() != count {
                    handle.changed().await.unwrap();
                }
            })
            .await
            .unwrap_or_else(|_| {
                panic!("{what}: {} endpoints, not {count}", handle.current().len())
            });
        }
    };
    until(&mut handle, all, "the first full set").await;

    // Churn: half a batch deregistered one by one while as many new instances register,
    // then another half batch gone. (A batch registration on a client that has one adds to
    // it on rnacos; Nacos replaces it.)
    let at = std::time::Instant::now();
    let gone = 0..FLEET_BATCH / 2;
    let new = FLEET_SIZE..FLEET_SIZE + FLEET_BATCH / 2;
    let (newcomers, ()) = tokio::join!(fleet_batch(&server, &template, new.clone()), async {
        deregister(&raw[0], &template, gone.clone()).await
    });
    raw.push(newcomers);
    let replaced = |handle: &introspect::SubscriptionHandle| {
        let ports: std::collections::BTreeSet<u16> =
            handle.current().iter().map(|e| e.port).collect();
        ports.len() == all
            && ports.contains(&u16::try_from(20_000 + new.start).unwrap())
            && !ports.contains(&u16::try_from(20_000 + gone.start).unwrap())
    };
    let followed = tokio::time::timeout(LIMIT, async {
        while !replaced(&handle) {
            handle.changed().await.unwrap();
        }
    })
    .await;
    assert!(
        followed.is_ok(),
        "the churn not followed: {} endpoints",
        handle.current().len()
    );
    eprintln!("half a batch replaced, followed in {:?}", at.elapsed());
    deregister(&raw[0], &template, FLEET_BATCH / 2..FLEET_BATCH).await;
    until(
        &mut handle,
        all - FLEET_BATCH / 2,
        "another half batch gone",
    )
    .await;
    eprintln!("whole test {:?}", started.elapsed());
    drop(raw);
    provider.shutdown().await;
}
