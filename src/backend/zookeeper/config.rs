//! The config centre on ZooKeeper, where Dubbo Java's `ZookeeperDynamicConfiguration` keeps
//! it: a persistent node `/{namespace}/config/{group}/{key}` ([`Paths::config`]) holding
//! the item's text as UTF-8 (an empty node reads as an item with empty text; Java reads it
//! as no item).
//!
//! Versions are the node's creation zxid and data version (`{czxid}.{version}`): Java
//! compares the data version alone (`publishConfigCas`), which a node deleted and created
//! again since the read would pass; the creation zxid tells the two nodes apart. Writing
//! against `None` creates the node (`NodeExists` is a conflict); against a version,
//! `setData` with the data version once the node is the one read (`BadVersion` is a
//! conflict); deleting likewise with `delete`.
//!
//! Reads look at the node's size first and never fetch data over the bound. A follow is a
//! persistent watch on the node set before the first read; each event reads the node again
//! and a state goes out when its version differs from the last. The session ending ends
//! the follow.
//!
//! [`Paths::config`]: super::Paths::config

use std::fmt::Display;

use async_trait::async_trait;
use zookeeper_client as zk;

use super::ZooKeeperBackend;
use super::follow::node_changed;
use super::session::{self, map_error};
use crate::backend::config::{
    self, ConfigCentre, ConfigFollow, ConfigItem, ConfigKey, ConfigVersion, ConfigWrite,
};
use crate::backend::follow::forward_config;
use crate::config_item::MAX_RULE_BYTES;
use crate::error::Result;

/// A node as read: its version, and its content or why it cannot be read.
struct Node {
    version: ConfigVersion,
    item: Result<ConfigItem>,
}

fn node_version(stat: &zk::Stat) -> ConfigVersion {
    ConfigVersion::new(format!("{}.{}", stat.czxid, stat.version))
}

/// The creation zxid and data version a version stands for.
fn parse_version(version: &ConfigVersion) -> Result<(i64, i32)> {
    version
        .as_str()
        .split_once('.')
        .and_then(|(czxid, data)| Some((czxid.parse().ok()?, data.parse().ok()?)))
        .ok_or_else(|| crate::backend::config::foreign_version(version, "zookeeper"))
}

/// Reads the node at `path`, of the item `name` names in errors; `None` when absent.
async fn read(
    client: &zk::Client,
    path: &str,
    name: &(dyn Display + Sync),
) -> Result<Option<Node>> {
    let what = || format!("read {path}");
    let Some(stat) = client
        .check_stat(path)
        .await
        .map_err(|e| map_error(e, &what()))?
    else {
        return Ok(None);
    };
    let size = usize::try_from(stat.data_length).unwrap_or(0);
    if size > MAX_RULE_BYTES {
        return Ok(Some(Node {
            version: node_version(&stat),
            item: Err(crate::backend::config_key::too_large(name, size)),
        }));
    }
    let (data, stat) = match client.get_data(path).await {
        Ok(read) => read,
        Err(zk::Error::NoNode) => return Ok(None),
        Err(e) => return Err(map_error(e, &what())),
    };
    let version = node_version(&stat);
    let item = config::decode(name, data).map(|content| ConfigItem {
        content,
        version: version.clone(),
    });
    Ok(Some(Node { version, item }))
}

/// The item at `path` now, for a conflict.
async fn current(
    client: &zk::Client,
    path: &str,
    name: &(dyn Display + Sync),
) -> Result<Option<ConfigItem>> {
    read(client, path, name)
        .await?
        .map(|node| node.item)
        .transpose()
}

/// The conflict error, with the item as it is now.
async fn conflict(client: &zk::Client, path: &str, key: &ConfigKey) -> crate::error::Error {
    match current(client, path, key).await {
        Ok(now) => config::conflict(key, now),
        Err(e) => e,
    }
}

/// Whether the node at `path` is the one created at `czxid`; `Ok(false)` when absent.
async fn same_node(client: &zk::Client, path: &str, czxid: i64) -> Result<bool> {
    let stat = client
        .check_stat(path)
        .await
        .map_err(|e| map_error(e, &format!("read {path}")))?;
    Ok(stat.is_some_and(|stat| stat.czxid == czxid))
}

impl ZooKeeperBackend {
    /// The node of the item under `key`.
    fn config_path(&self, key: &ConfigKey) -> String {
        self.paths().config(key.group(), key.key())
    }
}

