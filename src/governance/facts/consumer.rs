//! The consumer as rules see it: the parameters of its URL, as Dubbo Java 3.3 builds a
//! reference's consumer URL (`ReferenceConfig.appendConfig`, `RegistryProtocol.doRefer`),
//! which is what a condition rule's `when` side and its `then` side's `$name` read.
//!
//! One resolver has one [`ConsumerIdentity`] (its app, host and the embedder's own
//! parameters); each balanced channel, one reference of one interface, version, group and
//! tag, routes by [`ConsumerIdentity::for_channel`] of it, so two channels of one resolver
//! each see their own `interface` and `dubbo.tag`.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::governance::CallTag;
use crate::model::provider_url::{DUBBO_PROTOCOL_VERSION, RELEASE};

/// The protocol a channel's consumer URL names: what a Java reference of a Triple service
/// says (`protocol="tri"`), as balanced channels speak Triple (gRPC over HTTP/2).
pub(crate) const CONSUMER_PROTOCOL: &str = "tri";

/// The consumer URL's keys the library sets itself, from the resolver and the channel,
/// which an embedder's parameter may not name: the reference's identity (`interface`,
/// `path`, `version`, `group`, `protocol`, `side`), who the consumer is (`application`,
/// `host`, `address`, `register.ip`, `pid`), its tag (`dubbo.tag`, `dubbo.force.tag`: set
/// with `ChannelOptions::tag`/`force_tag`), the framework's (`dubbo`, `release`), and
/// what a rule reads from the call instead (`method`, `methods`).
pub(crate) const RESERVED_CONSUMER_KEYS: [&str; 18] = [
    "interface",
    "path",
    "version",
    "group",
    "protocol",
    "side",
    "application",
    "host",
    "address",
    "port",
    "register.ip",
    "pid",
    "dubbo.tag",
    "dubbo.force.tag",
    "dubbo",
    "release",
    "method",
    "methods",
];

/// The longest key of an embedder's consumer parameter, in bytes.
pub(crate) const MAX_CONSUMER_PARAM_KEY: usize = 128;
/// The longest value of an embedder's consumer parameter, in bytes.
pub(crate) const MAX_CONSUMER_PARAM_VALUE: usize = 1024;
/// The most parameters an embedder may set on one consumer.
pub(crate) const MAX_CONSUMER_PARAMS: usize = 64;

/// Who the consumer is, as rules match it: its app (empty when unknown: rules keyed by the
/// consumer's app are then not read), its host, and the parameters of its URL.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConsumerIdentity {
    /// The consumer's application.
    pub app: String,
    /// The consumer's own host.
    pub host: String,
    /// The consumer URL's parameters (`application`, `side`, and for a channel
    /// `interface`, `dubbo.tag`, ...), by key.
    pub params: BTreeMap<String, String>,
}

impl ConsumerIdentity {
    /// A consumer of `app` (none: unknown) on `host` (none: the IP of the interface that
    /// routes outward, else loopback), with the parameters Java's consumer URL carries for
    /// every reference of an application: `side=consumer`, `application`, `register.ip`,
    /// `pid`, `dubbo`, `release`.
    pub fn new(app: Option<String>, host: Option<String>) -> ConsumerIdentity {
        let app = app.unwrap_or_default();
        let host = host.unwrap_or_else(crate::outward_ip::consumer_host);
        let mut params = BTreeMap::from([
            ("side".to_owned(), "consumer".to_owned()),
            ("register.ip".to_owned(), host.clone()),
            ("pid".to_owned(), std::process::id().to_string()),
            ("dubbo".to_owned(), DUBBO_PROTOCOL_VERSION.to_owned()),
            ("release".to_owned(), RELEASE.to_owned()),
        ]);
        if !app.is_empty() {
            params.insert("application".to_owned(), app.clone());
        }
        ConsumerIdentity { app, host, params }
    }

