//! The `introspect` command-line tool's parts: opening a store from command-line
//! arguments ([`store`]), the demo ([`demo`]), the Prometheus endpoint ([`exporter`]), and
//! what more than one command shows: revisions and their differences ([`revision`]),
//! resolving with unreadable apps named ([`unreadable`]) and the JSON shapes ([`json`]).
//!
//! They live in this crate, not in the `introspect` library, so that a service embedding
//! the library never builds clap, tracing-subscriber or an HTTP exporter.

#![warn(missing_docs)]

pub mod demo;
pub mod exporter;
pub mod json;
pub mod revision;
pub mod store;
pub mod unreadable;
