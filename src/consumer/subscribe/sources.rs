//! The source tasks: they follow the registry backend and feed the app and mapping views.
//!
//! A transient failure (the store unreachable, a watch broken) is retried with backoff; a
//! permanent one (credentials or permissions refused, see [`Error::is_permanent`]) ends
//! the source with [`Source::Failed`], since no retry can help.
//!
//! Their warnings go through the resolver's aggregator ([`crate::warnings`]): under a long
//! outage each cause (a read, a watch, per app or interface) writes at most one line per
//! interval, with the count of the ones it suppressed.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::backend::{InstanceChange, InstanceEvent, InstanceFollow, InstanceList};
use crate::backoff::Backoff;
use crate::consumer::context::Context;
use crate::consumer::stats::Counters;
use crate::consumer::views::Routable;
use crate::error::Error;

/// First delay before a failed list or watch of the store is tried again.
const RELIST_BASE: Duration = Duration::from_millis(100);
/// Longest delay between tries of a failed list or watch.
const RELIST_MAX: Duration = Duration::from_secs(10);

/// An update from a source task.
#[derive(Clone)]
pub(crate) enum Source {
    /// The apps of the mapping (all of them, as read).
    Apps(BTreeSet<String>),
    /// A fresh list of one app's instances.
    Reset(String, InstanceList),
    /// Changes to one app's instances, in order.
    Changes(String, Vec<InstanceChange>),
    /// What one app's shared view routes to now (its view applied the protections); the
    /// only instance update a subscription receives.
    View(String, Arc<Routable>),
    /// The store refused for good (credentials, permissions): the source stopped.
    Failed(Arc<Error>),
}

/// What a source does after a failed read or watch.
enum Next {
    /// Try again after the backoff.
    Retry,
    /// Stop: the error was permanent and has been sent on, or nobody listens any more.
    Stop,
}

/// Handles a failure of a source: a permanent error is sent on as [`Source::Failed`] and
/// stops the source; any other is logged (aggregated per `what` and `subject`) and retried.
async fn failed(
    context: &Context,
    error: Error,
    what: &str,
    subject: &str,
    tx: &mpsc::Sender<Source>,
) -> Next {
    if error.is_permanent() {
        let _ = tx.send(Source::Failed(Arc::new(error))).await;
        return Next::Stop;
    }
    let cause = format!("{what}: {subject}");
    if let Some(suppressed) = context.warnings.allow(&cause, Instant::now()) {
        tracing::warn!(%subject, %error, suppressed, "{what}; retrying");
    }
    Next::Retry
}

/// Logs that a watch ended (at info: it is read again at once), aggregated per `what` and
/// `subject`.
fn watch_restarted(context: &Context, error: &Error, what: &str, subject: &str) {
    Counters::bump(&context.counters.watch_restarts);
    let cause = format!("{what}: {subject}");
    if let Some(suppressed) = context.warnings.allow(&cause, Instant::now()) {
        tracing::info!(%subject, %error, suppressed, "{what}");
    }
}

/// The mapping source: follows the interface's mapping through the backend (its value,
/// then each change); follows it again with backoff after any transient error.
pub(crate) async fn watch_mapping(
    context: Arc<Context>,
    interface: String,
    tx: mpsc::Sender<Source>,
) {
    let mapping = context.backend.mapping();
    let mut backoff = Backoff::new(RELIST_BASE, RELIST_MAX);
    loop {
        let next = match mapping.follow(&interface, &context.limits).await {
            Ok(mut follow) => {
                backoff.reset();
                loop {
                    match follow.next().await {
                        Ok(apps) => {
                            if tx.send(Source::Apps(apps)).await.is_err() {
                                return;
                            }
                        }
                        Err(e) if e.is_permanent() => {
                            break failed(&context, e, "", &interface, &tx).await;
                        }
                        Err(e) => {
                            let what = "mapping watch ended; reading it again";
                            watch_restarted(&context, &e, what, &interface);
                            break Next::Retry;
                        }
                    }
                }
            }
            Err(e) => failed(&context, e, "cannot read the mapping", &interface, &tx).await,
        };
        if let Next::Stop = next {
            return;
        }
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

/// An app's instance source: follows the app through the backend (a reset from a fresh
/// read, then changes, with no gap); follows it again with backoff after any transient
/// error. Changes already buffered are sent as one batch.
pub(crate) async fn watch_app(context: Arc<Context>, app: String, tx: mpsc::Sender<Source>) {
    let instances = context.backend.instances();
    let mut backoff = Backoff::new(RELIST_BASE, RELIST_MAX);
    let mut relisting = false;
    loop {
        let next = match instances.follow(&app, &context.limits).await {
            Ok(mut follow) => {
                backoff.reset();
                forward(&context, &app, &mut follow, &tx, relisting).await
            }
            Err(e) => failed(&context, e, "cannot list instances", &app, &tx).await,
        };
        if let Next::Stop = next {
            return;
        }
        relisting = true;
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

/// Forwards an app's follow until it ends: [`Next::Retry`] to follow again after a
/// transient error, [`Next::Stop`] after a permanent one or when nobody listens. A reset
/// after the first follow of the source is a re-list: counted, and logged with the
/// revision and epoch it was read at.
async fn forward(
    context: &Context,
    app: &str,
    follow: &mut InstanceFollow,
    tx: &mpsc::Sender<Source>,
    mut relisting: bool,
) -> Next {
    loop {
        let event = match follow.next().await {
            Ok(event) => event,
            Err(e) => return watch_ended(context, app, e, tx).await,
        };
        let mut changes = match event {
            InstanceEvent::Reset(list) => {
                if relisting {
                    relisted(context, app, &list);
                }
                relisting = true;
                if tx.send(Source::Reset(app.to_owned(), list)).await.is_err() {
                    return Next::Stop;
                }
                continue;
            }
            InstanceEvent::Changes(changes) => changes,
        };
        // A reset or the end that came right behind the changes, handled after them.
        let mut pending = None;
        while let Some(more) = follow.next().now_or_never() {
            match more {
                Ok(InstanceEvent::Changes(more)) => changes.extend(more),
                Ok(InstanceEvent::Reset(list)) => {
                    pending = Some(Ok(list));
                    break;
                }
                Err(e) => {
                    pending = Some(Err(e));
                    break;
                }
            }
        }
        if !changes.is_empty()
            && tx
                .send(Source::Changes(app.to_owned(), changes))
                .await
                .is_err()
        {
            return Next::Stop;
        }
        match pending {
            None => {}
            Some(Ok(list)) => {
                relisted(context, app, &list);
                if tx.send(Source::Reset(app.to_owned(), list)).await.is_err() {
                    return Next::Stop;
                }
            }
            Some(Err(e)) => return watch_ended(context, app, e, tx).await,
        }
    }
}

/// Counts and logs (aggregated per app) a re-list of `app`.
fn relisted(context: &Context, app: &str, list: &InstanceList) {
    Counters::bump(&context.counters.relists);
    let cause = format!("re-listed: {app}");
    if let Some(suppressed) = context.warnings.allow(&cause, Instant::now()) {
        let instances = list.instances.len();
        tracing::info!(
            %app,
            instances,
            revision = list.revision,
            epoch = list.epoch.as_deref().unwrap_or("none"),
            suppressed,
            "instances re-listed"
        );
    }
}

async fn watch_ended(
    context: &Context,
    app: &str,
    error: Error,
    tx: &mpsc::Sender<Source>,
) -> Next {
    if error.is_permanent() {
        return failed(context, error, "", app, tx).await;
    }
    watch_restarted(context, &error, "instance watch ended; re-listing", app);
    Next::Retry
}
