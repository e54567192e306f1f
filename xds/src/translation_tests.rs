//! Rules in, resources out: every rule form a Dubbo fleet holds, translated for one service
//! of four providers (A `weight=300`, B `weight=100`, C `dubbo.tag=gray`, D disabled).

use std::sync::Arc;

use envoy_types::pb::envoy::config::cluster::v3::cluster::LbPolicy;
use envoy_types::pb::envoy::config::route::v3::route::Action;
use envoy_types::pb::envoy::config::route::v3::route_action::ClusterSpecifier;
use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
use introspect::consumer::HealthOptions;
use introspect::governance::{ConsumerIdentity, Rule, RuleKey, RuleSet};
use introspect::{Endpoint, ServiceInfo};

use crate::resources::{Client, cluster, grpc_callable, load_assignment, route_configuration};
use crate::translate::classes::Matcher;
use crate::translate::{FORCE_TAG_HEADER, Input, TAG_HEADER, Translation, translate};

const SERVICE: &str = "helloworld.Greeter";

fn provider(port: u16, protocol: &str, params: &[(&str, &str)]) -> Endpoint {
    let mut service = ServiceInfo::new(SERVICE).with_protocol(protocol);
    for (k, v) in params {
        service = service.with_param(*k, *v);
    }
    Endpoint {
        app: "greeter".into(),
        host: "10.0.0.1".into(),
        port,
        instance_port: port,
        protocol: protocol.into(),
        revision: "r".into(),
        service: Arc::new(service),
        timestamp: 0,
    }
}

/// A (1) weight 300, B (2) weight 100, C (3) tagged gray, D (4) disabled.
fn fleet() -> Vec<Endpoint> {
    vec![
        provider(1, "tri", &[("weight", "300")]),
        provider(2, "tri", &[("weight", "100")]),
        provider(3, "tri", &[("dubbo.tag", "gray")]),
        provider(4, "tri", &[("disabled", "true")]),
    ]
}

fn rules(rules: &[(RuleKey, &str)]) -> RuleSet {
    RuleSet::new(
        rules
            .iter()
            .map(|(key, text)| (key.clone(), Rule::parse(key, text).unwrap())),
        Vec::new(),
    )
}

fn translate_at(endpoints: &[Endpoint], rules: &RuleSet, now_ms: i64) -> Arc<Translation> {
    let consumer = ConsumerIdentity::new(Some("shop".into()), Some("10.0.0.9".into()));
    translate(&Input {
        service: SERVICE,
        endpoints,
        rules,
        consumer: &consumer,
        outliers: &HealthOptions::default(),
        now_ms,
    })
}

fn translated(rules: &RuleSet) -> Arc<Translation> {
    translate_at(&fleet(), rules, 0)
}

/// The ports and weights of a cluster's members.
fn members(t: &Translation, cluster: &str) -> Vec<(u16, u32)> {
    t.cluster(cluster)
        .unwrap_or_else(|| panic!("no cluster {cluster} in {t}"))
        .members
        .iter()
        .map(|m| (m.port, m.weight))
        .collect()
}

/// Where a call with `method` and `headers` goes: the first route it matches.
fn routed<'t>(t: &'t Translation, method: &str, headers: &[(&str, &str)]) -> &'t [(String, u32)] {
    let header = |name: &str| headers.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
    let route = t
        .routes
        .iter()
        .find(|r| {
            r.matchers.iter().all(|m| match m {
                Matcher::Method(m) => m == method,
                Matcher::Header(name, value) => header(name) == Some(value.as_str()),
                Matcher::HeaderTrue(name) => {
                    header(name).is_some_and(|v| v.eq_ignore_ascii_case("true"))
                }
                Matcher::Absent(name) => header(name).is_none(),
            })
        })
        .expect("the last route matches any call");
    &route.destinations
}

/// The ports a call reaches through a single destination.
fn reaches(t: &Translation, method: &str, headers: &[(&str, &str)]) -> Vec<u16> {
    match routed(t, method, headers) {
        [(cluster, _)] => members(t, cluster).into_iter().map(|(p, _)| p).collect(),
        many => panic!("one cluster, not {many:?}\n{t}"),
    }
}

fn service_key() -> String {
    format!("{SERVICE}::")
}

