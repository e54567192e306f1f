//! A throwaway single-member etcd for the scale harness (the approach of the tests' etcd
//! support, reduced to what a benchmark needs: start, connect, kill).
//!
//! [`BenchEtcd::start`] runs the `etcd` binary found on `PATH` (Debian: package
//! `etcd-server`) on two free loopback ports with a temporary data directory and
//! `--log-level error`, and waits until it answers. It is killed (and its data removed) when
//! dropped. Without `etcd` on `PATH` it returns `None` and the harness reports the etcd rows
//! as skipped.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use introspect::store::{EtcdOptions, EtcdStore};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long a start may take before the harness gives up.
const START_DEADLINE: Duration = Duration::from_secs(30);
/// Attempts at starting on fresh ports when the chosen ones were taken meanwhile.
const START_ATTEMPTS: usize = 3;

/// A running single-member etcd, killed when dropped.
pub struct BenchEtcd {
    child: Child,
    /// Holds the data directory and the log; removed when dropped (after the kill).
    _dir: TempDir,
    client_port: u16,
}

impl BenchEtcd {
    /// Starts a fresh, empty etcd and waits until it answers; `None` when `etcd` is not on
    /// `PATH`. Panics when it is installed but does not start.
    pub async fn start() -> Option<BenchEtcd> {
        let binary = find_on_path("etcd")?;
        let mut last_failure = String::new();
        for _ in 0..START_ATTEMPTS {
            match launch(&binary).await {
                Ok(server) => return Some(server),
                // Most likely a port taken between choosing and binding it: try others.
                Err(failure) => last_failure = failure,
            }
        }
        panic!("etcd did not start after {START_ATTEMPTS} attempts: {last_failure}");
    }

    /// The client URL, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// A store connected to this server (default options: the benchmark measures what
    /// users get).
    pub async fn store(&self) -> Arc<EtcdStore> {
        Arc::new(
            EtcdStore::connect(EtcdOptions::new([self.endpoint()]))
                .await
                .unwrap_or_else(|e| panic!("connect to the benchmark etcd: {e}")),
        )
    }
}

impl Drop for BenchEtcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Spawns etcd on fresh ports and data dir and waits until it is healthy.
async fn launch(binary: &Path) -> Result<BenchEtcd, String> {
    let dir = TempDir::with_prefix("introspect-bench-etcd-").map_err(|e| e.to_string())?;
    let log_path = dir.path().join("etcd.log");
    let log = std::fs::File::create(&log_path).map_err(|e| format!("open the etcd log: {e}"))?;
    let log_err = log
        .try_clone()
        .map_err(|e| format!("open the etcd log: {e}"))?;
    let (client_port, peer_port) = free_ports();
    let client_url = format!("http://127.0.0.1:{client_port}");
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    let name = "introspect-bench";
    let child = Command::new(binary)
        .arg("--name")
        .arg(name)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["--listen-client-urls", &client_url])
        .args(["--advertise-client-urls", &client_url])
        .args(["--listen-peer-urls", &peer_url])
        .args(["--initial-advertise-peer-urls", &peer_url])
        .args(["--initial-cluster", &format!("{name}={peer_url}")])
        .args(["--initial-cluster-state", "new"])
        .args(["--initial-cluster-token", "introspect-bench"])
        .args(["--heartbeat-interval", "50"])
        .args(["--election-timeout", "500"])
        .args(["--logger", "zap", "--log-outputs", "stderr"])
        .args(["--log-level", "error"])
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .spawn()
        .map_err(|e| format!("spawn etcd: {e}"))?;
    let mut server = BenchEtcd {
        child,
        _dir: dir,
        client_port,
    };
    let started = Instant::now();
    loop {
        if let Ok(Some(status)) = server.child.try_wait() {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            return Err(format!("etcd exited with {status}; its log:\n{log}"));
        }
        if healthy(client_port).await {
            return Ok(server);
        }
        if started.elapsed() > START_DEADLINE {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            drop(server);
            return Err(format!(
                "etcd not healthy after {START_DEADLINE:?}; its log:\n{log}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The executable `name` on `PATH`.
fn find_on_path(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Two distinct free loopback ports (bound together, then released for etcd).
fn free_ports() -> (u16, u16) {
    let bind = || TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    let (a, b) = (bind(), bind());
    let port = |l: &TcpListener| l.local_addr().expect("local address").port();
    (port(&a), port(&b))
}

/// Whether etcd's `/health` says it has a leader and serves reads (one bounded attempt).
async fn healthy(port: u16) -> bool {
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        stream
            .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .ok()?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.ok()?;
        let answer = String::from_utf8_lossy(&answer);
        Some(answer.contains("\"health\":\"true\""))
    };
    tokio::time::timeout(Duration::from_secs(2), attempt)
        .await
        .ok()
        .flatten()
        .unwrap_or(false)
}
