//! `introspect rule` against a real etcd, ZooKeeper and Nacos (rnacos): rules written, read,
//! listed and deleted by compare-and-set where dubbo-admin writes them, and checked offline;
//! two operators racing on one rule; and the proof that what the tool writes is what Dubbo
//! Java reads and obeys.
//!
//! **Races** ([`race`]): two `rule put --expect VERSION` processes started together from the
//! same version, four rounds per registry. On etcd and ZooKeeper the server compares the
//! version (a transaction, a versioned `setData`): one wins and the other fails showing the
//! winner's rule, every round (rounds of 26 to 38 ms). On Nacos the version is the MD5 of the
//! content, which the tool compares on a read just before its write and sends as `casMd5`
//! for the server to compare; rnacos 0.8.8 ignores `casMd5`, and both writes went through in
//! 3 and 4 of 4 rounds (one edit overwritten unseen): the test asserts that only where the server
//! is found to compare (`NacosServer::enforces_cas_md5`) and prints it otherwise.
//!
//! **Java providers obey the tool's rules** (the Java peer of `interop/java`, provider role
//! with `--config-centre`): two providers A and B of one app, an Introspect consumer calling
//! them through a balanced channel, and `{app}.configurators` written and deleted with the
//! real binary: a `side: provider` item disabling A by its address (`127.0.0.1:PORT`; Java's
//! `AbstractConfigurator` matches a provider-side item's `addresses` against the provider
//! URL's host and port), and dubbo-admin's weight item (`type: weight`) giving A 300. A Java
//! provider applies such a rule and publishes a new revision. Measured (three runs, both tests
//! at once):
//!
//! * ZooKeeper, live: after the disable rule's write A took 14 to 82 more calls, and every
//!   call from 0.25 to 0.98 s after the write on went to B; after `rule delete` A was called
//!   again within 0.27 to 0.53 s; the weight rule reached the consumer's view 1.0 s after its
//!   write, and A's share of 2,000 calls was 74.8% to 75.0% (a real Java consumer's 74.2% to
//!   75.0%).
//! * Nacos (rnacos): rnacos keeps an instance's first metadata when its client registers it
//!   again, so a live republish is never seen there (DESIGN §10); the rules are written before
//!   A starts, which Java applies at its first registration. Disabled at its start, A took 0
//!   of 300 calls; the rule deleted and the weight rule written, A started again on its
//!   address took 74.8% to 76.2% of 2,000 (Java's consumer 74.1% to 74.2%).
//!
//! **Rust providers obey the tool's rules** as Java ones do, judged live by an Introspect
//! consumer and a real Dubbo Java consumer calling at the same time (`--log-calls`, a call
//! every 5 ms): the provider applies the `side: provider` item and republishes one publish
//! delay (1 s) after the change. Measured (two runs each):
//!
//! * ZooKeeper: after the disable rule's write, the Introspect consumer's calls left A
//!   1.03 s after it, the Java consumer's last call to A was 1.04 to 1.06 s after it; after
//!   `rule delete`, Introspect called A again 1.04 s after it, and **the Java consumer never
//!   called A again** (0 of 1,622 and 2,012 calls over 11 to 14 s): Java's consumer keeps a
//!   disabled provider in its invalid list when the rule is deleted (DESIGN §10), whichever
//!   language the provider is in. Under the weight 300 rule: Introspect 75.0%, Java 74.1% to
//!   74.4% of 2,000.
//! * Nacos (rnacos): the same, 3.7 to 3.8 s after the write for both consumers (the
//!   instance's new metadata is pushed 2.5 s after the provider registers it again); Java
//!   again never resumed after the delete. Under the weight rule: Introspect 75.1%, Java
//!   74.2%.
//!
//! The whole file runs in 30 to 40 s, the two Java tests side by side (ZooKeeper 19 to 23 s,
//! Nacos 30 to 39 s, each with three or four JVM starts).
//! The test lives here, not in `tests/it`, because only the tool's own tests have the binary
//! built for them (`CARGO_BIN_EXE_introspect`); the Java peer's launcher
//! (`tests/it/support/peers.rs`) is reused as it is through `support/`.

use introspect::backend::{ConfigKey, ConfigWrite};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::etcd::EtcdServer;
use crate::support::nacos::NacosServer;
use crate::support::peers::{BuiltPeer, ConsumerOptions, LoggedCall, Peer, PeerProvider};
use crate::support::ports::free_ports;
use crate::support::tool::{command, introspect, outcome};
use crate::support::wait::eventually;
use crate::support::zookeeper::ZooKeeperServer;
use introspect::backend::Backend;
use introspect::consumer::{BalancedChannel, ChannelHandle};
use introspect::{Resolver, Subscription, SubscriptionHandle};

