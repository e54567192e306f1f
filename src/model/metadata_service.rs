//! Which MetadataService an instance serves, and whether this crate can call it.
//!
//! A consumer of this crate speaks one contract: `MetadataServiceV2` (protobuf) over Triple or
//! gRPC. Dubbo instances advertise theirs in two metadata entries:
//!
//! * [`keys::METADATA_SERVICE_URL_PARAMS`]: a JSON object with the MetadataService's
//!   `protocol`, `port` and `version`. Dubbo Java serves it over `dubbo` (Hessian, contract
//!   V1) unless `dubbo.application.metadata-service-protocol` says `tri`; dubbo-go likewise.
//! * [`keys::META_V`]: `2.0.0` when the instance serves `MetadataServiceV2`, which is how Dubbo
//!   Java's and dubbo-go's consumers choose the contract (`1.0.0` or absent: V1 only).
//!
//! The contract is V2 when `meta-v` or the url-params `version` is `2.0.0`; V1 when either
//! names another version, or when neither says and the protocol is not Triple or gRPC; V2
//! when neither says and the protocol is Triple or gRPC. An instance with no url-params at
//! all is taken to serve V2 over Triple on its own port (the layout's default).

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::model::{ServiceInstance, keys};

/// The contract version of `MetadataServiceV2`.
pub const METADATA_SERVICE_V2: &str = keys::META_V_2;
/// The contract version of Dubbo's original, Hessian-serialized `MetadataService`.
pub const METADATA_SERVICE_V1: &str = "1.0.0";

/// What an instance says about its MetadataService.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataServiceAdvert {
    /// The protocol it is served over (`tri` when not said).
    pub protocol: String,
    /// The contract: `2.0.0`, `1.0.0`, or whatever else the instance wrote.
    pub version: String,
    /// The port to dial.
    pub port: u16,
}

impl MetadataServiceAdvert {
    /// Reads the advert from an instance's metadata. Malformed url-params count as none.
    pub fn of(instance: &ServiceInstance) -> Self {
        let params: BTreeMap<String, serde_json::Value> = instance
            .metadata
            .get(keys::METADATA_SERVICE_URL_PARAMS)
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or_default();
        let text = |key: &str| match params.get(key) {
            Some(serde_json::Value::String(s)) if !s.is_empty() => Some(s.clone()),
            Some(serde_json::Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
        let protocol = text("protocol").unwrap_or_else(|| "tri".to_owned());
        let meta_v = instance
            .metadata
            .get(keys::META_V)
            .filter(|v| !v.is_empty())
            .map(str::to_owned);
        let url_v = text("version");
        let v2 = Some(METADATA_SERVICE_V2);
        let version = if meta_v.as_deref() == v2 || url_v.as_deref() == v2 {
            METADATA_SERVICE_V2.to_owned()
        } else if let Some(said) = meta_v.or(url_v) {
            said
        } else if is_grpc_compatible(&protocol) {
            METADATA_SERVICE_V2.to_owned()
        } else {
            METADATA_SERVICE_V1.to_owned()
        };
        MetadataServiceAdvert {
            protocol,
            version,
            port: instance.metadata_service_port(),
        }
    }

    /// The port to dial when this crate can speak the advertised MetadataService; otherwise
    /// an [`Error::UnsupportedMetadataService`] naming what was found.
    pub fn check(&self, address: &str) -> Result<u16> {
        let v2 = self.version == METADATA_SERVICE_V2;
        if v2 && is_grpc_compatible(&self.protocol) {
            return Ok(self.port);
        }
        let contract = match self.version.as_str() {
            METADATA_SERVICE_V2 => "V2".to_owned(),
            METADATA_SERVICE_V1 => "V1".to_owned(),
            other => format!("version {}", Error::shorten(other)),
        };
        let need = if is_grpc_compatible(&self.protocol) {
            "MetadataServiceV2"
        } else {
            "tri"
        };
        Err(Error::UnsupportedMetadataService {
            address: address.to_owned(),
            protocol: Error::shorten(&self.protocol),
            contract,
            need,
        })
    }
}

/// Whether a protocol name is one a tonic client can speak: Dubbo's Triple or gRPC.
pub fn is_grpc_compatible(protocol: &str) -> bool {
    matches!(protocol, "tri" | "grpc")
}

impl ServiceInstance {
    /// The port of the instance's MetadataService when it serves `MetadataServiceV2` over
    /// Triple or gRPC; else [`Error::UnsupportedMetadataService`] (see
    /// [`MetadataServiceAdvert`]).
    pub fn metadata_service_target(&self) -> Result<u16> {
        MetadataServiceAdvert::of(self).check(&self.key_address())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn advert(url_params: Option<&str>, meta_v: Option<&str>) -> Result<u16> {
        let mut i = ServiceInstance::new("a", "10.0.0.7", 20880);
        if let Some(p) = url_params {
            i.metadata
                .insert(keys::METADATA_SERVICE_URL_PARAMS.into(), p.into());
        }
        if let Some(v) = meta_v {
            i.metadata.insert(keys::META_V.into(), v.into());
        }
        i.metadata_service_target()
    }

    #[test]
    fn v2_over_tri_or_grpc_is_dialled_on_its_port() {
        let tri = r#"{"port":"20881","protocol":"tri","version":"2.0.0"}"#;
        assert_eq!(advert(Some(tri), Some("2.0.0")).unwrap(), 20881);
        // Dubbo Java 3.3: url-params of the V1 URL, `meta-v` says V2 is served too.
        let java = r#"{"port":"50051","protocol":"tri","version":"1.0.0"}"#;
        assert_eq!(advert(Some(java), Some("2.0.0")).unwrap(), 50051);
        assert_eq!(advert(Some(r#"{"protocol":"grpc"}"#), None).unwrap(), 20880);
        assert_eq!(advert(None, None).unwrap(), 20880);
        assert_eq!(advert(Some("not json"), None).unwrap(), 20880);
    }

    #[test]
    fn anything_else_fails_in_words() {
        let dubbo = r#"{"port":"20880","protocol":"dubbo","version":"1.0.0"}"#;
        let e = advert(Some(dubbo), Some("1.0.0")).unwrap_err();
        assert!(
            e.to_string()
                .contains("MetadataService over dubbo (V1) is not supported; need tri"),
            "{e}"
        );
        assert!(e.to_string().contains("10.0.0.7:20880"), "{e}");
        let e = advert(Some(r#"{"protocol":"dubbo"}"#), None).unwrap_err();
        assert!(e.to_string().contains("over dubbo (V1)"), "{e}");
        let e = advert(Some(r#"{"protocol":"tri","version":"1.0.0"}"#), None).unwrap_err();
        assert!(
            e.to_string()
                .contains("over tri (V1) is not supported; need MetadataServiceV2"),
            "{e}"
        );
        let e = advert(Some(r#"{"protocol":"rest"}"#), Some("3.1")).unwrap_err();
        assert!(e.to_string().contains("over rest (version 3.1)"), "{e}");
        assert!(!e.is_transient());
    }
}
