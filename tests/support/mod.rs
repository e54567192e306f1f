//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod certs;
pub mod fleet;
pub mod hostile;
