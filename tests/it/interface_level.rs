//! Rust providers visible to interface-level Dubbo consumers (`register_mode`), on real
//! ZooKeeper and Nacos servers, judged by a real Dubbo Java 3.3 consumer at
//! `migration.step=FORCE_INTERFACE`, which reads interface-level URLs only.
//!
//! Each test first runs a Dubbo Java provider with `register-mode=interface` and reads what
//! it wrote (the ZooKeeper node `/dubbo/helloworld.Greeter/providers/{URL}`, the Nacos
//! instance of `providers:helloworld.Greeter::`), then a Rust provider with
//! `RegisterMode::All`: its URL carries every parameter Java's does except the Java
//! process's own ([`JAVA_ONLY`]), in the same layout. A provider-side rule's `weight` and
//! `disabled` show in the URL as Java's re-export writes them. The Java consumer calls the
//! Rust provider, and on a graceful stop the interface-level URL goes first: while it is
//! gone the instance record is still there (marked as stopping), and goes after the drain.
//!
//! The other way round: a Dubbo Java provider with `register-mode=interface` (no instance,
//! no mapping: invisible to an application-level consumer) is called by an Introspect
//! consumer with no step of its own (Java's default, `APPLICATION_FIRST`), at
//! `FORCE_INTERFACE` and at `APPLICATION_FIRST`, through the balanced channel, while a
//! consumer at `FORCE_APPLICATION` sees nothing and starts no interface-level follow. Hostile URLs beside the Java provider's (ZooKeeper nodes with a
//! bad encoding, no port, over the bound, `dubbo://`; Nacos instances with `dubbo`, metadata
//! over the bound, another category, a protocol that is no scheme, none) are skipped or
//! left out, counted, and cost no call.
//!
//! Both levels at once: a Dubbo Java consumer at `APPLICATION_FIRST` and an Introspect one
//! beside it, while the application level has a provider, loses it, and gets one again
//! (Java measured, Introspect matched); and one migration rule steering a Java and an
//! Introspect consumer of one app between the levels alike, and neither to a level with no
//! provider unless the rule says `force: true`.

use introspect::backend::{ConfigKey, ConfigWrite};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use introspect::governance::migration::{Level, StepSource};
use introspect::model::provider_url_read::form_decode;
use introspect::provider::{Provider, RegisterMode};
use introspect::{Backend, MigrationStep, Resolver, SubscribeOptions, Subscription};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::support::greeter::{CountingGreeter, greeter_router, greeter_service};
use crate::support::peers::{ConsumerOptions, Peer};
use crate::support::rules::put_rule;
use crate::support::wait::eventually;

/// The Rust provider's app.
const APP: &str = "iface-rust";
/// Its provider-side rules.
const APP_RULES: &str = "iface-rust.configurators";
/// The Java provider's app.
const JAVA_APP: &str = "iface-java";
/// The drain of the Rust provider's graceful stop: long enough to see the interface-level
/// URL gone while the instance record is still there.
const DRAIN: Duration = Duration::from_secs(2);
/// How long a write may take to show.
const LIMIT: Duration = Duration::from_secs(30);

/// Parameters of a Java provider's URL that describe the Java process (its logger, its
/// MetadataService, its stub, reflection, its jar), which a Rust provider does not write.
const JAVA_ONLY: [&str; 8] = [
    "logger",
    "metadata-service-port",
    "metadata-service-protocol",
    "metadata-type",
    "methods",
    "prefer.serialization",
    "proxy",
    "revision",
];

/// A Rust Greeter provider run by `Provider::serve`.
struct RustProvider {
    port: u16,
    /// Calls it answered that the Dubbo peer made.
    peer_calls: std::sync::Arc<std::sync::atomic::AtomicU64>,
    stop: Option<oneshot::Sender<()>>,
    serving: JoinHandle<introspect::Result<()>>,
}

impl RustProvider {
    async fn start(backend: &Backend, mode: RegisterMode) -> RustProvider {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let provider = Provider::builder(APP, backend.clone())
            .register_mode(mode)
            .lease_ttl(Duration::from_secs(6))
            .drain_period(DRAIN)
            .rules_publish_delay(Duration::from_millis(200))
            .warmup(Duration::ZERO)
            .export(greeter_service())
            .build()
            .expect("a valid provider");
        let (stop, stopped) = oneshot::channel::<()>();
        let greeter = CountingGreeter::new(address);
        let peer_calls = greeter.peer_counter();
        let router = greeter_router(greeter);
        let serving = tokio::spawn(provider.serve(router, listener, async {
            let _ = stopped.await;
        }));
        RustProvider {
            port: address.port(),
            peer_calls,
            stop: Some(stop),
            serving,
        }
    }

    fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    async fn stopped(self) {
        tokio::time::timeout(Duration::from_secs(15), self.serving)
            .await
            .expect("serve returns in time")
            .expect("serve task")
            .expect("graceful stop");
    }
}

