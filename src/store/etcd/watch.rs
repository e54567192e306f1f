//! Watch streams: opening an etcd watch on a live member, forwarding its batches to a
//! [`Watch`], and resuming it on another member when its member fails.
//!
//! A stream that breaks (its member killed, partitioned or without a leader) is opened
//! again, on whichever member answers, from the first revision the watcher has not seen:
//! the watcher sees no gap and no duplicate. Resuming is tried for the connect timeout plus
//! the request timeout; after that the watch ends with [`Error::WatchEnded`] and the
//! watcher re-lists. When the cluster's revision (read linearizably before resuming) is
//! behind what the watcher has seen, the store was wiped or replaced: the watch ends too, so
//! the watcher re-lists instead of waiting for changes that will never come.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, GetOptions, WatchOptions, WatchRequestSender, WatchResponseStream};
use tokio::sync::mpsc;

use super::EtcdStore;
use super::convert::{convert_event, header_revision, prefix_range};
use super::errors::{map_error, map_watch_error};
use super::members::Members;
use crate::error::{Error, Result};
use crate::store::{Watch, WatchEvent};

/// How long telling etcd that a watch is over may take.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(1);

/// One open etcd watch stream.
struct Stream {
    requests: WatchRequestSender,
    responses: WatchResponseStream,
    watch_id: i64,
    /// The member it is on.
    member: usize,
    /// The store revision the member was at when the watch was created.
    created_at: i64,
}

/// Opens a watch of `prefix` from `from_revision` (`0`: from now) and spawns the task that
/// feeds it.
pub(super) async fn open(store: &EtcdStore, prefix: &str, from_revision: i64) -> Result<Watch> {
    let stream = open_stream(
        &store.members,
        store.request_timeout,
        store.max_response_bytes,
        prefix,
        from_revision,
    )
    .await?;
    // Where the watch starts: from "now" is the revision after the one it was created at.
    let start = match from_revision {
        0 => stream.created_at + 1,
        from => from,
    };
    let (tx, watch) = Watch::channel();
    let follower = Follower {
        members: store.members.clone(),
        resume_timeout: store.resume_timeout,
        max_response_bytes: store.max_response_bytes,
        prefix: prefix.to_owned(),
    };
    tokio::spawn(follower.follow(stream, tx, start));
    Ok(watch)
}

/// Opens a stream on a member that answers within `budget`, from `from_revision`.
async fn open_stream(
    members: &Members,
    budget: Duration,
    max_response_bytes: usize,
    prefix: &str,
    from_revision: i64,
) -> Result<Stream> {
    let what = || format!("etcd watch {}", Error::shorten(prefix));
    let (stream, member) = members
        .run(budget, what, |client: Client| async move {
            let (key, end) = prefix_range(prefix);
            let mut options = WatchOptions::new().with_range(end);
            if from_revision > 0 {
                options = options.with_start_revision(from_revision);
            }
            let stream = client
                .watch_client()
                .max_decoding_message_size(max_response_bytes)
                .watch(key, Some(options))
                .await
                .map_err(|e| map_error(e, &what()))?;
            let (requests, mut responses) = stream.split();
            // etcd answers a create request with a "created" response before any event.
            let created = responses
                .message()
                .await
                .map_err(|e| map_error(e, &what()))?
                .ok_or_else(|| Error::watch_ended(format!("{}: etcd closed the stream", what())))?;
            if created.canceled() {
                let reason = created.cancel_reason();
                return Err(if created.compact_revision() > 0 {
                    Error::Compacted {
                        requested: from_revision,
                        compacted: created.compact_revision(),
                    }
                } else if reason.contains("permission denied") {
                    Error::permission_denied(format!("{}: {reason}", what()))
                } else {
                    Error::watch_ended(format!("{}: canceled by etcd: {reason}", what()))
                });
            }
            if !created.created() {
                return Err(Error::malformed(
                    "etcd watch response",
                    format!("{}: the first response is not \"created\"", what()),
                ));
            }
            Ok(Stream {
                requests,
                responses,
                watch_id: created.watch_id(),
                member: 0,
                created_at: created.header().map_or(0, |h| h.revision()),
            })
        })
        .await?;
    Ok(Stream { member, ..stream })
}

/// What the task behind one [`Watch`] needs to resume it.
struct Follower {
    members: Arc<Members>,
    resume_timeout: Duration,
    max_response_bytes: usize,
    prefix: String,
}

