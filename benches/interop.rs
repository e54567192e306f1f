//! Discovery side by side with the real Dubbo peers: Introspect, Dubbo Java 3.3 and
//! dubbo-go 3.3 consumers each subscribe, cold, to one app of 2,000 instances in 10
//! revisions on ZooKeeper, in one run.
//!
//! Run with `scripts/setup.sh --with-interop --with-zookeeper && cargo bench --bench interop
//! --features zookeeper` (`-- --rounds N`: rounds, 3 by default; `-- --instances N`: the
//! fleet, 2,000 by default; `-- --only introspect|java|go`: one consumer; `-- --registry
//! nacos`: the fleet on a throwaway rnacos instead, with `--features zookeeper,nacos`). It
//! prints a table of medians.
//!
//! The rig, started once for the whole run:
//!
//! * a throwaway ZooKeeper (the test suite's harness);
//! * 10 real MetadataService servers: Introspect providers of `helloworld.Greeter` (which
//!   both peers accept, as the interop tests show), each exporting it with a parameter of its
//!   own (`variant`), so each is one revision, and each counting the calls it answers. They
//!   listen on every interface, since Dubbo Java dials a record's `127.0.0.1` at the
//!   machine's own address (see [`Consumer::command`]);
//! * the fleet: each server's own record (registered by the provider) and copies of it up
//!   to 2,000 records in all (written as plain znodes, the Curator JSON Dubbo writes under
//!   `/services/{app}/{host}:{port}`), every one on `127.0.0.1` with a port of its own and
//!   the MetadataService port of its revision's server; the providers write the mapping of
//!   the interface to the app;
//! * every instance's address listens: one listener per instance on every interface (a
//!   port the system picks), all served by one gRPC server, so that a consumer that
//!   connects to each address (Dubbo Java makes a client per address at once) connects as
//!   it would in production. The listeners live in processes of their own (this binary
//!   re-executed, 4,000 listeners each at most), since a process's open files are limited.
//!
//! Each round runs the three consumers one after another, each a process of its own started
//! cold (Introspect's is this binary re-executed in a consumer mode, so that its resident
//! memory is a process's like the peers'). Each connects to the registry, prints
//! `STARTED startup_ms=S rss_kb=R`, subscribes to the interface through the mapping, waits
//! until its own view holds every address and prints
//! `BENCH addresses=N elapsed_ms=E rss_before_kb=B rss_after_kb=A startup_ms=S`, making no
//! call. The bench reads:
//!
//! * time to all addresses: the consumer's own measure, from its subscribe to its view
//!   holding all N (Introspect: the subscription's first set with N endpoints; Dubbo Java:
//!   the reference's directory, `getAllInvokers()`; dubbo-go: the address list its directory
//!   gives its routers);
//! * metadata calls: counted at the 10 servers, from the consumer's start to its exit;
//! * memory growth: the consumer's VmRSS (`/proc/self/status`) when it holds all N, less
//!   before it subscribed;
//! * start-up, reported apart and not counted: from the process's spawn to its `STARTED`
//!   line (a JVM, the Go runtime, a connected registry client), as this bench sees it.
//!
//! A peer that is not built is reported so, with the command that builds it; without
//! ZooKeeper the bench says so and measures nothing.

/// Test certificates, which the etcd harness needs.
#[allow(dead_code)]
#[path = "../tests/it/support/certs.rs"]
mod certs;
/// The fleet's building blocks: the instance ports below the ephemeral range, the record copies.
#[allow(dead_code)]
#[path = "common/mod.rs"]
mod common;
/// The test suite's etcd harness, whose free ports and signals the ZooKeeper
/// harness uses.
#[allow(dead_code)]
#[path = "../tests/it/support/etcd.rs"]
mod etcd;
/// The test suite's throwaway rnacos, shared rather than copied.
#[cfg(feature = "nacos")]
#[allow(dead_code)]
#[path = "../tests/it/support/nacos.rs"]
mod nacos_server;
/// The test servers' loopback ports, shared with the test suite.
#[allow(dead_code)]
#[path = "../tests/it/support/ports.rs"]
mod ports;
/// The test suite's throwaway ZooKeeper, shared rather than copied.
#[allow(dead_code)]
#[path = "../tests/it/support/zookeeper.rs"]
mod zookeeper_server;

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use introspect::backend::zookeeper::{Paths, record};
use introspect::backend::{Backend, InstanceRead};
use introspect::{Limits, Provider, Resolver, ServiceInfo, ServiceInstance, Subscription};
use tempfile::TempDir;
use zookeeper_client as zk;

