//! Opening the store a command line names: etcd (`--etcd URLS` or `INTROSPECT_ETCD`, with
//! etcdctl's `--user`, `--cacert`, `--cert` and `--key`) or, only when asked for, the
//! embedded in-memory store.
//!
//! Secrets never appear on the command line or in a message: the password comes from
//! `INTROSPECT_PASSWORD` or a prompt on the terminal, and credentials written into an
//! endpoint URL (`http://user:password@host`) are refused without repeating them.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use introspect::store::{EtcdOptions, EtcdStore};
use introspect::{Error, MemoryStore, Result, Store};

/// The environment variable holding the etcd endpoints (as etcdctl's `ETCDCTL_ENDPOINTS`).
pub const ENDPOINTS_VAR: &str = "INTROSPECT_ETCD";
/// The environment variable holding the etcd user name.
pub const USER_VAR: &str = "INTROSPECT_USER";
/// The environment variable holding the etcd password.
pub const PASSWORD_VAR: &str = "INTROSPECT_PASSWORD";

/// Where the registry is, as arguments every command takes.
#[derive(Args, Clone, Debug, Default)]
pub struct StoreArgs {
    /// etcd endpoints, comma-separated, e.g. http://10.0.0.1:2379 (https:// with --cacert).
    #[arg(long, global = true, env = ENDPOINTS_VAR, hide_env_values = true, value_name = "URLS")]
    pub etcd: Option<String>,

    /// Use the embedded in-memory store of this process instead of etcd (empty unless the
    /// demo fills it; the demo's default).
    #[arg(long, global = true)]
    pub memory: bool,

    /// etcd user name. The password is read from INTROSPECT_PASSWORD, or asked for on the
    /// terminal; it is never taken from the command line.
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

/// Opens the store `args` name: the memory store when `--memory` is given, else etcd. With
/// neither `--memory` nor endpoints it fails: nothing falls back to an empty store silently.
pub async fn open(args: &StoreArgs) -> Result<Arc<dyn Store>> {
    if args.memory {
        return Ok(Arc::new(MemoryStore::new()));
    }
    let Some(urls) = &args.etcd else {
        return Err(Error::Config(format!(
            "no store given: pass --etcd URLS or set {ENDPOINTS_VAR} (or --memory for an empty \
             embedded store)"
        )));
    };
    let options = etcd_options(args, urls)?;
    let endpoints = options.endpoints().to_vec();
    match EtcdStore::connect(options).await {
        Ok(store) => Ok(Arc::new(store)),
        Err(Error::StoreUnavailable(reason)) => Err(unreachable(&endpoints, &reason)),
        Err(e) => Err(e),
    }
}

/// Opens the store `args` name for a long-running command (`watch`): like [`open`], but
/// etcd is connected in the background, so the command starts while etcd is down and
/// follows it once it answers. Refused credentials still fail here.
pub async fn open_following(args: &StoreArgs) -> Result<Arc<dyn Store>> {
    if args.memory || args.etcd.is_none() {
        return open(args).await;
    }
    let urls = args.etcd.as_deref().unwrap_or_default();
    let options = etcd_options(args, urls)?.with_connect_in_background(true);
    Ok(Arc::new(EtcdStore::connect(options).await?))
}

/// The etcd options `args` describe, reading the password and the PEM files.
pub fn etcd_options(args: &StoreArgs, urls: &str) -> Result<EtcdOptions> {
    refuse_credentials_in_urls(urls)?;
    let mut options = EtcdOptions::new(EtcdOptions::parse_endpoints(urls)?);
    if let Some(user) = &args.user {
        if user.contains(':') {
            return Err(Error::Config(format!(
                "--user takes a name only; give the password in {PASSWORD_VAR} or at the prompt"
            )));
        }
        options = options.with_user(user.clone(), password(user)?);
    }
    match (&args.cacert, &args.cert, &args.key) {
        (None, None, None) => {}
        (None, _, _) => {
            return Err(Error::Config(
                "--cert and --key need --cacert, the CA that signed etcd's certificate".into(),
            ));
        }
        (Some(ca), cert, key) => {
            let identity = match (cert, key) {
                (Some(cert), Some(key)) => {
                    Some((read_pem(cert, "--cert")?, read_pem(key, "--key")?))
                }
                (None, None) => None,
                _ => {
                    return Err(Error::Config(
                        "--cert and --key go together: give both or neither".into(),
                    ));
                }
            };
            options = options.with_tls(read_pem(ca, "--cacert")?, identity);
        }
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
            return Err(Error::Config(format!(
                "etcd endpoint {scheme}://…@{host}: credentials in the URL are not accepted; \
                 use --user NAME with the password in {PASSWORD_VAR} or at the prompt"
            )));
        }
    }
    Ok(())
}

/// The password of `user`: from the environment, else asked for on the terminal.
fn password(user: &str) -> Result<String> {
    if let Ok(password) = std::env::var(PASSWORD_VAR) {
        return Ok(password);
    }
    // A script has no one to answer a prompt: say what to set instead of waiting.
    if !std::io::stdin().is_terminal() {
        return Err(Error::Config(format!(
            "no password for etcd user {user}: set {PASSWORD_VAR} (not prompting: standard \
             input is not a terminal)"
        )));
    }
    rpassword::prompt_password(format!("etcd password for {user}: ")).map_err(|e| {
        Error::Config(format!(
            "no password for etcd user {user}: set {PASSWORD_VAR} or run on a terminal ({e})"
        ))
    })
}

fn read_pem(path: &Path, flag: &str) -> Result<Vec<u8>> {
    std::fs::read(path)
        .map_err(|e| Error::Config(format!("cannot read {flag} {}: {e}", path.display())))
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
    Error::StoreUnavailable(format!("cannot reach etcd at {list}: {cause}"))
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
        let err = open(&StoreArgs::default()).await.err().expect("refused");
        assert!(err.to_string().contains("--etcd"), "{err}");
        let memory = StoreArgs {
            memory: true,
            ..Default::default()
        };
        assert_eq!(open(&memory).await.unwrap().backend(), "memory");
    }
}
