//! The library's test support (`tests/support/` at the workspace root) that the tool's
//! tests reuse: the real etcd harness, providers on loopback, polling with a deadline.
//!
//! Each test binary uses only part of it, hence the `dead_code` allowance.

#![allow(dead_code)]

#[path = "../../../tests/support/certs.rs"]
pub mod certs;
#[path = "../../../tests/support/etcd.rs"]
pub mod etcd;
#[path = "../../../tests/support/fleet.rs"]
pub mod fleet;
#[path = "../../../tests/support/wait.rs"]
pub mod wait;