/// The first `Some` that `read` gives within [`LIMIT`], polled every 20 ms.
async fn found<T, F, Fut>(what: &str, mut read: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        if let Some(value) = read().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {what} within {LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A provider-side configurator giving the instance at `port` `parameter: value`.
fn rule(port: u16, parameter: &str, value: &str) -> String {
    format!(
        "configVersion: v3.0\nscope: application\nkey: {APP}\nenabled: true\nconfigs:\n\
         - side: provider\n  addresses: ['127.0.0.1:{port}']\n  parameters:\n    {parameter}: {value}\n"
    )
}

/// A URL's address (`host:port`) and parameters.
fn parse_url(url: &str) -> (String, String, BTreeMap<String, String>) {
    let (head, query) = url.split_once('?').expect("a query");
    let (scheme, rest) = head.split_once("://").expect("a scheme");
    let address = rest.split('/').next().unwrap().to_owned();
    let params = query
        .split('&')
        .map(|pair| {
            let (k, v) = pair.split_once('=').expect("key=value");
            (k.to_owned(), v.to_owned())
        })
        .collect();
    (scheme.to_owned(), address, params)
}

/// Every Java parameter is in the Rust provider's, but for [`JAVA_ONLY`]; the identity
/// ones have the Rust provider's values.
fn assert_same_parameters(java: &BTreeMap<String, String>, rust: &BTreeMap<String, String>) {
    let java_keys: BTreeSet<&str> = java.keys().map(String::as_str).collect();
    for key in &java_keys {
        assert!(
            JAVA_ONLY.contains(key) || rust.contains_key(*key),
            "the Rust URL lacks {key}: Java {java:?}, Rust {rust:?}"
        );
    }
    for key in rust.keys() {
        assert!(
            java_keys.contains(key.as_str())
                || ["weight", "warmup", "disabled"].contains(&key.as_str()),
            "the Rust URL has {key}, which Java's has not: Java {java:?}, Rust {rust:?}"
        );
    }
    for (key, value) in [
        ("application", APP),
        ("interface", "helloworld.Greeter"),
        ("side", "provider"),
        ("dynamic", "true"),
        ("deprecated", "false"),
        ("generic", "false"),
    ] {
        assert_eq!(rust[key], value, "{key}");
        assert!(java.contains_key(key));
    }
    assert_eq!(rust["dubbo"], java["dubbo"]);
}

/// Runs the Java consumer at `FORCE_INTERFACE` and checks every call reached the Rust
/// provider at `port`.
async fn java_calls_the_rust_provider(
    java: &crate::support::peers::BuiltPeer,
    registry: &str,
    port: u16,
) {
    let options = ConsumerOptions {
        migration_step: Some("FORCE_INTERFACE"),
        ..ConsumerOptions::default()
    };
    let run = java
        .consumer_with(registry, "iface-consumer", 20, &options)
        .await;
    assert!(
        run.status.success(),
        "the Java consumer failed:\n{}",
        run.output
    );
    assert_eq!((run.ok, run.failed), (20, 0), "{}", run.output);
    assert!(
        run.message.ends_with(&format!("from 127.0.0.1:{port}")),
        "answered by {:?}:\n{}",
        run.message,
        run.output
    );
    println!(
        "Dubbo Java at FORCE_INTERFACE: 20 of 20 calls to the Rust provider (first answer after {:?})",
        run.waited
    );
}

/// An Introspect consumer with no step of its own (Dubbo Java's default, `APPLICATION_FIRST`,
/// on a backend with an interface level), then at FORCE_INTERFACE and at APPLICATION_FIRST,
/// calls the Java provider at `java_port` (registered at the interface level only) through
/// the balanced channel; one at FORCE_APPLICATION sees nothing, follows no interface level,
/// and says which level it read.
async fn introspect_calls_the_java_provider(backend: &Backend, java_port: u16) -> Resolver {
    use crate::support::peer_cases::{CALLS, call_through, wait_for_endpoints};

    let resolver = Resolver::builder(backend.clone())
        .subscribe_options(SubscribeOptions::default().start_timeout(Duration::from_secs(2)))
        .build();
    let application = resolver
        .subscribe(
            Subscription::new("helloworld.Greeter").migration(MigrationStep::ForceApplication),
        )
        .await
        .unwrap();
    assert_eq!(
        resolver.stats().await.interface_follows,
        0,
        "FORCE_APPLICATION reads no interface level"
    );
    for step in [
        None,
        Some(MigrationStep::ForceInterface),
        Some(MigrationStep::ApplicationFirst),
    ] {
        let mut asked = Subscription::new("helloworld.Greeter");
        asked.migration = step;
        let step = step.map_or_else(|| "no step of its own".to_owned(), |s| s.to_string());
        let subscription = resolver.subscribe(asked).await.unwrap();
        assert_eq!(resolver.stats().await.interface_follows, 1, "{step}");
        wait_for_endpoints(&subscription, "the Java provider's URL").await;
        let endpoints = subscription.current();
        let ports: Vec<u16> = endpoints.iter().map(|e| e.port).collect();
        assert_eq!(ports, [java_port], "{step}: {endpoints:?}");
        assert_eq!(&*endpoints[0].app, JAVA_APP);
        assert_eq!(&*endpoints[0].protocol, "tri");
        let calls = call_through(&resolver, &subscription, CALLS).await;
        assert_eq!(
            (calls.ok, calls.failed),
            (CALLS, 0),
            "{step}: {:?}",
            calls.errors
        );
        assert!(
            calls.message.starts_with("Hello ") && calls.message.contains(" from "),
            "{step}: answered by {:?}",
            calls.message
        );
        println!("Introspect with {step}: {CALLS} of {CALLS} calls to the Java provider");
        drop(subscription);
        eventually(LIMIT, "the interface-level follow to stop", || {
            let resolver = resolver.clone();
            async move { resolver.stats().await.interface_follows == 0 }
        })
        .await;
    }
    assert!(
        application.current().is_empty(),
        "the application level has no provider"
    );
    let why = application.why_empty().expect("explained").to_string();
    assert!(
        why.contains("no app is mapped")
            && why.contains("the interface level is not read at FORCE_APPLICATION"),
        "{why}"
    );
    resolver
}

/// The consumer app steered by the migration rule.
const STEERED: &str = "iface-steered";

/// Writes (or, with `None`, deletes) the consumer app's migration rule, as an operator does.
async fn set_migration_rule(backend: &Backend, text: Option<&str>) {
    use introspect::governance::migration::MIGRATION_GROUP;
    let key = format!("{STEERED}.migration");
    let config = backend.config();
    let current = config
        .get(&ConfigKey::new(&key, MIGRATION_GROUP).unwrap())
        .await
        .unwrap();
    match text {
        Some(text) => config
            .put(
                &ConfigKey::new(&key, MIGRATION_GROUP).unwrap(),
                ConfigWrite::new(text, current.as_ref().map(|c| &c.version)),
            )
            .await
            .map(drop)
            .unwrap(),
        None => config
            .delete(
                &ConfigKey::new(&key, MIGRATION_GROUP).unwrap(),
                &current.expect("the rule is there").version,
            )
            .await
            .unwrap(),
    }
}

/// Calls made through a balanced channel over `subscription`, counted per answering
/// address (the text after " from " in the reply).
async fn calls_per_provider(
    resolver: &Resolver,
    subscription: &introspect::SubscriptionHandle,
    calls: u64,
) -> BTreeMap<String, u64> {
    use crate::support::greeter::pb::HelloRequest;
    use crate::support::greeter::pb::greeter_client::GreeterClient;

    let (channel, _handle) = resolver.balanced_channel(subscription).unwrap();
    let mut client = GreeterClient::new(channel);
    let mut answered = BTreeMap::new();
    for i in 0..calls {
        let mut request = tonic::Request::new(HelloRequest {
            name: format!("steered-{i}"),
        });
        request.set_timeout(Duration::from_secs(3));
        let reply = tokio::time::timeout(Duration::from_secs(5), client.say_hello(request))
            .await
            .expect("call in time")
            .expect("call answered")
            .into_inner();
        let from = reply.message.rsplit(" from ").next().unwrap_or_default();
        *answered.entry(from.to_owned()).or_default() += 1;
    }
    answered
}

/// With a provider at `java_port` registered at the interface level only (answering
/// "from {interface_from}" when given) and a Rust provider at the application level only, the consumer app's migration rule moves
/// an Introspect consumer's calls from one set to the other and back, live: the rule's
/// step overrides the consumer's own, an `interfaces` entry the rule's step, a refused
/// rule stops no follow, and deleting the rule returns to the consumer's own.
async fn a_migration_rule_moves_the_calls(
    backend: &Backend,
    java_port: u16,
    interface_from: Option<&str>,
) {
    let mut provider = RustProvider::start(backend, RegisterMode::Instance).await;
    let rust_port = provider.port;
    let resolver = Resolver::builder(backend.clone())
        .application(STEERED)
        .subscribe_options(SubscribeOptions::default().start_timeout(Duration::from_secs(5)))
        .build();
    let subscription = resolver
        .subscribe(Subscription::new("helloworld.Greeter"))
        .await
        .unwrap();
    let goes_to = |port: u16, why: &'static str| {
        let subscription = subscription.clone();
        async move {
            eventually(LIMIT, why, || {
                let ports: Vec<u16> = subscription.current().iter().map(|e| e.port).collect();
                async move { ports == [port] }
            })
            .await;
        }
    };
    const CALLS: u64 = 12;
    // The Rust provider answers "from 127.0.0.1:{port}", the Java one with its own name.
    let rust = format!("127.0.0.1:{rust_port}");
    let only = |rust_answers: bool| {
        let rust = rust.clone();
        move |answered: &BTreeMap<String, u64>| {
            answered.len() == 1
                && answered.keys().all(|from| {
                    if rust_answers {
                        *from == rust
                    } else {
                        *from != rust && interface_from.is_none_or(|expected| from == expected)
                    }
                })
                && answered.values().sum::<u64>() == CALLS
        }
    };
    // Which level the set comes from, and why, as the handle (and the tool) says it.
    let rule_key = format!("{STEERED}.migration");
    let level_is = |level: Level, step: MigrationStep, source: StepSource| {
        let choice = subscription.level();
        assert_eq!(
            (choice.level, choice.step, &choice.source),
            (level, step, &source),
            "{choice}"
        );
    };
    // No step of its own: Java's default, APPLICATION_FIRST, on the application level
    // while it has an endpoint.
    goes_to(rust_port, "the application level by default").await;
    level_is(
        Level::Application,
        MigrationStep::ApplicationFirst,
        StepSource::Own,
    );
    let answered = calls_per_provider(&resolver, &subscription, CALLS).await;
    assert!(only(true)(&answered), "{answered:?}");
    println!("no rule: calls per provider {answered:?}");

    set_migration_rule(
        backend,
        Some(&format!("key: {STEERED}\nstep: FORCE_INTERFACE\n")),
    )
    .await;
    goes_to(
        java_port,
        "the interface level at the rule's FORCE_INTERFACE",
    )
    .await;
    level_is(
        Level::Interface,
        MigrationStep::ForceInterface,
        StepSource::Rule(rule_key.clone()),
    );
    let answered = calls_per_provider(&resolver, &subscription, CALLS).await;
    assert!(only(false)(&answered), "{answered:?}");
    println!("rule FORCE_INTERFACE: calls per provider {answered:?}");

    // A step Java does not name is refused; the next good rule is still followed.
    set_migration_rule(backend, Some("step: SOMETIMES\n")).await;
    set_migration_rule(
        backend,
        Some(&format!("key: {STEERED}\nstep: FORCE_APPLICATION\n")),
    )
    .await;
    goes_to(
        rust_port,
        "the application level at the rule's FORCE_APPLICATION",
    )
    .await;
    let answered = calls_per_provider(&resolver, &subscription, CALLS).await;
    assert!(only(true)(&answered), "{answered:?}");
    println!("rule FORCE_APPLICATION: calls per provider {answered:?}");

    // The interface's entry wins over the rule's step.
    set_migration_rule(
        backend,
        Some(&format!(
            "key: {STEERED}\nstep: FORCE_APPLICATION\ninterfaces:\n  - serviceKey: helloworld.Greeter\n    step: FORCE_INTERFACE\n"
        )),
    )
    .await;
    goes_to(java_port, "the interface level by the interface's entry").await;
    let answered = calls_per_provider(&resolver, &subscription, CALLS).await;
    assert!(only(false)(&answered), "{answered:?}");
    set_migration_rule(backend, None).await;
    goes_to(
        rust_port,
        "the consumer's own step once the rule is deleted",
    )
    .await;
    level_is(
        Level::Application,
        MigrationStep::ApplicationFirst,
        StepSource::Own,
    );
    drop(subscription);
    provider.stop();
    provider.stopped().await;
}

/// One call of a timed caller: when it returned (ms since the Unix epoch) and who answered
/// (`rust:{port}`, `java`) or why it failed.
type Timed = (u64, Result<String, String>);

/// Milliseconds since the Unix epoch, the clock of the Java consumer's logged calls.
fn epoch_ms() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    u64::try_from(now.unwrap().as_millis()).unwrap()
}

