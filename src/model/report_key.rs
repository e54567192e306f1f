//! [`ReportKey`]: where a metadata report is kept, its app and revision checked once.

use std::fmt;

use super::names;
use crate::error::Result;

/// The app and revision a metadata report is stored under (Dubbo's
/// `SubscriberMetadataIdentifier`), both checked when made so that no name can reach outside
/// the reports' place on any backend. Shown as `{app}/{revision}`.
///
/// ```
/// use introspect::model::ReportKey;
///
/// let key = ReportKey::new("shop", "5f1c2e")?;
/// assert_eq!((key.app(), key.revision()), ("shop", "5f1c2e"));
/// assert!(ReportKey::new("shop", "../mapping").is_err());
/// # Ok::<(), introspect::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReportKey {
    app: String,
    revision: String,
}

impl ReportKey {
    /// The report of `app` at `revision`; fails with [`crate::error::Error::InvalidName`] for a
    /// name [`names::validate_app`] or [`names::validate_revision`] refuses.
    pub fn new(app: impl Into<String>, revision: impl Into<String>) -> Result<Self> {
        let (app, revision) = (app.into(), revision.into());
        names::validate_report_key(&app, &revision)?;
        Ok(ReportKey { app, revision })
    }

    /// The app.
    pub fn app(&self) -> &str {
        &self.app
    }

    /// The revision.
    pub fn revision(&self) -> &str {
        &self.revision
    }
}

impl fmt::Display for ReportKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.app, self.revision)
    }
}
