//! Which failed attempts of a call may be tried again on another provider: the safety
//! rule. Pure: it reads an attempt's error or answer headers, nothing else.
//!
//! A call must not be processed twice unless its caller allows it. So an attempt is
//! retried by default only when the provider cannot have processed it:
//!
//! * it **never reached** the provider: the connection could not be made (refused, timed
//!   out, TLS), the connection closed before the call was sent, the provider refused the
//!   stream (HTTP/2 `REFUSED_STREAM`), or it was going away and the stream was above the
//!   last one it said it would process (`GOAWAY` with `NO_ERROR`: a graceful stop);
//! * the provider **declined** it in a trailers-only answer (no message, just a status):
//!   `UNAVAILABLE` (as Istio's default retry policy treats it: the provider's way of saying
//!   "not here") or `UNIMPLEMENTED` (the channel calls only providers whose metadata
//!   declares the service: what Triple answers once a service is unexported on shutdown).
//!
//! Anything else may have been processed: a timeout, a connection lost after sending, any
//! other status. Those are retried only for calls the caller marks idempotent, and then
//! only on the statuses of [`IDEMPOTENT_RETRY_CODES`] and on lost connections and timeouts.
//! An answer that carries a message is the call's, whatever its trailers say.
//! Errors the channel makes itself (no provider routed, none ready in time) are never
//! retried: there is nowhere else to go.

use std::error::Error as StdError;

use tonic::Code;

/// Statuses a call marked idempotent is retried on, besides those retried for every call.
pub const IDEMPOTENT_RETRY_CODES: [Code; 4] = [
    Code::Unavailable,
    Code::DeadlineExceeded,
    Code::ResourceExhausted,
    Code::Aborted,
];

/// What became of one attempt of a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attempted {
    /// An answer for the caller: a success, a response with a body, or a status not
    /// retried.
    Answered,
    /// The provider cannot have seen it; why.
    NotSent(&'static str),
    /// The provider declined it unprocessed, in a trailers-only answer with this status.
    Declined(Code),
    /// It may have been processed, and failed: with this status, or lost (`None`: the
    /// connection failed after sending, or no answer came in time).
    Failed(Option<Code>, &'static str),
    /// The channel's own error (nowhere to route, nothing ready in time): never retried.
    Channel,
}

impl Attempted {
    /// Whether an attempt that ended so may be tried again on another provider, for a call
    /// that is `idempotent` or not.
    pub fn may_retry(&self, idempotent: bool) -> bool {
        match self {
            Attempted::NotSent(_) | Attempted::Declined(_) => true,
            Attempted::Failed(code, _) => {
                idempotent && code.is_none_or(|c| IDEMPOTENT_RETRY_CODES.contains(&c))
            }
            Attempted::Answered | Attempted::Channel => false,
        }
    }

    /// Whether the provider cannot have processed it (a retry of it is not a second try
    /// of the call's work).
    pub fn unprocessed(&self) -> bool {
        matches!(self, Attempted::NotSent(_) | Attempted::Declined(_))
    }

    /// A short word for metrics and logs.
    pub fn word(&self) -> &'static str {
        match self {
            Attempted::Answered => "answered",
            Attempted::NotSent(_) => "not_sent",
            Attempted::Declined(_) => "declined",
            Attempted::Failed(..) => "failed",
            Attempted::Channel => "channel",
        }
    }
}

/// What an attempt answered with `headers` says: declined when they end the answer with
/// a status that says "not here" (trailers-only), failed when they end it with another
/// status, else an answer (its status, if any, comes with the body).
pub fn of_headers(headers: &http::HeaderMap) -> Attempted {
    match grpc_code(headers) {
        None => Attempted::Answered,
        Some(Code::Ok) => Attempted::Answered,
        Some(code @ (Code::Unavailable | Code::Unimplemented)) => Attempted::Declined(code),
        Some(code) => Attempted::Failed(Some(code), "the provider answered with a status"),
    }
}

