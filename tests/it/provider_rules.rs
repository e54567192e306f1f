//! A provider obeys its own rules, as Dubbo Java's providers do: the `side: provider`
//! configurators dubbo-admin writes into `{app}.configurators` ("disable this instance",
//! "weight 300") are applied by the provider itself, republished as a new revision, and
//! consumers obey what the fetched metadata then says. Judged by the calls a balanced
//! channel routes: two Greeter providers of one app on the memory store (its config centre
//! in the same store, where etcd keeps it), each started inside its own tonic server so the
//! test can ask it which rules it applies.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use crate::support::calls::{calls_until, channel_over, count_calls};
use crate::support::greeter::{CountingGreeter, greeter_router};
use crate::support::rules::{delete_rule, put_rule};
use crate::support::wait::eventually;
use introspect::backend::InstanceRead;
use introspect::consumer::{BalancedChannel, SubscriptionHandle};
use introspect::{
    Backend, Limits, MemoryStore, Provider, Resolver, ServiceInfo, Store, Subscription,
};
use tokio_util::sync::CancellationToken;

const APP: &str = "governed-provider";
const APP_RULES: &str = "governed-provider.configurators";
/// How long a rule may take to be obeyed: the publish delay (1 s) and milliseconds more.
const OBEYED_WITHIN: Duration = Duration::from_secs(10);

/// One provider inside a tonic server of the test's own.
struct Node {
    provider: Provider,
    greeter: CountingGreeter,
    port: u16,
    stop: CancellationToken,
}

impl Node {
    async fn start(
        backend: &Backend,
        configure: impl FnOnce(
            introspect::provider::ProviderBuilder,
        ) -> introspect::provider::ProviderBuilder,
    ) -> Node {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let greeter = CountingGreeter::new(address);
        let provider = configure(
            Provider::builder(APP, backend.clone())
                .host("127.0.0.1")
                .port(address.port())
                .lease_ttl(Duration::from_secs(4))
                .drain_period(Duration::from_millis(100))
                // Shares of calls are measured at once: no warm-up ramp.
                .warmup(Duration::ZERO)
                .export(ServiceInfo::new("helloworld.Greeter")),
        )
        .build()
        .unwrap();
        let router = greeter_router(greeter.clone()).add_service(provider.metadata_service());
        let stop = CancellationToken::new();
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        tokio::spawn(router.serve_with_incoming_shutdown(incoming, stop.clone().cancelled_owned()));
        provider.start().await.unwrap();
        Node {
            provider,
            greeter,
            port: address.port(),
            stop,
        }
    }

    /// The revision its record in the registry carries.
    async fn registered_revision(&self, backend: &Backend) -> String {
        let list = backend
            .instances()
            .list(APP, InstanceRead::new(&Limits::default()))
            .await
            .unwrap();
        list.instances
            .values()
            .find(|i| i.port == self.port)
            .map(|i| i.revision().to_owned())
            .unwrap_or_default()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.provider.abort();
        self.stop.cancel();
    }
}

struct Fleet {
    store: Arc<MemoryStore>,
    backend: Backend,
    nodes: Vec<Node>,
    channel: BalancedChannel,
    subscription: SubscriptionHandle,
}

impl Fleet {
    async fn start(weights: [Option<i64>; 2]) -> Fleet {
        let store = Arc::new(MemoryStore::new());
        let backend = Backend::from(store.clone());
        let mut nodes = Vec::new();
        for weight in weights {
            nodes.push(
                Node::start(&backend, |b| match weight {
                    Some(w) => b.weight(w),
                    None => b,
                })
                .await,
            );
        }
        let resolver = Resolver::builder(backend.clone())
            .application("shop")
            .build();
        let subscription = resolver
            .subscribe(Subscription::new("helloworld.Greeter"))
            .await
            .unwrap();
        let channel = channel_over(&resolver, &subscription, 2).await;
        Fleet {
            store,
            backend,
            nodes,
            channel,
            subscription,
        }
    }

    /// Makes `calls` calls; how many each provider answered, and the errors.
    async fn calls(&self, calls: u32) -> (Vec<u64>, Vec<String>) {
        count_calls(&self.channel, &self.counters(), calls, &[]).await
    }

    /// Waits until 60 calls are answered as `check` wants.
    async fn until(&self, what: &str, check: impl Fn(&[u64], &[String]) -> bool) {
        calls_until(
            &self.channel,
            &self.counters(),
            &[],
            OBEYED_WITHIN,
            what,
            check,
        )
        .await;
    }

    fn counters(&self) -> Vec<Arc<AtomicU64>> {
        self.nodes.iter().map(|n| n.greeter.counter()).collect()
    }
}

