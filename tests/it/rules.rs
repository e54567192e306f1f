//! Rules from the config centre route the balanced channel's calls, judged by the calls each
//! provider answers. Three Greeter providers of one app on the memory store (the config
//! centre's keys sit in the same store, where etcd keeps them); rules are written through
//! the backend's config part as an operator's tool would, in the forms dubbo-admin writes.
//! (`governance_rules.rs` holds the same rules side by side with a real Java consumer.)

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use crate::support::calls::{calls_until, count_calls};
use crate::support::greeter::pb::HelloRequest;
use crate::support::greeter::pb::greeter_client::GreeterClient;
use crate::support::greeter::{GreeterNode, greeter_service, start_greeter_exporting};
use crate::support::rules::{delete_rule, put_rule};
use crate::support::wait::eventually;
use introspect::consumer::{BalancedChannel, ChannelHandle, ChannelOptions, SubscriptionHandle};
use introspect::{Backend, MemoryStore, Resolver, ServiceInfo, Store, Subscription};

const APP: &str = "ruled-greeter";
const CONSUMER: &str = "shop";
const SERVICE_CONDITIONS: &str = "helloworld.Greeter::.condition-router";
const GROUP: &str = "dubbo";
/// How long a rule may take to be obeyed (it takes milliseconds on the memory store).
const OBEYED_WITHIN: Duration = Duration::from_secs(10);

/// A rule written before the consumer starts: its key, and its text given the providers'
/// ports.
type EarlyRule<'a> = (&'a str, &'a dyn Fn(&[u16]) -> String);

struct Fleet {
    store: Arc<MemoryStore>,
    backend: Backend,
    nodes: Vec<GreeterNode>,
    _subscription: SubscriptionHandle,
    _handle: ChannelHandle,
    channel: BalancedChannel,
}

