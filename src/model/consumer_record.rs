//! The consumer record: what a consumer that asks to be seen
//! ([`ResolverBuilder::register_consumer`](crate::consumer::ResolverBuilder::register_consumer))
//! writes about itself, and the endpoint digest a console compares. Pure: no I/O.
//!
//! JSON, camel-case:
//!
//! ```json
//! {"app":"shop-web","id":"5f0c…","host":"10.0.0.9","registeredMs":1764600000000,
//!  "subscriptions":[{"interface":"shop.OrderService","group":"","version":"1.0",
//!    "protocol":"","digest":"3f2a9c0b7d1e4a55","endpoints":4,"position":1207,
//!    "changedMs":1764600004200,"rulesDigest":"9d1c07e4b2a3f618",
//!    "rules":["shop.OrderService:1.0:.condition-router"]}]}
//! ```
//!
//! `rulesDigest` and `rules` say which governance rules the subscription's balanced
//! channel routes by (the
//! [`rules_digest`](crate::governance::rules_digest()) of the rules in force, and
//! their keys); they are absent where the subscription has no balanced channel (or its
//! rules are not loaded yet), and in records of writers that predate them. Readers ignore
//! fields they do not know, so records of later writers parse too.
//!
//! Every record read from a registry is someone else's: [`ConsumerRecord::from_json`]
//! bounds its size and the number of subscriptions, and checks every name, so a hostile
//! record is refused with a clear error instead of reaching a console as is.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::{Endpoint, names};

/// Hex characters of an [`endpoint_digest`].
pub const DIGEST_LEN: usize = 16;
/// Longest consumer id accepted in a record (ids this crate writes have 32 characters).
pub const MAX_CONSUMER_ID_LEN: usize = 64;
/// Rule keys listed per subscription at most (the digest covers every rule in force; a
/// writer lists the first ones).
pub const MAX_RULE_KEYS: usize = 64;

/// The digest of an endpoint set: the first [`DIGEST_LEN`] lowercase hex characters of the
/// SHA-256 of the set's lines `{address} {revision}\n`, where `address` is
/// [`Endpoint::address`] (`host:port`, an IPv6 host in brackets) and `revision` the
/// endpoint's revision, sorted in byte order with duplicates removed.
///
/// Order-independent, so a console that resolves the same subscription computes the same
/// digest from its own endpoints and can tell whether a consumer routes to what the
/// registry holds now. The empty set's digest is `e3b0c44298fc1c14`.
pub fn endpoint_digest(endpoints: &[Endpoint]) -> String {
    digest_of(endpoints)
}

/// [`endpoint_digest`] of any collection of endpoints.
pub(crate) fn digest_of<'a>(endpoints: impl IntoIterator<Item = &'a Endpoint>) -> String {
    let mut lines: Vec<String> = endpoints
        .into_iter()
        .map(|e| format!("{} {}\n", e.address(), e.revision))
        .collect();
    lines.sort_unstable();
    lines.dedup();
    let mut hash = Sha256::new();
    for line in &lines {
        hash.update(line.as_bytes());
    }
    let mut digest = hex::encode(hash.finalize());
    digest.truncate(DIGEST_LEN);
    digest
}

