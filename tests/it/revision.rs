//! The `sha256-v1` revision rule: the shared test vectors and its properties.

use std::collections::BTreeMap;

use introspect::model::revision::canonical_text;
use introspect::{MetadataInfo, ServiceInfo};
use proptest::prelude::*;
use serde::Deserialize;

#[derive(Deserialize)]
struct Vectors {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    description: String,
    app: String,
    services: Vec<ServiceInfo>,
    canonical_text: Option<String>,
    revision: String,
}

#[test]
fn every_shared_vector_matches() {
    let vectors: Vectors = serde_json::from_str(include_str!("data/revision.json")).unwrap();
    assert!(vectors.cases.len() >= 5, "vector file looks truncated");
    for case in vectors.cases {
        let info = MetadataInfo::new(case.app.clone(), case.services).unwrap();
        assert_eq!(
            canonical_text(&info.app, &info.services),
            case.canonical_text,
            "{}",
            case.description
        );
        assert_eq!(info.revision, case.revision, "{}", case.description);
        info.verify_revision().unwrap();
    }
}

fn base() -> Vec<ServiceInfo> {
    vec![
        ServiceInfo::new("shop.OrderService")
            .with_param("timeout", "3000")
            .with_param("retries", "2"),
        ServiceInfo::new("shop.CartService").with_version("1.0"),
    ]
}

fn rev(services: Vec<ServiceInfo>) -> String {
    MetadataInfo::new("shop", services).unwrap().revision
}

#[test]
fn no_services_is_revision_zero() {
    assert_eq!(rev(vec![]), "0");
}

#[test]
fn volatile_params_do_not_change_the_revision() {
    let mut with_pid = base();
    with_pid[0].params.insert("pid".into(), "4242".into());
    with_pid[1]
        .params
        .insert("timestamp".into(), "1700000000".into());
    assert_eq!(rev(with_pid), rev(base()));
}

#[test]
fn any_real_change_changes_the_revision() {
    let original = rev(base());
    let mut port = base();
    port[0].port = 50052;
    let mut path = base();
    path[0].path = "/orders".into();
    let mut param = base();
    param[0].params.insert("timeout".into(), "5000".into());
    let mut more = base();
    more.push(ServiceInfo::new("shop.PayService"));
    let mut protocol = base();
    protocol[1].protocol = "grpc".into();
    for changed in [port, path, param, more, protocol] {
        assert_ne!(rev(changed), original);
    }
    assert_ne!(
        MetadataInfo::new("other", base()).unwrap().revision,
        original
    );
}

#[test]
fn revision_is_lowercase_sha256_hex() {
    let r = rev(base());
    assert_eq!(r.len(), 64);
    assert!(
        r.chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    );
}

fn arb_service() -> impl Strategy<Value = ServiceInfo> {
    (
        "[a-z]{1,6}\\.[A-Z][a-z]{0,6}",
        prop::option::of("[a-z]{1,4}"),
        prop::option::of("[0-9]\\.[0-9]"),
        prop::sample::select(vec!["tri", "grpc", ""]),
        prop::collection::btree_map("[a-z.]{1,6}", "[a-zA-Z0-9=, ]{0,6}", 0..4),
    )
        .prop_map(|(name, group, version, protocol, params)| {
            let mut s = ServiceInfo::new(name).with_protocol(protocol);
            s.group = group.unwrap_or_default();
            s.version = version.unwrap_or_default();
            s.params = params;
            s
        })
}

proptest! {
    #[test]
    fn order_of_services_and_params_does_not_matter(
        services in prop::collection::vec(arb_service(), 0..8),
        seed in any::<u64>(),
    ) {
        // Match keys must be unique for the order not to matter (the later one wins).
        let mut unique: BTreeMap<String, ServiceInfo> = BTreeMap::new();
        for s in services {
            unique.insert(s.match_key(), s);
        }
        let forward: Vec<ServiceInfo> = unique.values().cloned().collect();
        let mut shuffled = forward.clone();
        let len = shuffled.len();
        if len > 1 {
            for i in 0..len {
                shuffled.swap(i, (seed as usize).wrapping_add(i * 7) % len);
            }
        }
        shuffled.reverse();
        // Params rebuilt in reverse insertion order.
        let rebuilt: Vec<ServiceInfo> = shuffled
            .into_iter()
            .map(|mut s| {
                let params: Vec<_> = std::mem::take(&mut s.params).into_iter().rev().collect();
                for (k, v) in params {
                    s = s.with_param(k, v);
                }
                s
            })
            .collect();
        prop_assert_eq!(rev(forward), rev(rebuilt));
    }
}
