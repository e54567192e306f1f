//! `introspect revision`: why an app's instances have the revisions they have. For each
//! revision, the canonical form under every rule and whether it gives the claimed revision;
//! for several, which services and params differ from the first.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::future::join_all;
use introspect::backend::{InstanceRead, InstanceRegistry};
use introspect::consumer::Resolver;
use introspect::model::revision_diff::{CanonicalForm, MetadataDiff, canonical_forms, diff};
use introspect::{Error, Limits, MetadataInfo, ServiceInstance};

/// One revision of the app, as fetched.
pub struct RevisionView {
    /// The revision the instances claim.
    pub revision: String,
    /// How many live instances claim it.
    pub instances: usize,
    /// The rules those instances declare (empty: none declares one).
    pub declared_rules: BTreeSet<String>,
    /// Its metadata and canonical forms, or why they could not be had.
    pub fetched: Result<(Arc<MetadataInfo>, Vec<CanonicalForm>), Error>,
}

/// Every revision asked about, and how each differs from the first.
pub struct RevisionReport {
    /// The app.
    pub app: String,
    /// The revisions, in the order asked (by default: most instances first).
    pub revisions: Vec<RevisionView>,
    /// For each later revision whose metadata was fetched: (first, later, how they differ),
    /// when the first one's metadata was fetched too.
    pub diffs: Vec<(String, String, MetadataDiff)>,
}

/// Reads `app`'s instances and fetches the metadata of `asked` (default: every live
/// revision) through the resolver, as `metadata` does.
pub async fn gather(
    instances: &dyn InstanceRegistry,
    resolver: &Resolver,
    app: &str,
    asked: &[String],
) -> Result<RevisionReport, Error> {
    let list = instances
        .list(app, InstanceRead::new(&Limits::default()))
        .await?;
    if let Some(error) = crate::unreadable::check(app, &list) {
        return Err(error);
    }
    let mut by_revision: BTreeMap<&str, Vec<&Arc<ServiceInstance>>> = BTreeMap::new();
    for i in list.instances.values() {
        by_revision.entry(i.revision()).or_default().push(i);
    }
    let revisions: Vec<String> = if asked.is_empty() {
        let mut live: Vec<(&str, usize)> = by_revision.iter().map(|(r, m)| (*r, m.len())).collect();
        live.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        live.into_iter().map(|(r, _)| r.to_owned()).collect()
    } else {
        asked.to_vec()
    };
    if revisions.is_empty() {
        return Err(Error::config(format!("app {app:?} has no instances")));
    }
    let mut groups = Vec::with_capacity(revisions.len());
    for revision in &revisions {
        let members = by_revision
            .get(revision.as_str())
            .filter(|m| !m.is_empty())
            .ok_or_else(|| {
                Error::config(format!("no instance of {app:?} has revision {revision}"))
            })?;
        groups.push((revision, members));
    }
    let fetches = groups
        .iter()
        .map(|(revision, members)| resolver.metadata(app, revision, members));
    let fetched = join_all(fetches).await;
    let views: Vec<RevisionView> = groups
        .iter()
        .zip(fetched)
        .map(|((revision, members), info)| RevisionView {
            revision: (*revision).clone(),
            instances: members.len(),
            declared_rules: members
                .iter()
                .filter_map(|i| i.declared_revision_rule())
                .map(str::to_owned)
                .collect(),
            fetched: info.map(|info| {
                let forms = canonical_forms(&info);
                (info, forms)
            }),
        })
        .collect();
    let mut diffs = Vec::new();
    if let Some((first, rest)) = views.split_first()
        && let Ok((base, _)) = &first.fetched
    {
        for view in rest {
            if let Ok((other, _)) = &view.fetched {
                diffs.push((
                    first.revision.clone(),
                    view.revision.clone(),
                    diff(base, other),
                ));
            }
        }
    }
    Ok(RevisionReport {
        app: app.to_owned(),
        revisions: views,
        diffs,
    })
}
