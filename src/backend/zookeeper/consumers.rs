//! Consumer records on ZooKeeper: the EPHEMERAL node `/introspect/consumers/{app}/{id}`
//! (under the group's root with a group), parents containers, in the backend's session for
//! the record's TTL (shared with the providers of that TTL, as instance nodes share it).
//! The session is the lease: when it expires the server deletes the node, and
//! [`ConsumerRegistration::keep_alive`] reports the record lost.

use std::time::Duration;

use async_trait::async_trait;
use futures::future::join_all;
use zookeeper_client as zk;

use super::paths::Paths;
use super::registration::create_replacing;
use super::session::{self, map_error};
use crate::backend::consumers::{ConsumerList, ConsumerRegistration, MAX_CONSUMER_RECORDS};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::ConsumerRecord;

/// One consumer node and the session that owns it.
pub(super) struct ZkConsumer {
    pub(super) client: zk::Client,
    pub(super) path: String,
    pub(super) app: String,
    pub(super) id: String,
    pub(super) limits: Limits,
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
        let path = paths.consumer(&record.app, &record.id);
        create_replacing(&client, &path, &data, acls).await?;
        Ok(ZkConsumer {
            client,
            path,
            app: record.app.clone(),
            id: record.id.clone(),
            limits: limits.clone(),
        })
    }

    fn lost(&self, why: &str) -> Error {
        session::lost(&self.client, &self.path, why)
    }
}

#[async_trait]
impl ConsumerRegistration for ZkConsumer {
    async fn update(&self, record: &ConsumerRecord) -> Result<()> {
        if record.app != self.app || record.id != self.id {
            return Err(Error::Config(format!(
                "the registration of consumer {}/{} cannot write the record of {}/{}",
                self.app, self.id, record.app, record.id
            )));
        }
        let data = record.to_json(&self.limits)?;
        if session::is_over(&self.client) {
            return Err(self.lost("the session is over"));
        }
        match self.client.set_data(&self.path, &data, None).await {
            Ok(_) => Ok(()),
            Err(zk::Error::NoNode) => Err(self.lost("its node is gone")),
            Err(zk::Error::SessionExpired) => Err(self.lost("the session expired")),
            Err(e) => Err(map_error(e, &format!("update {}", self.path))),
        }
    }

    async fn keep_alive(&self) -> Result<()> {
        session::check_held(&self.client, &self.path)?;
        match self.client.check_stat(&self.path).await {
            Ok(Some(stat)) if stat.ephemeral_owner == self.client.session_id().0 => Ok(()),
            Ok(Some(_)) => Err(self.lost("its node is held by another session")),
            Ok(None) => Err(self.lost("its node is gone")),
            Err(zk::Error::SessionExpired) => Err(self.lost("the session expired")),
            Err(e) => Err(map_error(e, &format!("check {}", self.path))),
        }
    }

    async fn deregister(&self) -> Result<()> {
        if session::is_over(&self.client) {
            return Ok(());
        }
        match self.client.delete(&self.path, None).await {
            Ok(()) | Err(zk::Error::NoNode) | Err(zk::Error::SessionExpired) => Ok(()),
            Err(e) => Err(map_error(e, &format!("delete {}", self.path))),
        }
    }

    fn id(&self) -> String {
        format!("session {}", self.client.session_id())
    }

    fn ttl(&self) -> Duration {
        self.client.session_timeout()
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
