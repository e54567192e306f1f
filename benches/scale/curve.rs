//! 7. The scale curve on etcd: cold resolve at growing fleet sizes (10 revisions each) next
//!    to the floor at each size, the consumer's heap per address and the metadata calls.
//!
//! One throwaway etcd holds the fleet, which grows from one size to the next (the records
//! of the smaller fleet stay). Instances past the 40,000 ports of one loopback host are on
//! further loopback hosts (`127.0.1.1`, ...); their keys sort after those of `127.0.0.1`, so
//! the first members of every revision are on the host where the MetadataService servers
//! listen. Fetches do not always try members in key order, so the curve's resolvers try up
//! to [`FETCH_ATTEMPTS`] members of a revision (a refused loopback connection costs
//! microseconds); with the default of 5, the 100,000 point failed when all 5 were on other
//! loopback hosts.

use super::*;

/// Members of a revision a curve resolver tries before a fetch gives up.
const FETCH_ATTEMPTS: usize = 64;

/// A resolver with default settings but [`FETCH_ATTEMPTS`].
fn curve_resolver(store: &Arc<dyn Store>) -> Resolver {
    Resolver::builder(store.clone())
        .fetch_attempts(FETCH_ATTEMPTS)
        .build()
}

/// Loopback hosts hold this many instances each (one port per instance).
const PER_HOST: usize = 40_000;

/// Instance record `i` of the curve's fleet.
fn curve_record(servers: &Servers, i: usize, revisions: usize) -> ServiceInstance {
    let mut record = synthetic(&servers.templates[i % revisions], i % PER_HOST);
    record.host = format!("127.0.{}.1", i / PER_HOST);
    record
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
    let mut calls = 0;
    for _ in 0..trials {
        let (_, floor) = floor_once(floor_store, &prefix, &client, server, n).await?;
        floors.push(floor);

        let resolver = curve_resolver(store);
        let started = Instant::now();
        let found = resolver.resolve(&subscription).await?;
        resolves.push(started.elapsed());
        assert_eq!(found.len(), n);
        drop(found);
        calls = resolver.stats().await.metadata_fetches;
    }
    settle().await;
    let before = live_bytes();
    let mut consumer = AppConsumer {
        resolver: curve_resolver(store),
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
        heap_per_address: heap as f64 / addresses as f64,
        calls,
        trials,
    })
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
         resolver uses default settings, so it reads the prefix in pages of 500 keys pinned \
         to one store revision. The heap per address is that of a consumer of all 8 \
         interfaces (40 addresses per instance), as in the consumer-memory row, and includes \
         the instance list and the metadata of the {r} revisions."
    ));
    Ok(())
}

fn per_instance(p: &Point) -> f64 {
    p.resolve.as_secs_f64() * 1e6 / p.instances as f64
}
