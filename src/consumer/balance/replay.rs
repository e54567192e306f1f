//! Request bodies that a retry can send again, as linkerd2-proxy's replay body does: what
//! the first attempt reads of the caller's body is kept, up to a bound, and each later
//! attempt reads the same frames, then whatever of the body is still unread. A body that
//! grows past the bound is not kept (the attempt reading it goes on unhindered), and its
//! call is not retried.
//!
//! Attempts of one call are sequential (failover), or all start from a body read in full
//! first (forking), so at most one attempt reads the caller's body at a time.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body as _, Frame, SizeHint};

/// One attempt's view of a call's body. Clones start from the beginning.
pub(super) struct Replay {
    shared: Arc<Mutex<Shared>>,
    /// Data frames this attempt has read.
    position: usize,
    /// Whether this attempt has read the trailers (or the end).
    finished: bool,
}

struct Shared {
    /// The caller's body, while some of it is unread.
    rest: Option<tonic::body::Body>,
    /// Its data frames read so far, while kept.
    data: Frames,
    /// Data frames read so far (kept or not).
    read: usize,
    /// Bytes read so far.
    bytes: usize,
    /// The bound on bytes kept.
    limit: usize,
    /// The body grew past the bound: nothing is kept.
    overflowed: bool,
    /// Its trailers, once read.
    trailers: Option<http::HeaderMap>,
    /// The caller's body failed: the call is not retried.
    failed: bool,
}

impl Replay {
    /// The first attempt's view of `body`, keeping up to `limit` bytes.
    pub fn new(body: tonic::body::Body, limit: usize) -> Replay {
        let ended = body.is_end_stream();
        Replay {
            shared: Arc::new(Mutex::new(Shared {
                rest: (!ended).then_some(body),
                data: Frames::default(),
                read: 0,
                bytes: 0,
                limit,
                overflowed: false,
                trailers: None,
                failed: false,
            })),
            position: 0,
            finished: false,
        }
    }

    /// A new attempt's view, from the beginning.
    pub fn again(&self) -> Replay {
        Replay {
            shared: self.shared.clone(),
            position: 0,
            finished: false,
        }
    }

    /// Whether another attempt can send the body again.
    pub fn replayable(&self) -> bool {
        let shared = self.lock();
        !shared.overflowed && !shared.failed
    }

    /// Reads the caller's body to its end now, if it is all there (a unary call's is):
    /// whether the whole body is now kept. Never waits.
    pub fn read_all_now(&self) -> bool {
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut shared = self.lock();
        loop {
            match shared.poll_rest(&mut cx) {
                Poll::Ready(Some(Ok(_))) => continue,
                Poll::Ready(None) => return !shared.overflowed && !shared.failed,
                Poll::Ready(Some(Err(_))) | Poll::Pending => return false,
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Shared {
    /// Reads the next frame of the caller's body, keeping it while under the bound.
    fn poll_rest(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        let Some(rest) = self.rest.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(rest).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.read += 1;
                    self.bytes += data.len();
                    if self.overflowed || self.bytes > self.limit {
                        self.overflowed = true;
                        self.data = Frames::default();
                    } else {
                        self.data.push(data.clone());
                    }
                } else if let Some(trailers) = frame.trailers_ref() {
                    self.trailers = Some(trailers.clone());
                    self.rest = None;
                }
            }
            Poll::Ready(Some(Err(_))) => {
                self.failed = true;
                self.rest = None;
            }
            Poll::Ready(None) => self.rest = None,
            Poll::Pending => {}
        }
        polled
    }
}

impl http_body::Body for Replay {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        if self.finished {
            return Poll::Ready(None);
        }
        let position = self.position;
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        if position < shared.read {
            // Frames an earlier attempt read: send them again, if they were kept.
            let Some(data) = shared.data.get(position) else {
                return Poll::Ready(Some(Err(tonic::Status::internal(
                    "the request body was over the replay bound and cannot be sent again",
                ))));
            };
            drop(shared);
            self.position += 1;
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        if shared.rest.is_none() {
            let trailers = shared.trailers.clone();
            let failed = shared.failed;
            drop(shared);
            self.finished = true;
            if failed {
                return Poll::Ready(Some(Err(tonic::Status::internal(
                    "the request body failed",
                ))));
            }
            return Poll::Ready(trailers.map(|t| Ok(Frame::trailers(t))));
        }
        let polled = shared.poll_rest(cx);
        drop(shared);
        match &polled {
            Poll::Ready(Some(Ok(frame))) if frame.is_data() => self.position += 1,
            Poll::Ready(Some(Ok(_)) | None | Some(Err(_))) => self.finished = true,
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        if self.finished {
            return true;
        }
        let shared = self.lock();
        shared.rest.is_none()
            && self.position >= shared.read
            && shared.trailers.is_none()
            && !shared.failed
    }

    fn size_hint(&self) -> SizeHint {
        let shared = self.lock();
        match &shared.rest {
            None if !shared.overflowed => {
                let kept = shared.data.bytes_from(self.position);
                SizeHint::with_exact(kept as u64)
            }
            _ => SizeHint::default(),
        }
    }
}

/// Data frames kept, the first inline: a unary call's body is one frame, kept without an
/// allocation of its own.
#[derive(Default)]
struct Frames {
    first: Option<Bytes>,
    more: Vec<Bytes>,
}

impl Frames {
    fn push(&mut self, frame: Bytes) {
        if self.first.is_none() {
            self.first = Some(frame);
        } else {
            self.more.push(frame);
        }
    }

