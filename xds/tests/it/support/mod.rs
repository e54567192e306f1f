//! The library's test support (`tests/it/support/` at the workspace root) that the xDS tests
//! reuse: Greeter providers on loopback, a caller counting calls through a balanced channel,
//! the ZooKeeper and Nacos harnesses, the real Dubbo peers and the governance fleet the
//! Java consumer is judged on, polling with a deadline; plus what only these tests need: a
//! scripted ADS client, Envoy, and the Python environment of the interop tests.
//!
//! The tests use only part of it, hence the `dead_code` allowance.

#![allow(dead_code)]

pub mod ads;
#[path = "../../../../tests/it/support/calls.rs"]
pub mod calls;
#[path = "../../../../tests/it/support/certs.rs"]
pub mod certs;
pub mod crash;
pub mod envoy;
#[path = "../../../../tests/it/support/etcd.rs"]
pub mod etcd;
#[cfg(feature = "zookeeper")]
#[path = "../../../../tests/it/support/examples.rs"]
pub mod examples;
#[cfg(feature = "zookeeper")]
#[path = "../../../../tests/it/support/governed.rs"]
pub mod governed;
#[path = "../../../../tests/it/support/greeter.rs"]
pub mod greeter;
#[path = "../../../../tests/it/support/nacos.rs"]
pub mod nacos;
#[cfg(feature = "zookeeper")]
#[path = "../../../../tests/it/support/peer_cases.rs"]
pub mod peer_cases;
#[cfg(feature = "zookeeper")]
#[path = "../../../../tests/it/support/peers.rs"]
pub mod peers;
#[path = "../../../../tests/it/support/ports.rs"]
pub mod ports;
pub mod process;
pub mod python;
#[path = "../../../../tests/it/support/wait.rs"]
pub mod wait;
#[path = "../../../../tests/it/support/zookeeper.rs"]
pub mod zookeeper;
