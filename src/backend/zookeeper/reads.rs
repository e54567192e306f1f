//! Listing an app's instances (and every app) on ZooKeeper: the epoch, the app node's
//! children, then every child's data, each request sent before the first answer is awaited
//! (the client orders requests as they are made), so a list of N instances costs one round
//! trip plus the transfer, not N round trips.
//!
//! A missing app node means no instances (ZooKeeper reaps empty containers). With a
//! group, interface nodes (`/{group}/{interface}/providers`) sit beside app nodes: their
//! category children are no instances, so an interface node lists as no app. A child that
//! vanished between the children and its read is left out; one that does not parse is
//! skipped and reported, never failing the app.
//!
//! The list's revision is the highest zxid it saw: the app node's `pzxid` (last child
//! created or deleted) and every child's `mzxid`. On one ensemble it never goes backwards
//! (a deletion raises the parent's `pzxid` past the deleted child's zxids); a server
//! replaced by an empty one numbers its transactions afresh, from a lower zxid, as long as
//! it has not written more than the old one had. With no app node it is `0` (unknown).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::future::join_all;
use zookeeper_client as zk;

use super::paths::Paths;
use super::record;
use super::session::map_error;
use crate::backend::InstanceList;
use crate::error::Result;
use crate::limits::Limits;
use crate::model::names;

/// The most children of one app node read (a bound on what a hostile registry costs).
const MAX_CHILDREN: usize = 200_000;

/// Lists `app`, with the epoch read in the same session just before.
pub(super) async fn list(
    client: &zk::Client,
    paths: &Paths,
    app: &str,
    limits: &Limits,
) -> Result<InstanceList> {
    names::validate_app(app)?;
    let epoch = super::epoch::read(client, paths);
    let app_path = paths.app(app);
    let children = client.get_children(&app_path);
    let epoch = epoch.await?;
    let (children, stat) = match children.await {
        Ok(found) => found,
        Err(zk::Error::NoNode) => {
            return Ok(InstanceList {
                epoch,
                ..InstanceList::default()
            });
        }
        Err(e) => return Err(map_error(e, &format!("list {app_path}"))),
    };
    let mut list = read_children(client, paths, app, children, limits).await?;
    list.revision = list.revision.max(stat.pzxid);
    list.epoch = epoch;
    Ok(list)
}

/// Reads and parses `children` of `app`'s node.
async fn read_children(
    client: &zk::Client,
    paths: &Paths,
    app: &str,
    mut children: Vec<String>,
    limits: &Limits,
) -> Result<InstanceList> {
    let mut list = InstanceList::default();
    // With a group, `/{group}/{interface}` looks like an app node: its categories are no
    // instances (and an interface node so read lists as no app).
    children.retain(|child| !paths.is_interface_category(child));
    if children.len() > MAX_CHILDREN {
        list.skipped.push((
            paths.app(app),
            format!(
                "{} children: only the first {MAX_CHILDREN} are read",
                children.len()
            ),
        ));
        children.truncate(MAX_CHILDREN);
    }
    children.sort_unstable();
    let reads: Vec<_> = children
        .iter()
        .map(|child| client.get_data(&paths.instance(app, child)))
        .collect();
    let mut parsed = Vec::with_capacity(children.len());
    for (child, read) in children.into_iter().zip(join_all(reads).await) {
        let (data, stat) = match read {
            Ok(found) => found,
            Err(zk::Error::NoNode) => continue,
            Err(e) => {
                return Err(map_error(
                    e,
                    &format!("read {}", paths.instance(app, &child)),
                ));
            }
        };
        list.revision = list.revision.max(stat.mzxid);
        match record::parse_child(app, &child, &data, limits) {
            Ok(instance) => parsed.push((child, Arc::new(instance))),
            Err(reason) => list.skipped.push((child, reason)),
        }
    }
    list.instances = parsed.into_iter().collect();
    Ok(list)
}

/// Every app with at least one instance node, with its instances.
pub(super) async fn list_apps(
    client: &zk::Client,
    paths: &Paths,
    limits: &Limits,
) -> Result<BTreeMap<String, InstanceList>> {
    let root = paths.instances_root();
    let apps = match client.get_children(root).await {
        Ok((apps, _)) => apps,
        Err(zk::Error::NoNode) => return Ok(BTreeMap::new()),
        Err(e) => return Err(map_error(e, &format!("list {root}"))),
    };
    let apps: Vec<String> = apps
        .into_iter()
        .filter(|app| paths.is_app_node(app) && names::validate_app(app).is_ok())
        .collect();
    let lists = join_all(apps.iter().map(|app| list(client, paths, app, limits))).await;
    let mut all = BTreeMap::new();
    for (app, listed) in apps.into_iter().zip(lists) {
        let listed = listed?;
        if !listed.instances.is_empty() || !listed.skipped.is_empty() {
            all.insert(app, listed);
        }
    }
    Ok(all)
}