use common::synthetic_on;
use introspect::rpc::{MetadataServer, MetadataServiceV2Server};
use zookeeper_server::ZooKeeperServer;

/// The app every instance belongs to.
const APP: &str = "bench-greeter";
/// The interface every consumer subscribes to.
const INTERFACE: &str = "helloworld.Greeter";
/// The revisions of the fleet: one MetadataService server each.
const REVISIONS: usize = 10;
/// Instances by default.
const INSTANCES: usize = 2_000;
/// Rounds by default.
const ROUNDS: usize = 3;
/// How long a consumer may take to hold every address, inside [`RUN_DEADLINE`].
const WAIT_SECONDS: u64 = 120;
/// How long one consumer process may run in all (start-up included).
const RUN_DEADLINE: Duration = Duration::from_secs(200);
/// Creates in flight at once while writing the fleet.
const PIPELINE: usize = 500;
/// The environment variable that turns this binary into Introspect's bench consumer: the
/// registry URL.
const CONSUMER_ENV: &str = "INTROSPECT_BENCH_CONSUMER";
/// With [`CONSUMER_ENV`]: how many addresses to wait for.
const EXPECT_ENV: &str = "INTROSPECT_BENCH_EXPECT";
/// The environment variable that turns this binary into a process of the fleet's
/// listeners: how many to bind (see [`listener_process`]).
const LISTEN_ENV: &str = "INTROSPECT_BENCH_LISTEN";
/// Listeners per process at most: a process's open files are limited (20,000 here, and
/// not to be raised), and each listener and each connection accepted on it is one.
const LISTENERS_PER_PROCESS: usize = 4_000;

fn main() {
    if let Some(count) = std::env::var(LISTEN_ENV).ok().and_then(|n| n.parse().ok()) {
        std::process::exit(listener_process(count));
    }
    if let Ok(registry) = std::env::var(CONSUMER_ENV) {
        let expect: usize = std::env::var(EXPECT_ENV)
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(INSTANCES);
        std::process::exit(introspect_consumer(&registry, expect));
    }
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str, default: usize| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let rounds = value("--rounds", ROUNDS);
    let instances = value("--instances", INSTANCES);
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned();
    // Run without `--bench` (`cargo test --benches`): a smoke test of the set-up only.
    let smoke = !args.iter().any(|a| a == "--bench");
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    let registry = args
        .iter()
        .position(|a| a == "--registry")
        .and_then(|i| args.get(i + 1))
        .map_or("zookeeper", String::as_str);
    runtime.block_on(run(
        rounds,
        if smoke { 0 } else { instances },
        only,
        registry,
    ));
}

// ---------------------------------------------------------------------------------------
// Introspect's bench consumer (this binary re-executed).

/// Introspect's consumer: connects to `registry`, prints `STARTED`, subscribes to
/// [`INTERFACE`] through the mapping and waits until the subscription's set holds `expect`
/// endpoints, then prints the `BENCH` line. Returns the exit status.
fn introspect_consumer(registry: &str, expect: usize) -> i32 {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let backend = introspect::backend::connect(registry)
            .await
            .unwrap_or_else(|e| panic!("connect to {registry}: {e}"));
        let resolver = Resolver::new(backend);
        let startup = process_age_ms();
        let before = rss_kb();
        println!("STARTED startup_ms={startup} rss_kb={before}");
        let started = Instant::now();
        let mut subscription = resolver
            .subscribe(Subscription::new(INTERFACE))
            .await
            .unwrap_or_else(|e| panic!("subscribe: {e}"));
        let deadline = started + Duration::from_secs(WAIT_SECONDS);
        let mut seen = subscription.current().len();
        while seen < expect {
            match tokio::time::timeout_at(deadline.into(), subscription.changed()).await {
                Ok(Ok(set)) => seen = set.len(),
                Ok(Err(e)) => panic!("the subscription ended: {e}"),
                Err(_) => break,
            }
        }
        let elapsed = started.elapsed().as_millis();
        let after = rss_kb();
        let fetches = resolver.stats().await.metadata_fetches;
        println!(
            "BENCH addresses={seen} elapsed_ms={elapsed} rss_before_kb={before} \
             rss_after_kb={after} startup_ms={startup} metadata_fetches={fetches}"
        );
        i32::from(seen < expect)
    })
}