/// A tag rule as the new admin writes it (v3.0), sending `gray` calls to one address.
const TAG_RULE: &str = "configVersion: v3.0\nforce: false\nenabled: true\nkey: shop-orders\ntags:\n  - name: gray\n    addresses:\n      - \"10.0.0.7:20880\"\n";
/// The same rule, forced, as a second operator edits it.
const FORCED: &str = "configVersion: v3.0\nforce: true\nenabled: true\nkey: shop-orders\ntags:\n  - name: gray\n    addresses:\n      - \"10.0.0.7:20880\"\n";
/// A condition rule of the service, as Dubbo's docs write one.
const CONDITION_RULE: &str = "configVersion: v3.0\nscope: service\nkey: helloworld.Greeter\nenabled: true\nforce: false\nconditions:\n  - method = SayHello => port != 50052\n";

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_round_trip_on_etcd() {
    let Some(etcd) = EtcdServer::start().await else {
        return;
    };
    let endpoint = etcd.endpoint();
    round_trip(&["--etcd", endpoint.as_str()]);
    let races = tokio::task::block_in_place(|| race(&["--etcd", endpoint.as_str()]));
    assert_eq!(
        races.lost_updates, 0,
        "etcd compares on the server: {races:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_round_trip_on_zookeeper() {
    let Some(server) = ZooKeeperServer::start().await else {
        return;
    };
    let url = server.url();
    round_trip(&["--registry", url.as_str()]);
    let races = tokio::task::block_in_place(|| race(&["--registry", url.as_str()]));
    assert_eq!(
        races.lost_updates, 0,
        "ZooKeeper compares versions on the server: {races:?}"
    );

    // A rule written by another hand that consumers and providers refuse: `rule get` says
    // why, where an operator looks, and still shows the text to fix.
    let key = "shop-orders.configurators";
    let broken = "configVersion: v3.0\nscope: application\nkey: shop-orders\nconfigs: []\n";
    let config = server.backend().await.config().clone();
    config
        .put(
            &ConfigKey::new(key, "dubbo").unwrap(),
            ConfigWrite::create(broken),
        )
        .await
        .unwrap();
    let (ok, out, err) = tokio::task::block_in_place(|| {
        introspect(&["--registry", url.as_str(), "rule", "get", key])
    });
    assert!(ok, "{err}");
    assert!(
        out.contains("# refused by consumers and providers"),
        "{out}"
    );
    assert!(out.contains("configs: []"), "{out}");
    let (ok, out, _) = tokio::task::block_in_place(|| {
        introspect(&["--registry", url.as_str(), "--json", "rule", "get", key])
    });
    assert!(ok);
    let value: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        value["refused"].as_str().is_some_and(|r| !r.is_empty()),
        "{value}"
    );
}

/// put, get, list, a lost race, delete: against the registry `registry` names.
fn round_trip(registry: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let tag = write(dir.path(), "tag.yaml", TAG_RULE);
    let forced = write(dir.path(), "forced.yaml", FORCED);
    let condition = write(dir.path(), "condition.yaml", CONDITION_RULE);
    let run = |rest: &[&str]| {
        let args: Vec<&str> = registry.iter().chain(rest).copied().collect();
        tokio::task::block_in_place(|| introspect(&args))
    };
    let key = "shop-orders.tag-router";

    let (ok, _, err) = run(&["rule", "get", key]);
    assert!(
        !ok && err.contains("no rule shop-orders.tag-router"),
        "{err}"
    );
    let (ok, out, err) = run(&["--json", "rule", "put", key, &tag, "--create"]);
    assert!(ok, "{err}");
    let written: serde_json::Value = serde_json::from_str(&out).unwrap();
    let base = written["version"].as_str().unwrap().to_owned();
    let (ok, _, err) = run(&["rule", "put", key, &tag, "--create"]);
    assert!(!ok && err.contains("changed since it was read"), "{err}");
    let (ok, out, err) = run(&[
        "rule",
        "put",
        "helloworld.Greeter::.condition-router",
        &condition,
    ]);
    assert!(ok && out.starts_with("wrote dubbo/"), "{out}{err}");

    let (ok, out, err) = run(&["--json", "rule", "get", key]);
    assert!(ok, "{err}");
    let got: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(got["content"], TAG_RULE);
    assert_eq!(got["version"], base.as_str());
    assert_eq!(got["group"], "dubbo");
    let (ok, out, _) = run(&["rule", "get", key]);
    assert!(
        ok && out.starts_with(&format!("# dubbo/{key} version {base}\n")),
        "{out}"
    );

    let (ok, out, err) = run(&["rule", "list"]);
    assert!(ok, "{err}");
    // No provider, consumer or mapping knows the service or the app here: the list says
    // nobody reads either rule yet.
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "helloworld.Greeter::.condition-router",
            key,
            "rules nobody reads: helloworld.Greeter::.condition-router (no provider, consumer \
             or mapping knows helloworld.Greeter), shop-orders.tag-router (no provider, \
             consumer or mapping knows shop-orders)"
        ]
    );

    // Two operators edit from the same version: one wins, the other is shown the winner.
    let (ok, _, err) = run(&["rule", "put", key, &forced, "--expect", &base]);
    assert!(ok, "{err}");
    let (ok, _, err) = run(&["rule", "put", key, &tag, "--expect", &base]);
    assert!(!ok, "the second write against {base} must fail");
    assert!(err.contains("changed since it was read"), "{err}");
    assert!(
        err.contains("current rule (version") && err.contains("force: true"),
        "{err}"
    );
    let (_, out, _) = run(&["--json", "rule", "get", key]);
    let now: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(now["content"], FORCED, "the winner's write is kept");
    let current = now["version"].as_str().unwrap().to_owned();

    // A file that is not the rule its key names is never written.
    let (ok, _, err) = run(&["rule", "put", key, &condition]);
    assert!(
        !ok && err.contains("condition.yaml") && err.contains("not a valid tag rule"),
        "{err}"
    );
    let (ok, _, err) = run(&["rule", "put", "shop.script-router", &tag]);
    assert!(!ok && err.contains("--force-unknown"), "{err}");

    // Deletes compare too.
    let (ok, _, err) = run(&["rule", "delete", key, "--expect", &base]);
    assert!(
        !ok && err.contains(&format!(
            "its version is {current}, not the expected {base}"
        )),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    let (ok, _, err) = run(&["rule", "delete", key, "--expect", &current]);
    assert!(ok, "{err}");
    let (ok, _, _) = run(&["rule", "delete", "helloworld.Greeter::.condition-router"]);
    assert!(ok);
    let (ok, out, _) = run(&["--json", "rule", "list"]);
    assert!(ok);
    let listed: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed["keys"], serde_json::json!([]));
}

