//! A call fails only when no provider could answer it, and providers that answer late or
//! fail take few calls: the balanced channel's cluster stage and consumer-side health side
//! by side with a real Dubbo Java 3.3 consumer (the peer of `interop/java`, with Dubbo's
//! default failover, `retries` 2), in one fleet on ZooKeeper, under the same faults.
//!
//! Four Java providers of one app, each logging the request names it processes: A and B
//! answer; S answers every call 250 ms late; F declines 30% of calls with `UNAVAILABLE`
//! before it processes them. Four consumers call at once, each with a 3 s timeout and a
//! unique name per call: Java one call at a time and with 16 callers, Introspect the same
//! (health's defaults). Windows: all four up; B killed (`SIGKILL`); A stopped (`SIGSTOP`)
//! and resumed (`SIGCONT`); afterwards. The figures of each window are printed, Java's
//! beside Introspect's, then the steady parts (from 3 s into a window) side by side; and
//! for each Introspect consumer when it ejected S and F and after how many calls, every
//! change of its ejections (read every 50 ms) and of the providers it lists,
//! `Resolver::ejections` at the end of each window, its counters and its failed calls.
//!
//! What is asserted of Introspect:
//! * no call fails while a provider that could answer it is up, but those already sent to
//!   a provider that dies (B's: at most one per caller, two for a single caller whose next
//!   call can race the close of B's connection, within 2 s of the kill) or hangs
//!   (A's: at most one per caller, failed with `UNAVAILABLE` when health ejects A as hung,
//!   under 2.6 s after they were sent and within 3 s of the stop, not at their 3 s
//!   deadline: a liveness check starts once a call waited 1 s and gives up after 1 s); no
//!   call is processed twice (those lost on A are not retried: A processes them once
//!   resumed);
//! * in the steady part (from 3 s in) of every window with a good provider up (all up, B
//!   killed, afterwards), S and F each answer under 5% of either consumer's calls (Java's:
//!   a quarter and a sixth), but F of the single caller's under 8%: its failure rate is
//!   judged on at least 20 of its calls (of 64), and each return on trial (after 5 s, then
//!   10 s) costs up to 20 more, of the 500 or so calls one caller makes in a window
//!   (measured: 1.6 to 3.1%); with 16 callers S and F are ejected within 3 s;
//! * in the all-up window, the p95 latency is at most half of Java's (which S's quarter
//!   sets; measured: a tenth);
//! * A answers again within two probe intervals (10 s) of `SIGCONT`.
//!
//! While A is stopped only S and F answer (B's record is gone: ZooKeeper here grants
//! sessions of at most 4 s), so they take the calls: when every provider is out, calls go
//! to the outliers when nothing else can take them.
//!
//! A comes back by registering again (its session expired while it was stopped): health
//! probes a provider that registers at once, so its first call comes 1 to 2 s after
//! `SIGCONT`. Java is the yardstick, not judged: its failover does not retry F's
//! `UNAVAILABLE` (the status comes back inside the result over Triple) and does retry
//! timeouts, so A processes again, once resumed, calls another provider answered.
//!
//! Measured on Dubbo Java 3.3.6 (the issue that asked for this stage, 20/15/20/15 s
//! windows, one caller): Java failed 62 calls and processed 4 twice; Introspect without
//! retries failed 56. The suite's peer is 3.3.4; its figures are printed by each run.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use introspect::consumer::{
    BalancedChannel, ChannelHandle, ChannelOptions, Ejection, ResolverStats, SubscriptionHandle,
};
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
const AFTER: Duration = Duration::from_secs(11);
/// How far into a window its steady part starts: ejection has settled and the fault's
/// first calls are over.
const SETTLE: Duration = Duration::from_secs(3);
/// How soon a call waiting on a stopped provider fails: the liveness check starts after
/// 1 s of waiting and gives up after 1 s more (the defaults), well before [`TIMEOUT`].
const HUNG_FAILS_WITHIN: Duration = Duration::from_millis(2_600);
/// Health's interval between probes of an ejected provider (the default).
fn probe_interval() -> Duration {
    introspect::consumer::HealthOptions::default().get_probe_interval()
}
/// How often the Introspect consumers' health is read while the calls run.
const WATCH_EVERY: Duration = Duration::from_millis(50);

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

    fn bounds(&self) -> [u64; 5] {
        [self.start, self.kill, self.stop, self.resume, self.end]
    }

    /// The window a call that returned at `at_ms` falls in.
    fn window(&self, at_ms: u64) -> Option<usize> {
        let bounds = self.bounds();
        (0..4).find(|&i| at_ms >= bounds[i] && at_ms < bounds[i + 1])
    }

    /// The steady part of window `i`: from [`SETTLE`] into it to its end.
    fn steady(&self, i: usize) -> (u64, u64) {
        let bounds = self.bounds();
        (bounds[i] + SETTLE.as_millis() as u64, bounds[i + 1])
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
            if let Some(w) = timeline.window(call.at_ms) {
                windows[w].add(call);
            }
        }
        windows
    }

    /// The figures of the calls that returned from `from` to `to` (ms since the epoch).
    fn between(calls: &[Call], (from, to): (u64, u64)) -> Figures {
        let mut figures = Figures::default();
        for call in calls.iter().filter(|c| c.at_ms >= from && c.at_ms < to) {
            figures.add(call);
        }
        figures
    }

    fn add(&mut self, call: &Call) {
        self.calls += 1;
        self.latencies.push(call.latency_ms);
        match &call.outcome {
            Ok(server) => *self.by.entry(server.clone()).or_default() += 1,
            Err(_) => self.failed += 1,
        }
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
            "  {name:<12} failed {:>4} of {:>5}; S {:>5.1}%, F {:>5.1}%; p50 {:>4} ms, \
             p95 {:>4} ms, p99 {:>4} ms",
            w.failed,
            w.calls,
            w.share("S"),
            w.share("F"),
            w.percentile(0.5),
            w.percentile(0.95),
            w.percentile(0.99),
        );
    }
}

