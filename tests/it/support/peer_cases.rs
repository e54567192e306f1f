//! The interop cases, the same for every real peer and registry: a Rust consumer calling
//! a peer's provider, a peer's consumer calling a Rust provider, and what each side wrote
//! into the registry (compared with the golden records in `tests/it/data/`).

#[cfg(feature = "nacos")]
use introspect::backend::{ConfigKey, ConfigWrite};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use introspect::backend::InstanceRead;
use introspect::consumer::SubscriptionHandle;
use introspect::store::EtcdStore;
use introspect::{Backend, Limits, ResolverStats, Store, Subscription};
use serde_json::Value;

use super::etcd::EtcdServer;
use super::greeter::pb::HelloRequest;
use super::greeter::pb::greeter_client::GreeterClient;
use super::greeter::{GreeterNode, start_greeter, start_greeter_on};
#[cfg(feature = "nacos")]
use super::nacos::NacosServer;
use super::peers::{BuiltPeer, ConsumerRun, Peer, PeerProvider, etcd_registry};
use super::wait::eventually;
#[cfg(feature = "zookeeper")]
use super::zookeeper::{ZooKeeperServer, create_with_parents, raw_client};
#[cfg(feature = "nacos")]
use introspect::backend::config::DEFAULT_GROUP;

/// The interface every side exports or calls.
pub const INTERFACE: &str = "helloworld.Greeter";
/// Calls each case makes once discovery is done.
pub const CALLS: u64 = 50;

/// A real registry server that peers and Rust share: its URL for the peers, a backend for
/// Rust, and a way to read back everything written into it (for the golden records).
pub struct PeerRegistry {
    /// The registry's name, also the directory of its golden records under `tests/it/data/`.
    pub kind: &'static str,
    /// The Dubbo registry URL the peers take.
    pub url: String,
    /// A Rust backend on it.
    pub backend: Backend,
    server: Server,
}

enum Server {
    Etcd {
        _server: EtcdServer,
        store: Arc<dyn Store>,
    },
    #[cfg(feature = "zookeeper")]
    ZooKeeper {
        _server: ZooKeeperServer,
        raw: zookeeper_client::Client,
    },
    #[cfg(feature = "nacos")]
    Nacos { server: NacosServer },
}

impl PeerRegistry {
    /// A fresh etcd (`None` where none can start, as [`EtcdServer::start`]).
    pub async fn etcd() -> Option<PeerRegistry> {
        let server = EtcdServer::start().await?;
        let store: Arc<dyn Store> = Arc::new(EtcdStore::connect(server.options()).await.unwrap());
        Some(PeerRegistry {
            kind: "etcd",
            url: etcd_registry(&server.endpoint()),
            backend: store.clone().into(),
            server: Server::Etcd {
                _server: server,
                store,
            },
        })
    }

    /// A fresh ZooKeeper.
    #[cfg(feature = "zookeeper")]
    pub async fn zookeeper() -> Option<PeerRegistry> {
        let server = ZooKeeperServer::start().await?;
        let raw = raw_client(&server).await;
        Some(PeerRegistry {
            kind: "zookeeper",
            url: server.url(),
            backend: server.backend().await,
            server: Server::ZooKeeper {
                _server: server,
                raw,
            },
        })
    }

    /// A fresh Nacos (rnacos).
    #[cfg(feature = "nacos")]
    pub async fn nacos() -> Option<PeerRegistry> {
        let server = NacosServer::start().await?;
        Some(PeerRegistry {
            kind: "nacos",
            url: server.url(),
            backend: server.backend().await,
            server: Server::Nacos { server },
        })
    }

