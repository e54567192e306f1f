//! [`connect`]: a registry backend for a Dubbo registry URL (see [`super::url`]).

use std::fmt;
use std::time::Duration;

use super::Backend;
use super::url::{RegistryUrl, Scheme};
use crate::error::{Error, Result};

/// A CA certificate and an optional client certificate and key, all PEM.
#[cfg(feature = "etcd")]
type TlsPems = (Vec<u8>, Option<(Vec<u8>, Vec<u8>)>);

/// How [`connect_with`] connects, beside what the URL says: credentials (never taken from a
/// URL), timeouts, TLS for etcd, and whether to connect in the background.
#[derive(Clone, Default)]
pub struct ConnectOptions {
    credentials: Option<(String, String)>,
    connect_in_background: bool,
    connect_timeout: Option<Duration>,
    request_timeout: Option<Duration>,
    cache_dir: Option<std::path::PathBuf>,
    #[cfg(feature = "etcd")]
    etcd_tls: Option<TlsPems>,
}

impl fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("user", &self.credentials.as_ref().map(|(user, _)| user))
            .field("connect_in_background", &self.connect_in_background)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .finish_non_exhaustive()
    }
}

impl ConnectOptions {
    /// Authenticates as `user` with `password`: etcd's user, ZooKeeper's `digest` scheme
    /// (nodes written are then readable and writable by that user only, as Dubbo's
    /// `CREATOR_ALL_ACL`), Nacos's username and password login. The password is never logged or repeated in an error.
    pub fn with_credentials(
        mut self,
        user: impl Into<String>,
        password: impl Into<String>,
    ) -> Self {
        self.credentials = Some((user.into(), password.into()));
        self
    }

    /// Returns the backend at once even while the registry does not answer, connecting on
    /// first use (refused credentials still fail at once where the registry says so early).
    pub fn with_connect_in_background(mut self, background: bool) -> Self {
        self.connect_in_background = background;
        self
    }

    /// Sets how long connecting may take.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// Sets how long one request may take (etcd), or the session timeout of the reading
    /// session (ZooKeeper).
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = Some(timeout);
        self
    }

    /// Where a registry client keeps its on-disk cache (Nacos: the SDK's naming and config
    /// cache, by default a directory of this process under the system's temporary
    /// directory, not `~/nacos`).
    pub fn with_cache_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// TLS to etcd: the CA that signs its certificates and optionally a client certificate
    /// and key (all PEM); the endpoints become `https://`.
    #[cfg(feature = "etcd")]
    #[cfg_attr(docsrs, doc(cfg(feature = "etcd")))]
    pub fn with_etcd_tls(mut self, ca_pem: Vec<u8>, identity: Option<(Vec<u8>, Vec<u8>)>) -> Self {
        self.etcd_tls = Some((ca_pem, identity));
        self
    }
}

/// The backend `url` names, with default options: `memory://` (a fresh embedded store),
/// `etcd://h:p` (feature `etcd`), `zookeeper://h:p?backup=h2:p2&group=g` (feature
/// `zookeeper`), `nacos://h:p?namespace=ns&group=g` (feature `nacos`; `nacos.group` is read
/// over `group`, as Dubbo does). Fails with [`Error::Config`] for an unknown scheme, a backend not
/// compiled in, credentials in the URL.
///
/// ```no_run
/// # async fn run() -> introspect::Result<()> {
/// let backend = introspect::backend::connect("etcd://127.0.0.1:2379").await?;
/// let resolver = introspect::Resolver::new(backend);
/// # Ok(())
/// # }
/// ```
pub async fn connect(url: &str) -> Result<Backend> {
    connect_with(url, &ConnectOptions::default()).await
}

/// The backend `url` names, connected with `options`; see [`connect`].
pub async fn connect_with(url: &str, options: &ConnectOptions) -> Result<Backend> {
    let url = RegistryUrl::parse(url)?;
    match url.scheme {
        Scheme::Memory => {
            if options.credentials.is_some() {
                return Err(Error::config(
                    "memory:// takes no credentials: it is the embedded store of this process",
                ));
            }
            Ok(Backend::memory())
        }
        Scheme::Etcd => etcd(&url, options).await,
        Scheme::ZooKeeper => zookeeper(&url, options).await,
        Scheme::Nacos => nacos(&url, options).await,
        #[allow(unreachable_patterns)]
        other => Err(not_compiled(other.as_str())),
    }
}

/// The error for a backend whose feature was left out of the build.
fn not_compiled(scheme: &str) -> Error {
    Error::config(format!(
        "{scheme}:// needs the `{scheme}` feature of introspect, which this build leaves out"
    ))
}

