//! Opening the registry a command line names: a Dubbo registry URL (`--registry URL` or
//! `INTROSPECT_REGISTRY`: `zookeeper://h:p?backup=h2:p2`, `nacos://h:p`, `etcd://h:p`,
//! `memory://`), etcd by its endpoints (`--etcd URLS` or `INTROSPECT_ETCD`, with etcdctl's
//! `--user`, `--cacert`, `--cert` and `--key`) or, only when asked for, the embedded
//! in-memory store.
//! Naming the registry twice (`--registry` and `--etcd`) is an error.
//!
//! Secrets never appear on the command line or in a message: the password comes from
//! `INTROSPECT_PASSWORD` or a prompt on the terminal, and credentials written into an
//! endpoint URL (`http://user:password@host`) are refused without repeating them.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use clap::Args;
use introspect::backend::url::{RegistryUrl, Scheme};
use introspect::backend::{Backend, ConnectOptions};
use introspect::store::{EtcdOptions, EtcdStore};
use introspect::{Error, MemoryStore, Result};

/// The environment variable holding the registry URL.
pub const REGISTRY_VAR: &str = "INTROSPECT_REGISTRY";
/// The environment variable holding the etcd endpoints (as etcdctl's `ETCDCTL_ENDPOINTS`).
pub const ENDPOINTS_VAR: &str = "INTROSPECT_ETCD";
/// The environment variable holding the etcd user name.
pub const USER_VAR: &str = "INTROSPECT_USER";
/// The environment variable holding the etcd password.
pub const PASSWORD_VAR: &str = "INTROSPECT_PASSWORD";

/// Where the registry is, as arguments every command takes.
#[derive(Args, Clone, Debug, Default)]
pub struct StoreArgs {
    /// The registry as Dubbo names it: zookeeper://HOST:PORT?backup=HOST:PORT,…&group=G,
    /// nacos://HOST:PORT?namespace=NS, etcd://HOST:PORT (etcd3://), memory://. Credentials
    /// never go in it (see --user).
    #[arg(long, global = true, env = REGISTRY_VAR, value_name = "URL")]
    pub registry: Option<String>,

    /// etcd endpoints, comma-separated, e.g. http://10.0.0.1:2379 (https:// with --cacert).
    #[arg(long, global = true, env = ENDPOINTS_VAR, hide_env_values = true, value_name = "URLS")]
    pub etcd: Option<String>,

    /// Use the embedded in-memory store of this process instead of a registry (empty
    /// unless the demo fills it; the demo's default).
    #[arg(long, global = true)]
    pub memory: bool,

    /// User name (etcd's user, ZooKeeper's digest user). The password is read from
    /// INTROSPECT_PASSWORD, or asked for on the terminal; it is never taken from the command
    /// line.
    #[arg(long, global = true, env = USER_VAR, value_name = "NAME")]
    pub user: Option<String>,

    /// CA certificate (PEM) that signed etcd's server certificates; turns TLS on.
    #[arg(long, global = true, value_name = "FILE")]
    pub cacert: Option<PathBuf>,

    /// Client certificate (PEM) to present to etcd; needs --key and --cacert.
    #[arg(long, global = true, value_name = "FILE")]
    pub cert: Option<PathBuf>,

    /// Private key (PEM) of the client certificate; needs --cert.
    #[arg(long, global = true, value_name = "FILE")]
    pub key: Option<PathBuf>,
}

/// Opens the registry `args` name: the memory store when `--memory` is given, else the
/// `--registry` URL or etcd's `--etcd` endpoints. With none of them it fails: nothing falls
/// back to an empty store silently.
pub async fn open(args: &StoreArgs) -> Result<Backend> {
    open_with(args, false).await
}

/// Opens the registry `args` name for a long-running command (`watch`, `xds`): like
/// [`open`], but connected in the background, so the command starts while the registry is
/// down and follows it once it answers. Refused credentials still fail here.
pub async fn open_following(args: &StoreArgs) -> Result<Backend> {
    open_with(args, true).await
}