impl Fleet {
    /// Three providers, and a consumer of app [`CONSUMER`] with a channel to them, built
    /// after `before` rules are written.
    async fn start(before: &[EarlyRule<'_>]) -> Fleet {
        let store = Arc::new(MemoryStore::new());
        let backend = Backend::from(store.clone());
        let mut nodes = Vec::new();
        for _ in 0..3 {
            nodes.push(provider(&backend, greeter_service()).await);
        }
        let ports: Vec<u16> = nodes.iter().map(|n| n.address.port()).collect();
        for (key, rule) in before {
            put_rule(&backend, key, &rule(&ports)).await;
        }
        let resolver = Resolver::builder(backend.clone())
            .application(CONSUMER)
            .build();
        let subscription = resolver
            .subscribe(Subscription::new("helloworld.Greeter"))
            .await
            .unwrap();
        eventually(OBEYED_WITHIN, "three endpoints", || {
            let n = subscription.current().len();
            async move { n == 3 }
        })
        .await;
        let (channel, handle) = resolver
            .balanced_channel_with(&subscription, ChannelOptions::default())
            .unwrap();
        Fleet {
            store,
            backend,
            nodes,
            _subscription: subscription,
            _handle: handle,
            channel,
        }
    }

    fn port(&self, i: usize) -> u16 {
        self.nodes[i].address.port()
    }

    /// Makes `calls` calls (with `headers`), returns how many each provider answered and
    /// the errors.
    async fn calls(&self, calls: u32, headers: &[(&'static str, &str)]) -> (Vec<u64>, Vec<String>) {
        count_calls(&self.channel, &self.counters(), calls, headers).await
    }

    /// Waits until 60 calls are answered as `check` wants.
    async fn until(
        &self,
        what: &str,
        headers: &[(&'static str, &str)],
        check: impl Fn(&[u64], &[String]) -> bool,
    ) {
        calls_until(
            &self.channel,
            &self.counters(),
            headers,
            OBEYED_WITHIN,
            what,
            check,
        )
        .await;
    }

    fn counters(&self) -> Vec<Arc<AtomicU64>> {
        self.nodes.iter().map(GreeterNode::counter).collect()
    }
}

/// A Greeter provider of [`APP`] on loopback exporting `service`, registered in `backend`.
async fn provider(backend: &Backend, service: ServiceInfo) -> GreeterNode {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    start_greeter_exporting(
        backend.clone(),
        APP,
        Duration::from_secs(4),
        Duration::from_millis(100),
        listener,
        None,
        service,
    )
    .await
}

fn avoid(port: u16, force: bool) -> String {
    format!(
        "configVersion: v3.0\nscope: service\nkey: helloworld.Greeter\nenabled: true\n\
         force: {force}\nconditions:\n  - '=> port != {port}'\n"
    )
}

#[tokio::test]
async fn a_condition_rule_routes_calls_until_it_is_deleted() {
    let fleet = Fleet::start(&[]).await;
    let (answered, errors) = fleet.calls(300, &[]).await;
    assert!(errors.is_empty(), "{errors:?}");
    assert!(
        answered.iter().all(|&n| n > 0),
        "every provider reached: {answered:?}"
    );

    put_rule(
        &fleet.backend,
        SERVICE_CONDITIONS,
        &avoid(fleet.port(0), false),
    )
    .await;
    fleet
        .until("the rule is obeyed", &[], |a, e| a[0] == 0 && e.is_empty())
        .await;
    let (answered, errors) = fleet.calls(300, &[]).await;
    assert_eq!(answered[0], 0, "the rule stays obeyed: {answered:?}");
    assert!(answered[1] > 0 && answered[2] > 0 && errors.is_empty());

    delete_rule(&fleet.backend, SERVICE_CONDITIONS).await;
    fleet
        .until("the deleted rule stops applying", &[], |a, _| a[0] > 0)
        .await;
}

#[tokio::test]
async fn a_rule_written_before_the_channel_is_obeyed_from_the_first_call() {
    let fleet = Fleet::start(&[(SERVICE_CONDITIONS, &|p: &[u16]| avoid(p[0], false))]).await;
    let (answered, errors) = fleet.calls(200, &[]).await;
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(answered[0], 0, "{answered:?}");
}

#[tokio::test]
async fn a_bad_rule_written_over_a_good_one_leaves_the_good_one_in_force() {
    let fleet = Fleet::start(&[(SERVICE_CONDITIONS, &|p: &[u16]| avoid(p[0], false))]).await;
    let (answered, _) = fleet.calls(60, &[]).await;
    assert_eq!(answered[0], 0, "the good rule is in force: {answered:?}");
    let oversized = format!(
        "{}# {}\n",
        avoid(fleet.port(1), false),
        "x".repeat(70 * 1024)
    );
    for bad in [
        "conditions: [unclosed",
        "configVersion: v9.9\nconditions:\n  - '=> port != 1'\n",
        &oversized,
    ] {
        // Written raw, where the config part reads it: the part itself refuses to write
        // an oversized rule.
        fleet
            .store
            .put(
                &format!("/dubbo/config/{GROUP}/{SERVICE_CONDITIONS}"),
                bad.as_bytes().to_vec(),
                None,
            )
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (answered, errors) = fleet.calls(150, &[]).await;
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            answered[0], 0,
            "the good rule still applies after {bad:.40?}: {answered:?}"
        );
        assert!(answered[1] > 0, "the bad rule does not: {answered:?}");
    }
}

#[tokio::test]
async fn a_rule_that_leaves_no_provider_applies_only_when_forced() {
    let nowhere = |force: bool| {
        format!(
            "configVersion: v3.0\nkey: helloworld.Greeter\nscope: service\nforce: {force}\n\
             conditions:\n  - '=> port = 1'\n"
        )
    };
    let fleet = Fleet::start(&[(SERVICE_CONDITIONS, &|_: &[u16]| nowhere(false))]).await;
    let (answered, errors) = fleet.calls(90, &[]).await;
    assert!(
        errors.is_empty(),
        "not forced: ignored, as Java does: {errors:?}"
    );
    assert!(answered.iter().all(|&n| n > 0), "{answered:?}");

    put_rule(&fleet.backend, SERVICE_CONDITIONS, &nowhere(true)).await;
    fleet
        .until("the forced rule fails calls", &[], |a, e| {
            a.iter().all(|&n| n == 0) && e.len() == 60
        })
        .await;
    let (_, errors) = fleet.calls(5, &[]).await;
    assert!(
        errors[0].contains(SERVICE_CONDITIONS),
        "the error names the rule: {}",
        errors[0]
    );
}

#[tokio::test]
async fn a_tag_rule_groups_providers_by_address() {
    let fleet = Fleet::start(&[]).await;
    let rule = format!(
        "configVersion: v3.0\nforce: false\nenabled: true\nkey: {APP}\ntags:\n  - name: blue\n    \
         addresses: ['127.0.0.1:{}']\n",
        fleet.port(1)
    );
    put_rule(&fleet.backend, &format!("{APP}.tag-router"), &rule).await;
    fleet
        .until(
            "tagged calls reach the tag's address only",
            &[("dubbo.tag", "blue")],
            |a, e| a[0] == 0 && a[2] == 0 && a[1] == 60 && e.is_empty(),
        )
        .await;
    let (answered, errors) = fleet.calls(200, &[]).await;
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(
        answered[1], 0,
        "untagged calls avoid the tagged address: {answered:?}"
    );
    assert!(answered[0] > 0 && answered[2] > 0, "{answered:?}");
}

#[tokio::test]
async fn a_consumer_configurator_disables_one_provider_for_this_consumer() {
    let fleet = Fleet::start(&[]).await;
    let rule = format!(
        "configVersion: v3.0\nscope: application\nkey: {CONSUMER}\nenabled: true\nconfigs:\n  \
         - side: consumer\n    addresses: ['0.0.0.0']\n    providerAddresses: ['127.0.0.1:{}']\n    \
         parameters:\n      disabled: 'true'\n",
        fleet.port(2)
    );
    put_rule(&fleet.backend, &format!("{CONSUMER}.configurators"), &rule).await;
    fleet
        .until("the configured provider takes no calls", &[], |a, e| {
            a[2] == 0 && a[0] > 0 && a[1] > 0 && e.is_empty()
        })
        .await;
    // Deleting the rule gives the provider its calls back at once (Java's consumer never
    // resumes a provider whose provider-side disable rule was deleted: not copied).
    delete_rule(&fleet.backend, &format!("{CONSUMER}.configurators")).await;
    fleet
        .until("the provider takes calls again", &[], |a, e| {
            a[2] > 0 && e.is_empty()
        })
        .await;
}

#[tokio::test]
async fn a_v31_condition_rule_splits_calls_by_destination_weight() {
    let fleet = Fleet::start(&[]).await;
    let rule = format!(
        "configVersion: v3.1\nscope: service\nkey: helloworld.Greeter\nforce: false\n\
         enabled: true\nconditions:\n  - from:\n      match: 'method=SayHello'\n    to:\n      \
         - match: 'port={}'\n        weight: 80\n      - match: 'port={}'\n        weight: 20\n",
        fleet.port(0),
        fleet.port(1)
    );
    put_rule(&fleet.backend, SERVICE_CONDITIONS, &rule).await;
    fleet
        .until("the split applies", &[], |a, e| a[2] == 0 && e.is_empty())
        .await;
    let (answered, errors) = fleet.calls(2_000, &[]).await;
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(answered[2], 0, "{answered:?}");
    let first = answered[0] as f64 * 100.0 / 2_000.0;
    // 80 : 20, which Java draws as 81 : 19; a share of 2,000 varies by about 0.9 points.
    assert!(
        (76.0..=85.0).contains(&first),
        "{first}% to the first ({answered:?})"
    );
}

/// Some dubbo-admin versions write a rule on ZooKeeper at `/dubbo/config/{key}`, without
/// the group, where no Dubbo member reads it: it is not applied, and the explanation says
/// where it was found.
#[cfg(feature = "zookeeper")]
#[tokio::test]
async fn a_rule_written_where_nobody_reads_it_is_flagged_not_applied() {
    use crate::support::zookeeper::{ZooKeeperServer, create_with_parents, raw_client};
    use introspect::consumer::RouteQuery;
    let Some(server) = ZooKeeperServer::start().await else {
        return;
    };
    let backend = server.backend().await;
    let mut nodes = Vec::new();
    for _ in 0..2 {
        nodes.push(provider(&backend, greeter_service()).await);
    }
    let raw = raw_client(&server).await;
    let flat = format!("/dubbo/config/{SERVICE_CONDITIONS}");
    create_with_parents(
        &raw,
        &flat,
        avoid(nodes[0].address.port(), false).as_bytes(),
    )
    .await;
    let resolver = Resolver::builder(backend.clone())
        .application(CONSUMER)
        .build();
    let subscription = resolver
        .subscribe(Subscription::new("helloworld.Greeter"))
        .await
        .unwrap();
    eventually(OBEYED_WITHIN, "two endpoints", || {
        let n = subscription.current().len();
        async move { n == 2 }
    })
    .await;
    let report = resolver
        .explain_route(&subscription, &RouteQuery::default())
        .await
        .unwrap();
    assert!(report.rules_in_force.is_empty(), "{report:?}");
    assert!(report.providers.iter().all(|p| p.routed), "{report:?}");
    let problem = report
        .problems
        .iter()
        .find(|p| p.key == SERVICE_CONDITIONS)
        .expect("the misplaced rule is reported");
    assert!(
        problem.reason.contains("where nobody reads it"),
        "{problem:?}"
    );
    let (channel, _handle) = resolver
        .balanced_channel_with(&subscription, ChannelOptions::default())
        .unwrap();
    let before = nodes[0].calls();
    let mut client = GreeterClient::new(channel);
    for _ in 0..40 {
        client
            .say_hello(HelloRequest { name: "z".into() })
            .await
            .unwrap();
    }
    assert!(
        nodes[0].calls() > before,
        "the misplaced rule routes nothing"
    );
}

/// A weight that does not parse is read as Java's default, counted, and shown by
/// `explain_route`; calls still reach the provider.
#[tokio::test]
async fn an_unparsed_weight_is_counted_and_explained() {
    use introspect::consumer::RouteQuery;
    let backend = Backend::memory();
    let service = greeter_service()
        .with_param("weight", "heavy")
        .with_param("warmup", "0");
    let node = provider(&backend, service).await;
    let resolver = Resolver::new(backend.clone());
    let subscription = resolver
        .subscribe(Subscription::new("helloworld.Greeter"))
        .await
        .unwrap();
    let (channel, _handle) = resolver
        .balanced_channel_with(&subscription, ChannelOptions::default())
        .unwrap();
    GreeterClient::new(channel)
        .say_hello(HelloRequest { name: "w".into() })
        .await
        .unwrap();
    assert_eq!(node.calls(), 1);
    assert_eq!(resolver.stats().await.unparsed_route_params, 1);
    let report = resolver
        .explain_route(&subscription, &RouteQuery::default())
        .await
        .unwrap();
    assert_eq!(report.providers[0].bad_params, ["weight=heavy"]);
    assert_eq!(report.providers[0].weight, 100, "read as Java's default");
}
