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

use serde::Deserialize;

use crate::model::{InstanceMetadata, ServiceInstance};

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
