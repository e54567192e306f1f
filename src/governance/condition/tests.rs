//! Rules as dubbo-admin (Java admin 0.6, the Go admin) and Dubbo's docs write them, parsed
//! and routed end to end.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::governance::refusal::refusal;
use crate::governance::{CallFacts, CallTag, Governed, MAX_RULE_BYTES, ProviderFacts};

mod consumer_url;

/// Owned data behind the borrowed facts.
struct World {
    params: Vec<BTreeMap<String, String>>,
    consumer: BTreeMap<String, String>,
    attachments: BTreeMap<String, String>,
    tag: CallTag,
}

const HOSTS: [(&str, u16); 4] = [
    ("10.0.0.1", 20880),
    ("10.0.0.2", 20881),
    ("10.0.0.3", 20880),
    ("10.0.0.4", 20882),
];

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

impl World {
    fn new() -> World {
        World {
            params: vec![
                map(&[("region", "hangzhou"), ("version", "v1"), ("env", "gray")]),
                map(&[("region", "beijing"), ("version", "v2")]),
                map(&[("region", "hangzhou"), ("version", "v2")]),
                map(&[("region", "shanghai"), ("version", "v1"), ("env", "prod")]),
            ],
            consumer: map(&[
                ("region", "hangzhou"),
                ("env", "gray"),
                ("dubbo.tag", "blue"),
            ]),
            attachments: map(&[("x-user", "vip"), ("x-level", "42")]),
            tag: CallTag::new("gray", false),
        }
    }

    fn providers(&self) -> Vec<ProviderFacts<'_>> {
        HOSTS
            .iter()
            .zip(&self.params)
            .map(|(&(host, port), params)| ProviderFacts {
                host,
                port,
                protocol: "tri",
                app: "greeter",
                interface: "org.apache.dubbo.samples.DemoService",
                params,
            })
            .collect()
    }

    fn call<'a>(&'a self, method: Option<&'a str>) -> CallFacts<'a> {
        CallFacts {
            consumer_app: "shop",
            consumer_host: "10.0.0.9",
            consumer_params: &self.consumer,
            method,
            attachments: &self.attachments,
            tag: &self.tag,
        }
    }

    fn route(&self, rule: &ConditionRule, method: &str) -> ConditionRoute {
        rule.route(&self.call(Some(method)), &self.providers(), &[0, 1, 2, 3])
    }
}

fn rule(yaml: &str) -> ConditionRule {
    match ConditionRule::parse("demo.condition-router", yaml) {
        Ok(rule) => rule,
        Err(e) => panic!("{e}\n{yaml}"),
    }
}

/// A v3.0 rule of `conditions`, forced or not.
fn v30(force: bool, conditions: &[&str]) -> ConditionRule {
    let mut yaml = format!(
        "configVersion: v3.0\nscope: service\nforce: {force}\nruntime: true\nenabled: true\n\
         key: org.apache.dubbo.samples.DemoService\nconditions:\n"
    );
    for c in conditions {
        yaml.push_str(&format!("  - '{}'\n", c.replace('\'', "''")));
    }
    rule(&yaml)
}

fn kept(route: ConditionRoute) -> Vec<usize> {
    match route {
        ConditionRoute::Kept { indices, .. } => indices,
        other => panic!("not kept: {other:?}"),
    }
}

fn unchanged(route: &ConditionRoute) -> bool {
    matches!(route, ConditionRoute::Unchanged { .. })
}

fn refused(yaml: &str) -> String {
    refusal(ConditionRule::parse, "demo.condition-router", yaml)
}

