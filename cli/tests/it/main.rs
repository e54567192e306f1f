//! The tool's integration tests, one binary: each module is one area of the tool, run
//! against real registries and peers where it needs them (see `support`).

mod browser;
mod cli;
mod console;
mod demo;
mod messages;
mod metrics;
mod misplaced;
mod registries;
mod rules;
mod support;
mod xds;
