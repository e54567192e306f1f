//! The store: the one seam to the outside.
//!
//! An etcd-shaped key-value interface: range by prefix, put (optionally bound to a lease),
//! delete, compare-and-swap on a key's modification revision, watch a prefix from a store
//! revision, and leases whose expiry deletes the keys bound to them. [`MemoryStore`] and
//! `EtcdStore` (feature `etcd`) implement it with the same semantics, checked by one conformance suite;
//! nothing above this module knows which one it talks to.

mod deadline;
#[cfg(feature = "etcd")]
mod etcd;
mod memory;

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::mpsc;

use crate::error::Result;

pub use deadline::DeadlineStore;
#[cfg(feature = "etcd")]
#[cfg_attr(docsrs, doc(cfg(feature = "etcd")))]
pub use etcd::{EtcdOptions, EtcdStore};
pub use memory::MemoryStore;

/// A lease id; liveness of the keys bound to it.
pub type LeaseId = i64;

/// One key and its value with the store revisions that wrote it.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// The value bytes.
    pub value: Vec<u8>,
    /// Store revision at which the key was created.
    pub create_revision: i64,
    /// Store revision of the key's last modification; the compare-and-swap token.
    pub mod_revision: i64,
    /// The lease the key is bound to; `0` for none.
    pub lease: LeaseId,
}

impl fmt::Debug for KeyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyValue")
            .field("key", &self.key)
            .field("value", &String::from_utf8_lossy(&self.value))
            .field("mod_revision", &self.mod_revision)
            .field("lease", &self.lease)
            .finish()
    }
}

/// The keys under a prefix, read at one store revision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Range {
    /// The keys in ascending order.
    pub kvs: Vec<KeyValue>,
    /// The store revision the read saw; watch from `revision + 1` to miss nothing.
    pub revision: i64,
}

/// One page of the keys under a prefix; see [`Store::get_prefix_page`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Page {
    /// The keys in ascending order.
    pub kvs: Vec<KeyValue>,
    /// The store revision the page was read at: the pinned one when one was asked for.
    pub revision: i64,
    /// Whether keys after the last one of this page remain.
    pub more: bool,
}

impl Page {
    /// The key the next page starts after, when keys remain.
    pub fn next_after(&self) -> Option<String> {
        self.kvs
            .last()
            .filter(|_| self.more)
            .map(|last| last.key.clone())
    }
}

/// A change seen by a watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchEvent {
    /// A key was created or modified.
    Put(KeyValue),
    /// A key was deleted (explicitly or by lease expiry).
    Delete {
        /// The key.
        key: String,
        /// The store revision of the deletion.
        mod_revision: i64,
    },
}

impl WatchEvent {
    /// The key the event is about.
    pub fn key(&self) -> &str {
        match self {
            WatchEvent::Put(kv) => &kv.key,
            WatchEvent::Delete { key, .. } => key,
        }
    }

    /// The store revision of the change.
    pub fn mod_revision(&self) -> i64 {
        match self {
            WatchEvent::Put(kv) => kv.mod_revision,
            WatchEvent::Delete { mod_revision, .. } => *mod_revision,
        }
    }
}

/// What a compare-and-swap did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CasOutcome {
    /// The value was written at this store revision.
    Written {
        /// The store revision of the write.
        revision: i64,
    },
    /// The key had another modification revision; nothing was written.
    Conflict {
        /// The key as it is now (`None`: absent).
        current: Option<KeyValue>,
    },
}

/// A stream of changes under a prefix. Dropping it cancels the watch.
///
/// # For implementers of [`Store`]
///
/// A store outside this crate makes its watches with [`Watch::channel`] (or
/// [`Watch::new`] on a channel of at most [`Watch::BUFFER`] batches) and feeds the sender
/// from its own task:
///
/// * send each change as a batch of one or more whole store revisions, in revision order,
///   never an empty batch;
/// * send with `try_send`, never an awaiting `send`: when the buffer is full the watcher is
///   [`BUFFER`](Watch::BUFFER) batches behind, so end the watch (drop the sender, or send an
///   `Err` if there is room) and let the watcher re-list. Memory per watch stays bounded
///   and the store never waits on a slow subscriber;
/// * an `Err` is the last item: send [`crate::error::Error::Compacted`] when the history asked
///   for is gone and [`crate::error::Error::WatchEnded`] when the watch breaks, then drop the
///   sender;
/// * stop (and release the store's watcher) when the sender reports the channel closed:
///   the [`Watch`] was dropped.
///
/// ```
/// use introspect::store::{Watch, WatchEvent};
/// use tokio::sync::mpsc::{Receiver, error::TrySendError};
///
/// /// A store's task forwarding its changes (one batch per revision) to one watcher.
/// fn watch(mut changes: Receiver<Vec<WatchEvent>>) -> Watch {
///     let (events, watch) = Watch::channel();
///     tokio::spawn(async move {
///         while let Some(batch) = changes.recv().await {
///             if let Err(TrySendError::Full(_) | TrySendError::Closed(_)) =
///                 events.try_send(Ok(batch))
///             {
///                 return; // too far behind, or dropped: the watcher re-lists
///             }
///         }
///         let ended = introspect::Error::watch_ended("the source closed");
///         let _ = events.try_send(Err(ended));
///     });
///     watch
/// }
/// ```
#[derive(Debug)]
pub struct Watch {
    events: mpsc::Receiver<Result<Vec<WatchEvent>>>,
}

