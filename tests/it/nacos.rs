//! Nacos, as Dubbo Java 3.3 and dubbo-go 3.3 write it, on a real server (rnacos): the
//! record as Dubbo Java's `NacosServiceDiscovery` reads it, Java- and Go-shaped records read
//! back, Rust providers and consumers end to end, and faults judged by the calls routed
//! through the balanced channel.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use introspect::backend::ConnectOptions;
use introspect::model::keys;
use introspect::{Limits, Resolver, Subscription};
use serde_json::Value;

use crate::support::calls::Caller;
use crate::support::greeter::{GreeterNode, start_greeter_on};
use crate::support::killable::GREETER;
use crate::support::nacos::{ADMIN_PASSWORD, NacosServer, raw_naming, register_raw};
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
    let java_read = backend.instances().list("java-app", &limits).await.unwrap();
    let i = &java_read.instances["10.0.0.7:20880"];
    assert_eq!(i.service_name, "java-app");
    assert_eq!(i.revision(), revision);
    assert_eq!(i.metadata_service_port(), 20880);
    let go_read = backend.instances().list("go-app", &limits).await.unwrap();
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
        .list("eight", &Limits::default())
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
#[ignore = "known gap: after a restart on the same data the consumer can receive a successful \
            empty push that carries no sign of the restart at the seam (see the nacos \
            module docs); needs the resolver to hold an emptying change batch"]
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
        let mut smallest = usize::MAX;
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
            .list("secret-app", &Limits::default())
            .await
            .expect_err("refused"),
    };
    assert!(refused.is_permanent(), "{refused}");
    assert!(!refused.to_string().contains("wrong-pw"), "{refused}");
    let none = match introspect::backend::connect(&url).await {
        Err(e) => e,
        Ok(backend) => backend
            .instances()
            .list("secret-app", &Limits::default())
            .await
            .expect_err("no credentials"),
    };
    assert!(none.is_permanent(), "{none}");
}
