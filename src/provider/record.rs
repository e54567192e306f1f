//! The instance record's well-known metadata, computed from the exports. Pure: no I/O.
//!
//! Dubbo consumers (Java's `ServiceInstancesChangedListener`, dubbo-go) do not read a
//! service's own port from the metadata: they take the instance port, or the port that
//! `dubbo.endpoints` gives for the service's protocol. So that list names each protocol's
//! real port, and `dubbo.metadata-service.url-params` names where and how MetadataService
//! itself is served.

use std::collections::{BTreeMap, HashMap};

use crate::model::PROVIDER_REVISION_RULE;
use crate::model::{MetadataInfo, ProtocolPort, ServiceInfo, StorageType, keys};

/// The protocol MetadataService is served with: gRPC-compatible Triple.
pub(super) const METADATA_SERVICE_PROTOCOL: &str = "tri";

/// The metadata map of the instance record: the user's extra entries, then the well-known
/// keys (which the user cannot override) derived from `current`, and the start time when
/// known (`started_at_ms` > 0).
pub(super) fn instance_metadata(
    extra: &BTreeMap<String, String>,
    current: &MetadataInfo,
    storage_type: StorageType,
    instance_port: u16,
    metadata_port: u16,
    started_at_ms: u64,
) -> BTreeMap<String, String> {
    let mut metadata = extra.clone();
    if started_at_ms > 0 {
        metadata.insert(keys::TIMESTAMP.into(), started_at_ms.to_string());
    }
    metadata.insert(keys::REVISION.into(), current.revision.clone());
    metadata.insert(keys::STORAGE_TYPE.into(), storage_type.as_str().into());
    metadata.insert(keys::META_V.into(), keys::META_V_2.into());
    metadata.insert(
        keys::REVISION_RULE.into(),
        PROVIDER_REVISION_RULE.name().into(),
    );
    let endpoints = protocol_ports(current.services.values().map(|s| &**s), instance_port);
    metadata.insert(
        keys::ENDPOINTS.into(),
        serde_json::to_string(&endpoints).unwrap_or_else(|_| "[]".into()),
    );
    let url_params = serde_json::json!({
        "port": metadata_port.to_string(),
        "protocol": METADATA_SERVICE_PROTOCOL,
        "version": keys::META_V_2,
    });
    metadata.insert(
        keys::METADATA_SERVICE_URL_PARAMS.into(),
        url_params.to_string(),
    );
    metadata
}

/// One entry per protocol, in protocol order: the port its services listen on (a service's
/// own port, else the instance port). Services without a protocol are left out.
///
/// A reader takes one port per protocol, so when services of one protocol listen on several
/// ports the entry names the port most of them use (the lowest on a tie); the others are
/// still reached by consumers that read each service's own port, as this crate's do.
pub(super) fn protocol_ports<'a>(
    services: impl IntoIterator<Item = &'a ServiceInfo>,
    instance_port: u16,
) -> Vec<ProtocolPort> {
    let mut uses: BTreeMap<&str, HashMap<u16, usize>> = BTreeMap::new();
    for service in services {
        if service.protocol.is_empty() {
            continue;
        }
        let port = if service.port > 0 {
            service.port
        } else {
            instance_port
        };
        *uses
            .entry(service.protocol.as_str())
            .or_default()
            .entry(port)
            .or_default() += 1;
    }
    uses.into_iter()
        .filter_map(|(protocol, ports)| {
            let (port, _) = ports
                .into_iter()
                .max_by_key(|&(port, count)| (count, std::cmp::Reverse(port)))?;
            Some(ProtocolPort {
                port,
                protocol: protocol.to_owned(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(port: u16, protocol: &str) -> ProtocolPort {
        ProtocolPort {
            port,
            protocol: protocol.into(),
        }
    }

    #[test]
    fn each_protocol_gets_the_port_its_services_listen_on() {
        let services = [
            ServiceInfo::new("a.Tri"),
            ServiceInfo::new("b.Tri"),
            ServiceInfo::new("c.Dubbo")
                .with_protocol("dubbo")
                .with_port(20880),
            ServiceInfo::new("d.Rest")
                .with_protocol("rest")
                .with_port(8080),
            ServiceInfo::new("e.None").with_protocol(""),
        ];
        assert_eq!(
            protocol_ports(&services, 50051),
            [
                entry(20880, "dubbo"),
                entry(8080, "rest"),
                entry(50051, "tri")
            ]
        );
    }

    #[test]
    fn a_protocol_on_several_ports_names_the_most_used_one() {
        let services = [
            ServiceInfo::new("a.A").with_port(7001),
            ServiceInfo::new("b.B").with_port(7002),
            ServiceInfo::new("c.C").with_port(7002),
            ServiceInfo::new("d.D"),
        ];
        assert_eq!(protocol_ports(&services, 50051), [entry(7002, "tri")]);
        let tie = [
            ServiceInfo::new("a.A").with_port(7002),
            ServiceInfo::new("b.B"),
        ];
        assert_eq!(protocol_ports(&tie, 50051), [entry(7002, "tri")]);
    }

    #[test]
    fn the_url_params_name_the_metadata_service_port_protocol_and_version() {
        let info = MetadataInfo::new(
            "shop",
            [ServiceInfo::new("a.Dubbo")
                .with_protocol("dubbo")
                .with_port(20880)],
        )
        .unwrap();
        let metadata = instance_metadata(
            &BTreeMap::new(),
            &info,
            StorageType::Local,
            50051,
            50052,
            1_764_579_600_000,
        );
        assert_eq!(metadata["timestamp"], "1764579600000");
        let params: BTreeMap<String, String> =
            serde_json::from_str(&metadata[keys::METADATA_SERVICE_URL_PARAMS]).unwrap();
        assert_eq!(params["port"], "50052");
        assert_eq!(params["protocol"], "tri");
        assert_eq!(params["version"], "2.0.0");
        assert_eq!(
            metadata[keys::ENDPOINTS],
            r#"[{"port":20880,"protocol":"dubbo"}]"#
        );
    }
}