    /// The etcd store, on etcd.
    pub fn store(&self) -> Option<&Arc<dyn Store>> {
        match &self.server {
            Server::Etcd { store, .. } => Some(store),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// Starts a Rust Greeter provider of `app` registered through this registry's backend.
    pub async fn start_rust_greeter(&self, app: &str) -> GreeterNode {
        match &self.server {
            Server::Etcd { store, .. } => {
                start_greeter(store, app, Duration::from_millis(200)).await
            }
            // On ZooKeeper the TTL is the session timeout asked for (the test server grants
            // at most 4 s); Nacos's instances live as long as the gRPC connection.
            #[allow(unreachable_patterns)]
            _ => {
                start_greeter_on(
                    self.backend.clone(),
                    app,
                    Duration::from_secs(4),
                    Duration::from_millis(200),
                )
                .await
            }
        }
    }

    /// Waits until `app` lists an instance at `127.0.0.1:port`.
    pub async fn wait_for_instance(&self, app: &str, port: u16, what: &str) {
        let address = format!("127.0.0.1:{port}");
        let limits = Limits::default();
        eventually(Duration::from_secs(30), what, || async {
            self.backend
                .instances()
                .list(app, InstanceRead::new(&limits))
                .await
                .is_ok_and(|list| list.instances.contains_key(&address))
        })
        .await;
    }

    /// Waits until the mapping of [`INTERFACE`] names `app`.
    pub async fn wait_for_mapping(&self, app: &str) {
        let limits = Limits::default();
        eventually(
            Duration::from_secs(30),
            "the mapping to name the app",
            || async {
                self.backend
                    .mapping()
                    .get(INTERFACE, &limits)
                    .await
                    .is_ok_and(|apps| apps.contains(app))
            },
        )
        .await;
    }

    /// Writes a governance rule where a Dubbo consumer whose config centre is this registry
    /// reads it, created or replaced with `text`: on ZooKeeper the node
    /// `/dubbo/config/dubbo/{key}` (the default namespace and group), written raw; on Nacos
    /// the config `dataId={key}` in group `dubbo` of the registry's namespace (where Java's
    /// `NacosDynamicConfiguration` reads it), written through the backend's config part.
    /// Only ZooKeeper and Nacos are supported.
    #[cfg(any(feature = "zookeeper", feature = "nacos"))]
    pub async fn put_rule(&self, key: &str, text: &str) {
        match &self.server {
            #[cfg(feature = "zookeeper")]
            Server::ZooKeeper { raw, .. } => {
                let path = format!("/dubbo/config/dubbo/{key}");
                match raw.set_data(&path, text.as_bytes(), None).await {
                    Ok(_) => {}
                    Err(zookeeper_client::Error::NoNode) => {
                        create_with_parents(raw, &path, text.as_bytes()).await;
                    }
                    Err(e) => panic!("write the rule {path}: {e}"),
                }
            }
            #[cfg(feature = "nacos")]
            Server::Nacos { .. } => {
                let config = self.backend.config();
                let current = config
                    .get(&ConfigKey::new(key, DEFAULT_GROUP).unwrap())
                    .await
                    .unwrap_or_else(|e| panic!("read the rule {key}: {e}"));
                // The one writer of its rules: a conflict here is a defect of the test.
                config
                    .put(
                        &ConfigKey::new(key, DEFAULT_GROUP).unwrap(),
                        ConfigWrite::new(text, current.as_ref().map(|item| &item.version)),
                    )
                    .await
                    .unwrap_or_else(|e| panic!("write the rule {key}: {e}"));
            }
            #[allow(unreachable_patterns)]
            _ => panic!(
                "governance rules are written on ZooKeeper and Nacos only, not {}",
                self.kind
            ),
        }
    }

    /// Removes the governance rule `key` written by [`put_rule`](Self::put_rule), if any.
    #[cfg(any(feature = "zookeeper", feature = "nacos"))]
    pub async fn delete_rule(&self, key: &str) {
        match &self.server {
            #[cfg(feature = "zookeeper")]
            Server::ZooKeeper { raw, .. } => {
                let path = format!("/dubbo/config/dubbo/{key}");
                match raw.delete(&path, None).await {
                    Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
                    Err(e) => panic!("delete the rule {path}: {e}"),
                }
            }
            #[cfg(feature = "nacos")]
            Server::Nacos { .. } => {
                let config = self.backend.config();
                let current = config
                    .get(&ConfigKey::new(key, DEFAULT_GROUP).unwrap())
                    .await
                    .unwrap_or_else(|e| panic!("read the rule {key}: {e}"));
                if let Some(item) = current {
                    config
                        .delete(&ConfigKey::new(key, DEFAULT_GROUP).unwrap(), &item.version)
                        .await
                        .unwrap_or_else(|e| panic!("delete the rule {key}: {e}"));
                }
            }
            #[allow(unreachable_patterns)]
            _ => panic!(
                "governance rules are written on ZooKeeper and Nacos only, not {}",
                self.kind
            ),
        }
    }

    /// Everything written into the registry, as a map from a key to its value (a JSON value
    /// where the text is JSON), with `replace`'s texts (ports, revisions of this run) replaced
    /// by their names so that runs compare equal:
    ///
    /// * etcd: every key;
    /// * ZooKeeper: every znode but `/zookeeper`'s, by path (a node without data as `""`);
    /// * Nacos: `naming/{group}/{service}/{ip}:{port}`, what an instance was registered with
    ///   (its metadata, weight, flags, cluster), for every service of `DEFAULT_GROUP`; and
    ///   `config/{group}/{dataId}`, every config of the public namespace.
    pub async fn dump(&self, replace: &[(String, &str)]) -> BTreeMap<String, Value> {
        let mut raw: Vec<(String, String)> = Vec::new();
        match &self.server {
            Server::Etcd { store, .. } => {
                let range = store.get_prefix("/").await.expect("store answers");
                for kv in range.kvs {
                    raw.push((kv.key, String::from_utf8_lossy(&kv.value).into_owned()));
                }
            }
            #[cfg(feature = "zookeeper")]
            Server::ZooKeeper { raw: client, .. } => {
                let mut pending = vec!["/".to_owned()];
                while let Some(path) = pending.pop() {
                    let children = client.list_children(&path).await.unwrap_or_default();
                    for child in children {
                        let child = if path == "/" {
                            format!("/{child}")
                        } else {
                            format!("{path}/{child}")
                        };
                        if child == "/zookeeper" {
                            continue;
                        }
                        if let Ok((data, _)) = client.get_data(&child).await {
                            raw.push((child.clone(), String::from_utf8_lossy(&data).into_owned()));
                        }
                        pending.push(child);
                    }
                }
            }
            #[cfg(feature = "nacos")]
            Server::Nacos { server } => {
                const GROUP: &str = "DEFAULT_GROUP";
                for service in server.services_http(GROUP).await {
                    let listed = server.instances_http(GROUP, &service).await;
                    for host in listed["hosts"].as_array().cloned().unwrap_or_default() {
                        let mut record = serde_json::Map::new();
                        for field in ["weight", "healthy", "enabled", "ephemeral", "clusterName"] {
                            record.insert(field.into(), host[field].clone());
                        }
                        record.insert("metadata".into(), host["metadata"].clone());
                        let key = format!(
                            "naming/{GROUP}/{service}/{}:{}",
                            host["ip"].as_str().unwrap_or_default(),
                            host["port"]
                        );
                        raw.push((key, Value::Object(record).to_string()));
                    }
                }
                for (group, data_id, content) in server.configs_http().await {
                    raw.push((format!("config/{group}/{data_id}"), content));
                }
            }
        }
        let mut keys = BTreeMap::new();
        for (key, text) in raw {
            let value = serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text));
            keys.insert(replace_all(&key, replace), value);
        }
        keys
    }
}

