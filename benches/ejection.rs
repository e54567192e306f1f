//! Time from a provider going slow, failing or hung to its ejection by the consumer's
//! health, with the health options at their defaults.
//!
//! Each trial starts four Greeter providers on loopback, registered in the memory store,
//! and a resolver with a balanced channel over them; 1 or 16 callers call through it
//! (each call with a 3 s deadline) for a warm-up (0.5 to 0.7 s; for one failing row, 5.8
//! to 9.2 s, so that the failure-rate window is full of earlier calls, as in a steady
//! state), then one provider turns faulty: slow (every answer 250 ms late), failing (3
//! calls in 10 declined with `UNAVAILABLE`, never more than 3 in a row, so that the
//! failure rate ejects it rather than 5 failures in a row), or hung (a proxy in front of
//! it, through which it was registered and reached, stops forwarding anything while it
//! still accepts). The time is from that switch to the first moment
//! `Resolver::ejections` lists it (read every millisecond); the calls counted are those its
//! server received meanwhile (for a hung provider, which receives none, the calls held by
//! it: those that ended after the switch failed or after 500 ms or more).
//! Every trial has its own runtime, store, providers and resolver.
//! `cargo bench --bench ejection`.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use introspect::consumer::ChannelOptions;
use introspect::{MemoryStore, Provider, Resolver, ServiceInfo, Store, Subscription};
use tonic::{Request, Response, Status};

#[rustfmt::skip]
#[path = "../proto/generated/helloworld.rs"]
#[allow(clippy::all, dead_code)]
mod pb;

#[path = "common/blackhole.rs"]
mod blackhole;

use blackhole::Blackhole;
use pb::greeter_client::GreeterClient;
use pb::greeter_server::{Greeter, GreeterServer};
use pb::{HelloReply, HelloRequest};

const APP: &str = "bench-ejection";
const INTERFACE: &str = "helloworld.Greeter";
const PROVIDERS: usize = 4;
/// Calls before the fault, one warm-up per trial: connections made, every provider with
/// latency samples. Not one length: latencies are judged every 250 ms from the first
/// answer, and a warm-up of a multiple of that would put every fault at the same point of
/// that cycle.
const WARM_UPS: [Duration; 5] = [
    Duration::from_millis(500),
    Duration::from_millis(550),
    Duration::from_millis(600),
    Duration::from_millis(650),
    Duration::from_millis(700),
];
/// Longer warm-ups, for a failure rate judged over a window full of earlier calls (the
/// window is 10 s in two halves of 5 s, the first starting at the first call: these put the
/// fault 0.8, 2.5 and 4.2 s into a half).
const FULL_WINDOW: [Duration; 3] = [
    Duration::from_millis(5_800),
    Duration::from_millis(7_500),
    Duration::from_millis(9_200),
];
/// How late a slow provider answers.
const SLOW_BY: Duration = Duration::from_millis(250);
/// Each call's deadline.
const CALL_TIMEOUT: Duration = Duration::from_secs(3);
/// A call that took this long after the switch waited on the hung provider.
const HELD: Duration = Duration::from_millis(500);
/// A trial that ejects nothing by then is reported as such.
const GIVE_UP: Duration = Duration::from_secs(15);

/// Modes of a [`Switchable`] besides answering (0).
const SLOW: u8 = 1;
const FAILING: u8 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    Slow,
    Failing,
    Hung,
}

impl Fault {
    fn describe(self) -> &'static str {
        match self {
            Fault::Slow => "slow (+250 ms)",
            Fault::Failing => "failing (30% UNAVAILABLE)",
            Fault::Hung => "hung (accepts, answers nothing)",
        }
    }
}

/// A Greeter that answers, answers late, or declines 3 calls in 10, as its mode says;
/// counting the calls it receives.
#[derive(Clone, Default)]
struct Switchable {
    mode: Arc<AtomicU8>,
    calls: Arc<AtomicU64>,
}

#[tonic::async_trait]
impl Greeter for Switchable {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        match self.mode.load(Ordering::Relaxed) {
            SLOW => tokio::time::sleep(SLOW_BY).await,
            FAILING if n % 10 < 3 => return Err(Status::unavailable("declined by the bench")),
            _ => {}
        }
        Ok(Response::new(HelloReply {
            message: request.into_inner().name,
        }))
    }
}

