//! 7. The scale curve on etcd: cold resolve at growing fleet sizes (10 revisions each) next
//!    to the floor at each size, the consumer's heap per address and the metadata calls.
//!
//! Each size has a throwaway etcd of its own holding a fleet of that size, and the trials
//! of the sizes are interleaved, so that the sizes are compared under the same machine
//! load (measured one size after the other, the cost per instance of two sizes moved by
//! ±40% from run to run on this shared machine). Instances past the 40,000 ports of one
//! loopback host are on further loopback hosts (`127.0.1.1`, ...). Each of those hosts has
//! its own MetadataService server per revision, at the port the revision's server has on
//! `127.0.0.1`, so every instance's metadata call reaches a server where its record says,
//! and the resolvers keep their default settings.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::*;

/// Loopback hosts hold this many instances each (one port per instance).
const PER_HOST: usize = 40_000;

/// Instance record `i` of the curve's fleet.
fn curve_record(servers: &Servers, i: usize, revisions: usize) -> ServiceInstance {
    let mut record = synthetic(&servers.templates[i % revisions], i % PER_HOST);
    record.host = format!("127.0.{}.1", i / PER_HOST);
    record
}

/// The loopback hosts a fleet of `n` instances spans.
fn hosts_for(n: usize) -> usize {
    n.div_ceil(PER_HOST).max(1)
}

/// MetadataService servers on loopback hosts `1..hosts`: one per revision on each, at the
/// port of the revision's server on `127.0.0.1`.
async fn mirror_servers(servers: &Servers, hosts: usize) -> Result<Vec<Provider>> {
    let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let mut mirrors = Vec::new();
    for h in 1..hosts {
        let ip = Ipv4Addr::new(127, 0, u8::try_from(h).expect("under 256 hosts"), 1);
        for (v, template) in servers.templates.iter().enumerate() {
            let address = SocketAddr::new(IpAddr::V4(ip), template.metadata_service_port());
            let mirror = start_metadata_server_on(&store, v, address).await;
            assert_eq!(
                mirror.instance().await.revision(),
                template.revision(),
                "a mirror serves its revision"
            );
            mirrors.push(mirror);
        }
    }
    Ok(mirrors)
}

/// One size of the curve: its own etcd holding a fleet of that size, and what was measured.
struct Fleet {
    instances: usize,
    /// Kept running while the fleet is measured.
    _etcd: EtcdServer,
    /// Default settings: prefixes read in pages.
    store: Arc<dyn Store>,
    /// Page and response limits raised to fit the whole prefix in one range.
    floor_store: Arc<dyn Store>,
    resolves: Vec<Duration>,
    subscribes: Vec<Duration>,
    floors: Vec<Duration>,
    reads: Vec<Duration>,
    one_range: Vec<Duration>,
    paged: Vec<Duration>,
    warms: Vec<Duration>,
    calls: u64,
}

/// What one size came to.
struct Point {
    instances: usize,
    resolve: Duration,
    subscribe: Duration,
    floor: Duration,
    /// Where the time goes: the floor's prefix read alone, the instance list read in one
    /// range (read and parsing), the same list read as the resolver reads it (pages), and
    /// a resolve with the metadata cached.
    read: Duration,
    list_one_range: Duration,
    list_paged: Duration,
    warm: Duration,
    heap_per_address: f64,
    calls: u64,
    trials: usize,
}

/// Trials at `n` instances: fewer at the largest size, where one trial takes seconds.
fn trials_at(sizes: &Sizes, n: usize) -> usize {
    if n >= 100_000 {
        sizes.cold_trials.min(5)
    } else {
        sizes.cold_trials
    }
}

impl Fleet {
    /// A fresh etcd holding `n` instances in `revisions` revisions.
    async fn start(servers: &Servers, n: usize, revisions: usize) -> Result<Option<Fleet>> {
        let Some(etcd) = EtcdServer::start().await else {
            return Ok(None);
        };
        let store = etcd_store(&etcd).await;
        let floor_store: Arc<dyn Store> = Arc::new(
            introspect::store::EtcdStore::connect(
                introspect::store::EtcdOptions::new([etcd.endpoint()])
                    .with_range_page_size(usize::MAX)
                    .with_max_response_bytes(512 * 1024 * 1024)
                    .with_request_timeout(Duration::from_secs(60)),
            )
            .await?,
        );
        write_fleet(&store, (0..n).map(|i| curve_record(servers, i, revisions))).await?;
        Ok(Some(Fleet {
            instances: n,
            _etcd: etcd,
            store,
            floor_store,
            resolves: Vec::new(),
            subscribes: Vec::new(),
            floors: Vec::new(),
            reads: Vec::new(),
            one_range: Vec::new(),
            paged: Vec::new(),
            warms: Vec::new(),
            calls: 0,
        }))
    }