#[test]
fn the_admin_06_form_without_config_version() {
    let world = World::new();
    let rule = rule(
        "scope: service\nforce: true\nruntime: true\nenabled: true\n\
         key: org.apache.dubbo.samples.governance.api.DemoService\npriority: 2\n\
         conditions:\n  - method=sayHello => region=hangzhou\n  - method=sayHi => address=*:20881\n",
    );
    assert_eq!(rule.version(), ConditionVersion::V30);
    assert_eq!(rule.key(), "demo.condition-router");
    assert_eq!(
        rule.rule_key(),
        Some("org.apache.dubbo.samples.governance.api.DemoService")
    );
    assert_eq!(rule.scope(), Some("service"));
    assert!(rule.force() && rule.enabled() && rule.runtime());
    assert_eq!(rule.priority(), 2);
    assert_eq!(kept(world.route(&rule, "sayHello")), [0, 2]);
    assert_eq!(kept(world.route(&rule, "sayHi")), [1]);
    assert!(unchanged(&world.route(&rule, "other")));
    assert_eq!(
        rule.reads(),
        CallReads {
            method: true,
            exact: [(
                "method".to_owned(),
                ["sayHello".to_owned(), "sayHi".to_owned()].into()
            )]
            .into(),
            ..CallReads::default()
        }
    );
}

#[test]
fn what_a_rule_reads_names_its_exact_values_and_what_is_not_exact() {
    let rule = rule(
        "configVersion: v3.0\nscope: service\nkey: S\nenabled: true\nconditions:\n  \
         - 'method=a,b & attachments[X-User]!=vip => region=hz'\n  \
         - 'method=get* => region=bj'\n  - 'arguments[0]=1 & application=shop => region=sh'\n",
    );
    let reads = rule.reads();
    assert!(reads.method);
    assert_eq!(
        reads.exact["method"],
        ["a".to_owned(), "b".to_owned()].into()
    );
    assert_eq!(reads.exact["X-User"], ["vip".to_owned()].into());
    assert_eq!(
        reads.inexact,
        ["arguments[0]=1".to_owned(), "method=get*".to_owned()].into()
    );
    assert_eq!(reads.consumer, ["application".to_owned()].into());
}

#[test]
fn the_v30_form_as_the_go_admin_writes_it() {
    let world = World::new();
    let rule = rule(
        "configVersion: v3.0\nscope: application\nkey: shop\nenabled: true\nforce: false\n\
         runtime: true\nconditions:\n  - >\n    application=shop\n    =>\n    region=$region\n",
    );
    assert_eq!(rule.scope(), Some("application"));
    assert!(!rule.force());
    assert_eq!(
        kept(world.route(&rule, "any")),
        [0, 2],
        "$region is the consumer's"
    );
    assert_eq!(
        rule.reads(),
        CallReads {
            consumer: ["application".to_owned()].into(),
            ..CallReads::default()
        },
        "it reads no call, only who the consumer is"
    );
}

