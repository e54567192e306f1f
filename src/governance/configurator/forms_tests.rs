//! The configurator forms Java 3.3 reads beyond the plain v2.7/v3.0 document: other
//! versions, addresses it can never apply, the legacy list of override URLs, a `regex`
//! match, and a plain `weight` beside a provider's `{method}.weight`.

use std::collections::BTreeMap;

use super::Configurators;
use crate::governance::facts::ProviderFacts;
use crate::governance::refusal::refusal;
use crate::governance::{Governed, RouteParams};

fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The weight a consumer (shop-web on 10.0.1.1) gives each of four providers
/// (10.0.0.1..4:20880, publishing `base`) for `method` under `yaml`.
fn weights(yaml: &str, base: &[(&str, &str)], method: Option<&str>) -> Vec<i32> {
    let doc = Configurators::parse("shop.OrderService.configurators", yaml).unwrap();
    let base = params(base);
    (1..=4)
        .map(|i| {
            let host = format!("10.0.0.{i}");
            let provider = ProviderFacts {
                host: &host,
                port: 20880,
                protocol: "tri",
                app: "shop-orders",
                interface: "shop.OrderService",
                params: &base,
            };
            let seen = doc
                .apply_for_consumer("shop-web", "10.0.1.1", &provider)
                .unwrap_or_else(|| base.clone());
            RouteParams::from_params(&seen).weight_for(method)
        })
        .collect()
}

