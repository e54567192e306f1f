//! Throwaway Nacos servers for tests: `rnacos`, a Nacos-compatible server (Nacos 2.x gRPC,
//! 1.x HTTP) that `scripts/setup.sh --with-nacos` builds from crates.io at a pinned
//! version.
//!
//! [`NacosServer::start`] runs it on loopback with a temporary data dir and working
//! directory (rnacos, like the SDK, reads a `.env` of its working directory): HTTP on a free
//! port P, gRPC on P + 1000 (where Nacos clients look for it), the console on a third port,
//! and waits until HTTP answers. It can be restarted on the same data or on an empty data
//! dir, frozen, and killed; it is killed when dropped. With [`NacosServer::start_with_auth`]
//! it requires a login (user `nacos`, password [`ADMIN_PASSWORD`]).
//!
//! The binary: `INTROSPECT_RNACOS`, else where setup installs it
//! (`~/.cache/introspect/rnacos-{RNACOS_VERSION}/bin/rnacos`), else `rnacos` on `PATH`.
//! Without it, `start` panics when `CI` is set (the Nacos tests are mandatory there) and
//! otherwise prints a loud `SKIPPED` line and returns `None`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use introspect::backend::Backend;
use introspect::backend::nacos::{NacosBackend, NacosOptions};
use rustix::process::Signal;
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::etcd::send_signal;

/// The rnacos version setup installs (keep in step with `scripts/setup.sh`).
pub const RNACOS_VERSION: &str = "0.8.8";
/// How long a (re)start may take.
const START_DEADLINE: Duration = Duration::from_secs(60);
/// The admin password of a server started with authentication.
pub const ADMIN_PASSWORD: &str = "introspect-test-admin";
/// How long the server waits for a silent gRPC connection before it drops it (and the
/// connection's instances): rnacos's `RNACOS_GRPC_DETECTION_TIMEOUT_SECOND`, shortened.
pub const DETECTION_TIMEOUT: Duration = Duration::from_secs(6);

/// The rnacos binary, if installed. Under CI its absence panics; elsewhere it prints a loud
/// SKIPPED line.
pub fn binary() -> Option<PathBuf> {
    let candidates = [
        std::env::var_os("INTROSPECT_RNACOS").map(PathBuf::from),
        std::env::var_os("HOME").map(|home| {
            PathBuf::from(home).join(format!(
                ".cache/introspect/rnacos-{RNACOS_VERSION}/bin/rnacos"
            ))
        }),
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("rnacos"))
                .find(|p| p.is_file())
        }),
    ];
    if let Some(found) = candidates.into_iter().flatten().find(|p| p.is_file()) {
        return Some(found);
    }
    let ci = std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"));
    if ci {
        panic!(
            "rnacos is not installed but CI is set: the Nacos tests are mandatory in CI. Run \
             scripts/setup.sh --with-nacos."
        );
    }
    eprintln!(
        "\n*** SKIPPED: rnacos not installed (run scripts/setup.sh --with-nacos). This Nacos \
         test did not run. ***\n"
    );
    None
}

/// One rnacos process.
pub struct NacosServer {
    binary: PathBuf,
    child: Option<Child>,
    dir: TempDir,
    data: PathBuf,
    http_port: u16,
    console_port: u16,
    auth: bool,
}

impl NacosServer {
    /// Starts a server without authentication and waits until it answers; `None` (after a
    /// loud message) when rnacos is not installed outside CI.
    pub async fn start() -> Option<NacosServer> {
        Self::start_inner(false).await
    }

    /// Starts a server that requires a login (user `nacos`, password [`ADMIN_PASSWORD`]).
    pub async fn start_with_auth() -> Option<NacosServer> {
        Self::start_inner(true).await
    }

    async fn start_inner(auth: bool) -> Option<NacosServer> {
        let binary = binary()?;
        let dir = TempDir::with_prefix("introspect-nacos-").expect("create a temporary dir");
        let data = dir.path().join("data-0");
        let http_port = super::ports::free_low_port(true);
        let console_port = super::ports::free_low_port(false);
        let mut server = NacosServer {
            binary,
            child: None,
            dir,
            data,
            http_port,
            console_port,
            auth,
        };
        server
            .launch()
            .await
            .unwrap_or_else(|e| panic!("rnacos did not start: {e}"));
        Some(server)
    }

