//! The sources of the views: they follow the registry backend and feed their view.
//!
//! A follow starts with a fresh read and ends on the first failure; a source then follows
//! again after a backoff, which hands its view a new reset, so nothing between the end and
//! the read is missed. A permanent failure (credentials or permissions refused, see
//! [`Error::is_permanent`]) ends the source with [`SourceEvent::Failed`], since no retry can
//! help.
//!
//! Warnings go through the resolver's aggregator ([`crate::warnings`]): under a long outage
//! each cause (a read, a watch, per app or interface) writes at most one line per interval,
//! with the count of the ones it suppressed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::FutureExt as _;
use tokio::sync::mpsc;

use super::{SourceEvent, ViewParts};
use crate::backend::{InstanceEvent, InstanceRead};
use crate::backoff::{Attempt, Backoff, retry_with_backoff};
use crate::consumer::early::EarlyFetches;
use crate::consumer::stats::Counters;
use crate::error::Error;
use crate::model::ServiceInstance;
use crate::warnings::aggregated;

/// First delay before a failed follow is tried again.
const RETRY_BASE: Duration = Duration::from_millis(100);
/// Longest delay between tries of a failed follow.
const RETRY_MAX: Duration = Duration::from_secs(10);

/// A failure before following: a permanent error is sent on and stops the source; any
/// other is logged (aggregated per cause and `subject`) and retried after a longer delay.
async fn failed(
    parts: &ViewParts,
    error: Error,
    what: &'static str,
    subject: &str,
    tx: &mpsc::Sender<SourceEvent>,
) -> Attempt {
    if error.is_permanent() {
        let _ = tx.send(SourceEvent::Failed(Arc::new(error))).await;
        return Attempt::Stop;
    }
    aggregated!(warn, parts.warnings, what, subject, %subject, %error);
    Attempt::Failed
}

/// A follow that ended after its first read: counted and logged at info (it is read again
/// at once), aggregated per cause and `subject`; a permanent error stops the source.
/// `delivered` says whether the follow sent anything before it ended.
async fn ended(
    parts: &ViewParts,
    error: Error,
    what: &'static str,
    subject: &str,
    tx: &mpsc::Sender<SourceEvent>,
    delivered: Attempt,
) -> Attempt {
    if error.is_permanent() {
        return failed(parts, error, what, subject, tx).await;
    }
    Counters::bump(&parts.counters.watch_restarts);
    aggregated!(info, parts.warnings, what, subject, %subject, %error);
    delivered
}

/// The mapping source of `interface`.
pub(super) async fn follow_mapping(
    parts: Arc<ViewParts>,
    interface: String,
    tx: mpsc::Sender<SourceEvent>,
) {
    let backoff = Backoff::new(RETRY_BASE, RETRY_MAX);
    retry_with_backoff(backoff, || {
        mapping_once(parts.clone(), interface.clone(), tx.clone())
    })
    .await;
}

/// One follow of the mapping of `interface`, until it fails.
async fn mapping_once(
    parts: Arc<ViewParts>,
    interface: String,
    tx: mpsc::Sender<SourceEvent>,
) -> Attempt {
    let follow = parts
        .backend
        .mapping()
        .follow(&interface, &parts.limits)
        .await;
    let mut follow = match follow {
        Ok(follow) => follow,
        Err(e) => {
            let what = "cannot read the mapping; retrying";
            return failed(&parts, e, what, &interface, &tx).await;
        }
    };
    let mut delivered = Attempt::Failed;
    loop {
        match follow.next().await {
            Ok(apps) => {
                delivered = Attempt::Delivered;
                if tx.send(SourceEvent::Apps(apps)).await.is_err() {
                    return Attempt::Stop;
                }
            }
            Err(e) => {
                let what = "mapping watch ended; reading it again";
                return ended(&parts, e, what, &interface, &tx, delivered).await;
            }
        }
    }
}

