//! The instances part of the seam: one record per running process of an app, registered
//! with liveness (a lease, a session, a connection), listed, and followed as a stream of
//! resets, upserts and removals.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

use super::follow::{Follow, Followed};
#[cfg(doc)]
use super::registration::Writes;
use super::registration::{RegisterOptions, Registration};
use crate::error::Result;
use crate::limits::Limits;
use crate::model::ServiceInstance;

/// An app's instances by `{host}:{port}` (the unbracketed form of the registry's keys).
pub type Instances = BTreeMap<String, Arc<ServiceInstance>>;

/// Told of the instances of each page of a list as it is parsed (see
/// [`InstanceRead::with_early`]).
pub type EarlyInstances<'a> = &'a (dyn Fn(&[&Arc<ServiceInstance>]) + Send + Sync);

/// How one list or follow of an app reads: the bounds on what it reads and, when the
/// reader wants them, each page's instances as soon as they are parsed.
///
/// ```
/// use introspect::Limits;
/// use introspect::backend::InstanceRead;
///
/// let limits = Limits::default();
/// let read = InstanceRead::new(&limits).with_early(&|page| println!("{} parsed", page.len()));
/// assert!(read.early.is_some());
/// ```
#[derive(Clone, Copy)]
pub struct InstanceRead<'a> {
    /// The bounds on what is read (record and list sizes).
    pub limits: &'a Limits,
    /// Told of each page's instances while the rest is still being read, so a resolver
    /// starts fetching metadata before the whole list is in. A backend that reads an app in
    /// one answer need not call it; a follow calls it for its first read only.
    pub early: Option<EarlyInstances<'a>>,
}

impl<'a> InstanceRead<'a> {
    /// A read bounded by `limits`, telling no one of its pages.
    pub fn new(limits: &'a Limits) -> Self {
        InstanceRead {
            limits,
            early: None,
        }
    }

    /// Tells `early` of each page's instances as soon as they are parsed.
    pub fn with_early(mut self, early: EarlyInstances<'a>) -> Self {
        self.early = Some(early);
        self
    }
}

impl<'a> From<&'a Limits> for InstanceRead<'a> {
    fn from(limits: &'a Limits) -> Self {
        InstanceRead::new(limits)
    }
}

impl std::fmt::Debug for InstanceRead<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InstanceRead")
            .field("limits", self.limits)
            .field("early", &self.early.is_some())
            .finish()
    }
}

/// The instances of one app, as one read saw them.
#[derive(Clone, Debug, Default)]
pub struct InstanceList {
    /// Instances by `{host}:{port}`.
    pub instances: Instances,
    /// Records of the app that were skipped: their `{host}:{port}` (or key) and why.
    pub skipped: Vec<(String, String)>,
    /// Where the read was: the store revision of the read (etcd, memory), or the backend's
    /// nearest equivalent (ZooKeeper: the highest zxid the list saw); `0` when the backend
    /// has none or this read gave none (ZooKeeper without the app node). `0` is never
    /// compared. A revision lower than one seen before means the registry was wiped or
    /// replaced.
    pub revision: i64,
    /// The registry's epoch as read with the list: a random id that providers of this crate
    /// create when it is absent. A change, or its disappearance, means the registry was wiped
    /// or replaced. `None` when there is none (no provider of this crate created it yet, or
    /// the registry forgot it).
    pub epoch: Option<String>,
}

/// One change to an app's instances.
#[derive(Clone, Debug)]
pub enum InstanceChange {
    /// An instance was registered or its record changed.
    Upsert(Arc<ServiceInstance>),
    /// The instance at this `{host}:{port}` is gone (deregistered, or its liveness ended).
    Removed(String),
    /// A record that could not be used; it is treated as absent.
    Skipped {
        /// The `{host}:{port}` of its key.
        address: String,
        /// Why it was skipped.
        reason: String,
    },
}

/// What following an app yields.
#[derive(Clone, Debug)]
pub enum InstanceEvent {
    /// The whole app as one read saw it: always the first event, and again whenever the
    /// backend read the app afresh. Whoever follows replaces what it had.
    Reset(InstanceList),
    /// Changes since the last event, in order.
    Changes(Vec<InstanceChange>),
}

impl InstanceEvent {
    /// A batch of changes as an event; none for an empty batch (never sent).
    pub fn changes(changes: Vec<InstanceChange>) -> Option<InstanceEvent> {
        (!changes.is_empty()).then_some(InstanceEvent::Changes(changes))
    }
}

/// A stream of one app's [`InstanceEvent`]s; dropping it stops following.
///
/// # For implementers
///
/// Make it with [`Follow::channel`] and feed it as [`Follow`] says: an
/// [`InstanceEvent::Reset`] first, then changes (or more resets), never an empty batch; a
/// follower 512 events behind ends the stream and re-follows from a fresh read.
pub type InstanceFollow = Follow<InstanceEvent>;

impl Followed for InstanceEvent {
    const BUFFER: usize = 512;
}

/// The instances part of a registry backend. See the module docs.
#[async_trait]
pub trait InstanceRegistry: Send + Sync + 'static {
    /// Writes `instance`'s record (or, as `options` say, its liveness alone) and creates the
    /// registry's epoch when it is absent. The record must fit the options' limits.
    async fn register(
        &self,
        instance: &ServiceInstance,
        options: &RegisterOptions,
    ) -> Result<Arc<dyn Registration>>;

    /// Whether [`Registration::register_interface`] writes interface-level URLs here (and
    /// [`Writes::LivenessOnly`] registers): ZooKeeper and Nacos; not the default.
    fn interface_level(&self) -> bool {
        false
    }

    /// Every instance of `app`, skipping (and reporting) records that cannot be used,
    /// read as `read` says.
    async fn list(&self, app: &str, read: InstanceRead<'_>) -> Result<InstanceList>;

    /// Every app with at least one instance record, with its instances.
    async fn list_apps(&self, limits: &Limits) -> Result<BTreeMap<String, InstanceList>>;

    /// Follows `app`: a reset from a fresh read (made as `read` says) first, then its
    /// changes, with no gap between the read and the changes. Never writes anything.
    async fn follow(&self, app: &str, read: InstanceRead<'_>) -> Result<InstanceFollow>;
}
