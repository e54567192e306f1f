//! Waiting in tests, one way for the whole suite: [`eventually`] polls a condition with a
//! deadline (real time against real processes and sockets; on the paused clock the
//! deadline is virtual and pure logic runs to completion before the clock moves), and
//! [`settle`] lets every runnable task run.

use std::future::Future;
use std::time::Duration;

/// Polls `check` every 100 ms until it returns true; panics with `what` after `limit`.
pub async fn eventually<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {limit:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Lets every runnable task run; with the paused clock, advances it by at most 1 ms.
pub async fn settle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}
