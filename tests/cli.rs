//! The `introspect` binary against a real etcd holding real providers.

mod support;

use std::process::Command;
use std::sync::Arc;

use introspect::{ServiceInfo, Store};
use support::etcd::EtcdServer;
use support::fleet::start_provider;

fn introspect(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_introspect"))
        .args(args)
        .output()
        .expect("binary runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_show_what_is_registered() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let store: Arc<dyn Store> = etcd.store().await;
    let orders = start_provider(
        &store,
        "shop-orders",
        vec![ServiceInfo::new("shop.OrderService").with_version("1.0")],
    )
    .await;
    let _second = start_provider(
        &store,
        "shop-orders",
        vec![ServiceInfo::new("shop.OrderService").with_version("1.0")],
    )
    .await;
    let endpoint = etcd.endpoint();
    let etcd_args = ["--etcd", endpoint.as_str()];
    let run = |rest: &[&str]| {
        let args: Vec<&str> = etcd_args.iter().chain(rest).copied().collect();
        tokio::task::block_in_place(|| introspect(&args))
    };

    let (ok, out, err) = run(&["apps"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("shop-orders") && out.contains(&format!("{}×2", &orders.revision()[..12])),
        "{out}"
    );

    let (ok, out, _) = run(&["--json", "instances", "shop-orders"]);
    assert!(ok);
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["instances"].as_array().unwrap().len(), 2);
    assert_eq!(json["instances"][0]["serviceName"], "shop-orders");

    let (ok, out, _) = run(&["--json", "resolve", "shop.OrderService", "--version", "1.0"]);
    assert!(ok);
    let endpoints: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(endpoints.as_array().unwrap().len(), 2);

    let (ok, out, _) = run(&["resolve", "shop.OrderService", "--version", "2.0"]);
    assert!(ok);
    assert!(out.contains("0 endpoints"), "{out}");

    let (ok, out, _) = run(&["mapping", "shop.OrderService"]);
    assert!(ok && out.trim() == "shop-orders", "{out}");

    let (ok, out, _) = run(&["--json", "metadata", "shop-orders"]);
    assert!(ok);
    let info: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(info["revision"], orders.revision().as_str());
    assert!(
        info["services"]["shop.OrderService:1.0:tri"].is_object(),
        "{info}"
    );
}

#[test]
fn errors_are_one_line_with_a_failing_exit_code() {
    let (ok, out, err) = introspect(&["--etcd", "http://127.0.0.1:1", "apps"]);
    assert!(!ok && out.is_empty());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.starts_with("error: store unavailable"), "{err}");

    let (ok, _, err) = introspect(&["instances", "a/b"]);
    assert!(!ok);
    assert!(err.contains("invalid app name"), "{err}");
    assert!(
        err.contains("note: no --etcd given"),
        "the user is told the embedded store is empty: {err}"
    );

    let (ok, _, err) = introspect(&["--etcd", "", "apps"]);
    assert!(!ok && err.starts_with("error:"), "{err}");
}

#[test]
fn help_shows_examples() {
    let (ok, out, _) = introspect(&["--help"]);
    assert!(ok);
    for word in [
        "demo",
        "apps",
        "instances",
        "metadata",
        "mapping",
        "resolve",
        "watch",
        "Examples:",
    ] {
        assert!(out.contains(word), "--help lacks {word}: {out}");
    }
}
