//! The `introspect` binary against a real etcd holding real providers.

use introspect::backend::{ConfigKey, ConfigWrite};
use std::sync::Arc;

use crate::support::etcd::EtcdServer;
use crate::support::fleet::start_provider;
use crate::support::tool;
use introspect::{Layout, ServiceInfo, Store};

/// What a run of the binary did.
struct Run {
    ok: bool,
    out: String,
    err: String,
}

/// Runs the binary with `args` and `env` (no `INTROSPECT_*` variables inherited, no
/// terminal on standard input).
fn run_with(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut command = tool::command(args);
    command.envs(env.iter().copied());
    let (ok, out, err) = tool::outcome(&command.output().expect("binary runs"));
    Run { ok, out, err }
}

fn introspect(args: &[&str]) -> (bool, String, String) {
    let run = run_with(args, &[]);
    (run.ok, run.out, run.err)
}

/// Runs the binary with its standard output closed before it writes, as `| head` does
/// once it has its lines.
fn with_stdout_closed(args: &[&str]) -> (Option<i32>, String) {
    let mut child = tool::command(args).spawn().expect("binary runs");
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("binary ends");
    (
        output.status.code(),
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

    // An empty answer to a one-shot question fails, saying what is there instead.
    let (ok, out, err) = run(&["resolve", "shop.OrderService", "--version", "2.0"]);
    assert!(!ok, "nothing matches: {out}");
    assert!(out.contains("0 endpoints"), "{out}");
    assert!(
        err.contains("none exports shop.OrderService version \"2.0\"")
            && err.contains("shop-orders exports shop.OrderService:1.0:tri"),
        "{err}"
    );
    let (ok, _, err) = run(&["resolve", "OrderService"]);
    assert!(
        !ok && err.contains("no app is mapped to OrderService") && err.contains("package"),
        "{err}"
    );
    let (ok, _, err) = run(&["mapping", "shop.Nope"]);
    assert!(
        !ok && err.contains("no app is mapped to shop.Nope"),
        "{err}"
    );
    let (ok, _, err) = run(&["instances", "shop-nope"]);
    assert!(
        !ok && err.contains("\"shop-nope\" has no instances"),
        "{err}"
    );
    let (ok, _, err) = run(&["metadata", "shop-orders", "deadbeef"]);
    assert!(
        !ok && err
            .starts_with("error: not found: no instance of \"shop-orders\" has revision deadbeef")
            && err.contains(orders.revision().as_str()),
        "{err}"
    );

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revision_shows_why_two_instances_differ() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let store: Arc<dyn Store> = etcd.store().await;
    let order = |weight: &str| {
        vec![
            ServiceInfo::new("shop.OrderService")
                .with_version("1.0")
                .with_param("weight", weight),
            ServiceInfo::new("shop.CartService"),
        ]
    };
    // Two instances in one configuration, one in another: the first is listed first.
    let blue = start_provider(&store, "shop-orders", order("100")).await;
    let _blue_too = start_provider(&store, "shop-orders", order("100")).await;
    let green = start_provider(&store, "shop-orders", order("200")).await;
    let (blue_rev, green_rev) = (blue.revision(), green.revision());
    assert_ne!(blue_rev, green_rev);
    let endpoint = etcd.endpoint();
    let run = |rest: &[&str]| {
        let mut args = vec!["--etcd", endpoint.as_str()];
        args.extend_from_slice(rest);
        tokio::task::block_in_place(|| introspect(&args))
    };

    let (ok, out, err) = run(&["revision", "shop-orders"]);
    assert!(ok, "{err}");
    assert!(
        out.contains(&format!("revision {blue_rev}  instances 2"))
            && out.contains(&format!("revision {green_rev}  instances 1")),
        "{out}"
    );
    assert!(
        out.contains("~ shop.OrderService:1.0:tri  param weight: 100 -> 200"),
        "{out}"
    );
    assert!(
        !out.contains("shop.CartService:tri  "),
        "equal services are not listed: {out}"
    );

    let (ok, out, err) = run(&["--json", "revision", "shop-orders", &green_rev, &blue_rev]);
    assert!(ok, "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    let revisions = json["revisions"].as_array().unwrap();
    assert_eq!(revisions.len(), 2);
    for (view, claimed) in revisions.iter().zip([&green_rev, &blue_rev]) {
        assert_eq!(view["revision"], claimed.as_str());
        // Exactly the rule the providers declare reproduces the claimed revision.
        let matching: Vec<_> = view["rules"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["matches_claimed"] == true)
            .collect();
        assert_eq!(matching.len(), 1, "{view}");
        assert_eq!(matching[0]["rule"], view["declared_rules"][0], "{view}");
        assert_eq!(matching[0]["revision"], claimed.as_str());
        assert!(
            matching[0]["canonical"]
                .as_str()
                .is_some_and(|c| !c.is_empty()),
            "{view}"
        );
    }
    let d = &json["diffs"][0];
    assert_eq!(d["from"], green_rev.as_str());
    assert_eq!(d["to"], blue_rev.as_str());
    let changed = d["changed"].as_object().unwrap();
    assert_eq!(changed.len(), 1, "{d}");
    let fields = &changed["shop.OrderService:1.0:tri"];
    assert_eq!(fields[0]["field"], "param weight");
    assert_eq!(fields[0]["before"], "200");
    assert_eq!(fields[0]["after"], "100");

    let (ok, out, err) = run(&["revision", "shop-orders", "0123456789abcdef"]);
    assert!(!ok && out.is_empty(), "{out}");
    assert!(
        err.contains("no instance of \"shop-orders\" has revision"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_shows_who_routes_to_what_and_by_which_rules_against_the_tools_own_digests() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let store: Arc<dyn Store> = etcd.store().await;
    let service = || vec![ServiceInfo::new("shop.OrderService").with_version("1.0")];
    let _orders = start_provider(&store, "shop-orders", service()).await;
    let resolver = introspect::Resolver::builder(store.clone())
        .register_consumer("shop-web")
        .consumer_host("web-7.example")
        .consumer_refresh(std::time::Duration::from_millis(200))
        .build();
    let (_, id) = resolver.consumer_id().unwrap();
    let id = id.to_owned();
    let handle = resolver
        .subscribe(introspect::Subscription::new("shop.OrderService"))
        .await
        .unwrap();
    assert_eq!(handle.current().len(), 1);
    // Its calls go through a balanced channel, which follows the rules written for it.
    let (_channel, _routing) = resolver.balanced_channel(&handle).unwrap();
    let rule = "configVersion: v3.0\nscope: service\nkey: shop.OrderService\nenabled: true\n\
                conditions:\n  - 'method = Cancel => port != 1'\n";
    introspect::Backend::from(store.clone())
        .config()
        .put(
            &ConfigKey::new("shop.OrderService::.condition-router", "dubbo").unwrap(),
            ConfigWrite::create(rule),
        )
        .await
        .unwrap();
    // A stale consumer (its digests are of some other set and rules) and a record that is
    // garbage.
    let stale = serde_json::json!({
        "app": "shop-admin", "id": "stale1", "host": "admin-1.example", "registeredMs": 1,
        "subscriptions": [{"interface": "shop.OrderService", "digest": "0000000000000000",
            "endpoints": 3, "position": 7, "changedMs": 1, "rulesDigest": "0000000000000000"}],
    });
    store
        .put(
            "/introspect/consumers/shop-admin/stale1",
            stale.to_string().into_bytes(),
            None,
        )
        .await
        .unwrap();
    store
        .put(
            "/introspect/consumers/shop-admin/bad",
            b"{oops".to_vec(),
            None,
        )
        .await
        .unwrap();
    let endpoint = etcd.endpoint();
    let run = |rest: &[&str]| {
        let mut args = vec!["--etcd", endpoint.as_str()];
        args.extend_from_slice(rest);
        tokio::task::block_in_place(|| introspect(&args))
    };
    let mut json = serde_json::Value::Null;
    for _ in 0..100 {
        let (ok, out, err) = run(&["--json", "consumers", "shop.OrderService"]);
        assert!(ok, "{err}");
        json = serde_json::from_str(&out).unwrap();
        let ours = json["consumers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["id"] == id.as_str() && c["endpoints"] == 1 && c["rules"] == "same");
        if ours {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let consumers = json["consumers"].as_array().unwrap();
    assert_eq!(consumers.len(), 2, "{json}");
    let ours = consumers.iter().find(|c| c["id"] == id.as_str()).unwrap();
    assert_eq!(ours["same"], true, "{json}");
    assert_eq!(ours["host"], "web-7.example");
    assert_eq!(ours["digest"], ours["currentDigest"]);
    assert_eq!(ours["rulesDigest"], ours["currentRulesDigest"], "{json}");
    assert_ne!(
        ours["rulesDigest"], "e3b0c44298fc1c14",
        "the rule is in: {json}"
    );
    assert_eq!(
        ours["ruleKeys"],
        serde_json::json!(["shop.OrderService::.condition-router"])
    );
    let theirs = consumers.iter().find(|c| c["id"] == "stale1").unwrap();
    assert_eq!(theirs["same"], false, "{json}");
    assert_eq!(theirs["rules"], "different", "{json}");
    assert_eq!(json["skipped"].as_array().unwrap().len(), 1, "{json}");

    let (ok, out, err) = run(&["consumers", "shop.OrderService"]);
    assert!(ok, "{err}");
    let line = |host: &str| {
        out.lines()
            .find(|l| l.starts_with(host))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        line("web-7.example").contains("shop-web") && line("web-7.example").ends_with("same"),
        "{out}"
    );
    assert!(line("admin-1.example").ends_with("different"), "{out}");
    assert!(
        out.contains("skipped /introspect/consumers/shop-admin/bad"),
        "{out}"
    );
    // Nobody consumes another interface.
    let (ok, out, _) = run(&["--json", "consumers", "shop.CartService"]);
    assert!(ok);
    let none: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(none["consumers"].as_array().unwrap().is_empty());
    drop(handle);
    resolver.deregister_consumer().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_of_unreadable_records_fails_instances_and_resolve() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let store: Arc<dyn Store> = etcd.store().await;
    let layout = Layout::default();
    // Two records of go-orders that cannot be read: not JSON, and JSON of another shape.
    for (port, garbage) in [(20000, &b"not json"[..]), (20001, &br#"{"name": 1}"#[..])] {
        let key = layout.instance_key("go-orders", "10.0.0.9", port);
        store.put(&key, garbage.to_vec(), None).await.unwrap();
    }
    // A readable app with one unreadable record beside its live one.
    let _orders = start_provider(&store, "shop-orders", vec![ServiceInfo::new("shop.A")]).await;
    let stray = layout.instance_key("shop-orders", "10.0.0.9", 20002);
    store.put(&stray, b"{}".to_vec(), None).await.unwrap();
    let endpoint = etcd.endpoint();
    let run = |rest: &[&str]| {
        let mut args = vec!["--etcd", endpoint.as_str()];
        args.extend_from_slice(rest);
        tokio::task::block_in_place(|| introspect(&args))
    };
    // One error line; a warning per unreadable record of a readable app may precede it.
    let fails_with_one_error = |(ok, _, err): &(bool, String, String)| {
        assert!(!ok, "{err}");
        let errors: Vec<&str> = err.lines().filter(|l| l.contains("error:")).collect();
        assert_eq!(errors.len(), 1, "{err}");
        assert!(
            errors[0].starts_with("error:")
                && errors[0]
                    .contains("all 2 records of app \"go-orders\" were skipped as unreadable"),
            "{err}"
        );
    };
    let fails_in_one_line = |run: &(bool, String, String)| {
        fails_with_one_error(run);
        assert_eq!(run.2.trim().lines().count(), 1, "{}", run.2);
    };

    let instances = run(&["instances", "go-orders"]);
    fails_in_one_line(&instances);
    assert!(
        instances.1.contains("skipped 10.0.0.9:20000"),
        "{}",
        instances.1
    );

    fails_in_one_line(&run(&["metadata", "go-orders"]));
    fails_in_one_line(&run(&["revision", "go-orders"]));

    let resolve = run(&["resolve", "shop.A", "--provided-by", "go-orders"]);
    fails_in_one_line(&resolve);
    assert!(resolve.1.contains("0 endpoints"), "{}", resolve.1);

    // The readable app's endpoints are still printed, and the exit code still fails.
    let both = run(&[
        "--json",
        "resolve",
        "shop.A",
        "--provided-by",
        "go-orders,shop-orders",
    ]);
    fails_with_one_error(&both);
    let endpoints: serde_json::Value = serde_json::from_str(&both.1).unwrap();
    assert_eq!(endpoints.as_array().unwrap().len(), 1, "{endpoints}");

    // One unreadable record beside a readable one is not a failure.
    let (ok, out, err) = run(&["resolve", "shop.A", "--provided-by", "shop-orders"]);
    assert!(ok, "{err}");
    assert!(out.contains("1 endpoints"), "{out}");
    let (ok, out, err) = run(&["instances", "shop-orders"]);
    assert!(ok, "{err}");
    assert!(out.contains("skipped 10.0.0.9:20002"), "{out}");
}

#[test]
fn errors_are_one_line_with_a_failing_exit_code() {
    let (ok, out, err) = introspect(&["--etcd", "http://127.0.0.1:1,http://127.0.0.1:2", "apps"]);
    assert!(!ok && out.is_empty());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.starts_with(
            "error: store unavailable: cannot reach etcd at http://127.0.0.1:1, http://127.0.0.1:2: "
        ),
        "{err}"
    );
    assert!(
        !err.contains("[\"") && !err.contains("\\\""),
        "no Debug-quoted list: {err}"
    );

    // No store named: an error that says how to name one, not an empty embedded store.
    let (ok, out, err) = introspect(&["apps"]);
    assert!(!ok && out.is_empty());
    assert!(
        err.starts_with("error:") && err.contains("--etcd") && err.contains("INTROSPECT_ETCD"),
        "{err}"
    );

    let (ok, _, err) = introspect(&["--memory", "instances", "a/b"]);
    assert!(!ok);
    assert!(err.contains("invalid app name"), "{err}");

    let (ok, _, err) = introspect(&["--etcd", "", "apps"]);
    assert!(!ok && err.starts_with("error:"), "{err}");
}

#[test]
fn a_closed_pipe_stops_the_tool_quietly() {
    for args in [
        &["--memory", "apps"][..],
        &["demo", "--blue", "1", "--green", "1", "--payments", "1"][..],
    ] {
        let (code, err) = with_stdout_closed(args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("error"),
            "{args:?}: {err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_pipe_after_output_from_etcd_stops_quietly() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let store: Arc<dyn Store> = etcd.store().await;
    let _orders = start_provider(&store, "shop-orders", vec![ServiceInfo::new("shop.A")]).await;
    let endpoint = etcd.endpoint();
    let (code, err) =
        tokio::task::block_in_place(|| with_stdout_closed(&["--etcd", endpoint.as_str(), "apps"]));
    assert_eq!(code, Some(0), "{err}");
    assert!(err.is_empty(), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endpoints_come_from_the_environment() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let store: Arc<dyn Store> = etcd.store().await;
    let _orders = start_provider(&store, "shop-orders", vec![ServiceInfo::new("shop.A")]).await;
    let endpoint = etcd.endpoint();
    let run = tokio::task::block_in_place(|| {
        run_with(
            &["mapping", "shop.A"],
            &[("INTROSPECT_ETCD", endpoint.as_str())],
        )
    });
    assert!(run.ok, "{}", run.err);
    assert_eq!(run.out.trim(), "shop-orders");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_without_credentials_exits_with_one_line() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    etcd.enable_auth();
    let endpoint = etcd.endpoint();
    let started = std::time::Instant::now();
    // A watch that kept retrying would never end: the test would hang, not pass.
    let run = tokio::task::block_in_place(|| {
        run_with(&["--etcd", endpoint.as_str(), "watch", "shop.A"], &[])
    });
    assert!(!run.ok, "{}{}", run.out, run.err);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(run.err.trim().lines().count(), 1, "{}", run.err);
    assert!(
        run.err.starts_with("error: store authentication failed"),
        "{}",
        run.err
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_come_from_the_environment_and_never_show() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let store: Arc<dyn Store> = etcd.store().await;
    let _orders = start_provider(&store, "shop-orders", vec![ServiceInfo::new("shop.A")]).await;
    etcd.enable_auth();
    let endpoint = etcd.endpoint();
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let mut all = vec!["--etcd", endpoint.as_str()];
        all.extend_from_slice(args);
        tokio::task::block_in_place(|| run_with(&all, env))
    };

    let reader = run(
        &["--user", "reader", "mapping", "shop.A"],
        &[("INTROSPECT_PASSWORD", "reader-pw")],
    );
    assert!(reader.ok, "{}", reader.err);
    assert_eq!(reader.out.trim(), "shop-orders");

    let from_env = run(
        &["mapping", "shop.A"],
        &[
            ("INTROSPECT_USER", "reader"),
            ("INTROSPECT_PASSWORD", "reader-pw"),
        ],
    );
    assert!(from_env.ok, "{}", from_env.err);

    let wrong = run(
        &["--user", "reader", "apps"],
        &[("INTROSPECT_PASSWORD", "not-the-pw-42")],
    );
    assert!(!wrong.ok);
    assert!(wrong.err.contains("authentication failed"), "{}", wrong.err);
    assert!(!wrong.err.contains("not-the-pw-42"), "{}", wrong.err);
    assert_eq!(wrong.err.trim().lines().count(), 1, "{}", wrong.err);

    // No password and no terminal to ask on: say what to set, do not wait.
    let unasked = run(&["--user", "reader", "apps"], &[]);
    assert!(!unasked.ok);
    assert!(
        unasked.err.contains("INTROSPECT_PASSWORD"),
        "{}",
        unasked.err
    );

    // The password never goes on the command line, and is never repeated.
    let inline = run(&["--user", "reader:reader-pw", "apps"], &[]);
    assert!(!inline.ok);
    assert!(!inline.err.contains("reader-pw"), "{}", inline.err);
    assert!(inline.err.contains("INTROSPECT_PASSWORD"), "{}", inline.err);

    let in_url = endpoint.replace("http://", "http://reader:reader-pw@");
    let url = tokio::task::block_in_place(|| run_with(&["--etcd", in_url.as_str(), "apps"], &[]));
    assert!(!url.ok);
    assert!(!url.err.contains("reader-pw"), "{}", url.err);
    assert!(url.err.contains("credentials in the URL"), "{}", url.err);
    assert_eq!(url.err.trim().lines().count(), 1, "{}", url.err);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_options_are_etcdctls() {
    let Some(etcd) = EtcdServer::start_tls().await else {
        return;
    };
    let store: Arc<dyn Store> = etcd.store().await;
    let _orders = start_provider(&store, "shop-orders", vec![ServiceInfo::new("shop.A")]).await;
    let tls = etcd.tls().expect("a TLS server");
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, pem: &[u8]| {
        let path = dir.path().join(name);
        std::fs::write(&path, pem).unwrap();
        path.to_string_lossy().into_owned()
    };
    let ca = write("ca.pem", &tls.ca_pem);
    let cert = write("client.pem", &tls.client_cert_pem);
    let key = write("client-key.pem", &tls.client_key_pem);
    let endpoint = etcd.endpoint();
    let run = |args: &[&str]| {
        let mut all = vec!["--etcd", endpoint.as_str()];
        all.extend_from_slice(args);
        all.extend(["mapping", "shop.A"]);
        tokio::task::block_in_place(|| run_with(&all, &[]))
    };

    let ok = run(&["--cacert", &ca, "--cert", &cert, "--key", &key]);
    assert!(ok.ok, "{}", ok.err);
    assert_eq!(ok.out.trim(), "shop-orders");

    // The server wants a client certificate: without one, a one-line error.
    let no_identity = run(&["--cacert", &ca]);
    assert!(!no_identity.ok);
    assert_eq!(
        no_identity.err.trim().lines().count(),
        1,
        "{}",
        no_identity.err
    );

    let half = run(&["--cacert", &ca, "--cert", &cert]);
    assert!(!half.ok && half.err.contains("--key"), "{}", half.err);

    let missing = run(&["--cacert", "/nonexistent/ca.pem"]);
    assert!(
        !missing.ok && missing.err.contains("--cacert"),
        "{}",
        missing.err
    );
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
        "revision",
        "mapping",
        "resolve",
        "watch",
        "Examples:",
    ] {
        assert!(out.contains(word), "--help lacks {word}: {out}");
    }
}
