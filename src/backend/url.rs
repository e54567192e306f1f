//! Registry addresses as Dubbo users write them (`dubbo.registry.address`), parsed without
//! I/O: `zookeeper://10.0.0.1:2181?backup=10.0.0.2:2181,10.0.0.3:2181&group=dev`,
//! `etcd://10.0.0.1:2379` (or `etcd3://`), `nacos://10.0.0.1:8848?namespace=dev`,
//! `memory://`.
//!
//! Credentials are never taken from a URL: a user name or password in the userinfo
//! (`zookeeper://user:pw@h:p`) or the query (`?username=…&password=…`) is refused, and the
//! message names neither. They come from [`super::ConnectOptions`] (the tool reads them from
//! the environment or a prompt).

use std::collections::BTreeMap;
use std::fmt;

use crate::error::{Error, Result};

/// The kind of registry a URL names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Scheme {
    /// `memory://`: the embedded store of this process.
    Memory,
    /// `etcd://` or `etcd3://`.
    Etcd,
    /// `zookeeper://`.
    ZooKeeper,
    /// `nacos://` (feature `nacos`).
    Nacos,
}

impl Scheme {
    /// The scheme's name as written in URLs (`etcd3` reads as `etcd`).
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Memory => "memory",
            Scheme::Etcd => "etcd",
            Scheme::ZooKeeper => "zookeeper",
            Scheme::Nacos => "nacos",
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A parsed registry URL. See the module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistryUrl {
    /// The kind of registry.
    pub scheme: Scheme,
    /// The servers as `host:port`: the URL's address first, then its `backup` list.
    pub servers: Vec<String>,
    /// The query parameters other than `backup` (Dubbo URLs carry many; each backend reads
    /// the ones it knows, such as `group` and `namespace`).
    pub params: BTreeMap<String, String>,
}

/// Parameters that hold secrets and are refused in a URL.
const SECRET_PARAMS: [&str; 3] = ["username", "password", "user"];
/// The longest URL accepted.
const MAX_URL_LEN: usize = 4096;

impl RegistryUrl {
    /// Parses `url`; see the module docs. Fails with [`Error::Config`] on an unknown scheme,
    /// credentials in the URL, a missing or malformed address.
    pub fn parse(url: &str) -> Result<RegistryUrl> {
        let url = url.trim();
        if url.len() > MAX_URL_LEN {
            return Err(Error::config(format!(
                "registry URL of {} bytes: the limit is {MAX_URL_LEN}",
                url.len()
            )));
        }
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(Error::config(format!(
                "registry URL {:?} has no scheme: write zookeeper://host:port, etcd://host:port, \
                 nacos://host:port or memory://",
                Error::shorten(url)
            )));
        };
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "memory" => Scheme::Memory,
            "etcd" | "etcd3" => Scheme::Etcd,
            "zookeeper" => Scheme::ZooKeeper,
            "nacos" => Scheme::Nacos,
            other => {
                return Err(Error::config(format!(
                    "unknown registry scheme {:?}: known are zookeeper, etcd (etcd3), nacos, memory",
                    Error::shorten(other)
                )));
            }
        };
        let rest = rest.split('#').next().unwrap_or_default();
        let (authority, query) = rest.split_once('?').unwrap_or((rest, ""));
        let authority = authority.trim_end_matches('/');
        if authority.contains('@') {
            let host = authority.rsplit_once('@').map_or("", |(_, host)| host);
            return Err(Error::config(format!(
                "registry URL {scheme}://…@{}: credentials in the URL are not accepted; give them \
                 in the connect options (the tool: --user NAME with the password in the \
                 environment or at the prompt)",
                Error::shorten(host)
            )));
        }
        if authority.contains('/') {
            return Err(Error::config(format!(
                "registry URL {scheme}://{}: a path is not accepted (use ?group= for a root)",
                Error::shorten(authority)
            )));
        }
        let mut params = BTreeMap::new();
        let mut servers = Vec::new();
        if !authority.is_empty() {
            servers.push(authority.to_owned());
        }
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let key = key.trim();
            if SECRET_PARAMS.contains(&key.to_ascii_lowercase().as_str()) {
                return Err(Error::config(format!(
                    "registry URL {scheme}://{}: the {key} parameter is not accepted; give \
                     credentials in the connect options (the tool: --user NAME with the \
                     password in the environment or at the prompt)",
                    Error::shorten(authority)
                )));
            }
            if key == "backup" {
                servers.extend(
                    value
                        .split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned),
                );
            } else {
                params.insert(key.to_owned(), value.trim().to_owned());
            }
        }
        for server in &servers {
            check_server(scheme, server)?;
        }
        match (scheme, servers.is_empty()) {
            (Scheme::Memory, false) => Err(Error::config(
                "memory:// takes no address: it is the embedded store of this process",
            )),
            (Scheme::Memory, true) => Ok(RegistryUrl {
                scheme,
                servers,
                params,
            }),
            (_, true) => Err(Error::config(format!(
                "registry URL {scheme}:// names no server: write {scheme}://host:port"
            ))),
            (_, false) => Ok(RegistryUrl {
                scheme,
                servers,
                params,
            }),
        }
    }

    /// A parameter's value, if given and not empty.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

