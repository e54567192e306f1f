//! The pure model: service info, match key, metadata info, revision, instance, endpoint,
//! consumer record.
//! No I/O happens here.

mod authority;
pub mod consumer_record;
mod endpoint;
mod instance;
pub(crate) mod instance_metadata;
pub mod instance_record;
pub mod keys;
mod metadata_info;
pub mod metadata_service;
pub mod names;
mod plain_json;
pub mod provider_url;
pub mod provider_url_read;
mod report_key;
pub mod revision;
pub mod revision_diff;
pub mod revision_java;
mod revision_rule;
pub mod revision_v2;
mod service_info;
pub mod verification;

pub use authority::Authority;
pub use consumer_record::{ConsumedService, ConsumerRecord, endpoint_digest};
pub use endpoint::Endpoint;
pub(crate) use endpoint::INTERFACE_REVISION_PREFIX;
pub use instance::{ProtocolPort, ServiceInstance, StorageType};
pub use instance_metadata::InstanceMetadata;
pub use metadata_info::MetadataInfo;
pub use metadata_service::MetadataServiceAdvert;
pub use provider_url::ProviderUrl;
pub use report_key::ReportKey;
pub use revision::{EMPTY_REVISION, revision};
pub use revision_rule::{PROVIDER_REVISION_RULE, RevisionRule};
pub use service_info::{DEFAULT_PROTOCOL, ServiceInfo, match_key};
pub use verification::{Declared, Verification, verify};
