//! The mapping on ZooKeeper: a persistent node `/dubbo/mapping/{interface}` holding app
//! names joined by `,` (as `ZookeeperMetadataReport` and dubbo-go's report write it).
//! Apps only add themselves: create if absent (`NodeExists` is a conflict), else `setData`
//! with the version read (`BadVersion` is a conflict); conflicts are retried with backoff.

use std::collections::BTreeSet;

use zookeeper_client as zk;

use super::session::{self, map_error};
use crate::backend::mapping::{add_app, parse_apps};
use crate::error::Result;
use crate::limits::Limits;

/// A mapping value as read: the apps and the node's version (`None`: no node).
pub(super) struct Value {
    pub apps: BTreeSet<String>,
    version: Option<i32>,
}

/// Reads the mapping node at `path` (leniently, see [`parse_apps`]).
pub(super) async fn read(client: &zk::Client, path: &str, limits: &Limits) -> Result<Value> {
    match client.get_data(path).await {
        Ok((data, stat)) => Ok(Value {
            apps: parse_apps(&data, limits),
            version: Some(stat.version),
        }),
        Err(zk::Error::NoNode) => Ok(Value {
            apps: BTreeSet::new(),
            version: None,
        }),
        Err(e) => Err(map_error(e, &format!("read {path}"))),
    }
}

/// Adds `app` to the mapping at `path`; see the module docs.
pub(super) async fn add(
    client: &zk::Client,
    acls: zk::Acls<'static>,
    path: &str,
    app: &str,
    limits: &Limits,
) -> Result<()> {
    add_app(
        app,
        path,
        limits,
        move || async move {
            let current = read(client, path, limits).await?;
            Ok((current.apps, current.version))
        },
        move |value, version| async move {
            let written = match version {
                None => session::create(
                    client,
                    path,
                    value.as_bytes(),
                    zk::CreateMode::Persistent,
                    acls,
                )
                .await
                .map(drop),
                Some(version) => client
                    .set_data(path, value.as_bytes(), Some(version))
                    .await
                    .map(drop),
            };
            match written {
                Ok(()) => Ok(true),
                Err(zk::Error::NodeExists | zk::Error::BadVersion | zk::Error::NoNode) => Ok(false),
                Err(e) => Err(map_error(e, &format!("write {path}"))),
            }
        },
    )
    .await
}
