//! The signal a process stops on: SIGINT (Ctrl-C) or SIGTERM, the signal systemd,
//! Kubernetes and Docker send on a deploy. A provider that stopped on Ctrl-C alone would be
//! killed by every deploy instead of draining, its record listed as enabled until its
//! lease ran out.

/// Completes when the process is asked to stop: on SIGINT or SIGTERM on Unix, on Ctrl-C
/// elsewhere. Pass it as the shutdown of [`Provider::serve`](super::Provider::serve), or
/// await it before [`Provider::shutdown`](super::Provider::shutdown).
///
/// A signal whose handler cannot be installed (which the OS refuses only in unusual
/// sandboxes) is logged once and not waited for; when neither can be, this never
/// completes, so the process keeps serving rather than stopping at once.
///
pub async fn shutdown_signal() {
    let interrupt = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for Ctrl-C (SIGINT)");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                terminate.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}