/// dubbo-admin's "disable" of one instance: a `side: provider` item naming its address.
fn disable(port: u16, disabled: bool) -> String {
    format!(
        "configVersion: v3.0\nscope: application\nkey: {APP}\nenabled: true\nconfigs:\n\
         - side: provider\n  addresses: ['127.0.0.1:{port}']\n  parameters:\n    disabled: {disabled}\n"
    )
}

/// dubbo-admin's "weight" of one instance.
fn weigh(port: u16, weight: u32) -> String {
    format!(
        "configVersion: v3.0\nscope: application\nkey: {APP}\nenabled: true\nconfigs:\n\
         - side: provider\n  addresses: ['127.0.0.1:{port}']\n  parameters:\n    weight: {weight}\n"
    )
}

#[tokio::test]
async fn a_disabled_provider_republishes_and_gets_no_calls_until_the_rule_is_deleted() {
    let fleet = Fleet::start([None, None]).await;
    let declared = fleet.nodes[0].provider.revision();
    let other = fleet.nodes[1].provider.revision();
    let (answered, errors) = fleet.calls(200).await;
    assert!(
        errors.is_empty() && answered.iter().all(|&n| n > 0),
        "{answered:?} {errors:?}"
    );

    put_rule(
        &fleet.backend,
        APP_RULES,
        &disable(fleet.nodes[0].port, true),
    )
    .await;
    fleet
        .until("the disabled provider gets no calls", |a, e| {
            a[0] == 0 && a[1] == 60 && e.is_empty()
        })
        .await;
    let a = &fleet.nodes[0];
    assert_ne!(a.provider.revision(), declared, "a new revision");
    assert_eq!(
        a.registered_revision(&fleet.backend).await,
        a.provider.revision()
    );
    assert_eq!(a.provider.rules().in_force, [APP_RULES]);
    let disabled = a.provider.exported().current();
    let greeter = disabled.services.values().next().unwrap();
    assert_eq!(greeter.params["disabled"], "true");
    assert_eq!(
        fleet.nodes[1].provider.revision(),
        other,
        "the other instance is not named"
    );

    delete_rule(&fleet.backend, APP_RULES).await;
    fleet
        .until("the provider is called again", |a, _| a[0] > 0)
        .await;
    assert_eq!(
        a.provider.revision(),
        declared,
        "the declared revision is back"
    );
    assert_eq!(a.registered_revision(&fleet.backend).await, declared);
    assert!(a.provider.rules().in_force.is_empty());
}

#[tokio::test]
async fn a_weight_rule_shifts_the_share_of_calls() {
    let fleet = Fleet::start([None, None]).await;
    put_rule(&fleet.backend, APP_RULES, &weigh(fleet.nodes[0].port, 300)).await;
    eventually(OBEYED_WITHIN, "the weight republished", || {
        let current = fleet.nodes[0].provider.exported().current();
        async move {
            current
                .services
                .values()
                .all(|s| s.params.get("weight").map(String::as_str) == Some("300"))
        }
    })
    .await;
    // The consumer sees the new revision once its metadata is fetched; then 3 : 1.
    let port = fleet.nodes[0].port;
    eventually(OBEYED_WITHIN, "the consumer sees weight 300", || {
        let seen =
            fleet.subscription.current().iter().any(|e| {
                e.port == port && e.params().get("weight").map(String::as_str) == Some("300")
            });
        async move { seen }
    })
    .await;
    let (answered, errors) = fleet.calls(2_000).await;
    assert!(errors.is_empty(), "{errors:?}");
    let share = answered[0] as f64 / 2_000.0;
    assert!(
        (share - 0.75).abs() <= 0.05,
        "share {share:.3} of 300 : 100 ({answered:?})"
    );
}

#[tokio::test]
async fn rule_changes_within_one_publish_delay_make_one_revision() {
    let fleet = Fleet::start([None, None]).await;
    let a = &fleet.nodes[0];
    let declared = a.provider.revision();
    // Two changes, back to back (the memory store takes microseconds): well within 1 s.
    put_rule(&fleet.backend, APP_RULES, &weigh(a.port, 300)).await;
    put_rule(
        &fleet.backend,
        "helloworld.Greeter::.configurators",
        "configVersion: v3.0\nscope: service\nkey: helloworld.Greeter\nconfigs:\n\
         - side: provider\n  addresses: ['0.0.0.0']\n  parameters: {timeout: 3000}\n",
    )
    .await;
    eventually(OBEYED_WITHIN, "both changes published", || {
        let current = a.provider.exported().current();
        async move {
            current.services.values().all(|s| {
                s.params.get("weight").map(String::as_str) == Some("300")
                    && s.params.get("timeout").map(String::as_str) == Some("3000")
            })
        }
    })
    .await;
    let answerable = a.provider.exported().revisions();
    assert_eq!(
        answerable.len(),
        2,
        "the declared revision and one more, not one per change: {answerable:?}"
    );
    assert!(answerable.contains(&declared));
    // The service document applies to every provider of the service, the other one too.
    eventually(OBEYED_WITHIN, "the other provider's timeout", || {
        let current = fleet.nodes[1].provider.exported().current();
        async move {
            current
                .services
                .values()
                .all(|s| s.params.get("timeout").map(String::as_str) == Some("3000"))
        }
    })
    .await;
}

