//! Watch streams: opening an etcd watch and forwarding its batches to a [`Watch`].

use etcd_client::{WatchOptions, WatchResponseStream};
use tokio::sync::mpsc;

use super::EtcdStore;
use super::convert::{convert_event, prefix_range};
use super::errors::{map_error, map_watch_error};
use crate::error::{Error, Result};
use crate::store::{Watch, WatchEvent};

/// Opens a watch of `prefix` from `from_revision` (`0`: from now) and spawns the task that
/// feeds it.
pub(super) async fn open(store: &EtcdStore, prefix: &str, from_revision: i64) -> Result<Watch> {
    let what = || format!("etcd watch {}", Error::shorten(prefix));
    let (key, end) = prefix_range(prefix);
    let mut options = WatchOptions::new().with_range(end);
    if from_revision > 0 {
        options = options.with_start_revision(from_revision);
    }
    let mut client = store
        .client
        .watch_client()
        .max_decoding_message_size(store.max_response_bytes);
    let (mut requests, mut responses, watch_id, start) = store
        .timed(what, async {
            let stream = client
                .watch(key, Some(options))
                .await
                .map_err(|e| map_error(e, &what()))?;
            let (requests, mut responses) = stream.split();
            // etcd answers a create request with a "created" response before any event.
            let created = responses
                .message()
                .await
                .map_err(|e| map_error(e, &what()))?
                .ok_or_else(|| Error::WatchEnded(format!("{}: etcd closed the stream", what())))?;
            if created.canceled() {
                let reason = created.cancel_reason();
                return Err(if created.compact_revision() > 0 {
                    Error::Compacted {
                        requested: from_revision,
                        compacted: created.compact_revision(),
                    }
                } else if reason.contains("permission denied") {
                    Error::PermissionDenied(format!("{}: {reason}", what()))
                } else {
                    Error::WatchEnded(format!("{}: canceled by etcd: {reason}", what()))
                });
            }
            if !created.created() {
                return Err(Error::Malformed {
                    what: "etcd watch response",
                    reason: format!("{}: the first response is not \"created\"", what()),
                });
            }
            // Where the watch starts, for the compaction error: from "now" is the revision
            // after the one the watch was created at.
            let start = match from_revision {
                0 => created.header().map_or(0, |h| h.revision() + 1),
                from => from,
            };
            Ok((requests, responses, created.watch_id(), start))
        })
        .await?;
    let (tx, watch) = Watch::channel();
    let prefix = prefix.to_owned();
    tokio::spawn(async move {
        forward(&mut responses, &tx, &prefix, start).await;
        // The watch is over (or the `Watch` dropped): tell etcd, then close the stream.
        let _ = requests.cancel(watch_id).await;
    });
    Ok(watch)
}

/// Forwards a watch stream's batches to `tx` until the stream ends, fails, is canceled, or
/// the [`Watch`] is dropped. The error that ends the watch is sent as its last item.
async fn forward(
    responses: &mut WatchResponseStream,
    tx: &mpsc::Sender<Result<Vec<WatchEvent>>>,
    prefix: &str,
    start_revision: i64,
) {
    // The first revision the watcher still needs, for the compaction error.
    let mut next_revision = start_revision;
    let end = loop {
        let message = tokio::select! {
            _ = tx.closed() => return,
            message = responses.message() => message,
        };
        let response = match message {
            Ok(Some(response)) => response,
            Ok(None) => break Error::WatchEnded(format!("etcd closed the watch of {prefix:?}")),
            Err(e) => break map_watch_error(e, prefix),
        };
        if response.compact_revision() > 0 {
            break Error::Compacted {
                requested: next_revision,
                compacted: response.compact_revision(),
            };
        }
        if response.canceled() {
            break Error::WatchEnded(format!(
                "etcd canceled the watch of {prefix:?}: {}",
                response.cancel_reason()
            ));
        }
        let batch: Vec<WatchEvent> = response
            .0
            .events
            .into_iter()
            .filter_map(convert_event)
            .collect();
        let Some(last) = batch.last() else {
            continue; // progress notification or an empty answer
        };
        next_revision = last.mod_revision() + 1;
        match tx.try_send(Ok(batch)) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                // The watcher is too slow: end the watch, it re-lists (as the memory store).
                tracing::warn!(prefix, "watch buffer full; ending the watch");
                return;
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return,
        }
    };
    let _ = tx.try_send(Err(end));
}
