//! A throwaway single-member etcd for tests.
//!
//! [`EtcdServer::start`] runs the `etcd` binary found on `PATH` (Debian: package
//! `etcd-server`) on two free loopback ports with a temporary data directory, and waits until
//! it answers. The server can be killed, restarted on the same data, or restarted empty, to
//! test how the layers above live through store faults; it is killed when dropped.
//!
//! Without `etcd` installed, `start` panics when the `CI` variable is set (etcd tests are
//! mandatory there) and otherwise prints a loud `SKIPPED` line and returns `None`, so a test
//! does `let Some(etcd) = EtcdServer::start().await else { return };`.
//!
//! [`EtcdServer::start_tls`] starts one that speaks only TLS and wants client certificates,
//! generated in-process for the occasion; [`EtcdServer::options`] then carries them.
//!
//! Signals (freeze, resume) are sent with a system call; a signal that cannot be sent fails
//! the test at once rather than letting it go on against a server in an unknown state.
//!
//! The member runs with a short heartbeat (50 ms) and election timeout (500 ms): it becomes
//! leader quickly after a (re)start, and its minimum lease TTL is 1 s instead of 2 s. Its log
//! (errors only) goes to `etcd.log` in a temporary directory, shown when it fails to start.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use introspect::store::{EtcdOptions, EtcdStore};
use rustix::process::{Pid, Signal, kill_process};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::certs::TestCa;
use super::ports::free_ports;

/// How long a (re)start may take before the harness gives up.
const START_DEADLINE: Duration = Duration::from_secs(30);
/// Attempts at starting on fresh ports when the chosen ones were taken meanwhile.
const START_ATTEMPTS: usize = 3;

/// A running (or killed) single-member etcd; see the module docs.
pub struct EtcdServer {
    binary: PathBuf,
    child: Option<Child>,
    /// Holds the data directory (`data/` inside) and the log.
    dir: TempDir,
    client_port: u16,
    peer_port: u16,
    paused: bool,
    tls: Option<TlsMaterial>,
}

/// The certificates of a TLS server from [`EtcdServer::start_tls`], PEM-encoded.
pub struct TlsMaterial {
    /// The CA that signed the server's and the client's certificates.
    pub ca_pem: Vec<u8>,
    /// A client certificate the server accepts.
    pub client_cert_pem: Vec<u8>,
    /// Its private key.
    pub client_key_pem: Vec<u8>,
    /// Holds the files etcd reads (survives `restart_empty`).
    dir: TempDir,
}

impl EtcdServer {
    /// Starts a fresh etcd and waits until it answers; `None` (after a loud message) when
    /// the `etcd` binary is not installed outside CI. Panics when it cannot be started.
    pub async fn start() -> Option<EtcdServer> {
        Self::start_with(None).await
    }

    /// Like [`start`](Self::start), but the server speaks only TLS on its client port and
    /// requires a client certificate; see [`tls`](Self::tls).
    pub async fn start_tls() -> Option<EtcdServer> {
        Self::start_with(Some(make_certificates())).await
    }

    async fn start_with(tls: Option<TlsMaterial>) -> Option<EtcdServer> {
        let binary = require("etcd", "etcd-server")?;
        let mut tls = tls;
        let mut last_failure = String::new();
        for _ in 0..START_ATTEMPTS {
            let (client_port, peer_port) = free_ports();
            let mut server = EtcdServer {
                binary: binary.clone(),
                child: None,
                dir: TempDir::with_prefix("introspect-etcd-").expect("create a temporary dir"),
                client_port,
                peer_port,
                paused: false,
                tls: tls.take(),
            };
            match server.launch().await {
                Ok(()) => return Some(server),
                // Most likely a port taken between choosing and binding it: try others.
                Err(failure) => {
                    last_failure = failure;
                    tls = server.tls.take();
                }
            }
        }
        panic!("etcd did not start after {START_ATTEMPTS} attempts: {last_failure}");
    }

