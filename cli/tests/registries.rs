//! The `introspect` binary against a real ZooKeeper and a real Nacos holding real
//! providers: `--registry zookeeper://…` and `--registry nacos://…` for every command, as
//! `--etcd` works for etcd. `resolve --migration-step` reads a provider registered at the
//! interface level only.

mod support;

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};

use introspect::backend::Backend;
use introspect::{Provider, ServiceInfo};
use support::nacos::NacosServer;
use support::zookeeper::ZooKeeperServer;

/// Runs the binary with `args` (no `INTROSPECT_*` variables inherited).
fn introspect(args: &[&str]) -> (bool, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_introspect"));
    command.args(args).stdin(Stdio::null());
    for var in [
        "INTROSPECT_ETCD",
        "INTROSPECT_REGISTRY",
        "INTROSPECT_USER",
        "INTROSPECT_PASSWORD",
    ] {
        command.env_remove(var);
    }
    let output = command.output().expect("binary runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A free loopback port.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
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
    }
    let (ok, _, err) = run(&[
        "resolve",
        "shop.LegacyService",
        "--migration-step",
        "SOMETIMES",
    ]);
    assert!(!ok && err.contains("SOMETIMES"), "{err}");
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
    let mut watch = Command::new(env!("CARGO_BIN_EXE_introspect"))
        .args(["--registry", url.as_str(), "watch", "shop.OrderService"])
        .env_remove("INTROSPECT_ETCD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("watch runs");
    let first = tokio::task::block_in_place(|| {
        let mut line = String::new();
        BufReader::new(watch.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        line
    });
    let _ = watch.kill();
    let _ = watch.wait();
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
