//! The stream every follow hands its follower, and how a backend's task feeds it: the
//! first item from a fresh read, then each change, an `Err` last. A follower a full buffer
//! behind ends the stream (it follows again from a fresh read), so memory stays bounded and
//! a backend never waits on a slow follower.

use std::fmt;

use tokio::sync::mpsc;

use crate::error::{Error, Result};

/// What a [`Follow`] carries, and how many of them it buffers.
pub trait Followed: Send + 'static {
    /// Items buffered between a backend and a slow follower before the backend ends the
    /// stream.
    const BUFFER: usize;
}

/// A stream of what a backend follows; dropping it stops following.
///
/// # For implementers
///
/// Make it with [`Follow::channel`] and feed the sender from a task of the backend's with
/// `try_send` (the crate's own backends go through one `forward`): a follower
/// [`Followed::BUFFER`] items behind ends the stream (drop the sender). An `Err` is the
/// last item (the watch broke, the connection was lost, history is gone), except a config
/// item's [`Error::Rule`], followed past; stop when the sender reports the channel closed.
pub struct Follow<T> {
    items: mpsc::Receiver<Result<T>>,
}

impl<T: Followed> Follow<T> {
    /// Items buffered before the backend ends the stream of a slow follower.
    pub const BUFFER: usize = T::BUFFER;

    /// A stream and the sender that feeds it, bounded by [`BUFFER`](Self::BUFFER) items.
    pub fn channel() -> (mpsc::Sender<Result<T>>, Follow<T>) {
        let (sender, items) = mpsc::channel(T::BUFFER);
        (sender, Follow { items })
    }

    /// The next item. An `Err` is final (follow again), except as the type's docs say.
    pub async fn next(&mut self) -> Result<T> {
        match self.items.recv().await {
            Some(item) => item,
            None => Err(Error::watch_ended(
                "closed by the registry backend (the follower fell behind, or the backend went away)",
            )),
        }
    }
}

impl<T> fmt::Debug for Follow<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Follow")
            .field("buffered", &self.items.len())
            .finish()
    }
}

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
