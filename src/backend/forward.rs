//! Handing a follower its next item: every backend's follow task sends this way.

use tokio::sync::mpsc;

use crate::error::{Error, Result};

/// Sends `item` without waiting; returns whether the follow goes on. It ends after an
/// error (always the last item), and when the follower is gone or a full buffer behind
/// (it reads afresh).
pub(crate) fn forward<T>(sender: &mpsc::Sender<Result<T>>, item: Result<T>) -> bool {
    let last = item.is_err();
    sender.try_send(item).is_ok() && !last
}

/// [`forward`] for a config item's follower: a malformed item ([`Error::Rule`]) is reported
/// and followed past, since the next write may mend it; any other error is the last item.
pub(crate) fn forward_config<T>(sender: &mpsc::Sender<Result<T>>, item: Result<T>) -> bool {
    let last = matches!(&item, Err(e) if !matches!(e, Error::Rule { .. }));
    sender.try_send(item).is_ok() && !last
}