#[test]
fn the_v31_form_with_weighted_destinations() {
    let world = World::new();
    let rule = rule(
        "configVersion: v3.1\nscope: service\nkey: org.apache.dubbo.samples.CommentService\n\
         force: false\nruntime: true\nenabled: true\nconditions:\n\
         \x20 - from:\n      match: attachments[x-user]=vip\n    to:\n\
         \x20     - match: region=$region & version=v1\n\
         \x20     - match: region=$region & version=v2\n        weight: 200\n\
         \x20     - match: region=nowhere\n        weight: 300\n",
    );
    assert_eq!(rule.version(), ConditionVersion::V31);
    // The first weighs one more and the last reachable one less, as Java's draw.
    match world.route(&rule, "any") {
        ConditionRoute::Destinations { choices, .. } => {
            assert_eq!(choices, vec![(vec![0], 101), (vec![2], 199)]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(rule.reads().attachments.len(), 1);
    assert!(rule.reads().attachments.contains("x-user"));
}

#[test]
fn v31_edge_cases_as_java() {
    let world = World::new();
    let v31 = |force: bool, conditions: &str| {
        rule(&format!(
            "configVersion: V3.1\nforce: {force}\nconditions:\n{conditions}"
        ))
    };
    // No destination has a provider: all kept unless forced.
    let none = "  - from: {match: method=sayHello}\n    to: [{match: region=nowhere}]\n";
    assert!(unchanged(&world.route(&v31(false, none), "sayHello")));
    assert_eq!(
        kept(world.route(&v31(true, none), "sayHello")),
        Vec::<usize>::new()
    );
    // No `to`: the consumer is blacklisted, forced or not.
    let black = "  - from: {match: method=sayHello}\n";
    assert_eq!(
        kept(world.route(&v31(false, black), "sayHello")),
        Vec::<usize>::new()
    );
    // A blank destination keeps every provider; one destination is no draw.
    let all = "  - from: {match: ''}\n    to: [{match: ''}]\n";
    assert_eq!(kept(world.route(&v31(false, all), "x")), [0, 1, 2, 3]);
    // A last destination of weight 1 is never drawn by Java.
    let one = "  - to: [{match: region=hangzhou, weight: 5}, {match: region=beijing, weight: 1}]\n";
    assert_eq!(kept(world.route(&v31(false, one), "x")), [0, 2]);
    // Weights 0 or less are the default 100.
    let zero =
        "  - to: [{match: region=hangzhou, weight: 0}, {match: region=beijing, weight: -3}]\n";
    match world.route(&v31(false, zero), "x") {
        ConditionRoute::Destinations { choices, .. } => {
            assert_eq!(choices, vec![(vec![0, 2], 101), (vec![1], 99)]);
        }
        other => panic!("{other:?}"),
    }
    // `consumer.` is not stripped in v3.1: the key is read as written.
    let prefixed = "  - to: [{match: provider.region=hangzhou}]\n";
    assert!(unchanged(&world.route(&v31(false, prefixed), "x")));
}

#[test]
fn v31_draws_in_a_row_multiply() {
    let world = World::new();
    let rule = rule(
        "configVersion: v3.1\nconditions:\n\
         \x20 - to:\n      - {match: region=hangzhou, weight: 3}\n      - {match: version=v2, weight: 5}\n\
         \x20 - to:\n      - {match: version=v1, weight: 1}\n      - {match: version=v2, weight: 2}\n",
    );
    // First draw: {0,2} and {1,2} at 4:4. From {0,2}: {0} and {2} at 2:1; {1,2} stays.
    match world.route(&rule, "x") {
        ConditionRoute::Destinations { choices, .. } => {
            assert_eq!(choices, vec![(vec![0], 2), (vec![2], 1), (vec![1, 2], 3)]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn many_draws_of_huge_weights_do_not_overflow() {
    let world = World::new();
    let mut yaml = "configVersion: v3.1\nconditions:\n".to_owned();
    for _ in 0..12 {
        yaml.push_str(
            "  - to:\n      - {match: region=hangzhou, weight: 2147483647}\n      \
             - {match: version=v2, weight: 2147483600}\n",
        );
    }
    match world.route(&rule(&yaml), "x") {
        ConditionRoute::Destinations { choices, .. } => {
            assert!(choices.len() >= 2);
            assert!(choices.iter().all(|(_, w)| *w > 0));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn every_operator_of_the_grammar() {
    let world = World::new();
    // (condition, method, the providers it keeps; none: the call is left unchanged)
    let cases: [(&str, &str, Option<&[usize]>); 18] = [
        (
            "method = sayHello => region = hangzhou",
            "sayHello",
            Some(&[0, 2]),
        ),
        ("method = sayHello => region = hangzhou", "sayHi", None),
        (
            "method != sayHi => region != hangzhou",
            "sayHello",
            Some(&[1, 3]),
        ),
        (
            "method = sayHello,sayHi => region = beijing,shanghai",
            "sayHi",
            Some(&[1, 3]),
        ),
        ("method=say* => region=*hai", "sayHo", Some(&[3])),
        (
            "method=*Hello => host=10.0.0.*",
            "sayHello",
            Some(&[0, 1, 2, 3]),
        ),
        ("=> address=*:20880", "x", Some(&[0, 2])),
        ("=> port=20881", "x", Some(&[1])),
        ("=> region=hangzhou & version=v2", "x", Some(&[2])),
        ("=> region=hangzhou & region!=hangzhou", "x", None),
        // Consumer parameters, host and application on the when side.
        (
            "application=shop & host=10.0.0.* => env=gray",
            "x",
            Some(&[0]),
        ),
        ("application=other => env=gray", "x", None),
        // `dubbo.tag` on when is the consumer's own tag, not the request's.
        ("dubbo.tag=blue => env=prod", "x", Some(&[3])),
        // Prefixes are removed, as Java does.
        (
            "consumer.application=shop => provider.region=beijing",
            "x",
            Some(&[1]),
        ),
        // Attachments and ranges.
        ("attachments[x-user]=vip => version=v1", "x", Some(&[0, 3])),
        (
            "attachments[x-level]=1~50 => version=v1",
            "x",
            Some(&[0, 3]),
        ),
        ("attachments[x-level]=43~ => version=v1", "x", None),
        ("attachments[x-missing]!=a => version=v1", "x", None),
    ];
    for (condition, method, expected) in cases {
        let routed = world.route(&v30(false, &[condition]), method);
        match expected {
            Some(indices) => assert_eq!(kept(routed), indices, "{condition} on {method}"),
            None => assert!(unchanged(&routed), "{condition} on {method}"),
        }
    }
}

#[test]
fn empty_when_then_and_force() {
    let world = World::new();
    // An empty when matches every call; `true` too.
    assert_eq!(
        kept(world.route(&v30(false, &["region=beijing"]), "x")),
        [1]
    );
    assert_eq!(
        kept(world.route(&v30(false, &["true => region=beijing"]), "x")),
        [1]
    );
    // An empty then blacklists, forced or not.
    for c in ["method=x =>", "method=x => false"] {
        assert_eq!(
            kept(world.route(&v30(false, &[c]), "x")),
            Vec::<usize>::new(),
            "{c}"
        );
    }
    // A then nothing matches: all kept unless forced.
    let nothing = "=> region=nowhere";
    let route = world.route(&v30(false, &[nothing]), "x");
    match &route {
        ConditionRoute::Unchanged { why } => assert!(why.contains("not forced"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        kept(world.route(&v30(true, &[nothing]), "x")),
        Vec::<usize>::new()
    );
    // A then whose terms came out empty keeps nothing either (Java's empty map).
    assert!(unchanged(&world.route(&v30(false, &["=> &"]), "x")));
}

#[test]
fn conditions_apply_in_sequence() {
    let world = World::new();
    let rule = v30(
        false,
        &[
            "=> region=hangzhou,beijing",
            "method=sayHello => version=v2",
            "method=sayHi => version=v1",
            "=> region=nowhere",
        ],
    );
    assert_eq!(kept(world.route(&rule, "sayHello")), [1, 2]);
    assert_eq!(kept(world.route(&rule, "sayHi")), [0]);
    // Forced, the last condition empties everything; later ones see nothing.
    let forced = v30(true, &["=> region=nowhere", "=> region=hangzhou"]);
    assert_eq!(kept(world.route(&forced, "x")), Vec::<usize>::new());
}

#[test]
fn disabled_rules_do_nothing_and_are_not_parsed() {
    let world = World::new();
    let rule = rule("enabled: false\nconditions:\n  - 'a==b => c'\n");
    assert!(!rule.enabled());
    assert!(unchanged(&world.route(&rule, "x")));
    assert_eq!(rule.reads(), CallReads::default());
    // v3.1 conditions are parsed even when disabled, as Java's constructor does.
    refused("configVersion: v3.1\nenabled: false\nconditions:\n  - to: [{match: 'a==b'}]\n");
}

#[test]
fn arguments_cannot_be_evaluated() {
    let world = World::new();
    let route = world.route(&v30(false, &["arguments[0]=vip => region=beijing"]), "x");
    match route {
        ConditionRoute::NotApplicable { reason } => assert!(reason.contains("arguments[0]")),
        other => panic!("{other:?}"),
    }
    // Another term that is false decides without the argument.
    let rule = v30(
        false,
        &["method=sayHi & arguments[0]=vip => region=beijing"],
    );
    assert!(unchanged(&world.route(&rule, "sayHello")));
    assert!(matches!(
        world.route(&rule, "sayHi"),
        ConditionRoute::NotApplicable { .. }
    ));
    // A key Java does not read as an argument reads its placeholder value.
    assert!(unchanged(&world.route(
        &v30(false, &["arguments[x]=vip => region=beijing"]),
        "x"
    )));
    // On the provider side Java reads the placeholder too.
    assert_eq!(
        kept(world.route(&v30(false, &["=> arguments[0]!=vip"]), "x")),
        [0, 1, 2, 3]
    );
}

#[test]
fn no_method_means_no_match_on_method() {
    let world = World::new();
    let rule = v30(false, &["method=sayHello => region=beijing"]);
    let route = rule.route(&world.call(None), &world.providers(), &[0, 1, 2, 3]);
    assert!(unchanged(&route));
}

#[test]
fn input_is_respected() {
    let world = World::new();
    let rule = v30(false, &["=> region=hangzhou"]);
    let providers = world.providers();
    let call = world.call(Some("x"));
    assert_eq!(kept(rule.route(&call, &providers, &[2, 1])), [2]);
    assert_eq!(kept(rule.route(&call, &providers, &[2, 9, 0])), [2, 0]);
    assert!(unchanged(&rule.route(&call, &providers, &[])));
}

#[test]
fn malformed_and_hostile_documents_are_rule_errors() {
    assert!(refused("conditions: [").contains("not YAML"));
    refused("");
    refused("just a string");
    refused("- a list");
    assert!(refused("configVersion: v3.2\nconditions: ['=> a=b']").contains("configVersion"));
    refused("configVersion: 3.0\nconditions: ['=> a=b']");
    refused("key: 123\nconditions: ['=> a=b']");
    refused("scope: [a]\nconditions: ['=> a=b']");
    refused("priority: high\nconditions: ['=> a=b']");
    refused("priority: 1.5\nconditions: ['=> a=b']");
    refused("conditions: '=> a=b'");
    refused("conditions: []");
    refused("force: true");
    refused("valid: false\nconditions: ['=> a=b']");
    refused("conditions: ['=> a=b', {from: x}]");
    refused("conditions: ['=> a=b', '   ']");
    refused("conditions: ['a==b => c=d']");
    refused("configVersion: v3.1\nconditions: ['=> a=b']");
    refused("configVersion: v3.1\nconditions: {from: {match: a=b}}");
    refused("configVersion: v3.1\nconditions:\n  - to: [{match: a=b, weight: 99999999999}]\n");

    // Over the size bound, before any parsing.
    let big = format!("conditions:\n  - '=> a={}'\n", "x".repeat(MAX_RULE_BYTES));
    assert!(refused(&big).contains("over the limit"));
    // Deeply nested YAML within the bound.
    let deep = format!("conditions: {}{}", "[".repeat(20_000), "]".repeat(20_000));
    refused(&deep);
    let deep = format!(
        "a: {}x{}\nconditions: ['=> a=b']",
        "{b: ".repeat(10_000),
        "}".repeat(10_000)
    );
    refused(&deep);
}

#[test]
fn hostile_strings_parse_or_refuse_without_panicking() {
    let world = World::new();
    // A very long condition, just under the bound.
    let long = format!(
        "conditions:\n  - '{} => region=hangzhou'\n",
        "method=a&".repeat(6_000)
    );
    let long = rule(&long);
    assert!(unchanged(&world.route(&long, "b")));
    // Only separators: Java's tokeniser finds no term, so the then keeps nothing.
    let separators = rule(&format!("conditions:\n  - '{}'\n", "=!&,".repeat(15_000)));
    assert!(unchanged(&world.route(&separators, "x")));
    refused(&format!("conditions:\n  - 'a{}'\n", "=!&,b".repeat(12_000)));
    let blanks_and_bangs = format!("conditions:\n  - 'a {}= b'\n", "! ".repeat(20_000));
    assert!(ConditionRule::parse("k", &blanks_and_bangs).is_ok());
    // Unicode keys and values, and no-break spaces Java does not count as blank.
    let unicode = rule("conditions:\n  - 'méthode=héllo => région=杭州'\n  - \"\\u00a0\"\n");
    assert!(unchanged(&world.route(&unicode, "héllo")));
    let route = world.route(&v30(false, &["=> region=杭州*,*🦀"]), "x");
    assert!(unchanged(&route));
}

fn arb_condition() -> impl Strategy<Value = String> {
    let atom = prop::sample::select(vec![
        "method",
        "region",
        "version",
        "host",
        "address",
        "port",
        "env",
        "application",
        "attachments[x-user]",
        "attachments[x-level]",
        "arguments[0]",
        "hangzhou",
        "v1",
        "v2",
        "sayHello",
        "*",
        "hang*",
        "*:20880",
        "1~50",
        "$region",
        "=",
        "!=",
        ",",
        "&",
        " ",
        "=>",
        "consumer.",
        "provider.",
        "true",
        "false",
        "10.0.0.*",
        "é",
    ]);
    prop::collection::vec(atom, 0..14).prop_map(|parts| parts.concat())
}

proptest! {
    #[test]
    fn route_never_leaves_the_input(
        conditions in prop::collection::vec(arb_condition(), 1..4),
        v31 in any::<bool>(),
        force in any::<bool>(),
        input in prop::collection::vec(0usize..6, 0..6),
        weights in prop::collection::vec(-2i32..400, 3),
    ) {
        let mut yaml = format!("force: {force}\n");
        if v31 {
            yaml.push_str("configVersion: v3.1\nconditions:\n");
            for (i, c) in conditions.iter().enumerate() {
                let quoted = c.replace('\'', "''");
                yaml.push_str(&format!(
                    "  - from: {{match: '{quoted}'}}\n    to:\n      - {{match: 'region=hangzhou', weight: {}}}\n      - {{match: '{quoted}', weight: {}}}\n",
                    weights[i % 3], weights[(i + 1) % 3]
                ));
            }
        } else {
            yaml.push_str("conditions:\n");
            for c in &conditions {
                yaml.push_str(&format!("  - '{}'\n", c.replace('\'', "''")));
            }
        }
        let Ok(rule) = ConditionRule::parse("k", &yaml) else { return Ok(()); };
        let world = World::new();
        let providers = world.providers();
        let route = rule.route(&world.call(Some("sayHello")), &providers, &input);
        let within = |indices: &[usize]| indices.iter().all(|i| input.contains(i));
        match route {
            ConditionRoute::Kept { indices, .. } => prop_assert!(within(&indices)),
            ConditionRoute::Destinations { choices, .. } => {
                prop_assert!(choices.len() >= 2);
                for (indices, weight) in &choices {
                    prop_assert!(within(indices));
                    prop_assert!(*weight > 0);
                }
            }
            ConditionRoute::Unchanged { .. } | ConditionRoute::NotApplicable { .. } => {}
        }
    }

    #[test]
    fn parse_never_panics(text in "\\PC{0,200}") {
        let _ = ConditionRule::parse("k", &text);
        let _ = ConditionRule::parse("k", &format!("conditions:\n  - '{}'\n", text.replace('\'', "''")));
    }
}

/// A condition as shown: its `when`, and each destination with its weight.
type Shown = (String, Vec<(String, Option<u32>)>);

#[test]
fn conditions_show_as_written() {
    let v30 = ConditionRule::parse(
        "S::.condition-router",
        "scope: service\nkey: S\nconditions:\n  - method=a => region=hz\n  - region=bj\n  - host=1.1.1.1 =>\n",
    )
    .unwrap();
    let shown: Vec<Shown> = v30
        .conditions()
        .iter()
        .map(|c| {
            let then = c.then.iter().map(|(t, w)| ((*t).to_owned(), *w)).collect();
            (c.when.to_owned(), then)
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("method=a".to_owned(), vec![("region=hz".to_owned(), None)]),
            (String::new(), vec![("region=bj".to_owned(), None)]),
            ("host=1.1.1.1".to_owned(), vec![]),
        ]
    );
    let v31 = ConditionRule::parse(
        "S::.condition-router",
        "configVersion: v3.1\nconditions:\n  - from: {match: env=gray}\n    to:\n      - match: env=gray\n        weight: 20\n      - match: ''\n",
    )
    .unwrap();
    let items = v31.conditions();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].when, "env=gray");
    assert_eq!(items[0].then, [("env=gray", Some(20)), ("", Some(100))]);
    let disabled =
        ConditionRule::parse("k", "enabled: false\nconditions:\n  - a=b => c=d\n").unwrap();
    assert!(disabled.conditions().is_empty());
}