/// One live subscription of a consumer, as its record shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumedService {
    /// The interface subscribed to.
    pub interface: String,
    /// The group asked for; empty: any.
    #[serde(default)]
    pub group: String,
    /// The version asked for; empty: any.
    #[serde(default)]
    pub version: String,
    /// The protocol asked for; empty: any.
    #[serde(default)]
    pub protocol: String,
    /// [`endpoint_digest`] of every endpoint the subscription holds, before consumer-side
    /// health (endpoints set aside for failed calls and instances held by the protections
    /// count).
    pub digest: String,
    /// How many endpoints that set has.
    pub endpoints: u64,
    /// The registry position the subscription has seen: the highest registry revision its
    /// apps were listed at (etcd and memory: the store revision; ZooKeeper: the highest
    /// zxid a list saw); `0` where the backend has none (Nacos). It moves with each list
    /// (the first, and each re-list after a broken watch), not with each watched change.
    #[serde(default)]
    pub position: i64,
    /// When the digest last changed, in milliseconds since the Unix epoch.
    pub changed_ms: u64,
    /// The [`rules_digest`](crate::governance::rules_digest()) of the governance
    /// rules the subscription's balanced channel routes by (the empty set's digest when it
    /// routes by none, rules watching off included). `None` when the subscription has no
    /// balanced channel, before its channel's first rules are loaded, and in records of
    /// earlier writers. With several channels over one subscription, the newest report of
    /// the live ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules_digest: Option<String>,
    /// The keys of those rules, in the order they apply (at most [`MAX_RULE_KEYS`]; empty
    /// with no rules, or no digest).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<String>,
    /// The level of discovery the set comes from (`application` or `interface`, see
    /// [`Level`](crate::governance::migration::Level)); `None` in records of earlier writers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<String>,
    /// The migration step in force (`FORCE_APPLICATION`, `APPLICATION_FIRST`,
    /// `FORCE_INTERFACE`); `None` in records of earlier writers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// The key of the migration rule the step comes from (`{app}.migration`); `None` when it
    /// is the consumer's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_rule: Option<String>,
}

/// What a consumer writes about itself. See the module docs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerRecord {
    /// The consumer's app.
    pub app: String,
    /// A random id, one per resolver: two consumers of one app on one host stay apart.
    pub id: String,
    /// The host the consumer runs on, as a user would recognise it.
    pub host: String,
    /// When it registered, in milliseconds since the Unix epoch.
    pub registered_ms: u64,
    /// Its live subscriptions.
    #[serde(default)]
    pub subscriptions: Vec<ConsumedService>,
}

impl ConsumerRecord {
    /// A record with no subscriptions yet.
    pub fn new(
        app: impl Into<String>,
        id: impl Into<String>,
        host: impl Into<String>,
        registered_ms: u64,
    ) -> Self {
        ConsumerRecord {
            app: app.into(),
            id: id.into(),
            host: host.into(),
            registered_ms,
            subscriptions: Vec::new(),
        }
    }

    /// Whether one of its subscriptions is to `interface`.
    pub fn consumes(&self, interface: &str) -> bool {
        self.subscriptions.iter().any(|s| s.interface == interface)
    }

    /// Checks every name: the app, the id (1 to [`MAX_CONSUMER_ID_LEN`] ASCII letters,
    /// digits, `-` or `_`), the host, and each subscription's interface, qualifiers,
    /// digests (1 to 64 lowercase hex characters) and rule keys (at most
    /// [`MAX_RULE_KEYS`], each [`names::validate_rule_key`]).
    pub fn validate(&self) -> Result<()> {
        names::validate_app(&self.app)?;
        validate_id(&self.id)?;
        names::validate_host(&self.host)?;
        for s in &self.subscriptions {
            names::validate_interface(&s.interface)?;
            names::validate_qualifier("group", &s.group)?;
            names::validate_qualifier("version", &s.version)?;
            names::validate_qualifier("protocol", &s.protocol)?;
            validate_digest("endpoint digest", &s.digest)?;
            if let Some(digest) = &s.rules_digest {
                validate_digest("rules digest", digest)?;
            }
            if s.rules.len() > MAX_RULE_KEYS {
                return Err(Error::TooLarge {
                    what: "rule keys of a consumer subscription",
                    size: s.rules.len(),
                    limit: MAX_RULE_KEYS,
                });
            }
            for key in &s.rules {
                names::validate_rule_key(key)?;
            }
            // Names, not parsed: a later writer's new level or step is shown as written.
            if let Some(level) = &s.level {
                names::validate_qualifier("level", level)?;
            }
            if let Some(step) = &s.step {
                names::validate_qualifier("migration step", step)?;
            }
            if let Some(key) = &s.step_rule {
                names::validate_rule_key(key)?;
            }
        }
        Ok(())
    }

