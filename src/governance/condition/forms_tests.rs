//! The `configVersion`s Java 3.3's `ConditionRuleParser` reads, and the messages for an
//! operator's mistakes in a rule's top-level fields.

use std::collections::BTreeMap;

use super::{ConditionRoute, ConditionRule, ConditionVersion};
use crate::governance::refusal::refusal;
use crate::governance::{CallFacts, CallTag, Governed, ProviderFacts};

const PORTS: [u16; 4] = [20881, 20882, 20883, 20884];

/// The providers (of four, on ports 20881..20884) a call keeps under `yaml`.
fn kept(yaml: &str) -> Vec<usize> {
    let rule = ConditionRule::parse("demo.condition-router", yaml).unwrap();
    let params = BTreeMap::new();
    let providers: Vec<ProviderFacts<'_>> = PORTS
        .iter()
        .map(|&port| ProviderFacts {
            host: "10.0.0.1",
            port,
            protocol: "tri",
            app: "greeter",
            interface: "demo.Greeter",
            params: &params,
        })
        .collect();
    let tag = CallTag::new("", false);
    let call = CallFacts {
        consumer_app: "shop",
        consumer_host: "10.0.0.9",
        consumer_params: &params,
        method: Some("sayHello"),
        attachments: &params,
        tag: &tag,
    };
    match rule.route(&call, &providers, &[0, 1, 2, 3]) {
        ConditionRoute::Kept { indices, .. } => indices,
        other => panic!("{yaml}: not kept: {other:?}"),
    }
}

fn with_version(version: &str) -> String {
    format!("configVersion: {version}\nconditions: ['=> port != 20881']\n")
}

#[test]
fn every_version_below_v31_reads_the_when_then_form() {
    for version in [
        "v2.7", "v3", "v3.0", "V3.0", "v3.0.2", "'3.0'", "'2.7'", "v3.0.x",
    ] {
        let yaml = with_version(version);
        assert_eq!(kept(&yaml), [1, 2, 3], "{version}");
        let rule = ConditionRule::parse("k", &yaml).unwrap();
        assert_eq!(rule.version(), ConditionVersion::V30, "{version}");
    }
    for version in ["v3.1", "V3.1", "v3.10"] {
        let yaml =
            format!("configVersion: {version}\nconditions: [{{to: [{{match: 'port=20882'}}]}}]");
        let rule = ConditionRule::parse("k", &yaml).unwrap();
        assert_eq!(rule.version(), ConditionVersion::V31, "{version}");
    }
}

#[test]
fn a_version_above_v31_or_a_number_is_refused_with_the_fix() {
    for version in ["v3.2", "v4", "v9.9", "x"] {
        let why = refusal(ConditionRule::parse, "k", &with_version(version));
        assert!(why.contains("above v3.1"), "{version}: {why}");
    }
    let why = refusal(ConditionRule::parse, "k", &with_version("3.0"));
    assert!(
        why.contains("is a number") && why.contains("write configVersion: v3.0"),
        "{why}"
    );
}

#[test]
fn a_misspelt_field_is_named_in_the_refusal_or_as_a_note() {
    let why = refusal(
        ConditionRule::parse,
        "k",
        "configVersion: v3.0\ncondition: ['=> port != 20881']\n",
    );
    assert!(
        why.contains("no conditions") && why.contains("did you mean \"conditions\""),
        "{why}"
    );
    let rule =
        ConditionRule::parse("k", "enabeld: false\nconditions: ['=> port != 20881']\n").unwrap();
    assert!(
        rule.enabled(),
        "an unknown field changes nothing, as in Java"
    );
    assert_eq!(rule.notes().len(), 1);
    assert!(
        rule.notes()[0].contains("did you mean \"enabled\""),
        "{:?}",
        rule.notes()
    );
}