/// The instance source of `app`. Changes already waiting are sent as one batch.
pub(super) async fn follow_app(parts: Arc<ViewParts>, app: String, tx: mpsc::Sender<SourceEvent>) {
    let backoff = Backoff::new(RETRY_BASE, RETRY_MAX);
    // Whether a first list was sent: every later one is a re-list.
    let listed = Arc::new(AtomicBool::new(false));
    retry_with_backoff(backoff, || {
        app_once(parts.clone(), app.clone(), tx.clone(), listed.clone())
    })
    .await;
}

/// One follow of the instances of `app`, until it fails; `listed` says whether a list was
/// sent before (by this follow or an earlier one).
async fn app_once(
    parts: Arc<ViewParts>,
    app: String,
    tx: mpsc::Sender<SourceEvent>,
    listed: Arc<AtomicBool>,
) -> Attempt {
    // Each revision's metadata is fetched while the rest of the first read goes on.
    let early = EarlyFetches::new(parts.metadata.clone(), &app);
    let on_page = |page: &[&Arc<ServiceInstance>]| early.page(page);
    let read = InstanceRead::new(&parts.limits).with_early(&on_page);
    let mut follow = match parts.backend.instances().follow(&app, read).await {
        Ok(follow) => follow,
        Err(e) => return failed(&parts, e, "cannot list instances; retrying", &app, &tx).await,
    };
    let what = "instance watch ended; re-listing";
    let mut delivered = Attempt::Failed;
    loop {
        let event = match follow.next().await {
            Ok(event) => event,
            Err(e) => return ended(&parts, e, what, &app, &tx, delivered).await,
        };
        delivered = Attempt::Delivered;
        let (event, ended_with) = batch(event, &mut follow);
        if let SourceEvent::Reset(list) = &event
            && listed.swap(true, Ordering::Relaxed)
        {
            Counters::bump(&parts.counters.relists);
            let instances = list.instances.len();
            let revision = list.revision;
            aggregated!(info, parts.warnings, "instances re-listed", &app,
                %app, instances, revision);
        }
        if tx.send(event).await.is_err() {
            return Attempt::Stop;
        }
        if let Some(e) = ended_with {
            return ended(&parts, e, what, &app, &tx, delivered).await;
        }
    }
}

/// `first` as a source event, with the changes already waiting after it merged in (a reset
/// waiting takes over what came before it); also the error the follow ended with, if it
/// did meanwhile.
fn batch(
    first: InstanceEvent,
    follow: &mut crate::backend::InstanceFollow,
) -> (SourceEvent, Option<Error>) {
    let mut event = first;
    let mut ended = None;
    while let Some(more) = follow.next().now_or_never() {
        match (more, &mut event) {
            (Ok(InstanceEvent::Changes(more)), InstanceEvent::Changes(changes)) => {
                changes.extend(more);
            }
            (Ok(InstanceEvent::Changes(more)), InstanceEvent::Reset(list)) => {
                apply_to_list(list, more);
            }
            (Ok(reset @ InstanceEvent::Reset(_)), _) => event = reset,
            (Err(e), _) => {
                ended = Some(e);
                break;
            }
        }
    }
    let event = match event {
        InstanceEvent::Reset(list) => SourceEvent::Reset(list),
        InstanceEvent::Changes(changes) => SourceEvent::Changes(changes),
    };
    (event, ended)
}

/// Applies changes to a list not yet sent, so the view gets one reset.
fn apply_to_list(
    list: &mut crate::backend::InstanceList,
    changes: Vec<crate::backend::InstanceChange>,
) {
    use crate::backend::InstanceChange;
    for change in changes {
        match change {
            InstanceChange::Upsert(instance) => {
                list.instances.insert(instance.key_address(), instance);
            }
            InstanceChange::Removed(address) => {
                list.instances.remove(&address);
            }
            InstanceChange::Skipped { address, reason } => {
                list.instances.remove(&address);
                list.skipped.push((address, reason));
            }
        }
    }
}
