//! The type URLs this server speaks, and the ones its resources embed.

/// Listener (LDS).
pub const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
/// RouteConfiguration (RDS).
pub const ROUTE_CONFIGURATION: &str =
    "type.googleapis.com/envoy.config.route.v3.RouteConfiguration";
/// Cluster (CDS).
pub const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
/// ClusterLoadAssignment (EDS).
pub const CLUSTER_LOAD_ASSIGNMENT: &str =
    "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment";

/// The HttpConnectionManager inside a Listener's `api_listener`.
pub const HTTP_CONNECTION_MANAGER: &str = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
/// The router HTTP filter's config.
pub const ROUTER: &str = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router";
/// A cluster's upstream HTTP options (HTTP/2 for gRPC).
pub const HTTP_PROTOCOL_OPTIONS: &str =
    "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

/// The four resource types served, in the order a client usually asks for them.
pub const SERVED: [&str; 4] = [
    LISTENER,
    ROUTE_CONFIGURATION,
    CLUSTER,
    CLUSTER_LOAD_ASSIGNMENT,
];

/// Whether a response for `type_url` must list every resource that exists among the
/// subscribed names, so that a name left out means "does not exist" (LDS and CDS in the
/// state-of-the-world protocol). For RDS and EDS a name left out says nothing.
pub fn omission_means_absent(type_url: &str) -> bool {
    type_url == LISTENER || type_url == CLUSTER
}

/// Whether an empty first request for `type_url` asks for every resource (a wildcard):
/// LDS and CDS only.
pub fn wildcard_allowed(type_url: &str) -> bool {
    omission_means_absent(type_url)
}
