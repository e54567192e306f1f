//! The console (`introspect console`) over a real running fleet on the embedded store: the
//! JSON API's shapes, live events as providers register, stop and crash, holds with their
//! time left, registered consumers and the stale one among them, hostile and huge values,
//! 10,000 instances, the token and the cookie.

mod support;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use introspect::consumer::{ProtectionOptions, Resolver, Subscription};
use introspect::{Backend, Limits, MemoryStore, ServiceInfo, Store};
use introspect_cli::console::{self, Console, ConsoleOptions};
use serde_json::Value;
use support::etcd::EtcdServer;
use support::faulty::FaultyStore;
use support::fleet::{start_provider, start_provider_with};
use support::wait::eventually;
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
    provider.instance().await.address()
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
    let current = config.get(key, "dubbo").await.unwrap();
    config
        .put(key, "dubbo", text, current.as_ref().map(|c| &c.version))
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
            .register(&instance, Duration::from_secs(60), &Limits::default())
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
