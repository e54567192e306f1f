//! The `introspect` command-line tool's parts: opening a store from command-line
//! arguments ([`store`]), the demo ([`demo`]) and the Prometheus endpoint ([`exporter`]).
//!
//! They live in this crate, not in the `introspect` library, so that a service embedding
//! the library never builds clap, tracing-subscriber or an HTTP exporter.

#![warn(missing_docs)]

pub mod demo;
pub mod exporter;
pub mod store;
