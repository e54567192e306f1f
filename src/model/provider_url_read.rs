//! Reading interface-level provider URLs as a consumer finds them: a ZooKeeper node name
//! under `…/{interface}/providers`, or a Nacos instance of `providers:{interface}:…`. Pure:
//! no I/O.
//!
//! Every URL is untrusted input. It is bounded before anything is decoded (a node name by
//! three times [`MAX_URL_LEN`], its decoding and a Nacos instance's URL by [`MAX_URL_LEN`]),
//! decoded strictly (a `%` not followed by two hex digits, or bytes that are not UTF-8,
//! refuse the node), and read as Dubbo's `URL.valueOf` reads it: `{protocol}://{host}:{port}/
//! {path}?{key}={value}&…`, values raw. A URL without a port, with a port of 0 or over
//! 65535, with a protocol that is not a URL scheme, or whose parts [`ProviderUrl::validate`]
//! refuses (the rules the writer follows) is refused with a clear error; the caller skips
//! it and counts it. Nothing here panics on any input (see the property tests).
//!
//! Reading a URL says nothing of whether it can be called: see
//! [`ProviderUrl::is_callable`].

use std::collections::{BTreeMap, HashMap};

use super::metadata_service::is_grpc_compatible;
use super::provider_url::{MAX_URL_LEN, PROVIDERS_CATEGORY, ProviderUrl};
use crate::error::{Error, Result};

/// The longest ZooKeeper node name read: the longest URL, every byte `%XX`-encoded.
pub const MAX_NODE_LEN: usize = 3 * MAX_URL_LEN;

fn malformed(reason: String) -> Error {
    Error::malformed("interface-level URL", reason)
}

impl ProviderUrl {
    /// Reads a URL as Dubbo writes it (`URL.toFullString`). See the module docs.
    pub fn parse(text: &str) -> Result<ProviderUrl> {
        if text.len() > MAX_URL_LEN {
            return Err(malformed(format!(
                "{} bytes long, over {MAX_URL_LEN}",
                text.len()
            )));
        }
        let (head, query) = match text.split_once('?') {
            Some((head, query)) => (head, Some(query)),
            None => (text, None),
        };
        let Some((protocol, rest)) = head.split_once("://") else {
            return Err(malformed(format!(
                "no protocol (`{{protocol}}://`) in {:?}",
                Error::shorten(text)
            )));
        };
        let (authority, path) = match rest.split_once('/') {
            Some((authority, path)) => (authority, path),
            None => (rest, ""),
        };
        // A user part (`user:password@`) is never in a provider's URL: refused, not read.
        if authority.contains('@') {
            return Err(malformed("a user part before the host".into()));
        }
        let (host, port) = split_host_port(authority)?;
        let mut params = BTreeMap::new();
        for pair in query.into_iter().flat_map(|q| q.split('&')) {
            if pair.is_empty() {
                continue;
            }
            // `URL.valueOf`: a part without `=` is the key as its own value.
            let (key, value) = pair.split_once('=').unwrap_or((pair, pair));
            let value = value.trim();
            if key.is_empty() || value.is_empty() {
                continue;
            }
            params.insert(key.to_owned(), value.to_owned());
        }
        let path = if path.is_empty() {
            params.get("interface").cloned().unwrap_or_default()
        } else {
            path.to_owned()
        };
        let url = ProviderUrl {
            protocol: protocol.to_owned(),
            host,
            port,
            path,
            params,
        };
        url.check_read()?;
        Ok(url)
    }

    /// Reads the name of a node under `…/{interface}/providers` on ZooKeeper: the URL,
    /// `URLEncoder`-encoded (see [`form_decode`]).
    pub fn from_zookeeper_node(name: &str) -> Result<ProviderUrl> {
        if name.len() > MAX_NODE_LEN {
            return Err(malformed(format!(
                "a node name {} bytes long, over {MAX_NODE_LEN}",
                name.len()
            )));
        }
        ProviderUrl::parse(&form_decode(name)?)
    }