/// Who answered `message`: `rust:{port}` for a Rust provider ("... from 127.0.0.1:{port}"),
/// `java` for the Java one.
fn answered_by(message: &str) -> String {
    match message.rsplit_once(" from 127.0.0.1:") {
        Some((_, port)) => format!("rust:{port}"),
        None => "java".to_owned(),
    }
}

/// Calls through `resolver`'s balanced channel over `subscription` every 20 ms until
/// `stop`, each call timed.
fn timed_caller(
    resolver: &Resolver,
    subscription: &introspect::SubscriptionHandle,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> JoinHandle<Vec<Timed>> {
    use crate::support::greeter::pb::HelloRequest;
    use crate::support::greeter::pb::greeter_client::GreeterClient;

    let (channel, handle) = resolver.balanced_channel(subscription).unwrap();
    tokio::spawn(async move {
        let _handle = handle;
        let mut client = GreeterClient::new(channel);
        let mut calls = Vec::new();
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let mut request = tonic::Request::new(HelloRequest {
                name: "first".into(),
            });
            request.set_timeout(Duration::from_secs(2));
            let outcome =
                match tokio::time::timeout(Duration::from_secs(5), client.say_hello(request)).await
                {
                    Ok(Ok(reply)) => Ok(answered_by(&reply.into_inner().message)),
                    Ok(Err(status)) => Err(status.to_string()),
                    Err(_) => Err("hung".to_owned()),
                };
            calls.push((epoch_ms(), outcome));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        calls
    })
}

/// How calls went in a phase `[from, to)` of a timeline: answers per provider and failures.
fn phase(calls: &[Timed], from: u64, to: u64) -> (BTreeMap<String, u64>, u64) {
    let mut answered = BTreeMap::new();
    let mut failed = 0;
    for (_, outcome) in calls.iter().filter(|(at, _)| (from..to).contains(at)) {
        match outcome {
            Ok(by) => *answered.entry(by.clone()).or_default() += 1,
            Err(_) => failed += 1,
        }
    }
    (answered, failed)
}

/// The answerers of the calls in `[from, to)`, each run of calls by one answerer once, in
/// order (failures left out): `["a", "b"]` is a switch from `a` to `b` for good.
fn runs(calls: &[Timed], from: u64, to: u64) -> Vec<&str> {
    let mut runs: Vec<&str> = Vec::new();
    for (_, outcome) in calls.iter().filter(|(at, _)| (from..to).contains(at)) {
        if let Ok(by) = outcome
            && runs.last() != Some(&by.as_str())
        {
            runs.push(by);
        }
    }
    runs
}

/// One consumer's phases: before the stop, after it, after the new provider (each its
/// answers per provider and failures), then when it first reached the Java provider after
/// the stop and the new provider after its start (ms).
type Seen = (
    (BTreeMap<String, u64>, u64),
    (BTreeMap<String, u64>, u64),
    (BTreeMap<String, u64>, u64),
    Option<u64>,
    Option<u64>,
);

/// The first call at or after `from` answered by `by`, in ms after `from`.
fn first_by(calls: &[Timed], from: u64, by: &str) -> Option<u64> {
    calls
        .iter()
        .find(|(at, outcome)| *at >= from && outcome.as_deref() == Ok(by))
        .map(|(at, _)| at - from)
}

/// Waits until the Rust provider at `port` resolves at the application level (its record,
/// the mapping and its metadata written), so that consumers started after it see it in
/// their first set.
async fn resolvable(backend: &Backend, port: u16) {
    let resolver = Resolver::builder(backend.clone()).build();
    found("the Rust provider at the application level", || {
        let resolver = resolver.clone();
        async move {
            let endpoints = resolver
                .resolve(&Subscription::new("helloworld.Greeter"))
                .await
                .ok()?;
            endpoints.iter().any(|e| e.port == port).then_some(())
        }
    })
    .await;
}

/// What a Dubbo Java consumer and an Introspect consumer beside it did while a script ran.
struct SideBySide<T> {
    /// The Java consumer's run (its output, for failure messages).
    run: crate::support::peers::ConsumerRun,
    /// The Java consumer's calls, timed.
    java: Vec<Timed>,
    /// The Introspect consumer's calls, timed.
    introspect: Vec<Timed>,
    /// What the script returned.
    script: T,
}

/// Runs a Dubbo Java consumer (`java_calls` calls 20 ms apart, each logged) and an
/// Introspect consumer beside it (a balanced channel, calling every 20 ms), both at `step`
/// (`None`: each at its own default, no setting made) and, with `consumer_app`, of that app
/// and reading its migration rule from the config centre, while `script` changes the fleet;
/// the Introspect consumer calls until the script ends, the Java one until its calls are
/// made.
async fn side_by_side<T>(
    java: &crate::support::peers::BuiltPeer,
    registry: &str,
    backend: &Backend,
    (consumer_app, step): (Option<&str>, Option<MigrationStep>),
    java_calls: u32,
    script: impl std::future::Future<Output = T>,
) -> SideBySide<T> {
    let options = ConsumerOptions {
        migration_step: Some(step.map_or("DEFAULT", MigrationStep::as_str)),
        config_centre: consumer_app.is_some(),
        interval: Duration::from_millis(20),
        log_calls: true,
        ..ConsumerOptions::default()
    };
    let app = consumer_app.unwrap_or("iface-first-java");
    let java_run = java.consumer_with(registry, app, java_calls, &options);
    let mut resolver = Resolver::builder(backend.clone());
    if let Some(app) = consumer_app {
        resolver = resolver.application(app);
    }
    let mut options = SubscribeOptions::default().start_timeout(Duration::from_secs(5));
    if let Some(step) = step {
        options = options.migration_step(step);
    }
    let resolver = resolver.subscribe_options(options).build();
    let subscription = resolver
        .subscribe(Subscription::new("helloworld.Greeter"))
        .await
        .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let caller = timed_caller(&resolver, &subscription, stop.clone());
    let script = async {
        let out = script.await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        out
    };
    let (run, script) = tokio::join!(java_run, script);
    let introspect = caller.await.unwrap();
    let java = run
        .logged
        .iter()
        .map(|call| {
            let outcome = call.outcome.as_ref();
            (
                call.at_ms,
                outcome.map(|m| answered_by(m)).map_err(Clone::clone),
            )
        })
        .collect();
    SideBySide {
        run,
        java,
        introspect,
        script,
    }
}

/// APPLICATION_FIRST as a Dubbo Java 3.3 consumer lives it, and an Introspect consumer
/// beside it, neither with a step of its own (both default to it where there is an
/// interface level): a Java provider registered at the interface level only, a Rust
/// provider at the application level only. Both consumers call the Rust provider while it is there
/// (the application level has an address: Java's threshold 0.0); when it stops gracefully
/// and the application level empties, both fall back to the Java provider; when a new
/// Rust provider registers, both go back to the application level. Java is measured
/// (when each switch shows in its calls, and its failures), and Introspect must do the
/// same: the same provider in every phase, no more failures than Java.
async fn application_first_falls_back_as_java_does(registry: &str, backend: &Backend) {
    let Some(java) = Peer::Java.find() else {
        return;
    };
    let java_provider = java
        .provider_with(registry, JAVA_APP, &["--register-mode", "interface"])
        .await;
    let mut first = RustProvider::start(backend, RegisterMode::Instance).await;
    resolvable(backend, first.port).await;
    let first_by_rust = format!("rust:{}", first.port);
    let first_calls = first.peer_calls.clone();
    // Java's consumer runs 30 s of calls; the phases are driven from here.
    let script = async {
        // Both consumers call the Rust provider first: wait until Java's calls show in its
        // count.
        eventually(
            LIMIT,
            "the Java consumer calling the Rust provider",
            || async { first_calls.load(std::sync::atomic::Ordering::Relaxed) >= 50 },
        )
        .await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        let emptied = epoch_ms();
        first.stop();
        first.stopped().await;
        tokio::time::sleep(Duration::from_secs(6)).await;
        let back = epoch_ms();
        let second = RustProvider::start(backend, RegisterMode::Instance).await;
        tokio::time::sleep(Duration::from_secs(8)).await;
        (emptied, back, second)
    };
    let SideBySide {
        run,
        java: java_calls,
        introspect,
        script: (emptied, back, mut second),
    } = side_by_side(&java, registry, backend, (None, None), 1_200, script).await;
    let second_by_rust = format!("rust:{}", second.port);
    let end = epoch_ms();
    let report = |who: &str, calls: &[Timed]| -> Seen {
        let before = phase(calls, 0, emptied);
        let during = phase(calls, emptied, back);
        let after = phase(calls, back, end);
        let to_java = first_by(calls, emptied, "java");
        let to_second = first_by(calls, back, &second_by_rust);
        println!(
            "{who} at its default step: before the stop {before:?}; after it {during:?} \
             (first Java answer after {to_java:?} ms); after the new provider {after:?} \
             (its first answer after {to_second:?} ms)"
        );
        (before, during, after, to_java, to_second)
    };
    let java_seen = report("Dubbo Java", &java_calls);
    let ours = report("Introspect", &introspect);
    assert!(
        run.logged.len() >= 1_000,
        "the Java consumer logged its calls ({}):\n{}",
        run.logged.len(),
        run.output
    );
    // Java, measured: the application level while it has an address, the interface level
    // once it empties, the application level again once it has one; each switch for good.
    // Introspect does the same (sooner after the stop: it honours the stopping mark that
    // Java reads not, and leaves the draining provider at once), with no more failures.
    let first_then_java = [first_by_rust.as_str(), "java"];
    let java_then_second = ["java", second_by_rust.as_str()];
    for (who, calls, seen) in [
        ("Dubbo Java", &java_calls, &java_seen),
        ("Introspect", &introspect, &ours),
    ] {
        assert!(
            seen.3.is_some() && seen.4.is_some(),
            "{who} fell back and returned: {seen:?}"
        );
        // Java's first calls may precede its application-level read (it starts with what it
        // has); by the stop, both call the application level.
        assert_eq!(
            runs(calls, 0, emptied).last(),
            Some(&first_by_rust.as_str()),
            "{who} before the stop"
        );
        assert!(
            first_then_java.ends_with(&runs(calls, emptied, back)),
            "{who} after the stop: {:?}",
            runs(calls, emptied, back)
        );
        assert!(
            java_then_second.ends_with(&runs(calls, back, end)),
            "{who} after the new provider: {:?}",
            runs(calls, back, end)
        );
    }
    assert_eq!(
        runs(&introspect, 0, emptied),
        [first_by_rust.as_str()],
        "Introspect calls the application level from the start"
    );
    let failed = |seen: &Seen| seen.0.1 + seen.1.1 + seen.2.1;
    assert!(
        failed(&ours) <= failed(&java_seen),
        "Introspect failed {} calls, Java {}: {ours:?} vs {java_seen:?}",
        failed(&ours),
        failed(&java_seen)
    );
    second.stop();
    second.stopped().await;
    drop(java_provider);
}

/// The last application-level provider stopped as a deploy stops it (`SIGTERM` to its
/// process), or `killed` (`SIGKILL`: its record stays until its session or lease ends),
/// while the interface level has a provider: a Dubbo Java consumer and an Introspect one,
/// neither with a step of its own, both fall back to the interface level; Introspect fails
/// no more calls than Java. (The emptied-app hold keeps a stopped instance listed for a
/// while, a killed one stays registered: at `APPLICATION_FIRST` a level none of whose
/// endpoints can answer gives way to one that can, as Java leaves a level it has no
/// connection to.)
async fn a_terminated_last_provider_falls_back_as_java_does(
    registry: &str,
    backend: &Backend,
    killed: bool,
) {
    use crate::support::examples::ExampleProvider;

    let Some(java) = Peer::Java.find() else {
        return;
    };
    let java_provider = java
        .provider_with(registry, JAVA_APP, &["--register-mode", "interface"])
        .await;
    let provider =
        ExampleProvider::start_with(registry, "iface-terminated", &["--log-requests"]).await;
    resolvable(backend, provider.port).await;
    let by_rust = format!("rust:{}", provider.port);
    let script = async {
        // The Java consumer's JVM starts and calls the provider for a while before the
        // stop (its calls are named `dubbo-java`).
        eventually(
            LIMIT,
            "the Java consumer calling the Rust provider",
            || async { provider.requests_named("dubbo-java") >= 50 },
        )
        .await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let stopped = epoch_ms();
        if killed {
            provider.kill().await;
        } else {
            provider.terminate().await;
        }
        tokio::time::sleep(Duration::from_secs(8)).await;
        stopped
    };
    let SideBySide {
        run,
        java: java_calls,
        introspect,
        script: stopped,
    } = side_by_side(&java, registry, backend, (None, None), 700, script).await;
    let end = epoch_ms();
    let mut failed = Vec::new();
    for (who, calls) in [("Dubbo Java", &java_calls), ("Introspect", &introspect)] {
        let before = phase(calls, 0, stopped);
        let after = phase(calls, stopped, end);
        println!(
            "{who} at its default step, the last application-level provider {}: before \
             {before:?}; after {after:?} (first Java answer after {:?} ms)",
            if killed { "killed" } else { "terminated" },
            first_by(calls, stopped, "java")
        );
        let runs_after = runs(calls, stopped, end);
        assert!(
            [by_rust.as_str(), "java"].ends_with(&runs_after),
            "{who} after the stop: {runs_after:?}\n{}",
            run.output
        );
        let errors: Vec<&String> = calls
            .iter()
            .filter(|(at, _)| *at >= stopped)
            .filter_map(|(_, outcome)| outcome.as_ref().err())
            .take(3)
            .collect();
        if !errors.is_empty() {
            println!("{who}: the first failed calls after the stop: {errors:?}");
        }
        failed.push(before.1 + after.1);
    }
    assert!(
        runs(&introspect, 0, stopped).ends_with(&[by_rust.as_str()]),
        "Introspect calls the application level before the stop"
    );
    // A killed provider: Java's invoker learns of the closed connection from the socket and
    // its next call goes to the interface level; Introspect's next call finds the connection
    // refused (measured: 1 failed call, Java 0), then health has the endpoint out and the
    // level changes. One call more than Java is the known cost; more is a failure.
    let allowed = failed[0] + u64::from(killed);
    assert!(
        failed[1] <= allowed,
        "Introspect failed {} calls, Dubbo Java {}",
        failed[1],
        failed[0]
    );
    drop(java_provider);
}

/// A migration rule's `threshold` and `proportion` at `APPLICATION_FIRST`, on a Dubbo Java
/// consumer and an Introspect one of the same app ([`STEERED`]), a Java provider at the
/// interface level only and a Rust provider at the application level only. With
/// `threshold: 2.0` (one application-level endpoint for one interface-level one: 1.0 is
/// below it) both call the interface level; with `threshold: 0.5, proportion: 50` Java
/// sends about half of its calls to the interface level at random, while Introspect, which
/// does not apply `proportion` (a balanced channel balances one set) and says so, calls the
/// application level alone. Java's figures are printed beside Introspect's.
async fn threshold_and_proportion_beside_java(registry: &str, backend: &Backend) {
    let Some(java) = Peer::Java.find() else {
        return;
    };
    let java_provider = java
        .provider_with(
            registry,
            JAVA_APP,
            &["--register-mode", "interface", "--log-requests"],
        )
        .await;
    let mut rust = RustProvider::start(backend, RegisterMode::Instance).await;
    resolvable(backend, rust.port).await;
    let by_rust = format!("rust:{}", rust.port);
    set_migration_rule(
        backend,
        Some(&format!(
            "key: {STEERED}\nstep: APPLICATION_FIRST\nthreshold: 2.0\n"
        )),
    )
    .await;
    let script = async {
        eventually(
            LIMIT,
            "the Java consumer calling the interface level",
            || async {
                let names = java_provider.processed();
                names.iter().filter(|n| *n == "dubbo-java").count() >= 50
            },
        )
        .await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let lowered = epoch_ms();
        set_migration_rule(
            backend,
            Some(&format!(
                "key: {STEERED}\nstep: APPLICATION_FIRST\nthreshold: 0.5\nproportion: 50\n"
            )),
        )
        .await;
        tokio::time::sleep(Duration::from_secs(6)).await;
        lowered
    };
    let SideBySide {
        run,
        java: java_calls,
        introspect,
        script: lowered,
    } = side_by_side(&java, registry, backend, (Some(STEERED), None), 700, script).await;
    let end = epoch_ms();
    // The second rule is obeyed within a second by both: the shares are read after it.
    let settled = lowered + 1_000;
    for (who, calls) in [("Dubbo Java", &java_calls), ("Introspect", &introspect)] {
        let above = phase(calls, 0, lowered);
        let below = phase(calls, settled, end);
        println!("{who}: threshold 2.0 {above:?}; threshold 0.5 and proportion 50 {below:?}");
        assert_eq!(
            runs(calls, 0, lowered).last(),
            Some(&"java"),
            "{who} at threshold 2.0 calls the interface level\n{}",
            run.output
        );
        assert_eq!(above.1 + below.1, 0, "{who} failed calls");
    }
    let java_below = phase(&java_calls, settled, end).0;
    let interface_share = java_below.get("java").copied().unwrap_or(0) as f64
        / java_below.values().sum::<u64>().max(1) as f64;
    assert!(
        (0.3..=0.7).contains(&interface_share),
        "Dubbo Java at proportion 50 sends about half its calls to the interface level: \
         {java_below:?}"
    );
    assert_eq!(
        runs(&introspect, settled, end),
        [by_rust.as_str()],
        "Introspect, proportion not applied, calls the application level alone"
    );
    set_migration_rule(backend, None).await;
    rust.stop();
    rust.stopped().await;
    drop(java_provider);
}

/// One migration rule steering a Dubbo Java 3.3 consumer and an Introspect one of the same
/// consumer app ([`STEERED`]), both at `APPLICATION_FIRST`, with a Java provider at the
/// interface level only and a Rust provider at the application level only: the rule's
/// `FORCE_INTERFACE` moves both consumers' calls to the Java provider, its
/// `FORCE_APPLICATION` back to the Rust one, and deleting it leaves both at their own
/// step (the application level, which has an address). Java is measured; Introspect must
/// make the same moves with no more failures.
async fn a_migration_rule_steers_java_and_introspect_alike(registry: &str, backend: &Backend) {
    let Some(java) = Peer::Java.find() else {
        return;
    };
    let java_provider = java
        .provider_with(registry, JAVA_APP, &["--register-mode", "interface"])
        .await;
    let mut rust = RustProvider::start(backend, RegisterMode::Instance).await;
    resolvable(backend, rust.port).await;
    let by_rust = format!("rust:{}", rust.port);
    let rust_calls = rust.peer_calls.clone();
    let script = async {
        eventually(
            LIMIT,
            "the Java consumer calling the Rust provider",
            || async { rust_calls.load(std::sync::atomic::Ordering::Relaxed) >= 50 },
        )
        .await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        let forced_interface = epoch_ms();
        set_migration_rule(
            backend,
            Some(&format!("key: {STEERED}\nstep: FORCE_INTERFACE\n")),
        )
        .await;
        tokio::time::sleep(Duration::from_secs(6)).await;
        let forced_application = epoch_ms();
        set_migration_rule(
            backend,
            Some(&format!("key: {STEERED}\nstep: FORCE_APPLICATION\n")),
        )
        .await;
        tokio::time::sleep(Duration::from_secs(6)).await;
        let deleted = epoch_ms();
        set_migration_rule(backend, None).await;
        tokio::time::sleep(Duration::from_secs(4)).await;
        (forced_interface, forced_application, deleted)
    };
    let SideBySide {
        run,
        java: java_calls,
        introspect,
        script: (forced_interface, forced_application, deleted),
    } = side_by_side(
        &java,
        registry,
        backend,
        (Some(STEERED), Some(MigrationStep::ApplicationFirst)),
        1_200,
        script,
    )
    .await;
    let end = epoch_ms();
    assert!(
        run.logged.len() >= 1_000,
        "the Java consumer logged its calls ({}):\n{}",
        run.logged.len(),
        run.output
    );
    let rust_then_java = [by_rust.as_str(), "java"];
    let java_then_rust = ["java", by_rust.as_str()];
    let mut failures = Vec::new();
    for (who, calls) in [("Dubbo Java", &java_calls), ("Introspect", &introspect)] {
        let to_java = first_by(calls, forced_interface, "java");
        let to_rust = first_by(calls, forced_application, &by_rust);
        let (_, failed) = phase(calls, 0, end);
        println!(
            "{who} under the migration rule: FORCE_INTERFACE reached the Java provider after \
             {to_java:?} ms, FORCE_APPLICATION the Rust one after {to_rust:?} ms; {failed} \
             failed; phases {:?} / {:?} / {:?} / {:?}",
            phase(calls, 0, forced_interface),
            phase(calls, forced_interface, forced_application),
            phase(calls, forced_application, deleted),
            phase(calls, deleted, end),
        );
        assert_eq!(
            runs(calls, 0, forced_interface).last(),
            Some(&by_rust.as_str()),
            "{who} before the rule"
        );
        let moved = runs(calls, forced_interface, forced_application);
        assert!(
            moved.last() == Some(&"java") && rust_then_java.ends_with(&moved),
            "{who} at the rule's FORCE_INTERFACE: {moved:?}"
        );
        let back = runs(calls, forced_application, deleted);
        assert!(
            back.last() == Some(&by_rust.as_str()) && java_then_rust.ends_with(&back),
            "{who} at the rule's FORCE_APPLICATION: {back:?}"
        );
        assert_eq!(
            runs(calls, deleted, end),
            [by_rust.as_str()],
            "{who} at its own step once the rule is deleted"
        );
        failures.push(failed);
    }
    assert!(
        failures[1] <= failures[0],
        "Introspect failed {} calls, Java {}",
        failures[1],
        failures[0]
    );
    rust.stop();
    rust.stopped().await;
    drop(java_provider);
}

/// A migration rule that would move consumers to a level with no provider moves nobody
/// unless it says `force: true`, for a Dubbo Java 3.3 consumer (measured) and an Introspect
/// one alike: both of app [`STEERED`] at `APPLICATION_FIRST`, the only provider a Java one
/// at the interface level. The rule's `FORCE_APPLICATION` leaves both calling it, no call
/// failing; the same rule with `force: true` moves both to the empty application level,
/// where calls fail; deleting the rule brings both back.
async fn a_rule_to_an_empty_level_moves_nobody_unless_forced(registry: &str, backend: &Backend) {
    let Some(java) = Peer::Java.find() else {
        return;
    };
    let java_provider = java
        .provider_with(registry, JAVA_APP, &["--register-mode", "interface"])
        .await;
    let started = epoch_ms();
    let script = async {
        // The Java consumer's first calls (its start takes a few seconds).
        tokio::time::sleep(Duration::from_secs(6)).await;
        let unforced = epoch_ms();
        set_migration_rule(
            backend,
            Some(&format!("key: {STEERED}\nstep: FORCE_APPLICATION\n")),
        )
        .await;
        tokio::time::sleep(Duration::from_secs(4)).await;
        let forced = epoch_ms();
        set_migration_rule(
            backend,
            Some(&format!(
                "key: {STEERED}\nstep: FORCE_APPLICATION\nforce: true\n"
            )),
        )
        .await;
        tokio::time::sleep(Duration::from_secs(4)).await;
        let deleted = epoch_ms();
        set_migration_rule(backend, None).await;
        tokio::time::sleep(Duration::from_secs(4)).await;
        (unforced, forced, deleted)
    };
    let SideBySide {
        run,
        java: java_calls,
        introspect,
        script: (unforced, forced, deleted),
    } = side_by_side(
        &java,
        registry,
        backend,
        (Some(STEERED), Some(MigrationStep::ApplicationFirst)),
        1_000,
        script,
    )
    .await;
    let end = epoch_ms();
    assert!(
        java_calls.iter().any(|(at, _)| *at < unforced),
        "the Java consumer called before the first rule (started at {started}):\n{}",
        run.output
    );
    for (who, calls) in [("Dubbo Java", &java_calls), ("Introspect", &introspect)] {
        let before = phase(calls, 0, unforced);
        let kept = phase(calls, unforced, forced);
        let moved = phase(calls, forced, deleted);
        let back = phase(calls, deleted, end);
        println!(
            "{who}, a FORCE_APPLICATION rule with no application-level provider: before \
             {before:?}; unforced {kept:?}; forced {moved:?}; rule deleted {back:?}"
        );
        assert_eq!(
            before.0.keys().collect::<Vec<_>>(),
            ["java"],
            "{who} before: {before:?}"
        );
        assert!(
            kept.1 == 0 && kept.0.keys().eq(["java"]),
            "{who} keeps calling the interface level under the unforced rule: {kept:?}"
        );
        assert!(
            moved.1 > 0 && moved.0.get("java").copied().unwrap_or(0) < kept.0["java"],
            "{who} moved to the empty application level by the forced rule: {moved:?}"
        );
        assert_eq!(
            runs(calls, deleted, end).last(),
            Some(&"java"),
            "{who} back at its own step once the rule is deleted: {back:?}"
        );
    }
    drop(java_provider);
}

#[cfg(feature = "zookeeper")]
mod zookeeper {
    use super::*;
    use crate::support::zookeeper::{ZooKeeperServer, raw_client};

    const PROVIDERS: &str = "/dubbo/helloworld.Greeter/providers";

    /// The decoded URLs under `PROVIDERS`, with whether each node is ephemeral and its data.
    async fn urls(client: &zookeeper_client::Client) -> Vec<(String, bool, String)> {
        let Ok(children) = client.list_children(PROVIDERS).await else {
            return Vec::new();
        };
        let mut urls = Vec::new();
        for child in children {
            let Ok((data, stat)) = client.get_data(&format!("{PROVIDERS}/{child}")).await else {
                continue;
            };
            urls.push((
                form_decode(&child).expect("a node name that decodes"),
                stat.ephemeral_owner != 0,
                String::from_utf8_lossy(&data).into_owned(),
            ));
        }
        urls
    }

    async fn url_at(client: &zookeeper_client::Client, port: u16) -> Option<String> {
        urls(client)
            .await
            .into_iter()
            .map(|(url, _, _)| url)
            .find(|url| parse_url(url).1 == format!("127.0.0.1:{port}"))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_java_consumer_at_force_interface_calls_a_rust_provider_registering_all() {
        let Some(java) = Peer::Java.find() else {
            return;
        };
        let Some(server) = ZooKeeperServer::start().await else {
            return;
        };
        let registry = server.url();
        let client = raw_client(&server).await;

        // What Dubbo Java writes.
        let java_provider = java
            .provider_with(&registry, JAVA_APP, &["--register-mode", "interface"])
            .await;
        let java_port = java_provider.port;
        let written = found("Java provider's URL", || url_at(&client, java_port)).await;
        let (_, _, java_params) = parse_url(&written);
        let (_, parents) = client.get_data(PROVIDERS).await.unwrap();
        assert_eq!(parents.ephemeral_owner, 0, "Java's parents are persistent");
        java_provider.stop().await;
        eventually(LIMIT, "the Java provider's URL to go", || async {
            url_at(&client, java_port).await.is_none()
        })
        .await;

        // What the Rust provider writes.
        let backend = server.backend().await;
        let mut rust = RustProvider::start(&backend, RegisterMode::All).await;
        let port = rust.port;
        let (url, ephemeral, data) = found("Rust provider's URL", || async {
            urls(&client)
                .await
                .into_iter()
                .find(|(url, _, _)| parse_url(url).1 == format!("127.0.0.1:{port}"))
        })
        .await;
        assert!(ephemeral, "the URL node is ephemeral");
        assert_eq!(data, "127.0.0.1");
        assert!(
            url.starts_with(&format!("tri://127.0.0.1:{port}/helloworld.Greeter?")),
            "{url}"
        );
        let (_, _, rust_params) = parse_url(&url);
        assert_same_parameters(&java_params, &rust_params);
        let instance = format!("/services/{APP}/127.0.0.1:{port}");
        assert!(
            client.check_stat(&instance).await.unwrap().is_some(),
            "and the instance record"
        );

        // A provider-side rule's weight shows in the URL, as Java's re-export writes it.
        put_rule(&backend, APP_RULES, &rule(port, "weight", "300")).await;
        eventually(LIMIT, "the weight in the URL", || async {
            url_at(&client, port)
                .await
                .is_some_and(|u| parse_url(&u).2.get("weight").is_some_and(|w| w == "300"))
        })
        .await;
        assert_eq!(urls(&client).await.len(), 1, "the old URL is gone");

        java_calls_the_rust_provider(&java, &registry, port).await;

        put_rule(&backend, APP_RULES, &rule(port, "disabled", "true")).await;
        eventually(LIMIT, "disabled=true in the URL", || async {
            url_at(&client, port)
                .await
                .is_some_and(|u| parse_url(&u).2.get("disabled").is_some_and(|d| d == "true"))
        })
        .await;

        // The graceful stop: the URL goes first, the instance record after the drain.
        rust.stop();
        eventually(LIMIT, "the URL to go", || async {
            url_at(&client, port).await.is_none()
        })
        .await;
        assert!(
            client.check_stat(&instance).await.unwrap().is_some(),
            "the instance record stays through the drain"
        );
        rust.stopped().await;
        assert!(client.check_stat(&instance).await.unwrap().is_none());
    }

    /// A Java provider at `register-mode=interface`, called by an Introspect consumer at
    /// FORCE_INTERFACE and APPLICATION_FIRST; hostile nodes beside its URL cost nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_introspect_consumer_calls_a_java_provider_registering_interface() {
        use crate::support::zookeeper::create_with_parents;
        use introspect::model::provider_url::form_encode;

        let Some(java) = Peer::Java.find() else {
            return;
        };
        let Some(server) = ZooKeeperServer::start().await else {
            return;
        };
        let registry = server.url();
        let client = raw_client(&server).await;
        let java_provider = java
            .provider_with(&registry, JAVA_APP, &["--register-mode", "interface"])
            .await;
        let java_port = java_provider.port;
        found("Java provider's URL", || url_at(&client, java_port)).await;
        let hostile = [
            "tri%3A%2F%2F127.0.0.1%3A1%2Fhelloworld.Greeter%3Fa%3D%ZZ".to_owned(),
            form_encode("tri://127.0.0.1/helloworld.Greeter?interface=helloworld.Greeter"),
            form_encode("dubbo://127.0.0.1:20880/helloworld.Greeter?interface=helloworld.Greeter"),
            form_encode(&format!(
                "tri://127.0.0.1:2/helloworld.Greeter?k={}",
                "v".repeat(64 * 1024)
            )),
        ];
        for name in &hostile {
            create_with_parents(&client, &format!("{PROVIDERS}/{name}"), b"").await;
        }
        let backend = server.backend().await;
        let resolver = introspect_calls_the_java_provider(&backend, java_port).await;
        let stats = resolver.stats().await;
        assert!(stats.skipped_provider_urls >= 3, "{stats:?}");
        assert!(stats.uncallable_provider_urls >= 1, "{stats:?}");
        a_migration_rule_moves_the_calls(&backend, java_port, None).await;
        java_provider.stop().await;
    }

    /// One migration rule moves a Dubbo Java consumer's and an Introspect consumer's calls
    /// between the levels alike.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_migration_rule_steers_java_and_introspect_alike() {
        let Some(server) = ZooKeeperServer::start().await else {
            return;
        };
        let backend = server.backend().await;
        super::a_migration_rule_steers_java_and_introspect_alike(&server.url(), &backend).await;
    }

    /// A migration rule to an empty level moves neither consumer unless forced.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_rule_to_an_empty_level_moves_nobody_unless_forced() {
        let Some(server) = ZooKeeperServer::start().await else {
            return;
        };
        let backend = server.backend().await;
        super::a_rule_to_an_empty_level_moves_nobody_unless_forced(&server.url(), &backend).await;
    }

    /// APPLICATION_FIRST's fallback when the application level empties, and its return,
    /// measured on a Dubbo Java consumer and matched by an Introspect one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn application_first_falls_back_and_returns_as_java_does() {
        let Some(server) = ZooKeeperServer::start().await else {
            return;
        };
        let backend = server.backend().await;
        application_first_falls_back_as_java_does(&server.url(), &backend).await;
    }

    /// The last application-level provider's process terminated: both consumers, at their
    /// default steps, fall back to the interface level.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_terminated_last_provider_falls_back_as_java_does() {
        let Some(server) = ZooKeeperServer::start().await else {
            return;
        };
        let backend = server.backend().await;
        super::a_terminated_last_provider_falls_back_as_java_does(&server.url(), &backend, false)
            .await;
    }

    /// The last application-level provider's process killed: both consumers, at their
    /// default steps, fall back to the interface level.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_killed_last_provider_falls_back_as_java_does() {
        let Some(server) = ZooKeeperServer::start().await else {
            return;
        };
        let backend = server.backend().await;
        super::a_terminated_last_provider_falls_back_as_java_does(&server.url(), &backend, true)
            .await;
    }

    /// A migration rule's threshold decides the level alike; its proportion is Java's only.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn threshold_and_proportion_beside_java() {
        let Some(server) = ZooKeeperServer::start().await else {
            return;
        };
        let backend = server.backend().await;
        super::threshold_and_proportion_beside_java(&server.url(), &backend).await;
    }

    /// Without Java: a Rust provider registering only its interface-level URL, another
    /// only its instance; the consumer app's migration rule moves the calls between them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_migration_rule_moves_the_calls_between_the_levels() {
        let Some(server) = ZooKeeperServer::start().await else {
            return;
        };
        let backend = server.backend().await;
        let mut interface = RustProvider::start(&backend, RegisterMode::Interface).await;
        let client = raw_client(&server).await;
        found("the interface-level URL", || {
            url_at(&client, interface.port)
        })
        .await;
        let from = format!("127.0.0.1:{}", interface.port);
        a_migration_rule_moves_the_calls(&backend, interface.port, Some(&from)).await;
        interface.stop();
        interface.stopped().await;
    }

    /// With a registry group, interface-level URLs sit under `/{group}` beside the app
    /// nodes: an Introspect consumer reads them there, and the app listing does not take
    /// the interface node for an app.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn with_a_group_urls_sit_beside_apps_and_are_no_app() {
        let Some(server) = ZooKeeperServer::start().await else {
            return;
        };
        let backend = introspect::backend::connect(&format!("{}?group=g", server.url()))
            .await
            .unwrap();
        let mut rust = RustProvider::start(&backend, RegisterMode::All).await;
        let resolver = Resolver::builder(backend.clone()).build();
        let subscription = resolver
            .subscribe(
                Subscription::new("helloworld.Greeter").migration(MigrationStep::ForceInterface),
            )
            .await
            .unwrap();
        crate::support::peer_cases::wait_for_endpoints(&subscription, "the Rust URL").await;
        assert_eq!(subscription.current()[0].port, rust.port);
        let client = raw_client(&server).await;
        assert!(
            client
                .check_stat("/g/helloworld.Greeter/providers")
                .await
                .unwrap()
                .is_some()
        );
        let apps = resolver.list_apps().await.unwrap();
        assert_eq!(
            apps.keys().collect::<Vec<_>>(),
            [APP],
            "the interface node is no app: {apps:?}"
        );
        rust.stop();
        rust.stopped().await;
    }

    /// `RegisterMode::Interface`: the URL under a session of its own, no instance record and
    /// no mapping (as a Java provider with `register-mode=interface`), gone on a graceful stop.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn interface_mode_writes_the_url_alone() {
        let Some(server) = ZooKeeperServer::start().await else {
            return;
        };
        let client = raw_client(&server).await;
        let backend = server.backend().await;
        let mut rust = RustProvider::start(&backend, RegisterMode::Interface).await;
        let port = rust.port;
        let url = found("Rust provider's URL", || url_at(&client, port)).await;
        assert!(
            url.starts_with(&format!("tri://127.0.0.1:{port}/helloworld.Greeter?")),
            "{url}"
        );
        let instance = format!("/services/{APP}/127.0.0.1:{port}");
        assert!(
            client.check_stat(&instance).await.unwrap().is_none(),
            "no instance record"
        );
        let mapping = "/dubbo/mapping/helloworld.Greeter";
        assert!(
            client.check_stat(mapping).await.unwrap().is_none(),
            "no mapping"
        );
        rust.stop();
        rust.stopped().await;
        assert!(url_at(&client, port).await.is_none(), "the URL is gone");
    }
}