    /// The record as JSON, checked first, and refused when over
    /// [`Limits::max_instance_bytes`] (a record is bounded like an instance's) or when it
    /// lists more than [`Limits::max_services`] subscriptions.
    pub fn to_json(&self, limits: &Limits) -> Result<Vec<u8>> {
        self.validate()?;
        self.check_count(limits)?;
        let json = serde_json::to_vec(self).map_err(|e| Error::unparsable("consumer record", e))?;
        limits.check_size("consumer record", json.len(), limits.max_instance_bytes)?;
        Ok(json)
    }

    /// Parses a record read from a registry: at most [`Limits::max_instance_bytes`], at
    /// most [`Limits::max_services`] subscriptions, every name checked.
    pub fn from_json(bytes: &[u8], limits: &Limits) -> Result<Self> {
        limits.check_size("consumer record", bytes.len(), limits.max_instance_bytes)?;
        let record: ConsumerRecord =
            serde_json::from_slice(bytes).map_err(|e| Error::unparsable("consumer record", e))?;
        record.check_count(limits)?;
        record.validate()?;
        Ok(record)
    }

    fn check_count(&self, limits: &Limits) -> Result<()> {
        limits.check_size(
            "consumer subscriptions",
            self.subscriptions.len(),
            limits.max_services,
        )
    }
}

/// Checks a digest of a record: 1 to 64 lowercase hex characters.
fn validate_digest(kind: &'static str, digest: &str) -> Result<()> {
    let hex = |c: char| c.is_ascii_digit() || ('a'..='f').contains(&c);
    if digest.is_empty() || digest.len() > 64 || !digest.chars().all(hex) {
        return Err(Error::InvalidName {
            kind,
            value: Error::shorten(digest),
            reason: "must be 1 to 64 lowercase hex characters",
        });
    }
    Ok(())
}