/// Checks one `host:port` of a URL.
fn check_server(scheme: Scheme, server: &str) -> Result<()> {
    let bad = |reason: &str| {
        Err(Error::config(format!(
            "registry URL {scheme}://: server {:?} {reason}",
            Error::shorten(server)
        )))
    };
    let (host, port) = match server.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() => (host, port),
        _ => return bad("is not host:port"),
    };
    if port.parse::<u16>().map_or(true, |p| p == 0) {
        return bad("has no valid port");
    }
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("holds whitespace or control characters");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dubbo_addresses_parse() {
        let u = RegistryUrl::parse(
            "zookeeper://10.0.0.1:2181?backup=10.0.0.2:2181,10.0.0.3:2181&group=dev&timeout=3000",
        )
        .unwrap();
        assert_eq!(u.scheme, Scheme::ZooKeeper);
        assert_eq!(
            u.servers,
            ["10.0.0.1:2181", "10.0.0.2:2181", "10.0.0.3:2181"]
        );
        assert_eq!(u.param("group"), Some("dev"));
        assert_eq!(u.param("timeout"), Some("3000"));
        assert_eq!(
            RegistryUrl::parse("etcd3://127.0.0.1:2379/")
                .unwrap()
                .scheme,
            Scheme::Etcd
        );
        let m = RegistryUrl::parse("memory://").unwrap();
        assert!(m.servers.is_empty());
        assert_eq!(
            RegistryUrl::parse("nacos://h:8848?namespace=ns")
                .unwrap()
                .param("namespace"),
            Some("ns")
        );
        assert_eq!(
            RegistryUrl::parse("zookeeper://[::1]:2181")
                .unwrap()
                .servers,
            ["[::1]:2181"]
        );
    }

    #[test]
    fn credentials_are_refused_without_being_repeated() {
        for url in [
            "zookeeper://alice:s3cret@h:2181",
            "zookeeper://h:2181?username=alice&password=s3cret",
            "etcd://h:2379?password=s3cret",
            "nacos://h:8848?namespace=a&Password=s3cret",
        ] {
            let err = RegistryUrl::parse(url).unwrap_err().to_string();
            assert!(!err.contains("s3cret") && !err.contains("alice"), "{err}");
            assert!(err.contains("not accepted"), "{err}");
        }
    }

    #[test]
    fn malformed_urls_are_clear_errors() {
        for (url, says) in [
            ("consul://h:8500", "unknown registry scheme"),
            ("h:2181", "no scheme"),
            ("zookeeper://", "names no server"),
            ("zookeeper://h", "is not host:port"),
            ("zookeeper://h:99999", "no valid port"),
            ("zookeeper://h:2181/dubbo", "a path is not accepted"),
            ("memory://h:1", "takes no address"),
            ("zookeeper://h:2181?backup=x", "is not host:port"),
        ] {
            let err = RegistryUrl::parse(url).unwrap_err().to_string();
            assert!(err.contains(says), "{url}: {err}");
        }
        let long = format!("zookeeper://h:1?group={}", "g".repeat(5000));
        assert!(RegistryUrl::parse(&long).is_err());
    }
}
