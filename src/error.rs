//! The one error type of the crate.

use std::sync::Arc;
use std::time::Duration;

/// The underlying error a variant keeps as its [`source`](std::error::Error::source), of
/// any type: built with `Source::from(error)` or [`Error::caused_by`].
pub type Source = Shared<dyn std::error::Error + Send + Sync>;

/// An error kept under an [`Error`]: shared, so that an [`Error`] is `Clone` and a cached
/// failure is handed out again as it was made. It derefs to the error itself and is no
/// error of its own, so that [`source`](std::error::Error::source) returns the error it
/// was made from, which downcasts to its type (an `Arc` would be returned as itself).
pub struct Shared<E: ?Sized>(Arc<E>);

impl<E> Shared<E> {
    /// Keeps `error`.
    pub fn new(error: E) -> Self {
        Shared(Arc::new(error))
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for Source {
    fn from(error: E) -> Self {
        Shared(Arc::new(error))
    }
}

impl<E: ?Sized> Clone for Shared<E> {
    fn clone(&self) -> Self {
        Shared(Arc::clone(&self.0))
    }
}

impl<E: ?Sized> std::ops::Deref for Shared<E> {
    type Target = E;

    fn deref(&self) -> &E {
        &self.0
    }
}

impl<E: std::fmt::Debug + ?Sized> std::fmt::Debug for Shared<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl<E: std::fmt::Display + ?Sized> std::fmt::Display for Shared<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Everything that can go wrong in Introspect, with variants that say what went wrong.
///
/// Whether an error is [permanent](Error::is_permanent) or
/// [transient](Error::is_transient) is decided where it is made, by its variant; a copy
/// (`clone`) keeps it.
///
/// # Sources
///
/// These variants keep the error they were made from as their
/// [`source`](std::error::Error::source), so that a caller can walk the chain or downcast
/// it; every other variant has none:
///
/// * always: [`Rpc`](Error::Rpc) (its `status`, a [`tonic::Status`]) and
///   [`Io`](Error::Io) (the [`std::io::Error`]);
/// * when there was one ([`Error::caused_by`] sets it): [`Malformed`](Error::Malformed),
///   [`Store`](Error::Store), [`Unauthenticated`](Error::Unauthenticated),
///   [`PermissionDenied`](Error::PermissionDenied),
///   [`StoreUnavailable`](Error::StoreUnavailable),
///   [`RegistrationLost`](Error::RegistrationLost), [`WatchEnded`](Error::WatchEnded),
///   [`Connect`](Error::Connect),
///   [`MetadataServiceMissing`](Error::MetadataServiceMissing), [`Rule`](Error::Rule),
///   [`Server`](Error::Server) and [`Config`](Error::Config);
/// * when there was one: [`MetadataUnavailable`](Error::MetadataUnavailable) (its `last`
///   failure, an [`Error`] itself).
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A name (app, interface, group, version, protocol, host, revision) that would break
    /// the key layout or the match key.
    #[error("invalid {kind} {value:?}: {reason}")]
    InvalidName {
        /// What kind of name it is: "app", "interface", "host", ...
        kind: &'static str,
        /// The offending value, shortened when very long.
        value: String,
        /// Why it was rejected.
        reason: &'static str,
    },

    /// A port outside `1..=65535` where a real port is required.
    #[error("invalid port {0}: expected 1..=65535")]
    InvalidPort(i64),

    /// A record read from the store or the network that does not parse.
    #[error("malformed {what}: {reason}")]
    Malformed {
        /// What was being parsed: "instance record", "metadata info", ...
        what: &'static str,
        /// The parser's complaint.
        reason: String,
        /// The parser's error, when one was raised.
        #[source]
        source: Option<Source>,
    },

    /// A value over one of the configured size limits.
    #[error("{what} too large: {size} over the limit of {limit}")]
    TooLarge {
        /// What was measured.
        what: &'static str,
        /// Its size (bytes or count).
        size: usize,
        /// The limit in force.
        limit: usize,
    },

    /// Metadata whose content does not hash to the revision it was fetched for.
    #[error(
        "metadata of app {app:?} claims revision {claimed} but its content hashes to {computed}"
    )]
    RevisionMismatch {
        /// The app the metadata belongs to.
        app: String,
        /// The revision it was fetched for.
        claimed: String,
        /// The revision its content hashes to.
        computed: String,
    },

    /// The store refused or failed a request for a reason no other variant names.
    #[error("store error: {reason}")]
    Store {
        /// What failed, and the store's complaint.
        reason: String,
        /// The underlying error, when one was raised.
        #[source]
        source: Option<Source>,
    },

    /// The store did not accept who we are: wrong user or password, no credentials where
    /// they are required, an invalid or expired token that could not be renewed. Permanent:
    /// retrying the same call cannot help. The message never holds a password.
    #[error("store authentication failed: {reason}")]
    Unauthenticated {
        /// What was refused, and why; never a password.
        reason: String,
        /// The underlying error, when one was raised.
        #[source]
        source: Option<Source>,
    },

    /// The store knows who we are but does not let us do this (a read-only user writing, a
    /// user without access to the key range). Permanent: retrying cannot help.
    #[error("store permission denied: {reason}")]
    PermissionDenied {
        /// What was refused, and the store's complaint.
        reason: String,
        /// The underlying error, when one was raised.
        #[source]
        source: Option<Source>,
    },

    /// The store could not be reached.
    #[error("store unavailable: {reason}")]
    StoreUnavailable {
        /// What could not be done, and why.
        reason: String,
        /// The underlying error, when one was raised.
        #[source]
        source: Option<Source>,
    },

    /// A lease that the store does not know (expired or revoked).
    #[error("lease {0} not found (expired or revoked)")]
    LeaseNotFound(i64),

    /// The registry no longer holds a registration's liveness (its lease or session expired
    /// or was revoked): the record is gone; register again.
    #[error("registration lost: {reason}")]
    RegistrationLost {
        /// Which registration, and how it was lost.
        reason: String,
        /// The underlying error, when one was raised.
        #[source]
        source: Option<Source>,
    },

    /// A watch asked for history that the store has compacted away; re-list and watch again.
    #[error("store revision {requested} is compacted (oldest kept: {compacted})")]
    Compacted {
        /// The revision the watch asked to start from.
        requested: i64,
        /// The oldest revision the store still holds.
        compacted: i64,
    },

    /// A watch stream ended: canceled by the store, dropped for lagging, or its connection lost.
    #[error("watch ended: {reason}")]
    WatchEnded {
        /// Which watch, and why it ended.
        reason: String,
        /// The underlying error, when one was raised.
        #[source]
        source: Option<Source>,
    },

    /// A compare-and-swap kept losing to concurrent writers.
    #[error("compare-and-swap on {key} still conflicting after {attempts} attempts")]
    Contended {
        /// The key being written.
        key: String,
        /// How many attempts were made.
        attempts: u32,
    },

    /// A compare-and-set on a config item whose version is no longer the one expected:
    /// another writer changed it (or removed it, or created it) since it was read. Read
    /// `current`, decide again, write again.
    #[error("config {key} changed since it was read: it is now {}", describe_current(.current))]
    Conflict {
        /// The item, `{group}/{key}`.
        key: String,
        /// The item as it is now (`None`: absent).
        current: Option<crate::config_item::ConfigItem>,
    },

    /// A call did not finish within its deadline.
    #[error("{what} timed out after {after:?}")]
    Timeout {
        /// The call that timed out.
        what: String,
        /// The deadline.
        after: Duration,
    },

    /// A MetadataService call failed.
    #[error("metadata service at {address}: {status}")]
    Rpc {
        /// The address that was called.
        address: String,
        /// What the server or the transport said; also the [`source`](std::error::Error::source),
        /// so that a caller holding only a `dyn Error` can downcast it to read the code.
        #[source]
        status: tonic::Status,
    },

    /// A MetadataService could not be reached.
    #[error("cannot connect to metadata service at {address}: {reason}")]
    Connect {
        /// The address that was dialled.
        address: String,
        /// The transport's complaint.
        reason: String,
        /// The transport's error, when one was raised.
        #[source]
        source: Option<Source>,
    },

    /// An instance's MetadataService speaks a protocol or contract this crate cannot call
    /// (this crate speaks `MetadataServiceV2` over Triple or gRPC).
    #[error(
        "MetadataService over {protocol} ({contract}) is not supported; need {need} (instance {address})"
    )]
    UnsupportedMetadataService {
        /// The instance, `{host}:{port}`.
        address: String,
        /// The protocol it advertises, e.g. `dubbo`.
        protocol: String,
        /// The contract it advertises: `V1`, `V2` or `version {other}`.
        contract: String,
        /// What it would take: `tri`, or `MetadataServiceV2` when the protocol already is.
        need: &'static str,
    },

    /// The metadata of a revision could not be had from any instance or report.
    #[error("metadata of app {app:?} revision {revision} unavailable: {reason}")]
    MetadataUnavailable {
        /// The app.
        app: String,
        /// The revision.
        revision: String,
        /// The last failure seen.
        reason: String,
        /// That failure, when there was one.
        #[source]
        last: Option<Shared<Error>>,
    },

    /// A provider's own MetadataService did not answer for its revision when the provider
    /// started, so consumers could not have learned its services.
    #[error("the provider's MetadataService does not answer at {address}: {advice}")]
    MetadataServiceMissing {
        /// The address that was called: the instance's host and MetadataService port.
        address: String,
        /// What went wrong and what to do about it.
        advice: String,
        /// The failure of the call, when it failed.
        #[source]
        source: Option<Source>,
    },

    /// A server's certificate does not pass the identity check for the app it was resolved
    /// for: it does not chain to a trusted CA, is not for server authentication, or does not
    /// name the app (the `identity` module, with the `tls` feature). Whoever can write the
    /// registry may have put it there.
    #[error(
        "the server at {address} is refused as app {app:?}: its certificate {cause}; \
         expected {expected}, presented {presented}"
    )]
    IdentityRejected {
        /// The address that was dialled.
        address: String,
        /// The app it was resolved for.
        app: String,
        /// The name the identity rule asks the certificate to carry, e.g.
        /// `DNS:shop-payments`.
        expected: String,
        /// The names the certificate presents, bounded, e.g. `DNS:shop-orders`.
        presented: String,
        /// What is wrong with it, the rest of the sentence "its certificate …", e.g.
        /// `does not name the app` or `has expired`.
        cause: String,
    },

    /// A provider's own certificate does not name its app under its identity rule, so every
    /// consumer checking identity would refuse it.
    #[error(
        "the certificate of app {app:?} does not name it: the identity rule asks for \
         {expected}, the certificate presents {presented}"
    )]
    IdentityMismatch {
        /// The provider's app.
        app: String,
        /// The name the rule asks for.
        expected: String,
        /// The names the certificate presents.
        presented: String,
    },

    /// A governance rule from the config centre (or a file) that cannot be applied: it
    /// does not parse, has an unknown `configVersion`, is over the size bound, or uses a
    /// form that cannot be evaluated here. The previous good rule under `key` stays in force.
    #[error("rule {key}: {reason}")]
    Rule {
        /// The rule's key in the config centre (`greeter.tag-router`), or the file's name.
        key: String,
        /// What is wrong with it.
        reason: String,
        /// The parser's error, when one was raised (not YAML, not UTF-8).
        #[source]
        source: Option<Source>,
    },

    /// A local I/O error (snapshot file, server socket).
    #[error("i/o error: {0}")]
    Io(#[source] Shared<std::io::Error>),

    /// A gRPC server failed to start or stopped with an error.
    #[error("server error: {reason}")]
    Server {
        /// What failed.
        reason: String,
        /// The underlying error, when one was raised.
        #[source]
        source: Option<Source>,
    },

    /// A builder was given an inconsistent or missing setting, or a backend was asked for
    /// what it does not keep.
    #[error("invalid configuration: {reason}")]
    Config {
        /// Which setting, and what is wrong with it.
        reason: String,
        /// The underlying error, when one was raised.
        #[source]
        source: Option<Source>,
    },

    /// A call the API does not allow, whatever the configuration: a bug of the caller's
    /// (rewriting another record through a registration, say). Permanent.
    #[error("misuse: {0}")]
    Misuse(String),

    /// A question about the registry has no answer: nothing is registered under the name
    /// asked for, or nothing matches. The text says what is there instead.
    #[error("not found: {0}")]
    NotFound(String),

    /// The component was shut down.
    #[error("shut down")]
    Shutdown,
}

