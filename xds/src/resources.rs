//! The four xDS resources of one gRPC service, built from its endpoints (pure).
//!
//! Every resource is named after the service (`helloworld.Greeter`), which is what a gRPC
//! client asks for when it dials `xds:///helloworld.Greeter`:
//!
//! * a Listener whose `api_listener` is an HttpConnectionManager taking its routes over
//!   RDS through ADS, with the router filter as its only (so last) HTTP filter;
//! * a RouteConfiguration with one virtual host (`*`) sending every path to the cluster;
//! * a Cluster of type EDS over ADS, round robin, speaking HTTP/2 upstream;
//! * a ClusterLoadAssignment with one locality holding every instance that serves the
//!   service over gRPC.

use std::collections::BTreeMap;

use introspect::governance::{RouteParams, effective_weight};

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::cluster::v3::cluster::{
    ClusterDiscoveryType, DiscoveryType, EdsClusterConfig, LbPolicy,
};
use envoy_types::pb::envoy::config::core::v3::address::Address as AddressKind;
use envoy_types::pb::envoy::config::core::v3::config_source::ConfigSourceSpecifier as ConfigSpecifier;
use envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier;
use envoy_types::pb::envoy::config::core::v3::{
    Address, AggregatedConfigSource, ApiVersion, ConfigSource, HealthStatus,
    Http2ProtocolOptions, Locality, SocketAddress,
};
use envoy_types::pb::envoy::config::endpoint::v3::lb_endpoint::HostIdentifier;
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint as EnvoyEndpoint, LbEndpoint, LocalityLbEndpoints,
};
use envoy_types::pb::envoy::config::listener::v3::{ApiListener, Listener};
use envoy_types::pb::envoy::config::route::v3::route::Action;
use envoy_types::pb::envoy::config::route::v3::route_action::ClusterSpecifier;
use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
use envoy_types::pb::envoy::config::route::v3::{
    Route, RouteAction, RouteConfiguration, RouteMatch, VirtualHost,
};
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::RouteSpecifier;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_filter::ConfigType;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, Rds,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::HttpProtocolOptions;
use envoy_types::pb::envoy::extensions::upstreams::http::v3::http_protocol_options::explicit_http_config::ProtocolConfig;
use envoy_types::pb::envoy::extensions::upstreams::http::v3::http_protocol_options::{
    ExplicitHttpConfig, UpstreamProtocolOptions,
};
use envoy_types::pb::google::protobuf::{Any, UInt32Value};
use introspect::Endpoint;
use prost::Message;

use crate::types::{
    CLUSTER, CLUSTER_LOAD_ASSIGNMENT, HTTP_CONNECTION_MANAGER, HTTP_PROTOCOL_OPTIONS, LISTENER,
    ROUTE_CONFIGURATION, ROUTER,
};

/// The protocols a gRPC client can speak to: Dubbo's Triple and plain gRPC.
pub const GRPC_PROTOCOLS: [&str; 2] = ["tri", "grpc"];

/// The service parameter naming the serialization (Dubbo's `serialization`).
pub const SERIALIZATION_PARAM: &str = "serialization";

/// The name the HTTP filter of the router goes by.
const ROUTER_FILTER: &str = "envoy.filters.http.router";

/// The key of the upstream HTTP options among a cluster's extension protocol options.
const HTTP_OPTIONS_KEY: &str = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

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

/// Wraps a message as an `Any` of `type_url`.
pub fn pack(type_url: &str, message: &impl Message) -> Any {
    Any {
        type_url: type_url.to_owned(),
        value: message.encode_to_vec(),
    }
}

/// A config source meaning "over the same ADS stream".
fn ads() -> ConfigSource {
    ConfigSource {
        resource_api_version: ApiVersion::V3 as i32,
        config_source_specifier: Some(ConfigSpecifier::Ads(AggregatedConfigSource {})),
        ..Default::default()
    }
}

/// The Listener of `service`: an `api_listener` HttpConnectionManager taking the route
/// configuration named after the service over ADS, router filter last.
pub fn listener(service: &str) -> Listener {
    let manager = HttpConnectionManager {
        stat_prefix: service.to_owned(),
        route_specifier: Some(RouteSpecifier::Rds(Rds {
            config_source: Some(ads()),
            route_config_name: service.to_owned(),
        })),
        http_filters: vec![HttpFilter {
            name: ROUTER_FILTER.to_owned(),
            config_type: Some(ConfigType::TypedConfig(pack(ROUTER, &Router::default()))),
            ..Default::default()
        }],
        ..Default::default()
    };
    Listener {
        name: service.to_owned(),
        api_listener: Some(ApiListener {
            api_listener: Some(pack(HTTP_CONNECTION_MANAGER, &manager)),
        }),
        ..Default::default()
    }
}

