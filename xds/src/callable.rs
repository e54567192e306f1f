//! Which endpoints a gRPC client can call: those exported over Triple or gRPC, serialized
//! with protobuf.

use introspect::Endpoint;

/// The protocols a gRPC client can speak to: Dubbo's Triple and plain gRPC.
pub const GRPC_PROTOCOLS: [&str; 2] = ["tri", "grpc"];

/// The service parameter naming the serialization (Dubbo's `serialization`).
pub const SERIALIZATION_PARAM: &str = "serialization";

/// Whether a gRPC client can call `endpoint`: exported over Triple or gRPC, serialized with
/// protobuf (or no serialization named, which for these protocols means protobuf). A Java
/// interface over Triple with Hessian, say, is not.
pub fn grpc_callable(endpoint: &Endpoint) -> bool {
    let protocol = endpoint.protocol.to_ascii_lowercase();
    if !GRPC_PROTOCOLS.contains(&protocol.as_str()) {
        return false;
    }
    match endpoint.params().get(SERIALIZATION_PARAM) {
        None => true,
        Some(s) => s.is_empty() || s.eq_ignore_ascii_case("protobuf"),
    }
}
