//! SIGTERM, what systemd, Kubernetes and Docker send on a deploy, stops a provider
//! gracefully: the example provider (built by `cargo test` with the other examples) is
//! disabled, keeps answering through its drain, is deregistered, and exits 0.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process};
use tokio::io::AsyncReadExt as _;

use crate::support::etcd::EtcdServer;
use crate::support::examples::example;
use crate::support::greeter::pb::HelloRequest;
use crate::support::greeter::pb::greeter_client::GreeterClient;
use crate::support::wait::eventually;
use introspect::backend::{Backend, InstanceRead};
use introspect::{EtcdStore, Limits, ServiceInstance, Store};

const APP: &str = "sigterm-greeter";

/// The app's only instance, if registered.
async fn registered(backend: &Backend) -> Option<Arc<ServiceInstance>> {
    let list = backend
        .instances()
        .list(APP, InstanceRead::new(&Limits::default()))
        .await
        .expect("etcd answers");
    assert!(list.instances.len() <= 1, "one provider, one record");
    list.instances.values().next().cloned()
}

#[tokio::test]
async fn sigterm_disables_drains_deregisters_and_exits_cleanly() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let store: Arc<dyn Store> = Arc::new(EtcdStore::connect(etcd.options()).await.unwrap());
    let backend: Backend = store.into();
    let mut child = tokio::process::Command::new(example("greeter_provider"))
        .args([
            "--etcd",
            &etcd.endpoint(),
            "--app",
            APP,
            "--drain-ms",
            "1500",
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the example provider starts");

    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let instance = loop {
        if let Some(i) = registered(&backend).await.filter(|i| i.accepts_calls()) {
            break i;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the provider did not register within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let address = format!("http://{}", instance.authority());

    let pid = Pid::from_raw(child.id().expect("running") as i32).expect("a real pid");
    kill_process(pid, Signal::TERM).expect("SIGTERM sent");

    // Disabled first, and still serving while it drains.
    eventually(
        Duration::from_secs(5),
        "the record is marked stopping",
        || {
            let backend = backend.clone();
            async move { registered(&backend).await.is_some_and(|i| i.is_stopping()) }
        },
    )
    .await;
    let mut client = GreeterClient::connect(address)
        .await
        .expect("the draining provider still accepts connections");
    client
        .say_hello(HelloRequest {
            name: "drain".into(),
        })
        .await
        .expect("a call during the drain is answered");

    // Then deregistered, and the process exits on its own with success.
    eventually(Duration::from_secs(10), "the record is deleted", || {
        let backend = backend.clone();
        async move { registered(&backend).await.is_none() }
    })
    .await;
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("the provider exits after its drain")
        .expect("its status");
    assert!(status.success(), "a graceful stop exits 0, got {status}");
    let mut printed = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut printed)
        .await
        .unwrap();
    assert!(
        printed.contains("stopping: disabled, draining for 1500 ms") && printed.contains("stopped"),
        "the provider says how it stopped; it printed:\n{printed}"
    );
}
