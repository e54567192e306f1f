//! The console (`introspect console`) over a real running fleet on the embedded store: the
//! JSON API's shapes, live events as providers register, stop and crash, holds with their
//! time left, registered consumers and the stale one among them, hostile and huge values,
//! 10,000 instances, the token and the cookie; the write actions (disable, enable, weight,
//! tag) and their log, on the embedded store and on a real ZooKeeper.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::etcd::EtcdServer;
use crate::support::faulty::FaultyStore;
use crate::support::fleet::{start_provider, start_provider_with};
use crate::support::wait::eventually;
use crate::support::zookeeper::ZooKeeperServer;
use introspect::backend::RegisterOptions;
use introspect::backend::config::{
    ConfigFollow, ConfigItem, ConfigKey, ConfigVersion, ConfigWrite,
};
use introspect::consumer::{ProtectionOptions, Resolver, Subscription};
use introspect::governance::{Configurators, TagRule};
use introspect::{Backend, Limits, MemoryStore, ServiceInfo, Store};
use introspect_cli::console::{self, Console, ConsoleOptions};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

/// How long the consoles of these tests let a consumer's digest differ before it is stale.
const STALE_AFTER: Duration = Duration::from_secs(3);

/// One answer: status, headers (lowercase names), body.
struct Answer {
    status: u16,
    headers: HashMap<String, String>,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// Where a console listens: a running one, or one a child process serves.
trait Listening {
    fn local_addr(&self) -> SocketAddr;
}

impl Listening for Console {
    fn local_addr(&self) -> SocketAddr {
        Console::local_addr(self)
    }
}

impl Listening for SocketAddr {
    fn local_addr(&self) -> SocketAddr {
        *self
    }
}

/// A plain HTTP/1.1 request over a fresh connection.
async fn request(
    console: &impl Listening,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let addr = console.local_addr();
    let mut stream = TcpStream::connect(addr).await.expect("console answers");
    let mut text = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    if !body.is_empty() {
        text.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    text.push_str("\r\n");
    text.push_str(body);
    stream.write_all(text.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a response");
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_ascii_lowercase(), v.to_owned()))
        .collect();
    Answer {
        status,
        headers,
        body: body.to_owned(),
    }
}

async fn get(console: &impl Listening, path: &str) -> Answer {
    request(console, "GET", path, &[], "").await
}

/// The server-sent events of `/api/events`, as (name, data) pairs.
async fn events(
    console: &impl Listening,
    headers: &[(&str, &str)],
) -> mpsc::UnboundedReceiver<(String, Value)> {
    let addr = console.local_addr();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut text = format!("GET /api/events HTTP/1.1\r\nHost: {addr}\r\n");
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    stream.write_all(text.as_bytes()).await.unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stream).lines();
        let mut name = String::new();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(n) = line.strip_prefix("event: ") {
                name = n.to_owned();
            } else if let Some(data) = line.strip_prefix("data: ")
                && let Ok(value) = serde_json::from_str(data)
                && tx.send((name.clone(), value)).is_err()
            {
                return;
            }
        }
    });
    rx
}

/// Waits up to `limit` for an event that `matches`; returns it and how long it took.
async fn next_matching(
    events: &mut mpsc::UnboundedReceiver<(String, Value)>,
    limit: Duration,
    what: &str,
    matches: impl Fn(&str, &Value) -> bool,
) -> (Value, Duration) {
    let started = Instant::now();
    loop {
        let left = limit.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, events.recv()).await {
            Ok(Some((name, data))) if matches(&name, &data) => return (data, started.elapsed()),
            Ok(Some(_)) => {}
            _ => panic!("no event {what} within {limit:?}"),
        }
    }
}

fn change_of(data: &Value, kind: &str, address: &str) -> bool {
    data["changes"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["kind"] == kind && c["address"] == address)
    })
}

fn service(name: &str, timeout: &str) -> ServiceInfo {
    let mut s = ServiceInfo::new(name);
    s.version = "1.0".into();
    s.protocol = "tri".into();
    s.params.insert("timeout".into(), timeout.into());
    s
}

async fn console_over(store: &Arc<dyn Store>, token: Option<&str>) -> Console {
    let resolver = Resolver::builder(store.clone())
        .protection(ProtectionOptions::default())
        .build();
    let options = ConsoleOptions {
        token: token.map(str::to_owned),
        discover_every: Duration::from_millis(200),
        audit_every: Duration::from_millis(200),
        stale_after: STALE_AFTER,
        ..ConsoleOptions::new("127.0.0.1:0".parse().unwrap())
    };
    console::start(resolver, options)
        .await
        .expect("console starts")
}

async fn address_of(provider: &introspect::Provider) -> String {
    provider.instance().await.key_address()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_follows_a_live_fleet() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let blue = vec![service("shop.OrderService", "3000")];
    let green = vec![service("shop.OrderService", "1500")];
    let mut shop = Vec::new();
    for _ in 0..2 {
        shop.push(start_provider(&store, "shop", blue.clone()).await);
    }
    shop.push(start_provider(&store, "shop", green.clone()).await);
    let _pay = start_provider(&store, "pay", vec![service("shop.PayService", "100")]).await;
    let console = console_over(&store, None).await;

    eventually(
        Duration::from_secs(5),
        "both apps listed and read",
        || async {
            let apps = get(&console, "/api/apps").await.json();
            apps["total"] == 2
                && apps["apps"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|a| a["synced"] == true)
        },
    )
    .await;
    let apps = get(&console, "/api/apps").await;
    assert_eq!(apps.status, 200);
    assert_eq!(apps.headers["cache-control"], "no-store");
    assert!(apps.headers["content-security-policy"].contains("script-src 'self'"));
    let apps = apps.json();
    assert_eq!(apps["registry"], "memory");
    let listed = &apps["apps"][1];
    assert_eq!(listed["app"], "shop");
    assert_eq!(listed["instances"], 3);
    assert_eq!(listed["revisions"][0]["instances"], 2);
    assert_eq!(listed["revisions"][0]["share"], 0.6667);
    assert_eq!(listed["revisions"][1]["share"], 0.3333);
    for key in ["disabled", "held", "set_aside"] {
        assert_eq!(listed[key], 0, "{key}");
    }
    let searched = get(&console, "/api/apps?q=PA").await.json();
    assert_eq!(searched["total"], 1);
    assert_eq!(searched["apps"][0]["app"], "pay");

    // The app: instances by revision, each revision's services, the log.
    let app = get(&console, "/api/app?name=shop").await.json();
    assert_eq!(app["instances_total"], 3);
    let revisions = app["revisions"].as_array().unwrap();
    assert_eq!(revisions.len(), 2);
    let blue_rev = revisions[0]["revision"].as_str().unwrap().to_owned();
    let green_rev = revisions[1]["revision"].as_str().unwrap().to_owned();
    assert_eq!(revisions[0]["instances"], 2);
    assert_eq!(
        revisions[0]["services"][0]["match_key"],
        "shop.OrderService:1.0:tri"
    );
    assert_eq!(revisions[0]["services"][0]["params"]["timeout"], "3000");
    let instances = app["instances"].as_array().unwrap();
    assert_eq!(instances[0]["revision"], blue_rev.as_str());
    assert_eq!(instances[2]["revision"], green_rev.as_str());
    let first = &instances[0];
    assert_eq!(first["enabled"], true);
    assert_eq!(first["healthy"], true);
    assert_eq!(first["set_aside"], false);
    assert!(first["seen_since_ms"].as_u64().unwrap() > 0);
    assert!(
        first["metadata_service"]
            .as_str()
            .unwrap()
            .starts_with("127.0.0.1:")
    );
    assert_eq!(app["log"][0]["kind"], "listed");
    let page = get(&console, "/api/app?name=shop&offset=1&limit=1")
        .await
        .json();
    assert_eq!(page["instances"].as_array().unwrap().len(), 1);
    assert_eq!(page["instances_total"], 3);

    // The diff of two revisions, as `introspect revision shop A B` prints it.
    let diffed = get(
        &console,
        &format!("/api/app?name=shop&a={blue_rev}&b={green_rev}"),
    )
    .await
    .json();
    let diff = &diffed["diff"]["diffs"][0];
    assert_eq!(diff["from"], blue_rev.as_str());
    let change = &diff["changed"]["shop.OrderService:1.0:tri"][0];
    assert_eq!(change["field"], "param timeout");
    assert_eq!(
        (change["before"].as_str(), change["after"].as_str()),
        (Some("3000"), Some("1500"))
    );

    // The service: the mapping's apps and what `resolve` gives.
    let service = get(&console, "/api/service?name=shop.OrderService")
        .await
        .json();
    assert_eq!(service["apps"], serde_json::json!(["shop"]));
    assert_eq!(service["total"], 3);
    assert_eq!(
        service["endpoints"][0]["service"]["name"],
        "shop.OrderService"
    );
    // Beside it the interface level, which the embedded store has not: says so.
    assert_eq!(service["migration"], "application", "{service}");
    assert_eq!(service["interface_level"]["total"], 0, "{service}");
    assert!(
        service["interface_level"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("no interface-level providers")),
        "{service}"
    );
    let bad = get(&console, "/api/service?name=a/b").await;
    assert_eq!(bad.status, 400);
    assert_eq!(get(&console, "/api/app?name=nobody").await.status, 404);
    assert_eq!(get(&console, "/api/app").await.status, 400);

    // Live: a provider registers, one stops gracefully, one crashes.
    let mut live = events(&console, &[]).await;
    next_matching(&mut live, Duration::from_secs(2), "hello", |n, _| {
        n == "hello"
    })
    .await;
    let newcomer = start_provider(&store, "shop", blue.clone()).await;
    let address = address_of(&newcomer).await;
    let (data, took) = next_matching(&mut live, Duration::from_secs(2), "registered", |n, d| {
        n == "app" && change_of(d, "registered", &address)
    })
    .await;
    assert_eq!(data["summary"]["instances"], 4);
    println!("registration seen by the page {took:?} after the provider started");

    let leaving = shop.pop().unwrap();
    let address = address_of(&leaving).await;
    leaving.shutdown().await.unwrap();
    next_matching(&mut live, Duration::from_secs(2), "stopped", |n, d| {
        n == "app" && change_of(d, "stopped", &address)
    })
    .await;

    let crashed = start_provider_with(&store, "shop", blue.clone(), |b| {
        b.lease_ttl(Duration::from_secs(1))
    })
    .await;
    let address = address_of(&crashed).await;
    next_matching(&mut live, Duration::from_secs(2), "registered", |n, d| {
        n == "app" && change_of(d, "registered", &address)
    })
    .await;
    crashed.abort();
    let (_, took) = next_matching(&mut live, Duration::from_secs(5), "crash seen", |n, d| {
        n == "app" && change_of(d, "left", &address)
    })
    .await;
    println!("crash seen by the page {took:?} after the abort (lease 1 s)");
    let log = get(&console, "/api/app?name=shop").await.json()["log"].clone();
    let kinds: Vec<&str> = log
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .collect();
    for kind in ["left", "stopped", "registered", "listed"] {
        assert!(kinds.contains(&kind), "{kind} in {kinds:?}");
    }
    console.stop().await;
}

