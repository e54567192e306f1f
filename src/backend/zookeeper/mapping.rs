//! The mapping on ZooKeeper: a persistent node `/dubbo/mapping/{interface}` holding app
//! names joined by `,` (as `ZookeeperMetadataReport` and dubbo-go's report write it).
//! Apps only add themselves: create if absent (`NodeExists` is a conflict), else `setData`
//! with the version read (`BadVersion` is a conflict); conflicts are retried with backoff.

use std::collections::BTreeSet;
use std::time::Duration;

use zookeeper_client as zk;

use super::session::{self, map_error};
use crate::backend::mapping::{join_apps, parse_apps};
use crate::backoff::Backoff;
use crate::error::{Error, Result};
use crate::limits::Limits;

/// Compare-and-set rounds before [`add`] gives up.
const MAX_ATTEMPTS: u32 = 32;

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
    let mut backoff = Backoff::new(Duration::from_millis(10), Duration::from_millis(500));
    for _ in 0..MAX_ATTEMPTS {
        let current = read(client, path, limits).await?;
        let mut apps = current.apps;
        if !apps.insert(app.to_owned()) {
            return Ok(());
        }
        let value = join_apps(&apps);
        limits.check_size("mapping value", value.len(), limits.max_mapping_bytes)?;
        let written = match current.version {
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
            Ok(()) => return Ok(()),
            Err(zk::Error::NodeExists | zk::Error::BadVersion | zk::Error::NoNode) => {
                tracing::debug!(%path, %app, "mapping changed under us; retrying");
                tokio::time::sleep(backoff.next_delay()).await;
            }
            Err(e) => return Err(map_error(e, &format!("write {path}"))),
        }
    }
    Err(Error::Contended {
        key: path.to_owned(),
        attempts: MAX_ATTEMPTS,
    })
}
