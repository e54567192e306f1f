//! The fuzz targets' properties, run as property tests so every CI run checks them on
//! thousands of generated inputs: arbitrary bytes and mutations of valid records.

#[path = "../../fuzz/checks.rs"]
mod checks;

use introspect::rpc::to_wire;
use introspect::{MetadataInfo, ServiceInfo, ServiceInstance};
use proptest::prelude::*;
use prost::Message;

fn valid_instance() -> Vec<u8> {
    let mut i = ServiceInstance::new("shop-orders", "10.0.0.7", 50051);
    i.metadata
        .insert("dubbo.metadata.revision".into(), "abc".into());
    i.metadata.insert(
        "dubbo.endpoints".into(),
        r#"[{"port":50052,"protocol":"tri"}]"#.into(),
    );
    i.metadata.insert(
        "dubbo.metadata-service.url-params".into(),
        r#"{"port":"20881"}"#.into(),
    );
    i.to_json()
}

/// A record in dubbo-go's shape: Go field names, `null` for nil maps and pointers.
fn valid_go_instance() -> Vec<u8> {
    br#"{"ID":"10.0.0.7:20000","ServiceName":"go-orders","Host":"10.0.0.7","Port":20000,"Weight":0,"Enable":true,"Healthy":true,"Metadata":{"dubbo.metadata.revision":"abc","dubbo.endpoints":"[{\"port\":20000,\"protocol\":\"tri\"}]","meta-v":"2.0.0"},"ServiceMetadata":null,"Address":"","GroupName":"","Tag":""}
"#
    .to_vec()
}

fn valid_consumer_record() -> Vec<u8> {
    br#"{"app":"shop-web","id":"5f0c1a2b","host":"10.0.0.9","registeredMs":1764600000000,
        "subscriptions":[{"interface":"shop.OrderService","group":"","version":"1.0",
        "protocol":"tri","digest":"3f2a9c0b7d1e4a55","endpoints":4,"position":1207,
        "changedMs":1764600004200,"rulesDigest":"9d1c07e4b2a3f618",
        "rules":["shop.OrderService:1.0:.condition-router","shop-web.configurators"]}]}"#
        .to_vec()
}

fn valid_metadata() -> MetadataInfo {
    MetadataInfo::new(
        "shop-orders",
        [ServiceInfo::new("shop.OrderService")
            .with_group("g")
            .with_version("1")
            .with_param("timeout", "3")],
    )
    .unwrap()
}

#[cfg(feature = "internals")]
fn valid_snapshot_body() -> Vec<u8> {
    let instance =
        ServiceInstance::from_json(&valid_instance(), &introspect::Limits::default()).unwrap();
    ServiceInstance::from_json(&valid_go_instance(), &introspect::Limits::default()).unwrap();
    let snapshot = introspect::consumer::snapshot::Snapshot {
        subscription: (
            "shop.OrderService".into(),
            String::new(),
            String::new(),
            String::new(),
            vec![],
        ),
        apps: ["shop-orders".to_owned()].into(),
        instances: [("shop-orders".to_owned(), vec![instance])].into(),
        metadata: vec![valid_metadata()],
    };
    let file = snapshot.encode();
    let body_start = file.iter().position(|b| *b == b'\n').unwrap() + 1;
    file[body_start..].to_vec()
}

/// Bytes of `valid` with a few bytes overwritten, inserted or cut.
/// Rules as the admins write them: a v3.0 condition rule, a v3.1 one, a tag rule and a
/// consumer-side configurator.
const VALID_RULES: [&str; 4] = [
    "configVersion: v3.0\nscope: service\nkey: helloworld.Greeter\nforce: true\nconditions:\n  - 'method = SayHello & attachments[x-user] = 4* => port != 50051,50052'\n",
    "configVersion: v3.1\nscope: service\nkey: helloworld.Greeter\nconditions:\n  - from:\n      match: 'method=SayHello'\n    to:\n      - match: 'port=50051'\n        weight: 80\n      - match: 'dubbo.tag=gray'\n        weight: 20\n",
    "configVersion: v3.0\nforce: false\nenabled: true\nkey: greeter\ntags:\n  - name: gray\n    addresses: ['10.0.0.1:50052']\n  - name: blue\n    match:\n      - key: weight\n        value:\n          exact: '300'\n",
    "configVersion: v3.0\nscope: service\nkey: helloworld.Greeter\nconfigs:\n  - side: consumer\n    addresses: [0.0.0.0]\n    providerAddresses: ['10.0.0.1:50053']\n    parameters:\n      weight: 100\n      disabled: 'true'\n",
];

