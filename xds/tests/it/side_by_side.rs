//! One rule set, three clients: a real Dubbo Java 3.3 consumer (the Java peer of
//! `interop/java`, `--config-centre`), Python's grpcio dialling `xds:///helloworld.Greeter`
//! and Envoy taking its routes over RDS from this server, with grpcio calling through it.
//! The fleet is the governance tests' (`support/governed.rs`: A `weight=300`, B
//! `weight=100`, C `dubbo.tag=gray`, D `disabled=true`, one app) on a real ZooKeeper, which
//! is the config centre too. The server's resolver is the Java consumer's app, so every
//! rule the Java consumer reads, the xDS clients are routed by.
//!
//! Each [`STEPS`] entry writes its rules where dubbo-admin writes them (the others deleted
//! first); the xDS clients are called until they obey (the time from the write is printed,
//! Java's beside it as `governance_rules.rs` measures it live: 30 to 87 ms on ZooKeeper),
//! then each client makes the step's calls. The Java consumer, started afresh for each step
//! as the governance tests start it, is the judge: each xDS client reaches the providers it
//! reaches, fails the calls it fails, and where shares are measured each provider's share
//! is within [`MARGIN`] of Java's (5,000 calls: a share's standard deviation is at most
//! 0.71 points). No NACK from either client, at any step.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use introspect::Resolver;
use introspect_xds::XdsServer;
use tokio_stream::wrappers::TcpListenerStream;

use crate::support::envoy::{Envoy, Routes};
use crate::support::governed::{
    APP, Fleet, JAVA_CONSUMER_APP, MARGIN, Shares, Tagging, UNTAGGED, java_shares,
};
use crate::support::peer_cases::{INTERFACE, PeerRegistry};
use crate::support::peers::{ConsumerOptions, Peer};
use crate::support::process::{Calls, PythonClient};
use crate::support::python::venv;

/// Calls where shares are measured, and where every call is to reach the same providers.
const CALLS: u32 = 5_000;
const FEW_CALLS: u32 = 100;
/// How long an xDS client may take to obey a step.
const OBEY: Duration = Duration::from_secs(20);

/// Where a step's rules point.
struct Ports {
    a: u16,
    b: u16,
}

/// What the Java consumer is expected to do with a step's calls.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Every call answered by exactly these providers.
    Reached(&'static [&'static str]),
    /// Every call fails.
    Failed,
}

/// One step: the rules written, how calls are tagged, how many, the invokers Java's
/// directory holds under the rules, and what Java does.
struct Step {
    what: &'static str,
    rules: fn(&Ports) -> Vec<(String, String)>,
    tagging: Tagging,
    calls: u32,
    invokers: u32,
    expect: Expect,
}

fn service_configurator(port: u16, parameters: &str) -> (String, String) {
    let text = format!(
        "configVersion: v3.0\nscope: service\nkey: {INTERFACE}\nenabled: true\nconfigs:\n  \
         - side: consumer\n    addresses: [0.0.0.0]\n    providerAddresses: [\"127.0.0.1:{port}\"]\n    \
         parameters:\n{parameters}"
    );
    (format!("{INTERFACE}::.configurators"), text)
}

fn condition(text: String) -> (String, String) {
    (format!("{INTERFACE}::.condition-router"), text)
}