/// The providers' names by address (`127.0.0.1:PORT`).
type Names = BTreeMap<String, &'static str>;

/// An ejection as a reader wants it: the provider's name first.
fn described(ejection: &Ejection, names: &Names) -> String {
    match names.get(&ejection.address) {
        Some(name) => format!("{name} {ejection}"),
        None => ejection.to_string(),
    }
}

/// What `resolver` ejects now, each as `NAME reason`.
fn ejected(resolver: &Resolver, names: &Names) -> Vec<String> {
    resolver
        .ejections()
        .iter()
        .map(|e| {
            let name = names.get(&e.address).copied().unwrap_or("?");
            format!("{name} {}", e.reason.word())
        })
        .collect()
}

/// One change in what an Introspect consumer's health ejected, or in how many providers
/// its subscription listed.
#[derive(Clone, Debug)]
struct Change {
    at_ms: u64,
    /// As [`ejected`] gives it.
    ejected: Vec<String>,
    providers: usize,
}

/// Reads `resolver`'s ejections and `subscription`'s providers every [`WATCH_EVERY`]
/// until `until`; returns each change.
async fn watch(
    resolver: &Resolver,
    subscription: &SubscriptionHandle,
    names: &Names,
    until: Instant,
) -> Vec<Change> {
    let mut changes: Vec<Change> = Vec::new();
    while Instant::now() < until {
        let ejected = ejected(resolver, names);
        let providers = subscription.current().len();
        if changes
            .last()
            .is_none_or(|c| c.ejected != ejected || c.providers != providers)
        {
            changes.push(Change {
                at_ms: epoch_ms(),
                ejected,
                providers,
            });
        }
        tokio::time::sleep(WATCH_EVERY).await;
    }
    changes
}

/// When `changes` first list provider `name` as ejected (ms since the epoch), and why (an
/// ejection reason's `word`).
fn first_ejected<'a>(changes: &'a [Change], name: &str) -> Option<(u64, &'a str)> {
    let prefix = format!("{name} ");
    changes.iter().find_map(|c| {
        let entry = c.ejected.iter().find(|e| e.starts_with(&prefix))?;
        Some((c.at_ms, &entry[prefix.len()..]))
    })
}

/// What one Introspect consumer showed of its health, printed beside its figures.
struct Health<'a> {
    changes: &'a [Change],
    /// `Resolver::ejections` at the end of each window.
    at_ends: &'a [Vec<String>; 4],
    stats: ResolverStats,
}

