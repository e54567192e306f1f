//! Why two revisions of one app differ: the canonical form of each under every rule, and a
//! structured diff of their services and params. The core of `introspect revision`.

use std::collections::{BTreeMap, BTreeSet};

use crate::model::{MetadataInfo, RevisionRule, ServiceInfo};

/// The canonical form of one metadata info under one rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CanonicalForm {
    /// The rule.
    pub rule: RevisionRule,
    /// What the rule hashes, for reading: text, or hex for `sha256-v2`; `None` when the app
    /// exports nothing.
    pub canonical: Option<String>,
    /// The revision the rule gives.
    pub revision: String,
    /// Whether that is the revision the metadata claims.
    pub matches_claimed: bool,
}

/// The canonical form of `info` under every rule, in [`RevisionRule::ALL`] order.
pub fn canonical_forms(info: &MetadataInfo) -> Vec<CanonicalForm> {
    RevisionRule::ALL
        .into_iter()
        .map(|rule| {
            let revision = info.computed_revision_under(rule);
            CanonicalForm {
                rule,
                canonical: rule.canonical_display(info),
                matches_claimed: revision == info.revision,
                revision,
            }
        })
        .collect()
}

/// One field that differs between two versions of a service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldChange {
    /// The field: `port`, `path`, or `param {key}`.
    pub field: String,
    /// Its value in the first metadata (`None`: a param it does not have).
    pub before: Option<String>,
    /// Its value in the second metadata (`None`: a param it does not have).
    pub after: Option<String>,
}

/// How two metadata infos of one app differ.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetadataDiff {
    /// Whether the app names differ.
    pub app_changed: bool,
    /// Match keys only the first exports.
    pub only_before: Vec<String>,
    /// Match keys only the second exports.
    pub only_after: Vec<String>,
    /// Services both export, with the fields that differ (services that are equal are left
    /// out).
    pub changed: BTreeMap<String, Vec<FieldChange>>,
}

impl MetadataDiff {
    /// Whether the two export the same services with the same fields and params.
    pub fn is_empty(&self) -> bool {
        !self.app_changed
            && self.only_before.is_empty()
            && self.only_after.is_empty()
            && self.changed.is_empty()
    }
}

/// The services and params that differ between `before` and `after`.
pub fn diff(before: &MetadataInfo, after: &MetadataInfo) -> MetadataDiff {
    let keys_before: BTreeSet<&String> = before.services.keys().collect();
    let keys_after: BTreeSet<&String> = after.services.keys().collect();
    let mut out = MetadataDiff {
        app_changed: before.app != after.app,
        only_before: keys_before
            .difference(&keys_after)
            .map(|k| (*k).clone())
            .collect(),
        only_after: keys_after
            .difference(&keys_before)
            .map(|k| (*k).clone())
            .collect(),
        changed: BTreeMap::new(),
    };
    for key in keys_before.intersection(&keys_after) {
        let changes = service_changes(&before.services[*key], &after.services[*key]);
        if !changes.is_empty() {
            out.changed.insert((*key).clone(), changes);
        }
    }
    out
}

fn service_changes(before: &ServiceInfo, after: &ServiceInfo) -> Vec<FieldChange> {
    let mut changes = Vec::new();
    let mut field = |name: String, b: Option<&str>, a: Option<&str>| {
        if b != a {
            changes.push(FieldChange {
                field: name,
                before: b.map(str::to_owned),
                after: a.map(str::to_owned),
            });
        }
    };
    let (port_b, port_a) = (before.port.to_string(), after.port.to_string());
    field("port".into(), Some(&port_b), Some(&port_a));
    field("path".into(), Some(&before.path), Some(&after.path));
    let params: BTreeSet<&String> = before.params.keys().chain(after.params.keys()).collect();
    for key in params {
        field(
            format!("param {key}"),
            before.params.get(key).map(String::as_str),
            after.params.get(key).map(String::as_str),
        );
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_services_and_params_that_differ() {
        let before = MetadataInfo::new(
            "a",
            [
                ServiceInfo::new("x.Kept").with_param("timeout", "1"),
                ServiceInfo::new("x.Gone"),
                ServiceInfo::new("x.Same"),
            ],
        )
        .unwrap();
        let after = MetadataInfo::new(
            "a",
            [
                ServiceInfo::new("x.Kept")
                    .with_port(7)
                    .with_param("timeout", "2")
                    .with_param("weight", "5"),
                ServiceInfo::new("x.New"),
                ServiceInfo::new("x.Same"),
            ],
        )
        .unwrap();
        let d = diff(&before, &after);
        assert_eq!(d.only_before, ["x.Gone:tri"]);
        assert_eq!(d.only_after, ["x.New:tri"]);
        let kept = &d.changed["x.Kept:tri"];
        let fields: Vec<_> = kept.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["port", "param timeout", "param weight"]);
        assert_eq!(kept[2].before, None);
        assert_eq!(kept[2].after.as_deref(), Some("5"));
        assert!(!d.changed.contains_key("x.Same:tri"));
        assert!(diff(&before, &before).is_empty());
    }

    #[test]
    fn canonical_forms_say_which_rule_the_claim_follows() {
        let info = MetadataInfo::new("a", [ServiceInfo::new("x.Y")]).unwrap();
        let forms = canonical_forms(&info);
        let matching: Vec<_> = forms.iter().filter(|f| f.matches_claimed).collect();
        assert_eq!(matching.len(), 1);
        assert_eq!(matching[0].rule, RevisionRule::Sha256V1);
        assert_eq!(matching[0].canonical.as_deref(), Some("ax.Y:tri0x.Y{}"));
    }
}
