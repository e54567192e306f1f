//! The fleet every benchmark measures: one app exporting 8 interfaces over 5 protocols, with
//! the parameters a real Dubbo provider URL carries (about 1 KB per URL), in a few
//! configuration variants (one revision each).
//!
//! Shared by the scale harness and the micro-benchmarks through `#[path]` modules.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use introspect::model::ProtocolPort;
use introspect::model::keys;
use introspect::{Provider, ServiceInfo, ServiceInstance, Store};

/// The app every instance belongs to.
pub const APP: &str = "shop-orders";

/// The interfaces it exports.
pub const INTERFACES: [&str; 8] = [
    "com.example.shop.order.OrderService",
    "com.example.shop.order.CartService",
    "com.example.shop.order.PaymentService",
    "com.example.shop.order.InventoryService",
    "com.example.shop.order.ShippingService",
    "com.example.shop.order.CustomerService",
    "com.example.shop.order.CatalogService",
    "com.example.shop.order.PricingService",
];

/// The protocols each interface is exported with.
pub const PROTOCOLS: [&str; 5] = ["tri", "dubbo", "grpc", "rest", "http"];

/// The host of every instance: loopback only. Real MetadataService servers listen on it,
/// and the resolver calls an instance's MetadataService at its host.
pub const HOST: &str = "127.0.0.1";

const VERBS: [&str; 14] = [
    "create", "get", "list", "update", "delete", "search", "count", "export", "import", "validate",
    "archive", "restore", "watch", "batchGet",
];

/// The method list of an interface: `createOrder,getOrder,...` (what Dubbo puts under
/// `methods`).
fn methods(interface: &str) -> String {
    let noun = interface
        .rsplit('.')
        .next()
        .unwrap_or(interface)
        .trim_end_matches("Service");
    VERBS
        .iter()
        .flat_map(|verb| [format!("{verb}{noun}"), format!("{verb}{noun}s")])
        .collect::<Vec<_>>()
        .join(",")
}

/// The service parameters of `interface` in configuration `variant`: everything a Dubbo
/// provider URL carries except the volatile per-process parameters. Variants differ only in
/// `weight`, so each variant is one revision.
pub fn service_params(interface: &str, protocol: &str, variant: usize) -> BTreeMap<String, String> {
    let pairs = [
        ("application", APP.to_owned()),
        ("interface", interface.to_owned()),
        ("methods", methods(interface)),
        ("side", "provider".into()),
        ("release", "3.3.0".into()),
        ("dubbo", "2.0.2".into()),
        ("deprecated", "false".into()),
        ("dynamic", "true".into()),
        ("generic", "false".into()),
        ("timeout", "3000".into()),
        ("retries", "2".into()),
        ("loadbalance", "random".into()),
        ("cluster", "failover".into()),
        ("weight", (100 + variant).to_string()),
        ("serialization", "hessian2".into()),
        ("prefer.serialization", "fastjson2,hessian2".into()),
        ("threads", "200".into()),
        ("threadpool", "fixed".into()),
        ("executor-management-mode", "isolation".into()),
        ("service-name-mapping", "true".into()),
        ("metadata-type", "local".into()),
        ("validation", "true".into()),
        ("payload", "8388608".into()),
        ("revision", "1.4.2".into()),
        (
            "server",
            if protocol == "rest" {
                "netty"
            } else {
                "netty4"
            }
            .into(),
        ),
    ];
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// The 8 × 5 services of configuration `variant`, on the instance's ports.
pub fn services(variant: usize) -> Vec<ServiceInfo> {
    let mut all = Vec::with_capacity(INTERFACES.len() * PROTOCOLS.len());
    for interface in INTERFACES {
        for protocol in PROTOCOLS {
            let mut service = ServiceInfo::new(interface).with_protocol(protocol);
            service.params = service_params(interface, protocol, variant);
            all.push(service);
        }
    }
    all
}

/// The (fake) RPC port of instance `i`, distinct for i < 40,000: nothing listens there and
/// nothing calls it. Instance keys are `/services/{app}/{host}:{port}`, so a fleet on one
/// loopback host needs one port per instance.
pub fn port(i: usize) -> u16 {
    u16::try_from(20_000 + i).expect("fewer than 40,000 instances")
}

/// A real provider of configuration `variant` serving MetadataService on its own loopback
/// port. Its own record is removed from `store`: it only serves metadata, synthetic
/// instance records point at it.
pub async fn start_metadata_server(store: &Arc<dyn Store>, variant: usize) -> Provider {
    start_metadata_server_on(
        store,
        variant,
        "127.0.0.1:0".parse().expect("loopback address"),
    )
    .await
}

/// [`start_metadata_server`] listening on `address`.
pub async fn start_metadata_server_on(
    store: &Arc<dyn Store>,
    variant: usize,
    address: std::net::SocketAddr,
) -> Provider {
    let mut builder = Provider::builder(APP, store.clone())
        .serve_metadata_on(address)
        .lease_ttl(Duration::from_secs(600));
    for service in services(variant) {
        builder = builder.export(service);
    }
    let provider = builder.start().await.expect("metadata server starts");
    let me = provider.instance().await;
    introspect::backend::kv::registry::Registry::new(
        store.clone(),
        Default::default(),
        Default::default(),
    )
    .deregister(APP, &me.host, me.port)
    .await
    .expect("own record removed");
    provider
}

/// Instance record `i` of the revision `template` (a real provider's record): port
/// [`port`]`(i)`, every protocol on that port, and the MetadataService still at the
/// template's real server (`dubbo.metadata-service.url-params`), so that metadata calls
/// really go over gRPC.
pub fn synthetic(template: &ServiceInstance, i: usize) -> ServiceInstance {
    synthetic_on(template, port(i))
}

/// [`synthetic`] at port `port` (one where something listens, say).
pub fn synthetic_on(template: &ServiceInstance, port: u16) -> ServiceInstance {
    let mut instance = template.clone();
    instance.host = HOST.to_owned();
    instance.port = port;
    let endpoints: Vec<ProtocolPort> = template
        .protocol_ports()
        .into_iter()
        .map(|p| ProtocolPort {
            port,
            protocol: p.protocol,
        })
        .collect();
    instance.metadata.insert(
        keys::ENDPOINTS.into(),
        serde_json::to_string(&endpoints).expect("endpoints serialize"),
    );
    instance
}