#[test]
fn with_no_rule_an_untagged_call_reaches_the_untagged_enabled_providers_weighted_as_java() {
    let t = translated(&RuleSet::none());
    assert_eq!(members(&t, SERVICE), vec![(1, 300), (2, 100)]);
    assert_eq!(reaches(&t, "SayHello", &[]), vec![1, 2]);
    assert_eq!(reaches(&t, "SayHello", &[(TAG_HEADER, "gray")]), vec![3]);
    // A tag no provider has falls back to the untagged, unless forced.
    assert_eq!(reaches(&t, "SayHello", &[(TAG_HEADER, "blue")]), vec![1, 2]);
    assert_eq!(
        reaches(
            &t,
            "SayHello",
            &[(TAG_HEADER, "blue"), (FORCE_TAG_HEADER, "True")]
        ),
        Vec::<u16>::new()
    );
    assert!(t.rules_in_force.is_empty());
}

#[test]
fn weights_of_zero_are_left_out_unless_all_are_zero_and_each_address_counts_once() {
    let endpoints = vec![
        provider(1, "tri", &[]),
        provider(1, "grpc", &[]),
        provider(3, "dubbo", &[]),
        provider(4, "tri", &[("weight", "zero")]),
        provider(5, "tri", &[("weight", "0")]),
        provider(8, "tri", &[("weight", "-3")]),
    ];
    let t = translate_at(&endpoints, &RuleSet::none(), 0);
    // A weight that does not parse is 100; weight 0 and negative ones are left out.
    assert_eq!(members(&t, SERVICE), vec![(1, 100), (4, 100)]);
    let none = vec![
        provider(1, "tri", &[("weight", "0")]),
        provider(2, "tri", &[("weight", "0")]),
    ];
    let t = translate_at(&none, &RuleSet::none(), 0);
    assert_eq!(members(&t, SERVICE), vec![(1, 1), (2, 1)]);
}

#[test]
fn a_warming_provider_weighs_less_and_is_due_again_a_step_later() {
    let started = 1_700_000_000_000_i64;
    let mut warming = provider(1, "tri", &[("weight", "300")]);
    warming.timestamp = started as u64;
    let endpoints = vec![warming, provider(2, "tri", &[])];
    let t = translate_at(&endpoints, &RuleSet::none(), started + 60_000);
    assert_eq!(members(&t, SERVICE), vec![(1, 30), (2, 100)]);
    assert!(t.cluster(SERVICE).unwrap().members[0].warming);
    // Ten steps over the 10-minute warm-up: the next at two minutes.
    assert_eq!(t.next_ramp_ms, Some(started + 120_000));
    let warm = translate_at(&endpoints, &RuleSet::none(), started + 600_000);
    assert_eq!(members(&warm, SERVICE), vec![(1, 300), (2, 100)]);
    assert_eq!(warm.next_ramp_ms, None);
}

#[test]
fn consumer_side_configurators_reweigh_and_disable() {
    let text = "configVersion: v3.0\nscope: service\nkey: helloworld.Greeter\nenabled: true\n\
                configs:\n  - side: consumer\n    addresses: [0.0.0.0]\n    \
                providerAddresses: [\"10.0.0.1:1\"]\n    parameters:\n      weight: 100\n  \
                - side: consumer\n    addresses: [0.0.0.0]\n    \
                providerAddresses: [\"10.0.0.1:2\"]\n    parameters:\n      disabled: true\n";
    let set = rules(&[(RuleKey::ServiceConfigurators(service_key()), text)]);
    let t = translated(&set);
    assert_eq!(members(&t, SERVICE), vec![(1, 100)]);
    let a = &t.cluster(SERVICE).unwrap().members[0];
    assert_eq!(a.configured.get("weight").map(String::as_str), Some("100"));
    assert_eq!(t.rules_in_force, vec![format!("{SERVICE}::.configurators")]);
}

#[test]
fn a_tag_rule_makes_a_cluster_per_tag_with_java_s_fallback() {
    let text = "configVersion: v3.0\nforce: false\nenabled: true\nruntime: true\nkey: greeter\n\
                tags:\n  - name: blue\n    addresses: [\"10.0.0.1:2\"]\n  - name: red\n    \
                addresses: [\"10.0.0.1:9\"]\n";
    let set = rules(&[(RuleKey::TagRule("greeter".into()), text)]);
    let t = translated(&set);
    assert_eq!(reaches(&t, "SayHello", &[(TAG_HEADER, "blue")]), vec![2]);
    // red has no provider: not forced, the untagged ones (A; B is blue now).
    assert_eq!(reaches(&t, "SayHello", &[(TAG_HEADER, "red")]), vec![1]);
    assert_eq!(reaches(&t, "SayHello", &[]), vec![1]);
    let forced = rules(&[(
        RuleKey::TagRule("greeter".into()),
        &text.replace("force: false", "force: true"),
    )]);
    let t = translated(&forced);
    assert_eq!(
        reaches(&t, "SayHello", &[(TAG_HEADER, "red")]),
        Vec::<u16>::new()
    );
    assert!(t.to_string().contains("every call fails"), "{t}");
}

