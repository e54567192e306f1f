//! The znode layout, as Dubbo Java 3.3 (`ZookeeperServiceDiscovery`,
//! `ZookeeperMetadataReport`) and dubbo-go 3.3 write it. Pure: no I/O.
//!
//! | path | what | node |
//! |---|---|---|
//! | `/services/{app}/{host}:{port}` | Curator `ServiceInstance` JSON | ephemeral; parents containers |
//! | `/dubbo/mapping/{interface}` | app names joined by `,` | persistent |
//! | `/dubbo/metadata/{app}/{revision}` | metadata info JSON (Dubbo Java) | persistent |
//! | `/dubbo/{app}/{revision}` | metadata info JSON (dubbo-go 3.3), read only | persistent |
//! | `/introspect/epoch` | the registry's epoch | persistent |
//! | `/introspect/consumers/{app}/{id}` | consumer record JSON (optional) | ephemeral; parents containers |
//! | `/dubbo/config/{group}/{key}` | a config item (a governance rule's text) | persistent; parents containers |
//! | `/dubbo/{interface}/providers/{url}` | an interface-level provider URL (both URL-encoded), the host as data | ephemeral; parents persistent |
//!
//! With a group `g`, Dubbo moves both roots to `/g`: instances under `/g/{app}/`, the
//! mapping under `/g/mapping/`, reports under `/g/metadata/`; the epoch goes to
//! `/g/introspect/epoch`, beside them, so that it shares the fate of the group's records.
//!
//! Config items live under `/{namespace}/config` (`TreePathDynamicConfiguration`): the
//! namespace is `dubbo`, or the registry's group (Java's registry-as-config-centre takes
//! the registry's group as the config centre's namespace), or the registry URL's
//! `namespace` parameter, which wins over both.

use crate::error::{Error, Result};

/// The roots of the layout. See the module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paths {
    /// Where app nodes live: `/services` or `/{group}`.
    instances: String,
    /// Where `mapping/` and `metadata/` live: `/dubbo` or `/{group}`.
    dubbo: String,
    /// The epoch znode.
    epoch: String,
    /// Where consumer records live.
    consumers: String,
    /// Where config items live: `/dubbo/config`.
    config: String,
}

impl Default for Paths {
    fn default() -> Self {
        Paths {
            instances: "/services".into(),
            dubbo: "/dubbo".into(),
            epoch: "/introspect/epoch".into(),
            consumers: "/introspect/consumers".into(),
            config: "/dubbo/config".into(),
        }
    }
}

/// Names under a group root that are not apps (Dubbo's own, and ours).
const NOT_APPS: [&str; 4] = ["mapping", "metadata", "introspect", "config"];

/// The children of an interface node (`/{group}/{interface}/…`, Dubbo's `ZookeeperRegistry`
/// categories): under a group root they sit where an app's instances would.
const CATEGORIES: [&str; 4] = ["providers", "consumers", "configurators", "routers"];

impl Paths {
    /// The layout under group `group` (`/dev` or `dev`).
    pub fn with_group(group: &str) -> Result<Self> {
        let name = segment("group", group)?;
        let root = format!("/{name}");
        Ok(Paths {
            epoch: format!("{root}/introspect/epoch"),
            consumers: format!("{root}/introspect/consumers"),
            config: format!("{root}/config"),
            instances: root.clone(),
            dubbo: root,
        })
    }

    /// The same layout with config items under `/{namespace}/config` (`dev` or `/dev`).
    pub fn with_config_namespace(mut self, namespace: &str) -> Result<Self> {
        self.config = format!("/{}/config", segment("namespace", namespace)?);
        Ok(self)
    }

    /// `/dubbo/config/{group}/{key}`: a config item.
    pub fn config(&self, group: &str, key: &str) -> String {
        format!("{}/{group}/{key}", self.config)
    }

    /// `/dubbo/config/{key}`: where some dubbo-admin versions write a rule, without its
    /// group, and no Dubbo member reads it.
    pub fn config_flat(&self, key: &str) -> String {
        format!("{}/{key}", self.config)
    }

    /// The node whose children are the apps: `/services`.
    pub fn instances_root(&self) -> &str {
        &self.instances
    }

    /// Whether a child of [`Self::instances_root`] may be an app (with a group, the root
    /// also holds `mapping`, `metadata` and `introspect`).
    pub fn is_app_node(&self, name: &str) -> bool {
        self.instances != self.dubbo || !NOT_APPS.contains(&name)
    }

    /// Whether a child of an app node is an interface node's category rather than an
    /// instance: with a group, interface nodes (`/{group}/{interface}/providers`) sit beside
    /// app nodes, and their categories are never `{host}:{port}`.
    pub fn is_interface_category(&self, child: &str) -> bool {
        self.instances == self.dubbo && CATEGORIES.contains(&child)
    }

    /// `/services/{app}`.
    pub fn app(&self, app: &str) -> String {
        format!("{}/{app}", self.instances)
    }

    /// `/services/{app}/{host}:{port}`.
    pub fn instance(&self, app: &str, address: &str) -> String {
        format!("{}/{app}/{address}", self.instances)
    }

    /// Where interface-level URLs go: `/dubbo`, or `/{group}` (Dubbo's `ZookeeperRegistry`
    /// root); see [`crate::model::ProviderUrl::zookeeper_node`].
    pub fn interface_root(&self) -> &str {
        &self.dubbo
    }

    /// `/dubbo/mapping/{interface}`.
    pub fn mapping(&self, interface: &str) -> String {
        format!("{}/mapping/{interface}", self.dubbo)
    }