#[cfg(feature = "etcd")]
async fn etcd(url: &RegistryUrl, options: &ConnectOptions) -> Result<Backend> {
    use crate::store::{EtcdOptions, EtcdStore};
    use std::sync::Arc;

    let scheme = if options.etcd_tls.is_some() {
        "https"
    } else {
        "http"
    };
    let endpoints: Vec<String> = url
        .servers
        .iter()
        .map(|server| format!("{scheme}://{server}"))
        .collect();
    let mut etcd = EtcdOptions::new(endpoints);
    if let Some((user, password)) = &options.credentials {
        etcd = etcd.with_user(user.clone(), password.clone());
    }
    if let Some((ca, identity)) = &options.etcd_tls {
        etcd = etcd.with_tls(ca.clone(), identity.clone());
    }
    if let Some(timeout) = options.connect_timeout {
        etcd = etcd.with_connect_timeout(timeout);
    }
    if let Some(timeout) = options.request_timeout {
        etcd = etcd.with_request_timeout(timeout);
    }
    etcd = etcd.with_connect_in_background(options.connect_in_background);
    let store = EtcdStore::connect(etcd).await?;
    Ok(Backend::from(Arc::new(store)))
}

#[cfg(not(feature = "etcd"))]
async fn etcd(_: &RegistryUrl, _: &ConnectOptions) -> Result<Backend> {
    Err(not_compiled("etcd"))
}

#[cfg(feature = "zookeeper")]
async fn zookeeper(url: &RegistryUrl, options: &ConnectOptions) -> Result<Backend> {
    use super::zookeeper::{ZooKeeperBackend, ZooKeeperOptions};

    let mut zk = ZooKeeperOptions::new(url.servers.clone());
    if let Some(group) = url.param("group") {
        zk = zk.with_group(group)?;
    }
    // The config centre Dubbo Java makes of the registry keeps the URL's `namespace`
    // (DefaultApplicationDeployer.registryAsConfigCenter): config items under
    // `/{namespace}/config`.
    if let Some(namespace) = url.param("namespace") {
        zk = zk.with_config_namespace(namespace)?;
    }
    if let Some((user, password)) = &options.credentials {
        zk = zk.with_digest(user.clone(), password.clone());
    }
    if let Some(timeout) = options.connect_timeout {
        zk = zk.with_connect_timeout(timeout);
    }
    if let Some(timeout) = options.request_timeout {
        zk = zk.with_session_timeout(timeout);
    }
    zk = zk.with_connect_in_background(options.connect_in_background);
    Ok(ZooKeeperBackend::connect(zk).await?.into_backend())
}

#[cfg(feature = "nacos")]
async fn nacos(url: &RegistryUrl, options: &ConnectOptions) -> Result<Backend> {
    use super::nacos::{NacosBackend, NacosOptions};

    let mut nacos = NacosOptions::new(url.servers.clone());
    if let Some(namespace) = url.param("namespace") {
        nacos = nacos.with_namespace(namespace)?;
    }
    // Dubbo reads `nacos.group` over `group` (NacosNamingServiceUtils.getGroup).
    if let Some(group) = url.param("nacos.group").or_else(|| url.param("group")) {
        nacos = nacos.with_group(group)?;
    }
    if let Some((user, password)) = &options.credentials {
        nacos = nacos.with_credentials(user.clone(), password.clone());
    }
    if let Some(dir) = &options.cache_dir {
        nacos = nacos.with_cache_dir(dir.clone());
    }
    if let Some(timeout) = options.connect_timeout {
        nacos = nacos.with_connect_timeout(timeout);
    }
    nacos = nacos.with_connect_in_background(options.connect_in_background);
    Ok(NacosBackend::connect(nacos).await?.into_backend())
}

#[cfg(not(feature = "nacos"))]
async fn nacos(_: &RegistryUrl, _: &ConnectOptions) -> Result<Backend> {
    Err(not_compiled("nacos"))
}

#[cfg(not(feature = "zookeeper"))]
async fn zookeeper(_: &RegistryUrl, _: &ConnectOptions) -> Result<Backend> {
    Err(not_compiled("zookeeper"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn memory_and_unknown_schemes() {
        assert_eq!(connect("memory://").await.unwrap().name(), "memory");
        let err = connect("consul://h:1").await.unwrap_err().to_string();
        assert!(err.contains("unknown registry scheme"), "{err}");
        let with_user = ConnectOptions::default().with_credentials("a", "pw");
        assert!(connect_with("memory://", &with_user).await.is_err());
        let debug = format!("{with_user:?}");
        assert!(!debug.contains("pw\""), "{debug}");
    }

    #[cfg(not(feature = "nacos"))]
    #[tokio::test]
    async fn nacos_left_out_of_the_build_says_which_feature() {
        let err = connect("nacos://h:8848").await.unwrap_err().to_string();
        assert!(err.contains("`nacos` feature"), "{err}");
    }

    #[cfg(not(feature = "zookeeper"))]
    #[tokio::test]
    async fn a_backend_left_out_of_the_build_says_which_feature() {
        let err = connect("zookeeper://h:2181").await.unwrap_err().to_string();
        assert!(err.contains("`zookeeper` feature"), "{err}");
    }
}
