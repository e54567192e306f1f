//! The console in a real browser: headless Chromium driven by Playwright
//! (`tests/browser/console_browser.py`) over a real fleet on the embedded store. It
//! searches an app, opens it, sees the instances grouped by revision and the difference of
//! two revisions, has a provider killed and sees it leave, then sees self-preservation hold
//! a second app when 6 of its 8 providers crash at once, and sees a registered consumer
//! whose connection is cut marked stale once the fleet changes without it. A second run,
//! on a console with a token, logs in, disables an instance, sees the action in the
//! action log and the rule written, and enables it again.
//!
//! Opt-in: it needs `scripts/setup.sh --with-browser` (Debian's `chromium` and a
//! virtualenv with PyPI's `playwright` at `target/browser-venv`, or
//! INTROSPECT_BROWSER_VENV). Without them it says so and passes, unless
//! INTROSPECT_BROWSER=1 asks for it, then it fails. INTROSPECT_SCREENSHOT=PATH saves the
//! app page there.

use introspect::backend::{ConfigKey, ConfigWrite};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use crate::support::faulty::FaultyStore;
use crate::support::fleet::start_provider_with;
use introspect::consumer::{Resolver, Subscription};
use introspect::{Backend, MemoryStore, ServiceInfo, Store};
use introspect_cli::console::{self, ConsoleOptions};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

/// A condition rule of the service the page shows in force; it routes only `Refund` calls.
const CONDITION_RULE: (&str, &str) = (
    "shop.OrderService::.condition-router",
    "configVersion: v3.0\nscope: service\nkey: shop.OrderService\nenabled: true\n\
     conditions:\n  - 'method = Refund => port != 1'\n",
);
/// A tag rule of the first app that is not YAML: the page marks it "not applied".
const BROKEN_RULE: (&str, &str) = (
    "shop-orders.tag-router",
    "configVersion: v3.0\nkey: shop-orders\ntags: [\n  - name: gray\n",
);

/// The app that loses most of its providers at once.
const FLEET_APP: &str = "shop-stock";
/// Its providers; the script crashes three quarters of them.
const FLEET_SIZE: usize = 8;

fn service(timeout: &str) -> ServiceInfo {
    let mut s = ServiceInfo::new("shop.OrderService");
    s.version = "1.0".into();
    s.protocol = "tri".into();
    s.params.insert("timeout".into(), timeout.into());
    s.params.insert("note".into(), "<b>bold</b>".into());
    // The routing panel shows each provider's effective weight: without warm-up, the
    // published 100 (a provider seconds old would weigh 1 under Dubbo's 10 minutes).
    s.params.insert("warmup".into(), "0".into());
    s
}

/// The virtualenv's python, if the setup made it.
fn browser_python() -> Option<PathBuf> {
    let venv = std::env::var_os("INTROSPECT_BROWSER_VENV").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/browser-venv"),
        PathBuf::from,
    );
    let python = venv.join("bin/python");
    python.exists().then_some(python)
}

