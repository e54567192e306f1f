//! 8. Many subscriptions: a gateway subscribed to many interfaces served by a few apps.
//!
//! `many_apps` apps each export the same `many_interfaces` interfaces (so every interface's
//! mapping names every app) from a real provider serving MetadataService, with
//! `many_instances_per_app` instances each. One arm subscribes to every interface on one
//! resolver (one shared view per app and per mapping); the other makes the same kind of
//! subscriptions on separate resolvers, one each (what every subscription cost before the
//! views were shared), scaled down to `many_separate` resolvers. Measured for each: store
//! watches held, consumer heap, and the time from one instance change (a registration or a
//! deregistration in a known revision) until every subscription has the new set.
//!
//! The change is a new address (its `dubbo.endpoints` name its own port): a copy of an
//! existing record with only `port` changed would leave every set as it was, and no
//! subscription would see a change.

use introspect::{ServiceInfo, SubscriptionHandle};

use super::*;

/// The interface `k` every app exports.
fn interface(k: usize) -> String {
    format!("com.example.gateway.Api{k:04}")
}

/// The name of app `a`.
fn app_name(a: usize) -> String {
    format!("gateway-backend-{a}")
}

/// The apps: a real provider each (its own record kept, on loopback), plus synthetic
/// records of the same revision pointing at its MetadataService.
async fn fleet(sizes: &Sizes, store: &Arc<dyn Store>) -> Result<Vec<Provider>> {
    let mut providers = Vec::new();
    for a in 0..sizes.many_apps {
        let app = app_name(a);
        let mut builder = Provider::builder(&app, store.clone())
            .host(HOST)
            .serve_metadata_on("127.0.0.1:0".parse().expect("loopback address"))
            .lease_ttl(Duration::from_secs(600));
        for k in 0..sizes.many_interfaces {
            builder = builder.export(ServiceInfo::new(interface(k)));
        }
        let provider = builder.start().await?;
        let template = provider.instance().await;
        let registry = registry(store);
        for j in 1..sizes.many_instances_per_app {
            registry
                .register(&synthetic(&template, a * 100 + j), None)
                .await?;
        }
        providers.push(provider);
    }
    Ok(providers)
}

/// Waits until every handle has a new set; fails the run after 30 s (a lost update),
/// saying how many had it.
async fn all_changed(
    handles: &mut [SubscriptionHandle],
    trial: usize,
) -> Vec<Result<Arc<Vec<Endpoint>>>> {
    let total = handles.len();
    let mut waits: futures::stream::FuturesUnordered<_> = handles
        .iter_mut()
        .map(SubscriptionHandle::changed)
        .collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut sets = Vec::with_capacity(total);
    while let Ok(Some(set)) = tokio::time::timeout_at(deadline, waits.next()).await {
        sets.push(set);
    }
    assert_eq!(
        sets.len(),
        total,
        "change {trial}: subscriptions with the new set after 30 s"
    );
    sets
}

/// One arm's figures.
struct Arm {
    subscriptions: usize,
    resolvers: usize,
    watches: usize,
    heap: isize,
    subscribe_time: Duration,
    /// Per change: the time until every subscription had the new set.
    propagation: Vec<Duration>,
}

/// Subscribes to `subscriptions` interfaces on `resolvers` resolvers (the subscriptions
/// spread evenly), then times `trials` instance changes of the first app.
async fn arm(
    sizes: &Sizes,
    store: &Arc<MemoryStore>,
    resolvers: usize,
    subscriptions: usize,
) -> Result<Arm> {
    let dyn_store: Arc<dyn Store> = store.clone();
    settle().await;
    let watches_before = store.watch_count();
    let before = live_bytes();
    let started = Instant::now();
    let all: Vec<Resolver> = (0..resolvers)
        .map(|_| propagation_resolver(dyn_store.clone(), Duration::ZERO))
        .collect();
    let mut handles: Vec<SubscriptionHandle> = Vec::with_capacity(subscriptions);
    for k in 0..subscriptions {
        let handle = all[k % resolvers]
            .subscribe(Subscription::new(interface(k)))
            .await?;
        let expected = sizes.many_apps * sizes.many_instances_per_app;
        assert_eq!(handle.current().len(), expected, "every app's instances");
        handles.push(handle);
    }
    let subscribe_time = started.elapsed();
    eprintln!(
        "[scale] many: {subscriptions} subscriptions on {resolvers} resolver(s) in {}",
        ms(subscribe_time)
    );
    settle().await;
    let heap = live_bytes() - before;
    let watches = store.watch_count() - watches_before;

    // One extra instance of the first app joins and leaves, in turn.
    let registry = registry(&dyn_store);
    let listed = registry.list(&app_name(0)).await?;
    let template = listed
        .instances
        .values()
        .next()
        .expect("the app has instances");
    // A new instance on a port of its own: its `dubbo.endpoints` name that port too, so it
    // is a new address (a copy with only `port` changed would repeat an existing address,
    // leave the endpoint set as it was and push nothing).
    let record = synthetic(template, 39_000);
    let mut propagation = Vec::new();
    for trial in 0..sizes.many_trials {
        let started = Instant::now();
        if trial % 2 == 0 {
            registry.register(&record, None).await?;
        } else {
            registry
                .deregister(&record.service_name, HOST, record.port)
                .await?;
        }
        let sets = all_changed(&mut handles, trial).await;
        propagation.push(started.elapsed());
        let expected = sizes.many_apps * sizes.many_instances_per_app + usize::from(trial % 2 == 0);
        for set in sets {
            assert_eq!(set?.len(), expected);
        }
    }
    if sizes.many_trials % 2 == 1 {
        registry
            .deregister(&record.service_name, HOST, record.port)
            .await?;
        all_changed(&mut handles, sizes.many_trials).await;
    }
    drop(handles);
    drop(all);
    Ok(Arm {
        subscriptions,
        resolvers,
        watches,
        heap,
        subscribe_time,
        propagation,
    })
}