/// Checks a consumer id: 1 to [`MAX_CONSUMER_ID_LEN`] ASCII letters, digits, `-` or `_`.
pub fn validate_id(id: &str) -> Result<()> {
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    if id.is_empty() || id.len() > MAX_CONSUMER_ID_LEN || !id.chars().all(ok) {
        return Err(Error::InvalidName {
            kind: "consumer id",
            value: Error::shorten(id),
            reason: "must be 1 to 64 ASCII letters, digits, '-' or '_'",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::ServiceInfo;

    fn endpoint(host: &str, port: u16, revision: &str) -> Endpoint {
        Endpoint {
            app: Arc::from("shop"),
            host: Arc::from(host),
            port,
            instance_port: port,
            protocol: Arc::from("tri"),
            revision: Arc::from(revision),
            service: Arc::new(ServiceInfo::new("shop.OrderService")),
            timestamp: 0,
        }
    }

    fn record() -> ConsumerRecord {
        let mut r = ConsumerRecord::new("shop-web", "0123abcd", "10.0.0.9", 1_764_600_000_000);
        r.subscriptions.push(ConsumedService {
            interface: "shop.OrderService".into(),
            group: String::new(),
            version: "1.0".into(),
            protocol: String::new(),
            digest: "3f2a9c0b7d1e4a55".into(),
            endpoints: 4,
            position: 1207,
            changed_ms: 1_764_600_004_200,
            rules_digest: None,
            rules: Vec::new(),
            level: None,
            step: None,
            step_rule: None,
        });
        r
    }

    fn ruled() -> ConsumerRecord {
        let mut r = record();
        r.subscriptions[0].rules_digest = Some("9d1c07e4b2a3f618".into());
        r.subscriptions[0].rules = vec!["shop.OrderService:1.0:.condition-router".into()];
        r
    }

    #[test]
    fn the_digest_ignores_order_and_duplicates() {
        let a = endpoint("10.0.0.1", 1, "r1");
        let b = endpoint("::1", 2, "r2");
        let one = endpoint_digest(&[a.clone(), b.clone()]);
        assert_eq!(one, endpoint_digest(&[b.clone(), a.clone(), a.clone()]));
        assert_eq!(one.len(), DIGEST_LEN);
        assert_ne!(one, endpoint_digest(std::slice::from_ref(&a)));
        // Another revision at the same address is another set.
        assert_ne!(one, endpoint_digest(&[a, endpoint("::1", 2, "r3")]));
        assert_eq!(endpoint_digest(&[]), "e3b0c44298fc1c14");
    }

    #[test]
    fn the_digest_is_the_documented_hash() {
        let e = endpoint("::1", 50051, "abc");
        let text = "[::1]:50051 abc\n";
        let full = hex::encode(Sha256::digest(text.as_bytes()));
        assert_eq!(endpoint_digest(&[e]), full[..DIGEST_LEN]);
    }

    #[test]
    fn a_record_round_trips_in_camel_case() {
        let limits = Limits::default();
        let json = record().to_json(&limits).unwrap();
        let text = String::from_utf8(json.clone()).unwrap();
        for field in ["\"registeredMs\"", "\"changedMs\"", "\"position\":1207"] {
            assert!(text.contains(field), "{text}");
        }
        assert_eq!(ConsumerRecord::from_json(&json, &limits).unwrap(), record());
        assert!(record().consumes("shop.OrderService"));
        assert!(!record().consumes("shop.Other"));
    }

    #[test]
    fn the_rules_fields_are_optional_both_ways() {
        let limits = Limits::default();
        // Written only when known: a record without rules reads as before.
        let plain = String::from_utf8(record().to_json(&limits).unwrap()).unwrap();
        assert!(!plain.contains("rules"), "{plain}");
        let json = ruled().to_json(&limits).unwrap();
        let text = String::from_utf8(json.clone()).unwrap();
        assert!(
            text.contains("\"rulesDigest\":\"9d1c07e4b2a3f618\""),
            "{text}"
        );
        assert!(text.contains("\"rules\":[\"shop.OrderService:1.0:.condition-router\"]"));
        assert_eq!(ConsumerRecord::from_json(&json, &limits).unwrap(), ruled());
        // A record of an earlier writer parses, with no rules digest.
        let earlier = r#"{"app":"a","id":"x","host":"h","registeredMs":1,"subscriptions":
            [{"interface":"i","digest":"ab","endpoints":1,"changedMs":1}]}"#;
        let read = ConsumerRecord::from_json(earlier.as_bytes(), &limits).unwrap();
        assert_eq!(read.subscriptions[0].rules_digest, None);
        assert!(read.subscriptions[0].rules.is_empty());
        // A later writer's fields, in the record and in a subscription, are ignored.
        let later = r#"{"app":"a","id":"x","host":"h","registeredMs":1,"more":{},"subscriptions":
            [{"interface":"i","digest":"ab","endpoints":1,"changedMs":1,"rulesDigest":"cd",
              "rules":["i::.condition-router"],"rulesChangedMs":5,"next":[1]}]}"#;
        let read = ConsumerRecord::from_json(later.as_bytes(), &limits).unwrap();
        assert_eq!(read.subscriptions[0].rules_digest.as_deref(), Some("cd"));
        assert_eq!(read.subscriptions[0].rules, ["i::.condition-router"]);
    }

    #[test]
    fn hostile_rules_fields_are_refused() {
        let limits = Limits::default();
        let refused = |digest: &str, keys: &str| {
            let json = format!(
                r#"{{"app":"a","id":"x","host":"h","registeredMs":1,"subscriptions":
                [{{"interface":"i","digest":"ab","endpoints":1,"changedMs":1,
                   "rulesDigest":{digest},"rules":{keys}}}]}}"#
            );
            ConsumerRecord::from_json(json.as_bytes(), &limits)
        };
        assert!(refused("\"ab\"", "[]").is_ok());
        for digest in ["\"<b>\"", "\"\"", "\"AB\"", "1", "[]"] {
            assert!(refused(digest, "[]").is_err(), "{digest}");
        }
        for keys in [
            "[\"\"]",
            "[\"a b\"]",
            "[\"../x\"]",
            "[\"x\\u0000\"]",
            "\"x\"",
            "[1]",
        ] {
            assert!(refused("\"ab\"", keys).is_err(), "{keys}");
        }
        let long = format!("[\"{}\"]", "k".repeat(names::MAX_RULE_KEY_LEN + 1));
        assert!(matches!(
            refused("\"ab\"", &long),
            Err(Error::InvalidName { .. })
        ));
        let many = format!("[{}]", vec!["\"k\""; MAX_RULE_KEYS + 1].join(","));
        assert!(matches!(
            refused("\"ab\"", &many),
            Err(Error::TooLarge { .. })
        ));
        let mut writer = ruled();
        writer.subscriptions[0].rules = vec!["k".into(); MAX_RULE_KEYS + 1];
        assert!(writer.to_json(&limits).is_err(), "a writer checks too");
    }

    #[test]
    fn hostile_records_are_refused_with_a_reason() {
        let limits = Limits::default();
        let refused = |json: &str| ConsumerRecord::from_json(json.as_bytes(), &limits);
        assert!(matches!(refused("{not json"), Err(Error::Malformed { .. })));
        assert!(matches!(refused("[]"), Err(Error::Malformed { .. })));
        let bad_app = r#"{"app":"a/b","id":"x","host":"h","registeredMs":1}"#;
        assert!(matches!(refused(bad_app), Err(Error::InvalidName { .. })));
        let bad_id = r#"{"app":"a","id":"../x","host":"h","registeredMs":1}"#;
        assert!(matches!(refused(bad_id), Err(Error::InvalidName { .. })));
        let bad_host = r#"{"app":"a","id":"x","host":"","registeredMs":1}"#;
        assert!(refused(bad_host).is_err());
        let negative = r#"{"app":"a","id":"x","host":"h","registeredMs":-1}"#;
        assert!(matches!(refused(negative), Err(Error::Malformed { .. })));
        // Fields of a later version are ignored, not refused.
        let later = r#"{"app":"a","id":"x","host":"h","registeredMs":1,"extra":1}"#;
        assert!(refused(later).is_ok());
        let bad_digest = r#"{"app":"a","id":"x","host":"h","registeredMs":1,"subscriptions":
            [{"interface":"i","digest":"<script>","endpoints":1,"changedMs":1}]}"#;
        assert!(matches!(
            refused(bad_digest),
            Err(Error::InvalidName { .. })
        ));
        let bad_interface = r#"{"app":"a","id":"x","host":"h","registeredMs":1,"subscriptions":
            [{"interface":"i\u0000","digest":"ab","endpoints":1,"changedMs":1}]}"#;
        assert!(matches!(
            refused(bad_interface),
            Err(Error::InvalidName { .. })
        ));
        // Over the size limit: refused before parsing.
        let huge = format!(
            r#"{{"app":"a","id":"x","host":"{}","registeredMs":1}}"#,
            "h".repeat(limits.max_instance_bytes)
        );
        assert!(matches!(refused(&huge), Err(Error::TooLarge { .. })));
        // More subscriptions than the limit.
        let small = Limits {
            max_services: 1,
            ..Limits::default()
        };
        let mut two = record();
        two.subscriptions.push(two.subscriptions[0].clone());
        let json = two.to_json(&Limits::default()).unwrap();
        assert!(matches!(
            ConsumerRecord::from_json(&json, &small),
            Err(Error::TooLarge { .. })
        ));
        assert!(two.to_json(&small).is_err());
    }
}