/// The replacements that make a dump of this run compare with another's: ports and the
/// given revisions by their names.
pub fn run_names(ports: &[(u16, &'static str)]) -> Vec<(String, &'static str)> {
    ports.iter().map(|(p, n)| (p.to_string(), *n)).collect()
}

fn replace_all(text: &str, replace: &[(String, &str)]) -> String {
    let mut text = text.to_owned();
    for (from, name) in replace {
        text = text.replace(from.as_str(), &format!("{{{name}}}"));
    }
    text
}

/// What a Rust consumer's calls through the balanced channel gave.
pub struct Calls {
    /// Calls answered.
    pub ok: u64,
    /// Calls failed (each error listed in `errors`).
    pub failed: u64,
    /// The last answer.
    pub message: String,
    /// The errors seen.
    pub errors: Vec<String>,
}

/// Waits until the subscription holds at least one endpoint.
pub async fn wait_for_endpoints(subscription: &SubscriptionHandle, what: &str) {
    eventually(Duration::from_secs(30), what, || {
        let found = !subscription.current().is_empty();
        async move { found }
    })
    .await;
}

/// Makes `calls` calls of `SayHello` through a balanced channel over `subscription`.
pub async fn call_through(
    resolver: &introspect::Resolver,
    subscription: &SubscriptionHandle,
    calls: u64,
) -> Calls {
    let (channel, _handle) = resolver.balanced_channel(subscription).unwrap();
    let mut client = GreeterClient::new(channel);
    let mut outcome = Calls {
        ok: 0,
        failed: 0,
        message: String::new(),
        errors: Vec::new(),
    };
    for i in 0..calls {
        let mut request = tonic::Request::new(HelloRequest {
            name: format!("rust-{i}"),
        });
        request.set_timeout(Duration::from_secs(3));
        match tokio::time::timeout(Duration::from_secs(5), client.say_hello(request)).await {
            Ok(Ok(reply)) => {
                outcome.ok += 1;
                outcome.message = reply.into_inner().message;
            }
            Ok(Err(status)) => {
                outcome.failed += 1;
                outcome.errors.push(status.to_string());
            }
            Err(_) => {
                outcome.failed += 1;
                outcome.errors.push("call timed out".into());
            }
        }
    }
    outcome
}

/// Checks a Rust consumer's calls: all answered by the peer, none failed.
pub fn assert_all_answered(calls: &Calls, suffix: &str, stats: &ResolverStats) {
    assert_eq!(
        (calls.ok, calls.failed),
        (CALLS, 0),
        "calls made and failed; errors: {:?}; stats: {stats:?}",
        calls.errors
    );
    assert!(
        calls.message.ends_with(suffix),
        "answered by the peer: {:?}",
        calls.message
    );
}

/// Checks a peer consumer's run: every call answered, by the Rust provider, which counted
/// exactly the calls the peer made (its first, discovering, answer and the `CALLS` after).
pub fn assert_peer_run(run: &ConsumerRun, served: u64) {
    assert!(
        run.status.success() && (run.calls, run.ok, run.failed) == (CALLS, CALLS, 0),
        "the peer consumer's calls (made, ok, failed) = ({}, {}, {}), exit {}:\n{}",
        run.calls,
        run.ok,
        run.failed,
        run.status,
        run.output
    );
    assert!(
        run.message.starts_with("Hello ") && run.message.contains(" from 127.0.0.1:"),
        "answered by the Rust greeter: {:?}",
        run.message
    );
    assert_eq!(served, CALLS + 1, "calls the Rust provider answered");
}

/// The file of a golden record of registry `kind` (`etcd`, `zookeeper`, `nacos`).
pub fn golden_path(kind: &str, name: &str) -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/data")
        .join(kind)
        .join(name)
}

/// Compares what a peer wrote (`keys`, from [`dump`]) with its golden record `name`: the
/// same keys, and each value of the same shape (field names and JSON types, recursively,
/// also inside the JSON that metadata values hold). Values themselves (revisions,
/// timestamps, ports) may differ. `INTROSPECT_UPDATE_GOLDEN=1` rewrites the file instead.
pub fn check_golden(kind: &str, name: &str, keys: &BTreeMap<String, Value>) {
    let path = golden_path(kind, name);
    let written = serde_json::to_string_pretty(keys).unwrap() + "\n";
    if std::env::var_os("INTROSPECT_UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(&path, written).unwrap();
        eprintln!("golden record {} rewritten", path.display());
        return;
    }
    let golden: BTreeMap<String, Value> = serde_json::from_str(
        &std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("golden record {}: {e}", path.display())),
    )
    .unwrap();
    let shapes = |keys: &BTreeMap<String, Value>| -> BTreeMap<String, Value> {
        keys.iter().map(|(k, v)| (k.clone(), shape(v))).collect()
    };
    assert_eq!(
        shapes(keys),
        shapes(&golden),
        "what the peer wrote differs in shape from {} (INTROSPECT_UPDATE_GOLDEN=1 rewrites \
         it); written:\n{written}",
        path.display()
    );
}

