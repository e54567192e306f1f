//! Rules written where nobody reads them: consumers read a rule by its config key only, as
//! Dubbo Java does, so `rule put` refuses a key its document's `key` and `scope` do not
//! name (unless `--force`), and `route` and `rule list` name the rules present that no
//! known member reads. Against a real ZooKeeper, as an operator runs the tool.

use introspect::Limits;

use crate::support::tool::introspect;
use crate::support::zookeeper::ZooKeeperServer;

/// A valid condition rule of the service `helloworld.Greeter`.
const RULE: &str = "configVersion: v3.0\nscope: service\nkey: helloworld.Greeter\nenabled: true\nconditions:\n  - method = SayHello => port != 50052\n";
/// The key Java reads it under.
const SERVICE_KEY: &str = "helloworld.Greeter::.condition-router";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misplaced_rules_are_refused_and_then_named_as_read_by_nobody() {
    let Some(server) = ZooKeeperServer::start().await else {
        return;
    };
    // The interface is known: a provider app maps to it.
    let backend = server.backend().await;
    backend
        .mapping()
        .add("helloworld.Greeter", "greeter", &Limits::default())
        .await
        .unwrap();
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rule.yaml");
    std::fs::write(&file, RULE).unwrap();
    let file = file.display().to_string();
    let run = |args: &[&str]| {
        let mut all = vec!["--registry", url.as_str()];
        all.extend_from_slice(args);
        tokio::task::block_in_place(|| introspect(&all))
    };
    let misplaced = [
        "helloworld.Greeter.condition-router",
        "helloworld.Greeter:.condition-router",
        "helloworld.Greter::.condition-router",
    ];
    for key in misplaced {
        let (ok, _, err) = run(&["rule", "put", key, &file]);
        assert!(!ok, "{key} refused");
        assert!(
            err.contains(SERVICE_KEY) && err.contains("--force"),
            "{key}: {err}"
        );
    }
    let (ok, out, err) = run(&["rule", "put", misplaced[0], &file, "--force"]);
    assert!(ok, "{err}");
    assert!(out.contains("wrote dubbo/"), "{out}");
    assert!(
        err.contains("the service key is helloworld.Greeter::.condition-router"),
        "{err}"
    );
    let (ok, _, err) = run(&["rule", "put", misplaced[2], &file, "--force"]);
    assert!(ok, "{err}");
    assert!(
        err.contains("no provider, consumer or mapping knows helloworld.Greter"),
        "{err}"
    );
    let (ok, _, err) = run(&["rule", "put", SERVICE_KEY, &file]);
    assert!(ok, "{err}");
    assert!(!err.contains("warning"), "{err}");

    let expected = "rules nobody reads: helloworld.Greeter.condition-router (the service key \
                    is helloworld.Greeter::.condition-router), helloworld.Greter::.condition-router \
                    (no provider, consumer or mapping knows helloworld.Greter)";
    let (ok, out, err) = run(&["rule", "list"]);
    assert!(ok, "{err}");
    assert!(out.contains(expected), "{out}");
    let (_, out, err) = run(&["route", "helloworld.Greeter"]);
    assert!(out.contains(expected), "{out}\n{err}");
    let (_, out, err) = run(&["--json", "route", "helloworld.Greeter"]);
    let value: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    let keys: Vec<&str> = value["rules_nobody_reads"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u["key"].as_str())
        .collect();
    assert_eq!(keys, [misplaced[0], misplaced[2]], "{value}");
}