impl Watch {
    /// Batches buffered between a store and a slow watcher before the store ends the watch
    /// (the watcher then re-lists from a fresh read). A bound, not a target: a watcher that
    /// keeps up holds a handful; one that falls this far behind costs one re-list rather
    /// than unbounded memory, and the store never waits for it.
    pub const BUFFER: usize = 512;

    /// A watch fed by a store's task through `events` (see the type's docs for the rules
    /// a feeding task follows). A channel bounded by more than [`BUFFER`](Self::BUFFER)
    /// batches works but gives up the memory bound.
    pub fn new(events: mpsc::Receiver<Result<Vec<WatchEvent>>>) -> Self {
        Watch { events }
    }

    /// A watch and the sender that feeds it, bounded by [`BUFFER`](Self::BUFFER) batches.
    pub fn channel() -> (mpsc::Sender<Result<Vec<WatchEvent>>>, Watch) {
        let (sender, receiver) = mpsc::channel(Self::BUFFER);
        (sender, Watch::new(receiver))
    }

    /// The next batch of events, of one or more store revisions, in order. An `Err` is
    /// final (compaction, cancellation, lagging, lost connection): re-list and watch again.
    pub async fn next(&mut self) -> Result<Vec<WatchEvent>> {
        match self.events.recv().await {
            Some(batch) => batch,
            None => Err(crate::error::Error::watch_ended(
                "closed by the store (the watcher fell behind, or the store went away)",
            )),
        }
    }
}

/// An etcd-shaped key-value store. See the module docs.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// The key's current value, if any.
    async fn get(&self, key: &str) -> Result<Option<KeyValue>>;

    /// Every key starting with `prefix`, in key order, read at one store revision.
    async fn get_prefix(&self, prefix: &str) -> Result<Range>;

    /// One page of the keys starting with `prefix`, in key order: those after `after`
    /// (`None`: from the first), read at store revision `revision` (`0`: now). Reading the
    /// first page at `0` and the rest at its [`Page::revision`] gives one consistent view
    /// of a prefix of any length, page by page; the store chooses the page size.
    ///
    /// Fails with [`crate::error::Error::Compacted`] when `revision` is compacted away.
    ///
    /// The default reads the whole prefix now, in one page (`more` is `false`), for stores
    /// that hold everything in memory anyway; stores that page override it.
    async fn get_prefix_page(
        &self,
        prefix: &str,
        after: Option<&str>,
        revision: i64,
    ) -> Result<Page> {
        let _ = revision;
        let range = self.get_prefix(prefix).await?;
        let kvs = match after {
            Some(after) => range
                .kvs
                .into_iter()
                .filter(|kv| kv.key.as_str() > after)
                .collect(),
            None => range.kvs,
        };
        Ok(Page {
            kvs,
            revision: range.revision,
            more: false,
        })
    }

    /// Writes a key, bound to `lease` when given (the lease must be alive); returns the
    /// store revision of the write.
    async fn put(&self, key: &str, value: Vec<u8>, lease: Option<LeaseId>) -> Result<i64>;

    /// Deletes a key; returns whether it existed.
    async fn delete(&self, key: &str) -> Result<bool>;

    /// Writes a key only if its modification revision is `expected_mod_revision`
    /// (`0`: the key must be absent).
    async fn compare_and_swap(
        &self,
        key: &str,
        expected_mod_revision: i64,
        value: Vec<u8>,
        lease: Option<LeaseId>,
    ) -> Result<CasOutcome>;

    /// Deletes a key only if its modification revision is `expected_mod_revision` (at least
    /// `1`): [`CasOutcome::Written`] with the revision of the deletion, or
    /// [`CasOutcome::Conflict`] with the key as it is now (`None`: absent).
    ///
    /// The default refuses: a store outside this crate that keeps config items implements
    /// it as one atomic request (never a read then a delete).
    async fn compare_and_delete(
        &self,
        key: &str,
        expected_mod_revision: i64,
    ) -> Result<CasOutcome> {
        let _ = (key, expected_mod_revision);
        Err(crate::error::Error::store(format!(
            "the {} store does not support compare-and-delete",
            self.backend()
        )))
    }

    /// Watches every key starting with `prefix`, from store revision `from_revision`
    /// (`0`: changes after now). Fails with [`crate::error::Error::Compacted`] when that history is
    /// gone.
    async fn watch_prefix(&self, prefix: &str, from_revision: i64) -> Result<Watch>;

    /// Grants a lease that expires `ttl` after its last keep-alive.
    async fn grant_lease(&self, ttl: Duration) -> Result<LeaseId>;

    /// Renews a lease; returns its TTL. Fails with [`crate::error::Error::LeaseNotFound`] when it
    /// expired or was revoked.
    async fn keep_alive(&self, lease: LeaseId) -> Result<Duration>;

    /// Revokes a lease, deleting the keys bound to it.
    async fn revoke_lease(&self, lease: LeaseId) -> Result<()>;

    /// Drops history up to `revision`: watches from before it fail with
    /// [`crate::error::Error::Compacted`].
    async fn compact(&self, revision: i64) -> Result<()>;

    /// The backend's name, for logs: `memory` or `etcd`.
    fn backend(&self) -> &'static str;
}

/// Default deadline of one store call made by a provider or a resolver.
pub(crate) const DEFAULT_STORE_TIMEOUT: Duration = Duration::from_secs(5);

/// The end of a prefix range: the smallest key greater than every key with the prefix.
#[allow(dead_code)]
pub(crate) fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}
