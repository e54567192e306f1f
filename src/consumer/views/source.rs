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
use std::time::Duration;

use futures::FutureExt as _;
use tokio::sync::mpsc;

use super::{SourceEvent, ViewParts};
use crate::backend::{InstanceEvent, InstanceRead};
use crate::backoff::Backoff;
use crate::consumer::early::EarlyFetches;
use crate::consumer::stats::Counters;
use crate::error::Error;
use crate::model::ServiceInstance;
use crate::warnings::aggregated;

/// First delay before a failed follow is tried again.
const RETRY_BASE: Duration = Duration::from_millis(100);
/// Longest delay between tries of a failed follow.
const RETRY_MAX: Duration = Duration::from_secs(10);

/// What a source does after a failure.
enum Next {
    /// Follow again after the backoff.
    Retry,
    /// Stop: the error was permanent and has been sent on, or nobody listens any more.
    Stop,
}

/// A failure before or while following: a permanent error is sent on and stops the
/// source; any other is logged (aggregated per cause and `subject`) and retried.
async fn failed(
    parts: &ViewParts,
    error: Error,
    what: &'static str,
    subject: &str,
    tx: &mpsc::Sender<SourceEvent>,
) -> Next {
    if error.is_permanent() {
        let _ = tx.send(SourceEvent::Failed(Arc::new(error))).await;
        return Next::Stop;
    }
    aggregated!(warn, parts.warnings, what, subject, %subject, %error);
    Next::Retry
}

/// A follow that ended after its first read: counted and logged at info (it is read again
/// at once), aggregated per cause and `subject`; a permanent error stops the source.
async fn ended(
    parts: &ViewParts,
    error: Error,
    what: &'static str,
    subject: &str,
    tx: &mpsc::Sender<SourceEvent>,
) -> Next {
    if error.is_permanent() {
        return failed(parts, error, what, subject, tx).await;
    }
    Counters::bump(&parts.counters.watch_restarts);
    aggregated!(info, parts.warnings, what, subject, %subject, %error);
    Next::Retry
}

/// The mapping source of `interface`.
pub(super) async fn follow_mapping(
    parts: Arc<ViewParts>,
    interface: String,
    tx: mpsc::Sender<SourceEvent>,
) {
    let mut backoff = Backoff::new(RETRY_BASE, RETRY_MAX);
    loop {
        let follow = parts
            .backend
            .mapping()
            .follow(&interface, &parts.limits)
            .await;
        let next = match follow {
            Ok(mut follow) => loop {
                match follow.next().await {
                    Ok(apps) => {
                        backoff.reset();
                        if tx.send(SourceEvent::Apps(apps)).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        let what = "mapping watch ended; reading it again";
                        break ended(&parts, e, what, &interface, &tx).await;
                    }
                }
            },
            Err(e) => {
                failed(
                    &parts,
                    e,
                    "cannot read the mapping; retrying",
                    &interface,
                    &tx,
                )
                .await
            }
        };
        if let Next::Stop = next {
            return;
        }
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

/// The instance source of `app`. Changes already waiting are sent as one batch.
pub(super) async fn follow_app(parts: Arc<ViewParts>, app: String, tx: mpsc::Sender<SourceEvent>) {
    let mut backoff = Backoff::new(RETRY_BASE, RETRY_MAX);
    let mut relisting = false;
    loop {
        // Each revision's metadata is fetched while the rest of the first read goes on.
        let early = EarlyFetches::new(parts.metadata.clone(), &app);
        let on_page = |page: &[&Arc<ServiceInstance>]| early.page(page);
        let read = InstanceRead::new(&parts.limits).with_early(&on_page);
        let follow = parts.backend.instances().follow(&app, read).await;
        let next = match follow {
            Ok(mut follow) => loop {
                let event = match follow.next().await {
                    Ok(event) => event,
                    Err(e) => {
                        let what = "instance watch ended; re-listing";
                        break ended(&parts, e, what, &app, &tx).await;
                    }
                };
                backoff.reset();
                let (event, ended_with) = batch(event, &mut follow);
                if let SourceEvent::Reset(list) = &event
                    && std::mem::replace(&mut relisting, true)
                {
                    Counters::bump(&parts.counters.relists);
                    let instances = list.instances.len();
                    let revision = list.revision;
                    aggregated!(info, parts.warnings, "instances re-listed", &app,
                        %app, instances, revision);
                }
                if tx.send(event).await.is_err() {
                    return;
                }
                if let Some(e) = ended_with {
                    let what = "instance watch ended; re-listing";
                    break ended(&parts, e, what, &app, &tx).await;
                }
            },
            Err(e) => failed(&parts, e, "cannot list instances; retrying", &app, &tx).await,
        };
        if let Next::Stop = next {
            return;
        }
        tokio::time::sleep(backoff.next_delay()).await;
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
