//! What [`EtcdStore`](super::EtcdStore) connects to and how: endpoints, credentials, TLS,
//! deadlines.

use std::fmt;
use std::time::Duration;

use etcd_client::{Certificate, ConnectOptions, Identity, TlsOptions};

use crate::error::{Error, Result};

/// Default deadline for connecting to an endpoint.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Default deadline for each request.
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Default HTTP/2 ping interval while streams (watches) are open. etcd refuses pings more
/// frequent than every 5 s by default.
const DEFAULT_KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// Default time to wait for a ping's answer before the connection is declared dead.
const DEFAULT_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(5);
/// Default largest response accepted from etcd (a listing or a watch batch).
const DEFAULT_MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// TLS settings for [`EtcdOptions::with_tls`]: the CA that signs the servers' certificates
/// and optionally a client certificate.
#[derive(Clone)]
struct TlsSettings {
    ca_pem: Vec<u8>,
    identity: Option<(Vec<u8>, Vec<u8>)>,
    domain: Option<String>,
}

/// Connection options for [`EtcdStore`](super::EtcdStore), built like `etcd-client`'s own options:
///
/// ```
/// use std::time::Duration;
/// use introspect::store::EtcdOptions;
///
/// let options = EtcdOptions::new(EtcdOptions::parse_endpoints("http://10.0.0.1:2379,http://10.0.0.2:2379")?)
///     .with_user("registry", "secret")
///     .with_request_timeout(Duration::from_secs(3));
/// assert_eq!(options.endpoints().len(), 2);
/// # Ok::<(), introspect::Error>(())
/// ```
///
/// Defaults: connect timeout 5 s, request timeout 5 s, HTTP/2 keep-alive every 10 s with a
/// 5 s deadline while watches are open, responses up to 64 MiB, prefixes read in pages
/// sized by bytes (see [`with_range_page_size`](Self::with_range_page_size)), no
/// authentication, no TLS, connect now (not in the
/// background).
#[derive(Clone)]
pub struct EtcdOptions {
    pub(super) endpoints: Vec<String>,
    user: Option<(String, String)>,
    tls: Option<TlsSettings>,
    pub(super) connect_timeout: Duration,
    pub(super) request_timeout: Duration,
    keep_alive: Option<(Duration, Duration)>,
    pub(super) max_response_bytes: usize,
    pub(super) range_page_size: Option<usize>,
    pub(super) connect_in_background: bool,
}

impl fmt::Debug for EtcdOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdOptions")
            .field("endpoints", &self.endpoints)
            .field("user", &self.user.as_ref().map(|(name, _)| name))
            .field("tls", &self.tls.is_some())
            .field(
                "client_certificate",
                &self.tls.as_ref().is_some_and(|t| t.identity.is_some()),
            )
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("keep_alive", &self.keep_alive)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("range_page_size", &self.range_page_size)
            .field("connect_in_background", &self.connect_in_background)
            .finish()
    }
}

impl EtcdOptions {
    /// Options for the given endpoints (`http://host:port` or `https://host:port`), with the
    /// defaults listed on [`EtcdOptions`].
    ///
    /// Several endpoints are the members of one cluster: requests go to one member and fail
    /// over to the next when it cannot answer (dead, partitioned, without a leader), and a
    /// watch whose member dies resumes on another from the next revision, without a gap.
    pub fn new<I, S>(endpoints: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        EtcdOptions {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            user: None,
            tls: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            keep_alive: Some((DEFAULT_KEEP_ALIVE_INTERVAL, DEFAULT_KEEP_ALIVE_TIMEOUT)),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            range_page_size: None,
            connect_in_background: false,
        }
    }

    /// Parses a comma-separated list of endpoint URLs such as
    /// `http://10.0.0.1:2379,http://10.0.0.2:2379` (spaces around commas are ignored).
    ///
    /// Each endpoint is `http://` or `https://`, a host (a name, an IPv4 address or a
    /// bracketed IPv6 address) and an optional port; a bare `host:port` is taken as `http`.
    /// Fails with [`Error::Config`] on an empty list, an empty entry or anything else.
    pub fn parse_endpoints(list: &str) -> Result<Vec<String>> {
        if list.trim().is_empty() {
            return Err(Error::config("no etcd endpoints given"));
        }
        list.split(',').map(parse_endpoint).collect()
    }

    /// Authenticates as `name` with `password` (etcd's user authentication). The token is
    /// refreshed automatically when it expires.
    pub fn with_user(mut self, name: impl Into<String>, password: impl Into<String>) -> Self {
        self.user = Some((name.into(), password.into()));
        self
    }

