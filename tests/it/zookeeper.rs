//! ZooKeeper, as Dubbo Java 3.3 and dubbo-go 3.3 write it, on a real server: the records
//! compared field by field with what Java's Curator and dubbo-go write (golden dumps in
//! `tests/it/data/zookeeper/`), Rust providers and consumers end to end, and faults judged
//! by the calls routed through the balanced channel.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use introspect::backend::zookeeper::ZooKeeperOptions;
use introspect::backend::{Backend, ConnectOptions, InstanceRead, RegisterOptions};
use introspect::consumer::ProtectionOptions;
use introspect::model::keys;
use introspect::{Limits, Provider, Resolver, ServiceInfo, Subscription};
use serde_json::Value;

use crate::support::calls::Caller;
use crate::support::greeter::{GreeterNode, start_greeter_on};
use crate::support::killable::GREETER;
use crate::support::proxy::{Fault, FaultProxy};
use crate::support::wait::eventually;
use crate::support::zookeeper::{
    Ensemble, ZooKeeperServer, connect, create_with_parents, raw_client,
};

/// Providers' TTL: the session timeout they ask for (the test server grants 0.4 to 4 s).
const TTL: Duration = Duration::from_secs(2);
const LIMIT: Duration = Duration::from_secs(30);
const DRAIN: Duration = Duration::from_millis(500);

