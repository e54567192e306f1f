//! The consumer record, for consumers that ask to be seen
//! ([`ResolverBuilder::register_consumer`](crate::consumer::ResolverBuilder::register_consumer);
//! off by default, and a consumer that does not ask writes nothing).
//!
//! One [`ConsumerRecord`] per resolver, in a place of its own (see
//! [`crate::backend::consumers`]), with liveness like a provider's record. It lists each
//! live subscription with the [`endpoint_digest`](crate::model::endpoint_digest) of every
//! endpoint it holds (before consumer-side health), their number, the registry position
//! it has seen and when the digest last changed, so that a console can compare what a
//! consumer routes to with what the registry holds; and, for a subscription with a
//! balanced channel, the [`rules_digest`](crate::governance::rules_digest()) of the
//! governance rules the channel routes by, so that a console can tell who routes by an
//! older rule set.
//!
//! * `table`: what the subscriptions see, written by their tasks and their channels (a
//!   channel's report of its rules is `consumer/rules`' `report`);
//! * `pace`: when the record is rewritten (pure);
//! * `task`: registration, keep-alive, rewrites, registering again, deletion.

mod pace;
pub(crate) mod table;
mod task;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::backend::Backend;
use crate::limits::Limits;
use crate::model::ConsumerRecord;
use table::Seen;
use task::RecordTask;

/// How a consumer record is written; see [`crate::consumer::ResolverBuilder::register_consumer`].
#[derive(Clone, Debug)]
pub(crate) struct ConsumerSettings {
    pub app: String,
    pub host: Option<String>,
    pub ttl: Duration,
    pub refresh: Duration,
}

/// Wall-clock milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The resolver's consumer record: started when a runtime is at hand, ended (the record
/// deleted) when the last clone of the resolver is dropped or on
/// [`Resolver::deregister_consumer`](crate::Resolver::deregister_consumer).
pub(crate) struct ConsumerHandle {
    pub app: String,
    pub id: String,
    pub seen: Arc<Seen>,
    cancel: CancellationToken,
    done: watch::Receiver<bool>,
    /// The task until it runs.
    pending: Mutex<Option<RecordTask>>,
}

impl ConsumerHandle {
    /// The record of a new consumer; its task starts at once when a runtime is at hand,
    /// else at [`ConsumerHandle::start`].
    pub fn new(settings: ConsumerSettings, backend: Backend, limits: Limits) -> Self {
        let id = hex::encode(rand::random::<[u8; 16]>());
        let host = settings
            .host
            .unwrap_or_else(crate::outward_ip::consumer_host);
        let base = ConsumerRecord::new(settings.app.clone(), id.clone(), host, now_ms());
        let seen = Arc::new(Seen::default());
        let cancel = CancellationToken::new();
        let (done_tx, done) = watch::channel(false);
        let task = RecordTask {
            backend,
            limits,
            base,
            ttl: settings.ttl,
            interval: settings.refresh,
            seen: seen.clone(),
            cancel: cancel.clone(),
            done: done_tx,
        };
        let handle = ConsumerHandle {
            app: settings.app,
            id,
            seen,
            cancel,
            done,
            pending: Mutex::new(Some(task)),
        };
        handle.start();
        handle
    }

    /// Starts the task if it has not started and a runtime is at hand.
    pub fn start(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let task = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(task) = task {
            let span = tracing::info_span!("consumer_record", app = %self.app, id = %self.id);
            runtime.spawn(task.run().instrument(span));
        }
    }

    /// Deletes the record and waits until it is gone (or the task gave up on it).
    pub async fn deregister(&self) {
        self.cancel.cancel();
        let never_started = self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .is_some();
        if never_started {
            return;
        }
        let mut done = self.done.clone();
        let _ = done.wait_for(|done| *done).await;
    }
}

impl Drop for ConsumerHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}