/// The shape of a JSON value: objects keep their keys, strings holding JSON objects or
/// arrays are shaped too, other values become their type's name.
pub fn shape(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), shape(v))).collect())
        }
        Value::Array(items) => Value::Array(items.first().map(shape).into_iter().collect()),
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(inner @ (Value::Object(_) | Value::Array(_))) => {
                serde_json::json!({ "json": shape(&inner) })
            }
            _ => Value::String("string".into()),
        },
        Value::Number(_) => Value::String("number".into()),
        Value::Bool(_) => Value::String("bool".into()),
        Value::Null => Value::String("null".into()),
    }
}

/// The subscription a Rust consumer makes for a peer's provider: through the mapping, or
/// naming the app where the peer writes no mapping.
pub fn subscription(provided_by: Option<&str>) -> Subscription {
    let wanted = Subscription::new(INTERFACE);
    match provided_by {
        Some(app) => wanted.provided_by([app.to_owned()]),
        None => wanted,
    }
}

/// What [`rust_consumer_calls_peer_provider`] leaves for a peer's own checks.
pub struct ProviderCase {
    /// The peer's provider, still running.
    pub provider: PeerProvider,
    /// The endpoints the Rust consumer found.
    pub endpoints: Vec<introspect::Endpoint>,
    /// The resolver's stats after the calls.
    pub stats: ResolverStats,
}