/// Rounds of [`race`], each from the version the previous one left.
const RACE_ROUNDS: u32 = 4;

/// What the rounds of [`race`] on one registry came to.
#[derive(Debug, Default)]
struct Races {
    /// Rounds where one write won and the other failed as a conflict showing the winner's
    /// rule.
    one_won: u32,
    /// Rounds where both writes said they were written: one edit was overwritten unseen (a
    /// server that does not compare versions itself).
    lost_updates: u32,
    /// The slowest round, both processes from start to exit.
    slowest: Duration,
}

/// Two operators edit one rule from the same version at the same moment, [`RACE_ROUNDS`]
/// times: each round reads the rule's version (`rule get`), then starts two
/// `rule put KEY FILE --expect VERSION` processes together, each with its own edit. Asserted
/// every round: the rule afterwards is one of the two edits, whole; a write that failed did
/// so as a conflict ("changed since it was read") that shows the rule as it is now, which is
/// the other edit (nothing lost: the loser sees the winner's text). Rounds where both say
/// they wrote are counted in [`Races::lost_updates`], for the caller to judge by the server.
fn race(registry: &[&str]) -> Races {
    let dir = tempfile::tempdir().unwrap();
    let key = "shop-race.tag-router";
    // The document names the key it is written under (else the write is refused).
    let rule = |address: &str| {
        TAG_RULE
            .replace("10.0.0.7:20880", address)
            .replace("key: shop-orders", "key: shop-race")
    };
    let run = |rest: &[&str]| {
        let args: Vec<&str> = registry.iter().chain(rest).copied().collect();
        introspect(&args)
    };
    let base = write(dir.path(), "base.yaml", &rule("10.0.0.1:20880"));
    let (ok, _, err) = run(&["rule", "put", key, &base, "--create"]);
    assert!(ok, "{err}");
    let mut races = Races::default();
    for round in 1..=RACE_ROUNDS {
        let (ok, out, err) = run(&["--json", "rule", "get", key]);
        assert!(ok, "{err}");
        let read: serde_json::Value = serde_json::from_str(&out).unwrap();
        let version = read["version"].as_str().unwrap().to_owned();
        let edits = [1, 2].map(|operator| rule(&format!("10.0.{round}.{operator}:20880")));
        let files = [0, 1].map(|i| write(dir.path(), &format!("edit-{i}.yaml"), &edits[i]));
        let started = Instant::now();
        let children = files.clone().map(|file| {
            let args: Vec<&str> = registry
                .iter()
                .copied()
                .chain(["rule", "put", key, &file, "--expect", &version])
                .collect();
            command(&args).spawn().expect("binary runs")
        });
        let results =
            children.map(|child| outcome(&child.wait_with_output().expect("binary runs")));
        races.slowest = races.slowest.max(started.elapsed());
        let (_, out, err) = run(&["--json", "rule", "get", key]);
        let now: serde_json::Value = serde_json::from_str(&out).expect(&err);
        let content = now["content"].as_str().unwrap_or_default().to_owned();
        let report = format!("round {round} from version {version}: {results:?}; now {now}");
        let kept = edits
            .iter()
            .position(|edit| *edit == content)
            .unwrap_or_else(|| panic!("the rule is neither edit: {report}"));
        match [results[0].0, results[1].0] {
            [true, true] => races.lost_updates += 1,
            [true, false] | [false, true] => {
                let winner = usize::from(results[1].0);
                assert_eq!(kept, winner, "the winner's edit is kept: {report}");
                let loser = &results[1 - winner].2;
                assert!(
                    loser.contains("changed since it was read")
                        && loser.contains("current rule (version")
                        && loser.contains(edits[winner].trim_end()),
                    "the loser is shown the winner's rule: {report}"
                );
                races.one_won += 1;
            }
            [false, false] => {
                // Both refused: only a conflict with a third writer could explain it.
                panic!("neither write went through: {report}")
            }
        }
    }
    let (ok, _, err) = run(&["rule", "delete", key]);
    assert!(ok, "{err}");
    eprintln!(
        "race on {registry:?}: {races:?} ({RACE_ROUNDS} rounds of two `rule put --expect` at once)"
    );
    races
}

