//! Interface-level provider URLs on ZooKeeper, as Dubbo's `ZookeeperRegistry` writes them:
//! the EPHEMERAL node `{root}/{URL-encoded interface}/providers/{URL-encoded full URL}`
//! (see [`ProviderUrl::zookeeper_node`]) in the session of the instance's registration, so
//! it goes with that session; its parents persistent (as Dubbo makes them: its consumers
//! watch `…/providers`, which must outlive its last provider). The node's data is the
//! provider's host, as Curator's default data is the writer's address; readers read the
//! name only.
//!
//! Creating follows Curator's fault-tolerant create: a node left by an earlier session of
//! the same provider (not yet expired) is deleted and created again. The URL is the node's
//! name, so an update creates the new node, then deletes the old one: the service is never
//! absent while its parameters change.

use tokio::sync::Mutex;
use zookeeper_client as zk;

use super::paths::parent;
use super::session::map_error;
use crate::backend::InterfaceRegistration;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::ProviderUrl;

/// One interface-level URL node in a registration's session.
pub(super) struct ZkInterface {
    client: zk::Client,
    acls: zk::Acls<'static>,
    root: String,
    limits: Limits,
    /// The node as last written.
    path: Mutex<String>,
}

impl ZkInterface {
    /// Writes `url`'s node under `root` in `client`'s session.
    pub(super) async fn register(
        client: zk::Client,
        acls: zk::Acls<'static>,
        root: &str,
        url: &ProviderUrl,
        limits: &Limits,
    ) -> Result<Self> {
        let path = node(root, url, limits)?;
        create(&client, &path, url.host.as_bytes(), acls).await?;
        Ok(ZkInterface {
            client,
            acls,
            root: root.to_owned(),
            limits: limits.clone(),
            path: Mutex::new(path),
        })
    }
}

/// The node of `url` under `root`, checked against `limits`.
fn node(root: &str, url: &ProviderUrl, limits: &Limits) -> Result<String> {
    url.validate()?;
    let path = url.zookeeper_node(root);
    limits.check_size(
        "interface-level URL node",
        path.len(),
        limits.max_instance_bytes,
    )?;
    Ok(path)
}

/// Creates the ephemeral node at `path`, its missing parents persistent; one that exists
/// is deleted and created again.
async fn create(
    client: &zk::Client,
    path: &str,
    data: &[u8],
    acls: zk::Acls<'static>,
) -> Result<()> {
    let ephemeral = zk::CreateMode::Ephemeral.with_acls(acls);
    let persistent = zk::CreateMode::Persistent.with_acls(acls);
    for _ in 0..4 {
        match client.create(path, data, &ephemeral).await {
            Ok(_) => return Ok(()),
            Err(zk::Error::NoNode) => {
                let Some(parent) = parent(path) else {
                    return Err(Error::store(format!("create {path}: no parent")));
                };
                client
                    .mkdir(parent, &persistent)
                    .await
                    .map_err(|e| map_error(e, &format!("create {parent}")))?;
            }
            Err(zk::Error::NodeExists) => match client.delete(path, None).await {
                Ok(()) | Err(zk::Error::NoNode) => {}
                Err(e) => return Err(map_error(e, &format!("replace {path}"))),
            },
            Err(e) => return Err(map_error(e, &format!("create {path}"))),
        }
    }
    Err(Error::Contended {
        key: path.to_owned(),
        attempts: 4,
    })
}

/// Deletes `path`; gone already is done.
async fn delete(client: &zk::Client, path: &str) -> Result<()> {
    match client.delete(path, None).await {
        Ok(()) | Err(zk::Error::NoNode) | Err(zk::Error::SessionExpired) => Ok(()),
        Err(e) => Err(map_error(e, &format!("delete {path}"))),
    }
}

#[async_trait::async_trait]
impl InterfaceRegistration for ZkInterface {
    async fn update(&self, url: &ProviderUrl) -> Result<()> {
        let fresh = node(&self.root, url, &self.limits)?;
        let mut path = self.path.lock().await;
        if *path == fresh {
            return Ok(());
        }
        create(&self.client, &fresh, url.host.as_bytes(), self.acls).await?;
        let old = std::mem::replace(&mut *path, fresh);
        delete(&self.client, &old).await
    }

    async fn deregister(&self) -> Result<()> {
        let path = self.path.lock().await;
        delete(&self.client, &path).await
    }

    fn id(&self) -> String {
        self.path
            .try_lock()
            .map_or_else(|_| self.root.clone(), |path| path.clone())
    }
}