/// A Rust consumer (resolver and balanced channel) calls `peer`'s provider of `app` on
/// `registry`: through the mapping, or naming the app where `via_mapping` is false; it finds
/// one endpoint on the Triple port, fetches the revision's metadata once, and [`CALLS`]
/// calls all succeed. A Dubbo Java revision must verify by the MD5 rule, a dubbo-go one is
/// unverifiable. What the peer wrote is checked against `{peer}-provider.json` of the
/// registry's golden records.
pub async fn rust_consumer_calls_peer_provider(
    registry: &PeerRegistry,
    peer: &BuiltPeer,
    app: &str,
    via_mapping: bool,
) -> ProviderCase {
    let provider = peer.provider(&registry.url, app).await;
    registry
        .wait_for_instance(app, provider.port, "the peer's instance record")
        .await;
    if via_mapping {
        registry.wait_for_mapping(app).await;
    }
    let resolver = introspect::Resolver::builder(registry.backend.clone()).build();
    let live = resolver
        .subscribe(subscription((!via_mapping).then_some(app)))
        .await
        .unwrap();
    wait_for_endpoints(&live, "the peer provider's endpoint").await;
    let endpoints = live.current();
    assert_eq!(endpoints.len(), 1, "{endpoints:?}");
    assert_eq!(
        (endpoints[0].port, &*endpoints[0].protocol),
        (provider.port, "tri"),
        "the endpoint is the Triple port"
    );
    let calls = call_through(&resolver, &live, CALLS).await;
    let stats = resolver.stats().await;
    assert_all_answered(&calls, peer.peer().greeting_suffix(), &stats);
    // One fetch for the one revision, over the peer's MetadataServiceV2.
    assert_eq!(
        (stats.metadata_fetches, stats.fetch_failures),
        (1, 0),
        "{stats:?}"
    );
    let checks = &stats.revision_checks.java_md5;
    match peer.peer() {
        // Checked by Java's own MD5 rule.
        Peer::Java => assert_eq!((checks.verified, checks.unverifiable), (1, 0), "{stats:?}"),
        // dubbo-go's revisions follow no rule a consumer can recompute.
        Peer::Go => assert_eq!((checks.verified, checks.unverifiable), (0, 1), "{stats:?}"),
    }

    let revision = endpoints[0].revision.to_string();
    let mut names = run_names(&[
        (provider.port, "port"),
        (provider.metadata_port, "metadata_port"),
    ]);
    names.insert(0, (revision, "revision"));
    let written: BTreeMap<String, Value> = registry
        .dump(&names)
        .await
        .into_iter()
        .filter(|(key, _)| !is_ours(key))
        .collect();
    check_golden(
        registry.kind,
        &format!("{}-provider.json", peer.peer().name()),
        &written,
    );
    ProviderCase {
        provider,
        endpoints: endpoints.to_vec(),
        stats,
    }
}

/// Whether a dumped key is Introspect's own (the registry's epoch), not a peer's.
fn is_ours(key: &str) -> bool {
    key == "/introspect" || key.starts_with("/introspect/")
}

