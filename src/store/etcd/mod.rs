//! The etcd store: the same semantics across machines, via `etcd-client`.
//!
//! Each [`Store`](super::Store) call is one etcd request (a compare-and-swap is one
//! transaction) under a deadline, so a stalled cluster shows up as
//! [`Error::Timeout`](crate::error::Error::Timeout) rather than a hang. Errors are sorted for the
//! layers above: a lost or refused connection, a missing leader or a stalled request are
//! transient ([`Error::StoreUnavailable`](crate::error::Error::StoreUnavailable),
//! [`Error::Timeout`](crate::error::Error::Timeout)); refused credentials and permissions are
//! permanent ([`Error::Unauthenticated`](crate::error::Error::Unauthenticated),
//! [`Error::PermissionDenied`](crate::error::Error::PermissionDenied)).
//!
//! Several endpoints are the members of one cluster: each gets its own client, requests go
//! to one member and fail over to the next when it cannot answer, so a killed or
//! partitioned member costs a retry, not a failed call (`members`).
//!
//! A watch is one etcd watch stream. A task forwards its batches to the
//! [`Watch`](super::Watch); when the stream breaks it resumes on a live member from the next
//! revision (no gap). It ends the watch with [`Error::Compacted`](crate::error::Error::Compacted)
//! when etcd reports that the history asked for is gone, with
//! [`Error::WatchEnded`](crate::error::Error::WatchEnded) when no member takes it back in time, and
//! cancels the etcd watcher as soon as the [`Watch`](super::Watch) is dropped.
//!
//! Layout: `options` (what to connect to and how), `client` (the store's handle: connect,
//! deadlines), `members` (one client per member, fail-over), `requests` (the
//! [`Store`](super::Store) calls), `range` and `pages` (prefix reads in pages pinned to one
//! revision, sized by bytes), `watch` (watch streams and their resumption), `convert`
//! (etcd's records into the store's), `errors` (sorting etcd's errors).

mod client;
mod convert;
mod errors;
mod members;
mod options;
mod pages;
mod range;
mod requests;
mod watch;

pub use client::EtcdStore;
pub use options::EtcdOptions;
