//! Helpers shared by the integration tests (`mod support;` in a test file).
//!
//! Each test binary uses only part of it, hence the `dead_code` allowance.

#![allow(dead_code)]

pub mod calls;
pub mod certs;
pub mod etcd;
pub mod etcd_cluster;
pub mod examples;
pub mod faulty;
pub mod fleet;
pub mod governed;
pub mod greeter;
pub mod hostile;
pub mod killable;
pub mod logs;
pub mod markdown;
#[cfg(feature = "nacos")]
pub mod nacos;
pub mod peer_cases;
pub mod peers;
pub mod ports;
pub mod proxy;
pub mod published;
pub mod records;
pub mod rules;
pub mod wait;
#[cfg(feature = "zookeeper")]
pub mod zookeeper;
