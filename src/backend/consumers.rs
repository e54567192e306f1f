//! The consumers part of the seam: optional records of who consumes what, written in a
//! place of their own (never among the instances, so they count in no self-preservation
//! share and wake no watcher of an app), with liveness like a provider's record.
//!
//! | backend | where a record is written |
//! |---|---|
//! | memory, etcd | `/introspect/consumers/{app}/{id}` under the layout's namespace, bound to a lease |
//! | ZooKeeper | the EPHEMERAL znode `/introspect/consumers/{app}/{id}` (under the root), in the backend's session |
//! | Nacos | an ephemeral instance of service `{app}` in group `INTROSPECT_CONSUMERS`, cluster `{id}`, the record in its metadata |

use std::sync::Arc;

use async_trait::async_trait;

use super::registration::{RegisterOptions, Registration};

use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::ConsumerRecord;

/// Most consumer records one [`ConsumerRegistry::list`] returns; the list says when there
/// were more.
pub const MAX_CONSUMER_RECORDS: usize = 10_000;

/// Every consumer record as one read saw it.
#[derive(Clone, Debug, Default)]
pub struct ConsumerList {
    /// The records, by app then id.
    pub records: Vec<ConsumerRecord>,
    /// Records that could not be used: their key (or path) and why.
    pub skipped: Vec<(String, String)>,
    /// Whether there were more than [`MAX_CONSUMER_RECORDS`] records (the rest is left out).
    pub truncated: bool,
}

/// The consumers part of a registry backend. See the module docs.
#[async_trait]
pub trait ConsumerRegistry: Send + Sync + 'static {
    /// Writes `record` under a liveness of its own; it must fit the options' limits.
    async fn register(
        &self,
        record: &ConsumerRecord,
        options: &RegisterOptions,
    ) -> Result<Arc<dyn Registration<ConsumerRecord>>>;

    /// Every consumer record, at most [`MAX_CONSUMER_RECORDS`], skipping (and reporting)
    /// records that cannot be used.
    async fn list(&self, limits: &Limits) -> Result<ConsumerList>;
}

/// The part of a backend that keeps no consumer records: registering fails with
/// [`Error::Config`], listing finds none.
pub struct NoConsumers {
    /// The backend's name, for the error.
    pub backend: &'static str,
}

#[async_trait]
impl ConsumerRegistry for NoConsumers {
    async fn register(
        &self,
        _: &ConsumerRecord,
        _: &RegisterOptions,
    ) -> Result<Arc<dyn Registration<ConsumerRecord>>> {
        Err(Error::config(format!(
            "the {} backend keeps no consumer records",
            self.backend
        )))
    }

    async fn list(&self, _: &Limits) -> Result<ConsumerList> {
        Ok(ConsumerList::default())
    }
}
