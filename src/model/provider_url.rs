//! The interface-level provider URL: what a provider writes for each exported service when
//! it registers at the interface level, as Dubbo Java 3.3 writes it. Pure: no I/O.
//!
//! Measured on a real Dubbo Java 3.3.4 provider of a Triple service
//! (`register-mode=interface`): the URL is
//! `{protocol}://{host}:{port}/{path}?{key}={value}&…`, its parameters sorted by key, each
//! value trimmed and written raw (`URL.toFullString`); empty values are never written. The
//! parameters it registers for a Triple service are `application`, `deprecated=false`,
//! `dubbo=2.0.2`, `dynamic=true`, `generic=false`, `interface`, `methods` (from Java
//! reflection), `release` (the Dubbo release), `side=provider`, `timestamp` (the export's, in
//! ms) and the service's own (`group`, `version`, `weight`, `dubbo.tag`, `warmup`, those a
//! provider-side rule sets such as `disabled`), plus some of the Java application's settings
//! (`metadata-type`, `prefer.serialization`, `proxy`, `logger`, `revision`, …). `pid`,
//! `anyhost`, `bind.*`, `register-mode` and `category` are not in it.
//!
//! [`ProviderUrl::for_service`] writes the same for a Rust service: the service's own
//! parameters, then those a Java consumer needs and reads, with the Rust equivalents of the
//! Java-specific ones: `release` names this crate (dubbo-go writes `dubbo-golang-{version}`
//! the same way; Java reads it only as text), and `methods` is left out (a service declared
//! here does not list its methods; a Java consumer calls without it). The Java application
//! settings are left out: they describe a Java process.
//!
//! Where it goes (see the backends): ZooKeeper
//! `/{root}/{URL-encoded interface}/providers/{URL-encoded full URL}`
//! ([`ProviderUrl::zookeeper_node`], `URLEncoder` form encoding); Nacos an instance of
//! service `providers:{interface}:{version}:{group}` ([`ProviderUrl::nacos_service`]) whose
//! metadata is every parameter plus `category`, `protocol` and `path`
//! ([`ProviderUrl::nacos_metadata`]).
//!
//! A value holding `&` cannot be written in Java's form (its readers split the parameters
//! there), nor a key holding `=`, `&` or `?`: such a parameter is refused with a clear error,
//! never written garbled. Control characters are refused too.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::error::{Error, Result};
use crate::model::ServiceInfo;

/// The `dubbo` parameter: the Dubbo protocol version Java providers write.
pub const DUBBO_PROTOCOL_VERSION: &str = "2.0.2";
/// The `release` parameter of a Rust provider's URL: this crate and its version.
pub const RELEASE: &str = concat!("introspect-", env!("CARGO_PKG_VERSION"));
/// The category of provider URLs (the ZooKeeper node under the interface, the Nacos
/// service's prefix, the `category` metadata key on Nacos).
pub const PROVIDERS_CATEGORY: &str = "providers";
/// The longest full URL written (the ZooKeeper node name is its encoding, up to three times
/// as long).
pub const MAX_URL_LEN: usize = 16 * 1024;

/// Parameters the provider sets itself; a service's own parameter of the same name is
/// replaced.
const PROVIDER_KEYS: [&str; 8] = [
    "application",
    "interface",
    "side",
    "group",
    "version",
    "timestamp",
    "dynamic",
    "release",
];

/// One interface-level provider URL. See the module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderUrl {
    /// The protocol: `tri`, `grpc`, …
    pub protocol: String,
    /// The host consumers dial: a name, an IPv4 address or an IPv6 one (unbracketed).
    pub host: String,
    /// The port consumers dial.
    pub port: u16,
    /// The request path, usually the interface name.
    pub path: String,
    /// The parameters, sorted by key.
    pub params: BTreeMap<String, String>,
}

