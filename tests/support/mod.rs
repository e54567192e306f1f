//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod flaky;
pub mod fleet;
pub mod records;