fn golden(name: &str) -> Value {
    let path = format!(
        "{}/tests/it/data/zookeeper/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_slice(&std::fs::read(&path).expect("golden file")).expect("golden JSON")
}

/// The keys of a JSON object in their written order.
fn keys_in_order(text: &str) -> Vec<String> {
    let mut reader = serde_json::Deserializer::from_str(text);
    let map: serde_json::Map<String, Value> = serde::Deserialize::deserialize(&mut reader).unwrap();
    map.keys().cloned().collect()
}

#[tokio::test]
async fn what_we_write_is_what_dubbo_java_writes_field_by_field_and_both_shapes_read_back() {
    let Some(server) = ZooKeeperServer::start().await else {
        return;
    };
    let backend = server.backend().await;
    let provider = Provider::builder("shop-orders", backend.clone())
        .host("10.0.0.7")
        .port(50051)
        .check_metadata_service(false)
        .lease_ttl(TTL)
        .export(ServiceInfo::new("shop.OrderService").with_version("1.0"))
        .start()
        .await
        .unwrap();
    let raw = raw_client(&server).await;
    let (data, stat) = raw
        .get_data("/services/shop-orders/10.0.0.7:50051")
        .await
        .unwrap();
    assert_ne!(stat.ephemeral_owner, 0, "an EPHEMERAL node");
    let (_, parent) = raw.get_data("/services/shop-orders").await.unwrap();
    assert_eq!(parent.ephemeral_owner, 0);
    let text = String::from_utf8(data).unwrap();
    let ours: Value = serde_json::from_str(&text).unwrap();
    let java = golden("java-instance.json");
    // Curator's fields, in Curator's order, with Curator's types.
    let java_text = serde_json::to_string(&java).unwrap();
    assert_eq!(keys_in_order(&text), keys_in_order(&java_text));
    for field in ["sslPort", "uriSpec"] {
        assert_eq!(ours[field], Value::Null, "{field}");
    }
    assert_eq!(ours["serviceType"], java["serviceType"]);
    assert!(ours["registrationTimeUTC"].is_i64());
    assert_eq!(ours["name"], "shop-orders");
    assert_eq!(ours["id"], "10.0.0.7:50051");
    assert_eq!(ours["address"], "10.0.0.7");
    assert_eq!(ours["port"], 50051);
    let (payload, java_payload) = (&ours["payload"], &java["payload"]);
    assert_eq!(
        keys_in_order(&payload.to_string()),
        keys_in_order(&java_payload.to_string())
    );
    assert_eq!(payload["@class"], java_payload["@class"]);
    assert_eq!(payload["id"], ours["id"]);
    assert_eq!(payload["name"], ours["name"]);
    let metadata = payload["metadata"].as_object().unwrap();
    for key in [
        keys::REVISION,
        keys::STORAGE_TYPE,
        keys::ENDPOINTS,
        keys::METADATA_SERVICE_URL_PARAMS,
        keys::META_V,
    ] {
        assert!(
            java_payload["metadata"].get(key).is_some(),
            "Java writes {key}"
        );
        assert!(metadata[key].is_string(), "we write {key}");
    }
    // Java's and Go's records, as they write them, read back.
    let limits = Limits::default();
    let read = InstanceRead::new(&limits);
    for (file, app, address) in [
        ("java-instance.json", "shop-orders", "10.0.0.7:50051"),
        ("go-instance.json", "go-greeter", "10.0.0.8:20000"),
    ] {
        let bytes = std::fs::read(format!(
            "{}/tests/it/data/zookeeper/{file}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let path = format!("/services/{app}/{address}");
        if file.starts_with("java") {
            // Our provider holds that address: read Java's at another app.
            let path = format!("/services/java-orders/{address}");
            let renamed = String::from_utf8(bytes)
                .unwrap()
                .replace("shop-orders", "java-orders");
            create_with_parents(&raw, &path, renamed.as_bytes()).await;
            let list = backend.instances().list("java-orders", read).await.unwrap();
            let i = &list.instances[address];
            assert_eq!(i.revision(), "7c8b4f6e6f3a2d1c");
            assert_eq!(i.port_for_protocol("tri"), 50051);
            assert_eq!(i.metadata_service_port(), 50052);
            assert!(i.accepts_calls());
            continue;
        }
        create_with_parents(&raw, &path, &bytes).await;
        let list = backend.instances().list(app, read).await.unwrap();
        assert!(list.skipped.is_empty(), "{:?}", list.skipped);
        let i = &list.instances[address];
        assert_eq!(i.revision(), "2315792146");
        assert_eq!(i.metadata_service_port(), 20001);
    }
    // A record without @class (which Java fails on) and garbage are skipped or read, never
    // failing the app.
    let no_class = std::fs::read(format!(
        "{}/tests/it/data/zookeeper/no-class-instance.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    create_with_parents(&raw, "/services/shop/h:1", &no_class).await;
    create_with_parents(&raw, "/services/shop/h:2", &vec![b'x'; 100_000]).await;
    create_with_parents(
        &raw,
        "/services/shop/h:3",
        b"{\"name\":\"other\",\"address\":\"h\",\"port\":3}",
    )
    .await;
    let list = backend.instances().list("shop", read).await.unwrap();
    assert_eq!(list.instances.len(), 1);
    assert_eq!(list.skipped.len(), 2, "{:?}", list.skipped);
    provider.shutdown().await.unwrap();
    assert!(
        raw.check_stat("/services/shop-orders/10.0.0.7:50051")
            .await
            .unwrap()
            .is_none()
    );
}

/// A consumer over `backend` calling the Greeter through a balanced channel.
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
async fn greeters_on_zookeeper_are_called_and_a_graceful_stop_costs_no_call() {
    let Some(server) = ZooKeeperServer::start().await else {
        return;
    };
    let url = server.url();
    let a = start_greeter_on(
        introspect::backend::connect(&url).await.unwrap(),
        "greeter",
        TTL,
        DRAIN,
    )
    .await;
    let b = start_greeter_on(
        introspect::backend::connect(&url).await.unwrap(),
        "greeter",
        TTL,
        DRAIN,
    )
    .await;
    let resolver = Resolver::new(server.backend().await);
    let endpoints = resolver.resolve(&Subscription::new(GREETER)).await.unwrap();
    assert_eq!(endpoints.len(), 2);
    assert_eq!(
        resolver.stats().await.metadata_fetches,
        1,
        "one metadata call for one revision"
    );
    let (handle, caller) = caller(&resolver).await;
    // The stop marks the record first (the node stays, marked), then deletes it.
    let raw = raw_client(&server).await;
    let path = format!("/services/greeter/{}", a.address);
    let marked = {
        let raw = raw.clone();
        let path = path.clone();
        tokio::spawn(async move {
            for _ in 0..200 {
                if let Ok((data, _)) = raw.get_data(&path).await
                    && String::from_utf8_lossy(&data).contains("\"introspect.stopping\":\"true\"")
                {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            false
        })
    };
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
    let Some(mut server) = ZooKeeperServer::start().await else {
        return;
    };
    // The longest session the test server grants: a restart on the same data keeps the
    // sessions of clients that reconnect within it (one that does not is an expiry like
    // any other, and its provider registers again).
    let ttl = crate::support::zookeeper::TICK * 20;
    let mut nodes: Vec<GreeterNode> = Vec::new();
    for _ in 0..2 {
        nodes.push(start_greeter_on(server.backend().await, "small", ttl, DRAIN).await);
    }
    let resolver = Resolver::new(server.backend().await);
    let (handle, caller) = caller(&resolver).await;

    server.restart().await;
    calls_keep_flowing(&caller, "calls after a restart on the same data").await;
    eventually(LIMIT, "both routed after the restart", || async {
        handle.current().len() == 2
    })
    .await;
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

    server.restart_empty().await;
    eventually(LIMIT, "the wipe seen", || async {
        resolver.stats().await.wipes >= 1
    })
    .await;
    let raw = raw_client(&server).await;
    eventually(LIMIT, "both re-registered", || async {
        raw.list_children("/services/small")
            .await
            .is_ok_and(|c| c.len() == 2)
    })
    .await;
    eventually(LIMIT, "the recovery over", || async {
        handle.current().len() == 2 && !handle.protection_active()
    })
    .await;
    calls_keep_flowing(&caller, "calls after the wipe").await;
    watching.store(false, Ordering::Relaxed);
    let smallest = smallest.await.unwrap();
    assert!(
        smallest >= 2,
        "a set of {smallest} was published after the wipe"
    );
    let (ok, failed, errors) = caller.finish().await;
    eprintln!("{ok} calls, {failed} failed: {errors:?}");
    // A restart drops connections: calls in flight at that moment may fail, no more.
    assert!(failed <= 4, "{failed} failed: {errors:?}");
    for node in nodes {
        node.shutdown().await;
    }
}

/// A provider whose ZooKeeper session goes through `proxy`.
async fn greeter_through(proxy: &FaultProxy, app: &str) -> GreeterNode {
    let options = ZooKeeperOptions::new([proxy.address.to_string()])
        .with_session_timeout(TTL)
        .with_connect_timeout(Duration::from_secs(2));
    start_greeter_on(connect(options).await, app, TTL, DRAIN).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_whose_session_expired_while_serving_creates_its_node_again_and_no_call_fails() {
    let Some(server) = ZooKeeperServer::start().await else {
        return;
    };
    let proxy = FaultProxy::start(server.address().parse().unwrap()).await;
    let cut_off = greeter_through(&proxy, "greeter").await;
    let other = start_greeter_on(server.backend().await, "greeter", TTL, DRAIN).await;
    let resolver = Resolver::new(server.backend().await);
    let (handle, caller) = caller(&resolver).await;
    let raw = raw_client(&server).await;
    let path = format!("/services/greeter/{}", cut_off.address);
    let (_, before) = raw.get_data(&path).await.unwrap();

    proxy.set(Fault::Cut);
    eventually(LIMIT, "the session expired and its node went", || async {
        raw.check_stat(&path).await.is_ok_and(|s| s.is_none())
    })
    .await;
    proxy.set(Fault::Pass);
    eventually(LIMIT, "the node created again by a new session", || async {
        raw.check_stat(&path)
            .await
            .is_ok_and(|s| s.is_some_and(|s| s.ephemeral_owner != before.ephemeral_owner))
    })
    .await;
    eventually(LIMIT, "both routed again", || async {
        handle.current().len() == 2
    })
    .await;
    calls_keep_flowing(&caller, "calls after the re-registration").await;
    let (ok, failed, errors) = caller.finish().await;
    assert_eq!(failed, 0, "{ok} calls, failures: {errors:?}");
    assert!(cut_off.calls() > 0 && other.calls() > 0);
    cut_off.shutdown().await;
    other.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_of_eight_sessions_expiring_at_once_are_held_probed_and_calls_keep_succeeding() {
    let Some(server) = ZooKeeperServer::start().await else {
        return;
    };
    let proxy = FaultProxy::start(server.address().parse().unwrap()).await;
    let mut nodes = Vec::new();
    for _ in 0..6 {
        nodes.push(greeter_through(&proxy, "greeter").await);
    }
    for _ in 0..2 {
        nodes.push(start_greeter_on(server.backend().await, "greeter", TTL, DRAIN).await);
    }
    let resolver = Resolver::builder(server.backend().await)
        .protection(ProtectionOptions::default().max_hold(Duration::from_secs(60)))
        .build();
    let (handle, caller) = caller(&resolver).await;
    eventually(LIMIT, "eight endpoints", || async {
        handle.current().len() == 8
    })
    .await;
    // A partition between six providers and ZooKeeper: their sessions expire together.
    proxy.set(Fault::Cut);
    eventually(LIMIT, "the mass expiry held", || async {
        handle.protection_active() && resolver.stats().await.held_removals >= 5
    })
    .await;
    // The expiries before the share was crossed may have gone out before the hold took
    // them back (it holds retroactively): the set comes back to eight.
    eventually(LIMIT, "held, not stripped", || async {
        handle.current().len() == 8
    })
    .await;
    calls_keep_flowing(&caller, "calls while held").await;
    proxy.set(Fault::Pass);
    eventually(LIMIT, "the hold released as they return", || async {
        !handle.protection_active() && handle.current().len() == 8
    })
    .await;
    calls_keep_flowing(&caller, "calls after the return").await;
    let (ok, failed, errors) = caller.finish().await;
    assert_eq!(failed, 0, "{ok} calls, failures: {errors:?}");
    for node in nodes {
        node.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ensemble_s_leader_killed_costs_no_registration_and_calls_go_on() {
    let Some(mut ensemble) = Ensemble::start().await else {
        return;
    };
    let servers = ensemble.connect_string();
    let options = || {
        ZooKeeperOptions::new(servers.clone())
            .with_session_timeout(Duration::from_secs(4))
            .with_connect_timeout(Duration::from_secs(5))
    };
    let mut nodes = Vec::new();
    for _ in 0..2 {
        nodes.push(
            start_greeter_on(
                connect(options()).await,
                "greeter",
                Duration::from_secs(4),
                DRAIN,
            )
            .await,
        );
    }
    let resolver = Resolver::new(connect(options()).await);
    let (handle, caller) = caller(&resolver).await;
    let leader = ensemble.leader().await.expect("a leader");
    ensemble.members[leader].kill();
    ensemble.wait_quorum(2).await;
    calls_keep_flowing(&caller, "calls after the leader died").await;
    let backend = connect(ZooKeeperOptions::new(servers.clone())).await;
    eventually(LIMIT, "both still registered", || async {
        backend
            .instances()
            .list("greeter", InstanceRead::new(&Limits::default()))
            .await
            .is_ok_and(|l| l.instances.len() == 2)
    })
    .await;
    assert_eq!(handle.current().len(), 2);
    let (ok, failed, errors) = caller.finish().await;
    assert_eq!(failed, 0, "{ok} calls, failures: {errors:?}");
    for node in nodes {
        node.shutdown().await;
    }
}

#[tokio::test]
async fn wrong_digest_credentials_end_with_a_permanent_error() {
    let Some(server) = ZooKeeperServer::start().await else {
        return;
    };
    let url = server.url();
    let right = ConnectOptions::default().with_credentials("fleet", "right-pw");
    let provider_backend = introspect::backend::connect_with(&url, &right)
        .await
        .unwrap();
    let provider = Provider::builder("secret-app", provider_backend)
        .port(50051)
        .check_metadata_service(false)
        .lease_ttl(TTL)
        .export(ServiceInfo::new(GREETER))
        .start()
        .await
        .unwrap();
    let wrong = ConnectOptions::default().with_credentials("fleet", "wrong-pw");
    let backend: Backend = introspect::backend::connect_with(&url, &wrong)
        .await
        .unwrap();
    let error = backend
        .instances()
        .list("secret-app", InstanceRead::new(&Limits::default()))
        .await
        .expect_err("refused");
    assert!(error.is_permanent(), "{error}");
    assert!(!error.to_string().contains("wrong-pw"), "{error}");
    let resolver = Resolver::new(backend);
    let subscribed = resolver
        .subscribe(Subscription::new(GREETER).provided_by(["secret-app".to_owned()]))
        .await;
    match subscribed {
        Err(e) => assert!(e.is_permanent(), "{e}"),
        Ok(mut handle) => {
            let ended = tokio::time::timeout(LIMIT, handle.changed())
                .await
                .expect("ends");
            assert!(matches!(ended, Err(ref e) if e.is_permanent()), "{ended:?}");
        }
    }
    // The right credentials read it.
    let reader = introspect::backend::connect_with(&url, &right)
        .await
        .unwrap();
    let list = reader
        .instances()
        .list("secret-app", InstanceRead::new(&Limits::default()))
        .await
        .unwrap();
    assert_eq!(list.instances.len(), 1);
    provider.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_list_revision_is_a_zxid_that_goes_backwards_only_when_the_server_is_replaced() {
    let Some(mut server) = ZooKeeperServer::start().await else {
        return;
    };
    let limits = Limits::default();
    let read = InstanceRead::new(&limits);
    let instance = |port| {
        let mut i = introspect::ServiceInstance::new("shop", "127.0.0.1", port);
        i.metadata.insert(keys::REVISION.into(), "aa".into());
        i
    };
    let backend = server.backend().await;
    let instances = backend.instances();
    assert_eq!(
        instances.list("shop", read).await.unwrap().revision,
        0,
        "no app node"
    );
    let mut registrations = Vec::new();
    for port in 1..=20 {
        registrations.push(
            instances
                .register(&instance(port), &RegisterOptions::new(TTL, &limits))
                .await
                .unwrap(),
        );
    }
    let before = instances.list("shop", read).await.unwrap();
    registrations[0].update(&instance(1)).await.unwrap();
    let updated = instances.list("shop", read).await.unwrap();
    assert!(
        updated.revision > before.revision,
        "{} then {}",
        before.revision,
        updated.revision
    );
    drop(registrations);
    // The same data: zxids go on from where they were.
    server.restart().await;
    let backend = server.backend().await;
    let r = backend
        .instances()
        .register(&instance(99), &RegisterOptions::new(TTL, &limits))
        .await
        .unwrap();
    let after_restart = backend.instances().list("shop", read).await.unwrap();
    assert!(
        after_restart.revision > updated.revision,
        "{} then {}",
        updated.revision,
        after_restart.revision
    );
    assert_eq!(after_restart.epoch, updated.epoch);
    drop(r);
    // An empty server numbers its transactions afresh: lower, and a new epoch.
    server.restart_empty().await;
    let backend = server.backend().await;
    let _r = backend
        .instances()
        .register(&instance(1), &RegisterOptions::new(TTL, &limits))
        .await
        .unwrap();
    let replaced = backend.instances().list("shop", read).await.unwrap();
    eprintln!(
        "zxids: {:#x} before, {:#x} after a restart, {:#x} on an empty server",
        updated.revision, after_restart.revision, replaced.revision
    );
    assert!(replaced.revision < updated.revision);
    assert_ne!(replaced.epoch, updated.epoch);
}

#[tokio::test]
async fn the_session_timeout_is_what_the_server_grants() {
    let Some(server) = ZooKeeperServer::start().await else {
        return;
    };
    let backend = server.backend().await;
    let limits = Limits::default();
    let tick = crate::support::zookeeper::TICK;
    for (asked, granted) in [
        (Duration::from_secs(60), tick * 20),
        (Duration::from_millis(10), tick * 2),
    ] {
        let mut instance = introspect::ServiceInstance::new("shop", "127.0.0.1", 1);
        instance.metadata.insert(keys::REVISION.into(), "aa".into());
        let r = backend
            .instances()
            .register(&instance, &RegisterOptions::new(asked, &limits))
            .await
            .unwrap();
        assert_eq!(r.ttl(), granted, "asked for {asked:?}");
        assert!(r.id().starts_with("session 0x"), "{}", r.id());
        // The connection's bounds fit the session granted, not the one asked for: left
        // idle for longer than the session, the client's own pings keep it (bounds from a
        // 60 s ask would ping every 13.5 s; from a 10 ms ask, drop the connection at once).
        tokio::time::sleep(granted * 3 / 2).await;
        r.keep_alive().await.unwrap();
        r.deregister().await.unwrap();
    }
}

/// What Spring Cloud ZooKeeper (Curator's `ServiceDiscovery` with its own payload) writes
/// for an instance of `app` at `127.0.0.1:{port}`, its id set to the address.
fn spring_cloud_record(app: &str, port: u16) -> String {
    serde_json::json!({
        "name": app,
        "id": format!("127.0.0.1:{port}"),
        "address": "127.0.0.1",
        "port": port,
        "sslPort": null,
        "payload": {
            "@class": "org.springframework.cloud.zookeeper.discovery.ZookeeperInstance",
            "id": app,
            "name": app,
            "metadata": {
                "instance_status": "UP",
                keys::REVISION: "aa",
                keys::ENDPOINTS: format!(r#"[{{"port":{port},"protocol":"tri"}}]"#),
            },
        },
        "registrationTimeUTC": 1_700_000_000_000_i64,
        "serviceType": "DYNAMIC",
        "uriSpec": {"parts": [{"value": "scheme", "variable": true}]},
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_of_another_curator_user_is_skipped_counted_and_explained() {
    let Some(server) = ZooKeeperServer::start().await else {
        return;
    };
    let url = server.url();
    let greeter = start_greeter_on(
        introspect::backend::connect(&url).await.unwrap(),
        "greeter",
        TTL,
        DRAIN,
    )
    .await;
    let backend = server.backend().await;
    let resolver = Resolver::new(backend.clone());
    let (handle, caller) = caller(&resolver).await;

    // Spring Cloud ZooKeeper registers an app of the same name under the same root.
    let raw = raw_client(&server).await;
    let foreign = "/services/greeter/127.0.0.1:1";
    raw.create(
        foreign,
        spring_cloud_record("greeter", 1).as_bytes(),
        &zookeeper_client::CreateMode::Ephemeral.with_acls(zookeeper_client::Acls::anyone_all()),
    )
    .await
    .unwrap();

    // A list keeps the Dubbo instance and skips the foreign one, saying why.
    let limits = Limits::default();
    let list = backend
        .instances()
        .list("greeter", InstanceRead::new(&limits))
        .await
        .unwrap();
    assert_eq!(list.instances.len(), 1, "{:?}", list.instances.keys());
    assert!(list.instances.contains_key(&greeter.address.to_string()));
    assert_eq!(list.skipped.len(), 1, "{:?}", list.skipped);
    let (address, why) = &list.skipped[0];
    assert_eq!(address, "127.0.0.1:1");
    assert!(
        why.contains("org.springframework.cloud.zookeeper.discovery.ZookeeperInstance")
            && why.contains("not Dubbo's"),
        "{why}"
    );

    // The live subscription skips it too, counting it, and never routes to it.
    eventually(LIMIT, "the foreign record to be counted", || async {
        resolver.stats().await.skipped_records >= 1
    })
    .await;
    let endpoints = resolver.resolve(&Subscription::new(GREETER)).await.unwrap();
    let ports: Vec<u16> = endpoints.iter().map(|e| e.port).collect();
    assert_eq!(ports, [greeter.address.port()]);
    assert!(handle.current().iter().all(|e| e.port != 1));
    calls_keep_flowing(&caller, "calls beside the foreign record").await;
    let (ok, failed, errors) = caller.finish().await;
    assert_eq!(failed, 0, "{ok} calls, failures: {errors:?}");
    raw.delete(foreign, None).await.unwrap();
    greeter.shutdown().await;
}