impl Health<'_> {
    fn print(&self, calls: &[Call], timeline: &Timeline) {
        let at = |ms: u64| ms as i64 - timeline.start as i64;
        for name in ["S", "F"] {
            let Some((listed, reason)) = first_ejected(self.changes, name) else {
                eprintln!("  {name} never ejected");
                continue;
            };
            let before = calls.iter().filter(|c| c.at_ms <= listed).count();
            let all_up = Figures::between(calls, (timeline.start, listed));
            let last = calls
                .iter()
                .filter(|c| c.at_ms < timeline.kill && c.outcome.as_deref() == Ok(name))
                .map(|c| c.at_ms)
                .max();
            eprintln!(
                "  {name} ejected ({reason}) {} ms into the run, after {before} calls ({} \
                 answered by {name}); its last answer of the all-up window at {} ms",
                at(listed),
                all_up.by.get(name).copied().unwrap_or(0),
                last.map_or(-1, at),
            );
        }
        let after_resume = |ms: u64| ms as i64 - timeline.resume as i64;
        let at_resume = self.changes.iter().rfind(|c| c.at_ms < timeline.resume);
        let listed_at_resume = at_resume.map_or(0, |c| c.providers);
        let relisted = self
            .changes
            .iter()
            .find(|c| c.at_ms >= timeline.resume && c.providers > listed_at_resume);
        let a_ejected = |c: &Change| c.ejected.iter().any(|e| e.starts_with("A "));
        let readmitted = self
            .changes
            .iter()
            .find(|c| c.at_ms >= timeline.resume && !a_ejected(c));
        eprintln!(
            "  after SIGCONT: A listed again at {} ms ({} providers); A {}",
            relisted.map_or(-1, |c| after_resume(c.at_ms)),
            relisted.map_or(listed_at_resume, |c| c.providers),
            match (at_resume.is_some_and(a_ejected), readmitted) {
                (false, _) => "was no longer ejected at SIGCONT".to_owned(),
                (true, Some(c)) => format!("no longer ejected at {} ms", after_resume(c.at_ms)),
                (true, None) => "still ejected at the end".to_owned(),
            }
        );
        eprint!("  health over the run (ms into it: ejected; providers listed):");
        for change in self.changes {
            eprint!(
                " [{}: {}; {}]",
                at(change.at_ms),
                change.ejected.join(", "),
                change.providers
            );
        }
        eprintln!();
        for (name, ejections) in Timeline::NAMES.iter().zip(self.at_ends) {
            eprintln!("  ejections at the end of {name}:");
            for ejection in ejections {
                eprintln!("    {ejection}");
            }
        }
        let s = &self.stats;
        eprintln!(
            "  ejected: {} slow, {} failure rate, {} hung; {} liveness checks; {} capped routes",
            s.ejected_slow,
            s.ejected_failure_rate,
            s.ejected_hung,
            s.liveness_checks,
            s.capped_routes
        );
    }
}

/// The calls that failed while A was stopped, or soon after it resumed (Java's calls to it
/// time out).
fn failed_on_a<'a>(calls: &'a [Call], timeline: &Timeline) -> Vec<&'a Call> {
    let until = timeline.resume + TIMEOUT.as_millis() as u64 + 500;
    calls
        .iter()
        .filter(|c| c.outcome.is_err() && c.at_ms >= timeline.stop && c.at_ms < until)
        .collect()
}

/// How long after A's resume the first call it answered was sent, in ms.
fn back_on_a(calls: &[Call], timeline: &Timeline) -> Option<u64> {
    calls
        .iter()
        .filter(|c| c.outcome.as_deref() == Ok("A"))
        .map(|c| c.at_ms - c.latency_ms)
        .filter(|&sent| sent >= timeline.resume)
        .min()
        .map(|sent| sent - timeline.resume)
}

/// The header of [`print_steady`]'s lines.
fn print_steady_header() {
    eprintln!(
        "Side by side (steady: from {} s into a window; S and F: their shares of the calls):",
        SETTLE.as_secs()
    );
    eprintln!(
        "  {:<24} {:<16} {:<16} {:<16} {:>11} {:>25} {:>13}",
        "",
        "all four up",
        "B killed",
        "afterwards",
        "all-up p95",
        "failed while A stopped",
        "A again after"
    );
}

