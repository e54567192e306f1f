//! Sorting `etcd-client`'s errors into the crate's [`Error`] variants: transient (retry),
//! permanent (credentials, permissions), or a plain store failure.

use tonic::Code;

use crate::error::Error;

/// Sorts an `etcd-client` error for the layers above; `what` says what was being done.
pub(super) fn map_error(error: etcd_client::Error, what: &str) -> Error {
    use etcd_client::Error as E;
    let sorted = match &error {
        E::GRpcStatus(status) => map_status(status, what),
        E::TransportError(e) => Error::store_unavailable(format!("{what}: {e}")),
        E::IoError(e) => Error::store_unavailable(format!("{what}: {e}")),
        E::WatchError(e) => Error::watch_ended(format!("{what}: {e}")),
        E::InvalidArgs(e) => Error::store(format!("{what}: invalid arguments: {e}")),
        other => Error::store(format!("{what}: {other}")),
    };
    sorted.caused_by(error)
}

/// Sorts a gRPC status from etcd; see [`map_error`], which keeps the error as the source.
fn map_status(status: &tonic::Status, what: &str) -> Error {
    let message = status.message();
    let auth_failure = message.contains("authentication failed")
        || message.contains("user name is empty")
        || message.contains("authentication is not enabled")
        || message.contains("invalid auth token")
        || message.contains("user name not found");
    match status.code() {
        _ if auth_failure => Error::unauthenticated(format!("{what}: {message}")),
        Code::Unauthenticated => Error::unauthenticated(format!("{what}: {message}")),
        Code::PermissionDenied => Error::permission_denied(format!("{what}: {message}")),
        // No leader, leader changed, request timed out inside etcd, connection refused or
        // lost, the request canceled under us: all worth retrying.
        Code::Unavailable | Code::Cancelled | Code::DeadlineExceeded | Code::Aborted => {
            Error::store_unavailable(format!("{what}: {message}"))
        }
        // Transport failures that tonic could not classify.
        Code::Unknown | Code::Internal
            if message.contains("transport")
                || message.contains("connection")
                || message.contains("h2 protocol error")
                || message.contains("broken pipe") =>
        {
            Error::store_unavailable(format!("{what}: {message}"))
        }
        code => Error::store(format!("{what}: {message} ({code:?})")),
    }
}

/// Whether etcd said that a lease does not exist.
pub(super) fn is_lease_not_found(error: &etcd_client::Error) -> bool {
    match error {
        etcd_client::Error::GRpcStatus(status) => {
            status.code() == Code::NotFound && status.message().contains("lease not found")
        }
        // `LeaseClient::keep_alive` reports a TTL of 0 (lease gone) this way.
        etcd_client::Error::LeaseKeepAliveError(_) => true,
        _ => false,
    }
}

/// Whether etcd said that a revision is compacted.
pub(super) fn is_compacted(error: &etcd_client::Error) -> bool {
    matches!(error, etcd_client::Error::GRpcStatus(status)
        if status.code() == Code::OutOfRange && status.message().contains("compacted"))
}

/// The size of a response over the client's decoding limit, when `error` says that one
/// was (tonic reports it as OUT_OF_RANGE, "decoded message length too large: found N
/// bytes"); `Some(None)` when the size is not in the message.
pub(super) fn too_large_response(error: &etcd_client::Error) -> Option<Option<usize>> {
    let etcd_client::Error::GRpcStatus(status) = error else {
        return None;
    };
    let message = status.message();
    if status.code() != Code::OutOfRange || !message.contains("message length too large") {
        return None;
    }
    let found = message
        .split_once("found ")
        .and_then(|(_, rest)| rest.split(' ').next())
        .and_then(|n| n.parse().ok());
    Some(found)
}

pub(super) fn map_watch_error(error: etcd_client::Error, prefix: &str) -> Error {
    match map_error(error, &format!("etcd watch of {prefix:?}")) {
        // Every failure of an established stream ends the watch the same way: re-list.
        Error::StoreUnavailable { reason, source } | Error::Store { reason, source } => {
            Error::WatchEnded { reason, source }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_statuses() {
        let unavailable = map_status(&tonic::Status::unavailable("etcdserver: no leader"), "x");
        assert!(matches!(unavailable, Error::StoreUnavailable { .. }));
        let auth = map_status(
            &tonic::Status::invalid_argument(
                "etcdserver: authentication failed, invalid user ID or password",
            ),
            "x",
        );
        assert!(matches!(&auth, Error::Unauthenticated { .. }), "{auth}");
        assert!(auth.is_permanent() && !auth.is_transient());
        let denied = map_status(
            &tonic::Status::permission_denied("etcdserver: permission denied"),
            "x",
        );
        assert!(
            matches!(&denied, Error::PermissionDenied { .. }),
            "{denied}"
        );
        assert!(denied.is_permanent() && !denied.is_transient());
        let token = map_status(
            &tonic::Status::unauthenticated("etcdserver: invalid auth token"),
            "x",
        );
        assert!(matches!(&token, Error::Unauthenticated { .. }), "{token}");
        let other = map_status(&tonic::Status::invalid_argument("etcdserver: bad"), "x");
        assert!(matches!(other, Error::Store { .. }));
    }

    #[test]
    fn keeps_the_client_error_as_the_source() {
        use std::error::Error as _;
        let error = map_error(etcd_client::Error::InvalidArgs("no key".into()), "put");
        assert_eq!(
            error.to_string(),
            "store error: put: invalid arguments: no key"
        );
        let source = error
            .source()
            .and_then(|s| s.downcast_ref::<etcd_client::Error>());
        assert!(matches!(source, Some(etcd_client::Error::InvalidArgs(_))));
        let status = tonic::Status::unavailable("etcdserver: no leader");
        let error = map_error(etcd_client::Error::GRpcStatus(status), "get");
        assert!(error.is_transient());
        let source = error
            .source()
            .and_then(|s| s.downcast_ref::<etcd_client::Error>());
        assert!(matches!(source, Some(etcd_client::Error::GRpcStatus(_))));
    }
}
