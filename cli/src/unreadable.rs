//! Apps whose every instance record was skipped as unreadable: `instances`, `resolve`,
//! `metadata` and `revision` fail on them instead of showing an app with nothing in it.

use std::collections::BTreeSet;

use introspect::Limits;
use introspect::backend::{InstanceList, InstanceRead, InstanceRegistry};
use introspect::consumer::{Resolver, Subscription};
use introspect::{Endpoint, Error};

/// The error for `app` when its records exist but none could be read; `None` when the app
/// has a readable instance or no record at all.
pub fn check(app: &str, list: &InstanceList) -> Option<Error> {
    if !list.instances.is_empty() {
        return None;
    }
    let (address, reason) = list.skipped.first()?;
    Some(Error::Malformed {
        what: "instance records",
        reason: format!(
            "all {} records of app {app:?} were skipped as unreadable; {address}: {reason}",
            list.skipped.len()
        ),
        source: None,
    })
}

/// What `resolve` found: the endpoints, sorted, and the first app none of whose records
/// could be read, if any.
pub struct Resolved {
    /// The endpoints of the apps that could be read.
    pub endpoints: Vec<Endpoint>,
    /// The error for the first wholly unreadable app.
    pub unreadable: Option<Error>,
}

/// Resolves like [`Resolver::resolve`] (one read of each app's records, one fetch per
/// uncached revision), also telling which app had only unreadable records.
pub async fn resolve(
    resolver: &Resolver,
    instances: &dyn InstanceRegistry,
    subscription: &Subscription,
) -> Result<Resolved, Error> {
    let apps: BTreeSet<String> = resolver.apps(subscription).await?;
    let mut endpoints = Vec::new();
    let mut failure = None;
    let mut unreadable = None;
    for app in &apps {
        let list = instances
            .list(app, InstanceRead::new(&Limits::default()))
            .await?;
        if let Some(error) = check(app, &list) {
            unreadable = unreadable.or(Some(error));
            continue;
        }
        for (address, reason) in &list.skipped {
            tracing::warn!(%app, %address, %reason, "instance record skipped");
        }
        let (found, failed) = resolver
            .endpoints_of(app, &list.instances, subscription)
            .await;
        endpoints.extend(found);
        failure = failure.or(failed);
    }
    // As the resolver: a failed fetch fails the command only when nothing resolved.
    if let Some(error) = failure.filter(|_| endpoints.is_empty()) {
        return Err(error);
    }
    endpoints.sort_unstable();
    Ok(Resolved {
        endpoints,
        unreadable,
    })
}
