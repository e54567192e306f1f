//! The instance record on ZooKeeper: Curator's `ServiceInstance` JSON with Dubbo's
//! `ZookeeperInstance` payload. Pure: no I/O.
//!
//! Dubbo Java 3.3 registers through Curator 5's `ServiceDiscoveryImpl`, whose default
//! serializer (`JsonInstanceSerializer` in compatible mode) writes Jackson's form of
//! `OldServiceInstance`:
//!
//! ```json
//! {"name":"shop","id":"10.0.0.7:20880","address":"10.0.0.7","port":20880,"sslPort":null,
//!  "payload":{"@class":"org.apache.dubbo.registry.zookeeper.ZookeeperInstance",
//!             "id":"10.0.0.7:20880","name":"shop","metadata":{"dubbo.metadata.revision":"…"}},
//!  "registrationTimeUTC":1700000000000,"serviceType":"DYNAMIC","uriSpec":null}
//! ```
//!
//! The payload's `@class` is Jackson's type id: a Java reader casts the payload to that class
//! and fails the whole app's list on a record without it, so this crate always writes it.
//! dubbo-go 3.3 writes `{"name","id","address","port","payload","tag"}` (Go's
//! `encoding/json`, `omitempty`: no `sslPort`, `serviceType`, `uriSpec`, and no
//! `registrationTimeUTC` since it writes 0), its payload a Go map (keys sorted: `@class`,
//! `id`, `metadata`, `name`). Both are read; unknown fields are ignored. The record has no
//! `enabled`: a draining instance says so with the `introspect.stopping` metadata key
//! (Curator's own `enabled`, written outside compatible mode, is honoured when present).
//!
//! Other Curator users register under the same default root (Spring Cloud ZooKeeper writes
//! `/services/{name}` with a payload of class
//! `org.springframework.cloud.zookeeper.discovery.ZookeeperInstance`): a record whose
//! payload names a class other than [`PAYLOAD_CLASS`] is not a Dubbo instance and is
//! refused ([`from_json`] fails saying so), so that a list skips and reports it like any
//! unreadable record. A payload without `@class` is read: older dubbo-go releases wrote
//! none.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::{InstanceMetadata, ServiceInstance};

/// The payload class Dubbo Java casts to.
pub const PAYLOAD_CLASS: &str = "org.apache.dubbo.registry.zookeeper.ZookeeperInstance";
/// Curator's service type of an ephemeral instance.
pub const SERVICE_TYPE: &str = "DYNAMIC";

/// Curator's `ServiceInstance` as Dubbo Java writes it, field by field in its order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Written<'a> {
    name: &'a str,
    id: &'a str,
    address: &'a str,
    port: u16,
    ssl_port: Option<u16>,
    payload: WrittenPayload<'a>,
    #[serde(rename = "registrationTimeUTC")]
    registration_time_utc: i64,
    service_type: &'static str,
    uri_spec: Option<()>,
}

/// Dubbo's `ZookeeperInstance`, with Jackson's type id first.
#[derive(Serialize)]
struct WrittenPayload<'a> {
    #[serde(rename = "@class")]
    class: &'static str,
    id: &'a str,
    name: &'a str,
    metadata: &'a InstanceMetadata,
}

/// The record of `instance`, registered at `registration_time_ms` (milliseconds since the
/// Unix epoch, UTC). Metadata keys are written sorted, as Dubbo's `getSortedMetadata`.
pub fn to_json(instance: &ServiceInstance, registration_time_ms: i64) -> Vec<u8> {
    let id = instance.key_address();
    let record = Written {
        name: &instance.service_name,
        id: &id,
        address: &instance.host,
        port: instance.port,
        ssl_port: None,
        payload: WrittenPayload {
            class: PAYLOAD_CLASS,
            id: &id,
            name: &instance.service_name,
            metadata: &instance.metadata,
        },
        registration_time_utc: registration_time_ms,
        service_type: SERVICE_TYPE,
        uri_spec: None,
    };
    serde_json::to_vec(&record).expect("a record always serializes")
}

/// The fields of a record a reader needs, in either writer's shape.
#[derive(Deserialize)]
struct Read {
    name: String,
    address: String,
    port: u16,
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    payload: Option<ReadPayload>,
}

#[derive(Deserialize)]
struct ReadPayload {
    /// Jackson's type id: Dubbo's class, or absent (older dubbo-go).
    #[serde(default, rename = "@class")]
    class: Option<String>,
    #[serde(default)]
    metadata: Option<InstanceMetadata>,
}

/// Parses and validates a record; unknown fields are ignored, a `null` or missing metadata
/// map reads as empty. Fails on a record over `limits`, one that does not parse, one whose
/// payload is of another class than Dubbo's (another Curator user's record, see the module
/// docs), or one whose names would break the layout.
pub fn from_json(bytes: &[u8], limits: &Limits) -> Result<ServiceInstance> {
    limits.check_size("instance record", bytes.len(), limits.max_instance_bytes)?;
    let record: Read = serde_json::from_slice(bytes)
        .map_err(|e| Error::unparsable("ZooKeeper instance record", e))?;
    if let Some(class) = record.payload.as_ref().and_then(|p| p.class.as_deref())
        && class != PAYLOAD_CLASS
    {
        return Err(Error::malformed(
            "ZooKeeper instance record",
            format!(
                "its payload is of class {:?}, not Dubbo's {PAYLOAD_CLASS} (a record another \
                 Curator user, such as Spring Cloud ZooKeeper, wrote under the same root)",
                Error::shorten(class)
            ),
        ));
    }
    let metadata = record
        .payload
        .and_then(|payload| payload.metadata)
        .unwrap_or_default();
    limits.check_size(
        "instance metadata entries",
        metadata.len(),
        limits.max_params,
    )?;
    let instance = ServiceInstance {
        service_name: record.name,
        host: record.address,
        port: record.port,
        enabled: record.enabled.unwrap_or(true),
        healthy: true,
        metadata,
    };
    instance.validate()?;
    Ok(instance)
}

