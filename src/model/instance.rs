//! A service instance: one running process of an app, in Dubbo's `DefaultServiceInstance`
//! JSON form (read in either shape Dubbo writes; see [`super::instance_record`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::model::instance_metadata::Known;
use crate::model::revision::EMPTY_REVISION;
use crate::model::{InstanceMetadata, keys, names};

/// Where a consumer reads an instance's metadata from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum StorageType {
    /// From the instance's own MetadataService (the default).
    #[default]
    Local,
    /// From the metadata report in the store, with the MetadataService as fallback.
    Remote,
}

impl StorageType {
    /// The value written under [`keys::STORAGE_TYPE`].
    pub fn as_str(self) -> &'static str {
        match self {
            StorageType::Local => "local",
            StorageType::Remote => "remote",
        }
    }
}

/// One protocol port of an instance, as listed under [`keys::ENDPOINTS`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProtocolPort {
    /// The port.
    pub port: u16,
    /// The protocol served on it.
    pub protocol: String,
}

/// One running process of an app: where it listens and its metadata map.
///
/// Written in Dubbo Java's camel-case form; read from Dubbo Java's and dubbo-go's forms.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    from = "super::instance_record::InstanceRecord"
)]
pub struct ServiceInstance {
    /// The app name.
    pub service_name: String,
    /// Host name or IP address.
    pub host: String,
    /// The instance's main port.
    pub port: u16,
    /// `false` while the instance drains before a graceful stop: route no new calls to it.
    pub enabled: bool,
    /// The instance's own view of its health.
    pub healthy: bool,
    /// The metadata map; see [`keys`] for the well-known entries.
    pub metadata: InstanceMetadata,
}

impl ServiceInstance {
    /// An enabled, healthy instance with an empty metadata map.
    pub fn new(app: impl Into<String>, host: impl Into<String>, port: u16) -> Self {
        ServiceInstance {
            service_name: app.into(),
            host: host.into(),
            port,
            enabled: true,
            healthy: true,
            metadata: InstanceMetadata::new(),
        }
    }

    /// Checks the names that go into the instance's key.
    pub fn validate(&self) -> Result<()> {
        names::validate_app(&self.service_name)?;
        names::validate_host(&self.host)?;
        names::validate_port(i64::from(self.port))?;
        names::validate_revision(self.revision())?;
        Ok(())
    }

    /// Whether the instance declares it is draining before a graceful stop
    /// ([`keys::STOPPING`] is `true`).
    pub fn is_stopping(&self) -> bool {
        self.metadata.known(Known::Stopping) == Some(keys::STOPPING_TRUE)
    }

    /// Whether new calls may go to the instance: enabled and not stopping. A record that
    /// fails this is on its way out gracefully; its removal is no expiry.
    pub fn accepts_calls(&self) -> bool {
        self.enabled && !self.is_stopping()
    }

    /// Marks the instance as draining before a graceful stop: `enabled: false` and
    /// [`keys::STOPPING`] `true`, so that readers of every record format see it.
    pub fn mark_stopping(&mut self) {
        self.enabled = false;
        self.metadata
            .insert(keys::STOPPING.into(), keys::STOPPING_TRUE.into());
    }

