//! Following an app and a mapping on ZooKeeper.
//!
//! An app: one persistent recursive watch on `/services/{app}` (ZooKeeper 3.6+), set before
//! the list, so that no change falls between them (a change the list already shows comes
//! again as an event, which re-reading makes harmless). Watch events carry no data: each
//! says "this path changed", so the child it names is read again (all the events waiting
//! at once are read with pipelined requests, in order) and becomes an upsert, a skip or a
//! removal. The app node itself coming and going says nothing of its own: its children's
//! events do. Consumers never create nodes: a watch on a missing path is fine.
//!
//! A mapping: a persistent watch on its node; each event reads the value again.
//!
//! When the session disconnects, expires or closes, the stream ends with an `Err`: whoever
//! follows follows again (a reset from a fresh read after the reconnect), with its own
//! backoff on tokio's clock.

use std::collections::BTreeSet;

use futures::FutureExt as _;
use zookeeper_client as zk;

use super::paths::Paths;
use super::record;
use super::session::map_error;
use crate::backend::follow::forward;
use crate::backend::{InstanceChange, InstanceEvent, InstanceFollow, MappingFollow};
use crate::error::{Error, Result};
use crate::limits::Limits;
use crate::model::names;

/// The most events read again in one batch.
const BATCH: usize = 4096;

/// Follows `app`: watch, list, then the watch's events as changes.
pub(super) async fn instances(
    client: zk::Client,
    paths: Paths,
    app: String,
    limits: Limits,
) -> Result<InstanceFollow> {
    names::validate_app(&app)?;
    let app_path = paths.app(&app);
    let mut watcher = client
        .watch(&app_path, zk::AddWatchMode::PersistentRecursive)
        .await
        .map_err(|e| map_error(e, &format!("watch {app_path}")))?;
    let list = super::reads::list(&client, &paths, &app, &limits).await?;
    let (events, follow) = InstanceFollow::channel();
    let _ = events.try_send(Ok(InstanceEvent::Reset(list)));
    tokio::spawn(async move {
        loop {
            let first = tokio::select! {
                () = events.closed() => return,
                event = watcher.changed() => event,
            };
            let mut batch = vec![first];
            while batch.len() < BATCH {
                match watcher.changed().now_or_never() {
                    Some(event) => batch.push(event),
                    None => break,
                }
            }
            let changes = changes(&client, &paths, &app, &limits, batch).await;
            let Some(item) = changes.map(InstanceEvent::changes).transpose() else {
                continue;
            };
            if !forward(&events, item) {
                return;
            }
        }
    });
    Ok(follow)
}

/// The changes a batch of watch events stands for; an `Err` when the session ended.
async fn changes(
    client: &zk::Client,
    paths: &Paths,
    app: &str,
    limits: &Limits,
    batch: Vec<zk::WatchedEvent>,
) -> Result<Vec<InstanceChange>> {
    enum Step {
        Read(
            String,
            futures::future::BoxFuture<
                'static,
                std::result::Result<(Vec<u8>, zk::Stat), zk::Error>,
            >,
        ),
        Removed(String),
    }
    let mut steps = Vec::with_capacity(batch.len());
    for event in batch {
        if event.event_type == zk::EventType::Session {
            if let Some(error) = session_ended(event.session_state) {
                return Err(error);
            }
            continue;
        }
        let Some(child) = paths.child_of(app, &event.path) else {
            continue; // the app node itself, or deeper
        };
        match event.event_type {
            zk::EventType::NodeDeleted => steps.push(Step::Removed(child.to_owned())),
            zk::EventType::NodeCreated | zk::EventType::NodeDataChanged => {
                let read = client.get_data(&event.path).boxed();
                steps.push(Step::Read(child.to_owned(), read));
            }
            _ => {}
        }
    }
    let mut changes = Vec::with_capacity(steps.len());
    for step in steps {
        changes.push(match step {
            Step::Removed(address) => InstanceChange::Removed(address),
            Step::Read(address, read) => match read.await {
                Ok((data, _)) => match record::parse_child(app, &address, &data, limits) {
                    Ok(instance) => InstanceChange::Upsert(std::sync::Arc::new(instance)),
                    Err(reason) => InstanceChange::Skipped { address, reason },
                },
                Err(zk::Error::NoNode) => InstanceChange::Removed(address),
                Err(e) => {
                    return Err(
                        map_error(e, &format!("read {}", paths.instance(app, &address)))
                            .ending_follow(),
                    );
                }
            },
        });
    }
    Ok(changes)
}

/// The next change of the node `watcher` watches with a persistent watch, for a follow
/// that sends to `follower`: `None` once the follower is gone, the session's error when the
/// session ends (see [`session_ended`]), `Ok` when the node changed. Session events that
/// end nothing are passed over.
pub(super) async fn node_changed<T>(
    watcher: &mut zk::PersistentWatcher,
    follower: &tokio::sync::mpsc::Sender<T>,
) -> Option<Result<()>> {
    loop {
        let event = tokio::select! {
            () = follower.closed() => return None,
            event = watcher.changed() => event,
        };
        if event.event_type != zk::EventType::Session {
            return Some(Ok(()));
        }
        if let Some(error) = session_ended(event.session_state) {
            return Some(Err(error));
        }
    }
}

/// The end of a follow for a session state, if the state ends it.
fn session_ended(state: zk::SessionState) -> Option<Error> {
    match state {
        zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => None,
        zk::SessionState::AuthFailed => Some(Error::unauthenticated(
            "ZooKeeper refused the credentials of the reading session",
        )),
        other => Some(Error::watch_ended(format!(
            "ZooKeeper session {other:?}: following again after it reconnects"
        ))),
    }
}

/// Follows the mapping of `interface`: watch, read, then a read per event.
pub(super) async fn mapping(
    client: zk::Client,
    path: String,
    limits: Limits,
) -> Result<MappingFollow> {
    let mut watcher = client
        .watch(&path, zk::AddWatchMode::Persistent)
        .await
        .map_err(|e| map_error(e, &format!("watch {path}")))?;
    let first = super::mapping::read(&client, &path, &limits).await?;
    let (values, follow) = MappingFollow::channel();
    let _ = values.try_send(Ok(first.apps));
    tokio::spawn(async move {
        while let Some(changed) = node_changed(&mut watcher, &values).await {
            let item: Result<BTreeSet<String>> = match changed {
                Err(ended) => Err(ended),
                Ok(()) => super::mapping::read(&client, &path, &limits)
                    .await
                    .map(|value| value.apps)
                    .map_err(Error::ending_follow),
            };
            if !forward(&values, item) {
                return;
            }
        }
    });
    Ok(follow)
}
