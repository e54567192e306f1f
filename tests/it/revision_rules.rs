//! The revision rules beyond `sha256-v1`: the published `sha256-v2` vectors, the two
//! `sha256-v1` collisions that `sha256-v2` separates, Dubbo Java's MD5 rule, and the diff an
//! operator reads to see why two revisions differ.

use introspect::model::PROVIDER_REVISION_RULE;
use introspect::model::revision::canonical_text;
use introspect::model::revision_diff::{canonical_forms, diff};
use introspect::model::revision_java;
use introspect::model::{Declared, RevisionRule, Verification, verify};
use introspect::{MetadataInfo, ServiceInfo};
use proptest::prelude::*;
use serde::Deserialize;

#[derive(Deserialize)]
struct Vectors {
    rule: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    description: String,
    app: String,
    services: Vec<ServiceInfo>,
    canonical_hex: Option<String>,
    revision: String,
}

#[test]
fn every_published_v2_vector_matches() {
    let vectors: Vectors = serde_json::from_str(include_str!("data/revision_v2.json")).unwrap();
    assert_eq!(vectors.rule, "sha256-v2");
    assert!(vectors.cases.len() >= 12, "vector file looks truncated");
    for case in vectors.cases {
        let info =
            MetadataInfo::new_with_rule(case.app.clone(), case.services, RevisionRule::Sha256V2)
                .unwrap();
        assert_eq!(
            RevisionRule::Sha256V2
                .canonical_bytes(&info)
                .map(hex::encode),
            case.canonical_hex,
            "{}",
            case.description
        );
        assert_eq!(info.revision, case.revision, "{}", case.description);
        assert_eq!(
            verify(Declared::of(Some("sha256-v2")), &case.revision, &info),
            Verification::Verified(RevisionRule::Sha256V2),
            "{}",
            case.description
        );
    }
}

fn one(service: ServiceInfo) -> MetadataInfo {
    MetadataInfo::new("shop", [service]).unwrap()
}

/// Both pairs share a `sha256-v1` text, hence a `sha256-v1` revision; under `sha256-v2` they
/// differ, so a consumer verifying `sha256-v2` cannot be handed the other configuration.
#[test]
fn the_two_v1_collision_pairs_differ_under_v2() {
    let pairs = [
        (
            one(ServiceInfo::new("shop.OrderService").with_param("a", "1, b=2")),
            one(ServiceInfo::new("shop.OrderService")
                .with_param("a", "1")
                .with_param("b", "2")),
        ),
        (
            one(ServiceInfo::new("shop.OrderService")
                .with_port(10)
                .with_path("foo")),
            one(ServiceInfo::new("shop.OrderService")
                .with_port(1)
                .with_path("0foo")),
        ),
    ];
    for (a, b) in pairs {
        assert_ne!(a, b);
        assert_eq!(
            canonical_text(&a.app, &a.services),
            canonical_text(&b.app, &b.services)
        );
        assert_eq!(a.revision, b.revision, "sha256-v1 collides");
        let (va, vb) = (
            a.computed_revision_under(RevisionRule::Sha256V2),
            b.computed_revision_under(RevisionRule::Sha256V2),
        );
        assert_ne!(va, vb, "sha256-v2 tells them apart");
        // A v2 consumer handed the other configuration rejects it.
        assert_eq!(
            verify(Declared::of(Some("sha256-v2")), &va, &b),
            Verification::Rejected(RevisionRule::Sha256V2)
        );
        assert_eq!(
            verify(Declared::of(Some("sha256-v2")), &va, &a),
            Verification::Verified(RevisionRule::Sha256V2)
        );
    }
}