#[cfg(feature = "nacos")]
mod nacos {
    use super::*;
    use crate::support::nacos::NacosServer;
    use serde_json::Value;

    const SERVICE: &str = "providers:helloworld.Greeter::";

    async fn hosts(server: &NacosServer, service: &str) -> Vec<Value> {
        server.instances_http("DEFAULT_GROUP", service).await["hosts"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    async fn host_at(server: &NacosServer, port: u16) -> Option<Value> {
        hosts(server, SERVICE)
            .await
            .into_iter()
            .find(|h| h["port"] == port)
    }

    fn metadata(host: &Value) -> BTreeMap<String, String> {
        host["metadata"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
            .collect()
    }

    /// One migration rule moves both consumers alike, on Nacos as on ZooKeeper.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_migration_rule_steers_java_and_introspect_alike() {
        let Some(server) = NacosServer::start().await else {
            return;
        };
        let backend = server.backend().await;
        super::a_migration_rule_steers_java_and_introspect_alike(&server.url(), &backend).await;
    }

    /// APPLICATION_FIRST's fallback and return, on Nacos, as on ZooKeeper.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn application_first_falls_back_and_returns_as_java_does() {
        let Some(server) = NacosServer::start().await else {
            return;
        };
        let backend = server.backend().await;
        application_first_falls_back_as_java_does(&server.url(), &backend).await;
    }

    /// The last application-level provider's process terminated: both consumers, at their
    /// default steps, fall back to the interface level.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_terminated_last_provider_falls_back_as_java_does() {
        let Some(server) = NacosServer::start().await else {
            return;
        };
        let backend = server.backend().await;
        super::a_terminated_last_provider_falls_back_as_java_does(&server.url(), &backend, false)
            .await;
    }

