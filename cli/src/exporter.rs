//! The Prometheus endpoint behind `--metrics ADDR`: `metrics-exporter-prometheus` installed
//! as the process's metrics recorder, serving `GET /metrics` over HTTP. The library
//! publishes into it (`introspect::metrics::Metrics::spawn`).

use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use introspect::{Error, Result};
use metrics_exporter_prometheus::PrometheusBuilder;

/// How often the tool publishes the library's stats into the exporter.
pub const PUBLISH_INTERVAL: Duration = Duration::from_millis(500);

/// Installs the exporter serving `http://{addr}/metrics` and returns the address it serves
/// at. Port 0 picks a free port first (the exporter does not report the port it bound).
/// Needs a tokio runtime; fails when a recorder is already installed in this process.
pub fn install(addr: SocketAddr) -> Result<SocketAddr> {
    let addr = if addr.port() == 0 {
        let probe = TcpListener::bind(addr)?;
        probe.local_addr()?
    } else {
        addr
    };
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .install()
        .map_err(|e| Error::config(format!("metrics endpoint at {addr}: {e}")).caused_by(e))?;
    Ok(addr)
}