/// Starts a provider registered at its own port, or behind a [`Blackhole`] (registered at
/// the proxy's port) when `proxied`.
async fn provider(
    store: &Arc<dyn Store>,
    proxied: bool,
) -> (Switchable, SocketAddr, Option<Blackhole>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut address = listener.local_addr().unwrap();
    let proxy = if proxied {
        let proxy = Blackhole::start(address).await;
        address = proxy.address;
        Some(proxy)
    } else {
        None
    };
    let greeter = Switchable::default();
    let provider = Provider::builder(APP, store.clone())
        .export(ServiceInfo::new(INTERFACE))
        .port(address.port())
        .build()
        .unwrap();
    let router =
        tonic::transport::Server::builder().add_service(GreeterServer::new(greeter.clone()));
    tokio::spawn(provider.serve(router, listener, std::future::pending()));
    (greeter, address, proxy)
}

/// What the callers saw after the switch.
#[derive(Default)]
struct Tally {
    switched: OnceLock<Instant>,
    failed: AtomicU64,
    held: AtomicU64,
}

/// One trial's result.
struct Sample {
    elapsed: Duration,
    /// Calls the faulty provider received (or held) until its ejection was seen.
    reached: u64,
    /// Calls it received in the warm-up.
    before: u64,
    /// Calls the callers saw fail after the switch.
    failed: u64,
    /// How health named it: the reason's word, and the method when it is one method.
    reason: String,
}

