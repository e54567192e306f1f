//! A registration on ZooKeeper: an EPHEMERAL node under a session asking for the provider's
//! TTL as the session timeout. The session is the lease: the server ends it (and deletes
//! the node) when the process stops pinging for the negotiated timeout. Registrations of
//! one backend with the same TTL share one session (see [`super::Sessions`]), as Dubbo Java
//! shares one Curator session per registry in a process: ZooKeeper allows 60 connections
//! per client address by default (`maxClientCnxns`), fewer than a process may run providers.
//!
//! Writes follow Curator's `ServiceDiscoveryImpl` (which Dubbo Java registers through):
//! create with parent containers; on `NodeExists`, delete and create again (so watchers
//! fire, and a node left by an earlier session of the same address is replaced); an export
//! change or the stopping marker is a `setData`; deregister deletes. After the session
//! expires, [`Registration::keep_alive`] reports the registration lost and the provider
//! registers again with a new session.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use zookeeper_client as zk;

use super::options::ZooKeeperOptions;
use super::paths::Paths;
use super::record;
use super::session::{self, map_error};
use crate::backend::{InterfaceRegistration, Registration};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::{ProviderUrl, ServiceInstance};

/// One instance node (or, for a provider registering at the interface level only, none)
/// and the session that owns it.
pub(super) struct ZkRegistration {
    client: zk::Client,
    acls: zk::Acls<'static>,
    /// The instance node; for a registration of liveness alone, what it stands for
    /// (`/services/{app}/{host}:{port}`), never written.
    path: String,
    /// Whether the instance node is written.
    record: bool,
    /// Where interface-level URLs go: `/dubbo` or `/{group}`.
    interface_root: String,
    app: String,
    address: String,
    limits: Limits,
    registered_at: i64,
}

impl ZkRegistration {
    /// Ensures the epoch and creates the node under `client`'s session.
    pub(super) async fn register(
        client: zk::Client,
        options: &ZooKeeperOptions,
        paths: &Paths,
        instance: &ServiceInstance,
        limits: &Limits,
    ) -> Result<Self> {
        instance.validate()?;
        let registered_at = now_ms();
        let data = record::to_json(instance, registered_at);
        limits.check_size("instance record", data.len(), limits.max_instance_bytes)?;
        let acls = session::acls(options);
        let path = paths.instance(&instance.service_name, &instance.address());
        // The epoch's create and the record's go out together: one round trip, not two
        // before the record is seen. The session keeps their order, so the epoch is there
        // first (a record seen before a new store's epoch is no wipe sign either).
        let (epoch, created) = futures::join!(
            super::epoch::ensure(&client, paths, acls),
            create_replacing(&client, &path, &data, acls),
        );
        if let Err(error) = epoch {
            // No registration is returned: its record must not outlive the error in the
            // shared session.
            if created.is_ok() {
                let _ = client.delete(&path, None).await;
            }
            return Err(error);
        }
        created?;
        Ok(ZkRegistration {
            client,
            acls,
            path,
            record: true,
            interface_root: paths.interface_root().to_owned(),
            app: instance.service_name.clone(),
            address: instance.address(),
            limits: limits.clone(),
            registered_at,
        })
    }

    /// Holds `client`'s session for `instance`'s interface-level URLs, writing no instance
    /// node.
    pub(super) async fn liveness(
        client: zk::Client,
        options: &ZooKeeperOptions,
        paths: &Paths,
        instance: &ServiceInstance,
        limits: &Limits,
    ) -> Result<Self> {
        instance.validate()?;
        let acls = session::acls(options);
        super::epoch::ensure(&client, paths, acls).await?;
        Ok(ZkRegistration {
            path: paths.instance(&instance.service_name, &instance.address()),
            client,
            acls,
            record: false,
            interface_root: paths.interface_root().to_owned(),
            app: instance.service_name.clone(),
            address: instance.address(),
            limits: limits.clone(),
            registered_at: now_ms(),
        })
    }

    fn lost(&self, why: &str) -> Error {
        session::lost(&self.client, &self.path, why)
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

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[async_trait]
impl Registration for ZkRegistration {
    async fn update(&self, instance: &ServiceInstance) -> Result<()> {
        if instance.service_name != self.app || !instance.is_at(&self.address) {
            return Err(Error::Config(format!(
                "a registration of {}/{} cannot write the record of {}/{}",
                self.app,
                self.address,
                instance.service_name,
                instance.address()
            )));
        }
        instance.validate()?;
        if !self.record {
            return Ok(());
        }
        let data = record::to_json(instance, self.registered_at);
        self.limits.check_size(
            "instance record",
            data.len(),
            self.limits.max_instance_bytes,
        )?;
        if session::is_over(&self.client) {
            return Err(self.lost("the session is over"));
        }
        match self.client.set_data(&self.path, &data, None).await {
            Ok(_) => Ok(()),
            // Deleted under a live session (by an operator, say): ours again.
            Err(zk::Error::NoNode) => {
                create_replacing(&self.client, &self.path, &data, self.acls).await
            }
            Err(zk::Error::SessionExpired) => Err(self.lost("the session expired")),
            Err(e) => Err(map_error(e, &format!("update {}", self.path))),
        }
    }

    async fn keep_alive(&self) -> Result<()> {
        // The client pings by itself; this checks that the session and its node live.
        session::check_held(&self.client, &self.path)?;
        if !self.record {
            return Ok(());
        }
        match self.client.check_stat(&self.path).await {
            Ok(Some(stat)) if stat.ephemeral_owner == self.client.session_id().0 => Ok(()),
            Ok(Some(_)) => Err(Error::Store(format!(
                "{} is held by another ZooKeeper session (another process registered the same \
                 address)",
                self.path
            ))),
            Ok(None) => Err(self.lost("its node is gone")),
            Err(zk::Error::SessionExpired) => Err(self.lost("the session expired")),
            Err(e) => Err(map_error(e, &format!("check {}", self.path))),
        }
    }

    async fn deregister(&self) -> Result<()> {
        if session::is_over(&self.client) || !self.record {
            return Ok(()); // the server deleted the node with the session
        }
        match self.client.delete(&self.path, None).await {
            Ok(()) | Err(zk::Error::NoNode) | Err(zk::Error::SessionExpired) => Ok(()),
            Err(e) => Err(map_error(e, &format!("delete {}", self.path))),
        }
        // The session closes when the last registration on it is dropped.
    }

    fn id(&self) -> String {
        format!("session {}", self.client.session_id())
    }

    fn ttl(&self) -> Duration {
        self.client.session_timeout()
    }

    async fn register_interface(
        &self,
        url: &ProviderUrl,
        limits: &Limits,
    ) -> Result<std::sync::Arc<dyn InterfaceRegistration>> {
        if session::is_over(&self.client) {
            return Err(self.lost("the session is over"));
        }
        let registered = super::interfaces::ZkInterface::register(
            self.client.clone(),
            self.acls,
            &self.interface_root,
            url,
            limits,
        )
        .await?;
        Ok(std::sync::Arc::new(registered))
    }
}