/// The virtualenv's python, or `None` (said, and a failure when INTROSPECT_BROWSER=1).
fn python_or_skip() -> Option<PathBuf> {
    let required = std::env::var("INTROSPECT_BROWSER").is_ok_and(|v| v == "1");
    let python = browser_python();
    if python.is_none() {
        assert!(
            !required,
            "INTROSPECT_BROWSER=1 but no browser venv: run scripts/setup.sh --with-browser"
        );
        eprintln!(
            "skipped: no browser venv (scripts/setup.sh --with-browser, then INTROSPECT_BROWSER=1)"
        );
    }
    python
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_reads_a_live_fleet_its_holds_and_a_stale_consumer() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let memory = Arc::new(MemoryStore::new());
    let store: Arc<dyn Store> = memory.clone();
    let short_lease =
        |b: introspect::provider::ProviderBuilder| b.lease_ttl(Duration::from_secs(1));
    let mut providers = Vec::new();
    for timeout in ["3000", "3000", "1500"] {
        providers.push(
            start_provider_with(&store, "shop-orders", vec![service(timeout)], short_lease).await,
        );
    }
    let _other =
        start_provider_with(&store, "shop-payments", vec![service("100")], short_lease).await;
    let mut fleet = Vec::new();
    for _ in 0..FLEET_SIZE {
        fleet.push(start_provider_with(&store, FLEET_APP, vec![service("200")], short_lease).await);
    }
    let config = Backend::from(store.clone()).config().clone();
    for (key, text) in [CONDITION_RULE, BROKEN_RULE] {
        config
            .put(
                &ConfigKey::new(key, "dubbo").unwrap(),
                ConfigWrite::create(text),
            )
            .await
            .unwrap();
    }
    let options = ConsoleOptions {
        discover_every: Duration::from_millis(500),
        audit_every: Duration::from_millis(500),
        stale_after: Duration::from_secs(3),
        ..ConsoleOptions::new("127.0.0.1:0".parse().unwrap())
    };
    let console = console::start(Resolver::new(store.clone()), options)
        .await
        .unwrap();
    // A consumer that registers its record, over a connection of its own that the script
    // has cut near the end (its record outlives the cut: a 60 s lease).
    let connection = Arc::new(FaultyStore::new(memory.clone()));
    let consumer = Resolver::builder(connection.clone() as Arc<dyn Store>)
        .register_consumer("shop-web")
        .consumer_refresh(Duration::from_millis(500))
        .consumer_ttl(Duration::from_secs(60))
        .build();
    let _subscription = consumer
        .subscribe(Subscription::new("shop.OrderService"))
        .await
        .unwrap();
    let url = format!("http://{}/", console.local_addr());
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser/console_browser.py");
    let mut child = Command::new(python)
        .arg(script)
        .arg(&url)
        .arg("shop-orders")
        .arg(FLEET_APP)
        .arg(FLEET_SIZE.to_string())
        .arg(CONDITION_RULE.0)
        .arg(BROKEN_RULE.0)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python runs");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let drive = async {
        let mut ok = false;
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(address) = line.strip_prefix("KILL ") {
                let mut victim = None;
                for (n, p) in providers.iter().enumerate() {
                    if p.instance().await.key_address() == address {
                        victim = Some(n);
                    }
                }
                let victim = providers.remove(victim.expect("the page shows a provider of ours"));
                // A crash: no deregistration, the record goes with its 1 s lease.
                victim.abort();
                stdin.write_all(b"KILLED\n").await.unwrap();
            } else if let Some(count) = line.strip_prefix("CRASH ") {
                // Crashes at once, as a partition looks from the registry: every lease
                // expires in the same second.
                let count: usize = count.parse().expect("a count");
                for provider in fleet.drain(..count) {
                    provider.abort();
                }
                stdin.write_all(b"CRASHED\n").await.unwrap();
            } else if line == "CUT" {
                connection.set_down(true);
                // Its open watches end with the connection; the console follows again.
                memory.cancel_watches();
                providers.push(
                    start_provider_with(&store, "shop-orders", vec![service("3000")], short_lease)
                        .await,
                );
                stdin.write_all(b"CUT-DONE\n").await.unwrap();
            } else if line.starts_with("LEFT ") {
                println!("the killed provider's row {line}");
            } else if line == "OK" {
                ok = true;
            }
        }
        ok
    };
    let ok = tokio::time::timeout(Duration::from_secs(90), drive)
        .await
        .expect("the browser run ends");
    let status = child.wait().await.unwrap();
    assert!(
        status.success() && ok,
        "the browser script failed: {status}"
    );
    console.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_logs_in_disables_an_instance_and_enables_it_again() {
    let Some(python) = python_or_skip() else {
        return;
    };
    let token = "browser-action-token-0123";
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let mut providers = Vec::new();
    for timeout in ["3000", "3000"] {
        providers
            .push(start_provider_with(&store, "shop-orders", vec![service(timeout)], |b| b).await);
    }
    let backend = Backend::from(store.clone());
    let options = ConsoleOptions {
        token: Some(token.to_owned()),
        discover_every: Duration::from_millis(500),
        ..ConsoleOptions::new("127.0.0.1:0".parse().unwrap())
    };
    let console = console::start(Resolver::new(store.clone()), options)
        .await
        .unwrap();
    let url = format!("http://{}/", console.local_addr());
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser/console_browser.py");
    let mut child = Command::new(python)
        .arg(script)
        .args(["actions", &url, "shop-orders"])
        .env("INTROSPECT_TEST_CONSOLE_TOKEN", token)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("python runs");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let drive = async {
        let mut ok = false;
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.strip_prefix("CHECK ") {
                let (what, address) = rest.split_once(' ').expect("CHECK WHAT ADDRESS");
                let text = backend
                    .config()
                    .get(&ConfigKey::new("shop-orders.configurators", "dubbo").unwrap())
                    .await
                    .unwrap()
                    .map(|item| item.content);
                let rules =
                    introspect_cli::rule::instance::InstanceRules::read(text.as_deref(), None);
                let holds = match what {
                    "DISABLED" => rules.disabled == [address],
                    // Enabling the only disabled instance leaves no item: the key goes.
                    _ => text.is_none(),
                };
                let answer = if holds {
                    "YES".to_owned()
                } else {
                    format!("{text:?}")
                };
                stdin
                    .write_all(format!("{}\n", answer.replace('\n', "\\n")).as_bytes())
                    .await
                    .unwrap();
            } else if line == "OK" {
                ok = true;
            }
        }
        ok
    };
    let ok = tokio::time::timeout(Duration::from_secs(60), drive)
        .await
        .expect("the browser run ends");
    let status = child.wait().await.unwrap();
    assert!(
        status.success() && ok,
        "the browser script failed: {status}"
    );
    console.stop().await;
}
