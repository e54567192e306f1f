//! `--metrics ADDR`: the tool's Prometheus endpoint, scraped over plain HTTP while the demo
//! holds its providers.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Kills the child when dropped, so a failing test leaves no process behind.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET path` with `Connection: close`; the whole answer.
async fn get(address: &str, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
        .await
        .expect("the exporter answers and closes")
        .unwrap();
    String::from_utf8(answer).expect("UTF-8 answer")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_serves_prometheus_metrics_when_asked() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_introspect"))
        .args(["demo", "--blue", "2", "--green", "2", "--payments", "1"])
        .args(["--metrics", "127.0.0.1:0", "--hold"])
        .env_remove("INTROSPECT_ETCD")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the binary runs");
    let stdout = child.stdout.take().unwrap();
    let _running = Running(child);
    // Read until the demo holds, remembering the metrics address it printed.
    let address = tokio::task::spawn_blocking(move || {
        let mut address = None;
        for line in BufReader::new(stdout).lines() {
            let line = line.expect("demo output");
            if let Some(rest) = line.strip_prefix("Metrics at http://") {
                address = rest.strip_suffix("/metrics").map(str::to_owned);
            }
            if line.starts_with("Providers stay registered") {
                return address;
            }
        }
        None
    })
    .await
    .unwrap()
    .expect("the demo prints its metrics address, then holds");

    // The tool publishes every half second: wait for the demo's fetches to show.
    let wanted = "introspect_metadata_fetches_total 4";
    crate::support::wait::eventually(
        Duration::from_secs(10),
        "the fetches in the metrics",
        || {
            let address = address.clone();
            async move { get(&address, "/metrics").await.contains(wanted) }
        },
    )
    .await;
    let answer = get(&address, "/metrics").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.contains("# TYPE introspect_metadata_fetches_total counter"),
        "{answer}"
    );
    assert!(
        answer.contains("introspect_app_instances{app=\"shop-orders\"}")
            || answer.contains("introspect_provider_metadata_requests_total{app=\"shop-orders\""),
        "{answer}"
    );
    let served: f64 = answer
        .lines()
        .filter(|l| l.starts_with("introspect_provider_metadata_requests_total{"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
        .sum();
    assert_eq!(
        served, 4.0,
        "each revision fetched once from some provider:\n{answer}"
    );
}
