//! The pure model: service info, match key, metadata info, revision, instance, endpoint.
//! No I/O happens here.

mod endpoint;
mod instance;
pub mod keys;
mod metadata_info;
pub mod names;
pub mod revision;
mod service_info;

pub use endpoint::Endpoint;
pub use instance::{ProtocolPort, ServiceInstance, StorageType};
pub use metadata_info::MetadataInfo;
pub use revision::{EMPTY_REVISION, revision};
pub use service_info::{DEFAULT_PROTOCOL, ServiceInfo, match_key};