    /// Reads a Nacos instance of a `providers:…` service as Dubbo's `NacosRegistry` does:
    /// the protocol and path from the `protocol` and `path` metadata, every other metadata
    /// key a parameter (`category`, when there, must be `providers`).
    pub fn from_nacos(ip: &str, port: i32, metadata: &HashMap<String, String>) -> Result<Self> {
        let size: usize = metadata.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
        if size + ip.len() > MAX_URL_LEN {
            return Err(malformed(format!(
                "{} bytes of metadata, over {MAX_URL_LEN}",
                size + ip.len()
            )));
        }
        let port = u16::try_from(port)
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| malformed(format!("the port {port} is not a port")))?;
        let protocol = metadata
            .get("protocol")
            .filter(|p| !p.is_empty())
            .ok_or_else(|| malformed("no `protocol` in the instance's metadata".into()))?;
        let mut params: BTreeMap<String, String> = metadata
            .iter()
            .filter(|(key, value)| {
                !matches!(key.as_str(), "protocol" | "path") && !value.trim().is_empty()
            })
            .map(|(key, value)| (key.clone(), value.trim().to_owned()))
            .collect();
        if let Some(category) = params.remove("category")
            && category != PROVIDERS_CATEGORY
        {
            return Err(malformed(format!(
                "category {:?}, not {PROVIDERS_CATEGORY}",
                Error::shorten(&category)
            )));
        }
        let path = metadata
            .get("path")
            .filter(|p| !p.is_empty())
            .or_else(|| params.get("interface"))
            .cloned()
            .unwrap_or_default();
        let host = ip.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
        let url = ProviderUrl {
            protocol: protocol.clone(),
            host: host.unwrap_or(ip).to_owned(),
            port,
            path,
            params,
        };
        url.check_read()?;
        Ok(url)
    }

    /// Whether a consumer of this crate can call it: its protocol is Triple or gRPC. A
    /// `dubbo://` (Hessian) URL is read, listed and counted, never dialled.
    pub fn is_callable(&self) -> bool {
        is_grpc_compatible(&self.protocol)
    }

    /// Whether the provider takes calls: Dubbo's `RegistryDirectory` leaves out a URL with
    /// `disabled=true`, or (without `disabled`) `enabled=false`.
    pub fn is_enabled(&self) -> bool {
        match self.params.get("disabled") {
            Some(disabled) => !disabled.eq_ignore_ascii_case("true"),
            None => self
                .params
                .get("enabled")
                .is_none_or(|enabled| !enabled.eq_ignore_ascii_case("false")),
        }
    }

    /// The checks of a URL read: the writer's, as a malformed-input error; an interface is
    /// required (the `interface` parameter or the path).
    fn check_read(&self) -> Result<()> {
        self.validate().map_err(|e| match e {
            Error::Config { reason, .. } => malformed(
                reason
                    .strip_prefix("interface-level URL: ")
                    .unwrap_or(&reason)
                    .to_owned(),
            ),
            other => other,
        })?;
        crate::model::names::validate_interface(self.interface())
            .map_err(|e| malformed(format!("the interface: {e}")).caused_by(e))
    }
}

/// `{host}:{port}` or `[{IPv6}]:{port}`; the port is required.
fn split_host_port(authority: &str) -> Result<(String, u16)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| malformed("an IPv6 host without its `]`".into()))?;
        let port = after
            .strip_prefix(':')
            .ok_or_else(|| malformed(format!("no port after [{host}]")))?;
        (host, port)
    } else {
        authority
            .rsplit_once(':')
            .ok_or_else(|| malformed(format!("no port in {:?}", Error::shorten(authority))))?
    };
    if host.is_empty() {
        return Err(malformed("no host".into()));
    }
    let port =
        port.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
            malformed(format!("the port {:?} is not a port", Error::shorten(port)))
        })?;
    Ok((host.to_owned(), port))
}