impl Follower {
    /// Forwards `stream`, resuming it on a live member when it breaks, until the watch ends
    /// or the [`Watch`] is dropped. `next_revision` is the first revision not yet forwarded.
    async fn follow(
        self,
        mut stream: Stream,
        tx: mpsc::Sender<Result<Vec<WatchEvent>>>,
        mut next_revision: i64,
    ) {
        loop {
            let end = forward(&mut stream.responses, &tx, &self.prefix, &mut next_revision).await;
            // The stream is over here: tell etcd (bounded: its member may be gone).
            let _ =
                tokio::time::timeout(CANCEL_TIMEOUT, stream.requests.cancel(stream.watch_id)).await;
            let error = match end {
                None => return, // the `Watch` was dropped, or fell behind
                Some(Error::WatchEnded { reason, .. }) => reason,
                Some(other) => {
                    let _ = tx.try_send(Err(other));
                    return;
                }
            };
            self.members.failed(stream.member);
            tracing::debug!(prefix = %self.prefix, %error, "etcd watch broke; resuming");
            stream = match self.resume(&tx, next_revision).await {
                Ok(resumed) => resumed,
                Err(end) => {
                    let _ = tx.try_send(Err(end));
                    return;
                }
            };
        }
    }

    /// Opens the watch again from `next_revision` on a member that answers.
    async fn resume(
        &self,
        tx: &mpsc::Sender<Result<Vec<WatchEvent>>>,
        next_revision: i64,
    ) -> Result<Stream> {
        let reopen = async {
            // A linearizable read first: the revision of the cluster as it is now, which a
            // member that merely lags cannot understate.
            let revision = self.current_revision().await?;
            if revision + 1 < next_revision {
                // The store went backwards: wiped or replaced. A re-list is the only safe
                // way on; resuming would wait for changes that never come.
                return Err(Error::watch_ended(format!(
                    "etcd watch of {:?}: the store is at revision {revision} after revision {} \
                     was seen",
                    Error::shorten(&self.prefix),
                    next_revision - 1
                )));
            }
            open_stream(
                &self.members,
                self.resume_timeout,
                self.max_response_bytes,
                &self.prefix,
                next_revision,
            )
            .await
        };
        let stream = tokio::select! {
            _ = tx.closed() => return Err(Error::Shutdown),
            reopened = reopen => reopened,
        };
        let stream = match stream {
            Ok(stream) => stream,
            Err(error @ (Error::Compacted { .. } | Error::WatchEnded { .. })) => return Err(error),
            Err(error) if error.is_permanent() => return Err(error),
            Err(error) => {
                return Err(Error::watch_ended(format!(
                    "etcd watch of {:?} could not resume: {error}",
                    Error::shorten(&self.prefix)
                ))
                .caused_by(error));
            }
        };
        tracing::debug!(prefix = %self.prefix, from = next_revision, "etcd watch resumed");
        Ok(stream)
    }
}

impl Follower {
    /// The cluster's store revision now, read linearizably from a member that answers.
    async fn current_revision(&self) -> Result<i64> {
        let what = || "etcd revision".to_owned();
        let (revision, _) = self
            .members
            .run(self.resume_timeout, what, |client: Client| async move {
                // One key, counted only: the answer is small whatever the prefix holds.
                let (key, _) = prefix_range(&self.prefix);
                let response = client
                    .kv_client()
                    .get(key, Some(GetOptions::new().with_count_only()))
                    .await
                    .map_err(|e| map_error(e, &what()))?;
                header_revision(response.header(), &what())
            })
            .await?;
        Ok(revision)
    }
}

/// Forwards a watch stream's batches to `tx` until the stream ends, fails or is canceled
/// (the error that ends it is returned), or the [`Watch`] is dropped or falls too far
/// behind (`None`). `next_revision` follows the first revision not yet forwarded.
async fn forward(
    responses: &mut WatchResponseStream,
    tx: &mpsc::Sender<Result<Vec<WatchEvent>>>,
    prefix: &str,
    next_revision: &mut i64,
) -> Option<Error> {
    loop {
        let message = tokio::select! {
            _ = tx.closed() => return None,
            message = responses.message() => message,
        };
        let response = match message {
            Ok(Some(response)) => response,
            Ok(None) => {
                return Some(Error::watch_ended(format!(
                    "etcd closed the watch of {prefix:?}"
                )));
            }
            Err(e) => return Some(map_watch_error(e, prefix)),
        };
        if response.compact_revision() > 0 {
            return Some(Error::Compacted {
                requested: *next_revision,
                compacted: response.compact_revision(),
            });
        }
        if response.canceled() {
            return Some(Error::watch_ended(format!(
                "etcd canceled the watch of {prefix:?}: {}",
                response.cancel_reason()
            )));
        }
        let Some(last) = response.0.events.last().and_then(|e| e.kv.as_ref()) else {
            continue; // progress notification or an empty answer
        };
        *next_revision = last.mod_revision + 1;
        let batch: Vec<WatchEvent> = response
            .0
            .events
            .into_iter()
            .filter_map(convert_event)
            .collect();
        if batch.is_empty() {
            continue; // only keys that are not ours
        }
        match tx.try_send(Ok(batch)) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                // The watcher is too slow: end the watch, it re-lists (as the memory store).
                tracing::warn!(prefix, "watch buffer full; ending the watch");
                return None;
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return None,
        }
    }
}