impl ProviderUrl {
    /// The URL a provider of `app` at `host` writes for `service` (on its own port, or on
    /// `instance_port`), exported at `timestamp_ms` (ms since the epoch). `None` for a
    /// service without a protocol (it is exported to no one). Fails on a parameter that
    /// cannot be written (see the module docs).
    pub fn for_service(
        app: &str,
        host: &str,
        instance_port: u16,
        service: &ServiceInfo,
        timestamp_ms: u64,
    ) -> Result<Option<ProviderUrl>> {
        if service.protocol.is_empty() {
            return Ok(None);
        }
        let mut params: BTreeMap<String, String> = BTreeMap::new();
        for (key, value) in &service.params {
            if PROVIDER_KEYS.contains(&key.as_str()) {
                continue;
            }
            params.insert(key.clone(), value.trim().to_owned());
        }
        for (key, default) in [
            ("deprecated", "false"),
            ("dubbo", DUBBO_PROTOCOL_VERSION),
            ("generic", "false"),
        ] {
            params
                .entry(key.to_owned())
                .or_insert_with(|| default.to_owned());
        }
        params.insert("application".into(), app.to_owned());
        params.insert("interface".into(), service.name.clone());
        params.insert("side".into(), "provider".into());
        // Always ephemeral: the record goes with the provider.
        params.insert("dynamic".into(), "true".into());
        params.insert("release".into(), RELEASE.into());
        if timestamp_ms > 0 {
            params.insert("timestamp".into(), timestamp_ms.to_string());
        }
        if !service.group.is_empty() {
            params.insert("group".into(), service.group.clone());
        }
        if !service.version.is_empty() {
            params.insert("version".into(), service.version.clone());
        }
        // Java never writes an empty value.
        params.retain(|_, value| !value.is_empty());
        let url = ProviderUrl {
            protocol: service.protocol.clone(),
            host: host.to_owned(),
            port: if service.port > 0 {
                service.port
            } else {
                instance_port
            },
            path: if service.path.is_empty() {
                service.name.clone()
            } else {
                service.path.clone()
            },
            params,
        };
        url.validate()?;
        Ok(Some(url))
    }

    /// The interface (the `interface` parameter, else the path).
    pub fn interface(&self) -> &str {
        self.params.get("interface").unwrap_or(&self.path)
    }

    /// The `group` parameter, empty for none.
    pub fn group(&self) -> &str {
        self.params.get("group").map_or("", String::as_str)
    }

    /// The `version` parameter, empty for none.
    pub fn version(&self) -> &str {
        self.params.get("version").map_or("", String::as_str)
    }

    /// What tells one exported service from another at one address:
    /// `{protocol}://{interface}:{version}:{group}`.
    pub fn key(&self) -> String {
        format!(
            "{}://{}:{}:{}",
            self.protocol,
            self.interface(),
            self.version(),
            self.group()
        )
    }

    /// Checks that the URL can be written and read back as Dubbo reads it.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(Error::config(format!("interface-level URL: {what}")));
        let plain = |s: &str| !s.chars().any(char::is_control);
        if self.protocol.is_empty()
            || !self
                .protocol
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        {
            return bad(format!(
                "the protocol {:?} is not a URL scheme",
                self.protocol
            ));
        }
        if self.host.is_empty()
            || !plain(&self.host)
            || self.host.contains(['/', '?', '&', '@', ' ', '[', ']'])
        {
            return bad(format!("the host {:?} cannot be written", self.host));
        }
        if self.port == 0 {
            return bad("the port is 0".into());
        }
        if self.path.is_empty() || !plain(&self.path) || self.path.contains(['?', '&', ' ']) {
            return bad(format!("the path {:?} cannot be written", self.path));
        }
        for (key, value) in &self.params {
            if key.is_empty()
                || key.trim() != key
                || !plain(key)
                || key.contains(['=', '&', '?', '#'])
            {
                return bad(format!(
                    "the parameter name {key:?} cannot be written (Dubbo reads `&`, `=`, `?` \
                     and `#` as separators)"
                ));
            }
            if !plain(value) || value.contains('&') || value.trim() != value {
                return bad(format!(
                    "the value of parameter {key} ({value:?}) cannot be written: Dubbo writes \
                     values raw and splits parameters at `&`"
                ));
            }
        }
        let len = self.to_full_string().len();
        if len > MAX_URL_LEN {
            return bad(format!("{len} bytes long, over {MAX_URL_LEN}"));
        }
        Ok(())
    }

    /// The URL as Dubbo's `URL.toFullString` writes it: parameters sorted by key, raw.
    pub fn to_full_string(&self) -> String {
        let mut out = String::new();
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let _ = write!(
            out,
            "{}://{host}:{}/{}",
            self.protocol, self.port, self.path
        );
        for (i, (key, value)) in self.params.iter().enumerate() {
            out.push(if i == 0 { '?' } else { '&' });
            out.push_str(key);
            out.push('=');
            out.push_str(value);
        }
        out
    }

    /// The ZooKeeper node path of this URL under `root` (`/dubbo`, or `/{group}`):
    /// `{root}/{URL-encoded interface}/providers/{URL-encoded full URL}`.
    pub fn zookeeper_node(&self, root: &str) -> String {
        format!(
            "{}/{}/{PROVIDERS_CATEGORY}/{}",
            root.trim_end_matches('/'),
            form_encode(self.interface()),
            form_encode(&self.to_full_string())
        )
    }

    /// The Nacos service of this URL, before the naming client's own rewriting of `$`:
    /// `providers:{interface}:{version}:{group}`, empty slots kept.
    pub fn nacos_service(&self) -> String {
        format!(
            "{PROVIDERS_CATEGORY}:{}:{}:{}",
            self.interface(),
            self.version(),
            self.group()
        )
    }

    /// The Nacos instance metadata of this URL: every parameter, plus `category`, `protocol`
    /// and `path` (`NacosRegistry.createInstance`).
    pub fn nacos_metadata(&self) -> BTreeMap<String, String> {
        let mut metadata = self.params.clone();
        metadata
            .entry("category".into())
            .or_insert_with(|| PROVIDERS_CATEGORY.into());
        metadata.insert("protocol".into(), self.protocol.clone());
        metadata.insert("path".into(), self.path.clone());
        metadata
    }
}