    /// `{host}:{port}` as registries key the instance: the last segment of its key, in
    /// Dubbo's form (an IPv6 host is not bracketed). Not dialable as such: the address
    /// to dial or show is [`ServiceInstance::authority`], bracketed as
    /// [`Endpoint::address`](crate::model::Endpoint::address) is.
    pub fn key_address(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// Whether `address` is exactly [`Self::key_address`] (`{host}:{port}`, the port in plain
    /// decimal), without building it: every record a consumer lists is checked against its
    /// key.
    pub fn is_at(&self, address: &str) -> bool {
        let Some(port) = address
            .strip_prefix(self.host.as_str())
            .and_then(|rest| rest.strip_prefix(':'))
        else {
            return false;
        };
        let plain = !port.is_empty()
            && port.len() <= 5
            && port.bytes().all(|b| b.is_ascii_digit())
            && (port == "0" || !port.starts_with('0'));
        plain && port.parse() == Ok(self.port)
    }

    /// Where the instance's record says it is, dialable (an IPv6 host bracketed): the key of
    /// a hold in consumer-side health.
    pub fn authority(&self) -> crate::model::Authority {
        crate::model::Authority::new(&self.host, self.port)
    }

    /// The revision; `0` when missing.
    pub fn revision(&self) -> &str {
        self.metadata
            .known(Known::Revision)
            .unwrap_or(EMPTY_REVISION)
    }

    /// The storage type; `local` unless the metadata says `remote`.
    pub fn storage_type(&self) -> StorageType {
        match self.metadata.known(Known::StorageType) {
            Some("remote") => StorageType::Remote,
            _ => StorageType::Local,
        }
    }

    /// The revision rule the instance declares under [`keys::REVISION_RULE`], if any (an empty
    /// value counts as none). See [`crate::model::verification`].
    pub fn declared_revision_rule(&self) -> Option<&str> {
        self.metadata
            .known(Known::RevisionRule)
            .filter(|rule| !rule.is_empty())
    }

    /// The revision rule the instance declares, read (see [`crate::model::verification`]).
    pub fn declared_rule(&self) -> crate::model::Declared {
        crate::model::Declared::of(self.declared_revision_rule())
    }

    /// Whether the instance declares that its revision follows the `sha256-v1` rule.
    pub fn declares_sha256_v1(&self) -> bool {
        self.metadata.known(Known::RevisionRule)
            == Some(crate::model::revision::REVISION_RULE_SHA256_V1)
    }

    /// The protocol ports under [`keys::ENDPOINTS`]; a malformed value counts as none.
    pub fn protocol_ports(&self) -> Vec<ProtocolPort> {
        self.metadata
            .get(keys::ENDPOINTS)
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default()
    }

    /// The port of the instance's MetadataService: the `port` of
    /// [`keys::METADATA_SERVICE_URL_PARAMS`], else the instance port.
    pub fn metadata_service_port(&self) -> u16 {
        self.metadata
            .get(keys::METADATA_SERVICE_URL_PARAMS)
            .and_then(|json| serde_json::from_str::<BTreeMap<String, serde_json::Value>>(json).ok())
            .and_then(|params| match params.get("port")? {
                serde_json::Value::String(s) => s.parse::<u16>().ok(),
                serde_json::Value::Number(n) => n.as_u64().and_then(|n| u16::try_from(n).ok()),
                _ => None,
            })
            .filter(|port| *port > 0)
            .unwrap_or(self.port)
    }

    /// The port serving `protocol` for a service that has no port of its own:
    /// [`keys::ENDPOINTS`] for the protocol, else the instance port.
    ///
    /// Called once per endpoint, so it reads the compact form Dubbo writes without a JSON
    /// parser, and any other text with one that builds no list and copies no protocol
    /// name; the answers are those of [`Self::protocol_ports`] (a malformed value counts as
    /// none).
    pub fn port_for_protocol(&self, protocol: &str) -> u16 {
        let Some(json) = self.metadata.known(Known::Endpoints) else {
            return self.port;
        };
        first_port_compact(json, protocol)
            .unwrap_or_else(|| first_port_parsed(json, protocol))
            .unwrap_or(self.port)
    }

    /// When the instance started, in ms since the epoch: its `timestamp` metadata, where
    /// Dubbo Java writes it; 0 when absent or not a number (no warm-up then, as in Java).
    pub fn started_at_ms(&self) -> u64 {
        self.metadata
            .known(Known::Timestamp)
            .and_then(|t| t.parse().ok())
            .unwrap_or(0)
    }

    /// The JSON form stored under the instance's key.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("instance always serializes")
    }
}

/// [`ServiceInstance::port_for_protocol`]'s answer read by the JSON parser: the first
/// nonzero port of `protocol` in a `dubbo.endpoints` value, `None` when there is none or the
/// value is malformed.
fn first_port_parsed(json: &str, protocol: &str) -> Option<u16> {
    use serde::de::{Deserializer as _, SeqAccess, Visitor};

    /// One entry of [`keys::ENDPOINTS`], borrowing its protocol from the JSON text.
    #[derive(Deserialize)]
    struct Entry<'a> {
        port: u16,
        #[serde(borrow)]
        protocol: std::borrow::Cow<'a, str>,
    }

    /// Reads every entry (so that a malformed one fails the whole value, as in
    /// [`ServiceInstance::protocol_ports`]) and keeps the first port of `protocol`.
    struct FirstPort<'p>(&'p str);

    impl<'de> Visitor<'de> for FirstPort<'_> {
        type Value = Option<u16>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an array of {port, protocol}")
        }

        fn visit_seq<A: SeqAccess<'de>>(
            self,
            mut entries: A,
        ) -> std::result::Result<Self::Value, A::Error> {
            let mut found = None;
            while let Some(entry) = entries.next_element::<Entry<'de>>()? {
                if found.is_none() && entry.port > 0 && entry.protocol == self.0 {
                    found = Some(entry.port);
                }
            }
            Ok(found)
        }
    }

    let mut reader = serde_json::Deserializer::from_str(json);
    reader
        .deserialize_seq(FirstPort(protocol))
        .ok()
        .filter(|_| reader.end().is_ok())
        .flatten()
}