/// `peer`'s consumer finds a Rust provider of `rust_app` registered through `registry`'s
/// backend (through the mapping, or naming the app with `provided_by`) and makes [`CALLS`]
/// successful calls, each counted by the Rust provider. What the consumer wrote (every key
/// it added or changed) is checked against `{peer}-consumer.json` of the registry's golden
/// records, and returned.
pub async fn peer_consumer_calls_rust_provider(
    registry: &PeerRegistry,
    peer: &BuiltPeer,
    rust_app: &str,
    provided_by: Option<&str>,
) -> BTreeMap<String, Value> {
    let greeter = registry.start_rust_greeter(rust_app).await;
    // A consumer reads the mapping once, when it subscribes.
    registry.wait_for_mapping(rust_app).await;
    let names = run_names(&[(greeter.address.port(), "port")]);
    let before = registry.dump(&names).await;

    let app = format!("{}-consumer", peer.peer().name());
    let run = peer
        .consumer(&registry.url, &app, CALLS as u32, provided_by)
        .await;
    assert_peer_run(&run, greeter.calls());

    let theirs: BTreeMap<String, Value> = registry
        .dump(&names)
        .await
        .into_iter()
        .filter(|(key, value)| before.get(key) != Some(value) && !is_ours(key))
        .collect();
    check_golden(
        registry.kind,
        &format!("{}-consumer.json", peer.peer().name()),
        &theirs,
    );
    greeter.shutdown().await;
    theirs
}

/// Calls the passive-health tests allow a killed endpoint to cost
/// (`passive_health::a_killed_endpoint_costs_at_most_two_calls_and_rejoins_when_it_answers`):
/// the calls in flight and the one that finds it dead before it is set aside.
pub const KILL_ALLOWANCE: u64 = 3;

/// Two of a peer's providers, and a Rust consumer calling them through the mapping.
struct TwoUnderCalls {
    providers: [PeerProvider; 2],
    resolver: introspect::Resolver,
    live: SubscriptionHandle,
    caller: super::calls::Caller,
}

/// Starts two of `peer`'s providers of `app` on `registry` and a Rust consumer calling them
/// through the mapping every 10 ms, once 50 calls succeeded and none failed.
async fn two_peer_providers_under_calls(
    registry: &PeerRegistry,
    peer: &BuiltPeer,
    app: &str,
) -> TwoUnderCalls {
    let providers = [
        peer.provider(&registry.url, app).await,
        peer.provider(&registry.url, app).await,
    ];
    for provider in &providers {
        registry
            .wait_for_instance(app, provider.port, "the peer's instance record")
            .await;
    }
    registry.wait_for_mapping(app).await;
    let resolver = introspect::Resolver::builder(registry.backend.clone()).build();
    let live = resolver.subscribe(subscription(None)).await.unwrap();
    let channel = super::calls::channel_over(&resolver, &live, 2).await;
    let caller = super::calls::Caller::start(channel, Duration::from_millis(10));
    eventually(Duration::from_secs(30), "calls flowing", || async {
        caller.ok() >= 50
    })
    .await;
    assert_eq!(caller.failed(), 0, "before the provider goes");
    TwoUnderCalls {
        providers,
        resolver,
        live,
        caller,
    }
}

/// Two of `peer`'s providers of `app` on `registry`, a Rust consumer calling them through
/// the mapping every 10 ms; one is killed (`SIGKILL`, its registration left to expire): at
/// most [`KILL_ALLOWANCE`] calls fail, then every call goes to the other.
pub async fn peer_provider_killed_while_rust_consumer_calls(
    registry: &PeerRegistry,
    peer: &BuiltPeer,
    app: &str,
) {
    let TwoUnderCalls {
        providers: [first, second],
        resolver,
        live,
        caller,
    } = two_peer_providers_under_calls(registry, peer, app).await;

    let killed = first.port;
    first.kill();
    let ok = caller.ok();
    eventually(
        Duration::from_secs(30),
        "200 calls after the kill",
        || async { caller.ok() >= ok + 200 },
    )
    .await;
    let failed_after_kill = caller.failed();
    let ok = caller.ok();
    eventually(Duration::from_secs(30), "100 more calls", || async {
        caller.ok() >= ok + 100
    })
    .await;
    let (ok, failed, errors) = caller.finish().await;
    let stats = resolver.stats().await;
    eprintln!("{ok} calls answered, {failed} failed after the kill: {errors:?}");
    assert!(
        failed <= KILL_ALLOWANCE,
        "{failed} of {} calls failed after the kill: {errors:?}; {stats:?}",
        ok + failed
    );
    assert_eq!(
        failed, failed_after_kill,
        "no failure once it was set aside: {errors:?}"
    );
    assert!(
        stats.set_aside >= 1 || !live.current().iter().any(|e| e.port == killed),
        "the killed provider is set aside or gone: {stats:?}"
    );
    drop(second);
}