    /// Adds the embedder's own parameter `key=value` (as a Java reference's `parameters`),
    /// replacing one of the same key. Fails, leaving the identity as it was, on a key
    /// that `check_param` refuses.
    pub(crate) fn set_param(&mut self, key: &str, value: &str) -> Result<()> {
        check_param(key, value)?;
        let own = self
            .params
            .keys()
            .filter(|k| !is_library_key(k) && k.as_str() != key)
            .count();
        if own >= MAX_CONSUMER_PARAMS {
            return Err(Error::config(format!(
                "consumer parameter {key:?}: at most {MAX_CONSUMER_PARAMS} parameters"
            )));
        }
        self.params.insert(key.to_owned(), value.to_owned());
        Ok(())
    }

    /// This identity with the parameters `extra` added (a channel's own, over the
    /// resolver's), each checked as [`set_param`](Self::set_param) does.
    pub(crate) fn with_params<'p>(
        &self,
        extra: impl IntoIterator<Item = (&'p String, &'p String)>,
    ) -> Result<ConsumerIdentity> {
        let mut identity = self.clone();
        for (key, value) in extra {
            identity.set_param(key, value)?;
        }
        Ok(identity)
    }

    /// What a balanced channel of this consumer routes by: its consumer URL as a reference
    /// of `interface` (also its `path`), `version` and `group` (when set), `protocol`
    /// [`CONSUMER_PROTOCOL`], tagged with the channel's own `tag` (`dubbo.tag`, and
    /// `dubbo.force.tag=true` when it forces tags), over this identity's parameters.
    pub(crate) fn for_channel(
        &self,
        interface: &str,
        version: Option<&str>,
        group: Option<&str>,
        tag: &CallTag,
    ) -> ConsumerIdentity {
        let mut params = self.params.clone();
        let mut set = |key: &str, value: &str| {
            params.insert(key.to_owned(), value.to_owned());
        };
        set("interface", interface);
        set("path", interface);
        set("protocol", CONSUMER_PROTOCOL);
        for (key, value) in [
            ("version", version),
            ("group", group),
            ("dubbo.tag", tag.tag.as_deref()),
        ] {
            if let Some(value) = value.filter(|v| !v.is_empty()) {
                set(key, value);
            }
        }
        if tag.force {
            set("dubbo.force.tag", "true");
        }
        ConsumerIdentity {
            app: self.app.clone(),
            host: self.host.clone(),
            params,
        }
    }

    /// The embedder's own parameters of this identity: those the library does not set
    /// itself.
    pub fn own_params(&self) -> impl Iterator<Item = (&str, &str)> + '_ {
        self.params
            .iter()
            .filter(|(k, _)| !is_library_key(k))
            .map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// Whether the library sets `key` itself.
fn is_library_key(key: &str) -> bool {
    RESERVED_CONSUMER_KEYS.contains(&key)
}

