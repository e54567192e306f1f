//! The registration part of the seam, written once for every record a registry holds while
//! its writer lives: an instance's and a consumer's. A registration is a record bound to a
//! liveness (an etcd lease, a ZooKeeper session, a Nacos connection) that its holder keeps
//! alive, rewrites and ends.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::interfaces::InterfaceRegistration;
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::{ConsumerRecord, ProviderUrl, ServiceInstance};

/// A record a [`Registration`] holds: an instance's or a consumer's.
pub trait Record: Send + Sync + 'static {
    /// What the record is, in messages: `instance`, `consumer`.
    const KIND: &'static str;

    /// Who the record is in the registry: `{app}/{host}:{port}`, `{app}/{id}`. A
    /// registration writes only records of its own identity.
    fn identity(&self) -> String;
}

impl Record for ServiceInstance {
    const KIND: &'static str = "instance";

    fn identity(&self) -> String {
        format!("{}/{}", self.service_name, self.key_address())
    }
}

impl Record for ConsumerRecord {
    const KIND: &'static str = "consumer";

    fn identity(&self) -> String {
        format!("{}/{}", self.app, self.id)
    }
}

/// Refuses to rewrite a record of another identity than the registration's own (`held`):
/// a caller's bug ([`Error::Misuse`]), never the registry's.
pub fn check_identity<R: Record>(held: &str, record: &R) -> Result<()> {
    let identity = record.identity();
    if identity == held {
        return Ok(());
    }
    Err(Error::Misuse(format!(
        "the registration of {} {held} cannot write the record of {identity}",
        R::KIND
    )))
}

/// What [`InstanceRegistry::register`](super::InstanceRegistry::register) writes under the
/// liveness it opens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Writes {
    /// The instance record (the application level).
    #[default]
    Record,
    /// No instance record, the liveness alone: for a provider that registers at the
    /// interface level only, whose URLs the liveness holds. Its `update` writes nothing.
    /// A backend without an interface-level layout refuses it with [`Error::Config`].
    LivenessOnly,
}

/// What a registration asks of the registry.
#[derive(Clone, Debug)]
pub struct RegisterOptions {
    /// How long the record outlives its holder's last keep-alive (the backend may round it
    /// to what the registry grants).
    pub ttl: Duration,
    /// What the record must fit.
    pub limits: Limits,
    /// What is written (instances only: a consumer's record is always written).
    pub writes: Writes,
}

impl RegisterOptions {
    /// A registration of the record, alive for `ttl`, that must fit `limits`.
    pub fn new(ttl: Duration, limits: &Limits) -> Self {
        RegisterOptions {
            ttl,
            limits: limits.clone(),
            writes: Writes::Record,
        }
    }

    /// The same, writing what `writes` says.
    pub fn writes(mut self, writes: Writes) -> Self {
        self.writes = writes;
        self
    }
}

/// One registered record and its liveness, as its holder keeps it: a provider its instance
/// (`Registration`, the default), a resolver its consumer record
/// (`Registration<ConsumerRecord>`).
///
/// The holder keeps it alive (calling [`Registration::keep_alive`] every third of its
/// [`ttl`](Registration::ttl)), rewrites its record (an export change, a graceful stop, a
/// new subscription: [`Registration::update`]) and ends it ([`Registration::deregister`]).
#[async_trait]
pub trait Registration<R: Record = ServiceInstance>: Send + Sync + 'static {
    /// Writes `record` (of the same identity, see [`check_identity`]) again under the same
    /// liveness.
    async fn update(&self, record: &R) -> Result<()>;

    /// Renews the liveness where the backend needs it (an etcd lease), or checks it (a
    /// ZooKeeper session). Fails with [`Error::RegistrationLost`] once the registry no
    /// longer holds it (the lease or session expired): register again.
    async fn keep_alive(&self) -> Result<()>;

    /// Deletes the record and ends the liveness (revokes the lease, closes the session).
    async fn deregister(&self) -> Result<()>;

    /// What holds the record alive, for logs and tests: `lease 7587…`, `session 0x…`.
    fn id(&self) -> String;

    /// The liveness the registry granted: a dead holder's record goes this long after its
    /// last keep-alive (ZooKeeper negotiates the session timeout, so it may differ from the
    /// one asked for).
    fn ttl(&self) -> Duration;

    /// Writes the interface-level `url` under this registration's liveness (see
    /// [`super::interfaces`]); it must fit `limits`. Only an instance's registration on a
    /// backend with an interface-level layout writes one; the default fails with
    /// [`Error::Config`].
    async fn register_interface(
        &self,
        url: &ProviderUrl,
        limits: &Limits,
    ) -> Result<Arc<dyn InterfaceRegistration>> {
        let _ = limits;
        Err(Error::config(format!(
            "this registration writes no interface-level URL (asked for {})",
            url.key()
        )))
    }
}