#[async_trait]
impl ConfigCentre for ZooKeeperBackend {
    async fn get(&self, key: &ConfigKey) -> Result<Option<ConfigItem>> {
        let path = self.config_path(key);
        current(&self.reader().await?, &path, key).await
    }

    async fn misplaced(&self, key: &str) -> Result<Option<ConfigItem>> {
        config::validate_key(key)?;
        let path = self.paths().config_flat(key);
        // A group node (`/dubbo/config/dubbo`) holds no text: only a node with data counts.
        let name = format!("(no group)/{key}");
        Ok(current(&self.reader().await?, &path, &name)
            .await?
            .filter(|item| !item.content.is_empty()))
    }

    async fn follow(&self, key: &ConfigKey) -> Result<ConfigFollow> {
        let path = self.config_path(key);
        let client = self.reader().await?;
        let mut watcher = client
            .watch(&path, zk::AddWatchMode::Persistent)
            .await
            .map_err(|e| map_error(e, &format!("watch {path}")))?;
        let first = read(&client, &path, key).await?;
        let mut last = first.as_ref().map(|node| node.version.clone());
        let (states, follow) = ConfigFollow::channel();
        let _ = states.try_send(first.map(|node| node.item).transpose());
        let key = key.clone();
        tokio::spawn(async move {
            while let Some(changed) = node_changed(&mut watcher, &states).await {
                let state = match changed {
                    Err(ended) => Err(ended),
                    Ok(()) => match read(&client, &path, &key).await {
                        Ok(node) => {
                            let now = node.as_ref().map(|node| node.version.clone());
                            if now == last {
                                continue;
                            }
                            last = now;
                            node.map(|node| node.item).transpose()
                        }
                        Err(e) => Err(e.ending_follow()),
                    },
                };
                if !forward_config(&states, state) {
                    return;
                }
            }
        });
        Ok(follow)
    }

    async fn put(&self, key: &ConfigKey, write: ConfigWrite<'_>) -> Result<ConfigVersion> {
        write.check(key)?;
        let path = self.config_path(key);
        let client = self.reader().await?;
        let what = || format!("write {path}");
        let content = write.content();
        let written = match write.expected() {
            None => {
                let mode = zk::CreateMode::Persistent;
                session::create(&client, &path, content.as_bytes(), mode, self.acls()).await
            }
            Some(expected) => {
                let (czxid, version) = parse_version(expected)?;
                if !same_node(&client, &path, czxid).await? {
                    return Err(conflict(&client, &path, key).await);
                }
                client
                    .set_data(&path, content.as_bytes(), Some(version))
                    .await
            }
        };
        match written {
            Ok(stat) => Ok(node_version(&stat)),
            Err(zk::Error::NodeExists | zk::Error::BadVersion | zk::Error::NoNode) => {
                Err(conflict(&client, &path, key).await)
            }
            Err(e) => Err(map_error(e, &what())),
        }
    }

    async fn delete(&self, key: &ConfigKey, expected: &ConfigVersion) -> Result<()> {
        let (czxid, version) = parse_version(expected)?;
        let path = self.config_path(key);
        let client = self.reader().await?;
        if !same_node(&client, &path, czxid).await? {
            return Err(conflict(&client, &path, key).await);
        }
        match client.delete(&path, Some(version)).await {
            Ok(()) => Ok(()),
            Err(zk::Error::BadVersion | zk::Error::NoNode) => {
                Err(conflict(&client, &path, key).await)
            }
            Err(e) => Err(map_error(e, &format!("delete {path}"))),
        }
    }

    /// The children of the group's node, as Java's `ZookeeperDynamicConfiguration`
    /// lists config keys; an absent group has none.
    async fn list(&self, group: &str) -> Result<Vec<String>> {
        config::validate_group(group)?;
        let path = self.paths().config(group, "");
        let path = path.trim_end_matches('/');
        let client = self.reader().await?;
        match client.list_children(path).await {
            Ok(children) => config::listed(group, children),
            Err(zk::Error::NoNode) => Ok(Vec::new()),
            Err(e) => Err(map_error(e, &format!("list {path}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_round_trip_and_foreign_ones_are_refused() {
        let stat_version = ConfigVersion::new("4294967297.3");
        assert_eq!(parse_version(&stat_version).unwrap(), (4_294_967_297, 3));
        for bad in ["", "3", "a.b", "1.2.3", "1.99999999999"] {
            let err = parse_version(&ConfigVersion::new(bad)).unwrap_err();
            assert!(
                matches!(err, crate::error::Error::InvalidName { .. }),
                "{bad:?}"
            );
        }
    }
}