/// Writes `text` under `key` (group `dubbo`) through the backend's config part, as an
/// operator's tool writes a rule.
async fn put_rule(backend: &Backend, key: &str, text: &str) {
    let config = backend.config();
    let current = config
        .get(&ConfigKey::new(key, "dubbo").unwrap())
        .await
        .unwrap();
    config
        .put(
            &ConfigKey::new(key, "dubbo").unwrap(),
            ConfigWrite::new(text, current.as_ref().map(|c| &c.version)),
        )
        .await
        .unwrap();
}

/// The provider of `report` at `address`.
fn provider<'a>(report: &'a Value, address: &str) -> &'a Value {
    report["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["address"] == address)
        .unwrap_or_else(|| panic!("{address} in {report}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_route_of_an_interface_shows_rules_in_force_and_not_applied_per_provider() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let backend = Backend::from(store.clone());
    // Four providers: a light one (weight 50, no warm-up), two plain, one tagged `gray`.
    let mut light = service("shop.OrderService", "3000");
    light.params.insert("weight".into(), "50".into());
    light.params.insert("warmup".into(), "0".into());
    let mut gray = service("shop.OrderService", "3000");
    gray.params.insert("dubbo.tag".into(), "gray".into());
    let plain = service("shop.OrderService", "3000");
    let mut providers = Vec::new();
    for services in [vec![light], vec![plain.clone()], vec![gray], vec![plain]] {
        providers.push(start_provider(&store, "shop", services).await);
    }
    let console = console_over(&store, None).await;
    let path = "/api/route?interface=shop.OrderService";
    eventually(Duration::from_secs(5), "four providers routed", || async {
        get(&console, path).await.json()["providers_total"] == 4
    })
    .await;
    let before = get(&console, path).await.json();
    assert_eq!(before["rules_in_force"], serde_json::json!([]));
    let addresses: Vec<String> = before["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["address"].as_str().unwrap().to_owned())
        .collect();
    let mut by_role = Vec::new();
    for p in &providers {
        let registered = address_of(p).await;
        let port = registered.rsplit(':').next().unwrap().to_owned();
        let address = addresses
            .iter()
            .find(|a| a.ends_with(&format!(":{port}")))
            .unwrap_or_else(|| panic!("{registered} in {addresses:?}"))
            .clone();
        by_role.push((address, port));
    }
    let [
        (light, light_port),
        (plain, plain_port),
        (gray, _),
        (other, _),
    ] = &by_role[..]
    else {
        unreachable!()
    };

    // A condition rule of the service routes the light one out; the consumer app's rule
    // routes a plain one out of `Refund` calls; a tag rule that is not YAML is refused.
    put_rule(
        &backend,
        "shop.OrderService::.condition-router",
        &format!(
            "configVersion: v3.0\nscope: service\nkey: shop.OrderService\nenabled: true\n\
             force: false\nruntime: true\nconditions:\n  - '=> port != {light_port}'\n"
        ),
    )
    .await;
    put_rule(
        &backend,
        "shop-web.condition-router",
        &format!(
            "configVersion: v3.0\nscope: application\nkey: shop-web\nenabled: true\n\
             conditions:\n  - 'method = Refund => port != {plain_port}'\n"
        ),
    )
    .await;
    put_rule(
        &backend,
        "shop.tag-router",
        "configVersion: v3.0\nkey: shop\ntags: [\n  - name: gray\n",
    )
    .await;

    let report = get(&console, path).await;
    assert_eq!(report.status, 200);
    assert_eq!(report.headers["cache-control"], "no-store");
    let report = report.json();
    assert_eq!(report["registry"], "memory");
    assert_eq!(report["interface"], "shop.OrderService");
    assert_eq!(
        report["rules_in_force"],
        serde_json::json!(["shop.OrderService::.condition-router"])
    );
    let problems = report["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0]["key"], "shop.tag-router");
    assert!(!problems[0]["reason"].as_str().unwrap().is_empty());
    let routed_out = provider(&report, light);
    assert_eq!(routed_out["routed"], false);
    assert_eq!(
        routed_out["routed_out_by"],
        "condition rule shop.OrderService::.condition-router"
    );
    assert_eq!(routed_out["weight"], 50);
    assert_eq!(routed_out["enabled"], true);
    assert_eq!(routed_out["app"], "shop");
    let tagged = provider(&report, gray);
    assert_eq!(tagged["tag"], "gray");
    assert_eq!(tagged["routed"], false);
    assert!(
        tagged["routed_out_by"].as_str().unwrap().starts_with("tag"),
        "{tagged}"
    );
    for address in [plain, other] {
        let p = provider(&report, address);
        assert_eq!(p["routed"], true, "{p}");
        assert_eq!(p["routed_out_by"], Value::Null);
        assert_eq!(p["tag"], Value::Null);
    }
    assert!(!report["steps"].as_array().unwrap().is_empty());

    // As consumer app `shop-web` calling `Refund`: its own rule joins and routes one out.
    let refund = get(
        &console,
        &format!("{path}&consumer_app=shop-web&method=Refund"),
    )
    .await
    .json();
    assert_eq!(refund["consumer_app"], "shop-web");
    assert_eq!(refund["method"], "Refund");
    assert_eq!(
        refund["rules_in_force"],
        serde_json::json!([
            "shop.OrderService::.condition-router",
            "shop-web.condition-router"
        ])
    );
    assert_eq!(
        provider(&refund, plain)["routed_out_by"],
        "condition rule shop-web.condition-router"
    );
    assert_eq!(provider(&refund, other)["routed"], true);

    // A call tagged `gray` goes to the gray provider alone.
    let tagged = get(&console, &format!("{path}&tag=gray")).await.json();
    assert_eq!(tagged["tag"], "gray");
    assert_eq!(provider(&tagged, gray)["routed"], true);
    for address in [light, plain, other] {
        assert_eq!(provider(&tagged, address)["routed"], false, "{address}");
    }

    // Bad input: clear 400s, as JSON.
    for (bad, says) in [
        ("/api/route", "interface is required"),
        ("/api/route?interface=a/b", "interface"),
        (
            "/api/route?interface=shop.OrderService&consumer_app=a/b",
            "consumer_app",
        ),
        (
            "/api/route?interface=shop.OrderService&force_tag=maybe",
            "bad query",
        ),
        (
            "/api/route?interface=shop.OrderService&method=%00",
            "control character",
        ),
    ] {
        let answer = get(&console, bad).await;
        assert_eq!(answer.status, 400, "{bad}: {}", answer.body);
        let error = answer.json()["error"].as_str().unwrap().to_owned();
        assert!(error.contains(says), "{bad}: {error}");
    }
    let long = "x".repeat(10_000);
    let answer = get(&console, &format!("/api/route?interface={long}")).await;
    assert_eq!(answer.status, 400);
    assert!(answer.body.len() < 500, "{}", answer.body.len());

    // An interface no app provides: no providers, and why.
    let nobody = get(&console, "/api/route?interface=shop.Nobody")
        .await
        .json();
    assert_eq!(nobody["providers_total"], 0);
    assert!(nobody["why_empty"].is_string(), "{nobody}");
    console.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_show_with_their_count_and_time_left() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let services = vec![service("shop.OrderService", "3000")];
    let mut fleet = Vec::new();
    for _ in 0..6 {
        let ttl = |b: introspect::provider::ProviderBuilder| b.lease_ttl(Duration::from_secs(1));
        fleet.push(start_provider_with(&store, "shop", services.clone(), ttl).await);
    }
    let console = console_over(&store, None).await;
    eventually(Duration::from_secs(5), "six instances", || async {
        get(&console, "/api/app?name=shop").await.json()["summary"]["instances"] == 6
    })
    .await;
    let mut live = events(&console, &[]).await;
    // A partition as the registry sees it: four of six leases expire at once.
    for provider in &fleet[..4] {
        provider.abort();
    }
    let (data, _) = next_matching(&mut live, Duration::from_secs(6), "holds", |n, d| {
        n == "app" && d["summary"]["held"].as_u64() >= Some(4)
    })
    .await;
    let summary = &data["summary"];
    assert_eq!(summary["protection_active"], true);
    let hold = &summary["holds"][0];
    assert_eq!(hold["cause"], "self-preservation");
    let left = hold["ends_in_ms"].as_u64().unwrap();
    assert!(
        left > 200_000 && left <= 300_000,
        "about the 5 min default: {left}"
    );
    let app = get(&console, "/api/app?name=shop").await.json();
    assert_eq!(app["holds"].as_array().unwrap().len(), 4);
    let held: Vec<&Value> = app["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| !i["held"].is_null())
        .collect();
    assert_eq!(held.len(), 4, "held instances are listed, marked");
    assert!(
        app["log"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "held")
    );
    console.stop().await;
}

/// A consumer that registers its record over its own connection to the fleet's store.
async fn registered_consumer(
    store: Arc<FaultyStore>,
    app: &str,
    interface: &str,
) -> (Resolver, introspect::consumer::SubscriptionHandle) {
    let resolver = Resolver::builder(store as Arc<dyn Store>)
        .register_consumer(app)
        .consumer_host("10.1.2.3")
        .consumer_refresh(Duration::from_millis(500))
        // Its record outlives the cut below, as a record does for its TTL.
        .consumer_ttl(Duration::from_secs(60))
        .build();
    let handle = resolver
        .subscribe(Subscription::new(interface))
        .await
        .expect("subscribes");
    (resolver, handle)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_are_listed_and_one_whose_connection_is_cut_turns_stale() {
    let memory = Arc::new(MemoryStore::new());
    let store: Arc<dyn Store> = memory.clone();
    let services = vec![service("shop.OrderService", "3000")];
    let _a = start_provider(&store, "shop", services.clone()).await;
    let _b = start_provider(&store, "shop", services.clone()).await;
    let console = console_over(&store, None).await;
    let healthy = Arc::new(FaultyStore::new(memory.clone()));
    let cut = Arc::new(FaultyStore::new(memory.clone()));
    let (_web, _web_sub) = registered_consumer(healthy, "shop-web", "shop.OrderService").await;
    let (_batch, _batch_sub) =
        registered_consumer(cut.clone(), "shop-batch", "shop.OrderService").await;
    let both_same = |c: &Value| {
        c["consumers"]
            .as_array()
            .is_some_and(|rows| rows.len() == 2 && rows.iter().all(|r| r["verdict"] == "same"))
    };
    eventually(
        Duration::from_secs(10),
        "two consumers, same set",
        || async {
            both_same(
                &get(&console, "/api/consumers?interface=shop.OrderService")
                    .await
                    .json(),
            )
        },
    )
    .await;
    let listed = get(&console, "/api/consumers?interface=shop.OrderService")
        .await
        .json();
    assert!(both_same(&listed), "{listed}");
    let row = &listed["consumers"][0];
    assert_eq!(listed["total"], 2);
    assert_eq!(listed["stale"], 0);
    assert_eq!(row["host"], "10.1.2.3");
    assert_eq!(row["endpoints"], 2);
    assert_eq!(row["digest"], row["current_digest"]);
    assert_eq!(row["routes_to"], serde_json::json!(["shop"]));
    assert!(row["registered_ms"].as_u64().unwrap() > 0);
    // Which level it reads, and why: its own default step, the application level.
    assert_eq!(
        (
            &row["level"],
            &row["step"],
            &row["step_rule"],
            &row["fallback"]
        ),
        (
            &serde_json::json!("application"),
            &serde_json::json!("FORCE_APPLICATION"),
            &Value::Null,
            &serde_json::json!(false)
        ),
        "{row}"
    );
    assert_eq!(
        (&listed["interface_only"], &row["interface_only"]),
        (&serde_json::json!(0), &serde_json::json!(false))
    );
    let by_app = get(&console, "/api/consumers?app=shop").await.json();
    assert_eq!(
        by_app["total"], 2,
        "the app's consumers: those routing to it"
    );
    let other = get(&console, "/api/consumers?interface=shop.Other")
        .await
        .json();
    assert_eq!(other["total"], 0);

    // Cut shop-batch's connection: its calls fail, its open watches end, its record stays
    // (its lease runs 60 s). Then the fleet grows: the console sees it, shop-batch cannot.
    let mut live = events(&console, &[]).await;
    cut.set_down(true);
    memory.cancel_watches();
    let _c = start_provider(&store, "shop", services.clone()).await;
    let (data, _) = next_matching(
        &mut live,
        STALE_AFTER + Duration::from_secs(10),
        "stale",
        |n, d| n == "consumers" && d["stale"] == 1,
    )
    .await;
    assert_eq!(data["total"], 2);
    let c = get(&console, "/api/consumers?interface=shop.OrderService")
        .await
        .json();
    let verdict = |app: &str| {
        c["consumers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["app"] == app)
            .map(|r| {
                (
                    r["verdict"].clone(),
                    r["differs_for_ms"].as_u64().unwrap(),
                    r["endpoints"].clone(),
                )
            })
            .unwrap()
    };
    let (batch, lasted, endpoints) = verdict("shop-batch");
    assert_eq!(batch, "stale");
    assert!(lasted >= STALE_AFTER.as_millis() as u64, "{lasted}");
    assert_eq!(endpoints, 2, "the cut consumer still shows the set it had");
    let (web, _, endpoints) = verdict("shop-web");
    assert_eq!((web, endpoints), ("same".into(), 3.into()));

    // Mended: it catches up, and the verdict follows.
    cut.set_down(false);
    eventually(Duration::from_secs(20), "shop-batch catches up", || async {
        let c = get(&console, "/api/consumers?interface=shop.OrderService")
            .await
            .json();
        c["stale"] == 0 && both_same(&c)
    })
    .await;
    console.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_routing_by_an_older_rule_set_is_listed_as_such() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let backend = Backend::from(store.clone());
    let _a = start_provider(&store, "shop", vec![service("shop.OrderService", "3000")]).await;
    let console = console_over(&store, None).await;
    // Two consumers with balanced channels: one follows the config centre's rules, one
    // reads none.
    let mut held = Vec::new();
    for (app, rules) in [("shop-web", true), ("shop-batch", false)] {
        let resolver = Resolver::builder(store.clone())
            .register_consumer(app)
            .consumer_refresh(Duration::from_millis(200))
            .rules(rules)
            .build();
        let handle = resolver
            .subscribe(Subscription::new("shop.OrderService"))
            .await
            .unwrap();
        let channel = resolver.balanced_channel(&handle).unwrap();
        held.push((resolver, handle, channel));
    }
    let rows = || async {
        get(&console, "/api/consumers?interface=shop.OrderService")
            .await
            .json()
    };
    let rules_of = |c: &Value, app: &str| {
        c["consumers"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["app"] == app).cloned())
            .map(|r| r["rules"].as_str().unwrap_or_default().to_owned())
    };
    eventually(
        Duration::from_secs(10),
        "both by the same (no) rules",
        || async {
            let c = rows().await;
            rules_of(&c, "shop-web").as_deref() == Some("same")
                && rules_of(&c, "shop-batch").as_deref() == Some("same")
        },
    )
    .await;
    assert_eq!(rows().await["older_rules"], 0);

    let rule = "configVersion: v3.0\nscope: service\nkey: shop.OrderService\nenabled: true\n\
                conditions:\n  - 'method = Cancel => port != 1'\n";
    let mut live = events(&console, &[]).await;
    put_rule(&backend, "shop.OrderService::.condition-router", rule).await;
    next_matching(
        &mut live,
        Duration::from_secs(10),
        "one consumer by older rules",
        |n, d| n == "consumers" && d["older_rules"] == 1,
    )
    .await;
    eventually(
        Duration::from_secs(10),
        "the follower by the new rule",
        || async {
            let c = rows().await;
            rules_of(&c, "shop-web").as_deref() == Some("same")
                && rules_of(&c, "shop-batch").as_deref() == Some("different")
        },
    )
    .await;
    let c = rows().await;
    assert_eq!(c["older_rules"], 1, "{c}");
    let row = |app: &str| {
        c["consumers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["app"] == app)
            .unwrap()
            .clone()
    };
    let (web, batch) = (row("shop-web"), row("shop-batch"));
    assert_eq!(web["rules_digest"], web["current_rules_digest"], "{c}");
    assert_eq!(
        web["rule_keys"],
        serde_json::json!(["shop.OrderService::.condition-router"])
    );
    assert_eq!(
        batch["rules_digest"], "e3b0c44298fc1c14",
        "routes by none: {c}"
    );
    assert!(batch["rule_keys"].as_array().is_none_or(|k| k.is_empty()));
    assert_eq!(batch["current_rules_digest"], web["rules_digest"]);
    assert_eq!(batch["verdict"], "same", "the endpoints agree: {c}");
    drop(held);
    console.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_not_asking_to_register_is_not_listed() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let _a = start_provider(&store, "shop", vec![service("shop.OrderService", "3000")]).await;
    let console = console_over(&store, None).await;
    let quiet = Resolver::new(store.clone());
    let _sub = quiet
        .subscribe(Subscription::new("shop.OrderService"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let c = get(&console, "/api/consumers").await.json();
    assert_eq!(
        (c["total"].clone(), c["error"].clone()),
        (0.into(), Value::Null)
    );
    assert_eq!(c["registry"], "memory");
    console.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_and_huge_values_come_back_bounded_and_as_text() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let app = "<script>alert(1)<\\script>\"'&";
    let mut evil = service("shop.OrderService", "<script>alert('x')</script>");
    evil.params.insert("huge".into(), "x".repeat(200_000));
    let _p = start_provider_with(&store, app, vec![evil], |b| {
        b.metadata(
            "note",
            format!("<img src=x onerror=alert(1)>{}", "y".repeat(40_000)),
        )
    })
    .await;
    let console = console_over(&store, None).await;
    eventually(Duration::from_secs(5), "the hostile app listed", || async {
        get(&console, "/api/apps").await.json()["total"] == 1
    })
    .await;
    let apps = get(&console, "/api/apps").await;
    assert!(apps.headers["content-type"].starts_with("application/json"));
    assert_eq!(apps.json()["apps"][0]["app"], app);
    let path = format!("/api/app?name={}", percent(app));
    let answer = get(&console, &path).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(
        answer.body.len() < 20_000,
        "bounded: {} bytes",
        answer.body.len()
    );
    let value = answer.json();
    let params = &value["revisions"][0]["services"][0]["params"];
    assert_eq!(params["timeout"], "<script>alert('x')</script>");
    let huge = params["huge"].as_str().unwrap();
    assert_eq!(huge.chars().count(), 1025, "cut, and marked with …");
    assert!(huge.ends_with('…'));
    // The page renders every value as text: the script never parses data as markup.
    let script = get(&console, "/console.js").await;
    assert!(script.headers["content-type"].starts_with("text/javascript"));
    for sink in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
    ] {
        assert!(!script.body.contains(sink), "console.js uses {sink}");
    }
    assert!(script.body.contains("textContent") || script.body.contains("createTextNode"));

    // Consumer records are someone else's too: markup, garbage and a huge one are skipped
    // with their key and the reason, and the answer stays bounded.
    let consumers = "/introspect/consumers";
    let markup = format!(r#"{{"app":"{app}","id":"a1","host":"h","registeredMs":1}}"#);
    store
        .put(&format!("{consumers}/x/a1"), markup.into_bytes(), None)
        .await
        .unwrap();
    store
        .put(&format!("{consumers}/y/b2"), b"{not json".to_vec(), None)
        .await
        .unwrap();
    let key = format!("{consumers}/z/<b>{}</b>", "k".repeat(5_000));
    store.put(&key, vec![b'x'; 300_000], None).await.unwrap();
    eventually(Duration::from_secs(5), "the records read", || async {
        get(&console, "/api/consumers").await.json()["skipped"]
            .as_array()
            .map(Vec::len)
            == Some(3)
    })
    .await;
    let answer = get(&console, "/api/consumers").await;
    assert!(
        answer.body.len() < 20_000,
        "bounded: {} bytes",
        answer.body.len()
    );
    let value = answer.json();
    assert_eq!(value["total"], 0, "{value}");
    let skipped = value["skipped"].as_array().unwrap();
    assert!(skipped.iter().any(|s| {
        s["at"]
            .as_str()
            .unwrap()
            .starts_with("/introspect/consumers/z/<b>")
    }));
    console.stop().await;
}

fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_instances_are_paged() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let provider = start_provider(&store, "big", vec![service("shop.OrderService", "3000")]).await;
    // 9,999 more records of the same revision at other ports, whose MetadataService (the
    // port their records name) is the real provider's: real registrations on the store,
    // one metadata fetch.
    let template = provider.instance().await;
    let backend = introspect::backend::Backend::from(store.clone());
    let started = Instant::now();
    let mut registrations = Vec::with_capacity(10_000);
    for n in 0..9_999u32 {
        let mut instance = template.clone();
        instance.port = 20_000 + n as u16;
        let registration = backend
            .instances()
            .register(
                &instance,
                &RegisterOptions::new(Duration::from_secs(60), &Limits::default()),
            )
            .await
            .expect("registered");
        registrations.push(registration);
    }
    println!("10,000 instances registered in {:?}", started.elapsed());
    let console = console_over(&store, None).await;
    let started = Instant::now();
    eventually(
        Duration::from_secs(30),
        "10,000 instances followed",
        || async { get(&console, "/api/apps").await.json()["apps"][0]["instances"] == 10_000 },
    )
    .await;
    println!(
        "10,000 instances followed by the console in {:?}",
        started.elapsed()
    );
    let started = Instant::now();
    let apps = get(&console, "/api/apps").await;
    let apps_took = started.elapsed();
    let started = Instant::now();
    let page = get(&console, "/api/app?name=big").await;
    let page_took = started.elapsed();
    let value = page.json();
    assert_eq!(value["instances_total"], 10_000);
    assert_eq!(
        value["instances"].as_array().unwrap().len(),
        500,
        "one page by default"
    );
    let most = get(&console, "/api/app?name=big&limit=1000000&offset=9990")
        .await
        .json();
    assert_eq!(most["limit"], 2000, "the limit is capped");
    assert_eq!(most["instances"].as_array().unwrap().len(), 10);
    println!(
        "/api/apps {} bytes in {apps_took:?}; /api/app page of 500: {} bytes in {page_took:?}",
        apps.body.len(),
        page.body.len()
    );
    assert!(
        apps.body.len() < 10_000,
        "the apps list does not grow with instances"
    );
    assert!(page.body.len() < 500_000);
    console.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_guards_the_api_by_bearer_or_cookie() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let token = "s3cret-token-0123456789";
    let console = console_over(&store, Some(token)).await;
    let refused = get(&console, "/api/apps").await;
    assert_eq!(refused.status, 401);
    assert_eq!(refused.json()["error"], "a token is needed: log in");
    assert_eq!(get(&console, "/api/events").await.status, 401);
    assert_eq!(get(&console, "/api/route?interface=S").await.status, 401);
    assert_eq!(
        get(&console, "/").await.status,
        200,
        "the page itself holds no data"
    );
    let bearer = format!("Bearer {token}");
    let allowed = request(
        &console,
        "GET",
        "/api/apps",
        &[("Authorization", &bearer)],
        "",
    )
    .await;
    assert_eq!(allowed.status, 200);
    let wrong = request(
        &console,
        "GET",
        "/api/apps",
        &[("Authorization", "Bearer s3cret-token-0123456788")],
        "",
    )
    .await;
    assert_eq!(wrong.status, 401);

    let bad_login = request(&console, "POST", "/api/login", &[], r#"{"token":"nope"}"#).await;
    assert_eq!(bad_login.status, 401);
    assert!(!bad_login.headers.contains_key("set-cookie"));
    let login = request(
        &console,
        "POST",
        "/api/login",
        &[],
        &format!(r#"{{"token":"{token}"}}"#),
    )
    .await;
    assert_eq!(login.status, 200);
    let cookie = &login.headers["set-cookie"];
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(
        !cookie.contains(token),
        "the cookie is a session, not the token"
    );
    let pair = cookie.split(';').next().unwrap();
    let with_cookie = request(&console, "GET", "/api/apps", &[("Cookie", pair)], "").await;
    assert_eq!(with_cookie.status, 200);
    let mut live = events(&console, &[("Cookie", pair)]).await;
    next_matching(&mut live, Duration::from_secs(2), "hello", |n, _| {
        n == "hello"
    })
    .await;
    console.stop().await;
}

#[tokio::test]
async fn unsafe_binds_are_refused_at_start() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let start = |listen: &str, token: Option<&str>| {
        let options = ConsoleOptions {
            token: token.map(str::to_owned),
            ..ConsoleOptions::new(listen.parse().unwrap())
        };
        console::start(Resolver::new(store.clone()), options)
    };
    let error = start("0.0.0.0:0", None)
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(
        error.contains("without a token") && error.contains("--token-env"),
        "{error}"
    );
    let error = start("127.0.0.1:0", Some("short"))
        .await
        .err()
        .expect("refused")
        .to_string();
    assert!(error.contains("too short"), "{error}");
    let console = start("0.0.0.0:0", Some("0123456789abcdef"))
        .await
        .expect("with a token");
    console.stop().await;
    // The same from the command line, where the token only ever comes from the environment.
    let run = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_introspect"))
            .args(args)
            .env_remove("INTROSPECT_REGISTRY")
            .env_remove("INTROSPECT_ETCD")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("binary runs");
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (ok, err) = run(&["--memory", "console", "--listen", "0.0.0.0:0"]);
    assert!(!ok && err.contains("without a token"), "{err}");
    let (ok, err) = run(&[
        "--memory",
        "console",
        "--token-env",
        "INTROSPECT_TEST_NO_SUCH_VAR",
    ]);
    assert!(
        !ok && err.contains("INTROSPECT_TEST_NO_SUCH_VAR is not set"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_serves_a_real_etcd_fleet_behind_a_token() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let store: Arc<dyn Store> = etcd.store().await;
    let services = vec![service("shop.OrderService", "3000")];
    let _first = start_provider(&store, "shop", services.clone()).await;
    let token = "etcd-console-token-0123";
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_introspect"))
        .args([
            "--etcd",
            &etcd.endpoint(),
            "console",
            "--listen",
            "127.0.0.1:0",
        ])
        .args([
            "--token-env",
            "INTROSPECT_TEST_CONSOLE_TOKEN",
            "--discover-every",
            "1",
        ])
        .env("INTROSPECT_TEST_CONSOLE_TOKEN", token)
        .env_remove("INTROSPECT_REGISTRY")
        .env_remove("INTROSPECT_ETCD")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("binary runs");
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(10), stderr.next_line())
        .await
        .expect("the console says where it is")
        .unwrap()
        .unwrap_or_default();
    let addr: SocketAddr = line
        .strip_prefix("console at http://")
        .and_then(|rest| rest.split('/').next())
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("{line}"));
    assert!(!line.contains(token));
    let bearer = format!("Bearer {token}");
    let auth = [("Authorization", bearer.as_str())];
    assert_eq!(get(&addr, "/api/apps").await.status, 401);
    eventually(Duration::from_secs(10), "the app listed", || async {
        let apps = request(&addr, "GET", "/api/apps", &auth, "").await.json();
        apps["apps"][0]["synced"] == true
    })
    .await;
    let apps = request(&addr, "GET", "/api/apps", &auth, "").await.json();
    assert_eq!(apps["registry"], "etcd");
    assert_eq!(apps["apps"][0]["instances"], 1);
    let mut live = events(&addr, &auth).await;
    next_matching(&mut live, Duration::from_secs(2), "hello", |n, _| {
        n == "hello"
    })
    .await;
    let second = start_provider(&store, "shop", services.clone()).await;
    let address = address_of(&second).await;
    let (_, took) = next_matching(&mut live, Duration::from_secs(3), "registered", |n, d| {
        n == "app" && change_of(d, "registered", &address)
    })
    .await;
    println!("etcd: registration on the page {took:?} after the provider started");
    let started = Instant::now();
    second.shutdown().await.unwrap();
    next_matching(&mut live, Duration::from_secs(3), "stopped", |n, d| {
        n == "app" && change_of(d, "stopped", &address)
    })
    .await;
    println!(
        "etcd: graceful stop on the page {:?} after shutdown began",
        started.elapsed()
    );
    let app = request(&addr, "GET", "/api/app?name=shop", &auth, "")
        .await
        .json();
    assert_eq!(
        app["revisions"][0]["services"][0]["params"]["timeout"],
        "3000"
    );
    let service = request(
        &addr,
        "GET",
        "/api/service?name=shop.OrderService",
        &auth,
        "",
    )
    .await
    .json();
    assert_eq!(service["total"], 1);
    child.kill().await.unwrap();
}

// ---- write actions ----

/// The token of the consoles that act.
const TOKEN: &str = "action-token-0123456789";

/// Logs in with `token`; the `name=value` pair of the session cookie, and its label.
async fn login(console: &impl Listening, token: &str) -> (String, String) {
    let answer = request(
        console,
        "POST",
        "/api/login",
        &[],
        &format!(r#"{{"token":"{token}"}}"#),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let pair = answer.headers["set-cookie"]
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let label = answer.json()["session"].as_str().unwrap().to_owned();
    (pair, label)
}

/// A POST of `body` to an action with the session cookie `cookie`.
async fn act(console: &impl Listening, cookie: &str, action: &str, body: &str) -> Answer {
    let path = format!("/api/actions/{action}");
    request(console, "POST", &path, &[("Cookie", cookie)], body).await
}

/// The text under `key` in group `dubbo`, `None` when absent.
async fn rule_text(backend: &Backend, key: &str) -> Option<String> {
    backend
        .config()
        .get(&ConfigKey::new(key, "dubbo").unwrap())
        .await
        .unwrap()
        .map(|item| item.content)
}

/// Waits until the console lists `count` instances of `app`.
async fn sees_instances(console: &impl Listening, cookie: &str, app: &str, count: usize) {
    let path = format!("/api/app?name={app}");
    eventually(Duration::from_secs(10), "the app's instances", || async {
        let answer = request(console, "GET", &path, &[("Cookie", cookie)], "").await;
        answer.status == 200 && answer.json()["instances"].as_array().map(Vec::len) == Some(count)
    })
    .await;
}

/// The disable item as Dubbo's documentation writes it ("disable a provider"), read by the
/// library's parser: what the console's own item must read as.
fn documented_disable(address: &str) -> Configurators {
    let text = format!(
        "configVersion: v2.7\nscope: application\nkey: shop\nenabled: true\nconfigs:\n\
         - addresses: [\"{address}\"]\n  side: provider\n  parameters:\n    disabled: true\n"
    );
    Configurators::parse("shop.configurators", &text).unwrap()
}

/// The weight item as dubbo-admin 0.6's `saveWeight` dumps it.
fn admin_weight(address: &str, weight: u32) -> Configurators {
    let text = format!(
        "configs:\n- addresses:\n  - {address}\n  enabled: true\n  parameters:\n    weight: {weight}\n  \
         side: provider\n  type: weight\nenabled: true\nkey: shop\nscope: application\n"
    );
    Configurators::parse("shop.configurators", &text).unwrap()
}

/// Actions over `backend` (whose registry the console reads): each action's YAML, the
/// rules it reads back, enable and clearing taking them away, and the log of it all.
async fn actions_write_what_dubbo_admin_writes(backend: Backend, a: &str, b: &str) {
    let registry = backend.name();
    let resolver = Resolver::builder(backend.clone()).build();
    let options = ConsoleOptions {
        token: Some(TOKEN.to_owned()),
        discover_every: Duration::from_millis(200),
        ..ConsoleOptions::new("127.0.0.1:0".parse().unwrap())
    };
    let console = console::start(resolver, options).await.unwrap();
    let body = |address: &str| format!(r#"{{"app":"shop","address":"{address}"}}"#);
    // Without a session: refused, nothing written.
    let refused = request(&console, "POST", "/api/actions/disable", &[], &body(a)).await;
    assert_eq!(refused.status, 401, "{}", refused.body);
    let (cookie, label) = login(&console, TOKEN).await;
    sees_instances(&console, &cookie, "shop", 2).await;
    let session = request(&console, "GET", "/api/session", &[("Cookie", &cookie)], "").await;
    assert_eq!(session.json()["actions"], true, "{}", session.body);
    assert_eq!(session.json()["session"], label);

    let disabled = act(&console, &cookie, "disable", &body(a)).await;
    assert_eq!(disabled.status, 200, "{}", disabled.body);
    assert_eq!(disabled.json()["change"], "written");
    let text = rule_text(&backend, "shop.configurators").await.unwrap();
    assert_eq!(
        text,
        format!(
            "configVersion: v3.0\nscope: application\nkey: shop\nenabled: true\nconfigs:\n\
             - addresses:\n  - {a}\n  side: provider\n  parameters:\n    disabled: true\n"
        ),
        "{registry}"
    );
    let parsed = Configurators::parse("shop.configurators", &text).unwrap();
    assert_eq!(parsed.configs(), documented_disable(a).configs());
    assert_eq!(disabled.json()["content"], text.as_str());
    // Again: the rule already says it.
    let again = act(&console, &cookie, "disable", &body(a)).await;
    assert_eq!(again.json()["change"], "unchanged", "{}", again.body);

    let weighed = act(
        &console,
        &cookie,
        "weight",
        &format!(r#"{{"app":"shop","address":"{b}","weight":300}}"#),
    )
    .await;
    assert_eq!(weighed.status, 200, "{}", weighed.body);
    let text = rule_text(&backend, "shop.configurators").await.unwrap();
    let parsed = Configurators::parse("shop.configurators", &text).unwrap();
    assert_eq!(parsed.configs().len(), 2, "{text}");
    assert_eq!(parsed.configs()[0], documented_disable(a).configs()[0]);
    assert_eq!(parsed.configs()[1], admin_weight(b, 300).configs()[0]);

    let tagged = act(
        &console,
        &cookie,
        "tag",
        &format!(r#"{{"app":"shop","address":"{a}","tag":"gray"}}"#),
    )
    .await;
    assert_eq!(tagged.status, 200, "{}", tagged.body);
    let text = rule_text(&backend, "shop.tag-router").await.unwrap();
    assert_eq!(
        text,
        format!(
            "enabled: true\nforce: false\nkey: shop\npriority: 0\nruntime: false\ntags:\n\
             - addresses:\n  - {a}\n  name: gray\n"
        )
    );
    let rule = TagRule::parse("shop.tag-router", &text).unwrap();
    assert!(rule.is_valid() && rule.is_active());

    let read = request(
        &console,
        "GET",
        "/api/actions?app=shop",
        &[("Cookie", &cookie)],
        "",
    )
    .await
    .json();
    assert_eq!(read["disabled"], serde_json::json!([a]), "{read}");
    assert_eq!(read["weights"][b], "300");
    assert_eq!(read["tags"][a], "gray");

    // Enable takes the disable item away, and the weight's stays; clearing the weight
    // leaves no item: the key goes, as dubbo-admin deletes an emptied rule.
    let enabled = act(&console, &cookie, "enable", &body(a)).await;
    assert_eq!(enabled.status, 200, "{}", enabled.body);
    let text = rule_text(&backend, "shop.configurators").await.unwrap();
    let parsed = Configurators::parse("shop.configurators", &text).unwrap();
    assert_eq!(parsed.configs(), admin_weight(b, 300).configs());
    let cleared = act(
        &console,
        &cookie,
        "weight",
        &format!(r#"{{"app":"shop","address":"{b}","weight":null}}"#),
    )
    .await;
    assert_eq!(cleared.json()["change"], "deleted", "{}", cleared.body);
    assert_eq!(rule_text(&backend, "shop.configurators").await, None);
    let untagged = act(
        &console,
        &cookie,
        "tag",
        &format!(r#"{{"app":"shop","address":"{a}","tag":null}}"#),
    )
    .await;
    assert_eq!(untagged.json()["change"], "deleted", "{}", untagged.body);
    assert_eq!(rule_text(&backend, "shop.tag-router").await, None);

    // The log: newest first, who (the session's label, the client's address), what, the
    // versions before and after.
    let log = request(&console, "GET", "/api/audit", &[("Cookie", &cookie)], "")
        .await
        .json();
    let actions = log["actions"].as_array().unwrap();
    let names: Vec<&str> = actions
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "untag",
            "clear-weight",
            "enable",
            "tag",
            "weight",
            "disable",
            "disable"
        ]
    );
    for entry in actions {
        assert_eq!(entry["session"], label);
        assert_eq!(entry["outcome"], "ok");
        assert!(entry["client"].as_str().unwrap().starts_with("127.0.0.1:"));
        assert_eq!(entry["group"], "dubbo");
    }
    let first = &actions[6];
    assert_eq!(first["key"], "shop.configurators");
    assert_eq!(first["address"], a);
    assert!(first["version_before"].is_null() && first["version_after"].is_string());
    assert_eq!(actions[5]["change"], "unchanged");
    assert_eq!(actions[4]["version_before"], first["version_after"]);
    assert_eq!(actions[4]["value"], "300");
    assert!(actions[0]["version_after"].is_null(), "deleted");
    // Another login is another session in the log.
    let (other, other_label) = login(&console, TOKEN).await;
    assert_ne!(other_label, label);
    act(&console, &other, "enable", &body(a)).await;
    let log = request(&console, "GET", "/api/audit", &[("Cookie", &other)], "")
        .await
        .json();
    assert_eq!(log["actions"][0]["session"], other_label);
    assert_eq!(log["recorded"], 8);
    console.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_write_what_dubbo_admin_writes_on_the_embedded_store() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let services = vec![service("shop.OrderService", "3000")];
    let one = start_provider(&store, "shop", services.clone()).await;
    let two = start_provider(&store, "shop", services).await;
    let (a, b) = (address_of(&one).await, address_of(&two).await);
    actions_write_what_dubbo_admin_writes(Backend::from(store.clone()), &a, &b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_write_what_dubbo_admin_writes_on_zookeeper() {
    let Some(server) = ZooKeeperServer::start().await else {
        return;
    };
    let backend = server.backend().await;
    let provider = |backend: Backend| async move {
        introspect::Provider::builder("shop", backend)
            .serve_metadata_on("127.0.0.1:0".parse().unwrap())
            .lease_ttl(Duration::from_secs(2))
            .drain_period(Duration::from_millis(50))
            .export(service("shop.OrderService", "3000"))
            .start()
            .await
            .expect("provider starts")
    };
    let one = provider(backend.clone()).await;
    let two = provider(backend.clone()).await;
    let (a, b) = (address_of(&one).await, address_of(&two).await);
    actions_write_what_dubbo_admin_writes(backend.clone(), &a, &b).await;
    // Where Dubbo Java reads it: the node /dubbo/config/dubbo/{key}, written through the
    // backend's own path; a fresh connection reads it there.
    let fresh = server.backend().await;
    let resolver = Resolver::builder(fresh.clone()).build();
    let console = console::start(
        resolver,
        ConsoleOptions {
            token: Some(TOKEN.to_owned()),
            discover_every: Duration::from_millis(200),
            ..ConsoleOptions::new("127.0.0.1:0".parse().unwrap())
        },
    )
    .await
    .unwrap();
    let (cookie, _) = login(&console, TOKEN).await;
    sees_instances(&console, &cookie, "shop", 2).await;
    let body = format!(r#"{{"app":"shop","address":"{a}"}}"#);
    assert_eq!(act(&console, &cookie, "disable", &body).await.status, 200);
    let node = zookeeper_client::Client::connect(&server.address())
        .await
        .unwrap()
        .get_data("/dubbo/config/dubbo/shop.configurators")
        .await
        .unwrap()
        .0;
    let text = String::from_utf8(node).unwrap();
    assert_eq!(
        Configurators::parse("shop.configurators", &text)
            .unwrap()
            .configs(),
        documented_disable(&a).configs()
    );
    console.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_merge_into_a_changed_rule_and_two_consoles_lose_nothing() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let backend = Backend::from(store.clone());
    let services = vec![service("shop.OrderService", "3000")];
    let mut providers = Vec::new();
    let mut addresses = Vec::new();
    for _ in 0..4 {
        let p = start_provider(&store, "shop", services.clone()).await;
        addresses.push(address_of(&p).await);
        providers.push(p);
    }
    let first = console_over(&store, Some(TOKEN)).await;
    let second = console_over(&store, Some(TOKEN)).await;
    let (c1, _) = login(&first, TOKEN).await;
    let (c2, _) = login(&second, TOKEN).await;
    sees_instances(&first, &c1, "shop", 4).await;
    sees_instances(&second, &c2, "shop", 4).await;
    let body = |address: &str| format!(r#"{{"app":"shop","address":"{address}"}}"#);
    assert_eq!(
        act(&first, &c1, "disable", &body(&addresses[0]))
            .await
            .status,
        200
    );
    // Someone else adds an item of their own (a consumer-side timeout) by hand.
    let text = rule_text(&backend, "shop.configurators").await.unwrap();
    let theirs = format!(
        "{text}- side: consumer\n  addresses: [0.0.0.0]\n  parameters:\n    timeout: 5000\n"
    );
    put_rule(&backend, "shop.configurators", &theirs).await;
    assert_eq!(
        act(&first, &c1, "disable", &body(&addresses[1]))
            .await
            .status,
        200
    );
    let text = rule_text(&backend, "shop.configurators").await.unwrap();
    assert!(text.contains("timeout: 5000"), "their item stays: {text}");
    assert_eq!(
        Configurators::parse("shop.configurators", &text)
            .unwrap()
            .configs()
            .len(),
        3
    );
    // Two consoles act on the same rule at once: each answer that says ok is in the rule;
    // one that lost the race twice says so, with the rule as it is now.
    let asks = [
        (
            &first,
            &c1,
            "weight",
            addresses[2].clone(),
            r#","weight":7"#,
        ),
        (
            &second,
            &c2,
            "weight",
            addresses[3].clone(),
            r#","weight":9"#,
        ),
        (&first, &c1, "disable", addresses[2].clone(), ""),
        (&second, &c2, "disable", addresses[3].clone(), ""),
        (&first, &c1, "enable", addresses[0].clone(), ""),
        (
            &second,
            &c2,
            "tag",
            addresses[1].clone(),
            r#","tag":"gray""#,
        ),
    ];
    let answers = futures::future::join_all(asks.iter().map(
        |(console, cookie, action, address, extra)| {
            let body = format!(r#"{{"app":"shop","address":"{address}"{extra}}}"#);
            async move { act(*console, cookie, action, &body).await }
        },
    ))
    .await;
    let text = rule_text(&backend, "shop.configurators").await.unwrap();
    let rules = introspect_cli::rule::instance::InstanceRules::read(
        Some(&text),
        rule_text(&backend, "shop.tag-router").await.as_deref(),
    );
    let mut conflicts = 0;
    for ((_, _, action, address, _), answer) in asks.iter().zip(&answers) {
        match answer.status {
            200 => match *action {
                "weight" => assert!(rules.weights.contains_key(address), "{text}"),
                "disable" => assert!(rules.disabled.contains(address), "{text}"),
                "enable" => assert!(!rules.disabled.contains(address), "{text}"),
                _ => assert_eq!(rules.tags[address], "gray"),
            },
            409 => {
                conflicts += 1;
                assert!(
                    answer.json()["current"]["content"].is_string(),
                    "{}",
                    answer.body
                );
                assert_eq!(answer.json()["action"]["outcome"], "conflict");
            }
            other => panic!("{action} {address}: {other} {}", answer.body),
        }
    }
    assert!(text.contains("timeout: 5000"), "their item stays: {text}");
    assert!(rules.disabled.contains(&addresses[1]), "{text}");
    println!("two consoles, six actions at once: {conflicts} lost the race twice");
    first.stop().await;
    second.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_need_a_token_a_session_and_sound_input() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let backend = Backend::from(store.clone());
    let one = start_provider(&store, "shop", vec![service("shop.OrderService", "1")]).await;
    let a = address_of(&one).await;
    let body = format!(r#"{{"app":"shop","address":"{a}"}}"#);
    // A console without a token reads, and refuses every action with why.
    let open = console_over(&store, None).await;
    let refused = request(&open, "POST", "/api/actions/disable", &[], &body).await;
    assert_eq!(refused.status, 403);
    assert!(
        refused.json()["error"]
            .as_str()
            .unwrap()
            .contains("read-only")
    );
    let session = get(&open, "/api/session").await.json();
    assert_eq!(session["actions"], false);
    assert!(session["why_not"].as_str().unwrap().contains("--token-env"));
    open.stop().await;

    let console = console_over(&store, Some(TOKEN)).await;
    for path in [
        "/api/actions/disable",
        "/api/actions/weight",
        "/api/actions/tag",
    ] {
        assert_eq!(
            request(&console, "POST", path, &[], &body).await.status,
            401
        );
    }
    let forged = [(
        "Cookie",
        "introspect_console=00112233445566778899aabbccddeeff",
    )];
    assert_eq!(
        request(&console, "POST", "/api/actions/disable", &forged, &body)
            .await
            .status,
        401
    );
    assert_eq!(get(&console, "/api/audit").await.status, 401);
    // The token itself acts, as `bearer`.
    let bearer = format!("Bearer {TOKEN}");
    let (cookie, _) = login(&console, TOKEN).await;
    sees_instances(&console, &cookie, "shop", 1).await;
    let by_bearer = request(
        &console,
        "POST",
        "/api/actions/disable",
        &[("Authorization", &bearer)],
        &body,
    )
    .await;
    assert_eq!(by_bearer.status, 200, "{}", by_bearer.body);
    assert_eq!(by_bearer.json()["action"]["session"], "bearer");
    // Another site's page is refused even with the cookie.
    let cross = request(
        &console,
        "POST",
        "/api/actions/enable",
        &[("Cookie", &cookie), ("Origin", "http://evil.example")],
        &body,
    )
    .await;
    assert_eq!(cross.status, 403, "{}", cross.body);

    let written = rule_text(&backend, "shop.configurators").await;
    let w = |weight: &str| format!(r#"{{"app":"shop","address":"{a}","weight":{weight}}}"#);
    let t = |tag: &str| format!(r#"{{"app":"shop","address":"{a}","tag":{tag}}}"#);
    for (action, hostile, status, says) in [
        (
            "disable",
            r#"{"app":"sh/op","address":"10.0.0.1:1"}"#.to_owned(),
            400,
            "app name",
        ),
        (
            "disable",
            r#"{"app":"shop","address":"0.0.0.0:20880"}"#.to_owned(),
            400,
            "every host",
        ),
        (
            "disable",
            r#"{"app":"shop","address":"10.0.0.1"}"#.to_owned(),
            400,
            "host:port",
        ),
        (
            "disable",
            r#"{"app":"shop","address":"10.0.0.1:70000"}"#.to_owned(),
            400,
            "port",
        ),
        (
            "disable",
            r#"{"app":"shop","address":"x\ny:1"}"#.to_owned(),
            400,
            "DNS name",
        ),
        (
            "disable",
            r#"{"app":"shop"}"#.to_owned(),
            400,
            "address is needed",
        ),
        (
            "disable",
            r#"{"app":"shop","address":"10.0.0.1:1","weight":3}"#.to_owned(),
            400,
            "unknown field",
        ),
        ("disable", "[1,2]".to_owned(), 400, "JSON object"),
        ("disable", "{not json".to_owned(), 400, "JSON"),
        (
            "disable",
            r#"{"app":"shop","address":"10.9.9.9:1"}"#.to_owned(),
            404,
            "sees no instance",
        ),
        ("weight", w("-1"), 400, "from 0 to 10000"),
        ("weight", w("10001"), 400, "from 0 to 10000"),
        ("weight", w("1.5"), 400, "from 0 to 10000"),
        ("weight", w(r#""100""#), 400, "from 0 to 10000"),
        (
            "weight",
            format!(r#"{{"app":"shop","address":"{a}"}}"#),
            400,
            "weight is needed",
        ),
        ("tag", t(r#""a b""#), 400, "letters, digits"),
        (
            "tag",
            t(&format!("\"{}\"", "t".repeat(65))),
            400,
            "longer than 64",
        ),
        ("tag", t("7"), 400, "must be a string"),
    ] {
        let answer = act(&console, &cookie, action, &hostile).await;
        assert_eq!(answer.status, status, "{action} {hostile}: {}", answer.body);
        let error = answer.json()["error"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(error.contains(says), "{action} {hostile}: {error}");
    }
    // Too large a body is cut off before it is read.
    let huge = format!(r#"{{"app":"{}","address":"{a}"}}"#, "s".repeat(10_000));
    assert_eq!(act(&console, &cookie, "disable", &huge).await.status, 413);
    assert_eq!(
        rule_text(&backend, "shop.configurators").await,
        written,
        "nothing written"
    );
    // A rule that does not parse is not overwritten: the action says why.
    put_rule(&backend, "shop.tag-router", "tags: [\n  - name: gray\n").await;
    let broken = act(&console, &cookie, "tag", &t(r#""gray""#)).await;
    assert_eq!(broken.status, 422, "{}", broken.body);
    assert!(
        broken.json()["error"]
            .as_str()
            .unwrap()
            .contains("does not parse")
    );
    assert_eq!(
        rule_text(&backend, "shop.tag-router").await.as_deref(),
        Some("tags: [\n  - name: gray\n")
    );
    // The refusals by a session are in the log; the unauthenticated ones are not.
    let log = request(&console, "GET", "/api/audit", &[("Cookie", &cookie)], "")
        .await
        .json();
    let outcomes: Vec<&str> = log["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes.iter().filter(|o| **o == "ok").count(),
        1,
        "{outcomes:?}"
    );
    assert_eq!(
        outcomes.iter().filter(|o| **o == "refused").count(),
        20,
        "{outcomes:?}"
    );
    console.stop().await;
}

/// A config centre where another writer changes the rule just before each of this
/// console's next `times` writes: the interleaving a retry exists for, made certain. Its
/// writes are real ones, to the real store underneath.
struct Meddler {
    inner: Arc<dyn introspect::backend::ConfigCentre>,
    times: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl introspect::backend::ConfigCentre for Meddler {
    async fn get(&self, key: &ConfigKey) -> introspect::Result<Option<ConfigItem>> {
        self.inner.get(key).await
    }

    async fn follow(&self, key: &ConfigKey) -> introspect::Result<ConfigFollow> {
        self.inner.follow(key).await
    }

    async fn put(
        &self,
        key: &ConfigKey,
        write: ConfigWrite<'_>,
    ) -> introspect::Result<ConfigVersion> {
        use std::sync::atomic::Ordering;
        let left = self.times.load(Ordering::SeqCst);
        if left > 0 {
            self.times.store(left - 1, Ordering::SeqCst);
            let current = self.inner.get(key).await?.expect("a rule to meddle with");
            let theirs = format!(
                "{}- side: consumer\n  parameters:\n    retries: '{left}'\n",
                current.content
            );
            self.inner
                .put(key, ConfigWrite::replace(&theirs, &current.version))
                .await?;
        }
        self.inner.put(key, write).await
    }

    async fn delete(&self, key: &ConfigKey, expected: &ConfigVersion) -> introspect::Result<()> {
        self.inner.delete(key, expected).await
    }

    async fn list(&self, group: &str) -> introspect::Result<Vec<String>> {
        self.inner.list(group).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_meets_another_is_retried_once_then_reported() {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let plain = Backend::from(store.clone());
    let services = vec![service("shop.OrderService", "3000")];
    let one = start_provider(&store, "shop", services.clone()).await;
    let two = start_provider(&store, "shop", services).await;
    let (a, b) = (address_of(&one).await, address_of(&two).await);
    let meddler = Arc::new(Meddler {
        inner: plain.config().clone(),
        times: std::sync::atomic::AtomicUsize::new(0),
    });
    // Built of parts: a resolver rebuilds a key-value backend from its store, which would
    // drop a config centre given with `with_config`.
    let backend = Backend::new(
        "memory",
        plain.instances().clone(),
        plain.mapping().clone(),
        plain.reports().clone(),
    )
    .with_consumers(plain.consumers().clone())
    .with_config(meddler.clone());
    let options = ConsoleOptions {
        token: Some(TOKEN.to_owned()),
        discover_every: Duration::from_millis(200),
        ..ConsoleOptions::new("127.0.0.1:0".parse().unwrap())
    };
    let console = console::start(Resolver::builder(backend).build(), options)
        .await
        .unwrap();
    let (cookie, _) = login(&console, TOKEN).await;
    sees_instances(&console, &cookie, "shop", 2).await;
    let body = |address: &str| format!(r#"{{"app":"shop","address":"{address}"}}"#);
    assert_eq!(
        act(&console, &cookie, "disable", &body(&a)).await.status,
        200
    );
    // Once: read again, merged, written; their item and ours are both there.
    meddler.times.store(1, std::sync::atomic::Ordering::SeqCst);
    let retried = act(&console, &cookie, "disable", &body(&b)).await;
    assert_eq!(retried.status, 200, "{}", retried.body);
    assert_eq!(retried.json()["action"]["retried"], true);
    let text = rule_text(&plain, "shop.configurators").await.unwrap();
    let rules = introspect_cli::rule::instance::InstanceRules::read(Some(&text), None);
    assert_eq!(rules.disabled, [a.clone(), b.clone()], "{text}");
    assert!(text.contains("retries: '1'"), "{text}");
    // Twice: nothing of ours written, the answer shows the rule as it is now.
    meddler.times.store(2, std::sync::atomic::Ordering::SeqCst);
    let lost = act(&console, &cookie, "enable", &body(&a)).await;
    assert_eq!(lost.status, 409, "{}", lost.body);
    let now = rule_text(&plain, "shop.configurators").await.unwrap();
    assert_eq!(lost.json()["current"]["content"], now.as_str());
    assert!(
        now.contains("retries: '2'") && now.contains("retries: '1'"),
        "{now}"
    );
    let rules = introspect_cli::rule::instance::InstanceRules::read(Some(&now), None);
    assert_eq!(
        rules.disabled,
        [a.clone(), b.clone()],
        "the enable was not written"
    );
    let entry = &lost.json()["action"];
    assert_eq!(entry["outcome"], "conflict");
    assert_eq!(entry["retried"], true);
    console.stop().await;
}

/// The interface level on a real ZooKeeper: the service page shows the provider URLs beside
/// the application level and where each interface stands in a migration, and a consumer
/// that falls back to the interface level is listed with its level, why, and the
/// interface-only flag of its providers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_interface_level_and_a_migration_left_to_do_show_on_zookeeper() {
    use introspect::consumer::{MigrationStep, SubscribeOptions};
    use introspect::provider::RegisterMode;
    let Some(server) = ZooKeeperServer::start().await else {
        return;
    };
    let backend = server.backend().await;
    let provider = |app: &'static str, interface: &'static str, mode: RegisterMode| {
        let backend = backend.clone();
        async move {
            introspect::Provider::builder(app, backend)
                .register_mode(mode)
                .port(crate::support::ports::free_low_port(false))
                .serve_metadata_on("127.0.0.1:0".parse().unwrap())
                .drain_period(Duration::from_millis(50))
                .export(ServiceInfo::new(interface).with_protocol("tri"))
                .start()
                .await
                .expect("provider starts")
        }
    };
    let _both = provider("shop", "shop.OrderService", RegisterMode::All).await;
    let _legacy = provider("shop-legacy", "shop.LegacyService", RegisterMode::Interface).await;
    let consumer = Resolver::builder(server.backend().await)
        .register_consumer("shop-web")
        .consumer_refresh(Duration::from_millis(500))
        .subscribe_options(
            SubscribeOptions::default().migration_step(MigrationStep::ApplicationFirst),
        )
        .build();
    let _subscription = consumer
        .subscribe(Subscription::new("shop.LegacyService"))
        .await
        .expect("subscribes");
    let console = console::start(
        Resolver::builder(server.backend().await).build(),
        ConsoleOptions {
            audit_every: Duration::from_millis(200),
            ..ConsoleOptions::new("127.0.0.1:0".parse().unwrap())
        },
    )
    .await
    .unwrap();
    for (interface, migration, application, urls) in [
        ("shop.OrderService", "both", 1, 1),
        ("shop.LegacyService", "interface-only", 0, 1),
    ] {
        let path = format!("/api/service?name={interface}");
        let seen = read_until(&console, &path, |v| v["migration"] == migration).await;
        assert_eq!(
            (&seen["total"], &seen["interface_level"]["total"]),
            (&serde_json::json!(application), &serde_json::json!(urls)),
            "{seen}"
        );
        assert_eq!(
            seen["interface_level"]["endpoints"][0]["level"], "interface",
            "{seen}"
        );
    }
    let listed = read_until(
        &console,
        "/api/consumers?interface=shop.LegacyService",
        |v| v["interface_only"] == 1,
    )
    .await;
    let row = &listed["consumers"][0];
    assert_eq!(
        (&row["app"], &row["level"], &row["step"], &row["fallback"]),
        (
            &serde_json::json!("shop-web"),
            &serde_json::json!("interface"),
            &serde_json::json!("APPLICATION_FIRST"),
            &serde_json::json!(true)
        ),
        "{listed}"
    );
    assert_eq!(
        (&row["interface_only"], &row["verdict"]),
        (&serde_json::json!(true), &serde_json::json!("same")),
        "{listed}"
    );
    console.stop().await;
}

/// `path`'s answer once `done` holds of it, or the last one after 10 s.
async fn read_until(console: &Console, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = get(console, path).await.json();
        if done(&answer) || Instant::now() > deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
