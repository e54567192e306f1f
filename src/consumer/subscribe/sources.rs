//! The source tasks: they read and watch the store and feed the subscription task.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use tokio::sync::mpsc;

use crate::backoff::Backoff;
use crate::consumer::context::Context;
use crate::consumer::stats::Counters;
use crate::consumer::views::Routable;
use crate::registry::{InstanceChange, InstanceList};

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
}

/// The mapping source: get, then watch; again with backoff after any error.
pub(crate) async fn watch_mapping(
    context: Arc<Context>,
    interface: String,
    tx: mpsc::Sender<Source>,
) {
    let mapping = &context.mapping;
    let mut backoff = Backoff::new(RELIST_BASE, RELIST_MAX);
    loop {
        match mapping.get(&interface).await {
            Ok(value) => {
                if tx.send(Source::Apps(value.apps)).await.is_err() {
                    return;
                }
                match mapping.watch(&interface, value.revision + 1).await {
                    Ok(mut watch) => {
                        backoff.reset();
                        loop {
                            match watch.next().await {
                                Ok(apps) => {
                                    if tx.send(Source::Apps(apps)).await.is_err() {
                                        return;
                                    }
                                }
                                Err(e) => {
                                    Counters::bump(&context.counters.watch_restarts);
                                    tracing::info!(%interface, error = %e, "mapping watch ended; reading it again");
                                    break;
                                }
                            }
                        }
                    }
                    Err(e) => tracing::warn!(%interface, error = %e, "cannot watch the mapping"),
                }
            }
            Err(e) => tracing::warn!(%interface, error = %e, "cannot read the mapping"),
        }
        tokio::time::sleep(backoff.next_delay()).await;
    }
}

/// An app's instance source: list, then watch from the list's revision + 1; re-list with
/// backoff after any error. Changes already buffered are sent as one batch.
pub(crate) async fn watch_app(context: Arc<Context>, app: String, tx: mpsc::Sender<Source>) {
    let registry = &context.registry;
    let mut backoff = Backoff::new(RELIST_BASE, RELIST_MAX);
    let mut relisting = false;
    loop {
        match registry.list(&app).await {
            Ok(list) => {
                if relisting {
                    Counters::bump(&context.counters.relists);
                    tracing::info!(%app, instances = list.instances.len(), revision = list.revision, "instances re-listed");
                }
                let from = list.revision + 1;
                if tx.send(Source::Reset(app.clone(), list)).await.is_err() {
                    return;
                }
                match registry.watch(&app, from).await {
                    Ok(mut watch) => {
                        backoff.reset();
                        loop {
                            let mut changes = match watch.next().await {
                                Ok(changes) => changes,
                                Err(e) => {
                                    Counters::bump(&context.counters.watch_restarts);
                                    tracing::info!(%app, error = %e, "instance watch ended; re-listing");
                                    break;
                                }
                            };
                            let mut ended = false;
                            while let Some(more) = watch.next().now_or_never() {
                                match more {
                                    Ok(more) => changes.extend(more),
                                    Err(e) => {
                                        Counters::bump(&context.counters.watch_restarts);
                                        tracing::info!(%app, error = %e, "instance watch ended; re-listing");
                                        ended = true;
                                        break;
                                    }
                                }
                            }
                            if !changes.is_empty()
                                && tx
                                    .send(Source::Changes(app.clone(), changes))
                                    .await
                                    .is_err()
                            {
                                return;
                            }
                            if ended {
                                break;
                            }
                        }
                    }
                    Err(e) => tracing::warn!(%app, error = %e, "cannot watch instances"),
                }
            }
            Err(e) => tracing::warn!(%app, error = %e, "cannot list instances"),
        }
        relisting = true;
        tokio::time::sleep(backoff.next_delay()).await;
    }
}
