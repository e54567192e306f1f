//! `introspect xds --explain SERVICE`: what an xDS client is sent for a service, and which
//! rule produced each route, in the words of `introspect route` (a name with no callable
//! provider is one line and a failing exit: `messages.rs`).

use std::sync::Arc;

use introspect::{ServiceInfo, Store};

use crate::support::etcd::EtcdServer;
use crate::support::fleet::start_provider_with;
use crate::support::tool::introspect;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_names_the_rule_behind_each_route_and_cluster() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let store: Arc<dyn Store> = etcd.store().await;
    let heavy = ServiceInfo::new("shop.OrderService").with_param("weight", "300");
    let gray = ServiceInfo::new("shop.OrderService").with_param("dubbo.tag", "gray");
    let mut providers = Vec::new();
    for service in [heavy, gray] {
        providers.push(start_provider_with(&store, "shop-orders", vec![service], |b| b).await);
    }
    let endpoint = etcd.endpoint();
    let run = |rest: &[&str]| {
        let args: Vec<&str> = ["--etcd", endpoint.as_str()]
            .iter()
            .copied()
            .chain(rest.iter().copied())
            .collect();
        tokio::task::block_in_place(|| introspect(&args))
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("conditions.yaml");
    std::fs::write(
        &file,
        "configVersion: v3.0\nscope: service\nkey: shop.OrderService\nenabled: true\n\
         conditions:\n  - 'method = PlaceOrder => weight = 300'\n",
    )
    .unwrap();
    let key = "shop.OrderService::.condition-router";
    let (ok, _, err) = run(&["rule", "put", key, file.to_str().unwrap()]);
    assert!(ok, "{err}");

    let (ok, out, err) = run(&["xds", "--explain", "shop.OrderService"]);
    assert!(ok, "{err}");
    for said in [
        "rules in force: shop.OrderService::.condition-router",
        "method PlaceOrder",
        "header dubbo.tag = gray",
        "-> cluster shop.OrderService\n",
        "because shop.OrderService::.condition-router:",
        "not expressed: ejection of slow providers",
        "warming up to 300",
    ] {
        assert!(out.contains(said), "{said:?} missing from:\n{out}");
    }
    for provider in providers {
        provider.shutdown().await.unwrap();
    }
}
