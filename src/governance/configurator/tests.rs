//! The configurators' tests: documents as Java's admins write them, applied on both sides.

use std::collections::BTreeMap;

use super::{Configurators, configure_for_consumer, configure_for_provider};
use crate::error::Error;
use crate::governance::Governed;
use crate::governance::facts::ProviderFacts;
use crate::governance::refusal::refusal;

fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn provider<'a>(
    host: &'a str,
    port: u16,
    params: &'a BTreeMap<String, String>,
) -> ProviderFacts<'a> {
    ProviderFacts {
        host,
        port,
        protocol: "tri",
        app: "shop-orders",
        interface: "shop.OrderService",
        params,
    }
}

fn doc(key: &str, yaml: &str) -> Configurators {
    Configurators::parse(key, yaml).unwrap()
}

/// What a consumer (shop-web on 10.0.1.1) sees of a provider at `host:20880`.
fn seen(
    doc: &Configurators,
    host: &str,
    base: &BTreeMap<String, String>,
) -> Option<BTreeMap<String, String>> {
    doc.apply_for_consumer("shop-web", "10.0.1.1", &provider(host, 20880, base))
}

/// As Java admin 0.6 writes an application's dynamic config.
const ADMIN_06_APP: &str = "\
configVersion: v2.7
scope: application
key: shop-web
enabled: true
configs:
  - addresses: [0.0.0.0]
    side: consumer
    parameters:
      timeout: 3000
      loadbalance: leastactive
  - addresses: [10.0.1.1]
    providerAddresses: [\"10.0.0.7:20880\"]
    side: consumer
    parameters:
      weight: 200
      dubbo.tag: gray
      disabled: true
      enabled: false
";

#[test]
fn an_application_document_applies_to_its_consumers_view_of_providers() {
    let d = doc("shop-web.configurators", ADMIN_06_APP);
    assert_eq!(d.key(), "shop-web.configurators");
    assert_eq!(d.len(), 2);
    assert!(!d.is_empty());
    let base = params(&[("timeout", "1000"), ("version", "1.0")]);
    let other = seen(&d, "10.0.0.8", &base).unwrap();
    assert_eq!(other["timeout"], "3000");
    assert_eq!(other["loadbalance"], "leastactive");
    assert_eq!(other["version"], "1.0");
    assert!(!other.contains_key("weight"));
    assert!(!other.contains_key("category") && !other.contains_key("configVersion"));
    let target = seen(&d, "10.0.0.7", &base).unwrap();
    assert_eq!(target["weight"], "200");
    assert_eq!(target["dubbo.tag"], "gray");
    assert_eq!(target["disabled"], "true");
    assert_eq!(target["providerAddresses"], "10.0.0.7:20880");
    assert!(
        !target.contains_key("enabled"),
        "enabled is the rule's own switch"
    );
    // Another consumer host: only the 0.0.0.0 item.
    let elsewhere = d
        .apply_for_consumer("shop-web", "10.0.1.2", &provider("10.0.0.7", 20880, &base))
        .unwrap();
    assert!(!elsewhere.contains_key("weight"));
    // Another consumer application: an application document is its key's alone.
    assert_eq!(
        d.apply_for_consumer(
            "shop-admin",
            "10.0.1.1",
            &provider("10.0.0.7", 20880, &base)
        ),
        None
    );
    // The whole document disabled.
    let off = doc(
        "k",
        &ADMIN_06_APP.replace("enabled: true", "enabled: false"),
    );
    assert_eq!(seen(&off, "10.0.0.7", &base), None);
}

#[test]
fn specific_hosts_apply_after_every_host_and_priorities_order_the_rest() {
    let d = doc(
        "k",
        "\
scope: application
key: shop-web
configs:
  - addresses: [10.0.1.1]
    side: consumer
    parameters: {timeout: specific}
  - side: consumer
    parameters: {timeout: any, priority: 2}
  - side: consumer
    parameters: {timeout: first, priority: 1}
",
    );
    let seen = seen(&d, "10.0.0.7", &BTreeMap::new()).unwrap();
    assert_eq!(seen["timeout"], "specific");
    let no_specific = doc(
        "k",
        "scope: application\nkey: shop-web\nconfigs:\n  - {side: consumer, parameters: {timeout: b, priority: 2}}\n  - {side: consumer, parameters: {timeout: a, priority: 1}}\n",
    );
    assert_eq!(
        no_specific
            .apply_for_consumer("shop-web", "h", &provider("p", 1, &BTreeMap::new()))
            .unwrap()["timeout"],
        "b",
        "priority 2 applies last"
    );
}

/// As the admins write a service's dynamic config (service scope).
const SERVICE: &str = "\
configVersion: v2.7
scope: service
key: shop.OrderService
enabled: true
configs:
  - side: consumer
    applications: [shop-web, shop-app]
    parameters: {timeout: 5000}
  - side: consumer
    addresses: [10.0.1.9]
    parameters: {retries: 0}
  - side: provider
    addresses: [\"10.0.0.7:20880\"]
    parameters: {weight: 50}
";

#[test]
fn a_service_document_narrows_by_application_service_and_address() {
    let d = doc("shop.OrderService::.configurators", SERVICE);
    let base = BTreeMap::new();
    assert_eq!(
        seen(&d, "10.0.0.7", &base).unwrap(),
        params(&[("timeout", "5000")])
    );
    assert_eq!(
        d.apply_for_consumer(
            "shop-admin",
            "10.0.1.1",
            &provider("10.0.0.7", 20880, &base)
        ),
        None,
        "not one of its applications"
    );
    // Another service: the document's key does not name it.
    let other = ProviderFacts {
        interface: "shop.PayService",
        ..provider("10.0.0.7", 20880, &base)
    };
    assert_eq!(d.apply_for_consumer("shop-web", "10.0.1.1", &other), None);
    // A versioned provider is another service key.
    let versioned = params(&[("version", "1.0")]);
    assert_eq!(seen(&d, "10.0.0.7", &versioned), None);
    let with_version = doc(
        "k",
        "key: g1/shop.OrderService:1.0\nconfigs: [{side: consumer, parameters: {timeout: 1}}]",
    );
    assert_eq!(
        seen(&with_version, "10.0.0.7", &versioned),
        None,
        "and its group"
    );
    let grouped = params(&[("version", "1.0"), ("group", "g1")]);
    assert_eq!(
        seen(&with_version, "10.0.0.7", &grouped).unwrap()["timeout"],
        "1"
    );
}

#[test]
fn provider_side_items_apply_to_the_provider_itself() {
    let d = doc("k", SERVICE);
    let mut mine = params(&[("weight", "100")]);
    assert!(d.apply_for_provider(
        "shop-orders",
        "10.0.0.7",
        20880,
        "shop.OrderService",
        &mut mine
    ));
    assert_eq!(mine["weight"], "50");
    assert_eq!(mine["providerAddresses"], "10.0.0.7:20880");
    let mut other_port = params(&[("weight", "100")]);
    assert!(!d.apply_for_provider(
        "shop-orders",
        "10.0.0.7",
        20881,
        "shop.OrderService",
        &mut other_port
    ));
    assert_eq!(other_port["weight"], "100");
    let mut other_host = BTreeMap::new();
    assert!(!d.apply_for_provider(
        "shop-orders",
        "10.0.0.8",
        20880,
        "shop.OrderService",
        &mut other_host
    ));
    // Consumer-side items never apply to providers, nor provider-side ones to consumers.
    let base = BTreeMap::new();
    assert!(!seen(&d, "10.0.0.7", &base).unwrap().contains_key("weight"));
    // Every provider, any port.
    let all = doc(
        "k",
        "scope: application\nkey: shop-orders\nconfigs: [{side: provider, parameters: {warmup: 0}}]",
    );
    let mut p = BTreeMap::new();
    assert!(all.apply_for_provider("shop-orders", "10.9.9.9", 1, "x.Y", &mut p));
    assert_eq!(p["warmup"], "0");
    assert!(!all.apply_for_provider("shop-other", "10.9.9.9", 1, "x.Y", &mut p));
}

#[test]
fn provider_addresses_match_as_java_compares_them() {
    let base = BTreeMap::new();
    let with = |list: &str| {
        doc(
            "k",
            &format!(
                "scope: application\nkey: shop-web\nconfigs: [{{side: consumer, providerAddresses: {list}, parameters: {{x: y}}}}]"
            ),
        )
    };
    for (list, applies) in [
        ("['10.0.0.7:20880']", true),
        ("['10.0.0.7']", true),
        ("['0.0.0.0']", true),
        ("['0.0.0.0:*']", true),
        ("['0.0.0.0:20880']", true),
        ("['0.0.0.0:20881']", false),
        ("['10.0.0.7:20881']", false),
        ("['10.0.0.*']", false),
        ("['10.0.0.8', '10.0.0.7:20880']", true),
        ("[]", true),
    ] {
        assert_eq!(
            seen(&with(list), "10.0.0.7", &base).is_some(),
            applies,
            "{list}"
        );
    }
}

#[test]
fn an_items_enabled_counts_only_with_a_type() {
    let base = BTreeMap::new();
    let general = doc(
        "k",
        "scope: application\nkey: shop-web\nconfigs: [{side: consumer, enabled: false, parameters: {x: y}}]",
    );
    assert!(
        seen(&general, "10.0.0.7", &base).is_some(),
        "the document's enabled decides"
    );
    let typed_on = doc(
        "k",
        "scope: application\nkey: shop-web\nconfigs: [{type: weight, side: consumer, enabled: true, parameters: {weight: 1}}]",
    );
    assert_eq!(seen(&typed_on, "10.0.0.7", &base).unwrap()["weight"], "1");
    // (document, why it applies to no consumer)
    let not_applied = [
        (
            "scope: application\nkey: shop-web\nconfigs: [{type: weight, side: consumer, enabled: false, parameters: {weight: 1}}]",
            "a typed item switched off",
        ),
        (
            "scope: application\nkey: shop-web\nconfigs: [{type: weight, side: consumer, parameters: {weight: 1}}]",
            "absent reads as false",
        ),
        (
            "scope: application\nkey: shop-web\nconfigs: [{parameters: {x: y}}]",
            "no side never applies",
        ),
    ];
    for (yaml, why) in not_applied {
        assert_eq!(seen(&doc("k", yaml), "10.0.0.7", &base), None, "{why}");
    }
}

#[test]
fn tilde_conditions_before_v3() {
    let d = doc(
        "k",
        "scope: application\nkey: shop-web\nconfigs: [{side: consumer, parameters: {'~env': gray, timeout: 1}}]",
    );
    assert_eq!(seen(&d, "10.0.0.7", &params(&[("env", "prod")])), None);
    let gray = seen(&d, "10.0.0.7", &params(&[("env", "gray")])).unwrap();
    assert_eq!(gray["timeout"], "1");
    assert!(!gray.contains_key("~env"));
}

/// As the new admin writes a v3.0 document with a match block.
const V3: &str = "\
configVersion: v3.0
scope: application
key: shop-web
configs:
  - side: consumer
    match:
      address: {cird: 10.0.1.0/24}
      providerAddress: {wildcard: '10.0.0.*'}
      service: {oneof: [{exact: shop.OrderService}, {prefix: shop.Pay}]}
      app: {oneof: [{exact: shop-web}]}
      param:
        - key: env
          value: {exact: gray}
    parameters: {timeout: 9}
";

#[test]
fn v3_matches_all_hold() {
    let d = doc("k", V3);
    let gray = params(&[("env", "gray")]);
    assert_eq!(seen(&d, "10.0.0.7", &gray).unwrap()["timeout"], "9");
    assert_eq!(
        seen(&d, "10.0.0.7", &params(&[("env", "prod")])),
        None,
        "param"
    );
    assert_eq!(seen(&d, "10.0.9.7", &gray), None, "providerAddress");
    assert_eq!(
        d.apply_for_consumer("shop-web", "10.0.2.1", &provider("10.0.0.7", 20880, &gray)),
        None,
        "address is the consumer's host"
    );
    let pay = ProviderFacts {
        interface: "shop.PayService",
        ..provider("10.0.0.7", 20880, &gray)
    };
    assert!(d.apply_for_consumer("shop-web", "10.0.1.1", &pay).is_some());
    let ship = ProviderFacts {
        interface: "shop.ShipService",
        ..provider("10.0.0.7", 20880, &gray)
    };
    assert_eq!(
        d.apply_for_consumer("shop-web", "10.0.1.1", &ship),
        None,
        "service"
    );
    // The same match ignored before v3.0.
    let v27 = doc("k", &V3.replace("v3.0", "v2.7"));
    assert!(seen(&v27, "10.0.9.7", &params(&[])).is_some());
}

#[test]
fn documents_compose_in_order_and_later_items_see_earlier_ones() {
    let app = doc(
        "shop-web.configurators",
        "scope: application\nkey: shop-web\nconfigs: [{side: consumer, parameters: {timeout: 1, env: gray}}]",
    );
    let service = doc(
        "shop.OrderService::.configurators",
        "configVersion: v3.0\nkey: shop.OrderService\nconfigs: [{side: consumer, match: {param: [{key: env, value: {exact: gray}}]}, parameters: {timeout: 2}}]",
    );
    let base = BTreeMap::new();
    let p = provider("10.0.0.7", 20880, &base);
    let both = configure_for_consumer(&[&app, &service], "shop-web", "10.0.1.1", &p).unwrap();
    assert_eq!(both["timeout"], "2", "the service document applies last");
    assert_eq!(
        configure_for_consumer(&[&service], "shop-web", "10.0.1.1", &p),
        None
    );
    assert_eq!(
        configure_for_consumer(&[], "shop-web", "10.0.1.1", &p),
        None
    );
    let mut own = BTreeMap::new();
    assert!(!configure_for_provider(
        &[&app, &service],
        "shop-orders",
        "10.0.0.7",
        20880,
        "shop.OrderService",
        &mut own
    ));
    assert!(own.is_empty());
}

#[test]
fn empty_values_change_nothing_a_consumer_sees() {
    let d = doc(
        "k",
        "scope: application\nkey: shop-web\nconfigs: [{side: consumer, parameters: {timeout: '', weight: 3}}]",
    );
    let seen = seen(&d, "10.0.0.7", &params(&[("timeout", "7")])).unwrap();
    assert_eq!(seen["timeout"], "7");
    assert_eq!(seen["weight"], "3");
    let provider_side = doc(
        "k",
        "scope: application\nkey: shop-orders\nconfigs: [{side: provider, parameters: {timeout: ''}}]",
    );
    let mut own = params(&[("timeout", "7")]);
    assert!(provider_side.apply_for_provider("shop-orders", "h", 1, "i", &mut own));
    assert_eq!(own["timeout"], "");
}

#[test]
fn security_and_condition_keys_are_never_applied() {
    let d = doc(
        "k",
        "scope: application\nkey: shop-web\nconfigs: [{side: consumer, parameters: {router: x, rule: y, runtime: z, type: t, accesslog.fixed.path: p, check: c, dynamic: d, interfaces: i, compatible_config: c, w: 1}}]",
    );
    let seen_params = seen(&d, "10.0.0.7", &BTreeMap::new()).unwrap();
    assert_eq!(seen_params, params(&[("w", "1")]));
    // Condition keys among the parameters become conditions, as they do in Java's URL:
    // a version makes the item's service `*:2.0`, which names no provider.
    let narrowed = doc(
        "k",
        "scope: application\nkey: shop-web\nconfigs: [{side: consumer, parameters: {version: '2.0', w: 1}}]",
    );
    assert_eq!(seen(&narrowed, "10.0.0.7", &BTreeMap::new()), None);
    let v2 = params(&[("version", "2.0")]);
    assert_eq!(seen(&narrowed, "10.0.0.7", &v2), None);
    let for_app = doc(
        "k",
        "key: shop.OrderService\nconfigs: [{side: consumer, parameters: {application: shop-app, w: 1}}]",
    );
    assert_eq!(seen(&for_app, "10.0.0.7", &BTreeMap::new()), None);
    let for_web = doc(
        "k",
        "key: shop.OrderService\nconfigs: [{side: consumer, parameters: {application: shop-web, w: 1}}]",
    );
    assert_eq!(
        seen(&for_web, "10.0.0.7", &BTreeMap::new()).unwrap()["w"],
        "1"
    );
}

#[test]
fn malformed_documents_are_refused_as_rule_errors() {
    let refused = [
        "",
        "configs: [",
        "- a",
        "key: k",
        "key: k\nconfigs: {}",
        "key: k\nconfigs: []",
        "key: k\nconfigs: [7]",
        "key: k\nconfigs: [{side: consumer}]",
        "key: k\nconfigs: [{side: consumer, parameters: {}}]",
        "key: k\nconfigs: [{side: consumer, parameters: [timeout]}]",
        "key: k\nconfigs: [{side: consumer, parameters: {timeout: [1]}}]",
        "key: k\nconfigs: [{side: consumer, parameters: {timeout: ~}}]",
        "configs: [{side: consumer, parameters: {a: b}}]",
        "key: ''\nconfigs: [{side: consumer, parameters: {a: b}}]",
        "configVersion: v9\nkey: k\nconfigs: [{side: consumer, parameters: {a: b}}]",
        "configVersion: 2.7\nkey: k\nconfigs: [{side: consumer, parameters: {a: b}}]",
        "key: [k]\nconfigs: [{side: consumer, parameters: {a: b}}]",
        "key: k\nconfigs: [{side: 1, parameters: {a: b}}]",
        "key: k\nconfigs: [{type: 1, parameters: {a: b}}]",
        "key: k\nconfigs: [{addresses: ['10.0.0.1:http'], parameters: {a: b}}]",
        "scope: application\nkey: k\nconfigs: [{services: [''], parameters: {a: b}}]",
        "key: k\nconfigs: [{parameters: {a: b, priority: high}}]",
        "key: k\nconfigs: [{match: 1, parameters: {a: b}}]",
        "key: k\nconfigs: [{match: {address: 10.0.0.1}, parameters: {a: b}}]",
        "key: k\nconfigs: [{match: {service: {exact: a}}, parameters: {a: b}}]",
        "key: k\nconfigs: [{match: {param: [{key: a, value: {regex: '(?=x)'}}]}, parameters: {a: b}}]",
        "configVersion: v3.2\nkey: k\nconfigs: [{side: consumer, parameters: {a: b}}]",
        "[\"override://0.0.0.0:http/shop.OrderService?timeout=1\"]",
        "[\"route://0.0.0.0/shop.OrderService?timeout=1\"]",
        "[]",
    ];
    for yaml in refused {
        refusal(
            Configurators::parse,
            "shop.OrderService::.configurators",
            yaml,
        );
    }
    let big = format!(
        "key: k\nconfigs: [{{parameters: {{a: \"{}\"}}}}]",
        "x".repeat(MAX)
    );
    assert!(matches!(
        Configurators::parse("k", &big),
        Err(Error::Rule { .. })
    ));
}

const MAX: usize = super::super::MAX_RULE_BYTES;

#[test]
fn hostile_documents_never_panic() {
    let hostile = [
        "key: \"\\0/é:ü\"\nconfigs: [{side: consumer, addresses: ['[::1]:80', '::1', 'é'], providerAddresses: [',', ''], parameters: {'': '', '~': x, '~~': y, 'é': 'ü'}}]",
        "scope: application\nkey: k\nconfigs: [{side: consumer, services: ['/', ':', '/:', 'a/b:c/d'], applications: ['*'], parameters: {x: y}}]",
        "configVersion: v3.0\nkey: k\nconfigs: [{side: consumer, match: {address: {cird: '::/-1'}, providerAddress: {cird: '1.1.1.1/200'}, app: {oneof: []}, param: [{}, {key: x}]}, parameters: {x: y}}]",
        "configVersion: v3.0\nkey: k\nconfigs: [{side: provider, match: {address: {cird: '1-2-3.*.*.*'}}, parameters: {priority: '-2147483648'}}]",
    ];
    for yaml in hostile {
        let d = Configurators::parse("k", yaml).unwrap();
        let base = params(&[("x", "z")]);
        for host in ["10.0.0.7", "::1", "", "é", "[::1]"] {
            let _ = d.apply_for_consumer("k", host, &provider(host, 0, &base));
            let mut own = base.clone();
            let _ = d.apply_for_provider("k", host, 65535, "k", &mut own);
        }
    }
}

#[test]
fn the_document_shows_as_written() {
    let text = "configVersion: v3.0\nscope: application\nkey: shop-web\nenabled: false\nconfigs:\n  - side: consumer\n    addresses: [10.0.0.9]\n    providerAddresses: ['10.0.0.7:20880']\n    services: [helloworld.Greeter]\n    parameters: {timeout: 3000, weight: 200}\n    match:\n      param: [{key: env, value: {exact: gray}}]\n  - side: provider\n    type: special\n    enabled: true\n    parameters: {disabled: true}\n";
    let doc = Configurators::parse("shop-web.configurators", text).unwrap();
    assert_eq!(doc.config_version(), Some("v3.0"));
    assert_eq!(doc.scope(), Some("application"));
    assert_eq!(doc.rule_key(), Some("shop-web"));
    assert!(!doc.enabled());
    let [first, second] = doc.configs() else {
        panic!("two items: {:?}", doc.configs());
    };
    assert_eq!(first.side.as_deref(), Some("consumer"));
    assert_eq!(first.addresses, ["10.0.0.9"]);
    assert_eq!(first.provider_addresses, ["10.0.0.7:20880"]);
    assert_eq!(first.services, ["helloworld.Greeter"]);
    assert_eq!(
        first.parameters,
        [
            ("timeout".to_owned(), "3000".to_owned()),
            ("weight".to_owned(), "200".to_owned())
        ]
    );
    assert_eq!(
        first.match_text.as_deref(),
        Some("{param: [{key: env, value: {exact: gray}}]}")
    );
    assert_eq!(second.kind.as_deref(), Some("special"));
    assert_eq!(second.enabled, Some(true));
    assert_eq!(second.match_text, None);
}