/// How a conflict's message shows the current item: its version and size, never its
/// (untrusted, possibly large) content.
fn describe_current(current: &Option<crate::config_item::ConfigItem>) -> String {
    match current {
        Some(item) => format!(
            "version {} ({} bytes)",
            Error::shorten(item.version.as_str()),
            item.content.len()
        ),
        None => "absent".into(),
    }
}

/// The result type of the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<std::io::Error> for Error {
    fn from(error: std::io::Error) -> Self {
        Error::Io(Shared::new(error))
    }
}

/// A constructor per variant that holds a `reason` and an optional `source`, so that a
/// construction site stays one line; [`Error::caused_by`] adds the source.
macro_rules! reason_constructors {
    ($($(#[$doc:meta])* $name:ident => $variant:ident;)*) => {
        impl Error {
            $(
                $(#[$doc])*
                pub fn $name(reason: impl Into<String>) -> Error {
                    Error::$variant {
                        reason: reason.into(),
                        source: None,
                    }
                }
            )*
        }
    };
}

reason_constructors! {
    /// An [`Error::Store`] for `reason`, without a source yet.
    store => Store;
    /// An [`Error::Unauthenticated`] for `reason`, without a source yet.
    unauthenticated => Unauthenticated;
    /// An [`Error::PermissionDenied`] for `reason`, without a source yet.
    permission_denied => PermissionDenied;
    /// An [`Error::StoreUnavailable`] for `reason`, without a source yet.
    store_unavailable => StoreUnavailable;
    /// An [`Error::RegistrationLost`] for `reason`, without a source yet.
    registration_lost => RegistrationLost;
    /// An [`Error::WatchEnded`] for `reason`, without a source yet.
    watch_ended => WatchEnded;
    /// An [`Error::Server`] for `reason`, without a source yet.
    server => Server;
    /// An [`Error::Config`] for `reason`, without a source yet.
    config => Config;
}

impl Error {
    /// This error with `cause`, the error it was made from, as its
    /// [`source`](std::error::Error::source), so that a caller can walk the chain or
    /// downcast it. The message stays as it was built (it may already quote the cause).
    /// A variant that keeps no source (see [Sources](Error#sources)) is returned as it is.
    pub fn caused_by(self, cause: impl std::error::Error + Send + Sync + 'static) -> Error {
        self.with_source(Source::from(cause))
    }

    /// [`Self::caused_by`] with a cause already shared.
    pub(crate) fn with_source(mut self, cause: Source) -> Error {
        match &mut self {
            Error::Malformed { source, .. }
            | Error::Store { source, .. }
            | Error::Unauthenticated { source, .. }
            | Error::PermissionDenied { source, .. }
            | Error::StoreUnavailable { source, .. }
            | Error::RegistrationLost { source, .. }
            | Error::WatchEnded { source, .. }
            | Error::Connect { source, .. }
            | Error::MetadataServiceMissing { source, .. }
            | Error::Rule { source, .. }
            | Error::Server { source, .. }
            | Error::Config { source, .. } => *source = Some(cause),
            _ => {}
        }
        self
    }

    /// A record that does not parse, for `reason` (no underlying error).
    pub(crate) fn malformed(what: &'static str, reason: impl Into<String>) -> Error {
        Error::Malformed {
            what,
            reason: reason.into(),
            source: None,
        }
    }

    /// A record that does not parse, with the parser's `error` as the source.
    pub(crate) fn unparsable(
        what: &'static str,
        error: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        Error::Malformed {
            what,
            reason: error.to_string(),
            source: Some(Source::from(error)),
        }
    }

    /// A short form of a possibly huge, hostile value for an error message.
    pub(crate) fn shorten(value: &str) -> String {
        const MAX: usize = 64;
        if value.chars().count() <= MAX {
            value.to_owned()
        } else {
            let head: String = value.chars().take(MAX).collect();
            format!("{head}… ({} bytes)", value.len())
        }
    }

    /// Whether the error cannot go away by retrying: the store refused our credentials
    /// ([`Error::Unauthenticated`]) or our permissions ([`Error::PermissionDenied`]), the
    /// configuration is unusable ([`Error::Config`]), or the call is a caller's bug
    /// ([`Error::Misuse`]). Whoever keeps following the store
    /// should stop and report it rather than retry.
    ///
    /// An error is never both permanent and [transient](Self::is_transient); some are
    /// neither (a malformed record, a store failure of unknown cause), and callers decide
    /// for those.
    pub fn is_permanent(&self) -> bool {
        matches!(
            self,
            Error::Unauthenticated { .. }
                | Error::PermissionDenied { .. }
                | Error::Config { .. }
                | Error::Misuse(_)
        )
    }

    /// A read that failed inside a follow, as the error that ends the follow: a broken
    /// watch (followed again) unless it is permanent.
    #[cfg(any(feature = "zookeeper", feature = "nacos"))]
    pub(crate) fn ending_follow(self) -> Error {
        if self.is_permanent() {
            self
        } else {
            Error::watch_ended(self.to_string()).caused_by(self)
        }
    }

    /// Whether retrying the same call later might succeed.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::StoreUnavailable { .. }
                | Error::Timeout { .. }
                | Error::Connect { .. }
                | Error::WatchEnded { .. }
                | Error::Contended { .. }
                | Error::MetadataUnavailable { .. }
        ) || matches!(self, Error::Rpc { status, .. } if status.code() == tonic::Code::Unavailable)
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn a_copy_is_as_transient_or_permanent_as_the_error_it_copies() {
        let timeout = Error::Timeout {
            what: "etcd list".into(),
            after: Duration::from_secs(3),
        };
        assert!(timeout.clone().is_transient());
        let refused = Error::unauthenticated("wrong password");
        assert!(refused.clone().is_permanent());
        let io = Error::from(std::io::Error::other("disk gone"));
        assert_eq!(io.clone().to_string(), io.to_string());
    }

    #[test]
    fn a_parse_failure_keeps_the_parser_error_as_its_source() {
        let parsed = serde_json::from_slice::<serde_json::Value>(b"{oops");
        let error = Error::unparsable("instance record", parsed.unwrap_err());
        let source = error.source().expect("the parser's error");
        assert!(error.to_string().contains(&source.to_string()), "{error}");
        assert!(
            Error::malformed("instance record", "empty")
                .source()
                .is_none()
        );
    }

    #[test]
    fn an_error_made_from_another_keeps_it_as_its_source_and_its_message() {
        let parsed = serde_json::from_slice::<serde_json::Value>(b"{oops").unwrap_err();
        let text = format!("read x: {parsed}");
        let error = Error::store_unavailable(text.clone()).caused_by(parsed);
        assert_eq!(error.to_string(), format!("store unavailable: {text}"));
        assert!(error.is_transient() && !error.is_permanent());
        let source = error.clone().source().map(ToString::to_string);
        let kept = error.source().expect("the parser's error");
        assert!(kept.downcast_ref::<serde_json::Error>().is_some());
        assert_eq!(source, Some(kept.to_string()));
        let refused = Error::config("bad path").caused_by(std::io::Error::other("denied"));
        assert!(refused.is_permanent());
        let io = refused.source().expect("the i/o error");
        assert!(io.downcast_ref::<std::io::Error>().is_some());
        assert!(Error::config("bad path").source().is_none());
        let disk = Error::from(std::io::Error::other("disk gone"));
        let io = disk
            .source()
            .and_then(|s| s.downcast_ref::<std::io::Error>());
        assert_eq!(io.map(ToString::to_string).as_deref(), Some("disk gone"));
    }

    #[test]
    fn a_variant_with_nothing_underneath_stays_as_it_is() {
        let error = Error::NotFound("app shop".into()).caused_by(std::io::Error::other("x"));
        assert!(error.source().is_none());
        assert_eq!(error.to_string(), "not found: app shop");
    }

    #[test]
    fn a_failed_call_gives_its_status_as_its_source() {
        let error = Error::Rpc {
            address: "h:1".into(),
            status: tonic::Status::unavailable("no leader"),
        };
        let status = error
            .source()
            .and_then(|s| s.downcast_ref::<tonic::Status>());
        assert_eq!(
            status.map(tonic::Status::code),
            Some(tonic::Code::Unavailable)
        );
        assert!(error.is_transient());
    }

    #[cfg(any(feature = "zookeeper", feature = "nacos"))]
    #[test]
    fn an_ended_follow_keeps_the_read_that_ended_it() {
        let read = Error::store_unavailable("read /a: connection lost");
        let ended = read.ending_follow();
        assert_eq!(
            ended.to_string(),
            "watch ended: store unavailable: read /a: connection lost"
        );
        let source = ended.source().and_then(|s| s.downcast_ref::<Error>());
        assert!(matches!(source, Some(Error::StoreUnavailable { .. })));
        assert!(Error::config("x").ending_follow().is_permanent());
    }

    #[test]
    fn a_misuse_is_permanent() {
        let misuse = Error::Misuse("rewrote another record".into());
        assert!(misuse.is_permanent() && !misuse.is_transient());
    }

    #[test]
    fn unavailable_metadata_keeps_the_last_failure_as_its_source() {
        let last = Error::Timeout {
            what: "metadata call".into(),
            after: Duration::from_secs(1),
        };
        let error = Error::MetadataUnavailable {
            app: "shop".into(),
            revision: "r1".into(),
            reason: last.to_string(),
            last: Some(Shared::new(last)),
        };
        let source = error.source().expect("the last failure");
        assert!(source.to_string().contains("timed out"), "{source}");
        assert!(matches!(
            source.downcast_ref::<Error>(),
            Some(Error::Timeout { .. })
        ));
    }
}