/// The RouteConfiguration of `service`: any host, any path, to the service's cluster.
pub fn route_configuration(service: &str) -> RouteConfiguration {
    RouteConfiguration {
        name: service.to_owned(),
        virtual_hosts: vec![VirtualHost {
            name: service.to_owned(),
            domains: vec!["*".to_owned()],
            routes: vec![Route {
                r#match: Some(RouteMatch {
                    path_specifier: Some(PathSpecifier::Prefix(String::new())),
                    ..Default::default()
                }),
                action: Some(Action::Route(RouteAction {
                    cluster_specifier: Some(ClusterSpecifier::Cluster(service.to_owned())),
                    ..Default::default()
                })),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The Cluster of `service`: EDS over ADS, round robin, HTTP/2 to the instances.
pub fn cluster(service: &str) -> Cluster {
    let http2 = HttpProtocolOptions {
        upstream_protocol_options: Some(UpstreamProtocolOptions::ExplicitHttpConfig(
            ExplicitHttpConfig {
                protocol_config: Some(ProtocolConfig::Http2ProtocolOptions(
                    Http2ProtocolOptions::default(),
                )),
            },
        )),
        ..Default::default()
    };
    Cluster {
        name: service.to_owned(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(EdsClusterConfig {
            eds_config: Some(ads()),
            service_name: service.to_owned(),
        }),
        lb_policy: LbPolicy::RoundRobin as i32,
        typed_extension_protocol_options: [(
            HTTP_OPTIONS_KEY.to_owned(),
            pack(HTTP_PROTOCOL_OPTIONS, &http2),
        )]
        .into_iter()
        .collect(),
        ..Default::default()
    }
}

/// The ClusterLoadAssignment of `service`: one locality of weight 1 holding one endpoint
/// per distinct address among the gRPC-callable `endpoints`, each healthy (the catalog
/// gives the subscription's healthy view: what health sets aside is left out), routed and weighted as an Introspect or Dubbo Java
/// consumer routes an untagged call: no disabled or tagged provider, each weighed with
/// warm-up, none of weight 0 while another weighs more.
pub fn load_assignment(service: &str, endpoints: &[Endpoint]) -> ClusterLoadAssignment {
    load_assignment_at(service, endpoints, now_ms())
}

/// [`load_assignment`] with the clock at `now_ms` (ms since the epoch).
pub fn load_assignment_at(
    service: &str,
    endpoints: &[Endpoint],
    now_ms: i64,
) -> ClusterLoadAssignment {
    let lb_endpoints = routed_weights(endpoints, now_ms)
        .into_iter()
        .map(|((host, port), weight)| LbEndpoint {
            health_status: HealthStatus::Healthy as i32,
            load_balancing_weight: Some(UInt32Value { value: weight }),
            host_identifier: Some(HostIdentifier::Endpoint(EnvoyEndpoint {
                address: Some(Address {
                    address: Some(AddressKind::SocketAddress(SocketAddress {
                        address: host,
                        port_specifier: Some(PortSpecifier::PortValue(u32::from(port))),
                        ..Default::default()
                    })),
                }),
                ..Default::default()
            })),
            ..Default::default()
        })
        .collect();
    ClusterLoadAssignment {
        cluster_name: service.to_owned(),
        endpoints: vec![LocalityLbEndpoints {
            locality: Some(Locality::default()),
            lb_endpoints,
            load_balancing_weight: Some(UInt32Value { value: 1 }),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The addresses an xDS client's calls may go to, with their weights: the gRPC-callable
/// endpoints an untagged call is routed to (no `disabled` provider, no tagged one: an xDS
/// client sends no `dubbo.tag`), each once, weighted by the same effective weight as a
/// balanced channel's (`weight`, warm-up from the instance's `timestamp`). Envoy and gRPC
/// take no weight of 0, so providers of weight 0 are left out while another weighs more,
/// and all weigh 1 when none does (Java's uniform pick).
fn routed_weights(endpoints: &[Endpoint], now_ms: i64) -> BTreeMap<(String, u16), u32> {
    let mut by_address: BTreeMap<(String, u16), u32> = BTreeMap::new();
    for e in endpoints.iter().filter(|e| grpc_callable(e)) {
        let route = RouteParams::of(e);
        if !route.enabled || route.tag.is_some() {
            continue;
        }
        let weight = effective_weight(route.weight, route.warmup_ms, route.timestamp_ms, now_ms);
        let host = e.host.trim_start_matches('[').trim_end_matches(']');
        by_address
            .entry((host.to_owned(), e.port))
            .or_insert(weight);
    }
    if by_address.values().all(|w| *w == 0) {
        by_address.values_mut().for_each(|w| *w = 1);
    } else {
        by_address.retain(|_, w| *w > 0);
    }
    by_address
}

/// The wall clock in ms since the epoch, as providers write their start time.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The resource of type `type_url` for `service` with these endpoints, packed; `None` for a
/// type this server does not serve.
pub fn resource(type_url: &str, service: &str, endpoints: &[Endpoint]) -> Option<Any> {
    Some(match type_url {
        LISTENER => pack(LISTENER, &listener(service)),
        ROUTE_CONFIGURATION => pack(ROUTE_CONFIGURATION, &route_configuration(service)),
        CLUSTER => pack(CLUSTER, &cluster(service)),
        CLUSTER_LOAD_ASSIGNMENT => pack(
            CLUSTER_LOAD_ASSIGNMENT,
            &load_assignment(service, endpoints),
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use introspect::ServiceInfo;

    use super::*;

    fn at(port: u16, protocol: &str, params: &[(&str, &str)]) -> Endpoint {
        let mut service = ServiceInfo::new("helloworld.Greeter").with_protocol(protocol);
        for (k, v) in params {
            service = service.with_param(*k, *v);
        }
        Endpoint {
            app: "greeter".into(),
            host: "127.0.0.1".into(),
            port,
            instance_port: port,
            protocol: protocol.into(),
            revision: "r".into(),
            service: Arc::new(service),
            timestamp: 0,
        }
    }

    #[test]
    fn only_grpc_protocols_with_protobuf_are_callable() {
        assert!(grpc_callable(&at(1, "tri", &[])));
        assert!(grpc_callable(&at(
            1,
            "GRPC",
            &[("serialization", "protobuf")]
        )));
        assert!(!grpc_callable(&at(
            1,
            "tri",
            &[("serialization", "hessian2")]
        )));
        assert!(!grpc_callable(&at(1, "dubbo", &[])));
        assert!(!grpc_callable(&at(1, "rest", &[])));
    }

    fn weights(endpoints: &[Endpoint], now_ms: i64) -> Vec<(u32, u32)> {
        let cla = load_assignment_at("helloworld.Greeter", endpoints, now_ms);
        assert_eq!(cla.cluster_name, "helloworld.Greeter");
        assert_eq!(cla.endpoints.len(), 1);
        cla.endpoints[0]
            .lb_endpoints
            .iter()
            .map(|e| {
                let Some(HostIdentifier::Endpoint(ep)) = &e.host_identifier else {
                    panic!("an endpoint")
                };
                let Some(AddressKind::SocketAddress(s)) =
                    ep.address.as_ref().and_then(|a| a.address.as_ref())
                else {
                    panic!("a socket address")
                };
                let Some(PortSpecifier::PortValue(p)) = s.port_specifier else {
                    panic!("a port")
                };
                (p, e.load_balancing_weight.as_ref().unwrap().value)
            })
            .collect()
    }

    #[test]
    fn the_load_assignment_holds_each_callable_routed_address_once_weighted_as_java() {
        let endpoints = vec![
            at(2, "tri", &[("weight", "7")]),
            at(1, "tri", &[]),
            at(1, "grpc", &[]),
            at(3, "dubbo", &[]),
            at(4, "tri", &[("weight", "zero")]),
            at(5, "tri", &[("weight", "0")]),
            at(6, "tri", &[("dubbo.tag", "gray")]),
            at(7, "tri", &[("disabled", "true")]),
            at(8, "tri", &[("weight", "-3")]),
        ];
        // Weight 0 and negative ones are left out; a weight that does not parse is 100.
        assert_eq!(weights(&endpoints, 0), vec![(1, 100), (2, 7), (4, 100)]);
        // All of weight 0: all alike.
        let none = vec![
            at(1, "tri", &[("weight", "0")]),
            at(2, "tri", &[("weight", "0")]),
        ];
        assert_eq!(weights(&none, 0), vec![(1, 1), (2, 1)]);
    }

    #[test]
    fn a_provider_warming_up_weighs_less() {
        let started = 1_700_000_000_000_i64;
        let mut warming = at(1, "tri", &[("weight", "300")]);
        warming.timestamp = started as u64;
        let endpoints = vec![warming, at(2, "tri", &[])];
        assert_eq!(
            weights(&endpoints, started + 60_000),
            vec![(1, 30), (2, 100)]
        );
        assert_eq!(
            weights(&endpoints, started + 600_000),
            vec![(1, 300), (2, 100)]
        );
    }

    #[test]
    fn the_listener_routes_over_ads_with_the_router_last() {
        let l = listener("helloworld.Greeter");
        let any = l.api_listener.unwrap().api_listener.unwrap();
        assert_eq!(any.type_url, HTTP_CONNECTION_MANAGER);
        let hcm = HttpConnectionManager::decode(any.value.as_slice()).unwrap();
        assert_eq!(hcm.http_filters.last().unwrap().name, ROUTER_FILTER);
        let Some(RouteSpecifier::Rds(rds)) = hcm.route_specifier else {
            panic!("routes over RDS")
        };
        assert_eq!(rds.route_config_name, "helloworld.Greeter");
        assert!(matches!(
            rds.config_source.unwrap().config_source_specifier,
            Some(ConfigSpecifier::Ads(_))
        ));
    }

    #[test]
    fn the_cluster_is_eds_over_ads_round_robin() {
        let c = cluster("helloworld.Greeter");
        assert_eq!(
            c.cluster_discovery_type,
            Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32))
        );
        assert_eq!(c.lb_policy, LbPolicy::RoundRobin as i32);
        assert_eq!(
            c.eds_cluster_config.unwrap().service_name,
            "helloworld.Greeter"
        );
    }
}