fn mutated(valid: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let len = valid.len();
    (
        prop::collection::vec((0..len.max(1), any::<u8>(), 0..3u8), 1..6),
        0..=len,
    )
        .prop_map(move |(edits, cut)| {
            let mut bytes = valid.clone();
            for (at, byte, kind) in edits {
                let at = at.min(bytes.len().saturating_sub(1));
                match kind {
                    0 if !bytes.is_empty() => bytes[at] = byte,
                    1 => bytes.insert(at, byte),
                    _ if !bytes.is_empty() => {
                        bytes.remove(at);
                    }
                    _ => {}
                }
            }
            bytes.truncate(cut.max(1).min(bytes.len()));
            bytes
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn instance_json_arbitrary(data in prop::collection::vec(any::<u8>(), 0..512)) { checks::instance_json(&data) }

    #[test]
    fn instance_json_mutated(data in mutated(valid_instance())) { checks::instance_json(&data) }

    #[test]
    fn instance_json_go_mutated(data in mutated(valid_go_instance())) { checks::instance_json(&data) }

    #[test]
    fn consumer_record_arbitrary(data in prop::collection::vec(any::<u8>(), 0..512)) { checks::consumer_record(&data) }

    #[test]
    fn consumer_record_mutated(data in mutated(valid_consumer_record())) { checks::consumer_record(&data) }

    #[test]
    fn metadata_json_arbitrary(data in prop::collection::vec(any::<u8>(), 0..512)) { checks::metadata_json(&data) }

    #[test]
    fn metadata_json_mutated(data in mutated(valid_metadata().to_json())) { checks::metadata_json(&data) }

    #[test]
    fn metadata_wire_arbitrary(data in prop::collection::vec(any::<u8>(), 0..512)) { checks::metadata_wire(&data) }

    #[test]
    fn metadata_wire_mutated(data in mutated(to_wire(&valid_metadata()).encode_to_vec())) { checks::metadata_wire(&data) }

    #[test]
    fn governance_rule_arbitrary(data in prop::collection::vec(any::<u8>(), 0..512)) { checks::governance_rule(&data) }

    #[test]
    fn governance_rule_mutated(data in mutated(VALID_RULES[0].as_bytes().to_vec())) { checks::governance_rule(&data) }

    #[test]
    fn governance_rule_v31_mutated(data in mutated(VALID_RULES[1].as_bytes().to_vec())) { checks::governance_rule(&data) }

    #[test]
    fn governance_tag_rule_mutated(data in mutated(VALID_RULES[2].as_bytes().to_vec())) { checks::governance_rule(&data) }

    #[test]
    fn governance_configurator_mutated(data in mutated(VALID_RULES[3].as_bytes().to_vec())) { checks::governance_rule(&data) }

    #[test]
    fn mapping_value_arbitrary(data in prop::collection::vec(any::<u8>(), 0..256)) { checks::mapping_value(&data) }

    #[test]
    fn mapping_value_textual(data in "[a-z,./ \\n\\x00-]{0,64}") { checks::mapping_value(data.as_bytes()) }

    #[test]
    #[cfg(feature = "internals")]
    fn snapshot_file_arbitrary(data in prop::collection::vec(any::<u8>(), 0..512)) { checks::snapshot_file(&data) }

    #[test]
    #[cfg(feature = "internals")]
    fn snapshot_file_mutated(data in mutated(valid_snapshot_body())) { checks::snapshot_file(&data) }

    #[test]
    fn match_key_arbitrary(data in "[a-zA-Z0-9./:, \\x1f\\n-]{0,48}") { checks::match_key(data.as_bytes()) }
}

#[test]
fn valid_seeds_parse() {
    // The mutation seeds themselves must parse, or the mutated cases test nothing.
    ServiceInstance::from_json(&valid_instance(), &introspect::Limits::default()).unwrap();
    ServiceInstance::from_json(&valid_go_instance(), &introspect::Limits::default()).unwrap();
    MetadataInfo::from_json(&valid_metadata().to_json(), &introspect::Limits::default()).unwrap();
    introspect::model::ConsumerRecord::from_json(
        &valid_consumer_record(),
        &introspect::Limits::default(),
    )
    .unwrap();
    #[cfg(feature = "internals")]
    {
        use introspect::consumer::snapshot::Snapshot;
        let file = Snapshot::frame(&valid_snapshot_body());
        Snapshot::decode(&file, &introspect::Limits::default()).unwrap();
    }
}

/// The rules the mutations start from parse, so the mutated cases reach the routing.
#[test]
fn the_valid_rules_parse() {
    use introspect::governance::{Rule, RuleKey};
    let roles = [
        RuleKey::ServiceConditions("helloworld.Greeter::".into()),
        RuleKey::ServiceConditions("helloworld.Greeter::".into()),
        RuleKey::TagRule("greeter".into()),
        RuleKey::ServiceConfigurators("helloworld.Greeter::".into()),
    ];
    for (text, role) in VALID_RULES.iter().zip(&roles) {
        if let Err(e) = Rule::parse(role, text) {
            panic!("{text}: {e}");
        }
    }
}
