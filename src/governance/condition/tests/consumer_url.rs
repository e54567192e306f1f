//! Rules whose `when` side (and `then` side's `$name`) read the consumer's own URL: each
//! key a balanced channel's consumer URL carries, rules in, routing out.

use std::collections::BTreeMap;

use super::{kept, rule, unchanged};
use crate::governance::condition::ConditionRule;
use crate::governance::{CallFacts, CallTag, ConsumerIdentity, ProviderFacts};

/// Four providers of helloworld.Greeter, one per port, in regions a, b, a, c.
const PORTS: [u16; 4] = [50051, 50052, 50053, 50054];

fn regions() -> Vec<BTreeMap<String, String>> {
    ["a", "b", "a", "c"]
        .iter()
        .map(|r| BTreeMap::from([("region".to_owned(), (*r).to_owned())]))
        .collect()
}

/// The consumer `shop` on 10.0.0.9 with the embedder's `region=a`, as a channel of
/// `interface` (version 1.0.0, group g1) tagged `tag`.
fn channel(interface: &str, tag: &str) -> ConsumerIdentity {
    let mut own = ConsumerIdentity::new(Some("shop".into()), Some("10.0.0.9".into()));
    own.set_param("region", "a").unwrap();
    own.for_channel(
        interface,
        Some("1.0.0"),
        Some("g1"),
        &CallTag::new(tag, false),
    )
}

/// The providers `consumer` routes to under `rule` for a call of SayHello.
fn route(rule: &ConditionRule, consumer: &ConsumerIdentity) -> Option<Vec<usize>> {
    let params = regions();
    let providers: Vec<ProviderFacts<'_>> = PORTS
        .iter()
        .zip(&params)
        .map(|(&port, params)| ProviderFacts {
            host: "10.0.0.1",
            port,
            protocol: "tri",
            app: "greeter",
            interface: "helloworld.Greeter",
            params,
        })
        .collect();
    let attachments = BTreeMap::new();
    let tag = CallTag::none();
    let call = CallFacts {
        consumer_app: &consumer.app,
        consumer_host: &consumer.host,
        consumer_params: &consumer.params,
        method: Some("SayHello"),
        attachments: &attachments,
        tag: &tag,
    };
    let routed = rule.route(&call, &providers, &[0, 1, 2, 3]);
    (!unchanged(&routed)).then(|| kept(routed))
}

fn greeter_rule(condition: &str) -> ConditionRule {
    rule(&format!(
        "configVersion: v3.0\nscope: service\nforce: true\nruntime: true\nenabled: true\n\
         key: helloworld.Greeter\nconditions:\n  - '{condition}'\n"
    ))
}

#[test]
fn each_key_of_the_consumer_url_matches_on_when() {
    let consumer = channel("helloworld.Greeter", "gray");
    for (when, matches) in [
        // The rule measured against Java 3.3.6: it must match a Greeter consumer.
        ("interface = helloworld.Greeter", true),
        ("interface = other.Service", false),
        ("path = helloworld.Greeter", true),
        ("version = 1.0.0", true),
        ("version = 2.*", false),
        ("group = g1", true),
        ("side = consumer", true),
        ("side = provider", false),
        ("protocol = tri", true),
        ("dubbo.tag = gray", true),
        ("dubbo.tag = blue", false),
        ("application = shop", true),
        ("register.ip = 10.0.0.9", true),
        ("address = 10.0.0.9", true),
        ("region = a", true),
        ("region = b", false),
        ("zone = a", false),
    ] {
        let rule = greeter_rule(&format!("{when} => port != 50052"));
        let routed = route(&rule, &consumer);
        if matches {
            assert_eq!(routed, Some(vec![0, 2, 3]), "{when}");
        } else {
            assert_eq!(routed, None, "{when} must not match");
        }
    }
}

#[test]
fn dollar_references_on_then_read_the_same_consumer_url() {
    let consumer = channel("helloworld.Greeter", "gray");
    assert_eq!(
        route(&greeter_rule("=> region = $region"), &consumer),
        Some(vec![0, 2]),
        "the embedder's region"
    );
    assert_eq!(
        route(&greeter_rule("=> interface = $interface"), &consumer),
        Some(vec![0, 1, 2, 3])
    );
    assert_eq!(
        route(&greeter_rule("=> region = $interface"), &consumer),
        Some(vec![]),
        "forced: no provider's region is the interface"
    );
}

#[test]
fn two_channels_of_one_resolver_see_their_own_reference() {
    let greeter = channel("helloworld.Greeter", "gray");
    let other = channel("helloworld.Farewell", "");
    let by_interface = greeter_rule("interface = helloworld.Greeter => port = 50051");
    assert_eq!(route(&by_interface, &greeter), Some(vec![0]));
    assert_eq!(route(&by_interface, &other), None);
    let by_tag = greeter_rule("dubbo.tag = gray => port = 50054");
    assert_eq!(route(&by_tag, &greeter), Some(vec![3]));
    assert_eq!(
        route(&by_tag, &other),
        None,
        "an untagged channel has no dubbo.tag"
    );
}
