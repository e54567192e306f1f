//! What the governance tests share: one app of four Rust providers on a registry, each
//! answering with its own address (A `weight=300`, B `weight=100`, C `dubbo.tag=gray`, D
//! `disabled=true`), and the shares of a consumer's calls among them, counted on the real
//! Java consumer and on an Introspect consumer alike. Every provider publishes `warmup=0`:
//! their records carry their start time, and both consumers would otherwise ramp each
//! weight up over Dubbo's 10-minute warm-up, so shares would depend on when a case runs.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::greeter::pb::HelloRequest;
use super::greeter::pb::greeter_client::GreeterClient;
use super::greeter::{GreeterNode, greeter_service, start_greeter_exporting};
use super::peer_cases::{INTERFACE, PeerRegistry};
use super::peers::{BuiltPeer, ConsumerOptions, ConsumerRun};
use super::wait::eventually;
use introspect::consumer::{BalancedChannel, ChannelHandle, ChannelOptions, SubscriptionHandle};
use introspect::{Resolver, ServiceInfo, Subscription};

/// The providers' app.
pub const APP: &str = "governed-greeter";
/// The Java consumer's app (the `{app}.configurators` and `{app}.condition-router` rules of a
/// consumer are keyed by it).
pub const JAVA_CONSUMER_APP: &str = "governed-java-consumer";
/// How long an Introspect call waits for an endpoint that may take it: short, so that calls
/// routed to no provider fail fast (once the channel knows A and B, no other call waits).
const ENDPOINT_WAIT: Duration = Duration::from_millis(500);
/// How far (in percentage points) a provider's share of the Introspect consumer's calls may
/// be from its share of the Java consumer's.
pub const MARGIN: f64 = 5.0;

/// The four providers, by name.
pub struct Fleet {
    /// The providers, A to D, by name.
    pub nodes: Vec<(&'static str, GreeterNode)>,
}

impl Fleet {
    /// Starts A (weight 300), B (weight 100, written out), C (tagged gray) and D (disabled) as
    /// instances of [`APP`] in `registry`.
    pub async fn start(registry: &PeerRegistry) -> Fleet {
        let cold = || greeter_service().with_param("warmup", "0");
        let providers: [(&str, ServiceInfo); 4] = [
            ("A", cold().with_param("weight", "300")),
            ("B", cold().with_param("weight", "100")),
            ("C", cold().with_param("dubbo.tag", "gray")),
            ("D", cold().with_param("disabled", "true")),
        ];
        let mut nodes = Vec::new();
        for (name, service) in providers {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let node = start_greeter_exporting(
                registry.backend.clone(),
                APP,
                Duration::from_secs(4),
                Duration::from_millis(200),
                listener,
                None,
                service,
            )
            .await;
            nodes.push((name, node));
        }
        Fleet { nodes }
    }

    /// The provider whose answer `message` is (`Hello X from 127.0.0.1:PORT`), or the
    /// message itself when none of them gave it.
    pub fn who(&self, message: &str) -> String {
        self.nodes
            .iter()
            .find(|(_, node)| message.ends_with(&format!(" from {}", node.address)))
            .map_or_else(|| message.to_owned(), |(name, _)| (*name).to_owned())
    }

    /// The ports of the named providers.
    pub fn ports(&self, names: &[&str]) -> BTreeSet<u16> {
        self.nodes
            .iter()
            .filter(|(name, _)| names.contains(name))
            .map(|(_, node)| node.address.port())
            .collect()
    }
}

/// Where one consumer's calls went: calls answered per provider name, and the failures.
#[derive(Debug, Default)]
pub struct Shares {
    /// Calls answered, by provider name.
    pub answered: BTreeMap<String, u64>,
    /// Calls failed.
    pub failed: u64,
    /// The distinct errors of the failed calls.
    pub errors: BTreeSet<String>,
}

impl Shares {
    /// Calls answered.
    pub fn ok(&self) -> u64 {
        self.answered.values().sum()
    }

    /// The providers that answered any call.
    pub fn reached(&self) -> BTreeSet<&str> {
        self.answered.keys().map(String::as_str).collect()
    }

    /// `name`'s share of the answered calls, in percent.
    pub fn percent(&self, name: &str) -> f64 {
        let ok = self.ok().max(1) as f64;
        self.answered.get(name).copied().unwrap_or(0) as f64 * 100.0 / ok
    }

