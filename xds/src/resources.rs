//! The xDS resources of one gRPC service, built from its [`Translation`] for one kind of
//! client (pure).
//!
//! * a Listener named after the service (what a gRPC client asks for when it dials
//!   `xds:///helloworld.Greeter`), whose `api_listener` is an HttpConnectionManager taking
//!   its routes over RDS through ADS, with the router filter as its only (so last) filter;
//! * a RouteConfiguration named after the service: one virtual host (`*`) holding the
//!   translation's routes in order, each on the gRPC path and headers, to one cluster or
//!   to weighted clusters, with its retry policy and timeout;
//! * a Cluster per subset of providers the routes name (the service's own name for an
//!   untagged call's), EDS over ADS, HTTP/2 upstream, with outlier detection;
//! * a ClusterLoadAssignment per cluster, named like it.
//!
//! The two kinds of client balance differently, so weights are sent the way each honours
//! them: Envoy weighs endpoints within one locality, under the cluster's load balancer;
//! gRPC's `round_robin` ignores endpoint weights but its locality picker weighs
//! localities, so for gRPC each provider is a locality of its own, of its weight.

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
use envoy_types::pb::envoy::config::cluster::v3::OutlierDetection;
use envoy_types::pb::envoy::config::route::v3::header_matcher::HeaderMatchSpecifier;
use envoy_types::pb::envoy::config::route::v3::retry_policy::RetryHostPredicate;
use envoy_types::pb::envoy::config::route::v3::retry_policy::retry_host_predicate::ConfigType as PredicateConfig;
use envoy_types::pb::envoy::config::route::v3::route_action::{ClusterSpecifier, MaxStreamDuration};
use envoy_types::pb::envoy::config::route::v3::route_match::PathSpecifier;
use envoy_types::pb::envoy::config::route::v3::weighted_cluster::ClusterWeight;
use envoy_types::pb::envoy::config::route::v3::{
    HeaderMatcher, RetryPolicy, Route, RouteAction, RouteConfiguration, RouteMatch,
    VirtualHost, WeightedCluster,
};
use envoy_types::pb::envoy::r#type::matcher::v3::StringMatcher;
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
use envoy_types::pb::google::protobuf::Duration as ProtoDuration;
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
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::google::protobuf::{Any, UInt32Value};
use introspect::consumer::LoadBalance;
use prost::Message;

pub use crate::callable::{GRPC_PROTOCOLS, SERIALIZATION_PARAM, grpc_callable};
use crate::translate::classes::Matcher;
use crate::translate::{ClusterPlan, RoutePlan, Translation};

use crate::types::{
    CLUSTER, CLUSTER_LOAD_ASSIGNMENT, HTTP_CONNECTION_MANAGER, HTTP_PROTOCOL_OPTIONS, LISTENER,
    ROUTE_CONFIGURATION, ROUTER,
};

/// The name the HTTP filter of the router goes by.
const ROUTER_FILTER: &str = "envoy.filters.http.router";

/// The key of the upstream HTTP options among a cluster's extension protocol options.
const HTTP_OPTIONS_KEY: &str = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

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

/// Which kind of client a stream serves: they take different settings for the same
/// routing (weights, load balancers, retry conditions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Client {
    /// A proxyless gRPC client (any language).
    #[default]
    Grpc,
    /// Envoy.
    Envoy,
}

impl Client {
    /// The kind of the client a stream's `node` describes: Envoy when its user agent says
    /// so, else gRPC.
    pub fn of(node: Option<&Node>) -> Client {
        match node {
            Some(node) if node.user_agent_name.to_ascii_lowercase().contains("envoy") => {
                Client::Envoy
            }
            _ => Client::Grpc,
        }
    }
}

/// The retry conditions of a route, as each client names them: the statuses the library
/// retries a call that may not be processed twice on (a provider that declined it), and
/// for Envoy the transport failures before a request was sent.
fn retry_on(client: Client) -> &'static str {
    match client {
        Client::Grpc => "unavailable",
        Client::Envoy => "unavailable,connect-failure,refused-stream",
    }
}

/// Envoy's predicate that makes a retry go to another provider, as Dubbo's failover does.
const PREVIOUS_HOSTS: &str = "envoy.retry_host_predicates.previous_hosts";
const PREVIOUS_HOSTS_TYPE: &str =
    "type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate";

