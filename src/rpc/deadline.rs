//! The deadline of a MetadataService call: the time the process could run the call, not
//! the time the call waited behind the process's own work.
//!
//! A wall-clock timeout (`tokio::time::timeout`, tonic's per-request and connect timeouts,
//! the `grpc-timeout` header it enforces on the client) counts every moment from its start,
//! including the moments the call's tasks sat in the runtime's queue while the process was
//! busy with other work: a consumer whose 1,000 resolvers wake at once to build endpoints
//! made its one metadata call time out on its own backlog, then called again. Here the
//! budget is spent in slices: each slice is one timer, and only the slice counts, not how
//! late the task that owns the call woke from it. A peer that does not answer while the
//! process is idle costs the budget (plus a millisecond of timer granularity per slice); a
//! process too busy to run the call does not cost it, since while it is busy every wake
//! comes late.

use std::future::Future;
use std::time::Duration;

use tokio::time::{Instant, sleep_until};

/// How many slices the budget is spent in (a slice is at least [`MIN_SLICE`]).
const SLICES: u32 = 16;

/// The shortest slice: timers are not finer than a millisecond.
const MIN_SLICE: Duration = Duration::from_millis(10);

/// Runs `work` for at most `budget` of the time its task could run: `None` once the budget
/// is spent. The time between a slice's end and the task's wake (the process's backlog)
/// is not counted.
pub(crate) async fn within<F: Future>(budget: Duration, work: F) -> Option<F::Output> {
    let mut work = std::pin::pin!(work);
    let slice = (budget / SLICES).max(MIN_SLICE);
    let mut spent = Duration::ZERO;
    while spent < budget {
        let step = slice.min(budget - spent);
        let slice_end = Instant::now() + step;
        tokio::select! {
            biased;
            done = &mut work => return Some(done),
            () = sleep_until(slice_end) => spent += step,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tokio::sync::Notify;

    #[tokio::test(start_paused = true)]
    async fn a_call_that_never_ends_costs_its_budget() {
        let started = Instant::now();
        let out = within(Duration::from_secs(3), std::future::pending::<()>()).await;
        assert_eq!(out, None);
        let took = started.elapsed();
        // Timers are rounded up to the millisecond: at most one more per slice.
        let most = Duration::from_secs(3) + Duration::from_millis(u64::from(SLICES));
        assert!(took >= Duration::from_secs(3) && took <= most, "{took:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_short_budget_is_spent_in_one_slice() {
        let started = Instant::now();
        let out = within(Duration::from_millis(4), std::future::pending::<()>()).await;
        assert_eq!(out, None);
        assert_eq!(started.elapsed(), Duration::from_millis(4));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_that_ends_in_time_is_answered() {
        let call = async {
            tokio::time::sleep(Duration::from_millis(2_900)).await;
            7
        };
        assert_eq!(within(Duration::from_secs(3), call).await, Some(7));
    }

    /// The process is busy for 5 s (the clock moves on, no task runs) right after the call
    /// started; the call then needs 200 ms more. A wall-clock timeout of 1 s gives up on it,
    /// the budget does not.
    #[tokio::test(start_paused = true)]
    async fn time_the_process_was_busy_elsewhere_is_not_counted() {
        let busy_done = Arc::new(Notify::new());
        let call = |busy_done: Arc<Notify>| async move {
            busy_done.notified().await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            "answer"
        };
        let busy = |busy_done: Arc<Notify>| async move {
            tokio::task::yield_now().await;
            tokio::time::advance(Duration::from_secs(5)).await;
            busy_done.notify_one();
        };

        tokio::spawn(busy(busy_done.clone()));
        let wall = tokio::time::timeout(Duration::from_secs(1), call(busy_done.clone())).await;
        assert!(wall.is_err(), "a wall-clock timeout counts the busy time");

        let busy_done = Arc::new(Notify::new());
        tokio::spawn(busy(busy_done.clone()));
        let budget = within(Duration::from_secs(1), call(busy_done)).await;
        assert_eq!(budget, Some("answer"));
    }
}