#[tokio::test]
async fn a_provider_keeps_serving_under_rules_it_cannot_read() {
    let fleet = Fleet::start([None, None]).await;
    let a = &fleet.nodes[0];
    let declared = a.provider.revision();
    put_rule(&fleet.backend, APP_RULES, &weigh(a.port, 300)).await;
    eventually(OBEYED_WITHIN, "the good rule republished", || {
        let (in_force, revision) = (a.provider.rules().in_force, a.provider.revision());
        let declared = &declared;
        async move { in_force == [APP_RULES] && revision != *declared }
    })
    .await;
    let weighed = a.provider.revision();
    let mut reasons: Vec<String> = Vec::new();
    let oversized = format!("{}# {}\n", disable(a.port, true), "x".repeat(70 * 1024));
    for bad in [
        "configs: [unclosed",
        "configVersion: v3.0\nscope: application\nkey: governed-provider\nconfigs: []\n",
        "- override://0.0.0.0/?disabled=true\n",
        "&a [*a, *a, *a]\n",
        &oversized,
        "configVersion: v9.9\nconfigs: [{side: provider, parameters: {disabled: true}}]\n",
    ] {
        // Written raw, where the config part reads it: the part itself refuses to write
        // an oversized rule.
        fleet
            .store
            .put(
                &format!("/dubbo/config/dubbo/{APP_RULES}"),
                bad.as_bytes().to_vec(),
                None,
            )
            .await
            .unwrap();
        eventually(OBEYED_WITHIN, "the bad rule refused", || {
            let rules = a.provider.rules();
            let reasons = &reasons;
            async move {
                rules
                    .refused
                    .iter()
                    .any(|p| p.key == APP_RULES && !reasons.contains(&p.reason))
            }
        })
        .await;
        let rules = a.provider.rules();
        reasons.push(rules.refused[0].reason.clone());
        assert_eq!(
            rules.in_force,
            [APP_RULES],
            "the last good rule stays: {bad:?}"
        );
        assert_eq!(a.provider.revision(), weighed, "{bad:?}");
        let (answered, errors) = fleet.calls(40).await;
        assert!(
            errors.is_empty() && answered[0] > 0,
            "{bad:?}: {answered:?} {errors:?}"
        );
    }

    // Every provider disabled from one rule (`0.0.0.0`): both obey, as Java's providers do,
    // and no call has anywhere to go.
    let everyone = format!(
        "configVersion: v3.0\nscope: application\nkey: {APP}\nconfigs:\n\
         - side: provider\n  addresses: ['0.0.0.0']\n  parameters: {{disabled: true}}\n"
    );
    put_rule(&fleet.backend, APP_RULES, &everyone).await;
    fleet
        .until("no provider takes calls", |a, e| {
            a.iter().all(|&n| n == 0) && e.len() == 60
        })
        .await;
    assert!(
        a.provider.rules().refused.is_empty(),
        "{:?}",
        a.provider.rules()
    );
}

#[tokio::test]
async fn typed_options_are_published_and_checked() {
    let backend = Backend::from(Arc::new(MemoryStore::new()));
    let node = Node::start(&backend, |b| {
        b.tag("gray").weight(300).warmup(Duration::from_secs(60))
    })
    .await;
    let current = node.provider.exported().current();
    let greeter = current.services.values().next().unwrap();
    assert_eq!(greeter.params["dubbo.tag"], "gray");
    assert_eq!(greeter.params["weight"], "300");
    assert_eq!(greeter.params["warmup"], "60000");
    let record = node.provider.instance().await;
    let started: u64 = record.metadata.get("timestamp").unwrap().parse().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(
        started <= now && now - started < 60_000,
        "{started} vs {now}"
    );
    assert_eq!(record.started_at_ms(), started);

    for (builder, expected) in [
        (
            Provider::builder(APP, backend.clone()).weight(-1),
            "weight must be 0 to",
        ),
        (
            Provider::builder(APP, backend.clone()).tag("a b"),
            "a space",
        ),
    ] {
        let error = builder.build().unwrap_err().to_string();
        assert!(error.contains(expected), "{error}");
    }
}
