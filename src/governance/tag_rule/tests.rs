//! The tag rules' tests: rules as Java's admins write them, routing a small fleet.

use std::collections::BTreeMap;

use super::{TagItem, TagRule, route_by_tag};
use crate::error::Error;
use crate::governance::Governed;
use crate::governance::facts::{CallFacts, ProviderFacts};
use crate::governance::refusal::refusal;
use crate::governance::tag::CallTag;

/// One provider: host, port, static tag, other params.
type Spec<'a> = (&'static str, u16, &'a str, &'a [(&'a str, &'a str)]);

/// Providers and their params, to route over.
struct Fleet {
    params: Vec<BTreeMap<String, String>>,
    hosts: Vec<(&'static str, u16)>,
}

impl Fleet {
    fn new(spec: &[Spec<'_>]) -> Fleet {
        Fleet {
            params: spec
                .iter()
                .map(|(_, _, tag, extra)| {
                    let mut p: BTreeMap<String, String> = extra
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect();
                    if !tag.is_empty() {
                        p.insert("dubbo.tag".into(), tag.to_string());
                    }
                    p
                })
                .collect(),
            hosts: spec.iter().map(|(h, p, _, _)| (*h, *p)).collect(),
        }
    }

    fn facts(&self) -> Vec<ProviderFacts<'_>> {
        self.hosts
            .iter()
            .zip(&self.params)
            .map(|((host, port), params)| ProviderFacts {
                host,
                port: *port,
                protocol: "tri",
                app: "shop-orders",
                interface: "shop.OrderService",
                params,
            })
            .collect()
    }

    fn route(&self, rule: Option<&TagRule>, tag: &str, force: bool) -> Vec<usize> {
        self.route_input(rule, tag, force, &(0..self.hosts.len()).collect::<Vec<_>>())
    }

