//! The cold resolve's second floor (scenario 5): a validating client's. The first floor is
//! the registry's raw read plus one MetadataService call, with no parsing at all; on the
//! memory store, where no network hides the client's own work, that is less than any
//! client that reads the records can do. This floor is the same raw read, then serde's
//! parse of every record's value (`serde_json::from_slice`) into [`MinimalInstance`], the
//! least a consumer keeps of an instance record, then the one MetadataService call, made at
//! the port, host and revision the floor parsed.
//!
//! It needs the records' text: it runs on the key-value stores (the memory store and etcd,
//! whose values are the instance JSON that `src/model` writes), not on ZooKeeper (Curator's
//! envelope around it) or Nacos (the SDK hands out its own types).

use serde::Deserialize;

use super::rig::Rig;
use super::*;

/// What a consumer needs of an instance record, owned (a consumer keeps it after the
/// read's buffers are gone): the app, where the instance listens, and the two metadata
/// entries that lead to its endpoints (the revision, and where its MetadataService is).
/// Every other field and entry is skipped by serde, which still checks its syntax.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MinimalInstance {
    service_name: String,
    host: String,
    port: u16,
    metadata: MinimalMetadata,
}

/// The metadata entries of [`MinimalInstance`].
#[derive(Deserialize)]
struct MinimalMetadata {
    /// `dubbo.metadata.revision`.
    #[serde(rename = "dubbo.metadata.revision")]
    revision: String,
    /// `dubbo.metadata-service.url-params`: a JSON object in a string, read for the one
    /// instance the floor calls (the resolver reads it once per revision).
    #[serde(rename = "dubbo.metadata-service.url-params")]
    url_params: String,
}

/// The part of `dubbo.metadata-service.url-params` the call needs.
#[derive(Deserialize)]
struct UrlParams {
    /// The MetadataService's port, as Dubbo and this crate write it: a string.
    port: String,
}

/// A record the floor refuses, as the error a validating client would return: invalid
/// data, which `?` turns into the crate's [`Error`] (through its `From<std::io::Error>`, so
/// that the floor depends on no constructor of the crate's errors).
fn malformed(reason: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, reason)
}

/// One measurement of the validating floor on `rig`: the raw read of the `n` instance
/// records, serde's parse and checks of every one, and one MetadataService call to the
/// first record's MetadataService. Returns how long the parse alone took and how long the
/// whole floor took. For rigs whose read holds the records' text
/// ([`Rig::record_values`]); on any other it fails.
pub async fn floor_once<R: Rig>(
    rig: &R,
    client: &MetadataClient,
    n: usize,
) -> Result<(Duration, Duration)> {
    let started = Instant::now();
    let read = rig.read_raw().await?;
    let parse_started = Instant::now();
    let values = R::record_values(&read).ok_or_else(|| malformed("no record text"))?;
    let mut instances = Vec::with_capacity(n);
    for value in values {
        let instance: MinimalInstance = serde_json::from_slice(value).map_err(malformed)?;
        if instance.service_name != APP || instance.host.is_empty() || instance.port == 0 {
            return Err(malformed("not an instance of the app").into());
        }
        if instance.metadata.revision.is_empty() {
            return Err(malformed("no revision").into());
        }
        instances.push(instance);
    }
    let parse = parse_started.elapsed();
    let first = instances.first().ok_or_else(|| malformed("no instance"))?;
    let params: UrlParams = serde_json::from_str(&first.metadata.url_params).map_err(malformed)?;
    let port = params.port.parse::<u16>().map_err(malformed)?;
    let info = client
        .fetch(&first.host, port, &first.metadata.revision)
        .await?;
    let floor = started.elapsed();
    assert_eq!(
        instances.len(),
        n,
        "the validating floor parsed the whole fleet"
    );
    drop((read, instances, info));
    Ok((parse, floor))
}