/// Parses the record stored at child `address` of `app`'s node: like [`from_json`], and the
/// record must be the one of that app and address.
pub fn parse_child(
    app: &str,
    address: &str,
    bytes: &[u8],
    limits: &Limits,
) -> std::result::Result<ServiceInstance, String> {
    let instance = from_json(bytes, limits).map_err(|e| e.to_string())?;
    if instance.service_name != app || !instance.is_at(address) {
        return Err(format!(
            "record of {}/{} stored under another node",
            Error::shorten(&instance.service_name),
            Error::shorten(&instance.key_address())
        ));
    }
    Ok(instance)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::keys;

    fn instance() -> ServiceInstance {
        let mut i = ServiceInstance::new("shop", "10.0.0.7", 20880);
        i.metadata.insert(keys::REVISION.into(), "abc".into());
        i.metadata.insert("b".into(), "2".into());
        i
    }

    #[test]
    fn written_as_curator_compatible_mode_in_field_order() {
        let text = String::from_utf8(to_json(&instance(), 1_700_000_000_000)).unwrap();
        assert_eq!(
            text,
            r#"{"name":"shop","id":"10.0.0.7:20880","address":"10.0.0.7","port":20880,"sslPort":null,"payload":{"@class":"org.apache.dubbo.registry.zookeeper.ZookeeperInstance","id":"10.0.0.7:20880","name":"shop","metadata":{"b":"2","dubbo.metadata.revision":"abc"}},"registrationTimeUTC":1700000000000,"serviceType":"DYNAMIC","uriSpec":null}"#
        );
        assert_eq!(
            from_json(text.as_bytes(), &Limits::default()).unwrap(),
            instance()
        );
    }

    #[test]
    fn go_shape_and_nulls_read() {
        let go = br#"{"name":"shop","id":"10.0.0.7:20880","address":"10.0.0.7","port":20880,"payload":{"@class":"org.apache.dubbo.registry.zookeeper.ZookeeperInstance","id":"10.0.0.7:20880","metadata":{"b":"2","dubbo.metadata.revision":"abc"},"name":"shop"},"tag":"blue"}"#;
        assert_eq!(from_json(go, &Limits::default()).unwrap(), instance());
        let bare = br#"{"name":"shop","address":"h","port":1,"payload":{"metadata":null}}"#;
        assert!(
            from_json(bare, &Limits::default())
                .unwrap()
                .metadata
                .is_empty()
        );
        let disabled = br#"{"name":"shop","address":"h","port":1,"enabled":false}"#;
        assert!(
            !from_json(disabled, &Limits::default())
                .unwrap()
                .accepts_calls()
        );
    }

    #[test]
    fn a_record_of_another_payload_class_is_refused_saying_whose() {
        let limits = Limits::default();
        let spring = br#"{"name":"shop","id":"10.0.0.7:8080","address":"10.0.0.7","port":8080,"sslPort":null,"payload":{"@class":"org.springframework.cloud.zookeeper.discovery.ZookeeperInstance","id":"shop","name":"shop","metadata":{"instance_status":"UP"}},"registrationTimeUTC":1700000000000,"serviceType":"DYNAMIC","uriSpec":{"parts":[]}}"#;
        let error = from_json(spring, &limits).unwrap_err().to_string();
        assert!(
            error.contains("org.springframework.cloud.zookeeper.discovery.ZookeeperInstance"),
            "{error}"
        );
        assert!(error.contains("not Dubbo's"), "{error}");
        let odd = br#"{"name":"shop","address":"h","port":1,"payload":{"@class":7}}"#;
        assert!(
            from_json(odd, &limits).is_err(),
            "a class that is no string"
        );
        // Dubbo's class, and none at all (older dubbo-go), are read.
        assert!(from_json(&to_json(&instance(), 0), &limits).is_ok());
        let classless = br#"{"name":"shop","id":"h:1","address":"h","port":1,"payload":{"id":"h:1","name":"shop","metadata":{}}}"#;
        assert!(from_json(classless, &limits).is_ok());
    }

    #[test]
    fn hostile_records_fail_cleanly() {
        let limits = Limits::default();
        for bad in [
            &b""[..],
            b"null",
            b"[]",
            br#"{"name":"a/b","address":"h","port":1}"#,
            br#"{"name":"a","address":"h","port":0}"#,
            br#"{"name":"a","address":"h","port":70000}"#,
            br#"{"name":"a","address":"","port":1}"#,
            br#"{"name":"a","address":"h","port":1,"payload":{"metadata":{"k":1}}}"#,
            br#"{"name":"a","address":"h","port":1,"payload":"x"}"#,
        ] {
            assert!(
                from_json(bad, &limits).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let huge = vec![b' '; limits.max_instance_bytes + 1];
        assert!(matches!(
            from_json(&huge, &limits),
            Err(Error::TooLarge { .. })
        ));
        let json = to_json(&instance(), 0);
        assert!(parse_child("shop", "10.0.0.7:20880", &json, &limits).is_ok());
        let err = parse_child("shop", "10.0.0.8:20880", &json, &limits).unwrap_err();
        assert!(err.contains("another node"), "{err}");
        assert!(parse_child("other", "10.0.0.7:20880", &json, &limits).is_err());
    }
}
