//! The `introspect` binary against a real ZooKeeper and a real Nacos holding real
//! providers: `--registry zookeeper://…` and `--registry nacos://…` for every command, as
//! `--etcd` works for etcd. `resolve --migration-step` reads a provider registered at the
//! interface level only.

use std::io::{BufRead as _, BufReader};
use std::process::Stdio;

use crate::support::nacos::NacosServer;
use crate::support::tool::{command, introspect};
use crate::support::zookeeper::ZooKeeperServer;
use introspect::backend::Backend;
use introspect::{Provider, ServiceInfo};

/// A free loopback port.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// The first `count` lines the tool run with `args` (a `watch`) prints; then it is stopped.
fn watch_lines(args: &[&str], count: usize) -> Vec<String> {
    let mut watch = command(args)
        .stderr(Stdio::null())
        .spawn()
        .expect("watch runs");
    let lines = tokio::task::block_in_place(|| {
        let mut reader = BufReader::new(watch.stdout.take().unwrap());
        (0..count)
            .map(|_| {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                line
            })
            .collect()
    });
    let _ = watch.kill();
    let _ = watch.wait();
    lines
}

async fn provider(backend: Backend, version: &str) -> Provider {
    Provider::builder("shop-orders", backend)
        .serve_metadata_on("127.0.0.1:0".parse().unwrap())
        .lease_ttl(std::time::Duration::from_secs(2))
        .drain_period(std::time::Duration::from_millis(50))
        .export(ServiceInfo::new("shop.OrderService").with_version(version))
        .start()
        .await
        .expect("provider starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_reads_zookeeper_by_its_registry_url() {
    let Some(server) = ZooKeeperServer::start().await else {
        return;
    };
    every_command_reads(server.url(), server.backend().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_reads_nacos_by_its_registry_url() {
    let Some(server) = NacosServer::start().await else {
        return;
    };
    every_command_reads(server.url(), server.backend().await).await;
}

/// Two providers of one app registered through `backend`, then each command of the tool
/// reading the registry at `url`.
async fn every_command_reads(url: String, backend: Backend) {
    let legacy_backend = backend.clone();
    let blue = provider(backend.clone(), "1.0").await;
    let green = provider(backend, "1.1").await;
    let run = |rest: &[&str]| {
        let args: Vec<&str> = ["--registry", url.as_str()]
            .iter()
            .chain(rest)
            .copied()
            .collect();
        tokio::task::block_in_place(|| introspect(&args))
    };
    let (ok, out, err) = run(&["apps"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("shop-orders") && out.contains(&blue.revision()[..12]),
        "{out}"
    );
    let (ok, out, err) = run(&["--json", "instances", "shop-orders"]);
    assert!(ok, "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["instances"].as_array().unwrap().len(), 2, "{json}");
    let (ok, out, err) = run(&["--json", "resolve", "shop.OrderService", "--version", "1.0"]);
    assert!(ok, "{err}");
    let endpoints: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(endpoints.as_array().unwrap().len(), 1, "{endpoints}");
    // A provider registered at the interface level only (as Dubbo 2.7 writes it) is
    // invisible to the default step; `--migration-step` reads it.
    let legacy = Provider::builder("shop-legacy", legacy_backend)
        .register_mode(introspect::provider::RegisterMode::Interface)
        .port(free_port())
        .serve_metadata_on("127.0.0.1:0".parse().unwrap())
        .drain_period(std::time::Duration::from_millis(50))
        .export(ServiceInfo::new("shop.LegacyService").with_protocol("tri"))
        .start()
        .await
        .expect("legacy provider starts");
    let (ok, _, err) = run(&["resolve", "shop.LegacyService"]);
    assert!(!ok && err.contains("no app"), "the default step: {err}");
    for step in ["FORCE_INTERFACE", "APPLICATION_FIRST"] {
        let mut found = Vec::new();
        for _ in 0..100 {
            let (ok, out, err) = run(&[
                "--json",
                "resolve",
                "shop.LegacyService",
                "--migration-step",
                step,
            ]);
            if ok {
                found = serde_json::from_str::<Vec<serde_json::Value>>(&out).unwrap();
                // Which level serves and why, on standard error beside the JSON.
                let why = match step {
                    "FORCE_INTERFACE" => {
                        "level: interface level, FORCE_INTERFACE (the consumer's own step)"
                    }
                    _ => {
                        "level: interface level, APPLICATION_FIRST (the consumer's own step): the application level has no endpoint, so the interface level's 1 serve (Java's fallback)"
                    }
                };
                assert!(err.contains(why), "{step}: {err}");
                break;
            }
            assert!(
                err.contains("no app") || err.contains("no provider"),
                "{step}: {err}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert_eq!(found.len(), 1, "{step}: {found:?}");
        assert_eq!(found[0]["app"], "shop-legacy", "{step}: {found:?}");
        assert_eq!(found[0]["protocol"], "tri", "{step}: {found:?}");
        assert_eq!(found[0]["level"], "interface", "{step}: {found:?}");
    }
    let (ok, _, err) = run(&[
        "resolve",
        "shop.LegacyService",
        "--migration-step",
        "SOMETIMES",
    ]);
    assert!(!ok && err.contains("SOMETIMES"), "{err}");
    // A watch says which level serves, after the set.
    let lines: Vec<serde_json::Value> = watch_lines(
        &[
            "--json",
            "--registry",
            &url,
            "watch",
            "shop.LegacyService",
            "--migration-step",
            "APPLICATION_FIRST",
        ],
        2,
    )
    .iter()
    .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
    .collect();
    assert_eq!(lines[0]["added"][0]["level"], "interface", "{lines:?}");
    let level = &lines[1]["level"];
    assert_eq!(
        (
            &level["level"],
            &level["step"],
            &level["fallback"],
            &level["rule"]
        ),
        (
            &serde_json::json!("interface"),
            &serde_json::json!("APPLICATION_FIRST"),
            &serde_json::json!(true),
            &serde_json::Value::Null
        ),
        "{lines:?}"
    );
    // The application level serves when it has an endpoint; the interface level stands by.
    let (ok, out, err) = run(&[
        "resolve",
        "shop.OrderService",
        "--version",
        "1.0",
        "--migration-step",
        "APPLICATION_FIRST",
    ]);
    assert!(ok, "{err}");
    assert!(
        out.contains(
            "level: application level, APPLICATION_FIRST (the consumer's own step): the \
             application level has 1 endpoint(s)"
        ) && out.contains("1 endpoints in use, 0 standing by"),
        "{out}"
    );
    legacy.shutdown().await.unwrap();
    let (ok, out, err) = run(&["mapping", "shop.OrderService"]);
    assert!(ok && out.trim() == "shop-orders", "{out}{err}");
    let (ok, out, err) = run(&["revision", "shop-orders"]);
    assert!(ok, "{err}");
    assert!(
        out.contains(&blue.revision()[..12]) && out.contains(&green.revision()[..12]),
        "{out}"
    );
    // watch: its first set, then it is stopped.
    let first = watch_lines(&["--registry", &url, "watch", "shop.OrderService"], 1).remove(0);
    assert!(first.contains("2 endpoints"), "{first}");
    // Naming the registry twice, or a credential in the URL, is refused.
    let (ok, _, err) = run(&["--etcd", "http://127.0.0.1:1", "apps"]);
    assert!(!ok && err.contains("named twice"), "{err}");
    let scheme = url.split("://").next().unwrap();
    let with_password = format!("{scheme}://alice:s3cret@127.0.0.1:1");
    let (ok, _, err) = introspect(&["--registry", &with_password, "apps"]);
    assert!(
        !ok && !err.contains("s3cret") && err.lines().count() == 1,
        "{err}"
    );
    blue.shutdown().await.unwrap();
    green.shutdown().await.unwrap();
}