    /// One trial: the floor (one range read of the prefix plus one MetadataService call),
    /// a cold resolve by a fresh resolver with default settings, then where its time goes.
    async fn trial(&mut self, servers: &Servers, client: &MetadataClient) -> Result<()> {
        let n = self.instances;
        let subscription = Subscription::new(INTERFACES[0]).protocol("tri");
        let server = &servers.templates[0];
        let floor_rig = StoreRig::over("etcd", self.floor_store.clone());
        let (read, floor) = floor_once(&floor_rig, client, server, n).await?;
        self.reads.push(read);
        self.floors.push(floor);

        let resolver = Resolver::new(self.store.clone());
        let started = Instant::now();
        let found = resolver.resolve(&subscription).await?;
        self.resolves.push(started.elapsed());
        assert_eq!(found.len(), n);
        drop(found);
        self.calls = resolver.stats().await.metadata_fetches;

        let started = Instant::now();
        drop(resolver.resolve(&subscription).await?);
        self.warms.push(started.elapsed());
        self.one_range.push(timed_list(&self.floor_store, n).await?);
        self.paged.push(timed_list(&self.store, n).await?);
        self.subscribes
            .push(cold_subscribe(self.store.clone(), &subscription, n).await?);
        Ok(())
    }

    /// The heap a consumer of all 8 interfaces holds per address, and the medians.
    async fn point(self) -> Result<Point> {
        let n = self.instances;
        settle().await;
        let before = live_bytes();
        let mut consumer = AppConsumer {
            resolver: Resolver::new(self.store.clone()),
            instances: registry(&self.store).list(APP).await?.instances,
            endpoints: Vec::new(),
        };
        consumer.refresh().await?;
        settle().await;
        let heap = live_bytes() - before;
        let addresses = consumer.len();
        assert_eq!(addresses, n * 40);
        drop(consumer);
        Ok(Point {
            instances: n,
            trials: self.resolves.len(),
            resolve: median(self.resolves),
            subscribe: median(self.subscribes),
            floor: median(self.floors),
            read: median(self.reads),
            list_one_range: median(self.one_range),
            list_paged: median(self.paged),
            warm: median(self.warms),
            heap_per_address: heap as f64 / addresses as f64,
            calls: self.calls,
        })
    }
}

/// How long listing the app's `n` instances through `store` takes.
async fn timed_list(store: &Arc<dyn Store>, n: usize) -> Result<Duration> {
    let started = Instant::now();
    let list = registry(store).list(APP).await?;
    let took = started.elapsed();
    assert_eq!(list.instances.len(), n);
    Ok(took)
}

