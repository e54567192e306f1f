//! The properties every untrusted-input parser must keep, shared by the fuzz targets and by
//! the property tests of the main suite: never panic, and whatever parses round-trips.

#![allow(dead_code)]

use introspect::backend::mapping::{join_apps, parse_apps};
use introspect::model::names::validate_app;
use introspect::rpc::{from_wire, pb, to_wire};
use introspect::{Limits, MetadataInfo, ServiceInfo, ServiceInstance};
use prost::Message;

/// Instance records come from other processes through the store.
pub fn instance_json(data: &[u8]) {
    if let Ok(instance) = ServiceInstance::from_json(data, &Limits::default()) {
        let again = ServiceInstance::from_json(&instance.to_json(), &Limits::default())
            .expect("round trip");
        assert_eq!(again, instance);
        let _ = (
            instance.revision(),
            instance.storage_type(),
            instance.metadata_service_port(),
            instance.metadata_service_target(),
            instance.declared_revision_rule(),
        );
        let _ = (
            instance.protocol_ports(),
            instance.port_for_protocol("tri"),
            instance.key_address(),
        );
    }
}

/// Consumer records come from other processes through the store.
pub fn consumer_record(data: &[u8]) {
    use introspect::model::ConsumerRecord;
    if let Ok(record) = ConsumerRecord::from_json(data, &Limits::default()) {
        let json = record
            .to_json(&Limits::default())
            .expect("what parses encodes");
        let again = ConsumerRecord::from_json(&json, &Limits::default()).expect("round trip");
        assert_eq!(again, record);
        let _ = record.consumes("a.B");
        // What a record says its channels route by is bounded as checked.
        for s in &record.subscriptions {
            assert!(s.rules.len() <= introspect::model::consumer_record::MAX_RULE_KEYS);
            assert!(
                s.rules_digest
                    .as_ref()
                    .is_none_or(|d| (1..=64).contains(&d.len()))
            );
        }
    }
}

/// Metadata reports come from other processes through the store.
pub fn metadata_json(data: &[u8]) {
    if let Ok(info) = MetadataInfo::from_json(data, &Limits::default()) {
        let again =
            MetadataInfo::from_json(&info.to_json(), &Limits::default()).expect("round trip");
        assert_eq!(again, info);
        let _ = info.verify_revision();
        for rule in introspect::model::RevisionRule::ALL {
            let _ = rule.canonical_bytes(&info);
        }
        let _ =
            introspect::model::verify(introspect::model::Declared::Nothing, &info.revision, &info);
        let _ = info.matching("a.B", None, None, None).count();
    }
}

/// MetadataService answers come from other processes over the network.
pub fn metadata_wire(data: &[u8]) {
    if let Ok(wire) = pb::MetadataInfoV2::decode(data)
        && let Ok(info) = from_wire(wire, &Limits::default())
    {
        let again = from_wire(to_wire(&info), &Limits::default()).expect("round trip");
        assert_eq!(again, info);
    }
}

/// Mapping values come from other processes through the store.
pub fn mapping_value(data: &[u8]) {
    let apps = parse_apps(data, &Limits::default());
    for app in &apps {
        validate_app(app).expect("only valid names survive parsing");
    }
    assert_eq!(
        parse_apps(join_apps(&apps).as_bytes(), &Limits::default()),
        apps
    );
}

/// Service infos, and so match keys, come from other processes over the network.
pub fn match_key(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(4, '\u{1f}');
    let s = ServiceInfo::new(parts.next().unwrap_or_default())
        .with_group(parts.next().unwrap_or_default())
        .with_version(parts.next().unwrap_or_default())
        .with_protocol(parts.next().unwrap_or_default());
    if s.validate().is_ok() {
        let key = s.match_key();
        assert!(key.contains(&s.name));
        // A valid group is the only thing before a `/`.
        assert_eq!(key.matches('/').count(), usize::from(!s.group.is_empty()));
        assert!(!key.chars().any(char::is_control));
    }
}

/// Snapshot files are read back from disk, where they may be truncated or tampered with.
/// The fuzzed bytes are tried as a whole file and, so that the JSON parser is reached, as
/// the body of a file with a correct checksum header.
#[cfg(feature = "internals")]
pub fn snapshot_file(data: &[u8]) {
    use introspect::consumer::snapshot::Snapshot;
    let limits = Limits::default();
    let _ = Snapshot::decode(data, &limits);
    if let Ok(snapshot) = Snapshot::decode(&Snapshot::frame(data), &limits) {
        assert_eq!(
            Snapshot::decode(&snapshot.encode(), &limits).expect("round trip"),
            snapshot
        );
    }
}

/// Governance rules come from the config centre, written by any operator or tool. Whatever
/// parses, under any key role, routes a small fleet without panicking and never names a
/// provider outside it.
pub fn governance_rule(data: &[u8]) {
    use introspect::governance::{
        CallFacts, CallTag, ProviderFacts, Rule, RuleKey, RuleSet, route,
    };
    use std::collections::BTreeMap;
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let roles = [
        RuleKey::ServiceConfigurators("helloworld.Greeter::".into()),
        RuleKey::ConsumerConfigurators("shop".into()),
        RuleKey::TagRule("greeter".into()),
        RuleKey::ServiceConditions("helloworld.Greeter::".into()),
        RuleKey::ConsumerAppConditions("shop".into()),
    ];
    let rules: Vec<(RuleKey, Rule)> = roles
        .into_iter()
        .filter_map(|key| Rule::parse(&key, text).ok().map(|rule| (key, rule)))
        .collect();
    if rules.is_empty() {
        return;
    }
    let set = RuleSet::new(rules, Vec::new());
    let params: Vec<BTreeMap<String, String>> = vec![
        BTreeMap::new(),
        BTreeMap::from([("dubbo.tag".to_owned(), "gray".to_owned())]),
        BTreeMap::from([("weight".to_owned(), "300".to_owned())]),
    ];
    let consumer =
        introspect::governance::ConsumerIdentity::new(Some("shop".into()), Some("10.0.0.9".into()));
    let providers: Vec<ProviderFacts<'_>> = params
        .iter()
        .enumerate()
        .map(|(i, params)| ProviderFacts {
            host: "10.0.0.1",
            port: 50051 + i as u16,
            protocol: "tri",
            app: "greeter",
            interface: "helloworld.Greeter",
            params,
        })
        .collect();
    let configured: Vec<Option<BTreeMap<String, String>>> = providers
        .iter()
        .map(|p| set.configure(&consumer, p))
        .collect();
    let attachments = BTreeMap::from([("x-user".to_owned(), "42".to_owned())]);
    for tag in [
        CallTag::none(),
        CallTag::new("gray", false),
        CallTag::new("blue", true),
    ] {
        let call = CallFacts {
            consumer_app: &consumer.app,
            consumer_host: &consumer.host,
            consumer_params: &consumer.params,
            method: Some("SayHello"),
            attachments: &attachments,
            tag: &tag,
        };
        let routing = route(
            &set,
            &call,
            &providers,
            &[true, true, configured[2].is_none()],
        );
        for choice in &routing.choices {
            assert!(choice.indices.iter().all(|&i| i < providers.len()));
        }
        assert_eq!(routing.routed_out.len(), providers.len());
    }
}