pub(super) async fn many_subscriptions(
    sizes: &Sizes,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let store = Arc::new(MemoryStore::new());
    let dyn_store: Arc<dyn Store> = store.clone();
    let providers = fleet(sizes, &dyn_store).await?;
    let shared = arm(sizes, &store, 1, sizes.many_interfaces).await?;
    settle().await;
    let separate = arm(sizes, &store, sizes.many_separate, sizes.many_separate).await?;
    drop(providers);

    let label = |a: &Arm| {
        if a.resolvers == 1 {
            format!("{} subscriptions on 1 resolver", a.subscriptions)
        } else {
            format!(
                "{} subscriptions on {} resolvers",
                a.subscriptions, a.resolvers
            )
        }
    };
    let per = |x: f64, a: &Arm| x / a.subscriptions as f64;
    let what = format!(
        "{} subscriptions over interfaces of {} apps: {} vs {}",
        sizes.many_interfaces,
        sizes.many_apps,
        label(&shared),
        label(&separate)
    );
    let watches_ratio =
        per(separate.watches as f64, &separate) / per(shared.watches as f64, &shared);
    rows.push(Row::new(
        format!("Many subscriptions, store watches held ({what})"),
        format!(
            "{} ({:.2} per subscription)",
            shared.watches,
            per(shared.watches as f64, &shared)
        ),
        format!(
            "{} ({:.2} per subscription)",
            separate.watches,
            per(separate.watches as f64, &separate)
        ),
        format!("{watches_ratio:.1}× fewer per subscription"),
        "one per app and per interface",
        Some(shared.watches <= sizes.many_apps + sizes.many_interfaces),
    ));
    let heap_ratio = per(separate.heap as f64, &separate) / per(shared.heap as f64, &shared);
    rows.push(Row::new(
        format!("Many subscriptions, consumer heap ({what})"),
        format!(
            "{} ({:.1} KiB per subscription)",
            kib(shared.heap as f64),
            per(shared.heap as f64, &shared) / 1024.0
        ),
        format!(
            "{} ({:.1} KiB per subscription)",
            kib(separate.heap as f64),
            per(separate.heap as f64, &separate) / 1024.0
        ),
        format!("{heap_ratio:.1}× less per subscription"),
        "–",
        None,
    ));
    let mut p_shared = shared.propagation.clone();
    let mut p_separate = separate.propagation.clone();
    p_shared.sort();
    p_separate.sort();
    rows.push(Row::new(
        format!(
            "Many subscriptions, one instance change until every subscription has it, p50 \
             ({what})"
        ),
        ms(percentile(&p_shared, 50)),
        ms(percentile(&p_separate, 50)),
        format!(
            "{:.2}× the time for {:.0}× the subscriptions",
            percentile(&p_shared, 50).as_secs_f64() / percentile(&p_separate, 50).as_secs_f64(),
            shared.subscriptions as f64 / separate.subscriptions as f64
        ),
        "–",
        None,
    ));
    notes.push(format!(
        "Many subscriptions (memory store, {} apps each exporting the same {} interfaces, {} \
         instances per app, coalescing window zero, self-preservation off): subscribing took \
         {} for {} on one resolver and {} for {} on separate resolvers (each fetching the \
         metadata of every app itself). The separate-resolver arm is scaled down to {} \
         resolvers (1,000 would hold ~{} watches); its figures are compared per \
         subscription. Propagation: {} changes, max {} (one resolver) and {} (separate).",
        sizes.many_apps,
        sizes.many_interfaces,
        sizes.many_instances_per_app,
        ms(shared.subscribe_time),
        shared.subscriptions,
        ms(separate.subscribe_time),
        separate.subscriptions,
        sizes.many_separate,
        (sizes.many_apps + 1) * 1000,
        sizes.many_trials,
        ms(p_shared[p_shared.len() - 1]),
        ms(p_separate[p_separate.len() - 1]),
    ));
    Ok(())
}
