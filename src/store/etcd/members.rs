//! The members of an etcd cluster, one client each, and fail-over between them.
//!
//! `etcd-client` given several endpoints spreads requests over them and never retries on
//! another: with one member dead, a share of requests fails and the watches on it end.
//! Instead, each endpoint here gets its own client, made (and authenticated) on first use,
//! and requests go to one preferred member. A request that fails in a way another member
//! may not (refused or lost connection, no leader, a stalled member) is tried on the next
//! member, round after round with a short pause, until the request's deadline, as long as
//! some member is reachable (one that answers "no leader" during an election is); when no
//! member can be reached at all, the request fails at once. The member that answers
//! becomes the preferred one. Permanent errors (credentials, permissions) and
//! answers (a conflict, a missing lease) are returned at once.
//!
//! Retrying a write on another member is safe for the store's callers: a put writes the
//! same value again, a delete or revoke that already happened reports the key or lease
//! gone, a compare-and-swap that already happened reports a conflict with our own value,
//! and a lease granted twice leaves one to expire unused. A write sent to a member that
//! stalled (frozen, partitioned) may still be carried out when it comes back, after later
//! writes; the callers' writes are re-assertions of their own state, so a late repeat
//! writes what was already there.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use etcd_client::{Client, ConnectOptions};
use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::errors::map_error;
use crate::error::{Error, Result};

/// The pause after every member failed once, before the next round.
const ROUND_PAUSE: Duration = Duration::from_millis(100);
/// The least time one attempt on a member gets, when the deadline leaves that much.
const MIN_ATTEMPT: Duration = Duration::from_secs(1);

/// One member: its endpoint and its client, once connected.
struct Member {
    endpoint: String,
    client: OnceCell<Client>,
}

/// The cluster's members; see the module docs.
pub(super) struct Members {
    members: Vec<Member>,
    /// Where the next request goes first.
    preferred: AtomicUsize,
    connect_options: ConnectOptions,
}

impl Members {
    /// Members for `endpoints` (not empty), none connected yet.
    pub(super) fn new(endpoints: &[String], connect_options: ConnectOptions) -> Self {
        Members {
            members: endpoints
                .iter()
                .map(|endpoint| Member {
                    endpoint: endpoint.clone(),
                    client: OnceCell::new(),
                })
                .collect(),
            preferred: AtomicUsize::new(0),
            connect_options,
        }
    }

    /// The client of member `index`, connecting (and authenticating) on first use. A failed
    /// connect is tried again on the next use.
    async fn client(&self, index: usize) -> Result<Client> {
        let member = &self.members[index];
        member
            .client
            .get_or_try_init(|| async {
                Client::connect([&member.endpoint], Some(self.connect_options.clone()))
                    .await
                    .map_err(|e| connect_error(e, &member.endpoint))
            })
            .await
            .cloned()
    }

    /// Tells that the member at `index` failed (a watch stream on it broke), so the next
    /// request starts elsewhere.
    pub(super) fn failed(&self, index: usize) {
        let next = (index + 1) % self.members.len();
        let _ = self
            .preferred
            .compare_exchange(index, next, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// Runs `request` on a member's client within `budget`, failing over as the module docs
    /// say; returns the answer and the member that gave it. `what` names the request for a
    /// timeout.
    pub(super) async fn run<T, F, Fut>(
        &self,
        budget: Duration,
        what: impl Fn() -> String,
        mut request: F,
    ) -> Result<(T, usize)>
    where
        F: FnMut(Client) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        let count = self.members.len();
        let deadline = Instant::now() + budget;
        let mut index = self.preferred.load(Ordering::Relaxed) % count;
        let mut failed_in_round = 0;
        let mut reachable_in_round = false;
        let mut last: Option<Error> = None;
        loop {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            let remaining = deadline - now;
            // A stalled member must leave time for the others.
            let share = remaining / u32::try_from(count).unwrap_or(u32::MAX);
            let attempt_budget = share.max(remaining.min(MIN_ATTEMPT));
            let attempt = async {
                let client = self.client(index).await?;
                request(client).await
            };
            match tokio::time::timeout(attempt_budget, attempt).await {
                Ok(Ok(answer)) => {
                    self.preferred.store(index, Ordering::Relaxed);
                    return Ok((answer, index));
                }
                Ok(Err(error)) if !fails_over(&error) => return Err(error),
                Ok(Err(error)) => last = Some(error),
                Err(_) => {
                    last = Some(Error::Timeout {
                        what: format!("{} at {}", what(), self.members[index].endpoint),
                        after: attempt_budget,
                    })
                }
            }
            if count > 1 {
                tracing::debug!(
                    endpoint = %self.members[index].endpoint,
                    error = %last.as_ref().map(ToString::to_string).unwrap_or_default(),
                    "etcd member failed; trying the next"
                );
            }
            reachable_in_round |= !last.as_ref().is_some_and(unreachable);
            index = (index + 1) % count;
            failed_in_round += 1;
            if failed_in_round >= count {
                if !reachable_in_round {
                    break;
                }
                failed_in_round = 0;
                reachable_in_round = false;
                let pause = ROUND_PAUSE.min(deadline.saturating_duration_since(Instant::now()));
                tokio::time::sleep(pause).await;
            }
        }
        Err(match last {
            // One member that stalled the whole time: the request timed out, as it did.
            Some(Error::Timeout { .. }) | None => Error::Timeout {
                what: what(),
                after: budget,
            },
            Some(error) => error,
        })
    }
}

/// Whether another member (or the same one a moment later) may answer where this failed.
fn fails_over(error: &Error) -> bool {
    matches!(
        error,
        Error::StoreUnavailable { .. } | Error::Timeout { .. } | Error::WatchEnded { .. }
    )
}

/// Whether `error` says the member could not be reached at all (nothing listening, the
/// connection refused or torn down), as opposed to reached but unable to answer yet.
fn unreachable(error: &Error) -> bool {
    let Error::StoreUnavailable { reason, .. } = error else {
        return false;
    };
    let reason = reason.to_ascii_lowercase();
    [
        "tcp connect",
        "transport error",
        "connection refused",
        "connection reset",
        "broken pipe",
        "dns error",
    ]
    .iter()
    .any(|sign| reason.contains(sign))
}

/// Sorts an error of connecting to `endpoint`.
fn connect_error(error: etcd_client::Error, endpoint: &str) -> Error {
    let setting = match &error {
        etcd_client::Error::InvalidArgs(reason) => format!("etcd options: {reason}"),
        etcd_client::Error::InvalidUri(e) => format!("etcd endpoint: {e}"),
        // The channel connects lazily: a transport error here is the endpoint or TLS setup,
        // not the network.
        etcd_client::Error::TransportError(e) => format!("etcd endpoint or TLS settings: {e}"),
        _ => return map_error(error, &format!("authenticate to etcd at {endpoint}")),
    };
    Error::config(setting).caused_by(error)
}
