//! Interface-level discovery, the pre-Dubbo-3 model, as a yardstick for the benchmarks only
//! (not a product feature).
//!
//! A provider registers one URL per exported interface per protocol per instance under
//! `/dubbo/{interface}/providers/{encoded protocol://host:port}`, the value being the full
//! provider URL (service parameters plus the volatile per-process ones, about 1 KB). A
//! consumer lists and watches `/dubbo/{interface}/providers/` for every interface it uses and
//! parses each URL into protocol, host, port, path and a parameter map, as Dubbo's `URL` does.
//!
//! It is kind to the baseline: keys are the short `protocol://host:port` (Dubbo's are the
//! whole encoded URL), and a parsed URL is a Rust struct, not a Java object with UTF-16
//! strings and object headers.

use std::collections::BTreeMap;

use introspect::Result;
use introspect::store::{LeaseId, Store, Watch, WatchEvent};

use crate::common::{INTERFACES, PROTOCOLS, service_params};

/// `/dubbo/{interface}/providers/`.
pub fn providers_prefix(interface: &str) -> String {
    format!("/dubbo/{interface}/providers/")
}

/// The key of one provider URL.
pub fn url_key(interface: &str, protocol: &str, host: &str, port: u16) -> String {
    format!("/dubbo/{interface}/providers/{protocol}%3A%2F%2F{host}%3A{port}")
}

/// The full provider URL of one interface and protocol on one instance.
pub fn provider_url(
    interface: &str,
    protocol: &str,
    host: &str,
    port: u16,
    variant: usize,
    pid: u32,
) -> String {
    let mut params = service_params(interface, protocol, variant);
    // The volatile parameters every Dubbo 2 URL carries; app-level metadata leaves them out.
    params.insert("anyhost".into(), "true".into());
    params.insert("bind.ip".into(), host.into());
    params.insert("bind.port".into(), port.to_string());
    params.insert("pid".into(), pid.to_string());
    params.insert(
        "timestamp".into(),
        (1_718_000_000_000u64 + u64::from(pid)).to_string(),
    );
    let query: Vec<String> = params.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{protocol}://{host}:{port}/{interface}?{}", query.join("&"))
}

/// Registers one instance the interface-level way: 8 interfaces × 5 protocols URLs, bound
/// to `lease` when given. Returns how many keys were written.
pub async fn register_instance(
    store: &dyn Store,
    host: &str,
    port: u16,
    variant: usize,
    lease: Option<LeaseId>,
) -> Result<usize> {
    let pid = 10_000 + (port as u32);
    let mut written = 0;
    for interface in INTERFACES {
        for protocol in PROTOCOLS {
            let url = provider_url(interface, protocol, host, port, variant, pid);
            store
                .put(
                    &url_key(interface, protocol, host, port),
                    url.into_bytes(),
                    lease,
                )
                .await?;
            written += 1;
        }
    }
    Ok(written)
}

/// A provider URL as a consumer holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedUrl {
    /// The protocol.
    pub protocol: String,
    /// The host.
    pub host: String,
    /// The port.
    pub port: u16,
    /// The path (the interface).
    pub path: String,
    /// Every query parameter.
    pub params: BTreeMap<String, String>,
}

impl ParsedUrl {
    /// Parses `protocol://host:port/path?k=v&...`.
    pub fn parse(url: &str) -> Option<ParsedUrl> {
        let (protocol, rest) = url.split_once("://")?;
        let (address, rest) = rest.split_once('/')?;
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (host, port) = address.rsplit_once(':')?;
        let params = query
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                (k.to_owned(), v.to_owned())
            })
            .collect();
        Some(ParsedUrl {
            protocol: protocol.to_owned(),
            host: host.to_owned(),
            port: port.parse().ok()?,
            path: path.to_owned(),
            params,
        })
    }
}

/// The interface-level consumer: the parsed provider URLs of every interface it uses, by key.
#[derive(Default)]
pub struct BaselineConsumer {
    /// Interface → key → parsed URL.
    pub by_interface: BTreeMap<String, BTreeMap<String, ParsedUrl>>,
}

impl BaselineConsumer {
    /// Lists and parses every provider URL of `interfaces`; returns the consumer and the
    /// lowest store revision read (watch from `revision + 1`).
    pub async fn list(store: &dyn Store, interfaces: &[&str]) -> Result<(Self, i64)> {
        let mut consumer = BaselineConsumer::default();
        let mut revision = i64::MAX;
        for interface in interfaces {
            let range = store.get_prefix(&providers_prefix(interface)).await?;
            revision = revision.min(range.revision);
            let urls = consumer
                .by_interface
                .entry((*interface).to_owned())
                .or_default();
            for kv in range.kvs {
                if let Some(url) = std::str::from_utf8(&kv.value)
                    .ok()
                    .and_then(ParsedUrl::parse)
                {
                    urls.insert(kv.key, url);
                }
            }
        }
        Ok((consumer, revision))
    }

    /// Applies one watch event of `interface`.
    pub fn apply(&mut self, interface: &str, event: &WatchEvent) {
        let urls = self.by_interface.entry(interface.to_owned()).or_default();
        match event {
            WatchEvent::Put(kv) => {
                if let Some(url) = std::str::from_utf8(&kv.value)
                    .ok()
                    .and_then(ParsedUrl::parse)
                {
                    urls.insert(kv.key.clone(), url);
                }
            }
            WatchEvent::Delete { key, .. } => {
                urls.remove(key);
            }
        }
    }

    /// How many addresses (URLs) the consumer holds.
    pub fn len(&self) -> usize {
        self.by_interface.values().map(BTreeMap::len).sum()
    }
}

/// Watches the providers of every interface in `interfaces` from `from_revision`.
pub async fn watch_all(
    store: &dyn Store,
    interfaces: &[&str],
    from_revision: i64,
) -> Result<Vec<(String, Watch)>> {
    let mut watches = Vec::with_capacity(interfaces.len());
    for interface in interfaces {
        let watch = store
            .watch_prefix(&providers_prefix(interface), from_revision)
            .await?;
        watches.push(((*interface).to_owned(), watch));
    }
    Ok(watches)
}
