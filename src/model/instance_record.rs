//! The instance record shapes Dubbo implementations write under `/services/{app}/{host}:{port}`,
//! read into one [`ServiceInstance`].
//!
//! Two shapes are in the wild:
//!
//! * **Dubbo Java 3.x** serializes its `DefaultServiceInstance` with camel-case names:
//!   `{"serviceName", "host", "port", "enabled", "healthy", "metadata", ...}` plus fields a
//!   consumer does not need (`name`, `id`, `registryCluster`, `address`, ...). This crate writes
//!   the same names.
//! * **dubbo-go 3.x** marshals its `DefaultServiceInstance` (package `registry`) with Go's
//!   `encoding/json` and no JSON tags, so the field names are the Go names:
//!   `{"ID", "ServiceName", "Host", "Port", "Weight", "Enable", "Healthy", "Metadata",
//!   "ServiceMetadata", "Address", "GroupName", "Tag"}`. Note `Enable`, not `enabled`. A nil
//!   Go map is written as `null` (`"Metadata": null`), a nil pointer too
//!   (`"ServiceMetadata": null`); the record ends with a newline.
//!
//! Both spellings of each field are accepted; `null` reads as the field's default (an empty
//! metadata map, `true` for the two flags); every other field is ignored, whatever its type.
//! A record giving one field under both spellings is malformed.
//!
//! [`ServiceInstance::from_json`] reads a record in the plain form (strings without `\u`
//! escapes) in one pass of its own; any other record, and any it cannot read, is read again
//! by serde alone, so the result, and the error of a record refused, are serde's.

use serde::Deserialize;

use super::plain_json::Cursor;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::{InstanceMetadata, ServiceInstance};

impl ServiceInstance {
    /// Parses and validates the JSON form; unknown fields (Dubbo writes several) are ignored.
    pub fn from_json(bytes: &[u8], limits: &Limits) -> Result<Self> {
        limits.check_size("instance record", bytes.len(), limits.max_instance_bytes)?;
        let instance = read(bytes).map_err(|e| Error::unparsable("instance record", e))?;
        if instance.metadata.len() > limits.max_params {
            return Err(Error::TooLarge {
                what: "instance metadata entries",
                size: instance.metadata.len(),
                limit: limits.max_params,
            });
        }
        instance.validate()?;
        Ok(instance)
    }
}

/// One instance record, as serde reads it (or refuses it).
fn read(json: &[u8]) -> serde_json::Result<ServiceInstance> {
    match read_plain(json) {
        Some(instance) => Ok(instance),
        None => serde_json::from_slice(json),
    }
}

/// The record when it is in the plain form; `None` for any other text.
fn read_plain(json: &[u8]) -> Option<ServiceInstance> {
    /// Fills an empty slot: a field given twice (under either spelling) is serde's error.
    fn once<T>(slot: &mut Option<T>, value: T) -> Option<()> {
        slot.is_none().then(|| *slot = Some(value))
    }
    let mut cursor = Cursor::new(std::str::from_utf8(json).ok()?);
    let (mut service_name, mut host, mut port) = (None, None, None);
    let (mut enabled, mut healthy, mut metadata) = (None, None, None);
    cursor.expect(b'{')?;
    loop {
        let key = cursor.bare_string()?;
        cursor.expect(b':')?;
        match key {
            "serviceName" | "ServiceName" => {
                let mut name = String::new();
                cursor.string(&mut name)?;
                once(&mut service_name, name)?;
            }
            "host" | "Host" => {
                let mut name = String::new();
                cursor.string(&mut name)?;
                once(&mut host, name)?;
            }
            "port" | "Port" => once(&mut port, cursor.u16()?)?,
            "enabled" | "Enable" => once(&mut enabled, cursor.flag()?)?,
            "healthy" | "Healthy" => once(&mut healthy, cursor.flag()?)?,
            "metadata" | "Metadata" => {
                let read = if cursor.null() {
                    None
                } else {
                    Some(InstanceMetadata::read_plain(&mut cursor)?)
                };
                once(&mut metadata, read)?;
            }
            _ => cursor.skip_value()?,
        }
        if !cursor.next_item(b'}')? {
            break;
        }
    }
    cursor.at_end().then_some(())?;
    let record = InstanceRecord {
        service_name: service_name?,
        host: host?,
        port: port?,
        enabled: enabled.flatten(),
        healthy: healthy.flatten(),
        metadata: metadata.flatten(),
    };
    Some(record.into())
}