    /// The client URL, `http://127.0.0.1:PORT` (`https://` for a TLS server).
    pub fn endpoint(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.client_port)
    }

    /// The certificates of a server from [`start_tls`](Self::start_tls).
    pub fn tls(&self) -> Option<&TlsMaterial> {
        self.tls.as_ref()
    }

    /// Options for this server with short timeouts suited to tests (1 s connect, 2 s
    /// request), and the CA and client certificate of a TLS server.
    pub fn options(&self) -> EtcdOptions {
        self.options_via(&self.endpoint())
    }

    /// Like [`options`](Self::options), reaching the server at `endpoint` (a URL such as
    /// `http://` and the address of a fault proxy in front of it).
    pub fn options_via(&self, endpoint: &str) -> EtcdOptions {
        let options = EtcdOptions::new([endpoint.to_owned()])
            .with_connect_timeout(Duration::from_secs(1))
            .with_request_timeout(Duration::from_secs(2));
        match &self.tls {
            Some(tls) => options.with_tls(
                tls.ca_pem.clone(),
                Some((tls.client_cert_pem.clone(), tls.client_key_pem.clone())),
            ),
            None => options,
        }
    }

    /// Runs `etcdctl` against this server with `args`; panics with its output on failure.
    pub fn etcdctl(&self, args: &[&str]) -> String {
        let output = std::process::Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.endpoint()))
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("etcdctl cannot run (Debian package etcd-client): {e}"));
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "etcdctl {args:?} failed: {stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    }

    /// Turns on authentication: a `root` user, a `provider` user that may write the whole
    /// key space and a `reader` user that may only read it. Passwords are the user names
    /// followed by `-pw`.
    pub fn enable_auth(&self) {
        let add_user = |name: &str| {
            let password = format!("--new-user-password={name}-pw");
            self.etcdctl(&["user", "add", name, "--interactive=false", &password]);
        };
        add_user("root");
        self.etcdctl(&["user", "grant-role", "root", "root"]);
        add_user("provider");
        self.etcdctl(&["role", "add", "registrar"]);
        self.etcdctl(&[
            "role",
            "grant-permission",
            "registrar",
            "--prefix=true",
            "readwrite",
            "/",
        ]);
        self.etcdctl(&["user", "grant-role", "provider", "registrar"]);
        add_user("reader");
        self.etcdctl(&["role", "add", "observer"]);
        self.etcdctl(&[
            "role",
            "grant-permission",
            "observer",
            "--prefix=true",
            "read",
            "/",
        ]);
        self.etcdctl(&["user", "grant-role", "reader", "observer"]);
        self.etcdctl(&["auth", "enable"]);
    }

    /// A store connected to this server with [`options`](Self::options).
    pub async fn store(&self) -> Arc<EtcdStore> {
        Arc::new(
            EtcdStore::connect(self.options())
                .await
                .unwrap_or_else(|e| panic!("connect to the test etcd at {}: {e}", self.endpoint())),
        )
    }

    /// The process id of the running server, if any.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the server is [`pause`](Self::pause)d.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Whether the server process is running (it may be paused).
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// Kills the server at once (SIGKILL: no goodbye to clients) and reaps it. Its data
    /// stays for [`restart`](Self::restart). Does nothing when it is not running.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.paused = false;
    }

    /// Kills the server if running, starts it again on the same ports and data (keys,
    /// leases and revisions survive), and waits until it answers.
    pub async fn restart(&mut self) {
        self.kill();
        if let Err(failure) = self.launch().await {
            panic!("etcd did not restart: {failure}");
        }
    }

    /// Kills the server if running and starts a new, empty one on the same ports: every key,
    /// lease and revision is gone, as after losing the cluster.
    pub async fn restart_empty(&mut self) {
        self.kill();
        self.dir = TempDir::with_prefix("introspect-etcd-").expect("create a temporary dir");
        if let Err(failure) = self.launch().await {
            panic!("etcd did not restart empty: {failure}");
        }
    }

    /// Freezes the server (SIGSTOP): connections stay open but nothing answers, as in a
    /// network partition or a stalled disk. Undo with [`resume`](Self::resume).
    /// Panics when the server is not running or the signal cannot be sent.
    pub fn pause(&mut self) {
        self.signal(Signal::STOP, "SIGSTOP");
        if let Some(child) = &self.child {
            wait_stopped(child);
        }
        self.paused = true;
    }

    /// Lets a [`pause`](Self::pause)d server run again (SIGCONT). Panics when the server is
    /// not running or the signal cannot be sent.
    pub fn resume(&mut self) {
        self.signal(Signal::CONT, "SIGCONT");
        self.paused = false;
    }

    /// The server's log so far (errors only).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("etcd.log")
    }

    /// Sends `signal` to the running server; panics (naming `what`) when there is none or
    /// the system refuses.
    fn signal(&self, signal: Signal, what: &str) {
        let child = self
            .child
            .as_ref()
            .unwrap_or_else(|| panic!("cannot send {what}: the test etcd is not running"));
        send_signal(child, signal, what);
    }

    /// Spawns etcd on the current ports and data dir and waits until it is healthy.
    async fn launch(&mut self) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_err(|e| format!("open the etcd log: {e}"))?;
        let log_err = log
            .try_clone()
            .map_err(|e| format!("open the etcd log: {e}"))?;
        let client_url = self.endpoint();
        let peer_url = format!("http://127.0.0.1:{}", self.peer_port);
        let name = "introspect-test";
        let mut command = Command::new(&self.binary);
        if let Some(tls) = &self.tls {
            let file = |name: &str| tls.dir.path().join(name);
            command
                .arg("--cert-file")
                .arg(file("server.pem"))
                .arg("--key-file")
                .arg(file("server.key"))
                .arg("--trusted-ca-file")
                .arg(file("ca.pem"))
                .arg("--client-cert-auth");
        }
        let child = command
            .arg("--name")
            .arg(name)
            .arg("--data-dir")
            .arg(self.data_dir())
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("{name}={peer_url}")])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", "introspect-test"])
            .args(["--heartbeat-interval", "50"])
            .args(["--election-timeout", "500"])
            .args(["--logger", "zap", "--log-outputs", "stderr"])
            .args(["--log-level", "error"])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", self.binary.display()))?;
        self.child = Some(child);
        let started = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(format!(
                    "etcd exited with {status}; its log:\n{}",
                    self.log()
                ));
            }
            if self.answers().await {
                return Ok(());
            }
            if started.elapsed() > START_DEADLINE {
                self.kill();
                return Err(format!(
                    "etcd not healthy after {START_DEADLINE:?}; its log:\n{}",
                    self.log()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.kill();
    }
}

impl EtcdServer {
    /// Whether the server is up and serves reads (one bounded attempt).
    async fn answers(&self) -> bool {
        if self.tls.is_none() {
            return healthy(self.client_port).await;
        }
        // `/health` is behind TLS too: ask through the client instead.
        let options = self
            .options()
            .with_connect_timeout(Duration::from_millis(500))
            .with_request_timeout(Duration::from_millis(500));
        match EtcdStore::connect(options).await {
            Ok(store) => introspect::store::Store::get(&store, "/").await.is_ok(),
            Err(_) => false,
        }
    }
}

/// The program `name` on `PATH`. When missing: a panic under CI (the tests that need it are
/// mandatory there), else a loud SKIPPED message and `None`.
pub fn require(name: &str, debian_package: &str) -> Option<PathBuf> {
    if let Some(found) = find_on_path(name) {
        return Some(found);
    }
    let ci = std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"));
    if ci {
        panic!(
            "`{name}` is not installed but CI is set: the etcd tests are mandatory in CI. \
             Install it (Debian: apt-get install {debian_package}) so `{name}` is on PATH."
        );
    }
    eprintln!(
        "\n*** SKIPPED: {name} not installed (no `{name}` on PATH; Debian: apt-get install \
         {debian_package}). This etcd test did not run. ***\n"
    );
    None
}

/// Whether the program `name` is on `PATH` (no message either way).
pub fn require_quiet(name: &str) -> bool {
    find_on_path(name).is_some()
}

/// The executable `name` on `PATH`.
fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

/// A CA, a server certificate for 127.0.0.1 and `localhost`, and a client certificate,
/// written where etcd reads them.
fn make_certificates() -> TlsMaterial {
    let dir = TempDir::with_prefix("introspect-etcd-tls-").expect("create a temporary dir");
    let ca = TestCa::new("introspect-test-ca");
    let server = ca.leaf(&["127.0.0.1", "localhost"]);
    let client = ca.leaf(&["introspect-test-client"]);
    let write = |name: &str, pem: &str| {
        std::fs::write(dir.path().join(name), pem).expect("write a certificate file");
    };
    write("ca.pem", &ca.pem());
    write("server.pem", &server.cert_pem);
    write("server.key", &server.key_pem);
    TlsMaterial {
        ca_pem: ca.pem().into_bytes(),
        client_cert_pem: client.cert_pem.into_bytes(),
        client_key_pem: client.key_pem.into_bytes(),
        dir,
    }
}

/// Sends `signal` to `child`; panics (naming `what`) when the system refuses.
pub fn send_signal(child: &Child, signal: Signal, what: &str) {
    let pid = Pid::from_child(child);
    if let Err(error) = kill_process(pid, signal) {
        panic!(
            "cannot send {what} to the test etcd (pid {}): {error}",
            child.id()
        );
    }
}

/// Waits (at most 5 s) until every thread of `child` is stopped. A SIGSTOP stops a process's
/// threads one by one, as each next enters the kernel: a thread that was running may still
/// answer a request sent right after the signal.
pub fn wait_stopped(child: &Child) {
    let tasks = PathBuf::from(format!("/proc/{}/task", child.id()));
    let all_stopped = || {
        let Ok(entries) = std::fs::read_dir(&tasks) else {
            return true;
        };
        // A thread's state is the field after its name, which ends with the last ')'.
        entries.flatten().all(|task| {
            std::fs::read_to_string(task.path().join("stat")).map_or(true, |stat| {
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with(['T', 't']))
            })
        })
    };
    let started = Instant::now();
    while !all_stopped() && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether etcd's `/health` says it has a leader and serves reads (one bounded attempt).
pub async fn healthy(port: u16) -> bool {
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
