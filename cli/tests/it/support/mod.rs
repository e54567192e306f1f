//! The library's test support (`tests/it/support/` at the workspace root) that the tool's
//! tests reuse: the real etcd, ZooKeeper and Nacos harnesses, providers on loopback, the real
//! Dubbo peers of `interop/`, a store whose connection a test cuts, polling with a deadline.
//!
//! The tests use only part of it, hence the `dead_code` allowance.

#![allow(dead_code)]

#[path = "../../../../tests/it/support/certs.rs"]
pub mod certs;
#[path = "../../../../tests/it/support/etcd.rs"]
pub mod etcd;
#[path = "../../../../tests/it/support/faulty.rs"]
pub mod faulty;
#[path = "../../../../tests/it/support/fleet.rs"]
pub mod fleet;
#[path = "../../../../tests/it/support/nacos.rs"]
pub mod nacos;
#[path = "../../../../tests/it/support/peers.rs"]
pub mod peers;
#[path = "../../../../tests/it/support/ports.rs"]
pub mod ports;
pub mod tool;
#[path = "../../../../tests/it/support/wait.rs"]
pub mod wait;
#[path = "../../../../tests/it/support/zookeeper.rs"]
pub mod zookeeper;
