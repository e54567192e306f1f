//! The side-by-side proof: what the xDS server sends makes clients no one here wrote route
//! each call as a real Dubbo consumer of the fleet routes it, under the same governance
//! rules from the same config centre.
//!
//! The fleet is the governance tests' (`support/governed.rs`: A `weight=300`, B
//! `weight=100`, C `dubbo.tag=gray`, D `disabled=true`, one app) on a real ZooKeeper, which
//! is the config centre too. The server's resolver is the Java consumer's app
//! (`JAVA_CONSUMER_APP`), so it reads the very rules that consumer reads. Three clients:
//!
//! * the judge, the real Dubbo Java 3.3 consumer (the Java peer of `interop/java`, with
//!   `--config-centre`), started afresh for each step as `governance_rules.rs` starts it;
//! * Python's grpcio dialling `xds:///helloworld.Greeter` (its bootstrap names the server);
//! * grpc-go (`interop/grpc-go`, from the Go module proxy) dialling the same name with the
//!   same bootstrap;
//! * a real Envoy taking its routes over RDS and its clusters over CDS/EDS, all through ADS,
//!   from the server, with a second grpcio client calling through it.
//!
//! Each of [`STEPS`] deletes every rule key an earlier step wrote and writes its own where
//! dubbo-admin writes them. Both xDS clients are called in rounds until they obey the step
//! (the time from the write is printed per client), then all three make the step's calls
//! at once. Java is held to what it was measured to do (`governance_rules.rs`), then each
//! xDS client to Java: the same providers reached, the same calls failed, and where shares
//! are measured (5,000 calls: a share's standard deviation is at most 0.71 points) each
//! provider's share within `MARGIN` (5 points) of Java's. No client rejects (NACKs) any
//! response along the way.
//!
//! Needs the virtualenv of `scripts/setup.sh --with-python` (grpcio and Envoy; missing, it
//! fails unless `INTROSPECT_SKIP_PYTHON` is set, as the other Python tests do), the Java
//! peer and the grpc-go client (`scripts/setup.sh --with-interop`) and ZooKeeper (each
//! skipped when missing, unless `CI` is set).

use std::collections::BTreeSet;
use std::fmt::Write as _;
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
use crate::support::python::{grpc_go_client, venv};

/// Calls each client makes where shares are measured.
const CALLS: u32 = 5_000;
/// Calls each client makes where every call is to reach the same providers, or to fail.
const FEW_CALLS: u32 = 100;
/// How long an xDS client may take to obey a step.
const OBEY: Duration = Duration::from_secs(20);
/// A polling round where the step routes by shares: at 200 calls a share's standard
/// deviation is at most 3.5 points, so [`ROUND_MARGIN`] tells 75 : 25 from 50 : 50 (the
/// closest two steps) without a false start.
const SHARE_ROUND: usize = 200;
/// A polling round where every call is to reach the same providers, or to fail.
const ROUND: usize = 20;
/// How far a polling round's share may be from the step's expected one.
const ROUND_MARGIN: f64 = 12.0;
/// The invokers Java's directory holds with no rule: A, B and C (D is disabled).
const ALL_INVOKERS: u32 = 3;

/// Where a step's rules point: A's and B's ports.
struct Ports {
    a: u16,
    b: u16,
}

/// What the Java consumer was measured to do with a step's calls (`governance_rules.rs`).
#[derive(Clone, Copy, Debug)]
enum Outcome {
    /// Every call answered, by exactly these providers, each one's share (percent) near
    /// the one given where one is given.
    Reached(&'static [(&'static str, Option<f64>)]),
    /// Every call fails.
    Failed,
}

/// One step: the rules written (key, YAML text), how calls are tagged, how many each
/// client makes, the invokers Java's directory holds under the rules (its calls start
/// once it does), and what Java does.
struct Step {
    what: &'static str,
    rules: fn(&Ports) -> Vec<(String, String)>,
    tagging: Tagging,
    calls: u32,
    invokers: u32,
    outcome: Outcome,
}

fn service_configurators() -> String {
    format!("{INTERFACE}::.configurators")
}

fn service_conditions() -> String {
    format!("{INTERFACE}::.condition-router")
}

fn tag_rule() -> String {
    format!("{APP}.tag-router")
}

