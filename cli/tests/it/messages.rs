//! What the tool says when something is missing or wrong: one line on stderr, nothing on
//! stdout, a failing exit; help texts that name every registry; `route` saying when every
//! such call fails (and failing under `--check`), and that its weights are warming up.

use std::sync::Arc;

use introspect::{ServiceInfo, Store};

use crate::support::etcd::EtcdServer;
use crate::support::fleet::start_provider_with;
use crate::support::tool::introspect;

/// Asserts a failed run: nothing on stdout, one line `error: ...` holding `said` on stderr.
fn fails_with_one_line(args: &[&str], said: &str) {
    let (ok, out, err) = introspect(args);
    assert!(!ok, "{args:?} must fail: {out}");
    assert!(out.is_empty(), "{args:?}: stdout must stay empty: {out}");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    assert!(
        err.starts_with("error: ") && err.contains(said),
        "{args:?}: {err}"
    );
    assert!(!err.contains("   "), "{args:?}: a run of spaces: {err}");
}

#[test]
fn what_is_missing_is_one_line_on_stderr() {
    fails_with_one_line(
        &["apps"],
        "--etcd URLS (or set INTROSPECT_ETCD), or --memory",
    );
    fails_with_one_line(
        &[
            "--registry",
            "memory://",
            "--etcd",
            "http://127.0.0.1:1",
            "apps",
        ],
        "or --etcd (INTROSPECT_ETCD), not both",
    );
    fails_with_one_line(
        &["--memory", "mapping", "no.Such"],
        "no app is mapped to no.Such",
    );
    fails_with_one_line(
        &["--memory", "--json", "mapping", "no.Such"],
        "no app is mapped to no.Such",
    );
}

/// An unreachable Nacos: the one-line error alone, none of the SDK's retry logs.
#[test]
fn an_unreachable_nacos_is_one_line() {
    fails_with_one_line(&["--registry", "nacos://127.0.0.1:1", "apps"], "Nacos");
}

#[test]
fn help_texts_name_every_registry() {
    let help = |args: &[&str]| {
        let (ok, out, err) = introspect(args);
        assert!(ok, "{args:?}: {err}");
        out
    };
    let top = help(&["--help"]);
    assert!(top.contains("nacos://HOST:PORT"), "{top}");
    assert!(!top.contains("instead of etcd"), "{top}");
    assert!(!top.contains("read-only web console"), "{top}");
    let watch = help(&["watch", "--help"]);
    assert!(
        watch.contains("while the registry is down") && !watch.contains("while etcd is down"),
        "{watch}"
    );
    let resolve = help(&["resolve", "--help"]);
    assert!(
        resolve.contains("ZooKeeper, Nacos and etcd")
            && resolve.contains("APPLICATION_FIRST where"),
        "{resolve}"
    );
    let check = help(&["rule", "check", "--help"]);
    assert!(
        check.contains("--key <KEY>") && check.contains("--rule-key"),
        "{check}"
    );
    let route = help(&["route", "--help"]);
    assert!(route.contains("--check"), "{route}");
}

#[test]
fn rule_check_takes_key_and_its_alias() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gray.yaml");
    std::fs::write(
        &file,
        "force: true\nkey: shop\ntags:\n  - name: gray\n    addresses: [10.0.0.7]\n",
    )
    .unwrap();
    let file = file.to_str().unwrap();
    for flag in ["--key", "--rule-key"] {
        let (ok, out, err) = introspect(&["rule", "check", file, flag, "shop.tag-router"]);
        assert!(ok, "{flag}: {err}");
        assert!(
            out.contains("a valid tag rule for shop.tag-router"),
            "{flag}: {out}"
        );
    }
}

#[test]
fn xds_explain_without_a_callable_provider_is_one_line() {
    fails_with_one_line(
        &["--memory", "xds", "--explain", "no.Such"],
        "no.Such: no provider of it can be called over gRPC",
    );
}

#[test]
fn route_without_a_provider_says_every_such_call_fails() {
    let (ok, out, err) = introspect(&["--memory", "route", "no.Such"]);
    assert!(ok, "without --check the report is the answer: {err}");
    assert!(
        out.contains("every such call fails: no app is mapped to no.Such"),
        "{out}"
    );
    let (ok, out, err) = introspect(&["--memory", "--json", "route", "no.Such", "--check"]);
    assert!(!ok, "--check fails: {out}");
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        value["why_empty"]
            .as_str()
            .is_some_and(|w| w.contains("no.Such")),
        "{value}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: ") && err.contains("every such call fails"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_under_a_forced_tag_fails_and_labels_warm_up_weights() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let store: Arc<dyn Store> = etcd.store().await;
    let mut providers = Vec::new();
    for weight in [100, 300] {
        let services = vec![ServiceInfo::new("shop.OrderService")];
        providers
            .push(start_provider_with(&store, "shop-orders", services, |b| b.weight(weight)).await);
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

    let (ok, out, err) = run(&["route", "shop.OrderService"]);
    assert!(ok, "{err}");
    assert!(!out.contains("every such call fails"), "{out}");
    assert!(
        ["100/300", "300/100"].iter().any(|w| out.contains(&format!(
            "weights are warming up: published {w}, effective now"
        ))),
        "{out}"
    );
    assert!(out.contains("(warm-up 10 min)"), "{out}");
    let (ok, out, err) = run(&["--json", "route", "shop.OrderService", "--check"]);
    assert!(ok, "a routed provider passes --check: {err}");
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(value["why_empty"].is_null(), "{value}");
    assert_eq!(value["providers"][0]["warmup_ms"], 600_000, "{value}");

    let forced = ["route", "shop.OrderService", "--tag", "gray", "--force-tag"];
    let (ok, out, err) = run(&forced);
    assert!(ok, "without --check the report is the answer: {err}");
    assert!(
        out.contains("every such call fails: all its providers are routed out (2): tag:"),
        "{out}"
    );
    let checked: Vec<&str> = forced.iter().copied().chain(["--check"]).collect();
    let (ok, _, err) = run(&checked);
    assert!(!ok && err.contains("every such call fails"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");

    // A delete against a version nobody read says what is there, not that it changed.
    let key = "shop-orders.tag-router";
    let (ok, _, err) = run(&["rule", "delete", key, "--expect", "1"]);
    assert!(
        !ok && err.contains("no rule shop-orders.tag-router in group dubbo"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gray.yaml");
    std::fs::write(
        &file,
        "force: true\nkey: shop-orders\ntags:\n  - name: gray\n",
    )
    .unwrap();
    let (ok, out, err) = run(&["--json", "rule", "put", key, file.to_str().unwrap()]);
    assert!(ok, "{err}");
    let written: serde_json::Value = serde_json::from_str(&out).unwrap();
    let version = written["version"].as_str().unwrap();
    let (ok, _, err) = run(&["rule", "delete", key, "--expect", "1"]);
    assert!(
        !ok && err.contains(&format!("its version is {version}, not the expected 1")),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    drop(providers);
}