const STEPS: [Step; 7] = [
    Step {
        what: "no rule",
        rules: |_| Vec::new(),
        tagging: UNTAGGED,
        calls: CALLS,
        invokers: 3,
        expect: Expect::Reached(&["A", "B"]),
    },
    Step {
        what: "service configurator: A weight 100, retries 3",
        rules: |p| {
            vec![service_configurator(
                p.a,
                "      weight: 100\n      retries: 3\n",
            )]
        },
        tagging: UNTAGGED,
        calls: CALLS,
        invokers: 3,
        expect: Expect::Reached(&["A", "B"]),
    },
    Step {
        what: "service configurator: B disabled",
        rules: |p| vec![service_configurator(p.b, "      disabled: true\n")],
        tagging: UNTAGGED,
        calls: FEW_CALLS,
        invokers: 2,
        expect: Expect::Reached(&["A"]),
    },
    Step {
        what: "no rule, calls tagged gray",
        rules: |_| Vec::new(),
        tagging: Tagging {
            tag: Some("gray"),
            force: false,
        },
        calls: FEW_CALLS,
        invokers: 3,
        expect: Expect::Reached(&["C"]),
    },
    Step {
        what: "condition v3.0: => port != A",
        rules: |p| {
            vec![condition(format!(
                "configVersion: v3.0\nscope: service\nkey: {INTERFACE}\nforce: false\n\
                 enabled: true\nruntime: true\nconditions:\n  - \"=> port != {}\"\n",
                p.a
            ))]
        },
        tagging: UNTAGGED,
        calls: FEW_CALLS,
        invokers: 3,
        expect: Expect::Reached(&["B"]),
    },
    Step {
        what: "condition v3.1: method=SayHello => A 80, B 20",
        rules: |p| {
            vec![condition(format!(
                "configVersion: v3.1\nscope: service\nkey: {INTERFACE}\nforce: false\n\
                 enabled: true\nruntime: true\nconditions:\n  - from:\n      match: \
                 \"method=SayHello\"\n    to:\n      - match: \"port={}\"\n        weight: 80\n      \
                 - match: \"port={}\"\n        weight: 20\n",
                p.a, p.b
            ))]
        },
        tagging: UNTAGGED,
        calls: CALLS,
        invokers: 3,
        expect: Expect::Reached(&["A", "B"]),
    },
    Step {
        what: "tag rule, forced: red has no provider, calls tagged red",
        rules: |_| {
            vec![(
                format!("{APP}.tag-router"),
                format!(
                    "configVersion: v3.0\nforce: true\nenabled: true\nruntime: true\nkey: {APP}\n\
                     tags:\n  - name: red\n    addresses: [\"127.0.0.1:1\"]\n"
                ),
            )]
        },
        tagging: Tagging {
            tag: Some("red"),
            force: false,
        },
        calls: FEW_CALLS,
        invokers: 3,
        expect: Expect::Failed,
    },
];

/// Every key a step may write.
fn all_keys() -> [String; 3] {
    [
        format!("{INTERFACE}::.configurators"),
        format!("{INTERFACE}::.condition-router"),
        format!("{APP}.tag-router"),
    ]
}

/// A Python client's calls as shares by provider name.
fn shares_of(calls: &Calls, fleet: &Fleet) -> Shares {
    let mut shares = Shares {
        failed: calls.errors.len() as u64,
        ..Shares::default()
    };
    for (address, count) in &calls.answered {
        let name = fleet
            .nodes
            .iter()
            .find(|(_, node)| node.address.to_string() == *address)
            .map_or_else(|| address.clone(), |(name, _)| (*name).to_owned());
        *shares.answered.entry(name).or_default() += count;
    }
    shares.errors = calls.errors.iter().cloned().collect();
    shares
}

/// The request metadata of `tagging`.
fn metadata(tagging: Tagging) -> Vec<(&'static str, &'static str)> {
    let mut metadata = Vec::new();
    if let Some(tag) = tagging.tag {
        metadata.push(("dubbo.tag", tag));
    }
    if tagging.force {
        metadata.push(("dubbo.force.tag", "true"));
    }
    metadata
}

/// Whether `shares` are what `expect` says.
fn obeys(shares: &Shares, expect: Expect) -> bool {
    match expect {
        Expect::Failed => shares.ok() == 0,
        Expect::Reached(names) => {
            shares.failed == 0 && shares.reached() == names.iter().copied().collect()
        }
    }
}

/// Calls through `client` in rounds of 20 until a round obeys `expect`; how long that took
/// from `written`.
async fn until_obeyed(
    who: &str,
    client: &mut PythonClient,
    fleet: &Fleet,
    step: &Step,
    written: Instant,
) -> Duration {
    let metadata = metadata(step.tagging);
    loop {
        let round = shares_of(&client.call_with(20, &metadata).await, fleet);
        if obeys(&round, step.expect) {
            return written.elapsed();
        }
        assert!(
            written.elapsed() < OBEY,
            "{who} did not obey \"{}\" in {OBEY:?}: {round:?}",
            step.what
        );
    }
}

/// Asserts that `client`'s calls did what the Java consumer's did.
fn assert_like_java(step: &Step, client: &str, java: &Shares, theirs: &Shares) {
    let report = format!("{}: Dubbo Java {java:?}; {client} {theirs:?}", step.what);
    assert_eq!(theirs.failed, java.failed, "calls failed; {report}");
    assert_eq!(
        theirs.reached(),
        java.reached(),
        "providers reached; {report}"
    );
    if step.calls >= CALLS {
        for name in java.reached() {
            let (j, t) = (java.percent(name), theirs.percent(name));
            assert!(
                (j - t).abs() <= MARGIN,
                "{name}'s share: Dubbo Java {j:.1}%, {client} {t:.1}%; {report}"
            );
        }
    }
}