    fn route_input(
        &self,
        rule: Option<&TagRule>,
        tag: &str,
        force: bool,
        input: &[usize],
    ) -> Vec<usize> {
        let empty = BTreeMap::new();
        let call_tag = CallTag::new(tag, force);
        let call = CallFacts {
            consumer_app: "shop-web",
            consumer_host: "10.0.1.1",
            consumer_params: &empty,
            method: Some("Get"),
            attachments: &empty,
            tag: &call_tag,
        };
        let route = route_by_tag(rule, &call, &self.facts(), input);
        assert!(!route.why.is_empty());
        assert!(route.indices.iter().all(|i| input.contains(i)));
        route.indices
    }
}

fn rule(yaml: &str) -> TagRule {
    TagRule::parse("shop-orders.tag-router", yaml).unwrap()
}

/// 0 and 1 in the dynamic gray group, 2 statically blue, 3 untagged, 4 statically gray.
fn fleet() -> Fleet {
    Fleet::new(&[
        ("10.0.0.1", 20880, "", &[]),
        ("10.0.0.2", 20880, "", &[]),
        ("10.0.0.3", 20880, "blue", &[]),
        ("10.0.0.4", 20880, "", &[]),
        ("10.0.0.5", 20880, "gray", &[]),
    ])
}

/// As Java admin 0.6 writes a tag rule: no configVersion, addresses per tag.
const ADMIN_06: &str = "\
enabled: true
force: false
runtime: true
priority: 0
key: shop-orders
tags:
  - name: gray
    addresses: [\"10.0.0.1:20880\", \"10.0.0.2\"]
  - name: canary
    addresses: []
";

#[test]
fn the_admin_06_form_parses_with_javas_defaults() {
    let r = rule(ADMIN_06);
    assert!(r.is_active());
    assert!(!r.force());
    assert!(r.runtime());
    assert_eq!(r.priority(), 0);
    assert_eq!(r.key(), "shop-orders.tag-router");
    assert_eq!(r.tag_names().collect::<Vec<_>>(), ["gray", "canary"]);
    let minimal = rule("tags: [{name: a, addresses: [10.0.0.1]}]");
    assert!(minimal.is_active() && !minimal.force() && minimal.runtime());
    assert_eq!(TagRule::key_for("shop-orders"), "shop-orders.tag-router");
}

#[test]
fn a_tagged_call_goes_to_its_dynamic_group() {
    let f = fleet();
    let r = rule(ADMIN_06);
    assert_eq!(f.route(Some(&r), "gray", false), [0, 1]);
    assert_eq!(f.route(Some(&r), "gray", true), [0, 1]);
    // Only some of the group in the input: those.
    assert_eq!(f.route_input(Some(&r), "gray", false, &[1, 3]), [1]);
}

#[test]
fn a_group_that_matched_none_falls_over_unless_forced() {
    let f = fleet();
    let r = rule(ADMIN_06);
    // Group of gray exists but none of it is in the input: no static step (4 is
    // statically gray but is skipped), straight to the failover.
    assert_eq!(f.route_input(Some(&r), "gray", false, &[2, 3, 4]), [3]);
    // The call forces its tag: none.
    assert_eq!(
        f.route_input(Some(&r), "gray", true, &[2, 3, 4]),
        Vec::<usize>::new()
    );
    // The rule forces: none, whatever the call says.
    let forced = rule(&ADMIN_06.replace("force: false", "force: true"));
    assert_eq!(
        forced.route_input_helper(&f, "gray", &[2, 3, 4]),
        Vec::<usize>::new()
    );
}

impl TagRule {
    fn route_input_helper(&self, f: &Fleet, tag: &str, input: &[usize]) -> Vec<usize> {
        f.route_input(Some(self), tag, false, input)
    }
}

#[test]
fn a_tag_without_a_group_uses_static_tags_then_falls_over() {
    let f = fleet();
    let r = rule(ADMIN_06);
    assert_eq!(f.route(Some(&r), "blue", false), [2]);
    // canary's addresses are empty: no group; nobody statically canary.
    assert_eq!(
        f.route(Some(&r), "canary", false),
        [3],
        "not in a group, untagged"
    );
    assert_eq!(f.route(Some(&r), "canary", true), Vec::<usize>::new());
    assert_eq!(f.route(Some(&r), "red", false), [3]);
}

#[test]
fn an_untagged_call_avoids_groups_and_static_tags() {
    let f = fleet();
    let r = rule(ADMIN_06);
    assert_eq!(f.route(Some(&r), "", false), [3]);
    assert_eq!(
        f.route_input(Some(&r), "", false, &[0, 1]),
        Vec::<usize>::new()
    );
    let everyone = rule("tags: [{name: all, addresses: ['*']}]");
    assert_eq!(f.route(Some(&everyone), "", false), Vec::<usize>::new());
    assert_eq!(f.route(Some(&everyone), "all", false), [0, 1, 2, 3, 4]);
}

#[test]
fn no_rule_an_invalid_or_disabled_one_route_by_static_tags() {
    let f = fleet();
    let disabled = rule(&ADMIN_06.replace("enabled: true", "enabled: false"));
    let no_tags = rule("key: shop-orders\nenabled: true\n");
    let empty_tags = rule("tags: []");
    let not_a_list = rule("tags: gray");
    let invalid = rule(&format!("valid: false\n{ADMIN_06}"));
    for r in [
        None,
        Some(&disabled),
        Some(&no_tags),
        Some(&empty_tags),
        Some(&not_a_list),
        Some(&invalid),
    ] {
        assert!(r.is_none_or(|r| !r.is_active()));
        assert_eq!(f.route(r, "gray", false), [4]);
        assert_eq!(f.route(r, "red", false), [0, 1, 3]);
        assert_eq!(f.route(r, "red", true), Vec::<usize>::new());
        assert_eq!(f.route(r, "", false), [0, 1, 3]);
    }
}

#[test]
fn tag_levels_fall_back_to_shorter_selectors_unless_forced() {
    let f = fleet();
    let r = rule(
        "tags: [{name: beta, addresses: [10.0.0.1]}, {name: 'beta|team1', addresses: [10.0.0.2]}]",
    );
    assert_eq!(f.route(Some(&r), "beta|team1|p1", false), [1]);
    assert_eq!(f.route(Some(&r), "beta|team2", false), [0]);
    // Forced: the whole selector only; no group, nobody statically so tagged.
    assert_eq!(f.route(Some(&r), "beta|team2", true), Vec::<usize>::new());
}

#[test]
fn addresses_are_java_ip_expressions() {
    let f = Fleet::new(&[
        ("10.0.0.1", 20880, "", &[]),
        ("10.0.0.1", 20881, "", &[]),
        ("10.0.1.9", 20880, "", &[]),
        ("192.168.0.1", 20881, "", &[]),
    ]);
    let route = |addresses: &str| {
        f.route(
            Some(&rule(&format!(
                "tags: [{{name: t, addresses: {addresses}}}]"
            ))),
            "t",
            true,
        )
    };
    assert_eq!(route("['10.0.0.1']"), [0, 1], "a host covers every port");
    assert_eq!(route("['10.0.0.1:20881']"), [1]);
    assert_eq!(route("['0.0.0.0:20881']"), [1, 3], "every host on a port");
    assert_eq!(route("['0.0.0.0']"), Vec::<usize>::new(), "no wildcard");
    assert_eq!(route("['*']"), [0, 1, 2, 3]);
    assert_eq!(route("['10.0.*.*']"), [0, 1, 2]);
    assert_eq!(route("['10.0.0.0/16']"), [0, 1, 2]);
    assert_eq!(route("['10.0.0.1-5:20880']"), [0]);
    assert_eq!(route("['not an address', '10.0', 12]"), Vec::<usize>::new());
}

/// As the new admin writes a v3.0 rule: match on provider params.
const ADMIN_V3: &str = "\
configVersion: v3.0
force: false
enabled: true
key: shop-orders
tags:
  - name: gray
    match:
      - key: env
        value:
          exact: gray
  - name: zone-a
    match:
      - key: zone
        value: {prefix: a}
      - key: env
        value: {noempty: 'true'}
  - name: listed
    addresses: [10.0.0.4]
    match:
      - key: env
        value: {exact: never}
";

#[test]
fn v3_tags_group_the_providers_their_params_match() {
    let f = Fleet::new(&[
        ("10.0.0.1", 20880, "", &[("env", "gray"), ("zone", "a1")]),
        ("10.0.0.2", 20880, "", &[("env", "prod"), ("zone", "a2")]),
        ("10.0.0.3", 20880, "", &[("zone", "a3")]),
        ("10.0.0.4", 20880, "", &[]),
        ("10.0.0.5", 20880, "", &[]),
    ]);
    let r = rule(ADMIN_V3);
    assert_eq!(f.route(Some(&r), "gray", false), [0]);
    assert_eq!(f.route(Some(&r), "zone-a", false), [0, 1]);
    assert_eq!(
        f.route(Some(&r), "listed", false),
        [3],
        "addresses win over match"
    );
    assert_eq!(f.route(Some(&r), "", false), [2, 4]);
    // The group is computed over all providers: a call whose input lacks the group's
    // providers falls over, the group still exists.
    assert_eq!(f.route_input(Some(&r), "gray", false, &[1, 2]), [2]);
    // A v3.0 tag that matches nobody has no group.
    let none =
        rule("configVersion: v3.0\ntags: [{name: t, match: [{key: env, value: {exact: x}}]}]");
    assert!(none.is_active());
    assert_eq!(f.route(Some(&none), "t", false), [0, 1, 2, 3, 4]);
    // match is ignored before v3.0.
    let old = rule("tags: [{name: gray, match: [{key: env, value: {exact: gray}}]}]");
    assert_eq!(f.route(Some(&old), "gray", false), [0, 1, 2, 3, 4]);
}

#[test]
fn malformed_rules_are_refused_as_rule_errors() {
    let refused = [
        "",
        "tags: [",
        "- a\n- b\n",
        "configVersion: v4.0\ntags: [{name: a, addresses: [1.1.1.1]}]",
        "configVersion: 3.0\ntags: []",
        "key: 12\ntags: []",
        "priority: high\ntags: []",
        "tags: [gray]",
        "tags: [~]",
        "tags: [{name: [a], addresses: [1.1.1.1]}]",
        "tags: [{name: a, addresses: [[1.1.1.1]]}]",
        "configVersion: v3.0\ntags: [{name: a}]",
        "configVersion: v3.0\ntags: [{name: a, match: {key: env}}]",
        "configVersion: v3.0\ntags: [{name: a, match: [{key: env, value: {regex: 'g(?=x)'}}]}]",
        "configVersion: v3.0\ntags: [{name: a, match: [{key: env, value: gray}]}]",
        "configVersion: v3.0\ntags: [{name: a, match: [7]}]",
    ];
    for yaml in refused {
        refusal(TagRule::parse, "shop-orders.tag-router", yaml);
    }
    let big = format!(
        "tags: [{{name: a, addresses: [{}]}}]",
        "1.1.1.1, ".repeat(10_000)
    );
    assert!(matches!(TagRule::parse("k", &big), Err(Error::Rule { .. })));
}

#[test]
fn hostile_rules_and_inputs_never_panic_nor_leave_the_input() {
    let f = fleet();
    let hostile = [
        "tags: [{name: \"\\0\", addresses: ['\u{202e}*', '[', ']:', '[::1]:x', '1.1.1.1/99', '::/-3', '%']}]",
        "tags: [{name: 'a|', addresses: ['|']}, {name: '', addresses: ['']}, {addresses: ['*']}]",
        "configVersion: v3.0\ntags: [{name: a, match: []}, {name: b, match: [{}]}, {name: c, match: [{value: {empty: x}}]}]",
        "a: &a [1, 2]\nb: *a\ntags: [{name: x, addresses: *a}]",
    ];
    assert!(
        TagRule::parse("k", "tags: [{name: '\u{0}'}]").is_err(),
        "raw control characters are no YAML"
    );
    for yaml in hostile {
        let r = TagRule::parse("k", yaml).unwrap();
        for tag in ["", "a", "a|", "|", "||", "\u{0}", "x|y|z"] {
            for force in [false, true] {
                f.route_input(Some(&r), tag, force, &[4, 0, 99, 2, usize::MAX]);
            }
        }
    }
    // An empty match list matches every provider; a match item without a value none.
    let r = TagRule::parse("k", hostile[2]).unwrap();
    assert_eq!(f.route(Some(&r), "a", false), [0, 1, 2, 3, 4]);
    assert_eq!(
        f.route(Some(&r), "b", false),
        Vec::<usize>::new(),
        "b has no group, and every provider is in a's"
    );
    assert_eq!(
        f.route(Some(&r), "c", false),
        [0, 1, 2, 3, 4],
        "no key reads null"
    );
    assert_eq!(f.route_input(None, "", false, &[]), Vec::<usize>::new());
    assert_eq!(f.route_input(None, "", false, &[7, 8]), Vec::<usize>::new());
}

#[test]
fn the_rule_shows_as_written() {
    let text = "configVersion: v3.0\nscope: application\nkey: shop\nforce: true\nenabled: false\ntags:\n  - name: gray\n    addresses: ['10.0.0.7:20880']\n  - name: blue\n    match:\n      - key: env\n        value: {exact: blue}\n";
    let rule = TagRule::parse("shop.tag-router", text).unwrap();
    assert_eq!(rule.config_version(), Some("v3.0"));
    assert_eq!(rule.scope(), Some("application"));
    assert_eq!(rule.rule_key(), Some("shop"));
    assert!(rule.force() && !rule.enabled() && rule.is_valid() && !rule.is_active());
    let tags: Vec<TagItem<'_>> = rule.tags().collect();
    assert_eq!(tags.len(), 2);
    assert_eq!(tags[0].name, Some("gray"));
    assert_eq!(tags[0].addresses, ["10.0.0.7:20880"]);
    assert_eq!(tags[0].match_text, None);
    assert_eq!(
        tags[1].match_text,
        Some("[{key: env, value: {exact: blue}}]")
    );
    let empty = TagRule::parse("shop.tag-router", "key: shop\n").unwrap();
    assert!(!empty.is_valid() && empty.tags().next().is_none());
}
