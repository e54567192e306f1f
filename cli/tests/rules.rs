//! `introspect rule` against a real etcd and a real ZooKeeper: rules written, read, listed
//! and deleted by compare-and-set where dubbo-admin writes them, and checked offline.

mod support;

use std::path::Path;
use std::process::{Command, Stdio};

use support::etcd::EtcdServer;
use support::zookeeper::ZooKeeperServer;

/// Runs the binary with `args` (no `INTROSPECT_*` variables inherited).
fn introspect(args: &[&str]) -> (bool, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_introspect"));
    command.args(args).stdin(Stdio::null());
    for var in [
        "INTROSPECT_ETCD",
        "INTROSPECT_REGISTRY",
        "INTROSPECT_USER",
        "INTROSPECT_PASSWORD",
    ] {
        command.env_remove(var);
    }
    let output = command.output().expect("binary runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_round_trip_on_zookeeper() {
    let Some(server) = ZooKeeperServer::start().await else {
        return;
    };
    let url = server.url();
    round_trip(&["--registry", url.as_str()]);
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
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["helloworld.Greeter::.condition-router", key]
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
    assert!(!ok && err.contains("force: true"), "{err}");
    let (ok, _, err) = run(&["rule", "delete", key, "--expect", &current]);
    assert!(ok, "{err}");
    let (ok, _, _) = run(&["rule", "delete", "helloworld.Greeter::.condition-router"]);
    assert!(ok);
    let (ok, out, _) = run(&["--json", "rule", "list"]);
    assert!(ok);
    let listed: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed["keys"], serde_json::json!([]));
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
