//! Metadata info: everything an app instance exports, shared by all instances with the same
//! revision.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::revision::{self, is_volatile_param};
use crate::model::{ServiceInfo, names};

/// `{app, revision, services: match key -> service info}`.
///
/// Services are held in `Arc`s so that endpoints of many instances share one copy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetadataInfo {
    /// The app name.
    pub app: String,
    /// The revision; for metadata built here, the `sha256-v1` hash of the services.
    pub revision: String,
    /// The exported services by match key.
    #[serde(default)]
    pub services: BTreeMap<String, Arc<ServiceInfo>>,
}

impl MetadataInfo {
    /// Builds the metadata of an app exporting `services` and computes its revision.
    ///
    /// Volatile parameters (see [`revision::VOLATILE_PARAMS`]) are dropped; names are
    /// validated. Two services with the same match key: the later one wins.
    pub fn new(
        app: impl Into<String>,
        services: impl IntoIterator<Item = ServiceInfo>,
    ) -> Result<Self> {
        let app = app.into();
        names::validate_app(&app)?;
        let mut by_key = BTreeMap::new();
        for mut service in services {
            service.validate()?;
            service.params.retain(|k, _| !is_volatile_param(k));
            by_key.insert(service.match_key(), Arc::new(service));
        }
        let revision = revision::revision(&app, &by_key);
        Ok(MetadataInfo {
            app,
            revision,
            services: by_key,
        })
    }

    /// The revision the content hashes to by the `sha256-v1` rule.
    pub fn computed_revision(&self) -> String {
        revision::revision(&self.app, &self.services)
    }

    /// Checks that the content hashes to the claimed revision.
    pub fn verify_revision(&self) -> Result<()> {
        let computed = self.computed_revision();
        if computed == self.revision {
            Ok(())
        } else {
            Err(Error::RevisionMismatch {
                app: self.app.clone(),
                claimed: self.revision.clone(),
                computed,
            })
        }
    }

    /// Checks metadata received from elsewhere: names, the service keys and the limits.
    ///
    /// A service stored under a key other than its own match key is rejected: it would let
    /// a hostile peer serve one interface under another's name.
    pub fn validate(&self, limits: &Limits) -> Result<()> {
        names::validate_app(&self.app)?;
        names::validate_revision(&self.revision)?;
        if self.services.len() > limits.max_services {
            return Err(Error::TooLarge {
                what: "metadata info service count",
                size: self.services.len(),
                limit: limits.max_services,
            });
        }
        for (key, service) in &self.services {
            service.validate()?;
            if service.params.len() > limits.max_params {
                return Err(Error::TooLarge {
                    what: "service parameter count",
                    size: service.params.len(),
                    limit: limits.max_params,
                });
            }
            if *key != service.match_key() {
                return Err(Error::malformed(
                    "metadata info",
                    format!(
                        "service under key {:?} has match key {:?}",
                        Error::shorten(key),
                        Error::shorten(&service.match_key())
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The JSON form stored in a metadata report.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("metadata info always serializes")
    }

    /// The JSON form as a report is written: checked first, and refused when over
    /// [`Limits::max_metadata_bytes`].
    pub fn to_report(&self, limits: &Limits) -> Result<Vec<u8>> {
        self.validate(limits)?;
        let json = self.to_json();
        limits.check_size("metadata info", json.len(), limits.max_metadata_bytes)?;
        Ok(json)
    }

    /// Parses and validates the JSON form, refusing documents over the limits.
    pub fn from_json(bytes: &[u8], limits: &Limits) -> Result<Self> {
        limits.check_size("metadata info", bytes.len(), limits.max_metadata_bytes)?;
        let info: MetadataInfo =
            serde_json::from_slice(bytes).map_err(|e| Error::unparsable("metadata info", e))?;
        info.validate(limits)?;
        Ok(info)
    }

    /// The services matching an interface and optional qualifiers (`None`: any value).
    pub fn matching<'a>(
        &'a self,
        interface: &'a str,
        group: Option<&'a str>,
        version: Option<&'a str>,
        protocol: Option<&'a str>,
    ) -> impl Iterator<Item = &'a Arc<ServiceInfo>> + 'a {
        self.services.values().filter(move |s| {
            s.name == interface
                && group.is_none_or(|g| g == s.group)
                && version.is_none_or(|v| v == s.version)
                && protocol.is_none_or(|p| p == s.protocol)
        })
    }
}
