//! A call fails only when no provider could answer it: the balanced channel's cluster stage
//! side by side with a real Dubbo Java 3.3 consumer (the peer of `interop/java`, with
//! Dubbo's default failover, `retries` 2), in one fleet on ZooKeeper, under the same faults.
//!
//! Four Java providers of one app, each logging the request names it processes: A and B
//! answer; S answers every call 250 ms late; F declines 30% of calls with `UNAVAILABLE`
//! before it processes them. Four consumers call at once, each with a 3 s timeout and a
//! unique name per call: Java one call at a time and with 16 callers, Introspect the same.
//! Windows: all four up; B killed (`SIGKILL`); A stopped (`SIGSTOP`) and resumed
//! (`SIGCONT`); afterwards. The figures of each window are printed, Java's beside
//! Introspect's.
//!
//! What is asserted of Introspect: no call fails while a provider that could answer it is
//! up, but those already sent to a provider that dies (B's, at most one per caller, within
//! a moment of the kill) or that hangs (A's, `DEADLINE_EXCEEDED` while it is stopped and
//! the timeout after); no call is processed twice. Java is the yardstick, not judged: its
//! failover does not retry F's `UNAVAILABLE` (the status comes back inside the result over
//! Triple) and does retry timeouts, so A processes again, once resumed, calls another
//! provider answered.
//!
//! Measured on Dubbo Java 3.3.6 (the issue that asked for this stage, 20/15/20/15 s
//! windows, one caller): Java failed 62 calls and processed 4 twice; Introspect without
//! retries failed 56. The suite's peer is 3.3.4; its figures are printed by each run.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use introspect::consumer::{BalancedChannel, ChannelHandle, ChannelOptions, SubscriptionHandle};
use introspect::{Resolver, Subscription};

use crate::support::greeter::pb::HelloRequest;
use crate::support::greeter::pb::greeter_client::GreeterClient;
use crate::support::peer_cases::{INTERFACE, PeerRegistry};
use crate::support::peers::{BuiltPeer, ConsumerOptions, LoggedCall, Peer, PeerProvider};
use crate::support::wait::eventually;

const APP: &str = "failover-fleet";
/// Each consumer's deadline of a call (Java's `timeout`).
const TIMEOUT: Duration = Duration::from_secs(3);
/// Callers of the concurrent consumers.
const CONCURRENT: usize = 16;
/// From the Java consumers' start to the first window: the JVM starts and discovers.
const WARM_UP: Duration = Duration::from_secs(12);
/// The windows: all up, after B's kill, while A is stopped, after A resumed.
const ALL_UP: Duration = Duration::from_secs(10);
const KILLED: Duration = Duration::from_secs(8);
const STOPPED: Duration = Duration::from_secs(10);
const AFTER: Duration = Duration::from_secs(8);

/// One call a consumer made.
#[derive(Clone, Debug)]
struct Call {
    name: String,
    /// When it returned, ms since the epoch.
    at_ms: u64,
    latency_ms: u64,
    /// The provider that answered (its `--name`), or why it failed.
    outcome: Result<String, String>,
}

fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// When each window began and the run ended, ms since the epoch.
#[derive(Clone, Copy, Debug, Default)]
struct Timeline {
    start: u64,
    kill: u64,
    stop: u64,
    resume: u64,
    end: u64,
}

