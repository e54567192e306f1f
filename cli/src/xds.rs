//! `introspect xds`: serve the registry's gRPC services over xDS (ADS, state of the world)
//! until Ctrl-C or SIGTERM, so gRPC clients in any language (`xds:///NAME`) and Envoy can call
//! them; or, with `--explain SERVICE`, print what a client is sent for a service and why.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::Args;
use introspect::{Error, Resolver, Result};
use introspect_xds::XdsServer;

/// The arguments of `introspect xds`.
#[derive(Args, Clone, Debug)]
pub struct XdsArgs {
    /// Where to serve ADS, e.g. 127.0.0.1:18000 (port 0: any free port, printed).
    #[arg(long, value_name = "ADDR", required_unless_present = "explain")]
    pub listen: Option<SocketAddr>,
    /// Print what an xDS client is sent for SERVICE now (its routes, clusters and
    /// weights, the rule or step behind each, what cannot be expressed) and exit.
    #[arg(long, value_name = "SERVICE", conflicts_with = "listen")]
    pub explain: Option<String>,
    /// A gRPC service to follow from the start, so wildcard clients (Envoy's CDS) see it
    /// before any client names it; repeatable. Services named by clients are followed on
    /// their first request either way.
    #[arg(long = "service", value_name = "NAME")]
    pub services: Vec<String>,
    /// The consumer app every client is routed as: its `{app}.configurators` and
    /// `{app}.condition-router` apply, and conditions on `application` read it.
    #[arg(long)]
    pub consumer_app: Option<String>,
    /// The consumer's host, as rules' `addresses` match it (default: this machine's).
    #[arg(long)]
    pub consumer_host: Option<String>,
    /// A parameter of the consumer's own URL, as a condition rule's `when` side reads it,
    /// `KEY=VALUE`; repeatable.
    #[arg(long = "consumer-param", value_name = "KEY=VALUE")]
    pub consumer_params: Vec<String>,
    /// The most services followed at once (names past it do not exist for clients).
    #[arg(long, default_value_t = introspect_xds::DEFAULT_MAX_SERVICES)]
    pub max_services: usize,
    /// Server certificate chain (PEM); turns TLS on, needs --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// Private key (PEM) of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// CA (PEM) that client certificates must chain to: mutual TLS. Needs --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub client_ca: Option<PathBuf>,
}

fn read(path: &Path, flag: &str) -> Result<Vec<u8>> {
    std::fs::read(path)
        .map_err(|e| Error::config(format!("{flag} {}: {e}", path.display())).caused_by(e))
}

/// Prints what a client is sent for `service`.
async fn explain(resolver: Resolver, service: &str) -> Result<()> {
    let server = XdsServer::builder(resolver).build();
    match server.explain(service).await {
        Some(translation) => {
            let _ = write!(std::io::stdout(), "{translation}");
            Ok(())
        }
        None => Err(Error::NotFound(format!(
            "{service}: no provider of it can be called over gRPC (Triple or gRPC with \
             protobuf), or it is no service name"
        ))),
    }
}

/// Serves until Ctrl-C (or explains one service and returns).
pub async fn run(resolver: Resolver, args: &XdsArgs) -> Result<()> {
    if let Some(service) = &args.explain {
        return explain(resolver, service).await;
    }
    let Some(listen) = args.listen else {
        return Err(Error::config("xds: --listen ADDR or --explain SERVICE"));
    };
    let mut builder = XdsServer::builder(resolver)
        .services(args.services.iter().cloned())
        .max_services(args.max_services);
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        let ca = match &args.client_ca {
            Some(path) => Some(read(path, "--client-ca")?),
            None => None,
        };
        builder = builder.tls_pem(
            &read(cert, "--tls-cert")?,
            &read(key, "--tls-key")?,
            ca.as_deref(),
        );
    }
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let bound = listener.local_addr()?;
    let scheme = if args.tls_cert.is_some() {
        "https"
    } else {
        "http"
    };
    let _ = writeln!(std::io::stderr(), "xDS (ADS) at {scheme}://{bound}");
    builder
        .build()
        .serve(listener, introspect::shutdown_signal())
        .await
}