/// This process's resident set (VmRSS of `/proc/self/status`) in KiB, 0 if unknown.
fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status.lines().find_map(|line| {
                line.strip_prefix("VmRSS:")
                    .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse().ok())
            })
        })
        .unwrap_or(0)
}

/// Milliseconds since this process started (its start time in `/proc/self/stat` against the
/// system's uptime), 0 if unknown.
fn process_age_ms() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name (which may hold spaces), in brackets.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks: f64 = fields.get(19).and_then(|t| t.parse().ok()).unwrap_or(0.0);
    let uptime: f64 = std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|u| u.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0);
    // USER_HZ is 100 on Linux.
    let age = uptime - ticks / 100.0;
    if ticks > 0.0 && age > 0.0 {
        (age * 1000.0) as u64
    } else {
        0
    }
}

// ---------------------------------------------------------------------------------------
// The rig.

/// The 10 MetadataService servers and the fleet on a ZooKeeper.
struct Fleet {
    servers: Vec<Provider>,
    /// The processes listening at every instance's address.
    _everywhere: Everywhere,
    /// Kept open while the fleet is used: the providers' registrations live in its session.
    _backend: Backend,
    /// What wrote the copies (a plain ZooKeeper session; Nacos clients, whose instances
    /// live with them), kept open while the fleet is used.
    _writers: Vec<Box<dyn std::any::Any + Send>>,
}

impl Fleet {
    /// Metadata calls the servers answered so far.
    fn served(&self) -> u64 {
        self.servers.iter().map(|s| s.exported().served()).sum()
    }
}

/// A process of the fleet's listeners (this binary re-executed): binds `count` listeners
/// ([`bind_everywhere`]), serves a real MetadataService on all of them, prints
/// `PORTS p1,p2,…` and serves until its standard input closes (its parent is gone).
fn listener_process(count: usize) -> i32 {
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let (ports, listeners) = bind_everywhere(count);
        let store: std::sync::Arc<dyn introspect::Store> =
            std::sync::Arc::new(introspect::MemoryStore::new());
        let provider = Provider::builder("bench-listeners", Backend::from(store))
            .serve_metadata_on("127.0.0.1:0".parse().expect("an address"))
            .export(ServiceInfo::new(INTERFACE))
            .start()
            .await
            .unwrap_or_else(|e| panic!("the listeners' service: {e}"));
        let _serving = serve_everywhere(listeners, provider.metadata_service());
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        println!("PORTS {}", ports.join(","));
        let _ = tokio::task::spawn_blocking(|| {
            let mut rest = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut rest);
        })
        .await;
        0
    })
}

/// The fleet's listeners, in processes of their own ([`LISTENERS_PER_PROCESS`] each at
/// most); they stop when this is dropped.
struct Everywhere {
    children: Vec<std::process::Child>,
}

