//! The xDS server's integration tests, one binary: the protocol against a scripted ADS
//! client, TLS, the registries behind it, and real clients (Python `grpcio`, Envoy).

mod envoy;
mod nacos;
mod protocol;
mod python_grpc;
mod support;
mod tls;
mod zookeeper;
