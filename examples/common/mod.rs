//! What the Greeter examples share: the generated code, the Greeter service (plain, or with the
//! fault modes of the tests' providers), the store and metrics flags, the exit on an error.
//! The Introspect code of each role is in its example file.
//!
//! Each example uses part of it, hence the `dead_code` allowance.

#![allow(dead_code)]

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use introspect::backend::{Backend, ConnectOptions};
use introspect::metrics::{Metrics, MetricsTask};
use introspect::{EtcdOptions, EtcdStore, MemoryStore, Store};
use tonic::{Request, Response, Status};

/// Code generated from `proto/helloworld.proto`.
#[rustfmt::skip] #[path = "../../proto/generated/helloworld.rs"] pub mod pb;

use pb::greeter_server::{Greeter, GreeterServer};
use pb::{HelloReply, HelloRequest};

/// The boxed error of the examples' `main`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The interface the Greeter examples export and subscribe to.
pub const INTERFACE: &str = "helloworld.Greeter";

/// The exit of an example's `main`: success, or the error printed with its `Display` (not
/// the `Debug` a `main` returning `Result` prints) and a failure.
pub fn exit_on_error(outcome: Result<ExitCode, BoxError>) -> ExitCode {
    outcome.unwrap_or_else(|error| {
        eprintln!("error: {error}");
        ExitCode::FAILURE
    })
}

/// Prints one line on standard output, whole among those of other tasks (an output closed
/// meanwhile is ignored: the line is for whoever reads it, the call goes on).
pub fn say(line: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_fmt(line).and_then(|()| out.write_all(b"\n"));
    let _ = out.flush();
}

/// Logs to stderr, filtered by `RUST_LOG` (default: `default`, e.g. `info`).
pub fn init_tracing(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    // Colours only on a terminal: a log redirected to a file stays plain text.
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

/// Where the registry is, as the examples take it: `--registry URL` (or
/// `INTROSPECT_REGISTRY`), or etcd's `--etcd URLS` (or `INTROSPECT_ETCD`), not both.
#[derive(clap::Args, Debug)]
pub struct RegistryArgs {
    /// The registry as Dubbo names it: zookeeper://127.0.0.1:2181 (build with
    /// `--features zookeeper`), nacos://127.0.0.1:8848 (`--features nacos`),
    /// etcd://127.0.0.1:2379, memory:// (this process alone).
    #[arg(long, env = "INTROSPECT_REGISTRY", value_name = "URL")]
    pub registry: Option<String>,
    /// etcd endpoints, comma-separated (e.g. http://127.0.0.1:2379).
    #[arg(long, env = "INTROSPECT_ETCD", value_name = "URLS")]
    pub etcd: Option<String>,
}

/// The registry `args` name, connected in the background (see [`open_store`]).
pub async fn open_backend(args: &RegistryArgs) -> Result<Backend, BoxError> {
    match (&args.registry, &args.etcd) {
        (Some(_), Some(_)) => Err("give --registry or --etcd, not both".into()),
        (None, None) => Err("no registry given: pass --registry URL or --etcd URLS".into()),
        (None, Some(urls)) => Ok(Backend::from(open_store(Some(urls)).await?)),
        (Some(url), None) => {
            let options = ConnectOptions::default().with_connect_in_background(true);
            Ok(introspect::backend::connect_with(url, &options).await?)
        }
    }
}

/// etcd at `urls` (comma-separated), or the embedded store when `None`.
///
/// etcd is connected in the background: a process that starts while etcd is down starts
/// anyway (a consumer on its snapshot, a provider serving and registering once etcd
/// answers), and follows etcd when it comes up. Refused credentials still fail here.
pub async fn open_store(urls: Option<&str>) -> Result<Arc<dyn Store>, BoxError> {
    Ok(match urls {
        Some(urls) => {
            let endpoints = EtcdOptions::parse_endpoints(urls)?;
            let options = EtcdOptions::new(endpoints).with_connect_in_background(true);
            Arc::new(EtcdStore::connect(options).await?)
        }
        None => Arc::new(MemoryStore::new()),
    })
}

/// When an address is given, installs the Prometheus exporter at `http://{addr}/metrics`
/// and publishes `metrics` to it every second until the returned task is dropped.
pub async fn maybe_serve_metrics(
    addr: Option<SocketAddr>,
    metrics: Metrics,
) -> Result<Option<MetricsTask>, BoxError> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    metrics_exporter_prometheus::PrometheusBuilder::new()
        .with_http_listener(addr)
        .install()?;
    println!("metrics at http://{addr}/metrics");
    Ok(Some(metrics.spawn(Duration::from_secs(1))))
}

