//! Metadata reports on Nacos (storage type `remote`): a config with `dataId` = the app and
//! group = the revision, holding the metadata info JSON (as
//! `NacosMetadataReport.publishAppMetadata`), written once and never overwritten. Reads
//! also look at `dataId` `{app}:{revision}` in `DEFAULT_GROUP`, where dubbo-go before 3.2
//! reported (dubbo-go 3.3 still writes both).
//!
//! The gRPC client cannot list a `dataId`'s groups, so [`revisions`](super::NacosBackend)
//! answers with the revisions this backend reported itself, which is what report cleanup
//! removes.

use super::mapping::{ABSENT_MD5, ConfigStore};
use super::names;
use crate::backend::reports::read_report;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::{MetadataInfo, ReportKey};

/// The report under `key`: Dubbo Java's config first, then dubbo-go's older one.
pub(super) async fn get(
    store: &dyn ConfigStore,
    key: &ReportKey,
    limits: &Limits,
) -> Result<Option<MetadataInfo>> {
    let (app, revision) = (key.app(), key.revision());
    let java = store
        .get(&names::config_key(app), &names::config_key(revision))
        .await?;
    let content = match java {
        Some(content) => content,
        None => match store
            .get(
                &names::config_key(&format!("{app}:{revision}")),
                names::DEFAULT_GROUP,
            )
            .await?
        {
            Some(content) => content,
            None => return Ok(None),
        },
    };
    read_report(key, content.as_bytes(), limits).map(Some)
}

/// Creates the report of `info` unless it exists; returns whether it wrote.
pub(super) async fn put_if_absent(
    store: &dyn ConfigStore,
    info: &MetadataInfo,
    limits: &Limits,
) -> Result<bool> {
    let json = info.to_report(limits)?;
    let data_id = names::config_key(&info.app);
    let group = names::config_key(&info.revision);
    if store.get(&data_id, &group).await?.is_some() {
        return Ok(false);
    }
    let content = String::from_utf8(json).map_err(|e| Error::unparsable("metadata info", e))?;
    store
        .publish_cas(&data_id, &group, &content, ABSENT_MD5)
        .await
}