/// Calls a paced peer consumer makes in the graceful-stop case, and its pause between two.
const PACED_CALLS: u32 = 300;
const PACE: Duration = Duration::from_millis(20);

/// Two Rust providers of `rust_app` on `registry`, `peer`'s consumer calling them through
/// the mapping every 20 ms; one stops gracefully while it calls (marked stopping, drained,
/// deregistered, and only then its server stops): no call fails, every call is counted by
/// one of the two, and the other answers the calls after the stop.
pub async fn rust_provider_stopped_while_peer_consumer_calls(
    registry: &PeerRegistry,
    peer: &BuiltPeer,
    rust_app: &str,
) {
    let stopping = registry.start_rust_greeter(rust_app).await;
    let staying = registry.start_rust_greeter(rust_app).await;
    registry.wait_for_mapping(rust_app).await;
    let stopped_calls = stopping.counter();
    let app = format!("{}-consumer", peer.peer().name());
    let consumer = peer.paced_consumer(&registry.url, &app, PACED_CALLS, None, PACE);
    let stop = async {
        eventually(
            Duration::from_secs(90),
            "the peer consumer calling the provider that stops",
            || {
                let called = stopped_calls.load(std::sync::atomic::Ordering::Relaxed) >= 20;
                async move { called }
            },
        )
        .await;
        stopping.shutdown().await;
        staying.calls()
    };
    let (run, staying_at_stop) = tokio::join!(consumer, stop);
    let stopped = stopped_calls.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        run.status.success()
            && (run.calls, run.ok, run.failed)
                == (u64::from(PACED_CALLS), u64::from(PACED_CALLS), 0),
        "the peer consumer's calls (made, ok, failed) = ({}, {}, {}) across the stop, exit {}:\n{}",
        run.calls,
        run.ok,
        run.failed,
        run.status,
        run.output
    );
    assert_eq!(
        stopped + staying.calls(),
        u64::from(PACED_CALLS) + 1,
        "every call (and the first, discovering one) answered by one of the two"
    );
    assert!(
        staying.calls() > staying_at_stop,
        "the consumer was still calling once the stop was over ({staying_at_stop} then {})",
        staying.calls()
    );
    staying.shutdown().await;
}