/// The curve's rows: one per size, and the cost per instance at the largest size against
/// the size before it. Each size has an etcd of its own, and their trials are interleaved
/// (one trial of each size per round), so the sizes are compared side by side under the
/// same machine load.
pub(super) async fn curve(
    sizes: &Sizes,
    servers: &Servers,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let r = sizes.cold_revisions;
    let largest = sizes.curve_instances.iter().copied().max().unwrap_or(0);
    let _mirrors = mirror_servers(servers, hosts_for(largest)).await?;
    let mut fleets = Vec::new();
    for &n in &sizes.curve_instances {
        let Some(fleet) = Fleet::start(servers, n, r).await? else {
            rows.push(Row::new(
                "Scale curve, etcd",
                "–",
                "–",
                ETCD_SKIPPED,
                "–",
                None,
            ));
            return Ok(());
        };
        fleets.push(fleet);
    }
    let client = MetadataClient::new(Duration::from_secs(3), Limits::default());
    let rounds = sizes.cold_trials;
    for round in 0..rounds {
        for fleet in &mut fleets {
            // A size with fewer trials takes part in rounds spread over the run.
            let trials = trials_at(sizes, fleet.instances);
            let every = (rounds / trials.max(1)).max(1);
            if round % every == 0 && fleet.resolves.len() < trials {
                fleet.trial(servers, &client).await?;
            }
        }
    }
    // The views of the trials' subscriptions outlive them for a grace period: let them go
    // before the heap is measured.
    tokio::time::sleep(introspect::consumer::VIEW_RELEASE_GRACE + Duration::from_secs(1)).await;
    let mut points = Vec::new();
    for fleet in fleets {
        let point = fleet.point().await?;
        let n = point.instances;
        eprintln!(
            "[scale] curve: {n} instances: resolve {}, floor {}",
            ms(point.resolve),
            ms(point.floor)
        );
        notes.push(format!(
            "Scale curve, where the time goes at {n} instances (medians of {}): the floor's \
             prefix read alone {}; the instance list (read and parsing) {} read in one range, \
             {} in the resolver's pages; a resolve with the metadata cached {}.",
            point.trials,
            ms(point.read),
            ms(point.list_one_range),
            ms(point.list_paged),
            ms(point.warm),
        ));
        points.push(point);
    }
    for p in &points {
        let ratio = p.resolve.as_secs_f64() / p.floor.as_secs_f64();
        rows.push(Row::new(
            format!(
                "Scale curve, {} instances in {r} revisions, etcd: cold resolve (median of {})",
                p.instances, p.trials
            ),
            ms(p.resolve),
            ms(p.floor),
            format!(
                "{ratio:.2}× the floor; {:.2} µs per instance",
                per_instance(p)
            ),
            goal(p.instances),
            judged(p.instances, ratio),
        ));
        let ratio = p.subscribe.as_secs_f64() / p.floor.as_secs_f64();
        rows.push(Row::new(
            format!(
                "Scale curve, {} instances in {r} revisions, etcd: cold subscribe until the first full set (median of {})",
                p.instances, p.trials
            ),
            ms(p.subscribe),
            ms(p.floor),
            format!("{ratio:.2}× the floor"),
            goal(p.instances),
            judged(p.instances, ratio),
        ));
        rows.push(Row::new(
            format!(
                "Scale curve, {} instances: consumer heap per address; metadata calls",
                p.instances
            ),
            format!("{:.0} B; {} calls", p.heap_per_address, p.calls),
            format!("–; {r}"),
            "–",
            "calls = revisions",
            Some(p.calls == r as u64),
        ));
    }
    if let [.., before, last] = points.as_slice() {
        let growth = per_instance(last) / per_instance(before);
        rows.push(Row::new(
            format!(
                "Scale curve: cold resolve per instance at {} against {}",
                last.instances, before.instances
            ),
            format!("{:.2} µs", per_instance(last)),
            format!("{:.2} µs", per_instance(before)),
            format!("{growth:.2}×"),
            "≤ 1.25×",
            Some(growth <= 1.25),
        ));
    }
    notes.push(format!(
        "Scale curve (one etcd per size, trials of the sizes interleaved): the floor reads the whole prefix in one range \
         request (page and response limits raised to fit) plus one MetadataService call; the \
         resolver uses default settings, so it reads the prefix in pages pinned to one store \
         revision and sized by bytes (500 keys first, then a sixteenth of the response \
         limit, 4 MiB, at the largest record seen). The heap per address is that of a consumer of all 8 \
         interfaces (40 addresses per instance), as in the consumer-memory row, and includes \
         the instance list and the metadata of the {r} revisions."
    ));
    Ok(())
}

/// Cold resolve and subscribe are held to 1.5× the floor from 10,000 instances up; below,
/// the fixed costs (the mapping read, ten calls against one) dominate a small floor.
const GOAL_FROM: usize = 10_000;

fn goal(n: usize) -> &'static str {
    if n >= GOAL_FROM {
        "≤ 1.5× the floor"
    } else {
        "–"
    }
}

fn judged(n: usize, ratio: f64) -> Option<bool> {
    (n >= GOAL_FROM).then_some(ratio <= 1.5)
}

fn per_instance(p: &Point) -> f64 {
    p.resolve.as_secs_f64() * 1e6 / p.instances as f64
}
