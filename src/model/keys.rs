//! Well-known keys of an instance's metadata map (Dubbo 3 compatible).

/// The instance's revision; `0` when it exports nothing.
pub const REVISION: &str = "dubbo.metadata.revision";
/// Where consumers read the metadata: `local` (the instance) or `remote` (the report).
pub const STORAGE_TYPE: &str = "dubbo.metadata.storage-type";
/// JSON array `[{"port":50051,"protocol":"tri"}]`: one entry per protocol, with the port
/// its services listen on (Dubbo consumers dial a protocol at that port).
pub const ENDPOINTS: &str = "dubbo.endpoints";
/// JSON object of strings with at least `port`, `protocol` and `version` of the
/// MetadataService.
pub const METADATA_SERVICE_URL_PARAMS: &str = "dubbo.metadata-service.url-params";
/// When the provider started, in ms since the epoch, where Dubbo Java writes it: consumers
/// warm the instance's weight up from it.
pub const TIMESTAMP: &str = "timestamp";
/// The MetadataService contract version the instance serves.
pub const META_V: &str = "meta-v";
/// Value of [`META_V`]: MetadataServiceV2.
pub const META_V_2: &str = "2.0.0";
/// The revision rule the instance follows, so that consumers can verify its revision.
pub const REVISION_RULE: &str = "introspect.revision-rule";
/// `true` while the instance drains before a graceful stop: readers treat it like
/// `enabled: false` (route no new calls to it, and its removal is no expiry). Providers of
/// this crate write it on every backend, beside `enabled: false` where the record has that
/// field; on ZooKeeper and Nacos, whose records carry no usable `enabled`, it is the only
/// sign of a graceful stop.
pub const STOPPING: &str = "introspect.stopping";
/// Value of [`STOPPING`] on a draining instance.
pub const STOPPING_TRUE: &str = "true";
