//! The task feeding a balancer: it follows a [`Discovery`] stream and hands the balancer its
//! changes (insertions first, as the stream gives them), dialling each new address lazily.
//!
//! It stops when every clone of the channel has been dropped (the balancer is gone), when
//! the stream ends (the subscription ended), or when cancelled; the channel then keeps the
//! endpoints it has.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::{FutureExt as _, StreamExt as _};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tower::discover::Change as TowerChange;

use super::dial::Dialer;
use super::discover::{Change, Discovery};
use super::passive::{Guarded, Recorder};
use super::{EndpointService, endpoint_service};
use crate::consumer::health::EndpointKey;
use crate::model::{Authority, Endpoint};

/// See the module docs.
pub(super) struct Feeder {
    discovery: Discovery,
    changes: mpsc::Sender<TowerChange<Authority, EndpointService>>,
    dialer: Dialer,
    /// What the channel's endpoints share for passive health.
    recorder: Arc<Recorder>,
    published: watch::Sender<Arc<BTreeSet<Authority>>>,
    cancel: CancellationToken,
    /// What the balancer has been handed.
    current: BTreeSet<Authority>,
}

impl Feeder {
    pub(super) fn new(
        discovery: Discovery,
        changes: mpsc::Sender<TowerChange<Authority, EndpointService>>,
        dialer: Dialer,
        recorder: Arc<Recorder>,
        published: watch::Sender<Arc<BTreeSet<Authority>>>,
        cancel: CancellationToken,
    ) -> Self {
        Feeder {
            discovery,
            changes,
            dialer,
            recorder,
            published,
            cancel,
            current: BTreeSet::new(),
        }
    }

    pub(super) async fn run(mut self) {
        loop {
            let next = tokio::select! {
                () = self.cancel.cancelled() => break,
                () = self.changes.closed() => break,
                next = self.discovery.next() => next,
            };
            let Some(Ok(change)) = next else { break };
            if !self.hand_over(change).await {
                break;
            }
            // Publish once the changes of one set are all handed over.
            while let Some(Some(Ok(change))) = self.discovery.next().now_or_never() {
                if !self.hand_over(change).await {
                    return;
                }
            }
            self.published.send_if_modified(|published| {
                if **published == self.current {
                    false
                } else {
                    *published = Arc::new(self.current.clone());
                    true
                }
            });
        }
        tracing::debug!("balanced channel no longer follows its subscription");
    }

    /// Hands one change to the balancer, dialling an inserted address lazily. Returns
    /// `false` once the balancer is gone or the task is stopped.
    async fn hand_over(&mut self, change: Change<Authority, Endpoint>) -> bool {
        let change = match change {
            Change::Insert(address, endpoint) => {
                let dialled = match self.dialer.endpoint(&address) {
                    Ok(dialled) => dialled,
                    Err(e) => {
                        tracing::warn!(%address, error = %e, "endpoint left out of the channel");
                        return true;
                    }
                };
                tracing::debug!(%address, "endpoint added to the channel");
                let key = EndpointKey {
                    address: address.clone(),
                    instance: endpoint.instance_authority(),
                };
                self.current.insert(address.clone());
                self.recorder.insert(&key);
                let guarded = Guarded::new(dialled.connect_lazy(), key, self.recorder.clone());
                TowerChange::Insert(address, endpoint_service(guarded))
            }
            Change::Remove(address) => {
                if !self.current.remove(&address) {
                    return true;
                }
                tracing::debug!(%address, "endpoint removed from the channel");
                self.recorder.remove(&address);
                TowerChange::Remove(address)
            }
        };
        tokio::select! {
            () = self.cancel.cancelled() => false,
            sent = self.changes.send(change) => sent.is_ok(),
        }
    }
}