/// On Nacos the version is the content's MD5, sent as `casMd5` for the server to compare.
/// rnacos, the test server, does not compare it (it takes the write whatever it says), so
/// there only the tool's own read just before the write stands between two operators:
/// measured here, and a round where both writes went through is printed, not failed. Asserted
/// on every server: the rule is one edit whole, and a refused write shows the winner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_operators_race_on_nacos() {
    let Some(server) = NacosServer::start().await else {
        return;
    };
    let enforced = server.enforces_cas_md5().await;
    let url = server.url();
    let races = tokio::task::block_in_place(|| race(&["--registry", url.as_str()]));
    if enforced {
        assert_eq!(
            races.lost_updates, 0,
            "the server compares casMd5: {races:?}"
        );
    } else if races.lost_updates > 0 {
        eprintln!(
            "*** this Nacos server ignores casMd5: in {} of {RACE_ROUNDS} rounds both writes \
             went through and one edit was overwritten unseen (a Nacos that compares casMd5 \
             refuses the second) ***",
            races.lost_updates
        );
    }
}

#[test]
fn check_reads_a_rule_offline_and_names_the_file_of_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let condition = write(dir.path(), "greeter.yaml", CONDITION_RULE);
    let (ok, out, err) = introspect(&["rule", "check", &condition]);
    assert!(ok, "{err}");
    assert!(out.contains("a valid condition rule"), "{out}");
    assert!(
        out.contains("condition 1: when method = SayHello  then port != 50052"),
        "{out}"
    );
    let configurators = write(
        dir.path(),
        "web.yaml",
        "configVersion: v3.0\nscope: application\nkey: shop-web\nenabled: true\nconfigs:\n  - side: consumer\n    addresses: [0.0.0.0]\n    providerAddresses: [\"10.0.0.7:20880\"]\n    parameters:\n      weight: 200\n",
    );
    let (ok, out, err) = introspect(&[
        "--json",
        "rule",
        "check",
        &configurators,
        "--key",
        "shop-web.configurators",
    ]);
    assert!(ok, "{err}");
    let shown: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(shown["form"], "configurators");
    assert_eq!(shown["items"][0]["side"], "consumer");
    assert_eq!(shown["items"][0]["parameters"]["weight"], "200");

    for (name, text, reason) in [
        ("unclosed.yaml", "tags: [gray\n", "not YAML"),
        ("nothing.yaml", "key: shop\n", "cannot tell which rule"),
        (
            "bad-condition.yaml",
            "conditions:\n  - a==b => c=d\n",
            "not a valid condition rule",
        ),
        (
            "unknown-version.yaml",
            "configVersion: v9\nconfigs:\n  - side: consumer\n    parameters: {weight: 1}\n",
            "configVersion",
        ),
    ] {
        let path = write(dir.path(), name, text);
        let (ok, out, err) = introspect(&["rule", "check", &path]);
        assert!(!ok, "{name} must fail: {out}");
        assert!(
            err.starts_with("error: rule ") && err.contains(name) && err.contains(reason),
            "{name}: {err}"
        );
    }
    let big = write(dir.path(), "big.yaml", &"a".repeat(64 * 1024 + 1));
    let (ok, _, err) = introspect(&["rule", "check", &big]);
    assert!(
        !ok && err.contains("big.yaml") && err.contains("over the limit"),
        "{err}"
    );
}

/// The generated Greeter client (`proto/generated/`), for the calls of the Java proof.
#[rustfmt::skip] #[path = "../../../proto/generated/helloworld.rs"] mod pb;

/// The Java providers' app: a Java provider reads `{app}.configurators`.
const JAVA_APP: &str = "rule-proof-greeter";
/// The Java consumer that judges the weight rule.
const JAVA_CONSUMER_APP: &str = "rule-proof-java-consumer";
/// The interface the Java peer exports.
const GREETER: &str = "helloworld.Greeter";
/// Calls over which A's share under the weight rule is measured.
const SHARE_CALLS: u32 = 2_000;
/// How far (percentage points) A's share may be from 75% (300 of 400): a share of 2,000
/// calls has a standard deviation under 1 point.
const SHARE_MARGIN: f64 = 5.0;
/// Calls in a row that must all avoid A before the disable rule counts as obeyed.
const CLEAN_CALLS: u32 = 200;
/// How long a rule may take to be obeyed (measured: see the module docs).
const OBEY_DEADLINE: Duration = Duration::from_secs(20);

/// A `side: provider` configurator of [`JAVA_APP`] disabling the provider at `address`, in
/// the v3.0 form of Dubbo's docs for taking one instance out (the address with its port:
/// Java's `AbstractConfigurator` matches a provider-side item's `addresses` against the
/// provider URL's host and port).
fn disable_rule(address: &str) -> String {
    format!(
        "configVersion: v3.0\nscope: application\nkey: {JAVA_APP}\nenabled: true\nconfigs:\n  - side: provider\n    addresses: [\"{address}\"]\n    parameters:\n      disabled: true\n"
    )
}

/// A weight configurator of [`JAVA_APP`] for the provider at `address`, as dubbo-admin's
/// weight page writes one (`OverrideUtils.weightDTOtoConfig`: an item of `type: weight`,
/// `side: provider`, its own `enabled`).
fn weight_rule(address: &str, weight: u32) -> String {
    format!(
        "configVersion: v2.7\nscope: application\nkey: {JAVA_APP}\nenabled: true\nconfigs:\n  - type: weight\n    enabled: true\n    side: provider\n    addresses: [\"{address}\"]\n    parameters:\n      weight: {weight}\n"
    )
}

