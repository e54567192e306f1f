//! The `introspect` command-line tool's parts: opening a store from command-line
//! arguments ([`store`]), the demo ([`demo`]), the Prometheus endpoint ([`exporter`]), the
//! live web console ([`console`]), and what both the commands and the console show:
//! revisions and their differences ([`revision`]), consumers and what they route to
//! ([`consumers`]), resolving with unreadable apps named
//! ([`unreadable`]) and the JSON shapes ([`json`]); and reading, checking and writing
//! governance rules ([`rule`]).
//!
//! They live in this crate, not in the `introspect` library, so that a service embedding
//! the library never builds clap, tracing-subscriber, an HTTP exporter or the console's
//! web server.

#![warn(missing_docs)]

pub mod console;
pub mod consumers;
pub mod demo;
pub mod exporter;
pub mod json;
pub mod revision;
pub mod rule;
pub mod store;
pub mod unreadable;