/// `value` as Java's `URLEncoder.encode(value, "UTF-8")` writes it (Dubbo's `URL.encode`):
/// ASCII letters, digits and `.`, `-`, `*`, `_` kept, a space as `+`, every other byte of
/// the UTF-8 as `%XX` (upper-case).
pub fn form_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for byte in value.bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'*' | b'_' => {
                out.push(char::from(byte));
            }
            b' ' => out.push('+'),
            _ => {
                let _ = write!(out, "%{byte:02X}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The node a Dubbo Java 3.3.4 provider wrote, measured (its Java-only parameters aside).
    const JAVA_NODE: &str = "tri%3A%2F%2F127.0.0.1%3A28441%2Fhelloworld.Greeter%3Fapplication%3Diface-java%26deprecated%3Dfalse%26dubbo%3D2.0.2%26dynamic%3Dtrue%26generic%3Dfalse%26interface%3Dhelloworld.Greeter%26logger%3Djdk%26metadata-service-port%3D28250%26metadata-service-protocol%3Dtri%26metadata-type%3Dlocal%26methods%3DsayHello%2CsayHelloAsync%26prefer.serialization%3Dhessian2%2Cfastjson2%26proxy%3Dnativestub%26release%3D3.3.4%26revision%3Dpeer%26side%3Dprovider%26timestamp%3D1796401531155";

    fn greeter() -> ServiceInfo {
        ServiceInfo::new("helloworld.Greeter")
    }

    #[test]
    fn encoding_is_javas_url_encoder() {
        assert_eq!(form_encode("helloworld.Greeter"), "helloworld.Greeter");
        assert_eq!(form_encode("a b*c_d-e"), "a+b*c_d-e");
        assert_eq!(
            form_encode("tri://h:1/p?a=b&c=d,e"),
            "tri%3A%2F%2Fh%3A1%2Fp%3Fa%3Db%26c%3Dd%2Ce"
        );
        assert_eq!(form_encode("100%"), "100%25");
        assert_eq!(form_encode("grün"), "gr%C3%BCn");
        assert_eq!(form_encode("a~b$c"), "a%7Eb%24c");
        assert_eq!(form_encode(""), "");
    }

    #[test]
    fn the_url_of_a_triple_service_has_javas_form_and_parameters() {
        let url = ProviderUrl::for_service(
            "iface-rust",
            "127.0.0.1",
            28441,
            &greeter(),
            1_796_401_531_155,
        )
        .unwrap()
        .unwrap();
        let release = RELEASE;
        assert_eq!(
            url.to_full_string(),
            format!(
                "tri://127.0.0.1:28441/helloworld.Greeter?application=iface-rust&deprecated=false\
                 &dubbo=2.0.2&dynamic=true&generic=false&interface=helloworld.Greeter\
                 &release={release}&side=provider&timestamp=1796401531155"
            )
        );
        // Every parameter Java writes is written, but for the Java process's own.
        let java = crate::model::provider_url_read::form_decode(JAVA_NODE).unwrap();
        let (_, query) = java.split_once('?').unwrap();
        let java_only = [
            "logger",
            "metadata-service-port",
            "metadata-service-protocol",
            "metadata-type",
            "methods",
            "prefer.serialization",
            "proxy",
            "revision",
        ];
        for pair in query.split('&') {
            let (key, _) = pair.split_once('=').unwrap();
            assert!(
                java_only.contains(&key) || url.params.contains_key(key),
                "{key} is missing"
            );
        }
        assert_eq!(
            url.zookeeper_node("/dubbo"),
            format!(
                "/dubbo/helloworld.Greeter/providers/{}",
                form_encode(&url.to_full_string())
            )
        );
        assert_eq!(url.nacos_service(), "providers:helloworld.Greeter::");
        let metadata = url.nacos_metadata();
        assert_eq!(metadata["category"], "providers");
        assert_eq!(metadata["protocol"], "tri");
        assert_eq!(metadata["path"], "helloworld.Greeter");
        assert_eq!(metadata["side"], "provider");
    }

    #[test]
    fn group_version_and_the_services_own_parameters() {
        let service = ServiceInfo::new("shop.Orders$V2")
            .with_group("gray")
            .with_version("1.0.0")
            .with_port(7001)
            .with_param("weight", "300")
            .with_param("dubbo.tag", " canary ")
            .with_param("disabled", "true")
            .with_param("note", "a=b%c grün")
            .with_param("empty", "")
            .with_param("application", "spoofed")
            .with_param("deprecated", "true");
        let url = ProviderUrl::for_service("shop", "::1", 50051, &service, 0)
            .unwrap()
            .unwrap();
        assert_eq!(url.port, 7001);
        assert_eq!(url.params["application"], "shop");
        assert_eq!(url.params["group"], "gray");
        assert_eq!(url.params["version"], "1.0.0");
        assert_eq!(url.params["dubbo.tag"], "canary");
        assert_eq!(url.params["deprecated"], "true");
        assert!(!url.params.contains_key("empty"));
        assert!(!url.params.contains_key("timestamp"));
        let full = url.to_full_string();
        assert!(
            full.starts_with("tri://[::1]:7001/shop.Orders$V2?"),
            "{full}"
        );
        assert!(full.contains("&note=a=b%c grün&"), "{full}");
        assert_eq!(url.nacos_service(), "providers:shop.Orders$V2:1.0.0:gray");
        assert_eq!(url.key(), "tri://shop.Orders$V2:1.0.0:gray");
        let node = url.zookeeper_node("/dev/");
        assert!(
            node.starts_with("/dev/shop.Orders%24V2/providers/tri%3A%2F%2F%5B%3A%3A1%5D%3A7001%2F"),
            "{node}"
        );
        assert!(node.contains("note%3Da%3Db%25c+gr%C3%BCn"), "{node}");
    }

    #[test]
    fn parameters_dubbo_cannot_read_back_are_refused() {
        let refused = |service: ServiceInfo| {
            ProviderUrl::for_service("shop", "10.0.0.7", 50051, &service, 1)
                .unwrap_err()
                .to_string()
        };
        assert!(refused(greeter().with_param("a", "x&y")).contains("splits parameters at `&`"));
        assert!(refused(greeter().with_param("a=b", "x")).contains("parameter name"));
        assert!(refused(greeter().with_param("a&b", "x")).contains("parameter name"));
        assert!(refused(greeter().with_param("a", "x\ny")).contains("cannot be written"));
        assert!(refused(greeter().with_param("k", "v".repeat(MAX_URL_LEN))).contains("bytes long"));
        assert!(refused(greeter().with_protocol("t r")).contains("URL scheme"));
        let none =
            ProviderUrl::for_service("shop", "h", 1, &greeter().with_protocol(""), 1).unwrap();
        assert!(none.is_none());
        let zero = ProviderUrl::for_service("shop", "h", 0, &greeter(), 1).unwrap_err();
        assert!(zero.to_string().contains("port is 0"));
    }
}
