//! The SDK's clients (`nacos-sdk`: Nacos 2.x gRPC, naming and config), built with the
//! settings this crate needs, and the SDK's errors sorted into the crate's.
//!
//! Settings, and why:
//!
//! * `env_first(false)`: the SDK reads its settings (server address, namespace,
//!   credentials) from `NACOS_CLIENT_*` environment variables first unless told not to;
//!   here they come from [`NacosOptions`] alone.
//! * `naming_push_empty_protection(false)`: the SDK would drop a push that empties an app,
//!   so an app whose last instance went would never be seen empty; the resolver's own
//!   protections (above the seam, the same on every backend) decide instead.
//! * `load_cache_at_start(false)` and a cache directory the user chooses (default: a
//!   directory of this process under the system's temporary directory, removed when the
//!   backend goes), not `~/nacos`.
//!
//! What remains (the SDK offers no switch): it loads a `.env` file from the working
//! directory (or a parent) into the process environment the first time it parses a server
//! address, it runs its I/O and timers on a runtime of its own (one thread,
//! `nacos-client-thread-pool`), and it logs every push at `info` under the `nacos_sdk`
//! target. Its clients have no shutdown: a client dropped with nothing registered or
//! subscribed closes its connection once its background tasks let go of it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use nacos_sdk::api::config::{ConfigService, ConfigServiceBuilder};
use nacos_sdk::api::error::Error as SdkError;
use nacos_sdk::api::naming::{NamingService, NamingServiceBuilder};
use nacos_sdk::api::props::ClientProps;
use tokio::sync::OnceCell;

use super::http::HttpReader;
use super::options::NacosOptions;
use crate::error::{Error, Result};

/// A cache directory made for one backend, removed with it.
#[derive(Debug)]
pub(super) struct CacheDir {
    path: PathBuf,
    owned: bool,
}

impl CacheDir {
    /// The user's directory, or a fresh one of this process under the temporary directory.
    pub(super) fn for_options(options: &NacosOptions) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        match &options.cache_dir {
            Some(path) => CacheDir {
                path: path.clone(),
                owned: false,
            },
            None => CacheDir {
                path: std::env::temp_dir().join(format!(
                    "introspect-nacos-{}-{}",
                    std::process::id(),
                    NEXT.fetch_add(1, Ordering::Relaxed)
                )),
                owned: true,
            },
        }
    }

    /// The directory.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for CacheDir {
    fn drop(&mut self) {
        if self.owned {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Builds the SDK's clients for one backend.
#[derive(Clone, Debug)]
pub(super) struct Connector {
    options: NacosOptions,
    cache: Arc<CacheDir>,
}

impl Connector {
    pub(super) fn new(options: NacosOptions) -> Self {
        let cache = Arc::new(CacheDir::for_options(&options));
        Connector { options, cache }
    }

    pub(super) fn options(&self) -> &NacosOptions {
        &self.options
    }

    fn props(&self, app_name: &str) -> ClientProps {
        let mut props = ClientProps::new()
            .server_addr(self.options.servers.join(","))
            .namespace(self.options.namespace.clone())
            .app_name(app_name)
            .env_first(false)
            .naming_push_empty_protection(false)
            .load_cache_at_start(false)
            .cache_dir(self.cache.path());
        if let Some((user, password)) = &self.options.credentials {
            props = props
                .auth_username(user.clone())
                .auth_password(password.clone());
        }
        props
    }

    fn servers(&self) -> String {
        self.options.servers.join(",")
    }

    /// A new naming client (a connection of its own), named `app_name` to the server.
    pub(super) async fn naming(&self, app_name: &str) -> Result<NamingService> {
        let mut builder = NamingServiceBuilder::new(self.props(app_name));
        if self.options.credentials.is_some() {
            builder = builder.enable_auth_plugin_http();
        }
        let what = format!("connect to Nacos naming at {}", self.servers());
        let naming = self.bounded(&what, builder.build()).await?;
        Ok(naming)
    }

    /// A new config client (a connection of its own).
    pub(super) async fn config(&self) -> Result<ConfigService> {
        let mut builder = ConfigServiceBuilder::new(self.props("introspect"));
        if self.options.credentials.is_some() {
            builder = builder.enable_auth_plugin_http();
        }
        let what = format!("connect to Nacos config at {}", self.servers());
        self.bounded(&what, builder.build()).await
    }

    async fn bounded<T>(
        &self,
        what: &str,
        building: impl std::future::Future<Output = nacos_sdk::api::error::Result<T>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.options.connect_timeout, building).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(e)) => Err(map_error(e, what)),
            Err(_) => Err(Error::store_unavailable(format!(
                "{what}: no answer within {:?}",
                self.options.connect_timeout
            ))),
        }
    }
}