/// Two of `peer`'s providers of `app` on `registry`, a Rust consumer calling them through
/// the mapping every 10 ms; one stops as a deploy stops it (`SIGTERM`: Dubbo deregisters
/// first, then drains, by the peer's own defaults): no call fails, and no removal is held
/// by self-preservation (a deregistration is not an expiry). A call that reaches the
/// provider after it unexported is answered `UNIMPLEMENTED` before any work (Java's
/// "Invoker for gRPC not found", seen in a loaded run when the drain ended before the
/// consumer's view let the provider go); the balanced channel sends it again to the other
/// provider, as a declined attempt, so the drain need not outlast the view's lag.
pub async fn peer_provider_stopped_while_rust_consumer_calls(
    registry: &PeerRegistry,
    peer: &BuiltPeer,
    app: &str,
) {
    let TwoUnderCalls {
        providers: [stopping, staying],
        resolver,
        live,
        caller,
    } = two_peer_providers_under_calls(registry, peer, app).await;

    let stopped = stopping.port;
    let signalled_at = caller.elapsed_ms();
    // When the stopped provider left the set, on the caller's clock (its failures' times).
    let left_at = async {
        while live.current().iter().any(|e| e.port == stopped) {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        caller.elapsed_ms()
    };
    let ((status, output), left_at) = tokio::join!(stopping.terminate(), left_at);
    let exited_at = caller.elapsed_ms();
    let ok = caller.ok();
    eventually(
        Duration::from_secs(30),
        "200 calls after the stop",
        || async { caller.ok() >= ok + 200 },
    )
    .await;
    let (ok, failed, errors) = caller.finish().await;
    let stats = resolver.stats().await;
    eprintln!(
        "{} provider stopped by SIGTERM (exit {status}): {ok} calls answered, {failed} failed",
        peer.peer().name()
    );
    let timeline = format!(
        "SIGTERM at {signalled_at} ms, out of the set at {left_at} ms, exited at {exited_at} ms"
    );
    eprintln!("{timeline}; {stats:?}");
    assert_eq!(
        failed,
        0,
        "{ok} calls answered; failures: {errors:?}; {timeline}; {stats:?}; the stopped \
         provider's shutdown:\n{}",
        shutdown_lines(&output)
    );
    assert!(
        !live.current().iter().any(|e| e.port == stopped),
        "the stopped provider left the set"
    );
    assert_eq!(stats.held_removals, 0, "nothing held: {stats:?}");
    drop(staying);
}

/// The lines of a peer's output that tell how its shutdown went (deregistration, idle
/// waits, unexport).
fn shutdown_lines(output: &str) -> String {
    output
        .lines()
        .filter(|line| {
            let line = line.to_ascii_lowercase();
            [
                "shutdown",
                "unregister",
                "un-export",
                "unexport",
                "idle",
                "destroy",
            ]
            .iter()
            .any(|word| line.contains(word))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Two Rust providers of `rust_app` on `registry`, one in this process and one the
/// example provider's process, `peer`'s consumer calling them every 20 ms; the process is
/// killed (`SIGKILL`, its session left to expire). What the peer's consumer makes of it is
/// recorded, not bounded: it is the yardstick a Rust consumer, at most [`KILL_ALLOWANCE`]
/// failed calls for the same kill, is measured against. Asserted: the peer makes all its
/// calls, and goes on calling the provider left once the killed one's record is gone.
pub async fn rust_provider_killed_while_peer_consumer_calls(
    registry: &PeerRegistry,
    peer: &BuiltPeer,
    rust_app: &str,
) -> ConsumerRun {
    let staying = registry.start_rust_greeter(rust_app).await;
    let doomed = super::examples::ExampleProvider::start(&registry.url, rust_app).await;
    registry
        .wait_for_instance(rust_app, doomed.port, "the example provider's record")
        .await;
    registry.wait_for_mapping(rust_app).await;
    let doomed_port = doomed.port;
    let app = format!("{}-consumer", peer.peer().name());
    let consumer = peer.paced_consumer(&registry.url, &app, PACED_CALLS, None, PACE);
    let kill = async {
        eventually(
            Duration::from_secs(90),
            "the peer consumer calling the Rust providers",
            || {
                let called = staying.calls() >= 20;
                async move { called }
            },
        )
        .await;
        doomed.kill().await;
        let killed = std::time::Instant::now();
        let address = format!("127.0.0.1:{doomed_port}");
        eventually(
            Duration::from_secs(60),
            "the killed provider's record gone",
            || async {
                registry
                    .backend
                    .instances()
                    .list(rust_app, InstanceRead::new(&Limits::default()))
                    .await
                    .is_ok_and(|list| !list.instances.contains_key(&address))
            },
        )
        .await;
        (killed.elapsed(), staying.calls())
    };
    let (run, (gone_after, staying_when_gone)) = tokio::join!(consumer, kill);
    eprintln!(
        "{} consumer, a Rust provider killed: {} of {} calls failed (the record went {:?} \
         after the kill); output:\n{}",
        peer.peer().name(),
        run.failed,
        run.calls,
        gone_after,
        run.output.lines().take(20).collect::<Vec<_>>().join("\n")
    );
    assert_eq!(run.calls, u64::from(PACED_CALLS), "{}", run.output);
    assert_eq!(run.ok + run.failed, run.calls, "{}", run.output);
    assert!(
        staying.calls() > staying_when_gone,
        "the peer went on calling the provider left ({staying_when_gone} then {})",
        staying.calls()
    );
    staying.shutdown().await;
    run
}