/// Every key a step may write, deleted before each step.
fn all_keys() -> [String; 4] {
    [
        format!("{JAVA_CONSUMER_APP}.configurators"),
        service_configurators(),
        service_conditions(),
        tag_rule(),
    ]
}

/// A consumer-side configurator of the service: `parameters` (YAML lines, indented six)
/// for the provider at `port`, then the items of `more` (YAML, each starting `  - `).
fn service_configurator(port: u16, parameters: &str, more: &str) -> (String, String) {
    let text = format!(
        "configVersion: v3.0\nscope: service\nkey: {INTERFACE}\nenabled: true\nconfigs:\n  \
         - side: consumer\n    addresses: [0.0.0.0]\n    providerAddresses: \
         [\"127.0.0.1:{port}\"]\n    parameters:\n{parameters}{more}"
    );
    (service_configurators(), text)
}

const TAGGED_GRAY: Tagging = Tagging {
    tag: Some("gray"),
    force: false,
};
const TAGGED_RED: Tagging = Tagging {
    tag: Some("red"),
    force: false,
};

/// The steps, in order; each starts from no rule.
const STEPS: [Step; 7] = [
    Step {
        what: "no rule, untagged",
        rules: |_| Vec::new(),
        tagging: UNTAGGED,
        calls: CALLS,
        invokers: ALL_INVOKERS,
        outcome: Outcome::Reached(&[("A", Some(75.0)), ("B", Some(25.0))]),
    },
    Step {
        what: "service configurator: A weight 100; retries 3",
        rules: |p| {
            vec![service_configurator(
                p.a,
                "      weight: 100\n",
                "  - side: consumer\n    addresses: [0.0.0.0]\n    parameters:\n      \
                 retries: 3\n",
            )]
        },
        tagging: UNTAGGED,
        calls: CALLS,
        invokers: ALL_INVOKERS,
        outcome: Outcome::Reached(&[("A", Some(50.0)), ("B", Some(50.0))]),
    },
    Step {
        what: "service configurator: B disabled",
        rules: |p| vec![service_configurator(p.b, "      disabled: true\n", "")],
        tagging: UNTAGGED,
        calls: FEW_CALLS,
        invokers: 2,
        outcome: Outcome::Reached(&[("A", None)]),
    },
    Step {
        what: "no rule, tagged gray",
        rules: |_| Vec::new(),
        tagging: TAGGED_GRAY,
        calls: FEW_CALLS,
        invokers: ALL_INVOKERS,
        outcome: Outcome::Reached(&[("C", None)]),
    },
    Step {
        what: "condition v3.0: => port != A",
        rules: |p| {
            let text = format!(
                "configVersion: v3.0\nscope: service\nkey: {INTERFACE}\nforce: false\n\
                 enabled: true\nruntime: true\nconditions:\n  - \"=> port != {}\"\n",
                p.a
            );
            vec![(service_conditions(), text)]
        },
        tagging: UNTAGGED,
        calls: FEW_CALLS,
        invokers: ALL_INVOKERS,
        outcome: Outcome::Reached(&[("B", None)]),
    },
    Step {
        what: "condition v3.1: method=SayHello => A 80, B 20",
        rules: |p| {
            let text = format!(
                "configVersion: v3.1\nscope: service\nkey: {INTERFACE}\nforce: false\n\
                 enabled: true\nruntime: true\nconditions:\n  - from:\n      match: \
                 \"method=SayHello\"\n    to:\n      - match: \"port={}\"\n        weight: 80\n\
                 \x20     - match: \"port={}\"\n        weight: 20\n",
                p.a, p.b
            );
            vec![(service_conditions(), text)]
        },
        tagging: UNTAGGED,
        calls: CALLS,
        invokers: ALL_INVOKERS,
        outcome: Outcome::Reached(&[("A", Some(80.0)), ("B", Some(20.0))]),
    },
    Step {
        what: "tag rule, forced (red: no provider), tagged red",
        rules: |_| {
            let text = format!(
                "configVersion: v3.0\nforce: true\nenabled: true\nruntime: true\nkey: {APP}\n\
                 tags:\n  - name: red\n    addresses: [\"127.0.0.1:1\"]\n"
            );
            vec![(tag_rule(), text)]
        },
        tagging: TAGGED_RED,
        calls: FEW_CALLS,
        invokers: ALL_INVOKERS,
        outcome: Outcome::Failed,
    },
];