async fn open_with(args: &StoreArgs, background: bool) -> Result<Backend> {
    match (&args.registry, &args.etcd, args.memory) {
        (Some(_), Some(_), _) => Err(Error::config(format!(
            "the registry is named twice: give --registry ({REGISTRY_VAR}) or --etcd \
             ({ENDPOINTS_VAR}), not both"
        ))),
        (Some(_), _, true) | (_, Some(_), true) => Err(Error::config(
            "--memory names the embedded store: leave out --registry and --etcd",
        )),
        (None, None, true) => Ok(Backend::from(std::sync::Arc::new(MemoryStore::new()))),
        (None, None, false) => Err(Error::config(format!(
            "no store given: pass --registry URL (or set {REGISTRY_VAR}), --etcd URLS (or set \
             {ENDPOINTS_VAR}), or --memory for an empty embedded store"
        ))),
        (None, Some(urls), false) => {
            let options = etcd_options(args, urls)?.with_connect_in_background(background);
            let endpoints = options.endpoints().to_vec();
            match EtcdStore::connect(options).await {
                Ok(store) => Ok(Backend::from(std::sync::Arc::new(store))),
                Err(Error::StoreUnavailable { reason, .. }) => {
                    Err(unreachable(&endpoints, &reason))
                }
                Err(e) => Err(e),
            }
        }
        (Some(url), None, false) => {
            let parsed = RegistryUrl::parse(url)?;
            let mut options = ConnectOptions::default().with_connect_in_background(background);
            if let Some(user) = &args.user {
                options = options.with_credentials(user.clone(), password(user)?);
            }
            if args.cacert.is_some() || args.cert.is_some() || args.key.is_some() {
                if parsed.scheme != Scheme::Etcd {
                    return Err(Error::config(format!(
                        "--cacert, --cert and --key are for etcd, not {}://",
                        parsed.scheme
                    )));
                }
                let (ca, identity) = tls_files(args)?;
                options = options.with_etcd_tls(ca, identity);
            }
            introspect::backend::connect_with(url, &options).await
        }
    }
}

/// A client certificate and its key, PEM.
type Identity = (Vec<u8>, Vec<u8>);

/// The CA and the client certificate and key the TLS flags name.
fn tls_files(args: &StoreArgs) -> Result<(Vec<u8>, Option<Identity>)> {
    let Some(ca) = &args.cacert else {
        return Err(Error::config(
            "--cert and --key need --cacert, the CA that signed etcd's certificate",
        ));
    };
    let identity = match (&args.cert, &args.key) {
        (Some(cert), Some(key)) => Some((read_pem(cert, "--cert")?, read_pem(key, "--key")?)),
        (None, None) => None,
        _ => {
            return Err(Error::config(
                "--cert and --key go together: give both or neither",
            ));
        }
    };
    Ok((read_pem(ca, "--cacert")?, identity))
}

/// The etcd options `args` describe, reading the password and the PEM files.
pub fn etcd_options(args: &StoreArgs, urls: &str) -> Result<EtcdOptions> {
    refuse_credentials_in_urls(urls)?;
    let mut options = EtcdOptions::new(EtcdOptions::parse_endpoints(urls)?);
    if let Some(user) = &args.user {
        options = options.with_user(user.clone(), password(user)?);
    }
    if args.cacert.is_some() || args.cert.is_some() || args.key.is_some() {
        let (ca, identity) = tls_files(args)?;
        options = options.with_tls(ca, identity);
    }
    Ok(options)
}

/// Refuses `scheme://user:password@host` in the endpoint list, naming the entry by its host
/// only.
fn refuse_credentials_in_urls(urls: &str) -> Result<()> {
    for entry in urls.split(',') {
        let entry = entry.trim();
        let (scheme, rest) = entry.split_once("://").unwrap_or(("http", entry));
        let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
        if let Some((_, host)) = authority.rsplit_once('@') {
            return Err(Error::config(format!(
                "etcd endpoint {scheme}://…@{host}: credentials in the URL are not accepted; \
                 use --user NAME with the password in {PASSWORD_VAR} or at the prompt"
            )));
        }
    }
    Ok(())
}