    /// Uses TLS: `ca_pem` is the PEM of the CA that signed the servers' certificates, and
    /// `client` optionally the PEM certificate and PEM private key this client presents.
    /// The endpoints must then be `https://` URLs.
    pub fn with_tls(
        mut self,
        ca_pem: impl Into<Vec<u8>>,
        client: Option<(Vec<u8>, Vec<u8>)>,
    ) -> Self {
        let domain = self.tls.take().and_then(|t| t.domain);
        self.tls = Some(TlsSettings {
            ca_pem: ca_pem.into(),
            identity: client,
            domain,
        });
        self
    }

    /// The name expected in the servers' certificates, when it is not the endpoints' host.
    /// Only used together with [`with_tls`](Self::with_tls).
    pub fn with_tls_domain(mut self, domain: impl Into<String>) -> Self {
        if let Some(tls) = &mut self.tls {
            tls.domain = Some(domain.into());
        } else {
            self.tls = Some(TlsSettings {
                ca_pem: Vec::new(),
                identity: None,
                domain: Some(domain.into()),
            });
        }
        self
    }

    /// The deadline for opening a connection (and, added to the request timeout, for
    /// [`EtcdStore::connect`](super::EtcdStore::connect) as a whole). Zero is replaced by the default.
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = nonzero_or(timeout, DEFAULT_CONNECT_TIMEOUT);
        self
    }

    /// The deadline for each request, and for opening a watch. Zero is replaced by the
    /// default.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = nonzero_or(timeout, DEFAULT_REQUEST_TIMEOUT);
        self
    }

    /// HTTP/2 keep-alive while streams are open: a ping every `interval`, the connection
    /// declared dead when one is unanswered for `timeout` (so a watch on a silently lost
    /// connection ends). `None` turns it off. etcd refuses pings more often than every 5 s.
    pub fn with_keep_alive(mut self, keep_alive: Option<(Duration, Duration)>) -> Self {
        self.keep_alive = keep_alive;
        self
    }

    /// Whether [`EtcdStore::connect`](super::EtcdStore::connect) returns the store when no
    /// member can be reached (after one connect timeout), connecting on first use, instead
    /// of failing with [`Error::StoreUnavailable`]. Off by default.
    ///
    /// Turn it on where a process must start while etcd is down: a consumer then serves
    /// its snapshot and follows the store once it answers; a provider serves and keeps
    /// trying to register. Refused credentials still fail at connect when etcd answers;
    /// when it answers only later, the first request fails with [`Error::Unauthenticated`].
    pub fn with_connect_in_background(mut self, background: bool) -> Self {
        self.connect_in_background = background;
        self
    }

    /// The largest response accepted from etcd, in bytes (a listing, a watch batch).
    pub fn with_max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes.max(4096);
        self
    }

    /// Fixes the number of keys per range request of a prefix read (at least 1).
    ///
    /// A prefix is read in pages pinned to the store revision of the first page, so a
    /// listing of any length is one consistent view and no single response grows with the
    /// fleet. By default pages are sized by bytes: the first page of a prefix asks for 500
    /// keys, later ones for as many as fill a sixteenth of the response limit
    /// ([`with_max_response_bytes`](Self::with_max_response_bytes); 4 MiB by default) at
    /// the largest record last seen under the prefix, and a page over the limit is asked
    /// again with half the keys. Small fixed pages cost time quadratic in the prefix's
    /// length (etcd counts the rest of the range on every limited request): keep them for
    /// tests and for links so slow that a 4 MiB page would not arrive within the request
    /// timeout.
    pub fn with_range_page_size(mut self, keys: usize) -> Self {
        self.range_page_size = Some(keys.max(1));
        self
    }

    /// The endpoints.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// The connect timeout.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// The request timeout.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// The options for `etcd-client`.
    pub(super) fn connect_options(&self) -> Result<ConnectOptions> {
        let mut options = ConnectOptions::new()
            .with_connect_timeout(self.connect_timeout)
            .with_require_leader(true)
            // etcd does not permit pings without open streams; see `with_keep_alive`.
            .with_keep_alive_while_idle(false);
        if let Some((interval, timeout)) = self.keep_alive {
            options = options.with_keep_alive(interval, timeout);
        }
        if let Some((name, password)) = &self.user {
            options = options
                .with_user(name.clone(), password.clone())
                .with_auto_token_refresh(true);
        }
        if let Some(tls) = &self.tls {
            if tls.ca_pem.is_empty() {
                return Err(Error::config(
                    "etcd TLS domain given without a CA certificate (use with_tls)",
                ));
            }
            let mut config = TlsOptions::new().ca_certificate(Certificate::from_pem(&tls.ca_pem));
            if let Some((cert, key)) = &tls.identity {
                config = config.identity(Identity::from_pem(cert, key));
            }
            if let Some(domain) = &tls.domain {
                config = config.domain_name(domain.clone());
            }
            options = options.with_tls(config);
        }
        Ok(options)
    }
}