/// Expected values computed with a JVM: `java.util.TreeMap` for the service and param order
/// and text, `java.security.MessageDigest` MD5 in lowercase hex, following Dubbo Java 3.2's
/// `MetadataInfo#calAndGetRevision` and `ServiceInfo#toDescString`
/// (apache/dubbo, dubbo-metadata/dubbo-metadata-api/src/main/java/org/apache/dubbo/metadata/MetadataInfo.java;
/// `RevisionResolver.calRevision` hashes with `MD5Utils`, lowercase digits).
#[test]
fn java_md5_revisions_match_a_jvm() {
    let cases = [
        (
            MetadataInfo::new("shop-orders", [ServiceInfo::new("shop.OrderService")]).unwrap(),
            "shop-ordersshop.OrderService:tri0shop.OrderService{}",
            "a888753e8f528e081833a0082c659444",
        ),
        (
            // Java keeps every served param, `pid` included.
            MetadataInfo {
                app: "shop-orders".into(),
                revision: String::new(),
                services: [
                    ServiceInfo::new("shop.OrderService")
                        .with_group("blue")
                        .with_version("1.0.0")
                        .with_port(50051)
                        .with_param("timeout", "3000")
                        .with_param("retries", "2")
                        .with_param("pid", "42"),
                    ServiceInfo::new("shop.CartService").with_port(50051),
                ]
                .into_iter()
                .map(|s| (s.match_key(), s.into()))
                .collect(),
            },
            "shop-ordersblue/shop.OrderService:1.0.0:tri50051shop.OrderService{pid=42, retries=2, timeout=3000}shop.CartService:tri50051shop.CartService{}",
            "cc243176eb97415e04ced4c3a02a3f65",
        ),
        (
            // Java orders by UTF-16 units: U+10000 (a surrogate pair) before U+FF61.
            MetadataInfo::new(
                "shop",
                [ServiceInfo::new("shop.OrderService")
                    .with_param("\u{10000}", "astral")
                    .with_param("\u{FF61}", "bmp")],
            )
            .unwrap(),
            "shopshop.OrderService:tri0shop.OrderService{\u{10000}=astral, \u{FF61}=bmp}",
            "08306978f04a16022c0b9d332a1210c0",
        ),
    ];
    for (info, text, md5) in cases {
        assert_eq!(
            revision_java::canonical_text(&info.app, &info.services).as_deref(),
            Some(text)
        );
        assert_eq!(info.computed_revision_under(RevisionRule::JavaMd5), md5);
        assert_eq!(
            verify(Declared::Nothing, md5, &info),
            Verification::Verified(RevisionRule::JavaMd5)
        );
    }
}

#[test]
fn providers_use_v2() {
    assert_eq!(PROVIDER_REVISION_RULE, RevisionRule::Sha256V2);
    assert_eq!(PROVIDER_REVISION_RULE.name(), "sha256-v2");
}

#[test]
fn the_revision_diff_explains_two_revisions() {
    let before = MetadataInfo::new(
        "shop",
        [ServiceInfo::new("shop.OrderService").with_param("timeout", "3000")],
    )
    .unwrap();
    let after = MetadataInfo::new(
        "shop",
        [
            ServiceInfo::new("shop.OrderService").with_param("timeout", "5000"),
            ServiceInfo::new("shop.PayService"),
        ],
    )
    .unwrap();
    assert_ne!(before.revision, after.revision);
    let d = diff(&before, &after);
    assert_eq!(d.only_after, ["shop.PayService:tri"]);
    let change = &d.changed["shop.OrderService:tri"][0];
    assert_eq!(
        (
            change.field.as_str(),
            change.before.as_deref(),
            change.after.as_deref()
        ),
        ("param timeout", Some("3000"), Some("5000"))
    );
    let forms = canonical_forms(&before);
    assert_eq!(forms.len(), 3);
    assert_eq!(
        forms[0].canonical.as_deref(),
        Some("shopshop.OrderService:tri0shop.OrderService{timeout=3000}")
    );
    assert!(forms[0].matches_claimed && !forms[1].matches_claimed);
    assert!(
        forms[1]
            .canonical
            .as_ref()
            .unwrap()
            .starts_with("000000097368613235362d7632")
    );
}

fn arb_service() -> impl Strategy<Value = ServiceInfo> {
    (
        "[a-c]{1,2}",
        "[a-c]{0,1}",
        0u16..12,
        "[0-9a-c,= ]{0,3}",
        prop::collection::btree_map("[a-c,= ]{1,3}", "[0-9a-c,= ]{0,3}", 0..3),
    )
        .prop_map(|(name, group, port, path, params)| ServiceInfo {
            name: format!("x.{name}"),
            group,
            port,
            path,
            params,
            ..ServiceInfo::new("x")
        })
}

proptest! {
    /// Distinct exports never share canonical bytes: the framing is injective.
    #[test]
    fn v2_canonical_bytes_are_injective(
        a in prop::collection::vec(arb_service(), 1..3),
        b in prop::collection::vec(arb_service(), 1..3),
    ) {
        let a = MetadataInfo::new("app", a).unwrap();
        let b = MetadataInfo::new("app", b).unwrap();
        let same_content = a.services == b.services;
        prop_assert_eq!(
            RevisionRule::Sha256V2.canonical_bytes(&a) == RevisionRule::Sha256V2.canonical_bytes(&b),
            same_content
        );
    }
}

#[test]
fn v2_order_is_utf8_byte_order() {
    // U+FF61 (EF BD A1) sorts before U+10000 (F0 90 80 80) by bytes; Java would swap them.
    let info = MetadataInfo::new(
        "shop",
        [ServiceInfo::new("shop.OrderService")
            .with_param("\u{10000}", "astral")
            .with_param("\u{FF61}", "bmp")],
    )
    .unwrap();
    let bytes = RevisionRule::Sha256V2.canonical_bytes(&info).unwrap();
    let at = |needle: &str| {
        bytes
            .windows(needle.len())
            .position(|w| w == needle.as_bytes())
            .unwrap()
    };
    assert!(at("\u{FF61}") < at("\u{10000}"));
}