/// An Introspect consumer of the Greeter through the mapping: a balanced channel over its
/// subscription.
struct RustConsumer {
    _resolver: Resolver,
    live: SubscriptionHandle,
    _handle: ChannelHandle,
    channel: BalancedChannel,
}

impl RustConsumer {
    /// Subscribes through `backend` and waits until the view holds the providers at `ports`
    /// and the channel's balancer those of `callable`.
    async fn start(backend: Backend, ports: &[u16], callable: &[u16]) -> RustConsumer {
        let resolver = Resolver::builder(backend).build();
        let live = resolver
            .subscribe(Subscription::new(GREETER))
            .await
            .unwrap();
        eventually(
            Duration::from_secs(30),
            "the consumer's view to hold the Java providers",
            || {
                let held: BTreeSet<u16> = live.current().iter().map(|e| e.port).collect();
                let all = ports.iter().all(|p| held.contains(p));
                async move { all }
            },
        )
        .await;
        let (channel, mut handle) = resolver.balanced_channel(&live).unwrap();
        let known = async {
            loop {
                let held: BTreeSet<u16> = handle
                    .addresses()
                    .iter()
                    .filter_map(|a| a.to_string().rsplit_once(':')?.1.parse().ok())
                    .collect();
                if callable.iter().all(|p| held.contains(p)) {
                    break;
                }
                handle.changed().await.unwrap();
            }
        };
        tokio::time::timeout(Duration::from_secs(20), known)
            .await
            .expect("the channel's balancer learns the providers");
        RustConsumer {
            _resolver: resolver,
            live,
            _handle: handle,
            channel,
        }
    }

    /// One call: the name of the provider that answered (`A`, `B`: the Java peer's `--name`),
    /// or why it failed.
    async fn call(&self) -> Result<String, String> {
        let mut client = pb::greeter_client::GreeterClient::new(self.channel.clone());
        let mut request = tonic::Request::new(pb::HelloRequest {
            name: "introspect".into(),
        });
        request.set_timeout(Duration::from_secs(3));
        match tokio::time::timeout(Duration::from_secs(5), client.say_hello(request)).await {
            Ok(Ok(reply)) => {
                let message = reply.into_inner().message;
                Ok(message
                    .rsplit_once(" from ")
                    .map_or(message.clone(), |(_, name)| name.to_owned()))
            }
            Ok(Err(status)) => Err(status.to_string()),
            Err(_) => Err("call timed out".into()),
        }
    }

    /// `n` calls, one at a time: answers by provider name; a failed call fails the test.
    async fn shares(&self, n: u32) -> BTreeMap<String, u64> {
        let mut answered = BTreeMap::new();
        for _ in 0..n {
            let name = self
                .call()
                .await
                .unwrap_or_else(|e| panic!("a call failed: {e}"));
            *answered.entry(name).or_default() += 1;
        }
        answered
    }

    /// Calls until [`CLEAN_CALLS`] in a row avoid A, within [`OBEY_DEADLINE`] of `written`
    /// (the disable rule's write; `context` is shown on failure): how many calls A took
    /// meanwhile, and how long after the write the clean run began. A failed call fails the
    /// test.
    async fn until_a_left(
        &self,
        written: Instant,
        context: impl Fn() -> String,
    ) -> (u32, Duration) {
        let (mut to_a, mut clean, mut since) = (0u32, 0u32, Duration::ZERO);
        while clean < CLEAN_CALLS {
            assert!(
                written.elapsed() < OBEY_DEADLINE,
                "A still called {OBEY_DEADLINE:?} after the disable rule ({to_a} calls)\n{}",
                context()
            );
            match self.call().await {
                Ok(name) if name == "A" => {
                    to_a += 1;
                    clean = 0;
                }
                Ok(_) => {
                    if clean == 0 {
                        since = written.elapsed();
                    }
                    clean += 1;
                }
                Err(e) => panic!("a call failed while A was disabled: {e}"),
            }
        }
        (to_a, since)
    }

    /// Calls until A answers one, within [`OBEY_DEADLINE`] of `deleted` (the rule's
    /// deletion; `context` says more on failure). A failed call fails the test.
    async fn until_a_called(&self, deleted: Instant, context: impl Fn() -> String) {
        loop {
            assert!(
                deleted.elapsed() < OBEY_DEADLINE,
                "A not called again {OBEY_DEADLINE:?} after the rule was deleted\n{}",
                context()
            );
            match self.call().await {
                Ok(name) if name == "A" => return,
                Ok(_) => {}
                Err(e) => panic!("a call failed after the rule was deleted: {e}"),
            }
        }
    }

    /// The view's parameter `name` of the provider on `port`.
    fn param(&self, port: u16, name: &str) -> Option<String> {
        self.live
            .current()
            .iter()
            .find(|e| e.port == port)
            .and_then(|e| e.params().get(name).cloned())
    }
}

/// `name`'s share of `answered`, in percent.
fn percent(answered: &BTreeMap<String, u64>, name: &str) -> f64 {
    let all = answered.values().sum::<u64>().max(1) as f64;
    answered.get(name).copied().unwrap_or(0) as f64 * 100.0 / all
}