/// The clients readers share (lists, follows, the mapping, reports, the epoch), made on
/// first use; a failed attempt is tried again on the next use.
///
/// Config listeners live on a client of their own: the SDK answers `get_config` of a config
/// it listens to from its own copy, which lags behind the server until the change is
/// pushed, and a compare-and-set needs the server's current value.
pub(super) struct Reader {
    connector: Connector,
    naming: OnceCell<NamingService>,
    config: OnceCell<ConfigService>,
    listening: OnceCell<ConfigService>,
    http: OnceCell<HttpReader>,
    /// Services (`group@@service`) whose last list read from the server was large (over
    /// half the SDK's message limit): read over HTTP at once, and followed by polling.
    large: Mutex<HashSet<String>>,
}

impl Reader {
    pub(super) fn new(connector: Connector) -> Self {
        Reader {
            connector,
            naming: OnceCell::new(),
            config: OnceCell::new(),
            listening: OnceCell::new(),
            http: OnceCell::new(),
            large: Mutex::default(),
        }
    }

    /// The client of the HTTP open API (see `http`), for lists over the SDK's limit.
    pub(super) async fn http(&self) -> Result<&HttpReader> {
        self.http
            .get_or_try_init(|| async { HttpReader::new(self.connector.options().clone()) })
            .await
    }

    /// Whether the last list of `service` (`group@@service`) read from the server was large.
    pub(super) fn is_large(&self, service: &str) -> bool {
        self.large.lock().expect("large lock").contains(service)
    }

    /// Notes whether the list of `service` (`group@@service`) is large.
    pub(super) fn set_large(&self, service: &str, over: bool) {
        let mut apps = self.large.lock().expect("large lock");
        if over {
            apps.insert(service.to_owned());
        } else {
            apps.remove(service);
        }
    }

    pub(super) async fn naming(&self) -> Result<&NamingService> {
        self.naming
            .get_or_try_init(|| self.connector.naming("introspect-reader"))
            .await
    }

    /// The config client for reads and writes: it never listens, so its reads ask the
    /// server.
    pub(super) async fn config(&self) -> Result<&ConfigService> {
        self.config
            .get_or_try_init(|| self.connector.config())
            .await
    }

    /// The config client that holds listeners (see the type's docs); never read through.
    pub(super) async fn listening(&self) -> Result<&ConfigService> {
        self.listening
            .get_or_try_init(|| self.connector.config())
            .await
    }
}

/// Whether a server's answer code (HTTP-like) says who we are is not accepted.
fn is_auth_code(code: i32) -> bool {
    code == 401 || code == 403
}

/// The most the SDK receives in one gRPC message: tonic's default decoding limit, which
/// nacos-sdk 0.8 keeps and does not let its user raise.
pub(super) const MESSAGE_LIMIT: usize = 4 << 20;

/// Whether `error` is the SDK's (tonic's) refusal of a reply over [`MESSAGE_LIMIT`].
pub(super) fn is_over_limit(error: &SdkError) -> bool {
    let lower = error.to_string().to_ascii_lowercase();
    lower.contains("message length too large") || lower.contains("message too large")
}

