//! 7. The scale curve on etcd: cold resolve at growing fleet sizes (10 revisions each) next
//!    to the floor at each size, the consumer's heap per address and the metadata calls.
//!
//! One throwaway etcd holds the fleet, which grows from one size to the next (the records
//! of the smaller fleet stay). Instances past the 40,000 ports of one loopback host are on
//! further loopback hosts (`127.0.1.1`, ...). Each of those hosts has its own
//! MetadataService server per revision, at the port the revision's server has on
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

/// Writes records `from..to` (and the mappings) into `store`, 64 writes in flight.
async fn grow(
    store: &Arc<dyn Store>,
    servers: &Servers,
    (from, to): (usize, usize),
    revisions: usize,
) -> Result<()> {
    let registry = registry(store);
    let mut writes = futures::stream::iter((from..to).map(|i| {
        let registry = registry.clone();
        let record = curve_record(servers, i, revisions);
        async move { registry.register(&record, None).await }
    }))
    .buffer_unordered(64);
    while let Some(written) = writes.next().await {
        written?;
    }
    let mapping = Mapping::new(store.clone(), Layout::default(), Limits::default());
    for interface in INTERFACES {
        mapping.add(interface, APP).await?;
    }
    Ok(())
}

/// One size of the curve.
struct Point {
    instances: usize,
    resolve: Duration,
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

/// Cold resolves against the floor at the current fleet size, then the heap a consumer of
/// all 8 interfaces holds per address. The floor reads the prefix in one range request (a
/// store whose page and response limits fit the whole fleet), plus one MetadataService
/// call; the resolver uses default settings (prefixes in pages).
async fn measure(
    store: &Arc<dyn Store>,
    floor_store: &Arc<dyn Store>,
    servers: &Servers,
    n: usize,
    trials: usize,
) -> Result<Point> {
    let subscription = Subscription::new(INTERFACES[0]).protocol("tri");
    let prefix = Layout::default().app_prefix(APP);
    let client = MetadataClient::new(Duration::from_secs(3), Limits::default());
    let server = &servers.templates[0];
    let (mut resolves, mut floors) = (Vec::new(), Vec::new());
    let (mut reads, mut one_range, mut paged, mut warms) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut calls = 0;
    for _ in 0..trials {
        let (read, floor) = floor_once(floor_store, &prefix, &client, server, n).await?;
        reads.push(read);
        floors.push(floor);

        let resolver = Resolver::new(store.clone());
        let started = Instant::now();
        let found = resolver.resolve(&subscription).await?;
        resolves.push(started.elapsed());
        assert_eq!(found.len(), n);
        drop(found);
        calls = resolver.stats().await.metadata_fetches;

        let started = Instant::now();
        drop(resolver.resolve(&subscription).await?);
        warms.push(started.elapsed());
        one_range.push(timed_list(floor_store, n).await?);
        paged.push(timed_list(store, n).await?);
    }
    settle().await;
    let before = live_bytes();
    let mut consumer = AppConsumer {
        resolver: Resolver::new(store.clone()),
        instances: registry(store).list(APP).await?.instances,
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
        resolve: median(resolves),
        floor: median(floors),
        read: median(reads),
        list_one_range: median(one_range),
        list_paged: median(paged),
        warm: median(warms),
        heap_per_address: heap as f64 / addresses as f64,
        calls,
        trials,
    })
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
/// the size before it.
pub(super) async fn curve(
    sizes: &Sizes,
    servers: &Servers,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let r = sizes.cold_revisions;
    let Some(etcd) = EtcdServer::start().await else {
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
    let largest = sizes.curve_instances.iter().copied().max().unwrap_or(0);
    let _mirrors = mirror_servers(servers, hosts_for(largest)).await?;
    let mut points = Vec::new();
    let mut written = 0;
    for &n in &sizes.curve_instances {
        grow(&store, servers, (written, n), r).await?;
        written = n;
        let point = measure(&store, &floor_store, servers, n, trials_at(sizes, n)).await?;
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
            "–",
            None,
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
        "Scale curve (etcd, one growing fleet): the floor reads the whole prefix in one range \
         request (page and response limits raised to fit) plus one MetadataService call; the \
         resolver uses default settings, so it reads the prefix in pages pinned to one store \
         revision and sized by bytes (500 keys first, then a sixteenth of the response \
         limit, 4 MiB, at the largest record seen). The heap per address is that of a consumer of all 8 \
         interfaces (40 addresses per instance), as in the consumer-memory row, and includes \
         the instance list and the metadata of the {r} revisions."
    ));
    Ok(())
}

fn per_instance(p: &Point) -> f64 {
    p.resolve.as_secs_f64() * 1e6 / p.instances as f64
}