/// One consumer's steady figures, judged by the test, on one line.
fn print_steady(consumer: &str, calls: &[Call], timeline: &Timeline) {
    let mut line = format!("  {consumer:<24}");
    for w in [0, 1, 3] {
        let f = Figures::between(calls, timeline.steady(w));
        let shares = format!("S {:.1}% F {:.1}%", f.share("S"), f.share("F"));
        line.push_str(&format!(" {shares:<16}"));
    }
    let all_up = Figures::between(calls, timeline.steady(0));
    line.push_str(&format!(" {:>8} ms", all_up.percentile(0.95)));
    let on_a = failed_on_a(calls, timeline);
    let fastest = on_a.iter().map(|c| c.latency_ms).min().unwrap_or(0);
    let slowest = on_a.iter().map(|c| c.latency_ms).max().unwrap_or(0);
    let failed = format!("{} in {fastest}-{slowest} ms", on_a.len());
    line.push_str(&format!(" {failed:>25}"));
    match back_on_a(calls, timeline) {
        Some(ms) => line.push_str(&format!(" {ms:>10} ms")),
        None => line.push_str(&format!(" {:>13}", "never")),
    }
    eprintln!("{line}");
}

/// Every failed call of an Introspect consumer, with when, after how long and why.
fn print_failures(consumer: &str, calls: &[Call], timeline: &Timeline) {
    eprintln!("{consumer}, its failed calls:");
    for call in calls {
        if let Err(why) = &call.outcome {
            eprintln!(
                "  {} at {} ms into the run, after {} ms: {why}",
                call.name,
                call.at_ms - timeline.start,
                call.latency_ms
            );
        }
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
    let names: Names = providers
        .iter()
        .zip(["A", "B", "S", "F"])
        .map(|(p, name)| (format!("127.0.0.1:{}", p.port), name))
        .collect();

    // Two consumers, as the Java ones are two processes: neither sees the other's load.
    let (one, channel_one) = rust_consumer(&registry).await;
    let (many, channel_many) = rust_consumer(&registry).await;

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
    let one_options = java_options(1, "java1");
    let many_options = java_options(CONCURRENT as u32, "java16");
    let java_one = java.consumer_with(&registry.url, "failover-java-1", 0, &one_options);
    let java_many = java.consumer_with(&registry.url, "failover-java-16", 0, &many_options);

    let timeline = Arc::new(Mutex::new(Timeline::default()));
    let until = Instant::now() + total;
    let faults = {
        let timeline = timeline.clone();
        let providers = &mut providers;
        let (names, resolvers) = (&names, [&one.0, &many.0]);
        async move {
            tokio::time::sleep(WARM_UP).await;
            let start = Instant::now();
            timeline.lock().unwrap().start = epoch_ms();
            let until = start + ALL_UP + KILLED + STOPPED + AFTER;
            let rust_one = tokio::spawn(rust_calls(channel_one, 1, "rust1", until));
            let rust_many = tokio::spawn(rust_calls(channel_many, CONCURRENT, "rust16", until));
            // What each Introspect consumer ejects at the end of each window.
            let mut at_ends: [[Vec<String>; 4]; 2] = Default::default();
            let mut window_ended = |w: usize| {
                for (ends, resolver) in at_ends.iter_mut().zip(resolvers) {
                    ends[w] = resolver
                        .ejections()
                        .iter()
                        .map(|e| described(e, names))
                        .collect();
                }
            };
            tokio::time::sleep(ALL_UP).await;
            window_ended(0);
            timeline.lock().unwrap().kill = epoch_ms();
            providers[1].crash();
            tokio::time::sleep(KILLED).await;
            window_ended(1);
            timeline.lock().unwrap().stop = epoch_ms();
            providers[0].pause();
            tokio::time::sleep(STOPPED).await;
            window_ended(2);
            timeline.lock().unwrap().resume = epoch_ms();
            providers[0].resume();
            tokio::time::sleep(AFTER).await;
            window_ended(3);
            timeline.lock().unwrap().end = epoch_ms();
            let calls = (rust_one.await.unwrap(), rust_many.await.unwrap());
            (calls, at_ends)
        }
    };
    let watched = async {
        tokio::join!(
            watch(&one.0, &one.1, &names, until),
            watch(&many.0, &many.1, &names, until)
        )
    };
    let (java_one, java_many, ((rust_one, rust_many), at_ends), (changes_one, changes_many)) =
        tokio::join!(java_one, java_many, faults, watched);
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
    Health {
        changes: &changes_one,
        at_ends: &at_ends[0],
        stats: one.0.stats().await,
    }
    .print(&rust_one, &timeline);
    print(
        "Introspect, 16 callers",
        &rust_many,
        &timeline,
        processed_twice(&all, "rust16-").len(),
    );
    Health {
        changes: &changes_many,
        at_ends: &at_ends[1],
        stats: many.0.stats().await,
    }
    .print(&rust_many, &timeline);
    eprintln!("F declined {} calls in all", providers[3].refused().len());
    print_failures("Introspect, 1 caller", &rust_one, &timeline);
    print_failures("Introspect, 16 callers", &rust_many, &timeline);
    print_steady_header();
    print_steady("Java, 1 caller", &java_one_calls, &timeline);
    print_steady("Introspect, 1 caller", &rust_one, &timeline);
    print_steady("Java, 16 callers", &java_many_calls, &timeline);
    print_steady("Introspect, 16 callers", &rust_many, &timeline);

    for (callers, calls) in [(1, &rust_one), (CONCURRENT, &rust_many)] {
        let mut lost_on_b = 0;
        let mut lost_on_a = 0;
        for call in calls {
            let Err(why) = &call.outcome else { continue };
            let into_run = call.at_ms - timeline.start;
            if call.at_ms >= timeline.kill && call.at_ms < timeline.kill + 2_000 {
                lost_on_b += 1;
                continue;
            }
            let on_a = call.at_ms >= timeline.stop
                && call.at_ms < timeline.resume + TIMEOUT.as_millis() as u64 + 500;
            assert!(
                on_a,
                "{} failed while providers could answer it ({why}, {into_run} ms into the run)",
                call.name,
            );
            // Sent to A before health ejected it as hung, it fails when A is: with the reason,
            // before its deadline, and before that of a call sent as A stopped.
            let sent = call.at_ms - call.latency_ms;
            assert!(
                why.starts_with("Unavailable")
                    && call.latency_ms < HUNG_FAILS_WITHIN.as_millis() as u64
                    && call.at_ms < timeline.stop + TIMEOUT.as_millis() as u64,
                "{}, sent {} ms after A stopped, failed {} ms later with {why}: not when A was \
                 ejected as hung",
                call.name,
                sent as i64 - timeline.stop as i64,
                call.latency_ms,
            );
            lost_on_a += 1;
        }
        // One per caller, and a single caller's next call may go the same way when it
        // leaves before the consumer has seen B's connection close (seen once in CI).
        assert!(
            lost_on_b <= callers.max(2),
            "{lost_on_b} calls lost on the killed B with {callers} callers"
        );
        assert!(
            lost_on_a <= callers,
            "{lost_on_a} calls lost on the stopped A with {callers} callers"
        );
        assert!(calls.len() > 50, "the callers called: {}", calls.len());
    }
    // What ejection adds, on the steady part of every window where a good provider is up
    // (see the module docs for the single caller's F bound, and why).
    for (callers, rust, java, changes) in [
        (1, &rust_one, &java_one_calls, &changes_one),
        (CONCURRENT, &rust_many, &java_many_calls, &changes_many),
    ] {
        for window in [0, 1, 3] {
            let r = Figures::between(rust, timeline.steady(window));
            let f_bound = if callers == 1 { 8.0 } else { 5.0 };
            for (name, bound) in [("S", 5.0), ("F", f_bound)] {
                assert!(
                    r.share(name) < bound,
                    "with {callers} callers, once settled in {:?}, {name} answered {:.1}% of \
                     the calls",
                    Timeline::NAMES[window],
                    r.share(name)
                );
            }
        }
        if callers == CONCURRENT {
            for name in ["S", "F"] {
                let ejected = first_ejected(changes, name).map(|(at, _)| at - timeline.start);
                assert!(
                    ejected.is_some_and(|ms| ms < SETTLE.as_millis() as u64),
                    "with {callers} callers, {name} ejected {ejected:?} ms into the run"
                );
            }
        }
        let steady = timeline.steady(0);
        let (r, j) = (
            Figures::between(rust, steady),
            Figures::between(java, steady),
        );
        let (r95, j95) = (r.percentile(0.95), j.percentile(0.95));
        assert!(
            r95 * 2 <= j95,
            "with {callers} callers, p95 {r95} ms where Java's is {j95} ms"
        );
        let back = back_on_a(rust, &timeline);
        assert!(
            back.is_some_and(|ms| ms <= 2 * probe_interval().as_millis() as u64),
            "with {callers} callers, A answered again {back:?} ms after SIGCONT"
        );
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