/// Sorts an SDK error into the crate's, naming `what` failed. A refused login or
/// permission is permanent; connection trouble is transient; a reply over gRPC's message
/// limit says so.
pub(super) fn map_error(error: SdkError, what: &str) -> Error {
    sort_error(&error, what).caused_by(error)
}

/// [`map_error`] without the source.
fn sort_error(error: &SdkError, what: &str) -> Error {
    let text = error.to_string();
    let lower = text.to_ascii_lowercase();
    if is_over_limit(error) {
        return Error::store(format!(
            "{what}: a reply of the Nacos server is over the gRPC message limit the SDK \
             accepts (4 MiB): {text}"
        ));
    }
    match error {
        SdkError::ErrResponse(_, code, error_code, message) => {
            let message = message.as_deref().unwrap_or_default();
            let lower = message.to_ascii_lowercase();
            if lower.contains("permission") {
                Error::permission_denied(format!("{what}: Nacos refused: {message}"))
            } else if is_auth_code(*code) || is_auth_code(*error_code) || lower.contains("auth") {
                Error::unauthenticated(format!("{what}: Nacos refused the credentials: {message}"))
            } else {
                Error::store(format!(
                    "{what}: Nacos answered {code}/{error_code}: {message}"
                ))
            }
        }
        SdkError::TonicGrpcStatus(status) => match status.code() {
            tonic::Code::Unauthenticated => {
                Error::unauthenticated(format!("{what}: Nacos refused the credentials"))
            }
            tonic::Code::PermissionDenied => {
                Error::permission_denied(format!("{what}: Nacos refused access"))
            }
            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Cancelled => {
                Error::store_unavailable(format!("{what}: {}", status.message()))
            }
            _ => Error::store(format!("{what}: Nacos: {text}")),
        },
        SdkError::ErrResult(_) if lower.contains("403") || lower.contains("unauthorized") => {
            Error::unauthenticated(format!("{what}: Nacos refused the credentials"))
        }
        SdkError::InvalidParam(..) | SdkError::WrongServerAddress(_) => {
            Error::config(format!("{what}: {text}"))
        }
        SdkError::Serialization(_) => Error::malformed("Nacos reply", format!("{what}: {text}")),
        SdkError::ClientUnhealthy(_)
        | SdkError::ClientShutdown(_)
        | SdkError::NoAvailableServer
        | SdkError::TonicGrpcTransport(_)
        | SdkError::GrpcBufferRequest(_) => Error::store_unavailable(format!("{what}: {text}")),
        _ => Error::store(format!("{what}: Nacos: {text}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_sort_into_permanent_and_transient() {
        let refused = SdkError::ErrResponse(None, 403, 403, Some("user not found".into()));
        assert!(map_error(refused, "x").is_permanent());
        let denied = SdkError::ErrResponse(
            None,
            500,
            403,
            Some("NO_NAMESPACE_PERMISSION, user no such namespace permission: dev".into()),
        );
        assert!(matches!(
            map_error(denied, "x"),
            Error::PermissionDenied { .. }
        ));
        let unavailable = map_error(SdkError::NoAvailableServer, "x");
        assert!(unavailable.is_transient());
        let source = std::error::Error::source(&unavailable);
        assert!(matches!(
            source.and_then(|s| s.downcast_ref::<SdkError>()),
            Some(SdkError::NoAvailableServer)
        ));
        assert!(map_error(SdkError::ClientUnhealthy("down".into()), "x").is_transient());
        let big = SdkError::TonicGrpcStatus(tonic::Status::out_of_range(
            "decoded message length too large: found 5000000 bytes, the limit is: 4194304 bytes",
        ));
        let big = map_error(big, "list shop").to_string();
        assert!(big.contains("4 MiB") && big.contains("list shop"), "{big}");
        let other = map_error(SdkError::ErrResponse(None, 500, 500, Some("x".into())), "w");
        assert!(!other.is_permanent() && other.to_string().contains("w"));
    }
}