/// Decodes what [`super::provider_url::form_encode`] (Java's `URLEncoder`) wrote: `%XX` is
/// the byte `XX`, `+` a space; a `%` without two hex digits after it, or bytes that are
/// not UTF-8, are refused.
pub fn form_decode(text: &str) -> Result<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = |at: usize| bytes.get(at).and_then(|b| char::from(*b).to_digit(16));
                let (Some(high), Some(low)) = (hex(i + 1), hex(i + 2)) else {
                    return Err(malformed(format!("a bad %-escape at byte {i}")));
                };
                out.push(u8::try_from(high * 16 + low).unwrap_or(0));
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| malformed("the decoded node name is not UTF-8".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ServiceInfo;
    use crate::model::provider_url::form_encode;

    /// The node a Dubbo Java 3.3.4 provider wrote, measured.
    const JAVA_NODE: &str = "tri%3A%2F%2F127.0.0.1%3A28441%2Fhelloworld.Greeter%3Fapplication%3Diface-java%26deprecated%3Dfalse%26dubbo%3D2.0.2%26dynamic%3Dtrue%26generic%3Dfalse%26interface%3Dhelloworld.Greeter%26logger%3Djdk%26metadata-service-port%3D28250%26metadata-service-protocol%3Dtri%26metadata-type%3Dlocal%26methods%3DsayHello%2CsayHelloAsync%26prefer.serialization%3Dhessian2%2Cfastjson2%26proxy%3Dnativestub%26release%3D3.3.4%26revision%3Dpeer%26side%3Dprovider%26timestamp%3D1796401531155";

    #[test]
    fn a_node_java_wrote_reads_back() {
        let url = ProviderUrl::from_zookeeper_node(JAVA_NODE).unwrap();
        assert_eq!(
            (url.protocol.as_str(), url.host.as_str(), url.port),
            ("tri", "127.0.0.1", 28441)
        );
        assert_eq!(url.path, "helloworld.Greeter");
        assert_eq!(url.interface(), "helloworld.Greeter");
        assert_eq!(url.params["methods"], "sayHello,sayHelloAsync");
        assert_eq!(url.params["timestamp"], "1796401531155");
        assert!(url.is_callable() && url.is_enabled());
        // Read and written again, it is the same node.
        assert_eq!(
            url.zookeeper_node("/dubbo").rsplit('/').next(),
            Some(JAVA_NODE)
        );
    }

    #[test]
    fn what_this_crate_writes_reads_back() {
        let service = ServiceInfo::new("shop.Orders$V2")
            .with_group("gray")
            .with_version("1.0.0")
            .with_param("note", "a=b%c grün");
        for host in ["10.0.0.7", "::1", "shop.example"] {
            let url = ProviderUrl::for_service("shop", host, 50051, &service, 7)
                .unwrap()
                .unwrap();
            let node = url.zookeeper_node("/dubbo");
            let name = node.rsplit('/').next().unwrap();
            assert_eq!(ProviderUrl::from_zookeeper_node(name).unwrap(), url);
            assert_eq!(ProviderUrl::parse(&url.to_full_string()).unwrap(), url);
            let metadata: HashMap<String, String> = url.nacos_metadata().into_iter().collect();
            assert_eq!(
                ProviderUrl::from_nacos(&url.host, 50051, &metadata).unwrap(),
                url
            );
        }
    }

    #[test]
    fn hostile_urls_are_refused_with_a_reason() {
        let refused = |text: &str| ProviderUrl::parse(text).unwrap_err().to_string();
        assert!(refused("tri://10.0.0.1/shop.A?interface=shop.A").contains("no port"));
        assert!(refused("tri://10.0.0.1:/shop.A").contains("not a port"));
        assert!(refused("tri://10.0.0.1:0/shop.A").contains("not a port"));
        assert!(refused("tri://10.0.0.1:70000/shop.A").contains("not a port"));
        assert!(refused("tri://[::1/shop.A").contains("IPv6"));
        assert!(refused("10.0.0.1:5/shop.A").contains("no protocol"));
        assert!(refused("t r://10.0.0.1:5/shop.A").contains("URL scheme"));
        assert!(refused("tri://u:p@10.0.0.1:5/shop.A").contains("user part"));
        assert!(refused("tri://10.0.0.1:5/").contains("interface"));
        assert!(refused("tri://10.0.0.1:5/a\nb").contains("path"));
        let huge = format!("tri://10.0.0.1:5/shop.A?k={}", "v".repeat(1 << 20));
        assert!(refused(&huge).contains("over"));
        let node = |name: &str| {
            ProviderUrl::from_zookeeper_node(name)
                .unwrap_err()
                .to_string()
        };
        assert!(node("tri%3A%2F%2Fh%3A1%2Fa%ZZ").contains("%-escape"));
        assert!(node("tri%3A%2F%2Fh%3A1%2Fa%2").contains("%-escape"));
        assert!(node("tri%3A%2F%2Fh%3A1%2Fa%FF").contains("UTF-8"));
        assert!(node(&"%41".repeat(MAX_NODE_LEN)).contains("over"));
        // Unknown protocols read (they are listed and explained), and are not callable.
        let dubbo = ProviderUrl::parse("dubbo://10.0.0.1:20880/shop.A?side=provider").unwrap();
        assert!(!dubbo.is_callable());
        let grpc = ProviderUrl::parse("grpc://[::1]:5/shop.A?disabled=true").unwrap();
        assert!(grpc.is_callable() && !grpc.is_enabled());
        assert_eq!(grpc.host, "::1");
        let off = ProviderUrl::parse("tri://h:5/shop.A?enabled=false").unwrap();
        assert!(!off.is_enabled());
    }

    #[test]
    fn nacos_instances_need_a_protocol_and_the_providers_category() {
        let metadata = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let ok = metadata(&[
            ("protocol", "tri"),
            ("path", "shop.A"),
            ("category", "providers"),
            ("interface", "shop.A"),
        ]);
        let url = ProviderUrl::from_nacos("10.0.0.1", 50051, &ok).unwrap();
        assert!(!url.params.contains_key("category"));
        let no_protocol = metadata(&[("path", "shop.A")]);
        let e = ProviderUrl::from_nacos("10.0.0.1", 1, &no_protocol).unwrap_err();
        assert!(e.to_string().contains("protocol"), "{e}");
        let consumers = metadata(&[("protocol", "tri"), ("path", "a.B"), ("category", "c")]);
        assert!(ProviderUrl::from_nacos("10.0.0.1", 1, &consumers).is_err());
        assert!(ProviderUrl::from_nacos("10.0.0.1", 0, &ok).is_err());
        assert!(ProviderUrl::from_nacos("10.0.0.1", -1, &ok).is_err());
        assert!(ProviderUrl::from_nacos("10.0.0.1", 70000, &ok).is_err());
        let big = metadata(&[
            ("protocol", "tri"),
            ("path", "a.B"),
            ("k", &"v".repeat(1 << 20)),
        ]);
        assert!(ProviderUrl::from_nacos("10.0.0.1", 1, &big).is_err());
    }

    proptest::proptest! {
        /// Any text, as a URL or as a node name, is read or refused: never a panic.
        #[test]
        fn any_text_is_read_or_refused(text in ".{0,300}") {
            let _ = ProviderUrl::parse(&text);
            let _ = ProviderUrl::from_zookeeper_node(&text);
            let _ = form_decode(&text);
        }

        /// Texts close to a URL: mutations of a valid one.
        #[test]
        fn mutated_urls_are_read_or_refused(
            cut in 0usize..200,
            insert in proptest::sample::select(vec!["%", "%4", "[", "]", ":", "/", "?", "&", "=", "@", "\u{0}", "é", "%C3", "+"]),
        ) {
            let url = "tri://[::1]:50051/shop.A?application=shop&interface=shop.A&weight=100";
            let at = cut.min(url.len());
            let at = (0..=at).rev().find(|i| url.is_char_boundary(*i)).unwrap_or(0);
            let text = format!("{}{insert}{}", &url[..at], &url[at..]);
            if let Ok(read) = ProviderUrl::parse(&text) {
                proptest::prop_assert!(read.validate().is_ok());
            }
            let _ = ProviderUrl::from_zookeeper_node(&form_encode(&text));
            let _ = ProviderUrl::from_zookeeper_node(&text);
        }

        /// Whatever is written for a service reads back the same.
        #[test]
        fn written_urls_read_back(
            interface in "[a-z]{1,8}(\\.[A-Z][a-z]{0,8}){0,2}",
            value in "[ -~]{0,20}",
            port in 1u16..,
        ) {
            let service = ServiceInfo::new(interface).with_param("k", value);
            if let Ok(Some(url)) = ProviderUrl::for_service("app", "10.1.2.3", port, &service, 1) {
                let node = url.zookeeper_node("/dubbo");
                let name = node.rsplit('/').next().unwrap();
                proptest::prop_assert_eq!(ProviderUrl::from_zookeeper_node(name).unwrap(), url);
            }
        }
    }
}