async fn serve(server: &XdsServer) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let ads = server.service();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(ads)
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    address
}

async fn xds_clients_route_as_the_java_consumer(registry: Option<PeerRegistry>) {
    let Some(registry) = registry else { return };
    let Some(venv) = venv() else { return };
    let Some(java) = Peer::Java.find() else {
        return;
    };
    let fleet = Fleet::start(&registry).await;
    registry.wait_for_mapping(APP).await;
    for key in all_keys() {
        registry.delete_rule(&key).await;
    }
    let port = |name: &str| *fleet.ports(&[name]).iter().next().unwrap();
    let ports = Ports {
        a: port("A"),
        b: port("B"),
    };
    let resolver = Resolver::builder(registry.backend.clone())
        .application(JAVA_CONSUMER_APP)
        .build();
    let server = XdsServer::builder(resolver).service(INTERFACE).build();
    let nacks = server.nack_counts();
    let xds = serve(&server).await;

    let dir = tempfile::tempdir().unwrap();
    let bootstrap = dir.path().join("bootstrap.json");
    let config = serde_json::json!({
        "xds_servers": [{
            "server_uri": xds.to_string(),
            "channel_creds": [{"type": "insecure"}],
            "server_features": ["xds_v3"],
        }],
        "node": {"id": "grpcio-side-by-side", "locality": {}},
    });
    std::fs::write(&bootstrap, config.to_string()).unwrap();
    let mut grpcio = PythonClient::start(
        &venv.python(),
        &format!("xds:///{INTERFACE}"),
        &[("GRPC_XDS_BOOTSTRAP", bootstrap.to_str().unwrap())],
    );
    let envoy = Envoy::start(&venv, xds, INTERFACE, Routes::Rds).await;
    let mut through_envoy = PythonClient::start(&venv.python(), &envoy.listener, &[]);

    let mut failures = Vec::new();
    for step in &STEPS {
        for key in all_keys() {
            registry.delete_rule(&key).await;
        }
        let written = Instant::now();
        for (key, text) in (step.rules)(&ports) {
            registry.put_rule(&key, &text).await;
        }
        let grpcio_after = until_obeyed("grpcio", &mut grpcio, &fleet, step, written).await;
        let envoy_after = until_obeyed("Envoy", &mut through_envoy, &fleet, step, written).await;
        eprintln!(
            "{}: obeyed {grpcio_after:?} after the write by grpcio, {envoy_after:?} by Envoy \
             (Dubbo Java, measured live in governance_rules.rs: 30 to 87 ms)",
            step.what
        );
        let options = ConsumerOptions {
            config_centre: true,
            await_invokers: Some(step.invokers),
            ..ConsumerOptions::default()
        };
        let metadata = metadata(step.tagging);
        let started = Instant::now();
        let ((java, run), grpcio_calls) = tokio::join!(
            java_shares(&java, &registry, &fleet, step.calls, step.tagging, options),
            grpcio.call_with(step.calls as usize, &metadata),
        );
        let envoy_calls = through_envoy
            .call_with(step.calls as usize, &metadata)
            .await;
        let (grpcio_shares, envoy_shares) = (
            shares_of(&grpcio_calls, &fleet),
            shares_of(&envoy_calls, &fleet),
        );
        eprintln!(
            "{}: Dubbo Java {java:?}; grpcio {grpcio_shares:?}; Envoy {envoy_shares:?} ({:?})",
            step.what,
            started.elapsed()
        );
        let java_did = match step.expect {
            Expect::Failed => java.ok() == 0,
            Expect::Reached(names) => {
                java.failed == 0
                    && java.reached() == names.iter().copied().collect::<BTreeSet<&str>>()
            }
        };
        if !java_did {
            failures.push(format!(
                "{}: the Java consumer did not do what it was measured to do: {java:?}\n{}",
                step.what, run.output
            ));
            continue;
        }
        assert_like_java(step, "grpcio", &java, &grpcio_shares);
        assert_like_java(step, "Envoy", &java, &envoy_shares);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let explained = server.explain(INTERFACE).await.expect("explained");
    eprintln!("{explained}");
    assert_eq!(nacks.total(), 0, "no NACK: {:?}", nacks.by_node());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grpcio_and_envoy_route_as_a_dubbo_java_consumer_on_zookeeper() {
    xds_clients_route_as_the_java_consumer(PeerRegistry::zookeeper().await).await;
}
