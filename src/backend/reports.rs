//! The metadata report part of the seam: the metadata info of (app, revision), for
//! instances with storage type `remote`. A revision's content never changes, so a report is
//! written once and never overwritten.

use async_trait::async_trait;

use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::{MetadataInfo, ReportKey};

/// The report stored under `key`, parsed and bounded by `limits`: one whose content
/// belongs to another app or revision is [`Error::Malformed`], as every backend must refuse
/// it (a writer could otherwise serve one app's services under another's key).
pub(crate) fn read_report(key: &ReportKey, bytes: &[u8], limits: &Limits) -> Result<MetadataInfo> {
    let info = MetadataInfo::from_json(bytes, limits)?;
    if info.app != key.app() || info.revision != key.revision() {
        return Err(Error::malformed(
            "metadata report",
            format!(
                "report under {key} holds {}/{}",
                Error::shorten(&info.app),
                Error::shorten(&info.revision)
            ),
        ));
    }
    Ok(info)
}

/// The metadata report part of a registry backend.
#[async_trait]
pub trait MetadataReports: Send + Sync + 'static {
    /// The reported metadata under `key`, if any. A report whose content belongs
    /// to another app or revision is an error.
    async fn get(&self, key: &ReportKey, limits: &Limits) -> Result<Option<MetadataInfo>>;

    /// Stores `info` unless its revision is reported already; returns whether it wrote.
    async fn put_if_absent(&self, info: &MetadataInfo, limits: &Limits) -> Result<bool>;

    /// The revisions reported for `app` (by anyone, where the backend can list them; else
    /// those this process reported).
    async fn revisions(&self, app: &str) -> Result<Vec<String>>;

    /// Removes the report under `key`; returns whether it existed.
    async fn remove(&self, key: &ReportKey) -> Result<bool>;
}
