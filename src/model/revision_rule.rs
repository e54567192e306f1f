//! The revision rules a consumer can recompute, and the canonical form each one hashes.

use std::collections::BTreeMap;
use std::fmt;

use crate::error::Result;
use crate::model::{MetadataInfo, ServiceInfo, revision, revision_java, revision_v2};

/// The rule providers of this crate compute their revision with and declare under
/// [`crate::model::keys::REVISION_RULE`]: `sha256-v2` (see [`crate::model::revision_v2`]).
pub const PROVIDER_REVISION_RULE: RevisionRule = RevisionRule::Sha256V2;

/// A rule turning an app's exported services into its revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RevisionRule {
    /// `sha256-v1`: SHA-256 of an unframed text (see [`mod@revision`]); declared by providers of
    /// this crate before `sha256-v2`.
    Sha256V1,
    /// `sha256-v2`: SHA-256 of a framed encoding (see [`revision_v2`]); declared by providers
    /// of this crate.
    Sha256V2,
    /// Dubbo Java 3.2+'s MD5 rule (see [`revision_java`]); never declared, checked when an
    /// instance declares no rule.
    JavaMd5,
}

impl RevisionRule {
    /// Every rule, in a fixed order.
    pub const ALL: [RevisionRule; 3] = [
        RevisionRule::Sha256V1,
        RevisionRule::Sha256V2,
        RevisionRule::JavaMd5,
    ];

    /// The rule's name: the value declared under [`crate::model::keys::REVISION_RULE`] for
    /// the two declarable rules.
    pub fn name(self) -> &'static str {
        match self {
            RevisionRule::Sha256V1 => revision::REVISION_RULE_SHA256_V1,
            RevisionRule::Sha256V2 => revision_v2::REVISION_RULE_SHA256_V2,
            RevisionRule::JavaMd5 => revision_java::REVISION_RULE_JAVA_MD5,
        }
    }

    /// The rule an instance declares by this name, if it is one a consumer can recompute.
    /// Only `sha256-v1` and `sha256-v2` are declarable.
    pub fn declared(name: &str) -> Option<RevisionRule> {
        match name {
            revision::REVISION_RULE_SHA256_V1 => Some(RevisionRule::Sha256V1),
            revision_v2::REVISION_RULE_SHA256_V2 => Some(RevisionRule::Sha256V2),
            _ => None,
        }
    }

    /// The revision of `services` (keyed by match key) under this rule.
    pub fn revision<S: AsRef<ServiceInfo>>(
        self,
        app: &str,
        services: &BTreeMap<String, S>,
    ) -> String {
        match self {
            RevisionRule::Sha256V1 => revision::revision(app, services),
            RevisionRule::Sha256V2 => revision_v2::revision(app, services),
            RevisionRule::JavaMd5 => revision_java::revision(app, services),
        }
    }

    /// The exact bytes this rule hashes for `info`, or `None` when it exports nothing (its
    /// revision is then `0`). Text for `sha256-v1` and the Java rule, binary for `sha256-v2`.
    pub fn canonical_bytes(self, info: &MetadataInfo) -> Option<Vec<u8>> {
        match self {
            RevisionRule::Sha256V1 => {
                revision::canonical_text(&info.app, &info.services).map(String::into_bytes)
            }
            RevisionRule::Sha256V2 => revision_v2::canonical_bytes(&info.app, &info.services),
            RevisionRule::JavaMd5 => {
                revision_java::canonical_text(&info.app, &info.services).map(String::into_bytes)
            }
        }
    }

    /// The canonical form for an operator to read: the text itself for the text rules; for
    /// `sha256-v2`, lowercase hex of the bytes.
    pub fn canonical_display(self, info: &MetadataInfo) -> Option<String> {
        let bytes = self.canonical_bytes(info)?;
        Some(match self {
            RevisionRule::Sha256V2 => hex::encode(bytes),
            // Built from `String`s, so always UTF-8.
            _ => String::from_utf8_lossy(&bytes).into_owned(),
        })
    }
}

impl MetadataInfo {
    /// Builds the metadata like [`MetadataInfo::new`], with its revision computed under
    /// `rule` (providers of this crate use [`PROVIDER_REVISION_RULE`]).
    pub fn new_with_rule(
        app: impl Into<String>,
        services: impl IntoIterator<Item = ServiceInfo>,
        rule: RevisionRule,
    ) -> Result<Self> {
        let mut info = Self::new(app, services)?;
        info.revision = rule.revision(&info.app, &info.services);
        Ok(info)
    }

    /// The revision the content hashes to under `rule`.
    pub fn computed_revision_under(&self, rule: RevisionRule) -> String {
        rule.revision(&self.app, &self.services)
    }
}

impl fmt::Display for RevisionRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_for_declarable_rules_only() {
        for rule in RevisionRule::ALL {
            let back = RevisionRule::declared(rule.name());
            assert_eq!(back.is_some(), rule != RevisionRule::JavaMd5, "{rule}");
        }
        assert_eq!(RevisionRule::declared("sha256-v3"), None);
    }

    #[test]
    fn each_rule_reproduces_its_own_revision() {
        let info = MetadataInfo::new("a", [ServiceInfo::new("x.Y").with_param("k", "v")]).unwrap();
        for rule in RevisionRule::ALL {
            assert_eq!(rule.revision(&info.app, &info.services).len() % 32, 0);
            assert!(rule.canonical_display(&info).is_some());
        }
        assert_eq!(
            RevisionRule::Sha256V1.revision(&info.app, &info.services),
            info.revision
        );
    }
}