fn nonzero_or(value: Duration, default: Duration) -> Duration {
    if value.is_zero() { default } else { value }
}

/// Checks one endpoint of a list; see [`EtcdOptions::parse_endpoints`].
pub(super) fn parse_endpoint(raw: &str) -> Result<String> {
    let endpoint = raw.trim();
    // Credentials in a URL (`http://user:password@host`) never reach an error message.
    if let Some((before, host)) = endpoint.rsplit_once('@') {
        let scheme = before.split_once("://").map_or("", |(scheme, _)| scheme);
        return Err(Error::config(format!(
            "invalid etcd endpoint \"{}{}***@{}\": credentials in the URL are not accepted \
             (give them with EtcdOptions::with_user)",
            Error::shorten(scheme),
            if scheme.is_empty() { "" } else { "://" },
            Error::shorten(host)
        )));
    }
    let bad = |reason: &str| {
        Err(Error::config(format!(
            "invalid etcd endpoint {:?}: {reason}",
            Error::shorten(endpoint)
        )))
    };
    if endpoint.is_empty() {
        return bad("empty entry in the endpoint list");
    }
    let (scheme, rest) = match endpoint.split_once("://") {
        Some((scheme, rest)) => (scheme.to_ascii_lowercase(), rest),
        None => ("http".to_owned(), endpoint),
    };
    if scheme != "http" && scheme != "https" {
        return bad("the scheme must be http:// or https://");
    }
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() {
        return bad("no host");
    }
    if authority
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || "/?#@,".contains(c))
    {
        return bad("expected scheme://host:port and nothing else");
    }
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        match bracketed.split_once(']') {
            Some((ip, after)) if !ip.is_empty() => match after {
                "" => (ip, None),
                _ => match after.strip_prefix(':') {
                    Some(port) => (ip, Some(port)),
                    None => return bad("garbage after the IPv6 address"),
                },
            },
            _ => return bad("unterminated IPv6 address"),
        }
    } else {
        match authority.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return bad("no host");
    }
    if !authority.starts_with('[')
        && !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_')
    {
        return bad("the host has characters a host name cannot have");
    }
    if let Some(port) = port {
        match port.parse::<u16>() {
            Ok(p) if p > 0 => {}
            _ => return bad("the port must be a number in 1..=65535"),
        }
    }
    Ok(format!("{scheme}://{authority}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_endpoint_lists() {
        assert_eq!(
            EtcdOptions::parse_endpoints("http://a:2379, https://10.0.0.2:2379/,b:1").unwrap(),
            vec!["http://a:2379", "https://10.0.0.2:2379", "http://b:1"]
        );
        assert_eq!(
            EtcdOptions::parse_endpoints("http://[::1]:2379").unwrap(),
            vec!["http://[::1]:2379"]
        );
        assert_eq!(
            EtcdOptions::parse_endpoints("HTTP://etcd.example").unwrap(),
            vec!["http://etcd.example"]
        );
    }

    #[test]
    fn rejects_garbage_endpoints() {
        for bad in [
            "",
            "  ",
            "http://a:2379,",
            ",http://a:2379",
            "ftp://a:2379",
            "http://",
            "http://:2379",
            "http://a:port",
            "http://a:0",
            "http://a:70000",
            "http://a:2379/path",
            "http://user@a:2379",
            "http://a b:2379",
            "http://[::1",
            "http://[::1]x",
            "not a url at all",
        ] {
            let err = EtcdOptions::parse_endpoints(bad).unwrap_err();
            assert!(matches!(err, Error::Config { .. }), "{bad:?}: {err}");
        }
    }

    #[test]
    fn credentials_in_an_endpoint_are_refused_without_repeating_them() {
        for url in [
            "http://user:hunter2@a:2379",
            "user:hunter2@a:2379",
            "https://a:2379,http://me:hunter2@b:1",
        ] {
            let err = EtcdOptions::parse_endpoints(url).unwrap_err();
            let shown = err.to_string();
            assert!(matches!(err, Error::Config { .. }), "{url}: {shown}");
            assert!(!shown.contains("hunter2"), "{url}: {shown}");
            assert!(shown.contains("with_user"), "{url}: {shown}");
        }
    }

    #[test]
    fn options_have_finite_defaults_and_hide_secrets() {
        let options = EtcdOptions::new(["http://a:2379"])
            .with_user("me", "hunter2")
            .with_request_timeout(Duration::ZERO);
        assert_eq!(options.connect_timeout(), Duration::from_secs(5));
        assert_eq!(options.request_timeout(), Duration::from_secs(5));
        let shown = format!("{options:?}");
        assert!(
            shown.contains("me") && !shown.contains("hunter2"),
            "{shown}"
        );
    }
}
