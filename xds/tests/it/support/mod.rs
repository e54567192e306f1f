//! The library's test support (`tests/it/support/` at the workspace root) that the xDS tests
//! reuse: Greeter providers on loopback, a caller counting calls through a balanced channel,
//! the ZooKeeper and Nacos harnesses and polling with a deadline; plus what only these
//! tests need: a scripted ADS client and the Python environment of the interop tests.
//!
//! The tests use only part of it, hence the `dead_code` allowance.

#![allow(dead_code)]

pub mod ads;
#[path = "../../../../tests/it/support/calls.rs"]
pub mod calls;
#[path = "../../../../tests/it/support/certs.rs"]
pub mod certs;
pub mod crash;
#[path = "../../../../tests/it/support/etcd.rs"]
pub mod etcd;
#[path = "../../../../tests/it/support/greeter.rs"]
pub mod greeter;
#[path = "../../../../tests/it/support/nacos.rs"]
pub mod nacos;
#[path = "../../../../tests/it/support/ports.rs"]
pub mod ports;
pub mod process;
pub mod python;
#[path = "../../../../tests/it/support/wait.rs"]
pub mod wait;
#[path = "../../../../tests/it/support/zookeeper.rs"]
pub mod zookeeper;