    /// `host:port` of its HTTP port (its gRPC port is 1000 above).
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.http_port)
    }

    /// Its registry URL, `nacos://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nacos://{}", self.address())
    }

    /// Options for this server, with a cache directory inside the server's temporary dir.
    pub fn options(&self) -> NacosOptions {
        self.options_via(&self.address())
    }

    /// Like [`options`](Self::options), reaching the server at `address`: `host:port` of a
    /// fault proxy in front of it, which must forward port + 1000 too (the SDK's gRPC port,
    /// see `FaultProxy::start_with_offset`).
    pub fn options_via(&self, address: &str) -> NacosOptions {
        NacosOptions::new([address.to_owned()])
            .with_connect_timeout(Duration::from_secs(10))
            .with_cache_dir(self.dir.path().join("client-cache"))
    }

    /// A backend connected to this server with [`options`](Self::options).
    pub async fn backend(&self) -> Backend {
        connect(self.options()).await
    }

    /// Kills the server at once (SIGKILL) and reaps it; its data stays.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server and starts it again on the same ports and data.
    pub async fn restart(&mut self) {
        self.kill();
        self.launch()
            .await
            .unwrap_or_else(|e| panic!("rnacos did not restart: {e}"));
    }

    /// Kills the server and starts a new, empty one on the same ports: every config and
    /// instance is gone.
    pub async fn restart_empty(&mut self) {
        self.kill();
        let next = self
            .data
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("data-"))
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(0)
            + 1;
        self.data = self.dir.path().join(format!("data-{next}"));
        self.launch()
            .await
            .unwrap_or_else(|e| panic!("rnacos did not restart empty: {e}"));
    }

    /// Freezes the server (SIGSTOP); [`resume`](Self::resume) undoes it.
    pub fn pause(&mut self) {
        let child = self.child.as_ref().expect("the test rnacos is not running");
        send_signal(child, Signal::STOP, "SIGSTOP");
    }

    /// Lets a paused server run again (SIGCONT).
    pub fn resume(&mut self) {
        let child = self.child.as_ref().expect("the test rnacos is not running");
        send_signal(child, Signal::CONT, "SIGCONT");
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("rnacos.log")).unwrap_or_default()
    }

    async fn launch(&mut self) -> Result<(), String> {
        std::fs::create_dir_all(&self.data).map_err(|e| format!("create the data dir: {e}"))?;
        let work = self.dir.path().join("work");
        std::fs::create_dir_all(&work).map_err(|e| format!("create the working dir: {e}"))?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("rnacos.log"))
            .map_err(|e| format!("open the log: {e}"))?;
        let log_err = log.try_clone().map_err(|e| format!("open the log: {e}"))?;
        let mut command = Command::new(&self.binary);
        command
            .current_dir(&work)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("RUST_LOG", "warn")
            .env("RNACOS_HTTP_PORT", self.http_port.to_string())
            .env("RNACOS_GRPC_PORT", (self.http_port + 1000).to_string())
            .env("RNACOS_HTTP_CONSOLE_PORT", self.console_port.to_string())
            .env("RNACOS_SDK_HOST", "127.0.0.1")
            .env("RNACOS_CONSOLE_HOST", "127.0.0.1")
            .env("RNACOS_DATA_DIR", &self.data)
            .env("RNACOS_HTTP_WORKERS", "2")
            .env(
                "RNACOS_GRPC_DETECTION_TIMEOUT_SECOND",
                DETECTION_TIMEOUT.as_secs().to_string(),
            )
            .env("RNACOS_ENV_FILE", work.join("none.env"))
            // By default rnacos keeps the metadata an instance first registered with and
            // answers it over later registrations of the same address ("priority metadata",
            // persisted); Nacos replaces it, as a revision change needs.
            .env(
                "RNACOS_NAMING_INSTANCE_METADATA_PERSISTENCE_ENABLE",
                "false",
            );
        if self.auth {
            command
                .env("RNACOS_ENABLE_OPEN_API_AUTH", "true")
                .env("RNACOS_INIT_ADMIN_USERNAME", "nacos")
                .env("RNACOS_INIT_ADMIN_PASSWORD", ADMIN_PASSWORD);
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", self.binary.display()))?;
        self.child = Some(child);
        self.wait_serving().await
    }

    /// Waits until the HTTP port answers, then the gRPC port accepts connections.
    async fn wait_serving(&mut self) -> Result<(), String> {
        let started = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                return Err(format!(
                    "rnacos exited with {status}; its log:\n{}",
                    self.log()
                ));
            }
            if http_answers(self.http_port).await
                && tokio::net::TcpStream::connect(("127.0.0.1", self.http_port + 1000))
                    .await
                    .is_ok()
            {
                return Ok(());
            }
            if started.elapsed() > START_DEADLINE {
                self.kill();
                return Err(format!(
                    "not serving after {START_DEADLINE:?}; its log:\n{}",
                    self.log()
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Registers a naming instance over rnacos's HTTP API (Nacos 1.x's
    /// `/nacos/v1/ns/instance`), as a peer that is not this crate would: `metadata` is a JSON
    /// object. Persistent (`ephemeral=false`) so it stays without heartbeats.
    pub async fn put_instance_http(
        &self,
        group: &str,
        service: &str,
        ip: &str,
        port: u16,
        metadata: &str,
    ) {
        let body = format!(
            "serviceName={}&groupName={}&ip={ip}&port={port}&weight=1.0&healthy=true&enabled=true\
             &ephemeral=false&clusterName=DEFAULT&metadata={}",
            urlencode(service),
            urlencode(group),
            urlencode(metadata)
        );
        let answer = http(self.http_port, "POST", "/nacos/v1/ns/instance", &body).await;
        assert!(answer.contains("200"), "registering over HTTP: {answer}");
    }

    /// Publishes a config over rnacos's HTTP API (`/nacos/v1/cs/configs`).
    pub async fn put_config_http(&self, data_id: &str, group: &str, content: &str) {
        let body = format!(
            "dataId={}&group={}&content={}",
            urlencode(data_id),
            urlencode(group),
            urlencode(content)
        );
        let answer = http(self.http_port, "POST", "/nacos/v1/cs/configs", &body).await;
        assert!(answer.contains("true"), "publishing over HTTP: {answer}");
    }

    /// A config's content over HTTP, if any.
    pub async fn config_http(&self, data_id: &str, group: &str) -> Option<String> {
        let path = format!(
            "/nacos/v1/cs/configs?dataId={}&group={}",
            urlencode(data_id),
            urlencode(group)
        );
        let answer = http(self.http_port, "GET", &path, "").await;
        let (head, body) = answer.split_once("\r\n\r\n")?;
        head.starts_with("HTTP/1.1 200")
            .then(|| body.to_owned())
            .or_else(|| head.starts_with("HTTP/1.0 200").then(|| body.to_owned()))
    }

    /// The names of the services of `group` over HTTP (`/nacos/v1/ns/service/list`).
    pub async fn services_http(&self, group: &str) -> Vec<String> {
        let path = format!(
            "/nacos/v1/ns/service/list?pageNo=1&pageSize=1000&groupName={}",
            urlencode(group)
        );
        let answer = http(self.http_port, "GET", &path, "").await;
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        let listed: serde_json::Value = serde_json::from_str(body)
            .unwrap_or_else(|e| panic!("the service list: {e}: {answer}"));
        listed["doms"]
            .as_array()
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every config of the public namespace over HTTP (Nacos 1.x's search,
    /// `/nacos/v1/cs/configs?search=blur`), as `(group, dataId, content)`.
    pub async fn configs_http(&self) -> Vec<(String, String, String)> {
        let path = "/nacos/v1/cs/configs?search=blur&dataId=&group=&pageNo=1&pageSize=1000";
        let answer = http(self.http_port, "GET", path, "").await;
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        let listed: serde_json::Value = serde_json::from_str(body)
            .unwrap_or_else(|e| panic!("the config search: {e}: {answer}"));
        let text = |item: &serde_json::Value, field: &str| {
            item[field].as_str().unwrap_or_default().to_owned()
        };
        listed["pageItems"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .map(|item| {
                        (
                            text(item, "group"),
                            text(item, "dataId"),
                            text(item, "content"),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The instances of a service over HTTP (`/nacos/v1/ns/instance/list`), as JSON.
    pub async fn instances_http(&self, group: &str, service: &str) -> serde_json::Value {
        instances_http_in(self.http_port, group, service).await
    }
}

impl Drop for NacosServer {
    fn drop(&mut self) {
        self.kill();
    }
}

impl NacosServer {
    /// Whether the server compares a `publishConfigCas` write's `casMd5` with the config's
    /// MD5 and refuses a stale one, as Nacos does: probed with the SDK's own client on a config
    /// of its own (`introspect-cas-probe`), written with an MD5 it cannot have. rnacos 0.8.8
    /// takes such a write.
    pub async fn enforces_cas_md5(&self) -> bool {
        let props = nacos_sdk::api::props::ClientProps::new()
            .server_addr(self.address())
            .env_first(false)
            .cache_dir(self.dir.path().join("probe-cache"))
            .app_name("cas-probe");
        let config = nacos_sdk::api::config::ConfigServiceBuilder::new(props)
            .build()
            .await
            .expect("a raw config client");
        let (data_id, group) = ("introspect-cas-probe".to_owned(), "probe".to_owned());
        config
            .publish_config(data_id.clone(), group.clone(), "first".into(), None)
            .await
            .expect("publish the probe config");
        let stale = "0123456789abcdef0123456789abcdef".to_owned();
        let taken = config
            .publish_config_cas(data_id.clone(), group.clone(), "second".into(), None, stale)
            .await;
        let _ = config.remove_config(data_id, group).await;
        !matches!(taken, Ok(true))
    }
}

/// A naming client of the SDK's own, as a peer that is not this crate uses it (Dubbo Java
/// and dubbo-go register through their own Nacos clients): for foreign and hostile records.
pub async fn raw_naming(server: &NacosServer) -> nacos_sdk::api::naming::NamingService {
    let props = nacos_sdk::api::props::ClientProps::new()
        .server_addr(server.address())
        .env_first(false)
        .naming_push_empty_protection(false)
        .cache_dir(server.dir.path().join("raw-cache"))
        .app_name("raw-peer");
    nacos_sdk::api::naming::NamingServiceBuilder::new(props)
        .build()
        .await
        .expect("a raw naming client")
}

/// Registers a naming instance with `metadata` through `naming`, as another implementation
/// would (weight 1, healthy, enabled, ephemeral, cluster DEFAULT).
pub async fn register_raw(
    naming: &nacos_sdk::api::naming::NamingService,
    group: &str,
    service: &str,
    ip: &str,
    port: u16,
    metadata: &[(&str, &str)],
) -> nacos_sdk::api::naming::ServiceInstance {
    let instance = nacos_sdk::api::naming::ServiceInstance {
        ip: ip.to_owned(),
        port: i32::from(port),
        metadata: metadata
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..Default::default()
    };
    naming
        .register_instance(service.to_owned(), Some(group.to_owned()), instance.clone())
        .await
        .unwrap_or_else(|e| panic!("register {group}@@{service} {ip}:{port}: {e}"));
    instance
}

/// A backend for `options`; panics when it cannot connect.
pub async fn connect(options: NacosOptions) -> Backend {
    NacosBackend::connect(options.clone())
        .await
        .unwrap_or_else(|e| panic!("connect to the test rnacos {options:?}: {e}"))
        .into_backend()
}

/// The instances of `service` in `DEFAULT_GROUP` of the server at HTTP port `port`.
pub async fn instances_http_at(port: u16, service: &str) -> serde_json::Value {
    instances_http_in(port, "DEFAULT_GROUP", service).await
}

async fn instances_http_in(port: u16, group: &str, service: &str) -> serde_json::Value {
    let path = format!(
        "/nacos/v1/ns/instance/list?serviceName={}&groupName={}",
        urlencode(service),
        urlencode(group)
    );
    let answer = http(port, "GET", &path, "").await;
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or(serde_json::Value::Null)
}

fn urlencode(value: &str) -> String {
    let mut out = String::new();
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(byte as char)
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// Whether the HTTP port answers at all (one bounded attempt).
async fn http_answers(port: u16) -> bool {
    !http(port, "GET", "/nacos/v1/console/server/state", "")
        .await
        .is_empty()
}

/// One HTTP/1.0 request; the whole answer, empty on any failure.
async fn http(port: u16, method: &str, path: &str, body: &str) -> String {
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .ok()?;
        let request = format!(
            "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: \
             application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.ok()?;
        Some(String::from_utf8_lossy(&answer).into_owned())
    };
    tokio::time::timeout(Duration::from_secs(5), attempt)
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
}