impl Everywhere {
    /// Starts processes listening at `count` addresses in all; their ports.
    fn start(count: usize) -> (Everywhere, Vec<u16>) {
        let mut children = Vec::new();
        let mut ports = Vec::with_capacity(count);
        let mut left = count;
        while left > 0 {
            let here = left.min(LISTENERS_PER_PROCESS);
            left -= here;
            let mut child = Command::new(std::env::current_exe().expect("this binary"))
                .env(LISTEN_ENV, here.to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("a listener process");
            let mut line = String::new();
            BufReader::new(child.stdout.take().expect("piped"))
                .read_line(&mut line)
                .expect("the listener process's ports");
            let listed = line
                .trim()
                .strip_prefix("PORTS ")
                .unwrap_or_else(|| panic!("a listener process said {line:?}"));
            ports.extend(listed.split(',').map(|p| p.parse::<u16>().expect("a port")));
            children.push(child);
        }
        (Everywhere { children }, ports)
    }
}

impl Drop for Everywhere {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Listeners on every interface, bound, not serving yet.
type Listeners = Vec<tokio_stream::wrappers::TcpListenerStream>;

/// Binds `count` listeners on every interface, each on a port the system picks: the
/// instances' addresses, so that every address of the fleet answers as a real provider's
/// does (a consumer that connects to each, as Dubbo Java does, connects as it would in
/// production, not into a refused port). Served by [`serve_everywhere`].
fn bind_everywhere(count: usize) -> (Vec<u16>, Listeners) {
    let mut ports = Vec::with_capacity(count);
    let mut listeners = Vec::with_capacity(count);
    for _ in 0..count {
        let listener = std::net::TcpListener::bind("0.0.0.0:0").unwrap_or_else(|e| {
            panic!(
                "listener {} of {count}: {e} (raise `ulimit -n` for large fleets)",
                ports.len()
            )
        });
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        ports.push(listener.local_addr().expect("a bound listener").port());
        let listener = tokio::net::TcpListener::from_std(listener).expect("a tokio listener");
        listeners.push(tokio_stream::wrappers::TcpListenerStream::new(listener));
    }
    (ports, listeners)
}

/// Serves gRPC (`service`, a real provider's MetadataService) on every listener.
fn serve_everywhere(
    listeners: Listeners,
    service: MetadataServiceV2Server<MetadataServer>,
) -> tokio::task::JoinHandle<()> {
    let incoming = futures::stream::select_all(listeners);
    tokio::spawn(async move {
        let served = tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(incoming)
            .await;
        if let Err(e) = served {
            eprintln!("the fleet's listeners stopped: {e}");
        }
    })
}

/// Starts the servers, writes the fleet of `instances` records, every one at an address
/// that listens, and waits until the registry lists it and the mapping names the app.
async fn fleet(registry: &Registry, instances: usize) -> Fleet {
    let backend = introspect::backend::connect(&registry.url())
        .await
        .unwrap_or_else(|e| panic!("connect to the benchmark {}: {e}", registry.name()));
    let (everywhere, ports) = Everywhere::start(instances.max(REVISIONS));
    let mut servers = Vec::new();
    let mut templates: Vec<ServiceInstance> = Vec::new();
    for (variant, &service_port) in ports.iter().enumerate().take(REVISIONS) {
        let mut greeter = ServiceInfo::new(INTERFACE);
        greeter
            .params
            .insert("variant".to_owned(), variant.to_string());
        let provider = Provider::builder(APP, backend.clone())
            .host("127.0.0.1")
            .port(service_port)
            // On every interface: Dubbo Java dials a 127.0.0.1 it is given at the machine's
            // own address (`NetUtils.filterLocalHost`) unless it finds no other.
            .serve_metadata_on("0.0.0.0:0".parse().expect("an address"))
            // On ZooKeeper the session timeout asked for (the test server grants 4 s).
            .lease_ttl(Duration::from_secs(4))
            .export(greeter)
            .start()
            .await
            .unwrap_or_else(|e| panic!("MetadataService server {variant}: {e}"));
        templates.push(provider.instance().await);
        servers.push(provider);
    }
    let copies: Vec<ServiceInstance> = (REVISIONS..instances.max(REVISIONS))
        .map(|i| synthetic_on(&templates[i % REVISIONS], ports[i]))
        .collect();
    let writers = registry.write(&copies).await;
    let limits = Limits::default();
    let expected = instances.max(REVISIONS);
    let started = Instant::now();
    loop {
        let listed = backend
            .instances()
            .list(APP, InstanceRead::new(&limits))
            .await
            .map_or(0, |list| list.instances.len());
        let mapped = backend
            .mapping()
            .get(INTERFACE, &limits)
            .await
            .is_ok_and(|apps| apps.contains(APP));
        if listed == expected && mapped {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the fleet is not in place: {listed} of {expected} listed, mapping written: {mapped}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Fleet {
        servers,
        _everywhere: everywhere,
        _backend: backend,
        _writers: writers,
    }
}

/// The registry the fleet is written to and the consumers read.
enum Registry {
    ZooKeeper(ZooKeeperServer),
    #[cfg(feature = "nacos")]
    Nacos(nacos_server::NacosServer),
}

impl Registry {
    /// Starts a throwaway `name` (`zookeeper`, `nacos`); `None` when it is not installed
    /// (or, for Nacos, this bench was built without the `nacos` feature), saying so.
    async fn start(name: &str) -> Option<Registry> {
        match name {
            "zookeeper" => ZooKeeperServer::start().await.map(Registry::ZooKeeper),
            #[cfg(feature = "nacos")]
            "nacos" => nacos_server::NacosServer::start()
                .await
                .map(Registry::Nacos),
            other => {
                println!(
                    "interop bench: no registry {other:?} here (zookeeper; nacos with --features nacos)"
                );
                None
            }
        }
    }

    fn name(&self) -> &'static str {
        match self {
            Registry::ZooKeeper(_) => "ZooKeeper",
            #[cfg(feature = "nacos")]
            Registry::Nacos(_) => "Nacos",
        }
    }

    fn url(&self) -> String {
        match self {
            Registry::ZooKeeper(server) => server.url(),
            #[cfg(feature = "nacos")]
            Registry::Nacos(server) => server.url(),
        }
    }

    /// Writes `records` (instances of [`APP`]) as Dubbo writes them, the quickest way: on
    /// ZooKeeper plain persistent znodes, pipelined; on Nacos batch registrations
    /// (`batchRegisterInstance`) of 500 instances, each batch on a client of its own (a
    /// Nacos client holds one registration per service). Returns what must stay open.
    async fn write(&self, records: &[ServiceInstance]) -> Vec<Box<dyn std::any::Any + Send>> {
        match self {
            Registry::ZooKeeper(server) => {
                let client = zk::Client::connector()
                    .with_session_timeout(Duration::from_secs(4))
                    .connect(&server.address())
                    .await
                    .unwrap_or_else(|e| panic!("a plain session on the benchmark ZooKeeper: {e}"));
                let paths = Paths::default();
                let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
                for chunk in records.chunks(PIPELINE) {
                    let written: Vec<(String, Vec<u8>)> = chunk
                        .iter()
                        .map(|r| (paths.instance(APP, &r.key_address()), record::to_json(r, 0)))
                        .collect();
                    let creates: Vec<_> = written
                        .iter()
                        .map(|(path, data)| client.create(path, data, &options))
                        .collect();
                    for (created, (path, _)) in join_all(creates).await.into_iter().zip(&written) {
                        created.unwrap_or_else(|e| panic!("create {path}: {e}"));
                    }
                }
                vec![Box::new(client)]
            }
            #[cfg(feature = "nacos")]
            Registry::Nacos(server) => nacos_writers::write(&server.address(), records).await,
        }
    }
}

/// Batch registrations on Nacos with the SDK's own clients.
#[cfg(feature = "nacos")]
mod nacos_writers {
    use introspect::ServiceInstance;
    use introspect::backend::nacos::{names, record};
    use nacos_sdk::api::naming::{NamingService, NamingServiceBuilder};
    use nacos_sdk::api::props::ClientProps;

    use super::APP;

    /// Instances per batch registration.
    const BATCH: usize = 500;

    /// Registers `records` in batches, each on a client of its own; the clients (whose
    /// instances live with them) and their cache directory.
    pub async fn write(
        address: &str,
        records: &[ServiceInstance],
    ) -> Vec<Box<dyn std::any::Any + Send>> {
        let cache =
            tempfile::TempDir::with_prefix("introspect-ibench-nacos-").expect("a temporary dir");
        let mut kept: Vec<Box<dyn std::any::Any + Send>> = Vec::new();
        for (n, chunk) in records.chunks(BATCH).enumerate() {
            let name = format!("bench-fleet-{n}");
            let props = ClientProps::new()
                .server_addr(address)
                .env_first(false)
                .load_cache_at_start(false)
                .cache_dir(cache.path().join(&name))
                .app_name(&name);
            let client: NamingService = NamingServiceBuilder::new(props)
                .build()
                .await
                .unwrap_or_else(|e| panic!("a naming client on the benchmark Nacos: {e}"));
            client
                .batch_register_instance(
                    names::service_name(APP),
                    Some(names::DEFAULT_GROUP.to_owned()),
                    chunk.iter().map(record::to_nacos).collect(),
                )
                .await
                .unwrap_or_else(|e| panic!("batch registration on Nacos: {e}"));
            kept.push(Box::new(client));
        }
        kept.push(Box::new(cache));
        kept
    }
}

// ---------------------------------------------------------------------------------------
// The consumers.

/// One of the three consumers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Consumer {
    Introspect,
    Java,
    Go,
}

impl Consumer {
    const ALL: [Consumer; 3] = [Consumer::Introspect, Consumer::Java, Consumer::Go];