/// Runs the binary against `registry` with `rest`, on a blocking thread; panics when it fails.
fn tool(registry: &str, rest: &[&str]) -> String {
    let mut args = vec!["--registry", registry];
    args.extend_from_slice(rest);
    let (ok, out, err) = tokio::task::block_in_place(|| introspect(&args));
    assert!(ok, "introspect {args:?} failed: {err}");
    out
}

/// Writes `text` as `{JAVA_APP}.configurators` with `introspect rule put`.
fn put_rule(registry: &str, dir: &Path, name: &str, text: &str) {
    let file = write(dir, name, text);
    let key = format!("{JAVA_APP}.configurators");
    tool(registry, &["rule", "put", &key, &file]);
}

/// Removes `{JAVA_APP}.configurators` with `introspect rule delete`.
fn delete_rule(registry: &str) {
    let key = format!("{JAVA_APP}.configurators");
    tool(registry, &["rule", "delete", &key]);
}

/// Waits until the view shows A (on port `a`) with `weight` 300 (printing how long after
/// `since`, which `what` names), then makes [`SHARE_CALLS`] calls: A's share, asserted, and
/// the real Java consumer's too.
async fn weighted_share(
    java: &BuiltPeer,
    registry: &str,
    consumer: &RustConsumer,
    a: u16,
    (since, what): (Instant, &str),
) {
    eventually(
        OBEY_DEADLINE,
        "the consumer's view to show A's weight 300",
        || {
            let weight = consumer.param(a, "weight");
            async move { weight.as_deref() == Some("300") }
        },
    )
    .await;
    eprintln!(
        "weight 300: the consumer's view showed it {:?} after {what}",
        since.elapsed()
    );
    let answered = consumer.shares(SHARE_CALLS).await;
    let share = percent(&answered, "A");
    eprintln!("weight 300: Introspect {answered:?}, A {share:.1}%");
    assert!(
        (share - 75.0).abs() <= SHARE_MARGIN,
        "A's share under weight 300 of 400: {share:.1}% ({answered:?})"
    );
    let options = ConsumerOptions {
        provided_by: Some(JAVA_APP),
        ..ConsumerOptions::default()
    };
    let run = java
        .consumer_with(registry, JAVA_CONSUMER_APP, SHARE_CALLS, &options)
        .await;
    let by_name: BTreeMap<String, u64> = run
        .shares
        .iter()
        .map(|(message, count)| {
            let name = message.rsplit_once(" from ").map_or("", |(_, n)| n);
            (name.to_owned(), *count)
        })
        .collect();
    let java_share = percent(&by_name, "A");
    eprintln!("weight 300: Dubbo Java {by_name:?}, A {java_share:.1}%");
    assert_eq!(run.failed, 0, "{}", run.output);
    assert!(
        (java_share - 75.0).abs() <= SHARE_MARGIN,
        "the Java consumer's share of A: {java_share:.1}% ({by_name:?})"
    );
}

/// A Java provider of `{JAVA_APP}` with `--config-centre`, answering as `name`, without
/// warm-up: Dubbo's default (10 minutes) gives a provider seconds old a fraction of its
/// weight, rounded down, and the shares of such a fleet drift with its age (measured: A's
/// share under the weight rule 44% to 83%).
async fn java_provider(
    java: &BuiltPeer,
    registry: &str,
    ports: (u16, u16),
    name: &str,
) -> PeerProvider {
    let args = ["--name", name, "--warmup", "0", "--config-centre"];
    java.provider_at(registry, JAVA_APP, ports, &args).await
}

/// On ZooKeeper, live: two Java providers A and B of one app call-able by an Introspect
/// consumer; `introspect rule put` writes a provider-side configurator disabling A, and A
/// republishes a new revision: the consumer stops calling it. `rule delete` brings it back,
/// and a weight 300 rule on A gives it 75% of the calls, of the Introspect consumer's and of
/// a real Java consumer's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_provider_obeys_rules_the_tool_writes_on_zookeeper() {
    let Some(java) = Peer::Java.find() else {
        return;
    };
    let Some(server) = ZooKeeperServer::start().await else {
        return;
    };
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let (a, b) = tokio::join!(
        java_provider(&java, &url, free_ports(), "A"),
        java_provider(&java, &url, free_ports(), "B")
    );
    let consumer =
        RustConsumer::start(server.backend().await, &[a.port, b.port], &[a.port, b.port]).await;
    eprintln!(
        "two Java providers and the consumer ready in {:?}",
        started.elapsed()
    );
    let before = consumer.shares(100).await;
    assert!(
        before.contains_key("A") && before.contains_key("B"),
        "{before:?}"
    );

    // Disabled: A republishes; the consumer's calls leave it.
    let address = format!("127.0.0.1:{}", a.port);
    let written = Instant::now();
    put_rule(&url, dir.path(), "disable.yaml", &disable_rule(&address));
    let (to_a, since) = consumer.until_a_left(written, || a.output()).await;
    eprintln!(
        "disabled: A took {to_a} calls after the write; every call from {since:?} after it \
         went to B"
    );
    assert_eq!(consumer.param(a.port, "disabled").as_deref(), Some("true"));

    // Deleted: A republishes its first revision; the consumer calls it again.
    let deleted = Instant::now();
    delete_rule(&url);
    consumer.until_a_called(deleted, || a.output()).await;
    eprintln!(
        "deleted: A called again {:?} after the delete",
        deleted.elapsed()
    );

    let written = Instant::now();
    put_rule(&url, dir.path(), "weight.yaml", &weight_rule(&address, 300));
    let since = (written, "the write");
    weighted_share(&java, &url, &consumer, a.port, since).await;
    eprintln!("on ZooKeeper in {:?}", started.elapsed());
    drop(b);
    drop(a);
}