/// Checks an embedder's consumer parameter: a key that is not empty, at most
/// [`MAX_CONSUMER_PARAM_KEY`] bytes, of no whitespace, control character, `&` or `=`
/// (which a URL could not carry), not reserved ([`RESERVED_CONSUMER_KEYS`])
/// and not one a rule reads from the call instead (`attachments...`, `arguments...`);
/// a value of at most [`MAX_CONSUMER_PARAM_VALUE`] bytes without control characters.
fn check_param(key: &str, value: &str) -> Result<()> {
    let refuse = |why: String| Err(Error::config(format!("consumer parameter {key:?}: {why}")));
    if key.is_empty() {
        return refuse("the key is empty".to_owned());
    }
    if key.len() > MAX_CONSUMER_PARAM_KEY {
        return refuse(format!(
            "the key is longer than {MAX_CONSUMER_PARAM_KEY} bytes"
        ));
    }
    if key
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == '&' || c == '=')
    {
        return refuse("the key holds whitespace, a control character, '&' or '='".to_owned());
    }
    if is_library_key(key) {
        return refuse(
            "the key is set by the library (from the resolver's application and host, or \
             the channel's subscription and options)"
                .to_owned(),
        );
    }
    if key.starts_with("attachments") || key.starts_with("arguments") {
        return refuse("rules read this key from the call, never from the consumer".to_owned());
    }
    if value.len() > MAX_CONSUMER_PARAM_VALUE {
        return refuse(format!(
            "the value is longer than {MAX_CONSUMER_PARAM_VALUE} bytes"
        ));
    }
    if value.chars().any(char::is_control) {
        return refuse("the value holds a control character".to_owned());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channel_carries_its_reference_over_the_resolver_identity() {
        let mut own = ConsumerIdentity::new(Some("shop".into()), Some("10.0.0.9".into()));
        own.set_param("region", "hz").unwrap();
        let extra = BTreeMap::from([("zone".to_owned(), "a".to_owned())]);
        let channel = own.with_params(&extra).unwrap().for_channel(
            "helloworld.Greeter",
            Some("1.0.0"),
            Some(""),
            &CallTag::new("gray", true),
        );
        let p = |k: &str| channel.params.get(k).map(String::as_str);
        assert_eq!(p("interface"), Some("helloworld.Greeter"));
        assert_eq!(p("path"), Some("helloworld.Greeter"));
        assert_eq!(p("version"), Some("1.0.0"));
        assert_eq!(p("group"), None, "an empty group is no group");
        assert_eq!(p("side"), Some("consumer"));
        assert_eq!(p("protocol"), Some("tri"));
        assert_eq!(p("application"), Some("shop"));
        assert_eq!(p("register.ip"), Some("10.0.0.9"));
        assert_eq!(p("dubbo.tag"), Some("gray"));
        assert_eq!(p("dubbo.force.tag"), Some("true"));
        assert_eq!(p("dubbo"), Some("2.0.2"));
        assert_eq!(p("region"), Some("hz"));
        assert_eq!(p("zone"), Some("a"));
        assert_eq!(
            channel.own_params().collect::<Vec<_>>(),
            [("region", "hz"), ("zone", "a")]
        );
        let untagged = own.for_channel("helloworld.Greeter", None, None, &CallTag::none());
        assert_eq!(untagged.params.get("dubbo.tag"), None);
        assert_eq!(untagged.params.get("dubbo.force.tag"), None);
    }

    #[test]
    fn bad_embedder_params_are_refused_with_why() {
        let mut own = ConsumerIdentity::new(None, Some("10.0.0.9".into()));
        let before = own.clone();
        for (key, value, why) in [
            ("", "x", "the key is empty"),
            ("interface", "x", "set by the library"),
            ("dubbo.tag", "gray", "set by the library"),
            ("methods", "a", "set by the library"),
            ("attachments[x]", "1", "from the call"),
            ("a b", "1", "whitespace"),
            ("a=b", "1", "'='"),
            ("k", "line\nbreak", "control character"),
        ] {
            let error = own.set_param(key, value).unwrap_err().to_string();
            assert!(error.contains(why), "{key:?}: {error}");
            assert!(error.contains("consumer parameter"), "{error}");
        }
        let long = "k".repeat(MAX_CONSUMER_PARAM_KEY + 1);
        assert!(own.set_param(&long, "v").is_err());
        let long = "v".repeat(MAX_CONSUMER_PARAM_VALUE + 1);
        assert!(own.set_param("k", &long).is_err());
        assert_eq!(own, before, "a refused parameter changes nothing");
        for i in 0..MAX_CONSUMER_PARAMS {
            own.set_param(&format!("k{i}"), "v").unwrap();
        }
        assert!(own.set_param("one-more", "v").is_err());
        own.set_param("k0", "replaced").unwrap();
        let bad = BTreeMap::from([("side".to_owned(), "provider".to_owned())]);
        assert!(own.with_params(&bad).is_err());
    }
}