    /// Its name for `--only`: `introspect`, `java`, `go`.
    fn name(self) -> &'static str {
        match self {
            Consumer::Introspect => "introspect",
            Consumer::Java => "java",
            Consumer::Go => "go",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Consumer::Introspect => "Introspect",
            Consumer::Java => "Dubbo Java 3.3.4",
            Consumer::Go => "dubbo-go 3.3.2",
        }
    }

    /// The peer's directory under the interop dir (as the interop tests find it).
    fn peer_dir(self) -> Option<PathBuf> {
        let name = match self {
            Consumer::Introspect => return None,
            Consumer::Java => "dubbo-java",
            Consumer::Go => "dubbo-go",
        };
        Some(interop_dir().join(name))
    }

    /// Why it cannot run here, if it cannot.
    fn missing(self) -> Option<String> {
        let dir = self.peer_dir()?;
        let built = match self {
            Consumer::Java => dir.join("peer.jar").is_file() && dir.join("lib").is_dir(),
            _ => dir.join("dubbo-go-peer").is_file(),
        };
        if !built {
            return Some(format!(
                "not built at {} (run scripts/setup.sh --with-interop)",
                dir.display()
            ));
        }
        if self == Consumer::Java && Command::new("java").arg("-version").output().is_err() {
            return Some("no `java` on PATH (run scripts/setup.sh --with-interop)".to_owned());
        }
        None
    }

