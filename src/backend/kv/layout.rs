//! The store key layout (Dubbo 3 compatible), behind an optional namespace prefix.
//!
//! | key | value |
//! |---|---|
//! | `/services/{app}/{host}:{port}` | instance JSON, bound to the instance's lease |
//! | `/dubbo/mapping/{interface}` | app names joined by `,` |
//! | `/dubbo/metadata/{app}/{revision}` | metadata info JSON (storage type `remote`) |
//! | `/introspect/consumers/{app}/{id}` | consumer record JSON (optional), bound to the consumer's lease |
//! | `/dubbo/config/{group}/{key}` | a config item: a governance rule's text (Dubbo's etcd config centre) |
//!
//! Prefixes that are listed or watched always end in `/`, so app `a` never matches app `ab`.

use crate::error::{Error, Result};

/// Builds keys under an optional namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Layout {
    namespace: String,
}

impl Layout {
    /// The layout under `namespace` (empty for none). The namespace must start with `/` and
    /// not end with one, e.g. `/staging`.
    pub fn new(namespace: impl Into<String>) -> Result<Self> {
        let namespace = namespace.into();
        let valid = namespace.is_empty()
            || (namespace.starts_with('/')
                && !namespace.ends_with('/')
                && !namespace.contains("//")
                && namespace.len() <= 256
                && !namespace
                    .chars()
                    .any(|c| c.is_control() || c.is_whitespace()));
        if !valid {
            return Err(Error::InvalidName {
                kind: "namespace",
                value: Error::shorten(&namespace),
                reason: "must be empty or like /name, without whitespace or a trailing /",
            });
        }
        Ok(Layout { namespace })
    }

    /// `/services/`: every instance of every app.
    pub fn services_prefix(&self) -> String {
        format!("{}/services/", self.namespace)
    }

    /// `/services/{app}/`: every instance of one app.
    pub fn app_prefix(&self, app: &str) -> String {
        format!("{}/services/{app}/", self.namespace)
    }

    /// `/services/{app}/{host}:{port}`.
    pub fn instance_key(&self, app: &str, host: &str, port: u16) -> String {
        format!("{}/services/{app}/{host}:{port}", self.namespace)
    }

    /// The app name of a key under [`Self::services_prefix`], if it is one.
    pub fn app_of_instance_key<'a>(&self, key: &'a str) -> Option<&'a str> {
        let rest = key
            .strip_prefix(&self.namespace)?
            .strip_prefix("/services/")?;
        let (app, address) = rest.split_once('/')?;
        (!app.is_empty() && !address.is_empty() && !address.contains('/')).then_some(app)
    }

    /// `{ns}/dubbo/{URL-encoded interface}/providers/`: an interface's provider URLs, one
    /// key each, where dubbo-go's etcd registry writes them (see `kv/interfaces.rs`).
    pub fn interface_providers_prefix(&self, interface: &str) -> String {
        format!(
            "{}/dubbo/{}/providers/",
            self.namespace,
            crate::model::provider_url::form_encode(interface)
        )
    }

    /// `/dubbo/mapping/`: every interface's mapping.
    pub fn mapping_prefix(&self) -> String {
        format!("{}/dubbo/mapping/", self.namespace)
    }

    /// `/dubbo/mapping/{interface}`.
    pub fn mapping_key(&self, interface: &str) -> String {
        format!("{}/dubbo/mapping/{interface}", self.namespace)
    }

    /// `/introspect/epoch`: the registry's epoch, a random id providers create when it is
    /// absent; its change or disappearance means the store was wiped or replaced.
    pub fn epoch_key(&self) -> String {
        format!("{}/introspect/epoch", self.namespace)
    }

    /// `/introspect/consumers/`: every consumer record, apart from the instances.
    pub fn consumers_prefix(&self) -> String {
        format!("{}/introspect/consumers/", self.namespace)
    }

    /// `/introspect/consumers/{app}/{id}`: one consumer's record.
    pub fn consumer_key(&self, app: &str, id: &str) -> String {
        format!("{}/introspect/consumers/{app}/{id}", self.namespace)
    }

    /// `/dubbo/config/{group}/{key}`: a config item, where Dubbo's etcd config centre
    /// (`EtcdDynamicConfiguration`, namespace `dubbo`) keeps it.
    pub fn config_key(&self, group: &str, key: &str) -> String {
        format!("{}/dubbo/config/{group}/{key}", self.namespace)
    }

    /// `/dubbo/metadata/{app}/`: every reported revision of one app.
    pub fn report_prefix(&self, app: &str) -> String {
        format!("{}/dubbo/metadata/{app}/", self.namespace)
    }

    /// `/dubbo/metadata/{app}/{revision}`.
    pub fn report_key(&self, app: &str, revision: &str) -> String {
        format!("{}/dubbo/metadata/{app}/{revision}", self.namespace)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_dubbo_layout() {
        let l = Layout::default();
        assert_eq!(
            l.instance_key("shop", "10.0.0.7", 50051),
            "/services/shop/10.0.0.7:50051"
        );
        assert_eq!(l.app_prefix("a"), "/services/a/");
        assert_eq!(
            l.mapping_key("shop.OrderService"),
            "/dubbo/mapping/shop.OrderService"
        );
        assert_eq!(l.report_key("shop", "abc"), "/dubbo/metadata/shop/abc");
        assert_eq!(
            l.config_key("dubbo", "shop.tag-router"),
            "/dubbo/config/dubbo/shop.tag-router"
        );
        assert_eq!(l.consumer_key("web", "x1"), "/introspect/consumers/web/x1");
        assert!(
            !l.consumer_key("web", "x1")
                .starts_with(&l.services_prefix())
        );
        assert_eq!(l.app_of_instance_key("/services/shop/h:1"), Some("shop"));
        assert_eq!(l.app_of_instance_key("/services/shop/x/y"), None);
        let ns = Layout::new("/staging").unwrap();
        assert_eq!(ns.app_prefix("a"), "/staging/services/a/");
        assert_eq!(ns.app_of_instance_key("/staging/services/a/h:1"), Some("a"));
        assert!(Layout::new("staging").is_err());
        assert!(Layout::new("/a/").is_err());
    }
}