    /// `/dubbo/metadata/{app}`: the reported revisions of `app`.
    pub fn reports(&self, app: &str) -> String {
        format!("{}/metadata/{app}", self.dubbo)
    }

    /// `/dubbo/metadata/{app}/{revision}`: where Dubbo Java (and this crate) reports.
    pub fn report(&self, app: &str, revision: &str) -> String {
        format!("{}/metadata/{app}/{revision}", self.dubbo)
    }

    /// `/dubbo/{app}/{revision}`: where dubbo-go 3.3 reports; read, never written.
    pub fn go_report(&self, app: &str, revision: &str) -> String {
        format!("{}/{app}/{revision}", self.dubbo)
    }

    /// `/introspect/epoch`.
    pub fn epoch(&self) -> &str {
        &self.epoch
    }

    /// `/introspect/consumers`: the node whose children are the consuming apps.
    pub fn consumers_root(&self) -> &str {
        &self.consumers
    }

    /// `/introspect/consumers/{app}`.
    pub fn consumer_app(&self, app: &str) -> String {
        format!("{}/{app}", self.consumers)
    }

    /// `/introspect/consumers/{app}/{id}`: one consumer's record.
    pub fn consumer(&self, app: &str, id: &str) -> String {
        format!("{}/{app}/{id}", self.consumers)
    }

    /// The `{host}:{port}` child name of a path under `app`'s node, if it is one.
    pub fn child_of<'a>(&self, app: &str, path: &'a str) -> Option<&'a str> {
        let rest = path
            .strip_prefix(self.instances.as_str())?
            .strip_prefix('/')?
            .strip_prefix(app)?
            .strip_prefix('/')?;
        (!rest.is_empty() && !rest.contains('/')).then_some(rest)
    }
}

/// A root's one path segment, `dev` from `dev` or `/dev`.
fn segment<'a>(kind: &'static str, value: &'a str) -> Result<&'a str> {
    let name = value.strip_prefix('/').unwrap_or(value);
    let valid = !name.is_empty()
        && name.len() <= 128
        && !name.contains('/')
        && name != "."
        && name != ".."
        && name != "zookeeper"
        && !name.chars().any(|c| c.is_control() || c.is_whitespace());
    if !valid {
        return Err(Error::InvalidName {
            kind,
            value: Error::shorten(value),
            reason: "must be one path segment, like dev or /dev, without whitespace",
        });
    }
    Ok(name)
}

/// The parent of `path` (`/a/b` → `/a`), `None` for a top-level node.
pub(super) fn parent(path: &str) -> Option<&str> {
    let (parent, _) = path.rsplit_once('/')?;
    (!parent.is_empty()).then_some(parent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_dubbo() {
        let p = Paths::default();
        assert_eq!(p.consumer("web", "x"), "/introspect/consumers/web/x");
        let g = Paths::with_group("dev").unwrap();
        assert_eq!(g.consumer("web", "x"), "/dev/introspect/consumers/web/x");
        assert!(!g.is_app_node("introspect"));
        assert_eq!(
            p.instance("shop", "10.0.0.7:20880"),
            "/services/shop/10.0.0.7:20880"
        );
        assert_eq!(
            p.mapping("shop.OrderService"),
            "/dubbo/mapping/shop.OrderService"
        );
        assert_eq!(p.report("shop", "abc"), "/dubbo/metadata/shop/abc");
        assert_eq!(p.go_report("shop", "abc"), "/dubbo/shop/abc");
        assert_eq!(p.epoch(), "/introspect/epoch");
        assert_eq!(p.child_of("shop", "/services/shop/h:1"), Some("h:1"));
        assert_eq!(p.child_of("shop", "/services/shop"), None);
        assert_eq!(p.child_of("shop", "/services/shopx/h:1"), None);
        assert_eq!(p.child_of("shop", "/services/shop/h:1/x"), None);
        assert!(p.is_app_node("mapping"));
        let g = Paths::with_group("dev").unwrap();
        assert_eq!(g, Paths::with_group("/dev").unwrap());
        assert_eq!(g.instance("shop", "h:1"), "/dev/shop/h:1");
        assert_eq!(g.mapping("i"), "/dev/mapping/i");
        assert_eq!(g.report("shop", "r"), "/dev/metadata/shop/r");
        assert_eq!(g.epoch(), "/dev/introspect/epoch");
        assert!(!g.is_app_node("mapping") && !g.is_app_node("introspect"));
        for bad in ["", "/", "a/b", "..", "a b", "zookeeper"] {
            assert!(Paths::with_group(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            p.config("dubbo", "shop.tag-router"),
            "/dubbo/config/dubbo/shop.tag-router"
        );
        assert_eq!(g.config("dubbo", "k"), "/dev/config/dubbo/k");
        assert!(!g.is_app_node("config"));
        assert!(g.is_interface_category("providers") && g.is_interface_category("routers"));
        assert!(!g.is_interface_category("10.0.0.1:50051"));
        assert!(
            !p.is_interface_category("providers"),
            "no group: apps live apart"
        );
        let ns = g.clone().with_config_namespace("prod").unwrap();
        assert_eq!(ns.config("dubbo", "k"), "/prod/config/dubbo/k");
        assert_eq!(ns.mapping("i"), "/dev/mapping/i");
        assert!(p.clone().with_config_namespace("a/b").is_err());
        assert_eq!(parent("/a/b"), Some("/a"));
        assert_eq!(parent("/a"), None);
    }
}
