//! The long churn: a fleet that keeps changing for a long time, under one resolver holding
//! many subscriptions. Nothing here is a timed assertion; it prints, once a minute, what
//! would grow if anything leaked: resident memory, live tokio tasks, open sockets and the
//! store's watches.
//!
//! * 200 apps, each a real provider serving MetadataService on loopback and exporting 5
//!   interfaces (one revision per app), plus 10 synthetic instances of the same revision;
//! * 1,000 subscriptions (every interface of every app) on one resolver, each followed by
//!   a task that takes every published set;
//! * every 50 ms a random app is rolled by one instance, as a deploy does: one synthetic
//!   instance registers (a new port) and the app's oldest stops gracefully (marked as
//!   stopping, then deleted): 20 registrations and 20 deregistrations per second, every
//!   app's size constant (apps that grew and shrank at random would make the per-app tables
//!   drift with the walk, which is not what the run looks for);
//! * at the end the churn stops and every subscription's final set must equal its app's
//!   records in the registry.
//!
//! `cargo bench --bench churn` runs 10 minutes (`-- --minutes N` to change it); without
//! `--bench` (as `cargo test --benches` runs it) it is a 10 s smoke run. The store is the
//! embedded one, whose watch count is exact; the figures are for `BENCHMARKS.md`.

#[path = "common/mod.rs"]
#[allow(dead_code)]
mod common;
#[path = "common/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{CountingAlloc, live_bytes};

/// Counts live heap bytes: RSS also holds what the allocator keeps but no one uses.
#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use introspect::backend::kv::registry::Registry;
use introspect::{
    Layout, Limits, MemoryStore, Provider, Resolver, ServiceInfo, ServiceInstance, Store,
    Subscription,
};

const APPS: usize = 200;
const INTERFACES_PER_APP: usize = 5;
const SYNTHETIC_PER_APP: usize = 10;
const TICK: Duration = Duration::from_millis(50);
/// Store revisions of watch history kept: about 30 s of the churn.
const STORE_HISTORY: usize = 2_000;

fn app_name(a: usize) -> String {
    format!("churn-app-{a:03}")
}

fn interface(a: usize, k: usize) -> String {
    format!("com.example.churn.App{a:03}Api{k}")
}

/// A small deterministic generator (xorshift), so runs churn alike.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// One app: its real provider (the MetadataService synthetic records point at) and the
/// synthetic ports registered now, oldest first.
struct App {
    name: String,
    template: ServiceInstance,
    live: VecDeque<u16>,
    next_port: u16,
    _provider: Provider,
}

/// What the process holds, read from `/proc/self` and the runtime.
#[derive(Clone, Copy)]
struct Sample {
    rss_kib: u64,
    heap: isize,
    tasks: usize,
    sockets: usize,
    watches: usize,
}

