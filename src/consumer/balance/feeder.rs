//! The task feeding a balancer: it follows a [`Discovery`] stream and hands the balancer its
//! changes (insertions first, as the stream gives them), dialling each new address lazily;
//! an address whose endpoint changed (a new revision there) is rerouted, not dialled again.
//! With an identity check, an inserted address is handed over only once `admission.rs`
//! has dialled and checked it, and taken out again when a later handshake is refused.
//!
//! It stops when every clone of the channel has been dropped (the balancer is gone), when
//! the stream ends (the subscription ended), or when cancelled; the channel then keeps the
//! endpoints it has.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::admission::{Admission, Admitted};
use super::balancer::Update;
use super::dial::Dialer;
use super::discover::{Change, Discovery};
use super::passive::{Guarded, Recorder};
use super::{Marked, ServiceHeaders};
use crate::consumer::health::EndpointKey;
use crate::model::{Authority, Endpoint};
use futures::{FutureExt as _, StreamExt as _};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

/// What the feeder publishes of the endpoints it follows.
pub(super) struct Published {
    /// The addresses handed to the balancer.
    pub addresses: watch::Sender<Arc<BTreeSet<Authority>>>,
    /// The addresses the identity check refused, with why.
    pub refused: watch::Sender<Arc<BTreeMap<Authority, Arc<str>>>>,
    /// Why no call can be routed, while every endpoint is refused.
    pub all_refused: watch::Sender<Option<Arc<str>>>,
}

/// See the module docs.
pub(super) struct Feeder {
    discovery: Discovery,
    changes: mpsc::Sender<Update>,
    dialer: Dialer,
    /// With an identity check: which addresses may join.
    admission: Option<Admission>,
    /// What the channel's endpoints share for passive health.
    recorder: Arc<Recorder>,
    published: Published,
    cancel: CancellationToken,
    /// What the balancer has been handed.
    current: BTreeSet<Authority>,
}

/// What woke the feeder.
enum Step {
    /// The stream gave a change, or ended.
    Change(Option<Change<Authority, Endpoint>>),
    /// The identity check decided on an address.
    Admitted(Admitted),
}

impl Feeder {
    pub(super) fn new(
        discovery: Discovery,
        changes: mpsc::Sender<Update>,
        dialer: Dialer,
        admission: Option<Admission>,
        recorder: Arc<Recorder>,
        published: Published,
        cancel: CancellationToken,
    ) -> Self {
        Feeder {
            discovery,
            changes,
            dialer,
            admission,
            recorder,
            published,
            cancel,
            current: BTreeSet::new(),
        }
    }

    pub(super) async fn run(mut self) {
        loop {
            let step = tokio::select! {
                () = self.cancel.cancelled() => break,
                () = self.changes.closed() => break,
                next = self.discovery.next() => Step::Change(next.map(|Ok(change)| change)),
                admitted = admitted(&mut self.admission) => Step::Admitted(admitted),
            };
            let handed = match step {
                Step::Change(None) => break,
                Step::Change(Some(change)) => self.hand_over(change).await,
                Step::Admitted(admitted) => self.apply(admitted).await,
            };
            if !handed {
                break;
            }
            // Publish once the changes of one set are all handed over.
            while let Some(Some(Ok(change))) = self.discovery.next().now_or_never() {
                if !self.hand_over(change).await {
                    return;
                }
            }
            self.publish();
        }
        tracing::debug!("balanced channel no longer follows its subscription");
    }

    /// Hands one change to the balancer, dialling an inserted address lazily (or, with an
    /// identity check, having it checked first). Returns `false` once the balancer is gone
    /// or the task is stopped.
    async fn hand_over(&mut self, change: Change<Authority, Endpoint>) -> bool {
        match change {
            Change::Insert(address, endpoint) => {
                let handed = self.current.contains(&address);
                let known = match &mut self.admission {
                    Some(admission) => admission.refresh(&address, endpoint.clone()),
                    None => false,
                };
                if handed {
                    return self.send(Update::Reroute(address, endpoint)).await;
                }
                if known {
                    // Being checked, or refused: it joins with the new endpoint if admitted.
                    return true;
                }
                if let Some(admission) = &mut self.admission {
                    admission.offer(address, endpoint);
                    return true;
                }
                let dialled = match self.dialer.endpoint(&address) {
                    Ok(dialled) => dialled,
                    Err(e) => {
                        tracing::warn!(%address, error = %e, "endpoint left out of the channel");
                        return true;
                    }
                };
                self.insert(address, &endpoint, dialled.connect_lazy())
                    .await
            }
            Change::Remove(address) => {
                if let Some(admission) = &mut self.admission {
                    admission.withdraw(&address);
                }
                self.remove(address).await
            }
        }
    }

    /// Applies what the identity check decided.
    async fn apply(&mut self, admitted: Admitted) -> bool {
        match admitted {
            Admitted::Insert(address, endpoint, channel) => {
                self.insert(address, &endpoint, channel).await
            }
            Admitted::Evict(address) => self.remove(address).await,
            Admitted::Refused => true,
        }
    }

    /// Hands `endpoint` at `address` to the balancer, calling it through `channel`.
    async fn insert(&mut self, address: Authority, endpoint: &Endpoint, channel: Channel) -> bool {
        tracing::debug!(%address, "endpoint added to the channel");
        let key = EndpointKey {
            address: address.clone(),
            instance: endpoint.instance_authority(),
        };
        self.current.insert(address.clone());
        let guarded = Guarded::new(channel, key.clone(), self.recorder.clone());
        let headers = ServiceHeaders::of(&endpoint.service);
        self.send(Update::Insert {
            address,
            key,
            service: Marked(guarded, headers),
            endpoint: endpoint.clone(),
        })
        .await
    }

    /// Takes the endpoint at `address` out of the balancer, if it is there.
    async fn remove(&mut self, address: Authority) -> bool {
        if !self.current.remove(&address) {
            return true;
        }
        tracing::debug!(%address, "endpoint removed from the channel");
        self.send(Update::Remove(address)).await
    }

    async fn send(&mut self, change: Update) -> bool {
        tokio::select! {
            () = self.cancel.cancelled() => false,
            sent = self.changes.send(change) => sent.is_ok(),
        }
    }

    /// Publishes the addresses handed over and those refused, when they changed.
    fn publish(&self) {
        let current = &self.current;
        self.published.addresses.send_if_modified(|published| {
            if **published == *current {
                false
            } else {
                *published = Arc::new(current.clone());
                true
            }
        });
        let Some(admission) = &self.admission else {
            return;
        };
        let refused = admission.rejected();
        self.published.refused.send_if_modified(|published| {
            if **published == *refused {
                false
            } else {
                *published = Arc::new(refused.clone());
                true
            }
        });
        let why = admission.all_rejected(current.len()).map(Arc::<str>::from);
        self.published.all_refused.send_if_modified(|published| {
            if *published == why {
                false
            } else {
                *published = why;
                true
            }
        });
    }
}

/// The next decision of `admission`, or never without one.
async fn admitted(admission: &mut Option<Admission>) -> Admitted {
    match admission {
        Some(admission) => admission.next().await,
        None => std::future::pending().await,
    }
}
