//! The xDS server's integration tests, one binary: the protocol against a scripted ADS
//! client, TLS, the registries behind it, real clients (Python `grpcio`, Envoy), and both
//! routed by the fleet's rules side by side with a real Dubbo Java consumer
//! (`governed`, feature `zookeeper`).

mod envoy;
#[cfg(feature = "zookeeper")]
mod governed;
mod nacos;
mod per_node;
mod protocol;
mod python_grpc;
mod support;
mod tls;
mod zookeeper;