    /// The frame at `position`, if kept.
    fn get(&self, position: usize) -> Option<Bytes> {
        match position {
            0 => self.first.clone(),
            _ => self.more.get(position - 1).cloned(),
        }
    }

    /// Bytes of the frames from `position` on.
    fn bytes_from(&self, position: usize) -> usize {
        let first = self.first.iter().skip(position);
        let more = self.more.iter().skip(position.saturating_sub(1));
        first.chain(more).map(Bytes::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;

    fn chunks(parts: &[&'static str]) -> tonic::body::Body {
        let frames = parts
            .iter()
            .map(|p| Ok::<_, tonic::Status>(Frame::data(Bytes::from_static(p.as_bytes()))))
            .collect::<Vec<_>>();
        tonic::body::Body::new(http_body_util::StreamBody::new(futures::stream::iter(
            frames,
        )))
    }

    async fn read(body: Replay) -> Result<Vec<u8>, tonic::Status> {
        Ok(body.collect().await?.to_bytes().to_vec())
    }

    #[tokio::test]
    async fn a_retry_sends_what_the_first_attempt_read_and_the_rest() {
        let first = Replay::new(chunks(&["he", "llo", " world"]), 1024);
        let second = first.again();
        let mut first = first;
        // The first attempt reads part of the body, then fails.
        let frame = first.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), "he");
        drop(first);
        assert!(second.replayable());
        let third = second.again();
        assert_eq!(read(second).await.unwrap(), b"hello world");
        assert_eq!(read(third).await.unwrap(), b"hello world");
    }

    #[tokio::test]
    async fn a_body_over_the_bound_goes_once_and_is_not_replayable() {
        let first = Replay::new(chunks(&["12345", "67890"]), 8);
        let second = first.again();
        assert_eq!(read(first).await.unwrap(), b"1234567890");
        assert!(!second.replayable());
        assert!(read(second).await.is_err(), "never a partial body");
    }

    #[tokio::test]
    async fn a_unary_body_is_read_all_at_once_for_forking() {
        let first = Replay::new(chunks(&["a", "b"]), 1024);
        assert!(first.read_all_now());
        let second = first.again();
        assert_eq!(read(first).await.unwrap(), b"ab");
        assert_eq!(read(second).await.unwrap(), b"ab");
        let pending =
            tonic::body::Body::new(http_body_util::StreamBody::new(futures::stream::pending::<
                Result<Frame<Bytes>, tonic::Status>,
            >()));
        assert!(
            !Replay::new(pending, 1024).read_all_now(),
            "a stream still open"
        );
    }
}
