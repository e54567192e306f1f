//! Who an xDS client is, as rules see a consumer (pure): the convention by which a node
//! says it, read from what every xDS client sends, its `node` and the address it calls
//! from.
//!
//! * `metadata.application` (a string): the consumer's app. Conditions on `application`
//!   and configurator items' `applications` match it, and the rules keyed by it
//!   (`{app}.configurators`, `{app}.condition-router`) are the ones applied.
//! * `metadata.host`, else the address the stream comes from: the consumer's host, as
//!   configurator items' `addresses` and conditions on `host` match it.
//! * every other string field of `metadata`: a parameter of the consumer's URL, as a
//!   condition's `when` side reads it (`region: hz`).
//! * `locality`: its `region`, `zone` and `sub_zone`, as the parameters of those names,
//!   unless the metadata gives them.
//!
//! What the library sets on every consumer URL (`interface`, `path`, `side`, `protocol`,
//! `version`, `group`, `dubbo.tag`, ...) cannot be set this way. A node's values are the
//! client's own word: keys and values that are not plain (over 128 bytes, other than
//! letters, digits, `.`, `_` and `-` for keys; over 1 KiB or with control characters for
//! values) are left out, as are fields past [`MAX_NODE_PARAMS`].

use std::collections::BTreeMap;
use std::net::IpAddr;

use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::protobuf::value::Kind;
use introspect::governance::ConsumerIdentity;

/// The most consumer parameters one node sets.
pub const MAX_NODE_PARAMS: usize = 64;
/// The metadata field naming the consumer's app.
pub const APPLICATION_FIELD: &str = "application";
/// The metadata field naming the consumer's host.
pub const HOST_FIELD: &str = "host";

/// Keys the library sets on a consumer URL itself: a node cannot set them.
const RESERVED: [&str; 12] = [
    "application",
    "host",
    "interface",
    "path",
    "side",
    "protocol",
    "version",
    "group",
    "dubbo.tag",
    "dubbo.force.tag",
    "register.ip",
    "pid",
];

/// What a node says of its consumer. See the module docs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct NodeFacts {
    /// Its app, when it names one.
    pub app: Option<String>,
    /// Its host: named, else the address it calls from.
    pub host: Option<String>,
    /// Parameters of its URL.
    pub params: BTreeMap<String, String>,
}

fn plain_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 128
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

fn plain_value(value: &str) -> bool {
    !value.is_empty() && value.len() <= 1024 && !value.chars().any(char::is_control)
}

impl NodeFacts {
    /// What `node`, calling from `peer`, says of its consumer.
    pub fn of(node: Option<&Node>, peer: Option<IpAddr>) -> NodeFacts {
        let mut facts = NodeFacts {
            host: peer.map(|ip| ip.to_string()),
            ..NodeFacts::default()
        };
        let Some(node) = node else {
            return facts;
        };
        let fields = node.metadata.as_ref().map(|m| &m.fields);
        for (key, value) in fields.into_iter().flatten() {
            let Some(Kind::StringValue(value)) = &value.kind else {
                continue;
            };
            if !plain_key(key) || !plain_value(value) {
                continue;
            }
            match key.as_str() {
                APPLICATION_FIELD => facts.app = Some(value.clone()),
                HOST_FIELD => facts.host = Some(value.clone()),
                _ if RESERVED.contains(&key.as_str()) => {}
                _ if facts.params.len() < MAX_NODE_PARAMS => {
                    facts.params.insert(key.clone(), value.clone());
                }
                _ => {}
            }
        }
        if let Some(locality) = &node.locality {
            for (key, value) in [
                ("region", &locality.region),
                ("zone", &locality.zone),
                ("sub_zone", &locality.sub_zone),
            ] {
                if plain_value(value) && facts.params.len() < MAX_NODE_PARAMS {
                    facts
                        .params
                        .entry(key.to_owned())
                        .or_insert_with(|| value.clone());
                }
            }
        }
        facts
    }

    /// `base` (the server's consumer of a service) as this node says it is: its app, its
    /// host, its parameters over the base's own.
    pub fn apply(&self, base: &ConsumerIdentity) -> ConsumerIdentity {
        let mut identity = base.clone();
        if let Some(app) = &self.app {
            identity.app = app.clone();
            identity
                .params
                .insert(APPLICATION_FIELD.to_owned(), app.clone());
        }
        if let Some(host) = &self.host {
            identity.host = host.clone();
        }
        for (key, value) in &self.params {
            identity.params.insert(key.clone(), value.clone());
        }
        identity
    }
}

#[cfg(test)]
mod tests {
    use envoy_types::pb::envoy::config::core::v3::Locality;
    use envoy_types::pb::google::protobuf::{Struct, Value};

    use super::*;

    fn string(value: &str) -> Value {
        Value {
            kind: Some(Kind::StringValue(value.to_owned())),
        }
    }

    fn node(fields: &[(&str, Value)], locality: Option<Locality>) -> Node {
        Node {
            id: "n".into(),
            metadata: Some(Struct {
                fields: fields
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), v.clone()))
                    .collect(),
            }),
            locality,
            ..Default::default()
        }
    }

    #[test]
    fn a_node_names_its_app_host_and_parameters() {
        let n = node(
            &[
                ("application", string("web")),
                ("env", string("gray")),
                (
                    "weight",
                    Value {
                        kind: Some(Kind::NumberValue(3.0)),
                    },
                ),
            ],
            Some(Locality {
                region: "hz".into(),
                zone: "a".into(),
                ..Default::default()
            }),
        );
        let facts = NodeFacts::of(Some(&n), Some("10.0.0.9".parse().unwrap()));
        assert_eq!(facts.app.as_deref(), Some("web"));
        assert_eq!(
            facts.host.as_deref(),
            Some("10.0.0.9"),
            "the peer's address"
        );
        assert_eq!(
            facts.params,
            BTreeMap::from([
                ("env".to_owned(), "gray".to_owned()),
                ("region".to_owned(), "hz".to_owned()),
                ("zone".to_owned(), "a".to_owned()),
            ]),
            "strings only"
        );
        let base = ConsumerIdentity::new(Some("server".into()), Some("10.0.0.1".into()));
        let identity = facts.apply(&base);
        assert_eq!(identity.app, "web");
        assert_eq!(identity.params["application"], "web");
        assert_eq!(identity.host, "10.0.0.9");
        assert_eq!(identity.params["region"], "hz");
        assert_eq!(identity.params["side"], "consumer");
    }

    #[test]
    fn hostile_or_reserved_fields_are_left_out() {
        let long = "x".repeat(2_000);
        let mut fields = vec![
            ("interface", string("evil.Service")),
            ("dubbo.tag", string("gray")),
            ("bad key", string("v")),
            ("ctl", string("a\nb")),
            ("big", string(&long)),
            ("host", string("10.9.9.9")),
        ];
        let names: Vec<String> = (0..200).map(|i| format!("k{i}")).collect();
        for name in &names {
            fields.push((name.as_str(), string("v")));
        }
        let facts = NodeFacts::of(Some(&node(&fields, None)), None);
        assert_eq!(
            facts.host.as_deref(),
            Some("10.9.9.9"),
            "named over the peer"
        );
        assert_eq!(facts.params.len(), MAX_NODE_PARAMS);
        for key in ["interface", "dubbo.tag", "bad key", "ctl", "big"] {
            assert!(!facts.params.contains_key(key), "{key}");
        }
        assert_eq!(NodeFacts::of(None, None), NodeFacts::default());
    }
}
