//! Consumer records on ZooKeeper: the EPHEMERAL node `/introspect/consumers/{app}/{id}`
//! (under the group's root with a group), parents containers, in the backend's session for
//! the record's TTL (shared with the providers of that TTL, as instance nodes share it).
//! The session is the lease: when it expires the server deletes the node, and
//! [`Registration::keep_alive`] reports the record lost.

use std::time::Duration;

use async_trait::async_trait;
use futures::future::join_all;
use zookeeper_client as zk;

use super::node::Node;
use super::paths::Paths;
use super::session::map_error;
use crate::backend::consumers::{ConsumerList, MAX_CONSUMER_RECORDS};
use crate::backend::{Record, Registration, check_identity};
use crate::error::Result;
use crate::limits::Limits;
use crate::model::ConsumerRecord;

/// One consumer node and the session that owns it.
pub(super) struct ZkConsumer {
    node: Node,
    /// `{app}/{id}`.
    identity: String,
    limits: Limits,
}

impl ZkConsumer {
    /// Creates the node for `record` under `client`'s session.
    pub(super) async fn register(
        client: zk::Client,
        acls: zk::Acls<'static>,
        paths: &Paths,
        record: &ConsumerRecord,
        limits: &Limits,
    ) -> Result<Self> {
        let data = record.to_json(limits)?;
        let node = Node::new(client, acls, paths.consumer(&record.app, &record.id));
        node.create(&data).await?;
        Ok(ZkConsumer {
            node,
            identity: record.identity(),
            limits: limits.clone(),
        })
    }
}

#[async_trait]
impl Registration<ConsumerRecord> for ZkConsumer {
    async fn update(&self, record: &ConsumerRecord) -> Result<()> {
        check_identity(&self.identity, record)?;
        self.node.set(&record.to_json(&self.limits)?).await
    }

    async fn keep_alive(&self) -> Result<()> {
        self.node.check(true).await
    }

    async fn deregister(&self) -> Result<()> {
        self.node.delete().await
    }

    fn id(&self) -> String {
        self.node.id()
    }

    fn ttl(&self) -> Duration {
        self.node.ttl()
    }
}

/// Children of `path`, or none when it is absent.
async fn children(client: &zk::Client, path: &str) -> Result<Vec<String>> {
    match client.list_children(path).await {
        Ok(mut children) => {
            children.sort_unstable();
            Ok(children)
        }
        Err(zk::Error::NoNode) => Ok(Vec::new()),
        Err(e) => Err(map_error(e, &format!("list {path}"))),
    }
}

/// Every consumer record, at most [`MAX_CONSUMER_RECORDS`].
pub(super) async fn list(
    client: &zk::Client,
    paths: &Paths,
    limits: &Limits,
) -> Result<ConsumerList> {
    let mut list = ConsumerList::default();
    let mut apps = children(client, paths.consumers_root()).await?;
    let too_many_apps = apps.len() > MAX_CONSUMER_RECORDS;
    apps.truncate(MAX_CONSUMER_RECORDS);
    for app in apps {
        let mut ids = children(client, &paths.consumer_app(&app)).await?;
        let room = MAX_CONSUMER_RECORDS - list.records.len() - list.skipped.len();
        if ids.len() > room {
            ids.truncate(room);
            list.truncated = true;
        }
        let reads: Vec<_> = ids
            .iter()
            .map(|id| client.get_data(&paths.consumer(&app, id)))
            .collect();
        for (id, read) in ids.iter().zip(join_all(reads).await) {
            let path = paths.consumer(&app, id);
            let data = match read {
                Ok((data, _)) => data,
                Err(zk::Error::NoNode) => continue,
                Err(e) => return Err(map_error(e, &format!("read {path}"))),
            };
            match ConsumerRecord::from_json(&data, limits) {
                Ok(record) if record.app == app && record.id == *id => list.records.push(record),
                Ok(record) => list.skipped.push((
                    path,
                    format!(
                        "the record of {}/{} is stored under another path",
                        record.app, record.id
                    ),
                )),
                Err(e) => list.skipped.push((path, e.to_string())),
            }
        }
        if list.truncated {
            break;
        }
    }
    list.truncated |= too_many_apps;
    Ok(list)
}