/// The password of `user`: from the environment, else asked for on the terminal.
fn password(user: &str) -> Result<String> {
    // `--user name:secret` would put the password on the command line, where `ps` shows it.
    if user.contains(':') {
        return Err(Error::config(format!(
            "--user takes a name only; give the password in {PASSWORD_VAR} or at the prompt"
        )));
    }
    if let Ok(password) = std::env::var(PASSWORD_VAR) {
        return Ok(password);
    }
    // A script has no one to answer a prompt: say what to set instead of waiting.
    if !std::io::stdin().is_terminal() {
        return Err(Error::config(format!(
            "no password for user {user}: set {PASSWORD_VAR} (not prompting: standard input \
             is not a terminal)"
        )));
    }
    rpassword::prompt_password(format!("password for {user}: ")).map_err(|e| {
        Error::config(format!(
            "no password for user {user}: set {PASSWORD_VAR} or run on a terminal ({e})"
        ))
        .caused_by(e)
    })
}

fn read_pem(path: &Path, flag: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| {
        Error::config(format!("cannot read {flag} {}: {e}", path.display())).caused_by(e)
    })
}

/// "etcd unreachable" as one readable line: the endpoints as a plain list, then the cause.
fn unreachable(endpoints: &[String], reason: &str) -> Error {
    let list = endpoints.join(", ");
    // The library's message may start by naming the endpoints itself; say them once.
    let cause = [format!("{endpoints:?}"), list.clone()]
        .iter()
        .find_map(|named| reason.strip_prefix(&format!("cannot reach etcd at {named}: ")))
        .unwrap_or(reason)
        .to_owned();
    Error::store_unavailable(format!("cannot reach etcd at {list}: {cause}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_a_url_are_refused_without_the_password() {
        let err =
            refuse_credentials_in_urls("http://127.0.0.1:2379, https://alice:s3cret@etcd:2379")
                .unwrap_err()
                .to_string();
        assert!(err.contains("https://…@etcd:2379"), "{err}");
        assert!(!err.contains("s3cret") && !err.contains("alice"), "{err}");
        assert!(refuse_credentials_in_urls("http://127.0.0.1:2379,etcd:2379").is_ok());
    }

    #[test]
    fn the_unreachable_message_names_the_endpoints_once_without_debug_quotes() {
        let endpoints = vec!["http://a:1".to_owned(), "http://b:2".to_owned()];
        let library = format!("cannot reach etcd at {endpoints:?}: connection refused");
        let message = unreachable(&endpoints, &library).to_string();
        assert_eq!(
            message,
            "store unavailable: cannot reach etcd at http://a:1, http://b:2: connection refused"
        );
        let plain = unreachable(&endpoints, "no answer within 10s").to_string();
        assert_eq!(
            plain,
            "store unavailable: cannot reach etcd at http://a:1, http://b:2: no answer within 10s"
        );
    }

    #[tokio::test]
    async fn no_store_named_is_an_error_not_an_empty_store() {
        let err = open(&StoreArgs::default()).await.expect_err("refused");
        assert!(err.to_string().contains("--registry"), "{err}");
        assert!(err.to_string().contains("--etcd"), "{err}");
        let memory = StoreArgs {
            memory: true,
            ..Default::default()
        };
        assert_eq!(open(&memory).await.unwrap().name(), "memory");
        let url = StoreArgs {
            registry: Some("memory://".into()),
            ..Default::default()
        };
        assert_eq!(open(&url).await.unwrap().name(), "memory");
    }

    #[tokio::test]
    async fn the_registry_named_twice_is_an_error() {
        let both = StoreArgs {
            registry: Some("zookeeper://127.0.0.1:2181".into()),
            etcd: Some("http://127.0.0.1:2379".into()),
            ..Default::default()
        };
        let err = open(&both).await.expect_err("refused").to_string();
        assert!(err.contains("named twice"), "{err}");
        let tls_on_zookeeper = StoreArgs {
            registry: Some("zookeeper://127.0.0.1:2181".into()),
            cacert: Some("ca.pem".into()),
            ..Default::default()
        };
        let err = open(&tls_on_zookeeper)
            .await
            .expect_err("refused")
            .to_string();
        assert!(err.contains("for etcd"), "{err}");
    }
}