/// On Nacos (rnacos), where a provider's later revisions are not seen (rnacos keeps an
/// instance's first metadata when its client registers it again): the rules are written
/// before A starts, which Java applies at its first registration. A disabled at its start
/// takes no call; the rule deleted and a weight 300 rule written, A started again on its
/// address takes 75%.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_provider_obeys_rules_the_tool_writes_on_nacos() {
    let Some(java) = Peer::Java.find() else {
        return;
    };
    let Some(server) = NacosServer::start().await else {
        return;
    };
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let a_ports = free_ports();
    let address = format!("127.0.0.1:{}", a_ports.0);
    put_rule(&url, dir.path(), "disable.yaml", &disable_rule(&address));
    let (a, b) = tokio::join!(
        java_provider(&java, &url, a_ports, "A"),
        java_provider(&java, &url, free_ports(), "B")
    );
    let consumer = RustConsumer::start(server.backend().await, &[a.port, b.port], &[b.port]).await;
    eprintln!(
        "two Java providers and the consumer ready in {:?}",
        started.elapsed()
    );
    assert_eq!(consumer.param(a.port, "disabled").as_deref(), Some("true"));
    let disabled = consumer.shares(300).await;
    eprintln!("disabled at its start: {disabled:?}");
    assert_eq!(disabled.keys().collect::<Vec<_>>(), ["B"], "{disabled:?}");

    delete_rule(&url);
    put_rule(&url, dir.path(), "weight.yaml", &weight_rule(&address, 300));
    a.stop().await;
    let restarted = Instant::now();
    let a = java_provider(&java, &url, a_ports, "A").await;
    eprintln!("A started again in {:?}", restarted.elapsed());
    let since = (Instant::now(), "A said it was ready");
    weighted_share(&java, &url, &consumer, a.port, since).await;
    eprintln!("on Nacos in {:?}", started.elapsed());
    drop(b);
    drop(a);
}

/// A Greeter answering `Hello X from NAME`, as the Java peer with `--name` does.
struct NamedGreeter(&'static str);

#[tonic::async_trait]
impl pb::greeter_server::Greeter for NamedGreeter {
    async fn say_hello(
        &self,
        request: tonic::Request<pb::HelloRequest>,
    ) -> Result<tonic::Response<pb::HelloReply>, tonic::Status> {
        let message = format!("Hello {} from {}", request.into_inner().name, self.0);
        Ok(tonic::Response::new(pb::HelloReply { message }))
    }
}

/// A Rust provider of [`JAVA_APP`] (the Java consumer finds it as it finds Java ones),
/// answering as `name`, without warm-up (see [`java_provider`]); it follows its own rules,
/// as every provider does by default.
struct RustProvider {
    port: u16,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    serving: tokio::task::JoinHandle<introspect::Result<()>>,
}

impl RustProvider {
    async fn start(backend: Backend, name: &'static str) -> RustProvider {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let provider = introspect::Provider::builder(JAVA_APP, backend)
            .warmup(Duration::ZERO)
            .drain_period(Duration::from_millis(100))
            .export(introspect::ServiceInfo::new(GREETER))
            .build()
            .unwrap();
        let router = tonic::transport::Server::builder()
            .add_service(pb::greeter_server::GreeterServer::new(NamedGreeter(name)));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(provider.serve(router, listener, async {
            let _ = stopped.await;
        }));
        RustProvider {
            port,
            stop: Some(stop),
            serving,
        }
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.serving).await;
    }
}

impl Drop for RustProvider {
    fn drop(&mut self) {
        self.serving.abort();
    }
}

/// When the disable rule was written and when it was deleted (ms since the epoch), as
/// the Java consumer's logged calls are timed.
struct LiveSteps {
    disabled_at: u64,
    deleted_at: u64,
}

/// How long after a write the Java consumer's calls are held to it, per registry: the
/// provider republishes one publish delay (1 s) after the change, and the consumer then
/// fetches the new revision's metadata (measured: 1.06 s on ZooKeeper, 3.8 s on Nacos,
/// where the instance change itself takes 2.5 s to be pushed).
fn java_settle_ms(kind: &str) -> u64 {
    if kind == "Nacos" { 5_500 } else { 3_000 }
}
/// When the disable rule is written, after the Java consumer was launched (its JVM starts
/// and its directory fills in 3 to 5 s).
const DISABLE_AFTER: Duration = Duration::from_secs(8);
/// How long the disable rule stays.
const DISABLED_FOR: Duration = Duration::from_secs(8);

fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Two Rust providers A and B; an Introspect consumer and a real Dubbo Java consumer calling
/// them at the same time; `introspect rule put` disables A (the provider republishes), then
/// `rule delete`; then a weight 300 rule. Both consumers are judged by the calls they make.
async fn rust_providers_obey_rules_the_tool_writes(url: &str, backend: Backend, kind: &str) {
    let Some(java) = Peer::Java.find() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let a = RustProvider::start(backend.clone(), "A").await;
    let b = RustProvider::start(backend.clone(), "B").await;
    let consumer = RustConsumer::start(backend, &[a.port, b.port], &[a.port, b.port]).await;
    let address = format!("127.0.0.1:{}", a.port);
    let options = ConsumerOptions {
        provided_by: Some(JAVA_APP),
        await_invokers: Some(2),
        log_calls: true,
        interval: Duration::from_millis(5),
        ..ConsumerOptions::default()
    };
    let launched = tokio::time::Instant::now();
    let steps = async {
        tokio::time::sleep_until(launched + DISABLE_AFTER).await;
        let disabled_at = epoch_ms();
        let written = Instant::now();
        put_rule(url, dir.path(), "disable.yaml", &disable_rule(&address));
        let (to_a, since) = consumer.until_a_left(written, String::new).await;
        eprintln!(
            "{kind}, Rust provider disabled: Introspect's calls left A {since:?} after the \
             write ({to_a} calls to A meanwhile)"
        );
        tokio::time::sleep_until(launched + DISABLE_AFTER + DISABLED_FOR).await;
        let deleted_at = epoch_ms();
        let deleted = Instant::now();
        delete_rule(url);
        consumer.until_a_called(deleted, String::new).await;
        eprintln!(
            "{kind}, rule deleted: Introspect called A again {:?} after the delete",
            deleted.elapsed()
        );
        LiveSteps {
            disabled_at,
            deleted_at,
        }
    };
    let (run, steps) = tokio::join!(
        java.consumer_with(url, JAVA_CONSUMER_APP, 4_000, &options),
        steps
    );
    let calls_to_a = |from: u64, to: u64| {
        run.logged
            .iter()
            .filter(|c| c.at_ms >= from && c.at_ms < to)
            .filter(|c| c.outcome.as_ref().is_ok_and(|m| m.ends_with(" from A")))
            .count()
    };
    let last_a_after_disable = run
        .logged
        .iter()
        .filter(|c| c.at_ms >= steps.disabled_at && c.at_ms < steps.deleted_at)
        .filter(|c| c.outcome.as_ref().is_ok_and(|m| m.ends_with(" from A")))
        .map(|c| c.at_ms - steps.disabled_at)
        .max();
    let failures: Vec<&LoggedCall> = run.logged.iter().filter(|c| c.outcome.is_err()).collect();
    let failed = failures.len();
    let end = run.logged.last().map_or(0, |c| c.at_ms);
    eprintln!(
        "{kind}, Rust provider disabled: Dubbo Java's last call to A {last_a_after_disable:?} ms \
         after the write; after the delete it called A {} times (of {} calls over {} ms); {} \
         calls failed",
        calls_to_a(steps.deleted_at, end + 1),
        run.logged
            .iter()
            .filter(|c| c.at_ms >= steps.deleted_at)
            .count(),
        end.saturating_sub(steps.deleted_at),
        failed
    );
    assert!(
        calls_to_a(0, steps.disabled_at) > 0,
        "the Java consumer called A before the rule\n{}",
        run.output
    );
    let settle = java_settle_ms(kind);
    assert_eq!(
        calls_to_a(steps.disabled_at + settle, steps.deleted_at),
        0,
        "the Java consumer called A more than {settle} ms after the disable rule\n{}",
        run.output
    );
    // Java's consumer calls with no retry; while its directory swaps A's invokers for the
    // revision A republished (after each write), one call may fail on its side. One per
    // write, inside the settle window, is tolerated and shown; any other failure is not.
    let after_write = |at: u64| {
        let within = |c: &&&LoggedCall| c.at_ms >= at && c.at_ms < at + settle;
        failures.iter().filter(within).count()
    };
    let (after_disable, after_delete) = (
        after_write(steps.disabled_at),
        after_write(steps.deleted_at),
    );
    if failed > 0 {
        eprintln!(
            "{kind}, Java's failed calls (disable written at {}, deleted at {}): {failures:?}",
            steps.disabled_at, steps.deleted_at
        );
    }
    assert!(
        failed == after_disable + after_delete && after_disable <= 1 && after_delete <= 1,
        "Java's calls failed: {failures:?} (disable at {}, delete at {})\n{}",
        steps.disabled_at,
        steps.deleted_at,
        run.output
    );

    let written = Instant::now();
    put_rule(url, dir.path(), "weight.yaml", &weight_rule(&address, 300));
    weighted_share(&java, url, &consumer, a.port, (written, "the write")).await;
    eprintln!("{kind}, Rust providers: done in {:?}", started.elapsed());
    a.stop().await;
    b.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_providers_obey_rules_the_tool_writes_on_zookeeper() {
    let Some(server) = ZooKeeperServer::start().await else {
        return;
    };
    let backend = server.backend().await;
    rust_providers_obey_rules_the_tool_writes(&server.url(), backend, "ZooKeeper").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_providers_obey_rules_the_tool_writes_on_nacos() {
    let Some(server) = NacosServer::start().await else {
        return;
    };
    let backend = server.backend().await;
    rust_providers_obey_rules_the_tool_writes(&server.url(), backend, "Nacos").await;
}