async fn trial(fault: Fault, callers: usize, warm_up: Duration) -> Option<Sample> {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let mut fleet = Vec::new();
    for i in 0..PROVIDERS {
        let proxied = fault == Fault::Hung && i == PROVIDERS - 1;
        fleet.push(provider(&store, proxied).await);
    }
    let (victim, victim_address, proxy) = fleet.pop().unwrap();
    let victim_address = victim_address.to_string();

    let resolver = Resolver::new(store.clone());
    let subscription = resolver
        .subscribe(Subscription::new(INTERFACE).provided_by([APP.to_owned()]))
        .await
        .unwrap();
    while subscription.current().len() < PROVIDERS {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (channel, _handle) = resolver
        .balanced_channel_with(&subscription, ChannelOptions::default())
        .unwrap();

    let tally = Arc::new(Tally::default());
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut loops = Vec::new();
    for _ in 0..callers {
        let mut client = GreeterClient::new(channel.clone());
        let (tally, stopped) = (tally.clone(), stopped.clone());
        loops.push(tokio::spawn(async move {
            while !*stopped.borrow() {
                let mut request = Request::new(HelloRequest { name: "e".into() });
                request.set_timeout(CALL_TIMEOUT);
                let started = Instant::now();
                let answer = client.say_hello(request).await;
                let ended = Instant::now();
                if tally.switched.get().is_some_and(|&at| ended > at) {
                    if answer.is_err() {
                        tally.failed.fetch_add(1, Ordering::Relaxed);
                    }
                    if answer.is_err() || ended - started >= HELD {
                        tally.held.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }));
    }
    tokio::time::sleep(warm_up).await;
    assert!(
        resolver.ejections().is_empty(),
        "ejected before the fault: {:?}",
        resolver.ejections()
    );

    let before = victim.calls.load(Ordering::Relaxed);
    let switched = Instant::now();
    tally.switched.set(switched).unwrap();
    match fault {
        Fault::Slow => victim.mode.store(SLOW, Ordering::Relaxed),
        Fault::Failing => victim.mode.store(FAILING, Ordering::Relaxed),
        Fault::Hung => proxy.as_ref().unwrap().hold(),
    }
    let ejection = loop {
        if let Some(e) = resolver
            .ejections()
            .into_iter()
            .find(|e| e.address == victim_address)
        {
            break Some(e);
        }
        if switched.elapsed() > GIVE_UP {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let elapsed = switched.elapsed();
    let received = victim.calls.load(Ordering::Relaxed) - before;
    stop.send_replace(true);
    for caller in loops {
        caller.await.unwrap();
    }
    let ejection = ejection?;
    let reason = match &ejection.method {
        Some(method) => format!("{} ({method})", ejection.reason.word()),
        None => ejection.reason.word().to_owned(),
    };
    let reached = match fault {
        Fault::Hung => tally.held.load(Ordering::Relaxed),
        _ => received,
    };
    Some(Sample {
        elapsed,
        reached,
        before,
        failed: tally.failed.load(Ordering::Relaxed),
        reason,
    })
}

/// The median and the largest of `values`, as "median (max)".
fn median_max<T: Copy + Ord>(values: &[T], show: impl Fn(T) -> String) -> String {
    let mut sorted = values.to_vec();
    sorted.sort();
    format!(
        "{} ({})",
        show(sorted[sorted.len() / 2]),
        show(sorted[sorted.len() - 1])
    )
}

fn main() {
    let started = Instant::now();
    let short = WARM_UPS.to_vec();
    let plan = [
        (Fault::Slow, 1, short.clone()),
        (Fault::Slow, 16, short.clone()),
        (Fault::Failing, 1, short.clone()),
        (Fault::Failing, 16, short.clone()),
        (Fault::Failing, 16, FULL_WINDOW.to_vec()),
        (Fault::Hung, 1, short.clone()),
        (Fault::Hung, 16, short),
    ];
    let mut rows = Vec::new();
    for (fault, callers, warm_ups) in plan {
        let mut samples = Vec::new();
        let mut missed = 0;
        for &warm_up in &warm_ups {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .unwrap();
            let sample = runtime.block_on(trial(fault, callers, warm_up));
            runtime.shutdown_timeout(Duration::from_millis(200));
            match sample {
                Some(s) => {
                    eprintln!(
                        "{fault:?}, {callers} callers, {warm_up:?} warm-up: ejected after \
                         {} ms ({}), {} calls reached it, {} in the warm-up, {} failed",
                        s.elapsed.as_millis(),
                        s.reason,
                        s.reached,
                        s.before,
                        s.failed
                    );
                    samples.push(s);
                }
                None => {
                    eprintln!("{fault:?}, {callers} callers: not ejected in {GIVE_UP:?}");
                    missed += 1;
                }
            }
        }
        let (first, last) = (warm_ups[0], warm_ups[warm_ups.len() - 1]);
        let warm_up = if first == last {
            format!("{:.1} s", first.as_secs_f64())
        } else {
            format!("{:.1}–{:.1} s", first.as_secs_f64(), last.as_secs_f64())
        };
        rows.push((fault, callers, warm_up, warm_ups.len(), samples, missed));
    }

    println!(
        "time from the fault to the ejection, median (max) of the trials; 4 providers, one \
         faulty; health options at their defaults"
    );
    println!(
        "| fault | callers | warm-up | trials | ejected as | time to eject | calls that \
         reached it | its calls in the warm-up | calls failed at the callers |"
    );
    println!("|---|---:|---:|---:|---|---:|---:|---:|---:|");
    for (fault, callers, warm_up, trials, samples, missed) in rows {
        let lead = format!(
            "| {} | {callers} | {warm_up} | {trials} |",
            fault.describe()
        );
        if samples.is_empty() {
            println!("{lead} not ejected in {GIVE_UP:?} | | | | |");
            continue;
        }
        let mut reasons: Vec<&str> = samples.iter().map(|s| s.reason.as_str()).collect();
        reasons.sort_unstable();
        reasons.dedup();
        let elapsed: Vec<Duration> = samples.iter().map(|s| s.elapsed).collect();
        let reached: Vec<u64> = samples.iter().map(|s| s.reached).collect();
        let before: Vec<u64> = samples.iter().map(|s| s.before).collect();
        let failed: Vec<u64> = samples.iter().map(|s| s.failed).collect();
        let missed = if missed > 0 {
            format!("; {missed} not ejected in {GIVE_UP:?}")
        } else {
            String::new()
        };
        println!(
            "{lead} {}{missed} | {} | {} | {} | {} |",
            reasons.join(", "),
            median_max(&elapsed, |d| format!("{} ms", d.as_millis())),
            median_max(&reached, |n| n.to_string()),
            median_max(&before, |n| n.to_string()),
            median_max(&failed, |n| n.to_string()),
        );
    }
    println!("all trials in {:.1?}", started.elapsed());
}
