//! The consumer's tasks wait, in their `select!` loops, on deadlines that may not be set:
//! one way to wait "until then, or forever when there is none".

use tokio::time::Instant;

/// Sleeps until `deadline`, or forever when there is none (a timer arm that never fires).
pub(crate) async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
