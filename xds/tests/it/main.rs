//! The xDS server's integration tests, one binary: the protocol against a scripted ADS
//! client, TLS, the registries behind it, real clients (Python `grpcio`, Envoy), and both
//! routed by the fleet's rules side by side with a real Dubbo Java consumer
//! (`side_by_side`, feature `zookeeper`).

mod envoy;
mod nacos;
mod per_node;
mod protocol;
mod python_grpc;
#[cfg(feature = "zookeeper")]
mod side_by_side;
mod support;
mod tls;
mod zookeeper;
