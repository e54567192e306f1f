//! An EPHEMERAL node a registration holds in its session: an instance's or a consumer's.
//! What both kinds do to it (create, rewrite, check, delete) is written here once.

use std::time::Duration;

use zookeeper_client as zk;

use super::session::{self, map_error};
use crate::error::{Error, Result};

/// One ephemeral node and the session that owns it.
pub(super) struct Node {
    pub(super) client: zk::Client,
    pub(super) acls: zk::Acls<'static>,
    pub(super) path: String,
}

impl Node {
    /// The node at `path` in `client`'s session; nothing is written yet.
    pub(super) fn new(client: zk::Client, acls: zk::Acls<'static>, path: String) -> Self {
        Node { client, acls, path }
    }

    /// Creates the node with `data`, replacing one an earlier session left.
    pub(super) async fn create(&self, data: &[u8]) -> Result<()> {
        create_replacing(&self.client, &self.path, data, self.acls).await
    }

    /// Rewrites the node's data; a node deleted under the live session (by an operator,
    /// say) is created again: it is ours.
    pub(super) async fn set(&self, data: &[u8]) -> Result<()> {
        if session::is_over(&self.client) {
            return Err(self.lost("the session is over"));
        }
        match self.client.set_data(&self.path, data, None).await {
            Ok(_) => Ok(()),
            Err(zk::Error::NoNode) => self.create(data).await,
            Err(zk::Error::SessionExpired) => Err(self.lost("the session expired")),
            Err(e) => Err(map_error(e, &format!("update {}", self.path))),
        }
    }

    /// Checks that the session lives (the client pings by itself) and, when `written`,
    /// that the node is still there and still this session's.
    pub(super) async fn check(&self, written: bool) -> Result<()> {
        session::check_held(&self.client, &self.path)?;
        if !written {
            return Ok(());
        }
        match self.client.check_stat(&self.path).await {
            Ok(Some(stat)) if stat.ephemeral_owner == self.client.session_id().0 => Ok(()),
            Ok(Some(_)) => Err(Error::store(format!(
                "{} is held by another ZooKeeper session (another process registered the same \
                 record)",
                self.path
            ))),
            Ok(None) => Err(self.lost("its node is gone")),
            Err(zk::Error::SessionExpired) => Err(self.lost("the session expired")),
            Err(e) => Err(map_error(e, &format!("check {}", self.path))),
        }
    }

    /// Deletes the node (a session that is over took it with it). The session closes when
    /// the last registration on it is dropped.
    pub(super) async fn delete(&self) -> Result<()> {
        if session::is_over(&self.client) {
            return Ok(());
        }
        match self.client.delete(&self.path, None).await {
            Ok(()) | Err(zk::Error::NoNode) | Err(zk::Error::SessionExpired) => Ok(()),
            Err(e) => Err(map_error(e, &format!("delete {}", self.path))),
        }
    }

    /// The error of a node whose session (or the node itself) is gone: register again.
    pub(super) fn lost(&self, why: &str) -> Error {
        session::lost(&self.client, &self.path, why)
    }

    /// The session, for logs: `session 0x…`.
    pub(super) fn id(&self) -> String {
        format!("session {}", self.client.session_id())
    }

    /// The session timeout the server negotiated.
    pub(super) fn ttl(&self) -> Duration {
        self.client.session_timeout()
    }
}

/// Creates the ephemeral node at `path`; one that exists (an earlier session's, not yet
/// expired) is deleted and created again, as Curator does.
pub(super) async fn create_replacing(
    client: &zk::Client,
    path: &str,
    data: &[u8],
    acls: zk::Acls<'static>,
) -> Result<()> {
    let what = || format!("create {path}");
    for _ in 0..2 {
        match session::create(client, path, data, zk::CreateMode::Ephemeral, acls).await {
            Ok(_) => return Ok(()),
            Err(zk::Error::NodeExists) => match client.delete(path, None).await {
                Ok(()) | Err(zk::Error::NoNode) => {}
                Err(e) => return Err(map_error(e, &format!("replace {path}"))),
            },
            Err(e) => return Err(map_error(e, &what())),
        }
    }
    Err(Error::Contended {
        key: path.to_owned(),
        attempts: 2,
    })
}