fn sample(store: &MemoryStore) -> Sample {
    let rss_kib = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0);
    let sockets = std::fs::read_dir("/proc/self/fd")
        .map(|fds| {
            fds.filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
                .filter(|target| target.to_string_lossy().starts_with("socket:"))
                .count()
        })
        .unwrap_or(0);
    Sample {
        rss_kib,
        heap: live_bytes(),
        tasks: tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks(),
        sockets,
        watches: store.watch_count(),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bench = args.iter().any(|a| a == "--bench");
    let minutes: u64 = args
        .iter()
        .position(|a| a == "--minutes")
        .and_then(|i| args.get(i + 1))
        .and_then(|m| m.parse().ok())
        .unwrap_or(10);
    let (length, every) = if bench {
        (Duration::from_secs(60 * minutes), Duration::from_secs(60))
    } else {
        (Duration::from_secs(10), Duration::from_secs(2))
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    // `--store-only`: the same churn with no resolver, to tell the store's memory from
    // the resolver's.
    let store_only = args.iter().any(|a| a == "--store-only");
    runtime.block_on(run(length, every, store_only));
}

async fn run(length: Duration, every: Duration, store_only: bool) {
    // The store keeps a bounded history of changes for watches (100,000 revisions by
    // default, a minute of this churn is 3,600): bounded here to a few seconds' worth, so
    // that what grows, if anything, is the resolver and not the store's history filling up.
    let memory = Arc::new(MemoryStore::with_history(STORE_HISTORY));
    let store: Arc<dyn Store> = memory.clone();
    let registry = Registry::new(store.clone(), Layout::default(), Limits::default());

    let mut apps = Vec::with_capacity(APPS);
    for a in 0..APPS {
        let name = app_name(a);
        let mut builder = Provider::builder(&name, store.clone())
            .serve_metadata_on("127.0.0.1:0".parse().expect("loopback address"))
            .lease_ttl(Duration::from_secs(3600));
        for k in 0..INTERFACES_PER_APP {
            builder = builder.export(ServiceInfo::new(interface(a, k)));
        }
        let provider = builder.start().await.expect("provider starts");
        let template = provider.instance().await;
        let mut app = App {
            name,
            template,
            live: VecDeque::new(),
            next_port: 20_000,
            _provider: provider,
        };
        for _ in 0..SYNTHETIC_PER_APP {
            register(&registry, &mut app).await;
        }
        apps.push(app);
    }

    let resolver = Resolver::new(store.clone());
    let published = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::with_capacity(APPS * INTERFACES_PER_APP);
    for a in (0..APPS).filter(|_| !store_only) {
        for k in 0..INTERFACES_PER_APP {
            let handle = resolver
                .subscribe(Subscription::new(interface(a, k)))
                .await
                .expect("subscribes");
            let mut follower = handle.clone();
            let published = published.clone();
            tokio::spawn(async move {
                while follower.changed().await.is_ok() {
                    published.fetch_add(1, Ordering::Relaxed);
                }
            });
            handles.push((a, handle));
        }
    }
    println!(
        "[churn] {APPS} apps × {INTERFACES_PER_APP} interfaces, {} subscriptions on one \
         resolver; 20 registrations and 20 deregistrations per second for {length:?}",
        handles.len()
    );
    println!(
        "| minute | RSS MiB | live heap MiB | live tasks | open sockets | store watches | changes | sets published |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let started = Instant::now();
    let mut ticker = tokio::time::interval(TICK);
    let mut next_sample = started + every;
    let mut changes = 0u64;
    let mut samples: Vec<Sample> = Vec::new();
    let print = |at: Duration, s: Sample, changes: u64| {
        println!(
            "| {:.1} | {:.1} | {:.1} | {} | {} | {} | {changes} | {} |",
            at.as_secs_f64() / 60.0,
            s.rss_kib as f64 / 1024.0,
            s.heap as f64 / (1024.0 * 1024.0),
            s.tasks,
            s.sockets,
            s.watches,
            published.load(Ordering::Relaxed)
        );
    };
    while started.elapsed() < length {
        ticker.tick().await;
        let rolled = &mut apps[rng.below(APPS)];
        register(&registry, rolled).await;
        deregister_gracefully(&registry, rolled).await;
        changes += 2;
        if Instant::now() >= next_sample {
            next_sample += every;
            let s = sample(&memory);
            print(started.elapsed(), s, changes);
            samples.push(s);
        }
    }

    // Settle, then every subscription's set must be its app's records.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut wrong = 0;
    for (a, handle) in &handles {
        let records = registry.list(&apps[*a].name).await.expect("lists");
        let expected: BTreeSet<u16> = records.instances.values().map(|i| i.port).collect();
        let seen: BTreeSet<u16> = handle.current().iter().map(|e| e.instance_port).collect();
        if seen != expected {
            wrong += 1;
            if wrong <= 5 {
                println!(
                    "[churn] {}: {} extra {:?}, {} missing {:?}, protection active {}",
                    handle.subscription().interface,
                    seen.difference(&expected).count(),
                    seen.difference(&expected).take(5).collect::<Vec<_>>(),
                    expected.difference(&seen).count(),
                    expected.difference(&seen).take(5).collect::<Vec<_>>(),
                    handle.protection_active()
                );
            }
        }
    }
    let first = samples.first().copied();
    let last = samples.last().copied();
    if let (Some(first), Some(last)) = (first, last) {
        let growth = |a: f64, b: f64| if a > 0.0 { (b - a) / a * 100.0 } else { 0.0 };
        println!(
            "[churn] from the first sample to the last: RSS {:+.1}%, live heap {:+.1}%, live \
             tasks {} → {}, sockets {} → {}, watches {} → {}",
            growth(first.rss_kib as f64, last.rss_kib as f64),
            growth(first.heap as f64, last.heap as f64),
            first.tasks,
            last.tasks,
            first.sockets,
            last.sockets,
            first.watches,
            last.watches
        );
    }
    println!("[churn] resolver: {:?}", resolver.stats().await);
    println!(
        "[churn] final sets equal to the registry's: {} of {}",
        handles.len() - wrong,
        handles.len()
    );
    println!(
        "[churn] synthetic instances at the end: {} ({SYNTHETIC_PER_APP} per app at the start)",
        apps.iter().map(|app| app.live.len()).sum::<usize>()
    );
    assert_eq!(
        wrong, 0,
        "subscriptions whose final set differs from the registry"
    );
}

/// Stops the oldest synthetic instance of `app` as a provider does: its record marked as
/// stopping first, then deleted. (A bare delete looks like an expiry, which
/// self-preservation may hold: that is the partition tests' subject, not this one's.)
async fn deregister_gracefully(registry: &Registry, app: &mut App) {
    let port = app.live.pop_front().expect("a synthetic instance");
    let mut stopping = common::synthetic(&app.template, usize::from(port) - 20_000);
    stopping.mark_stopping();
    registry
        .register(&stopping, None)
        .await
        .expect("marks stopping");
    registry
        .deregister(&app.name, common::HOST, port)
        .await
        .expect("deregisters");
}

/// Registers one more synthetic instance of `app` at its next port.
async fn register(registry: &Registry, app: &mut App) {
    let port = app.next_port;
    app.next_port = if app.next_port >= 59_999 {
        20_000
    } else {
        app.next_port + 1
    };
    // Its own port for every protocol, MetadataService still at the real provider.
    let instance = common::synthetic(&app.template, usize::from(port) - 20_000);
    registry.register(&instance, None).await.expect("registers");
    app.live.push_back(port);
}
