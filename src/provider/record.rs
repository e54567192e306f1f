//! The instance record's well-known metadata, computed from the exports. Pure: no I/O.

use std::collections::BTreeMap;

use crate::model::revision::REVISION_RULE_SHA256_V1;
use crate::model::{MetadataInfo, StorageType, keys};

/// The metadata map of the instance record: the user's extra entries, then the well-known
/// keys (which the user cannot override) derived from `current`.
pub(super) fn instance_metadata(
    extra: &BTreeMap<String, String>,
    current: &MetadataInfo,
    storage_type: StorageType,
    instance_port: u16,
    metadata_port: u16,
) -> BTreeMap<String, String> {
    let mut metadata = extra.clone();
    metadata.insert(keys::REVISION.into(), current.revision.clone());
    metadata.insert(keys::STORAGE_TYPE.into(), storage_type.as_str().into());
    metadata.insert(keys::META_V.into(), keys::META_V_2.into());
    metadata.insert(keys::REVISION_RULE.into(), REVISION_RULE_SHA256_V1.into());
    let mut protocols: Vec<&str> = current
        .services
        .values()
        .map(|s| s.protocol.as_str())
        .collect();
    protocols.sort_unstable();
    protocols.dedup();
    let endpoints: Vec<serde_json::Value> = protocols
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| serde_json::json!({ "port": instance_port, "protocol": p }))
        .collect();
    metadata.insert(
        keys::ENDPOINTS.into(),
        serde_json::Value::from(endpoints).to_string(),
    );
    let url_params = serde_json::json!({
        "port": metadata_port.to_string(),
        "protocol": "tri",
        "version": keys::META_V_2,
    });
    metadata.insert(
        keys::METADATA_SERVICE_URL_PARAMS.into(),
        url_params.to_string(),
    );
    metadata
}