/// The fields of an instance record a consumer reads, under either spelling.
#[derive(Deserialize)]
pub(super) struct InstanceRecord {
    #[serde(rename = "serviceName", alias = "ServiceName")]
    service_name: String,
    #[serde(alias = "Host")]
    host: String,
    #[serde(alias = "Port")]
    port: u16,
    #[serde(default, alias = "Enable")]
    enabled: Option<bool>,
    #[serde(default, alias = "Healthy")]
    healthy: Option<bool>,
    #[serde(default, alias = "Metadata")]
    metadata: Option<InstanceMetadata>,
}

impl From<InstanceRecord> for ServiceInstance {
    fn from(record: InstanceRecord) -> Self {
        ServiceInstance {
            service_name: record.service_name,
            host: record.host,
            port: record.port,
            enabled: record.enabled.unwrap_or(true),
            healthy: record.healthy.unwrap_or(true),
            metadata: record.metadata.unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::limits::Limits;
    use crate::model::ServiceInstance;

    fn parse(json: &str) -> crate::error::Result<ServiceInstance> {
        ServiceInstance::from_json(json.as_bytes(), &Limits::default())
    }

    #[test]
    fn go_names_and_nulls_read_like_java_names() {
        let go = parse(
            r#"{"ID":"","ServiceName":"a","Host":"h","Port":1,"Weight":0,"Enable":false,
            "Healthy":true,"Metadata":null,"ServiceMetadata":null,"Address":"","GroupName":"",
            "Tag":""}"#,
        )
        .unwrap();
        assert_eq!(
            (go.service_name.as_str(), go.host.as_str(), go.port),
            ("a", "h", 1)
        );
        assert!(!go.enabled && go.healthy && go.metadata.is_empty());
        let nulls =
            parse(r#"{"serviceName":"a","host":"h","port":1,"enabled":null,"healthy":null}"#)
                .unwrap();
        assert!(nulls.enabled && nulls.healthy);
    }

    #[test]
    fn metadata_reads_whatever_its_order_and_the_last_of_equal_keys_wins() {
        let i = parse(
            r#"{"serviceName":"a","host":"h","port":1,
            "metadata":{"z":"1","a":"2","m":"3","a":"4"}}"#,
        )
        .unwrap();
        let entries: Vec<(&str, &str)> = i.metadata.iter().collect();
        assert_eq!(entries, [("a", "4"), ("m", "3"), ("z", "1")]);
        let empty = parse(r#"{"serviceName":"a","host":"h","port":1,"metadata":{}}"#).unwrap();
        assert!(empty.metadata.is_empty());
    }

    /// A record of random fields in random order: (JSON text, whether the plain reader
    /// must answer for it).
    fn record() -> impl proptest::strategy::Strategy<Value = (String, bool)> {
        use proptest::prelude::*;
        let name = prop_oneof![Just("serviceName"), Just("ServiceName")];
        let text = "[a-z.:-]{0,12}";
        let flag = prop_oneof![Just("true"), Just("false"), Just("null")];
        let entry = ("[a-z.-]{0,10}", "\\PC{0,16}|[\"\\\\/\n]{0,3}")
            .prop_map(|(k, v)| format!("{}:{}", serde_json::json!(k), serde_json::json!(v)));
        // The metadata object, and whether it is in the plain form.
        let metadata = prop_oneof![
            proptest::collection::vec(entry, 0..6)
                .prop_map(|e| (format!("{{{}}}", e.join(",")), true)),
            Just(("null".to_owned(), true)),
            Just((r#"{"k":"\u0041"}"#.to_owned(), false)),
            Just((r#"{"k":1}"#.to_owned(), false)),
            Just((r#"["k"]"#.to_owned(), false)),
        ];
        // Fields a consumer does not read, and whether they are in the plain form.
        let unknown = prop_oneof![
            Just((r#""name":"x""#, true)),
            Just((r#""ServiceMetadata":{"a":[1,{"b":null}],"c":"d\n"}"#, true)),
            Just((r#""ServiceMetadata":{"c":"\u0041"}"#, false)),
            Just((r#""Weight":-1.5e3"#, true)),
            Just((r#""Tag":[]"#, true)),
        ];
        (
            (name, text, prop_oneof![Just("host"), Just("Host")], text),
            (prop_oneof![Just("port"), Just("Port")], 0u32..70_000),
            proptest::option::of((prop_oneof![Just("enabled"), Just("Enable")], flag.clone())),
            proptest::option::of((prop_oneof![Just("healthy"), Just("Healthy")], flag)),
            proptest::option::of((prop_oneof![Just("metadata"), Just("Metadata")], metadata)),
            proptest::collection::vec(unknown, 0..3),
            proptest::collection::vec(proptest::prelude::any::<u32>(), 16),
        )
            .prop_map(
                |((n, app, h, host), (p, port), enabled, healthy, metadata, unknown, order)| {
                    let mut fields = vec![
                        format!("\"{n}\":{}", serde_json::json!(app)),
                        format!("\"{h}\":{}", serde_json::json!(host)),
                        format!("\"{p}\":{port}"),
                    ];
                    fields.extend(enabled.map(|(k, v)| format!("\"{k}\":{v}")));
                    fields.extend(healthy.map(|(k, v)| format!("\"{k}\":{v}")));
                    let plain = metadata.as_ref().is_none_or(|(_, (_, plain))| *plain)
                        && unknown.iter().all(|(_, plain)| *plain);
                    fields.extend(metadata.map(|(k, (v, _))| format!("\"{k}\":{v}")));
                    fields.extend(unknown.into_iter().map(|(field, _)| field.to_owned()));
                    let mut ordered: Vec<(u32, String)> = order.into_iter().zip(fields).collect();
                    ordered.sort();
                    let fields: Vec<String> = ordered.into_iter().map(|(_, f)| f).collect();
                    (
                        format!("{{{}}}\n", fields.join(",")),
                        plain && port <= u32::from(u16::MAX),
                    )
                },
            )
    }

    proptest::proptest! {
        /// Wherever the plain path answers, serde alone reads the same instance; and it
        /// answers for every well-formed record whose metadata is in the plain form.
        #[test]
        fn the_plain_path_reads_what_serde_reads(
            (json, answers) in record(),
            mutation in 0..3u8,
            at: proptest::sample::Index,
            byte: u8,
        ) {
            let mut input = json.into_bytes();
            let at = at.index(input.len() + 1);
            match mutation {
                1 if at < input.len() => drop(input.remove(at)),
                2 => input.insert(at, byte),
                _ => {}
            }
            let serde = serde_json::from_slice::<ServiceInstance>(&input).ok();
            match super::read_plain(&input) {
                Some(plain) => proptest::prop_assert_eq!(Some(plain), serde),
                None => proptest::prop_assert!(
                    mutation != 0 || !answers,
                    "no answer for {}", String::from_utf8_lossy(&input)
                ),
            }
        }
    }

    #[test]
    fn both_spellings_take_the_plain_path() {
        for json in [
            r#"{"name":"a","serviceName":"a","host":"h","port":1,"metadata":{"k":"[{\"p\":1}]"}}"#,
            r#"{"ServiceName":"a","Host":"h","Port":1,"Metadata":null,"ServiceMetadata":null}"#,
        ] {
            assert!(super::read_plain(json.as_bytes()).is_some(), "{json}");
        }
    }

    #[test]
    fn a_field_under_both_spellings_or_a_null_name_is_malformed() {
        for bad in [
            r#"{"serviceName":"a","ServiceName":"b","host":"h","port":1}"#,
            r#"{"ServiceName":null,"Host":"h","Port":1}"#,
            r#"{"ServiceName":"a","Host":"h","Port":-1}"#,
            r#"{"ServiceName":"a","Host":"h","Port":1,"Metadata":{"k":1}}"#,
            r#"{"ServiceName":"a","Host":"h","Port":1,"Metadata":["k"]}"#,
            r#"{"ServiceName":"a","Host":"h","Port":1,"Metadata":"k"}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
