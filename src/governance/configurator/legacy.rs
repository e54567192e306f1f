//! The legacy configurator document: a JSON list of override URLs
//! (`["override://0.0.0.0/shop.OrderService?timeout=3000", …]`), as Dubbo before 2.7
//! wrote them and Java 3.3's `ConfigParser.parseConfigurators` still reads first.
//!
//! Each URL is read as `URL.valueOf` reads it (`{protocol}://{host}[:{port}]/{path}?{k}={v}&…`,
//! values raw) and applied as `Configurator.toConfigurators` builds it: `override://` sets
//! its parameters, `absent://` only those a provider lacks, `empty://` clears the list; the
//! `anyhost` parameter is dropped and a URL left with no parameters skipped. With no
//! `configVersion` parameter Java matches them by the pre-v2.7 rules (see
//! `Override::host_matches`): `enabled`, `~key` conditions, `application`, `side`,
//! `providerAddresses` and the service (`interface` or the path, with `group`/`version`)
//! as for a document's items.
//!
//! Where Java's `parseJsonArray` fails (a URL it cannot read) it falls back to YAML, which
//! fails on a list: the document is refused here, the previous one staying. A URL with a
//! user part (`user@host`), which Java would read, is refused too.

use std::collections::BTreeMap;

use super::item::ConfiguratorItem;
use super::matching::Override;
use crate::governance::rule_yaml::rule_error;

/// The parameter Java drops from every override URL (`anyhost`).
const ANYHOST_KEY: &str = "anyhost";

/// The overrides of a legacy list, in the list's order, each with the item it shows as:
/// `None` when `text` is not a JSON list of strings (it is then read as YAML), an error
/// when one of its URLs cannot be read.
pub(super) fn read(
    key: &str,
    text: &str,
) -> Option<crate::error::Result<Vec<(Override, ConfiguratorItem)>>> {
    let urls: Vec<String> = serde_json::from_str(text).ok()?;
    if urls.is_empty() {
        // Java reads no URL, and falls back to YAML: a list is no document.
        return None;
    }
    let mut out = Vec::new();
    for url in &urls {
        match read_url(key, url) {
            Ok(Some(read)) => out.push(read),
            Ok(None) => {}
            // `empty://`: Java clears every configurator read so far, and stops.
            Err(None) => return Some(Ok(Vec::new())),
            Err(Some(e)) => return Some(Err(e)),
        }
    }
    Some(Ok(out))
}

/// One URL: its override, `None` when it has no parameter left; `Err(None)` for
/// `empty://`.
#[allow(clippy::type_complexity)]
fn read_url(
    key: &str,
    url: &str,
) -> Result<Option<(Override, ConfiguratorItem)>, Option<crate::error::Error>> {
    let shown = crate::error::Error::shorten(url);
    let bad = |why: &str| Some(rule_error(key, format!("override URL {shown:?}: {why}")));
    let (head, query) = url.split_once('?').unwrap_or((url, ""));
    let (protocol, rest) = head
        .split_once("://")
        .ok_or_else(|| bad("no protocol (override://, absent:// or empty://)"))?;
    let absent = match protocol {
        "override" => false,
        "absent" => true,
        "empty" => return Err(None),
        _ => return Err(bad("its protocol is none of override, absent and empty")),
    };
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    if authority.contains('@') {
        return Err(bad("a user part before the host is not read"));
    }
    let (host, port) = match authority.rfind(':') {
        Some(i) if !authority[..i].contains(':') || authority.starts_with('[') => {
            let port = authority[i + 1..]
                .parse::<i32>()
                .map_err(|_| bad("its port is not a number"))?;
            (&authority[..i], port)
        }
        _ => (authority, 0),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(bad("it names no host"));
    }
    let mut params = BTreeMap::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, pair));
        if !k.is_empty() && !v.is_empty() {
            params.insert(k.to_owned(), v.to_owned());
        }
    }
    params.remove(ANYHOST_KEY);
    if params.is_empty() {
        return Ok(None);
    }
    let written = ConfiguratorItem {
        side: params.get("side").cloned(),
        addresses: vec![if port == 0 {
            host.to_owned()
        } else {
            format!("{host}:{port}")
        }],
        services: vec![path.to_owned()],
        parameters: params.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        ..ConfiguratorItem::default()
    };
    let item = Override {
        host: host.to_owned(),
        legacy_port: Some(port),
        absent,
        path: path.to_owned(),
        params,
        condition: None,
    };
    Ok(Some((item, written)))
}
