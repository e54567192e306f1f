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

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use zookeeper_client as zk;

use super::node::Node;
use super::options::ZooKeeperOptions;
use super::paths::Paths;
use super::record;
use super::session;
use crate::backend::{
    InterfaceRegistration, RegisterOptions, Registration, Writes, check_identity,
};
use crate::error::Result;
use crate::limits::Limits;
use crate::model::{ProviderUrl, ServiceInstance};

/// One instance node (or, for a provider registering at the interface level only, none)
/// and the session that owns it.
pub(super) struct ZkRegistration {
    /// The instance node; for a registration of liveness alone, what it stands for
    /// (`/services/{app}/{host}:{port}`), never written.
    node: Node,
    /// Whether the instance node is written.
    record: bool,
    /// Where interface-level URLs go: `/dubbo` or `/{group}`.
    interface_root: String,
    /// `{app}/{host}:{port}`.
    identity: String,
    limits: Limits,
    registered_at: i64,
}

impl ZkRegistration {
    /// Ensures the epoch and, unless `options` ask for the liveness alone, creates the node
    /// under `client`'s session.
    pub(super) async fn register(
        client: zk::Client,
        options: &ZooKeeperOptions,
        paths: &Paths,
        instance: &ServiceInstance,
        register: &RegisterOptions,
    ) -> Result<Self> {
        instance.validate()?;
        let limits = &register.limits;
        let registered_at = now_ms();
        let path = paths.instance(&instance.service_name, &instance.key_address());
        let node = Node::new(client, session::acls(options), path);
        let record = register.writes == Writes::Record;
        if record {
            let data = record::to_json(instance, registered_at);
            limits.check_size("instance record", data.len(), limits.max_instance_bytes)?;
            // The epoch's check and the record's create go out together: one round trip,
            // not two, before the record is seen, and the record's create is the only
            // write while the epoch exists. When it is absent, the record may be seen
            // before the epoch is created: no wipe sign either (a new store has none).
            let (epoch, created) = futures::join!(
                super::epoch::ensure(&node.client, paths, node.acls),
                node.create(&data),
            );
            if let Err(error) = epoch {
                // No registration is returned: its record must not outlive the error in the
                // shared session.
                if created.is_ok() {
                    let _ = node.delete().await;
                }
                return Err(error);
            }
            created?;
        } else {
            super::epoch::ensure(&node.client, paths, node.acls).await?;
        }
        Ok(ZkRegistration {
            node,
            record,
            interface_root: paths.interface_root().to_owned(),
            identity: crate::backend::Record::identity(instance),
            limits: limits.clone(),
            registered_at,
        })
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[async_trait]
impl Registration for ZkRegistration {
    async fn update(&self, instance: &ServiceInstance) -> Result<()> {
        check_identity(&self.identity, instance)?;
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
        self.node.set(&data).await
    }

    async fn keep_alive(&self) -> Result<()> {
        self.node.check(self.record).await
    }

    async fn deregister(&self) -> Result<()> {
        if !self.record {
            return Ok(());
        }
        self.node.delete().await
    }

    fn id(&self) -> String {
        self.node.id()
    }

    fn ttl(&self) -> Duration {
        self.node.ttl()
    }

    async fn register_interface(
        &self,
        url: &ProviderUrl,
        limits: &Limits,
    ) -> Result<Arc<dyn InterfaceRegistration>> {
        if session::is_over(&self.node.client) {
            return Err(self.node.lost("the session is over"));
        }
        let registered = super::interfaces::ZkInterface::register(
            self.node.client.clone(),
            self.node.acls,
            &self.interface_root,
            url,
            limits,
        )
        .await?;
        Ok(Arc::new(registered))
    }
}