    /// A Java consumer's run, by provider.
    pub fn of_java(run: &ConsumerRun, fleet: &Fleet) -> Shares {
        let mut shares = Shares {
            failed: run.failed,
            ..Shares::default()
        };
        for (message, count) in &run.shares {
            *shares.answered.entry(fleet.who(message)).or_default() += count;
        }
        shares.errors.clone_from(&run.call_errors);
        shares
    }
}

/// How a consumer tags its calls.
#[derive(Clone, Copy, Debug)]
pub struct Tagging {
    /// The tag (`dubbo.tag`), if any.
    pub tag: Option<&'static str>,
    /// Whether it is forced (`dubbo.force.tag: true`).
    pub force: bool,
}

/// Untagged calls.
pub const UNTAGGED: Tagging = Tagging {
    tag: None,
    force: false,
};

/// Runs the Java consumer (as [`JAVA_CONSUMER_APP`]): `calls` calls of the Greeter found
/// through the mapping, tagged as `tagging` says, with `options` besides.
pub async fn java_shares(
    java: &BuiltPeer,
    registry: &PeerRegistry,
    fleet: &Fleet,
    calls: u32,
    tagging: Tagging,
    options: ConsumerOptions<'_>,
) -> (Shares, ConsumerRun) {
    let options = ConsumerOptions {
        tag: tagging.tag,
        force_tag: tagging.force,
        ..options
    };
    let run = java
        .consumer_with(&registry.url, JAVA_CONSUMER_APP, calls, &options)
        .await;
    (Shares::of_java(&run, fleet), run)
}

/// An Introspect consumer's calls: `calls` calls of `SayHello` through `channel`, each
/// tagged as `tagging` says (the headers Dubbo's Triple consumer sends), counted by the
/// provider that answered.
pub async fn rust_shares(
    channel: &BalancedChannel,
    fleet: &Fleet,
    calls: u32,
    tagging: Tagging,
) -> Shares {
    let mut client = GreeterClient::new(channel.clone());
    let mut shares = Shares::default();
    for i in 0..calls {
        let mut request = tonic::Request::new(HelloRequest {
            name: format!("introspect-{i}"),
        });
        request.set_timeout(Duration::from_secs(3));
        if let Some(tag) = tagging.tag {
            request
                .metadata_mut()
                .insert("dubbo.tag", tag.parse().unwrap());
        }
        if tagging.force {
            request
                .metadata_mut()
                .insert("dubbo.force.tag", "true".parse().unwrap());
        }
        match tokio::time::timeout(Duration::from_secs(5), client.say_hello(request)).await {
            Ok(Ok(reply)) => {
                let name = fleet.who(&reply.into_inner().message);
                *shares.answered.entry(name).or_default() += 1;
            }
            Ok(Err(status)) => {
                shares.failed += 1;
                shares.errors.insert(status.to_string());
            }
            Err(_) => {
                shares.failed += 1;
                shares.errors.insert("call timed out".into());
            }
        }
    }
    shares
}

/// An Introspect consumer of the Greeter through the mapping: a balanced channel, once the
/// subscription's view holds A, B and C (D may be left out of it: it is disabled) and the
/// channel's balancer A and B (untagged and enabled: routable in any reading).
pub async fn rust_consumer(registry: &PeerRegistry, fleet: &Fleet) -> RustConsumer {
    rust_consumer_of(registry, fleet, None).await
}

/// [`rust_consumer`], of the app `app` (the key of its own rules) when one is given.
pub async fn rust_consumer_of(
    registry: &PeerRegistry,
    fleet: &Fleet,
    app: Option<&str>,
) -> RustConsumer {
    let mut builder = Resolver::builder(registry.backend.clone());
    if let Some(app) = app {
        builder = builder.application(app);
    }
    let resolver = builder.build();
    let live = resolver
        .subscribe(Subscription::new(INTERFACE))
        .await
        .unwrap();
    let wanted = fleet.ports(&["A", "B", "C"]);
    eventually(
        Duration::from_secs(20),
        "the consumer's view to hold A, B and C",
        || {
            let held: BTreeSet<u16> = live.current().iter().map(|e| e.port).collect();
            let all = wanted.is_subset(&held);
            async move { all }
        },
    )
    .await;
    let options = ChannelOptions::default().endpoint_wait(ENDPOINT_WAIT);
    let (channel, mut handle) = resolver.balanced_channel_with(&live, options).unwrap();
    let untagged = fleet.ports(&["A", "B"]);
    let known = async {
        loop {
            let held: BTreeSet<u16> = handle
                .addresses()
                .iter()
                .filter_map(|a| a.to_string().rsplit_once(':')?.1.parse().ok())
                .collect();
            if untagged.is_subset(&held) {
                break;
            }
            handle.changed().await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(20), known)
        .await
        .expect("the channel's balancer learns A and B");
    RustConsumer {
        _resolver: resolver,
        _live: live,
        _handle: handle,
        channel,
    }
}

/// What [`rust_consumer`] makes: the channel, and what keeps it fed.
pub struct RustConsumer {
    _resolver: Resolver,
    _live: SubscriptionHandle,
    _handle: ChannelHandle,
    /// The channel the calls go through.
    pub channel: BalancedChannel,
}

/// Asserts that the Introspect consumer's calls went where the Java consumer's did: the same
/// providers reached, each one's share within [`MARGIN`], and as many calls failed.
pub fn assert_alike(case: &str, java: &Shares, rust: &Shares) {
    assert_same_providers(case, java, rust);
    let report = format!("{case}: Dubbo Java {java:?}; Introspect {rust:?}");
    for name in java.reached() {
        let (theirs, ours) = (java.percent(name), rust.percent(name));
        assert!(
            (theirs - ours).abs() <= MARGIN,
            "{name}'s share: Dubbo Java {theirs:.1}%, Introspect {ours:.1}%; {report}"
        );
    }
}

/// Asserts that the Introspect consumer's calls reached the providers the Java consumer's
/// did, and as many failed (shares of a few calls are too noisy to compare).
pub fn assert_same_providers(case: &str, java: &Shares, rust: &Shares) {
    let report = format!("{case}: Dubbo Java {java:?}; Introspect {rust:?}");
    assert_eq!(rust.failed, java.failed, "calls failed; {report}");
    assert_eq!(
        rust.reached(),
        java.reached(),
        "providers reached; {report}"
    );
}