#[test]
fn a_v30_condition_on_the_method_routes_that_path() {
    let text = "configVersion: v3.0\nscope: service\nkey: helloworld.Greeter\nenabled: true\n\
                conditions:\n  - 'method = SayHello => port = 2'\n";
    let set = rules(&[(RuleKey::ServiceConditions(service_key()), text)]);
    let t = translated(&set);
    assert_eq!(reaches(&t, "SayHello", &[]), vec![2]);
    assert_eq!(reaches(&t, "SayHelloAgain", &[]), vec![1, 2]);
    let routes = route_configuration(&t, Client::Grpc);
    let paths: Vec<&PathSpecifier> = routes.virtual_hosts[0]
        .routes
        .iter()
        .filter_map(|r| r.r#match.as_ref()?.path_specifier.as_ref())
        .collect();
    assert!(
        paths.contains(&&PathSpecifier::Path(format!("/{SERVICE}/SayHello"))),
        "{paths:?}"
    );
    let why = t
        .routes
        .iter()
        .find(|r| r.matchers.contains(&Matcher::Method("SayHello".into())))
        .unwrap()
        .why
        .join("; ");
    assert!(why.contains("condition-router"), "{why}");
}

#[test]
fn a_v31_condition_splits_calls_over_weighted_clusters() {
    let text = "configVersion: v3.1\nscope: service\nkey: helloworld.Greeter\nenabled: true\n\
                force: false\nconditions:\n  - from:\n      match: method=SayHello\n    to:\n      \
                - match: port=1\n        weight: 80\n      - match: port=2\n        weight: 20\n";
    let set = rules(&[(RuleKey::ServiceConditions(service_key()), text)]);
    let t = translated(&set);
    let split = routed(&t, "SayHello", &[]);
    let by_port: Vec<(Vec<u16>, u32)> = split
        .iter()
        .map(|(c, w)| (members(&t, c).into_iter().map(|(p, _)| p).collect(), *w))
        .collect();
    // Java's draw favours the first destination by one value in a hundred (measured 81.4%
    // to 82.1% of calls); the chain weighs as Java draws.
    assert_eq!(by_port, vec![(vec![1], 81), (vec![2], 19)]);
    let routes = route_configuration(&t, Client::Grpc);
    let weighted = routes.virtual_hosts[0].routes.iter().any(|r| {
        matches!(
            &r.action,
            Some(Action::Route(a)) if matches!(a.cluster_specifier, Some(ClusterSpecifier::WeightedClusters(_)))
        )
    });
    assert!(weighted, "{routes:?}");
}

#[test]
fn a_condition_on_an_attachment_routes_by_that_header() {
    let text = "configVersion: v3.0\nscope: service\nkey: helloworld.Greeter\nenabled: true\n\
                conditions:\n  - 'attachments[x-user] = vip => port = 1'\n";
    let set = rules(&[(RuleKey::ServiceConditions(service_key()), text)]);
    let t = translated(&set);
    assert_eq!(reaches(&t, "SayHello", &[("x-user", "vip")]), vec![1]);
    assert_eq!(reaches(&t, "SayHello", &[("x-user", "other")]), vec![1, 2]);
    assert_eq!(reaches(&t, "SayHello", &[]), vec![1, 2]);
    assert!(t.unexpressed.iter().all(|n| !n.contains("x-user")), "{t}");
}

#[test]
fn what_a_route_cannot_match_is_reported_never_approximated_silently() {
    let text = "configVersion: v3.0\nscope: service\nkey: helloworld.Greeter\nenabled: true\n\
                conditions:\n  - 'arguments[0] = 1 => port = 1'\n  - 'method = say* => port = 2'\n  \
                - 'application = shop => port != 3'\n";
    let set = rules(&[(RuleKey::ServiceConditions(service_key()), text)]);
    let t = translated(&set);
    let said = t.unexpressed.join("\n");
    assert!(said.contains("arguments[0]=1"), "{said}");
    assert!(said.contains("method=say*"), "{said}");
    assert_eq!(t.reads_consumer, vec!["application".to_owned()]);
    assert!(
        t.to_string()
            .contains("the rules read the consumer's application"),
        "{t}"
    );
}

#[test]
fn retries_and_timeout_become_the_route_s_retry_policy_and_deadline() {
    let text = "configVersion: v3.0\nscope: service\nkey: helloworld.Greeter\nenabled: true\n\
                configs:\n  - side: consumer\n    addresses: [0.0.0.0]\n    parameters:\n      \
                retries: 3\n      timeout: 1500\n      loadbalance: random\n";
    let set = rules(&[(RuleKey::ServiceConfigurators(service_key()), text)]);
    let t = translated(&set);
    let last = t.routes.last().unwrap();
    assert_eq!(last.policy.retries, 3);
    assert_eq!(
        last.policy.timeout,
        Some(std::time::Duration::from_millis(1500))
    );
    for (client, retry_on) in [
        (Client::Grpc, "unavailable"),
        (Client::Envoy, "unavailable,connect-failure,refused-stream"),
    ] {
        let routes = route_configuration(&t, client);
        let Some(Action::Route(action)) = &routes.virtual_hosts[0].routes.last().unwrap().action
        else {
            panic!("a route action")
        };
        let policy = action.retry_policy.as_ref().unwrap();
        assert_eq!(policy.retry_on, retry_on);
        assert_eq!(policy.num_retries.as_ref().unwrap().value, 3);
        let max = action.max_stream_duration.as_ref().unwrap();
        assert_eq!(max.max_stream_duration.as_ref().unwrap().nanos, 500_000_000);
        assert_eq!(action.timeout.as_ref().unwrap().seconds, 1);
    }
    assert!(
        t.unexpressed
            .iter()
            .any(|n| n.contains("loadbalance random")),
        "{t}"
    );
}

#[test]
fn weights_are_sent_as_each_client_honours_them() {
    let t = translated(&RuleSet::none());
    let plan = t.cluster(SERVICE).unwrap();
    // gRPC weighs localities: one per provider, of its weight.
    let grpc = load_assignment(plan, Client::Grpc);
    let localities: Vec<u32> = grpc
        .endpoints
        .iter()
        .map(|l| l.load_balancing_weight.as_ref().unwrap().value)
        .collect();
    assert_eq!(localities, vec![300, 100]);
    // Envoy weighs endpoints in one locality, least request (Introspect's p2c).
    let envoy = load_assignment(plan, Client::Envoy);
    assert_eq!(envoy.endpoints.len(), 1);
    assert_eq!(envoy.endpoints[0].lb_endpoints.len(), 2);
    assert_eq!(
        cluster(&t, plan, Client::Envoy).lb_policy,
        LbPolicy::LeastRequest as i32
    );
    assert_eq!(
        cluster(&t, plan, Client::Grpc).lb_policy,
        LbPolicy::RoundRobin as i32
    );
    let outliers = cluster(&t, plan, Client::Grpc).outlier_detection.unwrap();
    assert_eq!(outliers.failure_percentage_threshold.unwrap().value, 20);
}

#[test]
fn a_rule_change_changes_the_translation_and_only_what_it_touches() {
    let before = translated(&RuleSet::none());
    let text = "configVersion: v3.0\nscope: service\nkey: helloworld.Greeter\nenabled: true\n\
                conditions:\n  - '=> port != 1'\n";
    let set = rules(&[(RuleKey::ServiceConditions(service_key()), text)]);
    let after = translated(&set);
    assert_ne!(before, after);
    assert_eq!(reaches(&after, "SayHello", &[]), vec![2]);
    // The tagged cluster is untouched.
    let gray = |t: &Translation| match routed(t, "SayHello", &[(TAG_HEADER, "gray")]) {
        [(c, _)] => t.cluster(c).cloned(),
        _ => None,
    };
    assert_eq!(gray(&before), gray(&after));
}

#[test]
fn only_grpc_protocols_with_protobuf_are_callable() {
    assert!(grpc_callable(&provider(1, "tri", &[])));
    assert!(grpc_callable(&provider(
        1,
        "GRPC",
        &[("serialization", "protobuf")]
    )));
    assert!(!grpc_callable(&provider(
        1,
        "tri",
        &[("serialization", "hessian2")]
    )));
    assert!(!grpc_callable(&provider(1, "dubbo", &[])));
    assert!(!grpc_callable(&provider(1, "rest", &[])));
}

#[test]
fn a_client_that_says_who_it_is_is_routed_as_it_says() {
    use crate::node::NodeFacts;

    let text = "configVersion: v3.0\nscope: service\nkey: helloworld.Greeter\nenabled: true\n\
                conditions:\n  - 'application = web => port = 2'\n  - 'region = hz => port = 1'\n";
    let set = rules(&[(RuleKey::ServiceConditions(service_key()), text)]);
    let base = ConsumerIdentity::new(Some("shop".into()), Some("10.0.0.9".into()));
    let as_node = |facts: &NodeFacts| {
        translate(&Input {
            service: SERVICE,
            endpoints: &fleet(),
            rules: &set,
            consumer: &facts.apply(&base),
            outliers: &HealthOptions::default(),
            now_ms: 0,
        })
    };
    let server = as_node(&NodeFacts::default());
    assert_eq!(reaches(&server, "SayHello", &[]), vec![1, 2]);
    let web = NodeFacts {
        app: Some("web".into()),
        ..NodeFacts::default()
    };
    assert_eq!(reaches(&as_node(&web), "SayHello", &[]), vec![2]);
    let in_hz = NodeFacts {
        params: [("region".to_owned(), "hz".to_owned())].into(),
        ..NodeFacts::default()
    };
    let hz = as_node(&in_hz);
    assert_eq!(reaches(&hz, "SayHello", &[]), vec![1]);
    assert!(
        hz.to_string().contains("routed as the consumer: app shop"),
        "{hz}"
    );
}

#[test]
fn hostile_rule_values_are_reported_and_weights_fit_what_clients_take() {
    let text = "configVersion: v3.0\nscope: service\nkey: helloworld.Greeter\nenabled: true\n\
                conditions:\n  - 'attachments[x@y] = 1 => port = 1'\n  \
                - 'attachments[grpc-timeout] = 1 => port = 1'\n  - 'method = a/b => port = 2'\n";
    let set = rules(&[(RuleKey::ServiceConditions(service_key()), text)]);
    let t = translated(&set);
    let said = t.unexpressed.join("\n");
    assert!(said.contains("\"x@y\""), "{said}");
    assert!(said.contains("\"grpc-timeout\""), "{said}");
    assert!(
        said.contains("method values no route can match (\"a/b\")"),
        "{said}"
    );
    let headers: Vec<&Matcher> = t.routes.iter().flat_map(|r| &r.matchers).collect();
    assert!(
        headers.iter().all(|m| !matches!(m, Matcher::Header(n, _) | Matcher::Absent(n) if n == "x@y" || n == "grpc-timeout")),
        "{t}"
    );
    // Weights summing past u32 are scaled down, none to 0.
    let heavy = vec![
        provider(1, "tri", &[("weight", "2147483647")]),
        provider(2, "tri", &[("weight", "2147483647")]),
        provider(3, "tri", &[("weight", "2147483647")]),
        provider(4, "tri", &[("weight", "1")]),
    ];
    let t = translate_at(&heavy, &RuleSet::none(), 0);
    let weights: Vec<u32> = members(&t, SERVICE).into_iter().map(|(_, w)| w).collect();
    let sum: u64 = weights.iter().map(|w| u64::from(*w)).sum();
    assert!(sum <= u64::from(u32::MAX), "{weights:?}");
    assert!(weights.iter().all(|w| *w >= 1), "{weights:?}");
    assert_eq!(weights[0], weights[1]);
}

#[test]
fn many_values_are_capped_and_said() {
    let conditions: String = (0..100)
        .map(|i| format!("  - 'method = m{i} => port = 1'\n"))
        .collect();
    let text = format!(
        "configVersion: v3.0\nscope: service\nkey: helloworld.Greeter\nenabled: true\nconditions:\n{conditions}"
    );
    let set = rules(&[(RuleKey::ServiceConditions(service_key()), text.as_str())]);
    let t = translated(&set);
    assert!(
        t.routes.len() <= super::translate::MAX_ROUTES * 2,
        "{}",
        t.routes.len()
    );
    assert!(
        t.unexpressed
            .iter()
            .any(|n| n.contains("method: 100 values named")),
        "{:?}",
        t.unexpressed
    );
}