/// What an attempt that failed with `error` says, found down its chain of sources.
pub fn of_error(error: &(dyn StdError + 'static)) -> Attempted {
    let mut source = Some(error);
    while let Some(error) = source {
        if error.is::<tonic::ConnectError>() {
            return Attempted::NotSent("the connection could not be made");
        }
        if let Some(hyper) = error.downcast_ref::<hyper::Error>()
            && hyper.is_canceled()
        {
            return Attempted::NotSent("the connection closed before the call was sent");
        }
        if let Some(h2) = error.downcast_ref::<h2::Error>() {
            return of_h2(h2);
        }
        if error.is::<tonic::TimeoutExpired>() {
            return Attempted::Failed(None, "no answer came before the deadline");
        }
        if error.is::<crate::consumer::health::ProviderHung>() {
            return Attempted::Failed(None, "the provider stopped answering while the call waited");
        }
        if let Some(status) = error.downcast_ref::<tonic::Status>() {
            return match status.code() {
                Code::DeadlineExceeded => {
                    Attempted::Failed(None, "no answer came before the deadline")
                }
                _ => Attempted::Channel,
            };
        }
        if let Some(io) = error.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return Attempted::NotSent("the connection could not be made");
        }
        source = error.source();
    }
    Attempted::Failed(None, "the connection failed after the call was sent")
}

/// What an HTTP/2 error of the attempt's stream says.
fn of_h2(error: &h2::Error) -> Attempted {
    let remote = error.is_remote();
    match error.reason() {
        Some(h2::Reason::REFUSED_STREAM) if remote => {
            Attempted::NotSent("the provider refused the stream (REFUSED_STREAM)")
        }
        // A remote GOAWAY errors only the streams above the last one the provider said it
        // processes; with NO_ERROR it is a graceful stop, and nothing else errors a
        // stream so.
        Some(h2::Reason::NO_ERROR) if remote && error.is_go_away() => {
            Attempted::NotSent("the provider was going away (GOAWAY) before this call")
        }
        _ => Attempted::Failed(None, "the stream failed after the call was sent"),
    }
}

/// The grpc-status in `headers`, if there is one (an unknown number reads as UNKNOWN).
pub fn grpc_code(headers: &http::HeaderMap) -> Option<Code> {
    let value = headers.get("grpc-status")?.to_str().ok()?;
    Some(Code::from_i32(value.trim().parse().unwrap_or(2)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(status: &str) -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        headers.insert("grpc-status", status.parse().unwrap());
        headers
    }

    #[test]
    fn trailers_only_not_here_answers_are_declined_and_retried_for_every_call() {
        assert_eq!(of_headers(&http::HeaderMap::new()), Attempted::Answered);
        assert_eq!(of_headers(&headers("0")), Attempted::Answered);
        for code in ["14", "12"] {
            let attempted = of_headers(&headers(code));
            assert!(matches!(attempted, Attempted::Declined(_)), "{code}");
            assert!(attempted.may_retry(false) && attempted.unprocessed());
        }
        let internal = of_headers(&headers("13"));
        assert_eq!(
            internal,
            Attempted::Failed(Some(Code::Internal), "the provider answered with a status")
        );
        assert!(!internal.may_retry(false) && !internal.may_retry(true));
        let exhausted = of_headers(&headers("8"));
        assert!(!exhausted.may_retry(false) && exhausted.may_retry(true));
        assert!(matches!(
            of_headers(&headers("x")),
            Attempted::Failed(Some(Code::Unknown), _)
        ));
    }

    #[derive(Debug)]
    struct Wrapped(Box<dyn StdError + Send + Sync>);
    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("transport error")
        }
    }
    impl StdError for Wrapped {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(self.0.as_ref())
        }
    }

    #[test]
    fn errors_are_read_down_their_chain() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let connect = Wrapped(Box::new(tonic::ConnectError(Box::new(refused))));
        assert!(matches!(of_error(&connect), Attempted::NotSent(_)));
        let reset = Wrapped(Box::new(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        )));
        let lost = of_error(&reset);
        assert!(matches!(lost, Attempted::Failed(None, _)));
        assert!(!lost.may_retry(false), "it may have been processed");
        assert!(lost.may_retry(true), "unless the call may be made twice");
        let ours = tonic::Status::unavailable("no provider routed");
        assert_eq!(of_error(&ours), Attempted::Channel);
        assert!(!Attempted::Channel.may_retry(true));
        let late = tonic::Status::deadline_exceeded("late");
        assert!(matches!(of_error(&late), Attempted::Failed(None, _)));
        // A reset the library made itself is not the provider's refusal.
        let local = h2::Error::from(h2::Reason::REFUSED_STREAM);
        assert!(matches!(of_error(&local), Attempted::Failed(None, _)));
    }
}
