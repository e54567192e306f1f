//! The demo proves the point it prints: one metadata fetch per revision, not per instance,
//! on the embedded store and, run by the tool as `introspect --registry zookeeper://… demo`
//! and `--registry nacos://… demo`, on a real ZooKeeper and a real Nacos, each with the
//! whole fleet of 105 providers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::nacos::NacosServer;
use crate::support::wait::eventually;
use crate::support::zookeeper::ZooKeeperServer;
use introspect::backend::{Backend, InstanceRead};
use introspect::{Limits, MemoryStore, Store};
use introspect_cli::demo::{DemoOptions, DemoReport, run};

/// The apps the demo registers.
const APPS: [&str; 2] = ["shop-orders", "shop-payments"];

/// Runs the default demo on `backend` and checks what it reports and prints; returns how
/// long it took.
async fn demo_proves_its_point(backend: Backend) -> Duration {
    let mut out = Vec::new();
    let started = Instant::now();
    let report = run(backend, DemoOptions::default(), &mut out)
        .await
        .unwrap();
    let took = started.elapsed();
    let text = String::from_utf8(out).unwrap();
    check(&report, &text);
    took
}

fn check(report: &DemoReport, text: &str) {
    assert_eq!(report.instances, 105);
    assert_eq!(report.endpoints, 105);
    assert_eq!(
        report.revisions, 3,
        "two for shop-orders, one for shop-payments"
    );
    assert_eq!(report.fetches, 3);
    assert_eq!(report.served, 3);
    assert!(
        text.contains("shop-orders     100 instances, 2 revision(s), 2 call(s) served"),
        "{text}"
    );
    assert!(
        text.contains("shop-payments     5 instances, 1 revision(s), 1 call(s) served"),
        "{text}"
    );
    assert_eq!(
        report.fetches_after_change, 4,
        "one more fetch for the new revision"
    );
    assert_eq!(report.revisions_after_change, 3);
}

/// Waits until no instance of the demo's apps is listed in `backend`.
async fn nothing_left(backend: &Backend) {
    eventually(
        Duration::from_secs(30),
        "every provider deregistered",
        || async {
            let mut empty = true;
            for app in APPS {
                let list = backend
                    .instances()
                    .list(app, InstanceRead::new(&Limits::default()))
                    .await;
                empty &= list.is_ok_and(|l| l.instances.is_empty());
            }
            empty
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_instances_two_revisions_two_fetches() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    demo_proves_its_point(store.clone().into()).await;
    // The demo stops its providers gracefully: nothing is left registered.
    assert!(store.get_prefix("/services/").await.unwrap().kvs.is_empty());
}

/// Runs `introspect --registry URL demo` (no `INTROSPECT_*` variables inherited) and
/// checks what it prints; returns how long it took.
fn the_tool_s_demo_proves_its_point(url: &str) -> Duration {
    let mut command = crate::support::tool::command(&["--registry", url, "demo"]);
    command.env("RUST_LOG", "warn");
    let started = Instant::now();
    let output = tokio::task::block_in_place(|| command.output()).expect("the tool runs");
    let took = started.elapsed();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for line in [
        "instances:              105",
        "distinct revisions:     3",
        "MetadataService calls:  3 (one per revision, not per instance)",
        "calls providers served: 3",
        "shop-orders     100 instances, 2 revision(s), 2 call(s) served",
        "shop-payments     5 instances, 1 revision(s), 1 call(s) served",
        "shop.OrderService:      100 endpoints",
        "live revisions now:     3",
        "MetadataService calls:  4 (+1 for the new revision)",
    ] {
        assert!(text.contains(line), "{line:?} missing from:\n{text}");
    }
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_on_zookeeper_makes_two_fetches_for_a_hundred_instances() {
    let Some(server) = ZooKeeperServer::start().await else {
        return;
    };
    let took = the_tool_s_demo_proves_its_point(&server.url());
    eprintln!("the demo on ZooKeeper took {took:?}");
    nothing_left(&server.backend().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_on_nacos_makes_two_fetches_for_a_hundred_instances() {
    let Some(server) = NacosServer::start().await else {
        return;
    };
    let took = the_tool_s_demo_proves_its_point(&server.url());
    eprintln!("the demo on Nacos took {took:?}");
    nothing_left(&server.backend().await).await;
    for app in APPS {
        let hosts = server.instances_http("DEFAULT_GROUP", app).await;
        assert_eq!(hosts["hosts"].as_array().map_or(0, Vec::len), 0, "{hosts}");
    }
}
