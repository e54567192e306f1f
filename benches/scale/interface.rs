//! Scenario 11: what reading the interface level costs a consumer, on ZooKeeper. A fleet of
//! N instances of one app exporting one interface, registered at both levels as Dubbo Java
//! 3.3 providers register by default (`register-mode=all`): N instance records and N
//! interface-level URLs under `/dubbo/{interface}/providers/`. One subscription to that
//! interface at each migration step, cold, each on a connection of its own; the server's
//! own counters (`cons`: packets per connection; `wchs`: watches) say how many requests it
//! made and how many watches it set, then how many requests each URL change costs it.
//!
//! `FORCE_APPLICATION` (the default) is the common Rust consumer: it must cost nothing for
//! the interface level.

use introspect::ServiceInfo;
use introspect::consumer::{MigrationStep, SubscribeOptions, Subscription};
use introspect::model::ProviderUrl;

use super::zookeeper::ZooKeeperRig;
use super::*;

/// The interface-level URL instance `instance` writes for [`INTERFACES`]`[0]` over Triple.
fn url_of(instance: &ServiceInstance) -> ProviderUrl {
    let mut service = ServiceInfo::new(INTERFACES[0]).with_protocol("tri");
    service.params = common::service_params(INTERFACES[0], "tri", 0);
    ProviderUrl::for_service(
        APP,
        &instance.host,
        instance.port,
        &service,
        1_764_600_000_000,
    )
    .expect("a URL that can be written")
    .expect("a URL: the service has a protocol")
}

/// What one cold subscription cost the server.
struct Cost {
    cold: Duration,
    /// Requests on the subscription's connection: its connect, reads, watches.
    requests: u64,
    watches: u64,
    /// Requests per interface-level URL change, beyond a quiet time's (pings).
    per_change: f64,
}

/// Subscribes at `step` on a connection of its own and counts its requests and the watches
/// it set, then its requests while `extras` are created and deleted one by one.
async fn subscribe_at(
    rig: &ZooKeeperRig,
    step: MigrationStep,
    n: usize,
    extras: &[ProviderUrl],
) -> Result<Cost> {
    let known = rig.received_per_connection().await?;
    let watches_before = rig.watches().await?;
    let started = Instant::now();
    let resolver = Resolver::builder(rig.fresh_backend().await)
        .subscribe_options(SubscribeOptions::default().migration_step(step))
        .build();
    let handle = resolver
        .subscribe(Subscription::new(INTERFACES[0]).protocol("tri"))
        .await?;
    let cold = started.elapsed();
    assert_eq!(handle.current().len(), n, "{step}: every endpoint");
    // Let the follows settle (a re-list after the first read, a watch being set).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let watches = rig.watches().await?.saturating_sub(watches_before);
    let now = rig.received_per_connection().await?;
    let (address, requests) = now
        .iter()
        .find(|(address, _)| !known.contains_key(*address))
        .map(|(a, r)| (a.clone(), *r))
        .expect("the subscription's connection");
    let received = || async {
        Ok::<_, introspect::Error>(
            rig.received_per_connection()
                .await?
                .get(&address)
                .copied()
                .unwrap_or(0),
        )
    };
    // Changes, URLs created and deleted one by one, beside as long a quiet time (pings).
    let spacing = Duration::from_millis(100);
    let quiet_start = received().await?;
    tokio::time::sleep(spacing * 2 * u32::try_from(extras.len()).unwrap_or(u32::MAX)).await;
    let quiet_end = received().await?;
    for url in extras {
        rig.write_interface_urls(std::slice::from_ref(url)).await?;
        tokio::time::sleep(spacing).await;
        rig.delete_interface_url(url).await?;
        tokio::time::sleep(spacing).await;
    }
    let busy = received().await? - quiet_end;
    let changes = 2 * extras.len() as u64;
    drop(handle);
    drop(resolver);
    // The next step starts once this connection (and its watches) is gone.
    let deadline = Instant::now() + Duration::from_secs(10);
    while rig.received_per_connection().await?.contains_key(&address) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    #[allow(clippy::cast_precision_loss)] // small counts
    let per_change = busy.saturating_sub(quiet_end - quiet_start) as f64 / changes as f64;
    Ok(Cost {
        cold,
        requests,
        watches,
        per_change,
    })
}

/// Scenario 11; see the module docs.
pub async fn interface_level(
    sizes: &Sizes,
    servers: &Servers,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Result<()> {
    let n = sizes.interface_urls;
    let scenario = |step: MigrationStep| {
        format!("Interface level: one subscription at {step}, {n} instances + {n} URLs, ZooKeeper")
    };
    let target = "FORCE_APPLICATION: no request or watch for the interface level";
    let Some(rig) = ZooKeeperRig::start().await else {
        rows.push(Row::new(
            scenario(MigrationStep::ForceApplication),
            "–",
            "–",
            skipped("ZooKeeper"),
            target,
            None,
        ));
        return Ok(());
    };
    let fleet = fleet(servers, n, 1);
    rig.write_fleet(fleet.clone()).await?;
    let urls: Vec<ProviderUrl> = fleet.iter().map(url_of).collect();
    rig.write_interface_urls(&urls).await?;
    // Addresses of no instance of the fleet (TEST-NET-1): only read, never called.
    let extras: Vec<ProviderUrl> = (1..=10)
        .map(|i| {
            let mut instance = fleet[0].clone();
            instance.host = format!("192.0.2.{i}");
            url_of(&instance)
        })
        .collect();
    let mut costs = Vec::new();
    for step in [
        MigrationStep::ForceApplication,
        MigrationStep::ApplicationFirst,
        MigrationStep::ForceInterface,
    ] {
        costs.push((step, subscribe_at(&rig, step, n, &extras).await?));
    }
    let plain = &costs[0].1;
    for (step, cost) in &costs {
        let shown = format!(
            "{} requests, {} watches, cold {}; {:.1} request(s) per URL change",
            cost.requests,
            cost.watches,
            ms(cost.cold),
            cost.per_change
        );
        if *step == MigrationStep::ForceApplication {
            rows.push(Row::new(
                scenario(*step),
                shown,
                "–",
                format!("{:.1} request(s) per URL change", cost.per_change),
                target,
                // A follow reads at least once per change (1.0 and more below); pings
                // that fall unevenly into the two windows are the rest.
                Some(cost.per_change < 0.5),
            ));
            continue;
        }
        let comparison = format!(
            "FORCE_APPLICATION: {} requests, {} watches, cold {}",
            plain.requests,
            plain.watches,
            ms(plain.cold)
        );
        let more = |a: u64, b: u64| i128::from(a) - i128::from(b);
        let result = format!(
            "{:+} requests, {:+} watches",
            more(cost.requests, plain.requests),
            more(cost.watches, plain.watches)
        );
        rows.push(Row::new(
            scenario(*step),
            shown,
            comparison,
            result,
            "measured",
            None,
        ));
    }
    notes.push(format!(
        "Interface level: counted by the ZooKeeper server for one cold subscription on a \
         connection of its own (`cons`: the packets that connection sent, connect and pings \
         included; `wchs`: the watches it added), 300 ms after it returned; then 10 \
         interface-level URLs created and deleted one by one, 100 ms apart, against as long \
         a quiet time (its pings): the requests per change are the consumer's reads of the \
         interface level. A persistent watch counts as a watch. Fleet: {n} \
         instance records in 1 revision and {n} provider URLs of the same interface, as Java \
         3.3 providers at `register-mode=all` write them."
    ));
    Ok(())
}