/// The request metadata (headers) of calls tagged as `tagging` says: what Dubbo's Triple
/// consumer sends for the attachments.
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

/// A Python client's calls by provider name.
fn shares_of(calls: &Calls, fleet: &Fleet) -> Shares {
    let mut shares = Shares {
        failed: calls.errors.len() as u64,
        errors: calls.errors.iter().cloned().collect(),
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
    shares
}

/// Whether `shares` are what `outcome` says, each share within `margin` of the given one.
fn matches(outcome: Outcome, shares: &Shares, margin: f64) -> bool {
    match outcome {
        Outcome::Failed => shares.ok() == 0 && shares.failed > 0,
        Outcome::Reached(expected) => {
            let names: BTreeSet<&str> = expected.iter().map(|(name, _)| *name).collect();
            shares.failed == 0
                && shares.reached() == names
                && expected.iter().all(|(name, share)| {
                    share.is_none_or(|share| (shares.percent(name) - share).abs() <= margin)
                })
        }
    }
}

/// Asserts that the Java consumer's `calls` calls did what `outcome` says (as
/// `governance_rules.rs` asserts it).
fn assert_outcome(what: &str, outcome: Outcome, calls: u32, shares: &Shares, output: &str) {
    let calls = u64::from(calls);
    let all = match outcome {
        Outcome::Failed => shares.failed == calls,
        Outcome::Reached(_) => shares.ok() == calls,
    };
    assert!(
        all && matches(outcome, shares, MARGIN),
        "{what}: the Java consumer did not do what it was measured to do ({outcome:?}): \
         {shares:?}\n{output}"
    );
}

/// How an xDS client's calls differ from the Java consumer's, if they do: other providers
/// reached, other calls failed, or (where shares are measured) a share further than
/// [`MARGIN`] from Java's.
fn unlike_java(step: &Step, client: &str, java: &Shares, theirs: &Shares) -> Option<String> {
    let report = format!("Dubbo Java {java:?}; {client} {theirs:?}");
    if theirs.failed != java.failed || theirs.ok() != java.ok() {
        return Some(format!("calls answered and failed differ: {report}"));
    }
    if theirs.reached() != java.reached() {
        return Some(format!("providers reached differ: {report}"));
    }
    if step.calls >= CALLS {
        for name in java.reached() {
            let (j, t) = (java.percent(name), theirs.percent(name));
            if (j - t).abs() > MARGIN {
                return Some(format!(
                    "{name}'s share: Dubbo Java {j:.1}%, {client} {t:.1}%: {report}"
                ));
            }
        }
    }
    None
}

/// When an xDS client obeyed a step: how long after the write its obeying round of calls
/// ended, and how many rounds it took (1: it obeyed before it could be asked, as when a
/// step only tags the calls).
#[derive(Clone, Copy, Debug)]
struct Obeyed {
    after: Duration,
    rounds: u32,
}

/// Calls through `client` in rounds until a round obeys `step`; when, or why it did not
/// obey within [`OBEY`] of `written`.
async fn until_obeyed(
    client: &mut PythonClient,
    fleet: &Fleet,
    step: &Step,
    written: Instant,
) -> Result<Obeyed, String> {
    let metadata = metadata(step.tagging);
    let round = match step.outcome {
        Outcome::Reached(expected) if expected.iter().any(|(_, share)| share.is_some()) => {
            SHARE_ROUND
        }
        _ => ROUND,
    };
    let mut rounds = 0;
    loop {
        let shares = shares_of(&client.call_with(round, &metadata).await, fleet);
        rounds += 1;
        if matches(step.outcome, &shares, ROUND_MARGIN) {
            return Ok(Obeyed {
                after: written.elapsed(),
                rounds,
            });
        }
        if written.elapsed() > OBEY {
            return Err(format!(
                "did not obey in {OBEY:?}; its last {round} calls: {shares:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What one xDS client did in a step: how long it took to obey, and its counted calls
/// (none when it did not obey).
async fn xds_client_step(
    client: &mut PythonClient,
    fleet: &Fleet,
    step: &Step,
    written: Instant,
) -> Result<(Obeyed, Shares), String> {
    let obeyed = until_obeyed(client, fleet, step, written).await?;
    let calls = client
        .call_with(step.calls as usize, &metadata(step.tagging))
        .await;
    Ok((obeyed, shares_of(&calls, fleet)))
}

fn millis(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

/// Serves ADS from `server` on a loopback port; its address.
async fn serve(server: &XdsServer) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(server.service())
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    address
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcio_grpc_go_and_envoy_route_as_a_dubbo_java_consumer_on_zookeeper() {
    let Some(venv) = venv() else { return };
    let Some(java) = Peer::Java.find() else {
        return;
    };
    let Some(grpc_go) = grpc_go_client() else {
        return;
    };
    let Some(registry) = PeerRegistry::zookeeper().await else {
        return;
    };
    let began = Instant::now();
    let fleet = Fleet::start(&registry).await;
    for (name, node) in &fleet.nodes {
        eprintln!("provider {name} at {}", node.address);
    }
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
        "node": {"id": "grpcio-governed", "locality": {}},
    });
    std::fs::write(&bootstrap, config.to_string()).unwrap();
    let mut grpcio = PythonClient::start(
        &venv.python(),
        &format!("xds:///{INTERFACE}"),
        &[("GRPC_XDS_BOOTSTRAP", bootstrap.to_str().unwrap())],
    );
    let mut go = PythonClient::start_grpc_go(
        &grpc_go,
        &format!("xds:///{INTERFACE}"),
        &[("GRPC_XDS_BOOTSTRAP", bootstrap.to_str().unwrap())],
    );
    let envoy = Envoy::start(&venv, xds, INTERFACE, Routes::Rds).await;
    let mut through_envoy = PythonClient::start(&venv.python(), &envoy.listener, &[]);
    eprintln!(
        "fleet, server and clients up in {}",
        millis(began.elapsed())
    );

    let mut failures = Vec::new();
    for step in &STEPS {
        let step_began = Instant::now();
        for key in all_keys() {
            registry.delete_rule(&key).await;
        }
        let written = Instant::now();
        for (key, text) in (step.rules)(&ports) {
            registry.put_rule(&key, &text).await;
        }
        let java_run = async {
            let options = ConsumerOptions {
                config_centre: true,
                await_invokers: Some(step.invokers),
                ..ConsumerOptions::default()
            };
            let started = Instant::now();
            let (shares, run) =
                java_shares(&java, &registry, &fleet, step.calls, step.tagging, options).await;
            (shares, run.output, started.elapsed())
        };
        let ((java, output, java_took), grpcio_did, go_did, envoy_did) = tokio::join!(
            java_run,
            xds_client_step(&mut grpcio, &fleet, step, written),
            xds_client_step(&mut go, &fleet, step, written),
            xds_client_step(&mut through_envoy, &fleet, step, written),
        );
        eprintln!(
            "{}: Dubbo Java {java:?} (its run took {})",
            step.what,
            millis(java_took)
        );
        assert_outcome(step.what, step.outcome, step.calls, &java, &output);
        let clients = [
            ("grpcio", grpcio_did),
            ("grpc-go", go_did),
            ("grpcio through Envoy", envoy_did),
        ];
        for (client, did) in clients {
            match did {
                Ok((obeyed, shares)) => {
                    eprintln!(
                        "{}: {client} obeyed {} after the write ({} round(s) of calls); \
                         {shares:?}",
                        step.what,
                        millis(obeyed.after),
                        obeyed.rounds
                    );
                    if let Some(why) = unlike_java(step, client, &java, &shares) {
                        failures.push(format!("{}: {client}: {why}", step.what));
                    }
                }
                Err(why) => failures.push(format!("{}: {client} {why}", step.what)),
            }
        }
        eprintln!(
            "{}: step done in {}",
            step.what,
            millis(step_began.elapsed())
        );
    }
    eprintln!("all steps done in {}", millis(began.elapsed()));

    if !failures.is_empty() {
        let mut report = failures.join("\n");
        if let Some(translation) = server.explain(INTERFACE).await {
            let _ = write!(report, "\nwhat the server sends now:\n{translation}");
        }
        panic!("the xDS clients did not route as the Java consumer:\n{report}");
    }
    assert_eq!(
        nacks.total(),
        0,
        "no client rejected a response: {:?}",
        nacks.by_node()
    );
}