impl Timeline {
    const NAMES: [&'static str; 4] = ["all four up", "B killed", "A stopped", "afterwards"];

    /// The window a call that returned at `at_ms` falls in.
    fn window(&self, at_ms: u64) -> Option<usize> {
        let bounds = [self.start, self.kill, self.stop, self.resume, self.end];
        (0..4).find(|&i| at_ms >= bounds[i] && at_ms < bounds[i + 1])
    }
}

/// The provider named in an answer (`Hello X from NAME`).
fn server(message: &str) -> String {
    message
        .rsplit(" from ")
        .next()
        .unwrap_or_default()
        .to_owned()
}

fn from_java(call: &LoggedCall) -> Call {
    Call {
        name: call.name.clone(),
        at_ms: call.at_ms,
        latency_ms: call.latency_ms,
        outcome: call
            .outcome
            .as_ref()
            .map(|m| server(m))
            .map_err(Clone::clone),
    }
}

/// `callers` Introspect callers making calls named `{prefix}-{k}` through `channel` until
/// `until`.
async fn rust_calls(
    channel: BalancedChannel,
    callers: usize,
    prefix: &'static str,
    until: Instant,
) -> Vec<Call> {
    let log: Arc<Mutex<Vec<Call>>> = Arc::default();
    let next = Arc::new(std::sync::atomic::AtomicU64::new(1));
    let mut tasks = Vec::new();
    for _ in 0..callers {
        let mut client = GreeterClient::new(channel.clone());
        let (log, next) = (log.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < until {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let name = format!("{prefix}-{k}");
                let mut request = tonic::Request::new(HelloRequest { name: name.clone() });
                request.set_timeout(TIMEOUT);
                let started = Instant::now();
                let answer = client.say_hello(request).await;
                let outcome = match answer {
                    Ok(reply) => Ok(server(&reply.into_inner().message)),
                    Err(status) => Err(format!("{:?}: {}", status.code(), status.message())),
                };
                log.lock().unwrap().push(Call {
                    name,
                    at_ms: epoch_ms(),
                    latency_ms: started.elapsed().as_millis() as u64,
                    outcome,
                });
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    Arc::try_unwrap(log).unwrap().into_inner().unwrap()
}

/// A consumer's figures in one window.
#[derive(Default)]
struct Figures {
    calls: usize,
    failed: usize,
    by: BTreeMap<String, usize>,
    latencies: Vec<u64>,
}

impl Figures {
    fn of(calls: &[Call], timeline: &Timeline) -> [Figures; 4] {
        let mut windows: [Figures; 4] = Default::default();
        for call in calls {
            let Some(w) = timeline.window(call.at_ms) else {
                continue;
            };
            let f = &mut windows[w];
            f.calls += 1;
            f.latencies.push(call.latency_ms);
            match &call.outcome {
                Ok(server) => *f.by.entry(server.clone()).or_default() += 1,
                Err(_) => f.failed += 1,
            }
        }
        windows
    }

    fn share(&self, server: &str) -> f64 {
        100.0 * self.by.get(server).copied().unwrap_or(0) as f64 / self.calls.max(1) as f64
    }

    fn percentile(&self, p: f64) -> u64 {
        let mut sorted = self.latencies.clone();
        sorted.sort_unstable();
        sorted
            .get(((sorted.len() as f64 * p) as usize).min(sorted.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    }
}

/// Names processed more than once across `providers` (by one twice, or by two).
fn processed_twice(providers: &[&PeerProvider], prefix: &str) -> Vec<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for provider in providers {
        for name in provider.processed() {
            if name.starts_with(prefix) {
                *seen.entry(name).or_default() += 1;
            }
        }
    }
    seen.into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(name, _)| name)
        .collect()
}

/// Prints one consumer's windows.
fn print(consumer: &str, calls: &[Call], timeline: &Timeline, twice: usize) {
    let windows = Figures::of(calls, timeline);
    let failed: usize = windows.iter().map(|w| w.failed).sum();
    eprintln!("{consumer}: {failed} failed calls in all, {twice} processed twice");
    for (name, w) in Timeline::NAMES.iter().zip(&windows) {
        eprintln!(
            "  {name:<12} failed {:>4} of {:>5}; S {:>5.1}%, F {:>5.1}%; p50 {:>4} ms, p99 {:>4} ms",
            w.failed,
            w.calls,
            w.share("S"),
            w.share("F"),
            w.percentile(0.5),
            w.percentile(0.99),
        );
    }
}

/// An Introspect consumer of the fleet with Java's 3 s timeout (and nothing else set: the
/// defaults are Dubbo's failover with `retries` 2), once it found the four providers.
async fn rust_consumer(
    registry: &PeerRegistry,
) -> (
    (Resolver, SubscriptionHandle, ChannelHandle),
    BalancedChannel,
) {
    let resolver = Resolver::new(registry.backend.clone());
    let subscription = resolver
        .subscribe(Subscription::new(INTERFACE))
        .await
        .unwrap();
    eventually(Duration::from_secs(30), "four providers found", || {
        let n = subscription.current().len();
        async move { n == 4 }
    })
    .await;
    let options = ChannelOptions::default().request_timeout(TIMEOUT);
    let (channel, handle) = resolver
        .balanced_channel_with(&subscription, options)
        .unwrap();
    ((resolver, subscription, handle), channel)
}

/// Starts the four providers of the fleet at once.
async fn fleet(registry: &PeerRegistry, java: &BuiltPeer) -> Vec<PeerProvider> {
    let url = &registry.url;
    let (a, b, s, f) = tokio::join!(
        java.provider_with(url, APP, &["--name", "A", "--log-requests"]),
        java.provider_with(url, APP, &["--name", "B", "--log-requests"]),
        java.provider_with(
            url,
            APP,
            &["--name", "S", "--log-requests", "--slow-ms", "250"]
        ),
        java.provider_with(
            url,
            APP,
            &["--name", "F", "--log-requests", "--fail-percent", "30"]
        ),
    );
    vec![a, b, s, f]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_call_fails_while_a_provider_could_answer_it_side_by_side_with_java() {
    let Some(registry) = PeerRegistry::zookeeper().await else {
        return;
    };
    let Some(java) = Peer::Java.find() else {
        return;
    };
    let mut providers = fleet(&registry, &java).await;

    // Two consumers, as the Java ones are two processes: neither sees the other's load.
    let (_one, channel_one) = rust_consumer(&registry).await;
    let (_many, channel_many) = rust_consumer(&registry).await;

    let total = WARM_UP + ALL_UP + KILLED + STOPPED + AFTER;
    let java_options = |callers: u32, prefix: &'static str| ConsumerOptions {
        retries: Some(2),
        timeout: Some(TIMEOUT),
        concurrency: Some(callers),
        duration: Some(total - WARM_UP + Duration::from_secs(4)),
        name_prefix: Some(prefix),
        log_calls: true,
        ..ConsumerOptions::default()
    };
    let one = java_options(1, "java1");
    let many = java_options(CONCURRENT as u32, "java16");
    let java_one = java.consumer_with(&registry.url, "failover-java-1", 0, &one);
    let java_many = java.consumer_with(&registry.url, "failover-java-16", 0, &many);

    let timeline = Arc::new(Mutex::new(Timeline::default()));
    let faults = {
        let timeline = timeline.clone();
        let providers = &mut providers;
        async move {
            tokio::time::sleep(WARM_UP).await;
            let start = Instant::now();
            timeline.lock().unwrap().start = epoch_ms();
            let until = start + ALL_UP + KILLED + STOPPED + AFTER;
            let rust_one = tokio::spawn(rust_calls(channel_one, 1, "rust1", until));
            let rust_many = tokio::spawn(rust_calls(channel_many, CONCURRENT, "rust16", until));
            tokio::time::sleep(ALL_UP).await;
            timeline.lock().unwrap().kill = epoch_ms();
            providers[1].crash();
            tokio::time::sleep(KILLED).await;
            timeline.lock().unwrap().stop = epoch_ms();
            providers[0].pause();
            tokio::time::sleep(STOPPED).await;
            timeline.lock().unwrap().resume = epoch_ms();
            providers[0].resume();
            tokio::time::sleep(AFTER).await;
            timeline.lock().unwrap().end = epoch_ms();
            (rust_one.await.unwrap(), rust_many.await.unwrap())
        }
    };
    let (java_one, java_many, (rust_one, rust_many)) = tokio::join!(java_one, java_many, faults);
    let timeline = *timeline.lock().unwrap();
    // A processes what it held once resumed: give it a moment before reading its log.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let all: Vec<&PeerProvider> = providers.iter().collect();
    let java_one_calls: Vec<Call> = java_one.logged.iter().map(from_java).collect();
    let java_many_calls: Vec<Call> = java_many.logged.iter().map(from_java).collect();
    eprintln!("windows: {timeline:?}");
    print(
        "Java, 1 caller",
        &java_one_calls,
        &timeline,
        processed_twice(&all, "java1-").len(),
    );
    print(
        "Java, 16 callers",
        &java_many_calls,
        &timeline,
        processed_twice(&all, "java16-").len(),
    );
    print(
        "Introspect, 1 caller",
        &rust_one,
        &timeline,
        processed_twice(&all, "rust1-").len(),
    );
    print(
        "Introspect, 16 callers",
        &rust_many,
        &timeline,
        processed_twice(&all, "rust16-").len(),
    );
    eprintln!("F declined {} calls in all", providers[3].refused().len());

    for (callers, calls) in [(1, &rust_one), (CONCURRENT, &rust_many)] {
        let mut lost_on_b = 0;
        for call in calls {
            let Err(why) = &call.outcome else { continue };
            let on_b = call.at_ms >= timeline.kill && call.at_ms < timeline.kill + 2_000;
            let hung_on_a = why.starts_with("DeadlineExceeded")
                && call.at_ms >= timeline.stop
                && call.at_ms < timeline.resume + TIMEOUT.as_millis() as u64 + 500;
            if on_b && !hung_on_a {
                lost_on_b += 1;
                continue;
            }
            assert!(
                hung_on_a,
                "{} failed while providers could answer it ({why}, {} ms into the run)",
                call.name,
                call.at_ms - timeline.start
            );
        }
        assert!(
            lost_on_b <= callers,
            "{lost_on_b} calls lost on the killed B with {callers} callers"
        );
        assert!(calls.len() > 50, "the callers called: {}", calls.len());
    }
    assert_eq!(
        processed_twice(&all, "rust"),
        Vec::<String>::new(),
        "processed twice"
    );
    // The fault windows were real: F declined calls, and both Java consumers ran.
    assert!(!providers[3].refused().is_empty());
    assert!(java_one.calls > 50 && java_many.calls > 50);
}
