//! Verifying fetched metadata against the revision it was fetched for.
//!
//! Revisions are opaque unless their rule is known. An instance declares its rule under
//! [`crate::model::keys::REVISION_RULE`]:
//!
//! | declared rule | content hashes to the revision | it does not |
//! |---|---|---|
//! | `sha256-v1` / `sha256-v2` | `Verified(rule)` | `Rejected(rule)` |
//! | none | `Verified(java-md5)` (Dubbo Java 3.2+) | `Unverifiable` (another implementation's rule) |
//! | any other name | `Unverifiable` | `Unverifiable` |
//!
//! Only a declared rule can reject. The rule is a property of the (app, revision), not of
//! the instance asked: all instances of a revision export the same services, so when any of
//! them declares a rule, every answer for that revision is checked under it, including the
//! answers of instances that declare nothing (see [`effective_rule`]). A declaration is read
//! once into a [`Declared`], which every step takes.

use crate::model::{MetadataInfo, RevisionRule};

/// What an instance declares under [`crate::model::keys::REVISION_RULE`], read once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Declared {
    /// No rule (the key is absent or empty).
    Nothing,
    /// A rule this crate can recompute.
    Rule(RevisionRule),
    /// A name this crate does not know.
    Unknown,
}

impl Declared {
    /// The declaration of the value `name` (`None`: the key is absent).
    pub fn of(name: Option<&str>) -> Self {
        match name.filter(|n| !n.is_empty()) {
            None => Declared::Nothing,
            Some(name) => RevisionRule::declared(name).map_or(Declared::Unknown, Declared::Rule),
        }
    }

    /// The known rule declared, if any.
    pub fn rule(self) -> Option<RevisionRule> {
        match self {
            Declared::Rule(rule) => Some(rule),
            Declared::Nothing | Declared::Unknown => None,
        }
    }
}

/// The outcome of checking an answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verification {
    /// The content hashes to the revision under this rule.
    Verified(RevisionRule),
    /// The instance declared this rule and the content does not hash to the revision under
    /// it: the answer must not be used.
    Rejected(RevisionRule),
    /// No known rule applies: the answer can be used but not checked.
    Unverifiable,
}

/// Checks `info` against `expected` under the `declared` rule. Pure; see the module docs
/// for the table of outcomes.
pub fn verify(declared: Declared, expected: &str, info: &MetadataInfo) -> Verification {
    let hashes_to = |rule: RevisionRule| rule.revision(&info.app, &info.services) == expected;
    match declared {
        Declared::Nothing if hashes_to(RevisionRule::JavaMd5) => {
            Verification::Verified(RevisionRule::JavaMd5)
        }
        Declared::Nothing | Declared::Unknown => Verification::Unverifiable,
        Declared::Rule(rule) if hashes_to(rule) => Verification::Verified(rule),
        Declared::Rule(rule) => Verification::Rejected(rule),
    }
}

/// The rule an answer from an instance is checked under: its own declaration when that names
/// a known rule; else the first known rule (in [`RevisionRule`] order) any instance of the
/// same (app, revision) declares; else its own declaration (an unknown name, or none).
///
/// So an instance that declares nothing, or a name no consumer knows, cannot get an
/// unchecked answer into the cache of a revision that others declare a rule for.
pub fn effective_rule(own: Declared, peers: impl IntoIterator<Item = Declared>) -> Declared {
    if own.rule().is_some() {
        return own;
    }
    peers
        .into_iter()
        .filter_map(Declared::rule)
        .min()
        .map_or(own, Declared::Rule)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ServiceInfo;

    fn info() -> MetadataInfo {
        MetadataInfo::new("a", [ServiceInfo::new("x.Y")]).unwrap()
    }

    #[test]
    fn the_outcome_table() {
        let info = info();
        let v1 = RevisionRule::Sha256V1.revision(&info.app, &info.services);
        let v2 = RevisionRule::Sha256V2.revision(&info.app, &info.services);
        let md5 = RevisionRule::JavaMd5.revision(&info.app, &info.services);
        use RevisionRule::*;
        use Verification::*;
        let d = |name: &str| Declared::of(Some(name));
        assert_eq!(verify(d("sha256-v1"), &v1, &info), Verified(Sha256V1));
        assert_eq!(verify(d("sha256-v1"), &v2, &info), Rejected(Sha256V1));
        assert_eq!(verify(d("sha256-v2"), &v2, &info), Verified(Sha256V2));
        assert_eq!(verify(d("sha256-v2"), &v1, &info), Rejected(Sha256V2));
        assert_eq!(verify(Declared::Nothing, &md5, &info), Verified(JavaMd5));
        assert_eq!(
            verify(Declared::of(Some("")), &md5, &info),
            Verified(JavaMd5)
        );
        assert_eq!(verify(Declared::Nothing, &v1, &info), Unverifiable);
        assert_eq!(verify(d("crc32-sum"), &md5, &info), Unverifiable);
        assert_eq!(verify(d("java-md5"), &v1, &info), Unverifiable);
    }

    #[test]
    fn the_rule_of_a_revision_covers_undeclared_and_unknown_instances() {
        let d = |name: Option<&str>| Declared::of(name);
        let peers = [None, Some("odd"), Some("sha256-v2"), Some("sha256-v1")].map(d);
        let v1 = Declared::Rule(RevisionRule::Sha256V1);
        let v2 = Declared::Rule(RevisionRule::Sha256V2);
        assert_eq!(effective_rule(d(None), peers), v1);
        assert_eq!(effective_rule(d(Some("odd")), peers), v1);
        assert_eq!(effective_rule(v2, peers), v2);
        let none = [None, Some("odd")].map(d);
        assert_eq!(effective_rule(d(None), none), Declared::Nothing);
        assert_eq!(effective_rule(d(Some("odd")), [d(None)]), Declared::Unknown);
    }
}