/// Answers `SayHello` with a greeting naming the server address it was called at.
pub struct HelloGreeter;

#[tonic::async_trait]
impl Greeter for HelloGreeter {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        Ok(Response::new(greeting(request)))
    }
}

/// `Hello NAME, from SERVER`: the request's name and the server address it was called at.
fn greeting(request: Request<HelloRequest>) -> HelloReply {
    let server = request
        .local_addr()
        .map_or_else(|| "an unknown address".to_owned(), |a| a.to_string());
    let name = request.into_inner().name;
    HelloReply {
        message: format!("Hello {name}, from {server}"),
    }
}

/// A tonic router serving the Greeter.
pub fn greeter_router() -> tonic::transport::server::Router {
    tonic::transport::Server::builder().add_service(GreeterServer::new(HelloGreeter))
}

/// The fault modes and the request log of a provider, as the tests' real peers have them
/// (the Java peer's options of the same names, `interop/README.md`), with the same output.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct FaultArgs {
    /// Answer every call MS milliseconds late (it is logged as processed first).
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub slow_ms: u64,
    /// Refuse this share of the calls (0 to 100), drawn at random, with the gRPC status
    /// UNAVAILABLE before processing them, printing `REFUSED name=NAME` for each.
    #[arg(long, value_name = "P", default_value_t = 0,
          value_parser = clap::value_parser!(u8).range(0..=100))]
    pub fail_percent: u8,
    /// Print `REQUEST name=NAME` (the request's name) for every call processed.
    #[arg(long)]
    pub log_requests: bool,
}

/// [`HelloGreeter`]'s answers, with the fault modes and the request log of [`FaultArgs`].
pub struct FaultGreeter {
    faults: FaultArgs,
}

impl FaultGreeter {
    /// A Greeter with these fault modes (none by default: it answers as [`HelloGreeter`]).
    pub fn new(faults: FaultArgs) -> Self {
        FaultGreeter { faults }
    }
}

#[tonic::async_trait]
impl Greeter for FaultGreeter {
    async fn say_hello(
        &self,
        request: Request<HelloRequest>,
    ) -> Result<Response<HelloReply>, Status> {
        let faults = &self.faults;
        let name = &request.get_ref().name;
        // Refused before it is processed, as a provider that cannot take the call now.
        if faults.fail_percent > 0 && rand::random_range(0..100u8) < faults.fail_percent {
            say(format_args!("REFUSED name={name}"));
            return Err(Status::unavailable(format!(
                "refused the call (--fail-percent {})",
                faults.fail_percent
            )));
        }
        if faults.log_requests {
            say(format_args!("REQUEST name={name}"));
        }
        if faults.slow_ms > 0 {
            tokio::time::sleep(Duration::from_millis(faults.slow_ms)).await;
        }
        Ok(Response::new(greeting(request)))
    }
}

/// A tonic router serving the Greeter with these fault modes.
pub fn fault_greeter_router(faults: FaultArgs) -> tonic::transport::server::Router {
    tonic::transport::Server::builder().add_service(GreeterServer::new(FaultGreeter::new(faults)))
}

/// Who answered a greeting: the server address a Rust greeting names (`Hello X, from ADDR`),
/// or the name a Dubbo peer's names (`Hello X from NAME`).
pub fn server_of(message: &str) -> &str {
    message.rsplit(" from ").next().unwrap_or(message)
}