const P3_WEIGHT_400: &str = "\
configVersion: VERSION
scope: service
key: shop.OrderService
configs:
  - side: consumer
    providerAddresses: [\"10.0.0.3:20880\"]
    parameters: {weight: 400}
";

#[test]
fn every_version_up_to_v31_applies_as_java_applies_it() {
    for version in ["v2.7", "v3.0", "v3.0.1", "v3", "V3.0", "v3.1", "'3.0'"] {
        let yaml = P3_WEIGHT_400.replace("VERSION", version);
        assert_eq!(weights(&yaml, &[], None), [100, 100, 400, 100], "{version}");
    }
    for version in ["v3.2", "v4", "v9.9", "w1"] {
        let why = refusal(
            Configurators::parse,
            "k",
            &P3_WEIGHT_400.replace("VERSION", version),
        );
        assert!(why.contains("above v3.1"), "{version}: {why}");
    }
    let why = refusal(
        Configurators::parse,
        "k",
        &P3_WEIGHT_400.replace("VERSION", "3.0"),
    );
    assert!(why.contains("write configVersion: v3.0"), "{why}");
}

#[test]
fn only_v30_reads_the_match_case_sensitively() {
    let yaml = "\
configVersion: VERSION
key: shop.OrderService
configs:
  - side: consumer
    match: {providerAddress: {exact: \"10.0.0.4:20880\"}}
    parameters: {weight: 400}
";
    let v30 = weights(&yaml.replace("VERSION", "v3.0"), &[], None);
    assert_eq!(v30, [100, 100, 100, 400]);
    for version in ["V3.0", "v3.1"] {
        let all = weights(&yaml.replace("VERSION", version), &[], None);
        assert_eq!(
            all,
            [400, 400, 400, 400],
            "{version}: the match is not read"
        );
    }
}

#[test]
fn an_address_java_cannot_apply_drops_its_item_alone() {
    let yaml = "\
configVersion: v3.0
key: shop.OrderService
configs:
  - side: consumer
    addresses: [10.0.0.0/8]
    parameters: {weight: 900}
  - side: consumer
    providerAddresses: [\"10.0.0.4:20880\"]
    parameters: {weight: 400}
  - side: consumer
    addresses: ['', 'a/b', '10.0.1.1?x']
    parameters: {weight: 1}
";
    assert_eq!(weights(yaml, &[], None), [100, 100, 100, 400]);
    let doc = Configurators::parse("k", yaml).unwrap();
    let notes = doc.notes();
    assert_eq!(notes.len(), 4, "{notes:?}");
    assert!(
        notes[0].starts_with("item 1 dropped there") && notes[0].contains("a CIDR"),
        "{notes:?}"
    );
    assert!(notes[1..].iter().all(|n| n.starts_with("item 3 dropped")));
    assert_eq!(doc.configs().len(), 3, "shown as written");
    let bad_port = "key: k\nconfigs: [{addresses: ['10.0.0.1:http'], parameters: {a: b}}]";
    assert!(refusal(Configurators::parse, "k", bad_port).contains("not a number"));
}

#[test]
fn the_legacy_list_of_override_urls_applies_as_java_reads_it() {
    let list = r#"[
        "override://0.0.0.0/shop.OrderService?timeout=3000&anyhost=true",
        "override://10.0.0.2:20880/shop.OrderService?disabled=true",
        "override://10.0.1.1/shop.OrderService?weight=7",
        "override://0.0.0.0/other.Service?weight=5",
        "override://0.0.0.0/shop.OrderService?enabled=false&weight=9",
        "absent://0.0.0.0/shop.OrderService?loadbalance=random&timeout=1",
        "override://0.0.0.0/shop.OrderService?anyhost=true"
    ]"#;
    let doc = Configurators::parse("shop.OrderService.configurators", list).unwrap();
    assert_eq!(
        doc.len(),
        6,
        "a URL with no parameter but anyhost is skipped"
    );
    assert_eq!(doc.config_version(), None);
    let base = params(&[("loadbalance", "leastactive")]);
    let seen = |host: &str, port| {
        let provider = ProviderFacts {
            host,
            port,
            protocol: "tri",
            app: "shop-orders",
            interface: "shop.OrderService",
            params: &base,
        };
        doc.apply_for_consumer("shop-web", "10.0.1.1", &provider)
            .unwrap()
    };
    let p1 = seen("10.0.0.1", 20880);
    assert_eq!(
        p1["timeout"], "3000",
        "absent:// sets nothing already there"
    );
    assert_eq!(p1["loadbalance"], "leastactive");
    assert!(!p1.contains_key("anyhost") && !p1.contains_key("weight"));
    assert!(
        !p1.contains_key("disabled"),
        "the port-less host URL is not this one"
    );
    assert_eq!(seen("10.0.0.2", 20880)["disabled"], "true");
    assert!(
        !seen("10.0.0.2", 20881).contains_key("disabled"),
        "its port only"
    );
    let cleared = Configurators::parse("k", r#"["override://0.0.0.0/a?x=1", "empty://0.0.0.0/a"]"#);
    assert!(cleared.unwrap().is_empty(), "empty:// clears the list");
    assert!(Configurators::parse("k", "[\"x\"]").is_err());
}

#[test]
fn a_regex_match_decides_as_javas_matches() {
    let yaml = "\
configVersion: v3.0
key: shop.OrderService
configs:
  - side: consumer
    match: {param: [{key: env, value: {regex: 'gr[ae]y'}}]}
    parameters: {weight: 400}
";
    assert_eq!(weights(yaml, &[("env", "grey")], None), [400; 4]);
    assert_eq!(weights(yaml, &[("env", "greyer")], None), [100; 4]);
}

#[test]
fn a_plain_weight_leaves_a_methods_own_weight_in_force() {
    // Java's `URLParam.getMethodParameter`: `sayHello.weight` before `weight`.
    let yaml = P3_WEIGHT_400.replace("VERSION", "v3.0");
    let base = [("sayHello.weight", "50")];
    assert_eq!(weights(&yaml, &base, Some("sayHello")), [50, 50, 50, 50]);
    assert_eq!(weights(&yaml, &base, Some("other")), [100, 100, 400, 100]);
    let method = yaml.replace("{weight: 400}", "{sayHello.weight: 400}");
    assert_eq!(weights(&method, &base, Some("sayHello")), [50, 50, 400, 50]);
}