/// [`ServiceInstance::port_for_protocol`]'s answer for a `dubbo.endpoints` value in the
/// compact form every Dubbo writes (`[{"port":20880,"protocol":"dubbo"},...]`: no
/// whitespace, those two keys in that order, plain decimal ports, protocols without
/// escapes), read without a JSON parser: the first nonzero port of `protocol`, if any.
/// `None` for any other text, which the parser then reads; in this form, the two agree.
fn first_port_compact(json: &str, protocol: &str) -> Option<Option<u16>> {
    let mut rest = json.strip_prefix('[')?;
    let mut found = None;
    if rest == "]" {
        return Some(None);
    }
    loop {
        rest = rest.strip_prefix(r#"{"port":"#)?;
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (port, after) = rest.split_at(digits);
        if digits == 0 || digits > 5 || (digits > 1 && port.starts_with('0')) {
            return None;
        }
        let port: u16 = port.parse().ok()?;
        rest = after.strip_prefix(r#","protocol":""#)?;
        let end = rest.find(|c: char| c == '"' || c == '\\' || c < ' ')?;
        let (name, after) = rest.split_at(end);
        rest = after.strip_prefix(r#""}"#)?;
        if found.is_none() && port > 0 && name == protocol {
            found = Some(port);
        }
        match rest.strip_prefix(',') {
            Some(next) => rest = next,
            None => return (rest == "]").then_some(found),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::limits::Limits;

    proptest::proptest! {
        /// Wherever the compact reading answers, the parser answers the same; and it
        /// answers for every list written the way Dubbo writes one.
        #[test]
        fn the_compact_reading_agrees_with_the_parser(
            entries in proptest::collection::vec((
                proptest::prop_oneof![0u32..3, 65_534u32..65_538, 0u32..70_000],
                "[ab]{0,1}|[ -~]{0,3}|\\PC{0,2}",
            ), 0..4),
            protocol in "[ab]{0,1}",
            edit in proptest::option::of((0usize..200, "[ -~]|\\PC")),
        ) {
            let mut json = String::from("[");
            for (i, (port, name)) in entries.iter().enumerate() {
                if i > 0 {
                    json.push(',');
                }
                json.push_str(&format!(r#"{{"port":{port},"protocol":"{name}"}}"#));
            }
            json.push(']');
            let written = entries.iter().all(|(port, name)| *port <= u32::from(u16::MAX)
                && serde_json::to_string(name).unwrap() == format!("\"{name}\""));
            if written {
                proptest::prop_assert!(first_port_compact(&json, &protocol).is_some(), "{}", json);
            }
            if let Some((at, text)) = edit {
                let at = json.char_indices().map(|(i, _)| i).nth(at % json.chars().count()).unwrap();
                json.insert_str(at, &text);
            }
            if let Some(found) = first_port_compact(&json, &protocol) {
                proptest::prop_assert_eq!(found, first_port_parsed(&json, &protocol), "{}", json);
            }
        }
    }

    #[test]
    fn the_stopping_marker_reads_like_disabled() {
        let mut i = ServiceInstance::new("a", "h", 1);
        assert!(i.accepts_calls() && !i.is_stopping());
        i.metadata.insert(keys::STOPPING.into(), "true".into());
        assert!(i.enabled && i.is_stopping() && !i.accepts_calls());
        i.metadata.insert(keys::STOPPING.into(), "false".into());
        assert!(i.accepts_calls());
        let mut j = ServiceInstance::new("a", "h", 1);
        j.mark_stopping();
        assert!(!j.enabled && j.is_stopping());
    }

    #[test]
    fn is_at_is_the_address_compared() {
        let i = ServiceInstance::new("a", "10.0.0.7", 80);
        for address in [
            "10.0.0.7:80",
            "10.0.0.7:080",
            "10.0.0.7:+80",
            "10.0.0.7:8",
            "10.0.0.7:800",
            "10.0.0.7",
            "10.0.0.7:",
            "10.0.0.70:80",
            "10.0.0.7:80 ",
            "x10.0.0.7:80",
            "::80",
        ] {
            assert_eq!(i.is_at(address), i.key_address() == address, "{address}");
        }
        let zero = ServiceInstance::new("a", "h", 0);
        assert!(zero.is_at("h:0") && !zero.is_at("h:00"));
        let v6 = ServiceInstance::new("a", "::1", 50051);
        assert!(v6.is_at("::1:50051") && !v6.is_at("[::1]:50051"));
    }

    #[test]
    fn json_round_trip() {
        let mut i = ServiceInstance::new("shop-orders", "10.0.0.7", 50051);
        i.metadata.insert(keys::REVISION.into(), "abc".into());
        let back = ServiceInstance::from_json(&i.to_json(), &Limits::default()).unwrap();
        assert_eq!(back, i);
        let text = String::from_utf8(i.to_json()).unwrap();
        assert!(text.contains(r#""serviceName":"shop-orders""#), "{text}");
    }

    #[test]
    fn parses_dubbo_form_with_unknown_fields() {
        let json = r#"{"name":"shop-orders","id":"10.0.0.7:20880","serviceName":"shop-orders",
            "host":"10.0.0.7","port":20880,"enabled":true,"healthy":true,
            "registryCluster":"default","address":"10.0.0.7:20880",
            "metadata":{"dubbo.metadata.revision":"f00d","dubbo.metadata.storage-type":"remote",
            "dubbo.endpoints":"[{\"port\":50052,\"protocol\":\"tri\"}]",
            "dubbo.metadata-service.url-params":"{\"port\":\"20881\",\"protocol\":\"tri\",\"version\":\"2.0.0\"}"}}"#;
        let i = ServiceInstance::from_json(json.as_bytes(), &Limits::default()).unwrap();
        assert_eq!(i.revision(), "f00d");
        assert_eq!(i.storage_type(), StorageType::Remote);
        assert_eq!(i.metadata_service_port(), 20881);
        assert_eq!(i.port_for_protocol("tri"), 50052);
        assert_eq!(i.port_for_protocol("grpc"), 20880);
    }

    #[test]
    fn port_for_protocol_skips_zero_ports_and_ignores_malformed_lists() {
        let mut i = ServiceInstance::new("a", "h", 1);
        let mut with = |endpoints: &str| {
            i.metadata.insert(keys::ENDPOINTS.into(), endpoints.into());
            (i.port_for_protocol("tri"), i.port_for_protocol("grpc"))
        };
        assert_eq!(
            with(r#"[{"port":0,"protocol":"tri"},{"port":7,"protocol":"tri","x":1}]"#),
            (7, 1)
        );
        assert_eq!(with(r#"[{"port":7,"protocol":"t\u0072i"}]"#), (7, 1));
        assert_eq!(
            with(r#"[{"port":7,"protocol":"tri"},{"port":"x"}]"#),
            (1, 1)
        );
        assert_eq!(with(r#"[{"port":7,"protocol":"tri"}] trailing"#), (1, 1));
        assert_eq!(with("{}"), (1, 1));
    }

    #[test]
    fn missing_flags_default_to_true_and_bad_records_fail() {
        let i = ServiceInstance::from_json(
            br#"{"serviceName":"a","host":"h","port":1}"#,
            &Limits::default(),
        )
        .unwrap();
        assert!(i.enabled && i.healthy);
        assert_eq!(i.revision(), "0");
        for bad in [
            &b"{"[..],
            b"[]",
            br#"{"serviceName":"a/b","host":"h","port":1}"#,
            br#"{"serviceName":"a","host":"h","port":70000}"#,
            br#"{"serviceName":"a","host":"h","port":0}"#,
        ] {
            assert!(ServiceInstance::from_json(bad, &Limits::default()).is_err());
        }
        let huge = vec![b' '; 100_000];
        assert!(matches!(
            ServiceInstance::from_json(&huge, &Limits::default()),
            Err(Error::TooLarge { .. })
        ));
    }
}