    /// The consumer's command, as `app`, against `registry`, waiting for `expect`
    /// addresses; its files go to `logs`.
    fn command(self, registry: &str, expect: usize, logs: &Path) -> Command {
        let app = "bench-consumer";
        let mut command = match self {
            Consumer::Introspect => {
                let mut me = Command::new(std::env::current_exe().expect("this binary"));
                me.env(CONSUMER_ENV, registry)
                    .env(EXPECT_ENV, expect.to_string());
                return me;
            }
            Consumer::Java => {
                // As the interop tests run it (`tests/it/support/peers.rs`), but for the
                // network interfaces: the tests ignore every one so that a provider
                // registers 127.0.0.1, and then Dubbo looks for its own address anew (and
                // logs a stack trace) for every client it makes, one per address. A
                // consumer registers nothing, so it runs as Dubbo runs by default, and
                // dials the records' 127.0.0.1 at the machine's own address (which the
                // MetadataService servers listen on too).
                let dir = self.peer_dir().expect("a peer");
                let mut java = Command::new("java");
                java.arg("-XX:TieredStopAtLevel=1")
                    .arg("-Xmx256m")
                    .arg("-Ddubbo.application.logger=jdk")
                    .arg("-cp")
                    .arg(format!(
                        "{}:{}/*",
                        dir.join("peer.jar").display(),
                        dir.join("lib").display()
                    ))
                    .arg("introspect.interop.Peer");
                java
            }
            Consumer::Go => {
                let dir = self.peer_dir().expect("a peer");
                let mut go = Command::new(dir.join("dubbo-go-peer"));
                go.env("DUBBO_IP_TO_REGISTRY", "127.0.0.1");
                go
            }
        };
        command
            .arg("bench")
            .args(["--registry", registry, "--app", app])
            .args(["--expect", &expect.to_string()])
            .args(["--wait-seconds", &WAIT_SECONDS.to_string()])
            .current_dir(logs);
        // Every address listens (see `bind_everywhere`): Dubbo Java connects to each at its
        // default connect timeout, as in production.
        command
    }
}

/// Where the built peers are linked (as `tests/it/support/peers.rs` finds them).
fn interop_dir() -> PathBuf {
    std::env::var_os("INTROSPECT_INTEROP_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("target/interop"),
        PathBuf::from,
    )
}

/// The 1-minute load average.
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// A consumer's log directory: removed after the run, or kept
/// (`INTROSPECT_BENCH_KEEP_LOGS`).
enum LogDir {
    Temporary(TempDir),
    Kept(PathBuf),
}

impl LogDir {
    fn path(&self) -> &Path {
        match self {
            LogDir::Temporary(dir) => dir.path(),
            LogDir::Kept(path) => path,
        }
    }
}

/// What one consumer run measured.
#[derive(Clone, Debug)]
struct Run {
    addresses: u64,
    /// Subscribe to all addresses, the consumer's own measure.
    elapsed_ms: u64,
    rss_before_kb: u64,
    rss_after_kb: u64,
    /// Spawn to `STARTED`, as seen here.
    startup_ms: u64,
    /// Metadata calls the servers answered during the run.
    metadata_calls: u64,
    /// The 1-minute load average when it held every address.
    load: f64,
}

/// Runs `consumer` once against `registry` and reads its figures; the metadata calls are
/// counted at `fleet`'s servers.
fn run_once(consumer: Consumer, registry: &str, expect: usize, fleet: &Fleet) -> Run {
    let logs = TempDir::with_prefix("introspect-ibench-").expect("a temporary dir");
    if std::env::var_os("INTROSPECT_BENCH_KEEP_LOGS").is_some() {
        println!("{} logs: {}", consumer.label(), logs.path().display());
    }
    let stderr = std::fs::File::create(logs.path().join("stderr")).expect("a log file");
    let calls_before = fleet.served();
    let spawned = Instant::now();
    let mut child = consumer
        .command(registry, expect, logs.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the {} consumer: {e}", consumer.label()));
    let stdout = child.stdout.take().expect("piped");
    let (lines_tx, lines) = mpsc::channel::<(Instant, String)>();
    let mut copy = std::fs::File::create(logs.path().join("stdout")).expect("a log file");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let at = Instant::now();
            let _ = writeln!(copy, "{line}");
            // The rest of its output is still copied once the run is read.
            let _ = lines_tx.send((at, line));
        }
    });
    let mut startup = None;
    let mut bench = None;
    let mut load = 0.0;
    while bench.is_none() {
        let left = RUN_DEADLINE.saturating_sub(spawned.elapsed());
        match lines.recv_timeout(left) {
            Ok((at, line)) => {
                if line.starts_with("STARTED ") {
                    startup = Some(at - spawned);
                } else if let Some(fields) = line.strip_prefix("BENCH ") {
                    load = load_average();
                    bench = Some(fields.to_owned());
                }
            }
            Err(_) => break,
        }
    }
    // Its metadata calls are all made once it exits (a retry after the last address, say).
    let exited = loop {
        if let Some(status) = child.try_wait().expect("wait for the consumer") {
            break Some(status);
        }
        if spawned.elapsed() > RUN_DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let metadata_calls = fleet.served() - calls_before;
    let logs = if std::env::var_os("INTROSPECT_BENCH_KEEP_LOGS").is_some() {
        LogDir::Kept(logs.keep())
    } else {
        LogDir::Temporary(logs)
    };
    let Some(fields) = bench else {
        let errors = std::fs::read_to_string(logs.path().join("stderr")).unwrap_or_default();
        let tail: Vec<&str> = errors.lines().rev().take(40).collect();
        panic!(
            "the {} consumer printed no BENCH line (exit: {exited:?}); last of its stderr:\n{}",
            consumer.label(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    };
    let field = |name: &str| -> u64 {
        fields
            .split(' ')
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    Run {
        addresses: field("addresses"),
        elapsed_ms: field("elapsed_ms"),
        rss_before_kb: field("rss_before_kb"),
        rss_after_kb: field("rss_after_kb"),
        startup_ms: startup.map_or(0, |s| s.as_millis() as u64),
        metadata_calls,
        load,
    }
}

// ---------------------------------------------------------------------------------------
// The run and the table.

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

async fn run(rounds: usize, instances: usize, only: Option<String>, registry_name: &str) {
    let Some(server) = Registry::start(registry_name).await else {
        println!(
            "interop bench: skipped, {registry_name} not installed (scripts/setup.sh \
             --with-zookeeper --with-nacos)"
        );
        return;
    };
    let smoke = instances == 0;
    let instances = if smoke { REVISIONS } else { instances };
    let fleet = fleet(&server, instances).await;
    let registry = server.url();
    let registry_label = server.name();
    let mut consumers = Vec::new();
    for consumer in Consumer::ALL {
        if only.as_deref().is_some_and(|name| name != consumer.name()) {
            continue;
        }
        match consumer.missing() {
            Some(why) => println!("{}: skipped, {why}", consumer.label()),
            None => consumers.push(consumer),
        }
    }
    if smoke {
        // Only the set-up and Introspect's consumer process, quickly.
        let run = tokio::task::block_in_place(|| {
            run_once(Consumer::Introspect, &registry, instances, &fleet)
        });
        assert_eq!(run.addresses, instances as u64);
        println!("interop bench: smoke test passed (pass --bench to measure)");
        return;
    }
    println!(
        "interop bench: {instances} instances in {REVISIONS} revisions on {registry_label}, \
         {rounds} rounds, load average {:.2} before the first",
        load_average()
    );
    let mut runs: Vec<(Consumer, Run)> = Vec::new();
    for round in 0..rounds {
        // Each round starts with another consumer, so that none always runs first.
        let mut order = consumers.clone();
        order.rotate_left(round % consumers.len().max(1));
        for &consumer in &order {
            let registry = registry.clone();
            let fleet = &fleet;
            let run =
                tokio::task::block_in_place(|| run_once(consumer, &registry, instances, fleet));
            println!(
                "round {}: {:<18} {} addresses in {} ms, {} metadata calls, RSS {} -> {} KiB, \
                 start-up {} ms, load {:.2}",
                round + 1,
                consumer.label(),
                run.addresses,
                run.elapsed_ms,
                run.metadata_calls,
                run.rss_before_kb,
                run.rss_after_kb,
                run.startup_ms,
                run.load
            );
            assert_eq!(
                run.addresses,
                instances as u64,
                "{} did not hold every address",
                consumer.label()
            );
            runs.push((consumer, run));
        }
    }
    table(&consumers, &runs, instances, rounds, registry_label);
    drop(fleet);
    drop(server);
}

/// Prints the medians of every consumer and their ratios to Introspect's, as Markdown.
fn table(
    consumers: &[Consumer],
    runs: &[(Consumer, Run)],
    instances: usize,
    rounds: usize,
    registry: &str,
) {
    let of = |consumer: Consumer, f: &dyn Fn(&Run) -> f64| {
        median(
            runs.iter()
                .filter(|(c, _)| *c == consumer)
                .map(|(_, r)| f(r))
                .collect(),
        )
    };
    let elapsed = |r: &Run| r.elapsed_ms as f64;
    let calls = |r: &Run| r.metadata_calls as f64;
    let growth = |r: &Run| (r.rss_after_kb as f64 - r.rss_before_kb as f64) / 1024.0;
    let before = |r: &Run| r.rss_before_kb as f64 / 1024.0;
    let startup = |r: &Run| r.startup_ms as f64;
    let ours = (
        of(Consumer::Introspect, &elapsed),
        of(Consumer::Introspect, &calls),
        of(Consumer::Introspect, &growth),
    );
    let loads: Vec<f64> = runs.iter().map(|(_, r)| r.load).collect();
    let load_max = loads.iter().copied().fold(0.0, f64::max);
    println!();
    println!(
        "Cold subscribe to {instances} instances in {REVISIONS} revisions on {registry}, medians \
         of {rounds} rounds (load average {:.2} to {load_max:.2} during the runs):",
        loads.iter().copied().fold(f64::INFINITY, f64::min)
    );
    println!();
    println!(
        "| Consumer | Time to all {instances} addresses | Metadata calls | RSS growth | RSS \
         before subscribing | Start-up (not counted) |"
    );
    println!("|---|---|---|---|---|---|");
    for &consumer in consumers {
        let (t, c, g) = (
            of(consumer, &elapsed),
            of(consumer, &calls),
            of(consumer, &growth),
        );
        let ratio = |theirs: f64, ours: f64| {
            if consumer == Consumer::Introspect || ours.is_nan() || ours <= 0.0 {
                String::new()
            } else {
                format!(" ({:.1}×)", theirs / ours)
            }
        };
        println!(
            "| {} | {t:.0} ms{} | {c:.0}{} | {g:.1} MiB{} | {:.1} MiB | {:.0} ms |",
            consumer.label(),
            ratio(t, ours.0),
            ratio(c, ours.1),
            ratio(g, ours.2),
            of(consumer, &before),
            of(consumer, &startup),
        );
    }
    println!();
    println!("(×: the peer's median over Introspect's, measured in this run.)");
}