fn proto_duration(d: std::time::Duration) -> ProtoDuration {
    ProtoDuration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

fn header(name: &str, specifier: HeaderMatchSpecifier, invert: bool) -> HeaderMatcher {
    HeaderMatcher {
        name: name.to_owned(),
        invert_match: invert,
        header_match_specifier: Some(specifier),
        ..Default::default()
    }
}

fn string_match(value: &str, ignore_case: bool) -> HeaderMatchSpecifier {
    HeaderMatchSpecifier::StringMatch(StringMatcher {
        ignore_case,
        match_pattern: Some(MatchPattern::Exact(value.to_owned())),
    })
}

/// The route of `plan` in the RouteConfiguration of `service`.
fn route(service: &str, plan: &RoutePlan, client: Client) -> Route {
    let mut path = PathSpecifier::Prefix(String::new());
    let mut headers = Vec::new();
    for matcher in &plan.matchers {
        match matcher {
            Matcher::Method(m) => path = PathSpecifier::Path(format!("/{service}/{m}")),
            Matcher::Header(name, value) => {
                headers.push(header(name, string_match(value, false), false));
            }
            Matcher::HeaderTrue(name) => {
                headers.push(header(name, string_match("true", true), false));
            }
            Matcher::Absent(name) => {
                headers.push(header(name, HeaderMatchSpecifier::PresentMatch(true), true));
            }
        }
    }
    let cluster_specifier = match plan.destinations.as_slice() {
        [(cluster, _)] => ClusterSpecifier::Cluster(cluster.clone()),
        many => ClusterSpecifier::WeightedClusters(WeightedCluster {
            clusters: many
                .iter()
                .map(|(name, weight)| ClusterWeight {
                    name: name.clone(),
                    weight: Some(UInt32Value { value: *weight }),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }),
    };
    let retry_policy = (plan.policy.retries > 0).then(|| RetryPolicy {
        retry_on: retry_on(client).to_owned(),
        num_retries: Some(UInt32Value {
            value: plan.policy.retries,
        }),
        retry_host_predicate: match client {
            Client::Envoy => vec![RetryHostPredicate {
                name: PREVIOUS_HOSTS.to_owned(),
                config_type: Some(PredicateConfig::TypedConfig(Any {
                    type_url: PREVIOUS_HOSTS_TYPE.to_owned(),
                    value: Vec::new(),
                })),
            }],
            Client::Grpc => Vec::new(),
        },
        ..Default::default()
    });
    let timeout = plan.policy.timeout.map(proto_duration);
    Route {
        r#match: Some(RouteMatch {
            path_specifier: Some(path),
            headers,
            ..Default::default()
        }),
        action: Some(Action::Route(RouteAction {
            cluster_specifier: Some(cluster_specifier),
            retry_policy,
            timeout,
            // What gRPC reads as the deadline of a call that sets none (Envoy: `timeout`).
            max_stream_duration: timeout.map(|t| MaxStreamDuration {
                max_stream_duration: Some(t),
                ..Default::default()
            }),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// The RouteConfiguration of a service: any host, its routes in order.
pub fn route_configuration(translation: &Translation, client: Client) -> RouteConfiguration {
    let service = &translation.service;
    RouteConfiguration {
        name: service.clone(),
        virtual_hosts: vec![VirtualHost {
            name: service.clone(),
            domains: vec!["*".to_owned()],
            routes: translation
                .routes
                .iter()
                .map(|plan| route(service, plan, client))
                .collect(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The Cluster `plan` of `translation`: EDS over ADS, HTTP/2 to the providers, its load
/// balancer as the client has it, outlier detection from consumer-side ejection.
pub fn cluster(translation: &Translation, plan: &ClusterPlan, client: Client) -> Cluster {
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
    let lb_policy = match (client, plan.loadbalance) {
        (
            Client::Envoy,
            LoadBalance::P2c | LoadBalance::LeastActive | LoadBalance::ShortestResponse,
        ) => LbPolicy::LeastRequest,
        _ => LbPolicy::RoundRobin,
    };
    let o = &translation.outliers;
    let percent = |p: u32| Some(UInt32Value { value: p.min(100) });
    let outlier_detection = OutlierDetection {
        consecutive_5xx: Some(UInt32Value {
            value: o.consecutive_failures,
        }),
        enforcing_consecutive_5xx: percent(100),
        enforcing_consecutive_gateway_failure: percent(0),
        enforcing_success_rate: percent(0),
        failure_percentage_threshold: percent(o.failure_percent),
        enforcing_failure_percentage: percent(100),
        failure_percentage_minimum_hosts: Some(UInt32Value { value: 1 }),
        failure_percentage_request_volume: Some(UInt32Value { value: o.min_calls }),
        interval: Some(proto_duration(o.interval)),
        base_ejection_time: Some(proto_duration(o.base_ejection)),
        max_ejection_percent: percent(o.max_ejection_percent),
        ..Default::default()
    };
    Cluster {
        name: plan.name.clone(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(EdsClusterConfig {
            eds_config: Some(ads()),
            service_name: plan.name.clone(),
        }),
        lb_policy: lb_policy as i32,
        outlier_detection: Some(outlier_detection),
        typed_extension_protocol_options: [(
            HTTP_OPTIONS_KEY.to_owned(),
            pack(HTTP_PROTOCOL_OPTIONS, &http2),
        )]
        .into_iter()
        .collect(),
        ..Default::default()
    }
}

fn lb_endpoint(host: &str, port: u16, weight: u32) -> LbEndpoint {
    LbEndpoint {
        health_status: HealthStatus::Healthy as i32,
        load_balancing_weight: Some(UInt32Value { value: weight }),
        host_identifier: Some(HostIdentifier::Endpoint(EnvoyEndpoint {
            address: Some(Address {
                address: Some(AddressKind::SocketAddress(SocketAddress {
                    address: host.to_owned(),
                    port_specifier: Some(PortSpecifier::PortValue(u32::from(port))),
                    ..Default::default()
                })),
            }),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// The ClusterLoadAssignment of the cluster `plan`: its providers, each healthy (health's
/// verdicts are applied before), weighted as the client honours weights (see the module
/// docs). No provider: no locality, and calls routed to it fail.
pub fn load_assignment(plan: &ClusterPlan, client: Client) -> ClusterLoadAssignment {
    let endpoints = match client {
        Client::Envoy if !plan.members.is_empty() => vec![LocalityLbEndpoints {
            locality: Some(Locality::default()),
            lb_endpoints: plan
                .members
                .iter()
                .map(|m| lb_endpoint(&m.host, m.port, m.weight))
                .collect(),
            load_balancing_weight: Some(UInt32Value { value: 1 }),
            ..Default::default()
        }],
        Client::Envoy => Vec::new(),
        Client::Grpc => plan
            .members
            .iter()
            .map(|m| LocalityLbEndpoints {
                locality: Some(Locality {
                    sub_zone: format!("{}:{}", m.host, m.port),
                    ..Default::default()
                }),
                lb_endpoints: vec![lb_endpoint(&m.host, m.port, m.weight)],
                load_balancing_weight: Some(UInt32Value { value: m.weight }),
                ..Default::default()
            })
            .collect(),
    };
    ClusterLoadAssignment {
        cluster_name: plan.name.clone(),
        endpoints,
        ..Default::default()
    }
}

/// The service a resource named `name` belongs to: the name itself for a Listener, a
/// RouteConfiguration or the untagged cluster, the part before `/` for another cluster.
pub fn service_of(name: &str) -> &str {
    name.split_once('/').map_or(name, |(service, _)| service)
}

/// The resource of type `type_url` named `name` in `translation`, packed, for `client`;
/// `None` when there is none of that name (or the type is not served).
pub fn resource(
    type_url: &str,
    name: &str,
    translation: &Translation,
    client: Client,
) -> Option<Any> {
    let service = translation.service.as_str();
    Some(match type_url {
        LISTENER if name == service => pack(LISTENER, &listener(service)),
        ROUTE_CONFIGURATION if name == service => pack(
            ROUTE_CONFIGURATION,
            &route_configuration(translation, client),
        ),
        CLUSTER => pack(
            CLUSTER,
            &cluster(translation, translation.cluster(name)?, client),
        ),
        CLUSTER_LOAD_ASSIGNMENT => pack(
            CLUSTER_LOAD_ASSIGNMENT,
            &load_assignment(translation.cluster(name)?, client),
        ),
        _ => return None,
    })
}

/// The names of the resources of type `type_url` that `translation` holds (what a
/// wildcard subscription gets).
pub fn names(type_url: &str, translation: &Translation) -> Vec<String> {
    match type_url {
        LISTENER | ROUTE_CONFIGURATION => vec![translation.service.clone()],
        CLUSTER | CLUSTER_LOAD_ASSIGNMENT => translation
            .clusters
            .iter()
            .map(|c| c.name.clone())
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
