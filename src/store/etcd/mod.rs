//! The etcd store: the same semantics across machines, via `etcd-client`.
//!
//! Each [`Store`](super::Store) call is one etcd request (a compare-and-swap is one
//! transaction) under a deadline, so a stalled cluster shows up as
//! [`Error::Timeout`](crate::Error::Timeout) rather than a hang. Errors are sorted for the
//! layers above: a lost or refused connection, a missing leader or a stalled request are
//! transient ([`Error::StoreUnavailable`](crate::Error::StoreUnavailable),
//! [`Error::Timeout`](crate::Error::Timeout)); refused credentials and permissions are
//! permanent ([`Error::Unauthenticated`](crate::Error::Unauthenticated),
//! [`Error::PermissionDenied`](crate::Error::PermissionDenied)).
//!
//! A watch is one etcd watch stream. A task forwards its batches to the
//! [`Watch`](super::Watch); it ends the watch with [`Error::Compacted`](crate::Error::Compacted)
//! when etcd reports that the history asked for is gone, with
//! [`Error::WatchEnded`](crate::Error::WatchEnded) when the stream fails or etcd cancels it,
//! and cancels the etcd watcher as soon as the [`Watch`](super::Watch) is dropped.
//!
//! Layout: [`options`] (what to connect to and how), `client` (the connection and its
//! deadlines), `requests` (the [`Store`](super::Store) calls), `watch` (watch streams),
//! `convert` (etcd's records into the store's), `errors` (sorting etcd's errors).

mod client;
mod convert;
mod errors;
mod options;
mod requests;
mod watch;

pub use client::EtcdStore;
pub use options::EtcdOptions;