    /// The last application-level provider's process killed: both consumers, at their
    /// default steps, fall back to the interface level.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_killed_last_provider_falls_back_as_java_does() {
        let Some(server) = NacosServer::start().await else {
            return;
        };
        let backend = server.backend().await;
        super::a_terminated_last_provider_falls_back_as_java_does(&server.url(), &backend, true)
            .await;
    }

    /// A migration rule's threshold decides the level alike; its proportion is Java's only.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn threshold_and_proportion_beside_java() {
        let Some(server) = NacosServer::start().await else {
            return;
        };
        let backend = server.backend().await;
        super::threshold_and_proportion_beside_java(&server.url(), &backend).await;
    }

    /// A Java provider at `register-mode=interface`, called by an Introspect consumer at
    /// FORCE_INTERFACE and APPLICATION_FIRST.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_introspect_consumer_calls_a_java_provider_registering_interface() {
        let Some(java) = Peer::Java.find() else {
            return;
        };
        let Some(server) = NacosServer::start().await else {
            return;
        };
        let java_provider = java
            .provider_with(&server.url(), JAVA_APP, &["--register-mode", "interface"])
            .await;
        let java_port = java_provider.port;
        found("Java provider's instance", || host_at(&server, java_port)).await;
        // Hostile instances beside it, as any Nacos client may register them: a Hessian
        // `dubbo` protocol (listed, never dialled), metadata over the URL bound, a category
        // that is not `providers`, a protocol that is no URL scheme, no protocol at all.
        let huge = "x".repeat(20 * 1024);
        let base = r#""interface":"helloworld.Greeter","application":"hostile","path":"helloworld.Greeter""#;
        let hostile = [
            (
                20880,
                format!(r#"{{{base},"protocol":"dubbo","category":"providers"}}"#),
            ),
            (
                20881,
                format!(r#"{{{base},"protocol":"tri","category":"providers","pad":"{huge}"}}"#),
            ),
            (
                20882,
                format!(r#"{{{base},"protocol":"tri","category":"consumers"}}"#),
            ),
            (
                20883,
                format!(r#"{{{base},"protocol":"tri phone","category":"providers"}}"#),
            ),
            (20884, format!(r#"{{{base},"category":"providers"}}"#)),
        ];
        for (port, metadata) in &hostile {
            server
                .put_instance_http("DEFAULT_GROUP", SERVICE, "127.0.0.1", *port, metadata)
                .await;
        }
        found("the hostile instances", || async {
            (hosts(&server, SERVICE).await.len() > hostile.len()).then_some(())
        })
        .await;
        let backend = server.backend().await;
        let resolver = introspect_calls_the_java_provider(&backend, java_port).await;
        let stats = resolver.stats().await;
        assert!(stats.skipped_provider_urls >= 4, "{stats:?}");
        assert!(stats.uncallable_provider_urls >= 1, "{stats:?}");
        java_provider.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_java_consumer_at_force_interface_calls_a_rust_provider_registering_all() {
        let Some(java) = Peer::Java.find() else {
            return;
        };
        let Some(server) = NacosServer::start().await else {
            return;
        };
        let registry = server.url();

        let java_provider = java
            .provider_with(&registry, JAVA_APP, &["--register-mode", "interface"])
            .await;
        let java_port = java_provider.port;
        let java_host = found("Java provider's instance", || host_at(&server, java_port)).await;
        let java_metadata = metadata(&java_host);
        java_provider.stop().await;
        eventually(LIMIT, "the Java provider's instance to go", || async {
            host_at(&server, java_port).await.is_none()
        })
        .await;

        let backend = server.backend().await;
        let mut rust = RustProvider::start(&backend, RegisterMode::All).await;
        let port = rust.port;
        let host = found("Rust provider's instance", || host_at(&server, port)).await;
        for field in [
            "ip",
            "weight",
            "healthy",
            "enabled",
            "ephemeral",
            "clusterName",
            "serviceName",
        ] {
            assert_eq!(host[field], java_host[field], "{field}");
        }
        let rust_metadata = metadata(&host);
        for (key, value) in [
            ("category", "providers"),
            ("protocol", "tri"),
            ("path", "helloworld.Greeter"),
        ] {
            assert_eq!(rust_metadata[key], value);
            assert_eq!(java_metadata[key], value);
        }
        assert_same_parameters(&java_metadata, &rust_metadata);
        assert!(
            !hosts(&server, APP).await.is_empty(),
            "and the instance record"
        );

        put_rule(&backend, APP_RULES, &rule(port, "weight", "300")).await;
        eventually(LIMIT, "the weight in the metadata", || async {
            host_at(&server, port)
                .await
                .is_some_and(|h| metadata(&h).get("weight").is_some_and(|w| w == "300"))
        })
        .await;

        java_calls_the_rust_provider(&java, &registry, port).await;

        put_rule(&backend, APP_RULES, &rule(port, "disabled", "true")).await;
        eventually(LIMIT, "disabled=true in the metadata", || async {
            host_at(&server, port)
                .await
                .is_some_and(|h| metadata(&h).get("disabled").is_some_and(|d| d == "true"))
        })
        .await;

        rust.stop();
        eventually(LIMIT, "the interface-level instance to go", || async {
            host_at(&server, port).await.is_none()
        })
        .await;
        assert!(
            !hosts(&server, APP).await.is_empty(),
            "the instance record stays through the drain"
        );
        rust.stopped().await;
        eventually(LIMIT, "the instance record to go", || async {
            hosts(&server, APP).await.is_empty()
        })
        .await;
    }
}

#[tokio::test]
async fn a_backend_without_an_interface_level_layout_refuses_it_at_build() {
    for mode in [RegisterMode::Interface, RegisterMode::All] {
        let error = Provider::builder(APP, Backend::memory())
            .register_mode(mode)
            .export(greeter_service())
            .build()
            .expect_err("refused");
        assert!(
            matches!(error, introspect::Error::Config { .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains("does not write"), "{error}");
    }
    Provider::builder(APP, Backend::memory())
        .register_mode(RegisterMode::Instance)
        .export(greeter_service())
        .build()
        .unwrap();
}

/// A backend without an interface level: a subscription at FORCE_INTERFACE fails to start,
/// saying why; one at APPLICATION_FIRST reads the application level alone.
#[tokio::test]
async fn a_backend_without_an_interface_level_refuses_force_interface() {
    let resolver = Resolver::builder(Backend::memory()).build();
    let error = resolver
        .subscribe(Subscription::new("helloworld.Greeter").migration(MigrationStep::ForceInterface))
        .await
        .expect_err("refused");
    assert!(
        matches!(error, introspect::Error::Config { .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("no interface-level providers"),
        "{error}"
    );
    let first = resolver
        .subscribe(
            Subscription::new("helloworld.Greeter").migration(MigrationStep::ApplicationFirst),
        )
        .await
        .unwrap();
    assert!(first.current().is_empty());
    let why = first.why_empty().expect("explained").to_string();
    assert!(why.contains("the interface level cannot be read"), "{why}");
}

/// On etcd, where dubbo-go's etcd registry writes interface-level URLs (one key per URL
/// under `/dubbo/{interface}/providers/`, bound to its lease): a dubbo-go provider with
/// `registry-type: interface` writes no instance record, and is called by an
/// Introspect consumer at FORCE_INTERFACE and APPLICATION_FIRST. Its key is read back as
/// dubbo-go wrote it; when it stops, the consumer's set empties once the key's lease
/// expires (dubbo-go deletes no key on a stop).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_introspect_consumer_calls_a_dubbo_go_provider_registering_interface_on_etcd() {
    use crate::support::peer_cases::{CALLS, PeerRegistry, call_through, wait_for_endpoints};

    let Some(registry) = PeerRegistry::etcd().await else {
        return;
    };
    let Some(go) = Peer::Go.find() else {
        return;
    };
    let provider = go
        .provider_with(&registry.url, "iface-go", &["--registry-type", "interface"])
        .await;
    let port = provider.port;
    let resolver = Resolver::builder(registry.backend.clone())
        .subscribe_options(SubscribeOptions::default().start_timeout(Duration::from_secs(2)))
        .build();
    let key = introspect::backend::InterfaceKey::new("helloworld.Greeter");
    let urls = found("dubbo-go's interface-level URL", || {
        let providers = registry.backend.interface_providers().clone();
        let key = key.clone();
        async move {
            let urls = providers
                .list(&key, &introspect::Limits::default())
                .await
                .unwrap();
            (!urls.urls.is_empty()).then_some(urls)
        }
    })
    .await;
    assert!(urls.skipped.is_empty(), "{urls:?}");
    let url = &urls.urls[0];
    assert_eq!((url.protocol.as_str(), url.port), ("tri", port), "{url:?}");
    assert_eq!(url.interface(), "helloworld.Greeter");
    println!("dubbo-go's interface-level URL on etcd: {url:?}");
    let default = resolver
        .subscribe(Subscription::new("helloworld.Greeter"))
        .await
        .unwrap();
    assert!(
        default.current().is_empty(),
        "no instance record: the default step sees nothing"
    );
    drop(default);
    for step in [
        MigrationStep::ForceInterface,
        MigrationStep::ApplicationFirst,
    ] {
        let subscription = resolver
            .subscribe(Subscription::new("helloworld.Greeter").migration(step))
            .await
            .unwrap();
        wait_for_endpoints(&subscription, "the dubbo-go provider's URL").await;
        let ports: Vec<u16> = subscription.current().iter().map(|e| e.port).collect();
        assert_eq!(ports, [port], "{step}");
        let calls = call_through(&resolver, &subscription, CALLS).await;
        assert_eq!(
            (calls.ok, calls.failed),
            (CALLS, 0),
            "{step}: {:?}",
            calls.errors
        );
        assert!(
            calls.message.ends_with("from dubbo-go"),
            "{}",
            calls.message
        );
        println!("Introspect at {step} on etcd: {CALLS} of {CALLS} calls to the dubbo-go provider");
        if step == MigrationStep::ApplicationFirst {
            let stopped = std::time::Instant::now();
            let status = provider.stop().await;
            // dubbo-go deletes no key on a stop (its etcd registry does not unregister):
            // the key goes with its lease, when that expires.
            eventually(
                Duration::from_secs(90),
                "the stopped provider's URL gone from the set",
                || {
                    let empty = subscription.current().is_empty();
                    async move { empty }
                },
            )
            .await;
            println!(
                "dubbo-go provider stopped ({status}): the set emptied {:?} after the stop",
                stopped.elapsed()
            );
            break;
        }
    }
}
